"""QMIA's tabular data: Grinsztajn et al.'s OpenML tasks and the ACS tasks of folktables.

**OpenML** (tasks 361057, 361064, 361067, 361070): one CSV per task at
``<root>/openml/task-<id>.csv``, the features followed by a ``target`` column, as
:func:`write_openml_csv` writes it. With ``download`` the task's dataset is fetched through
scikit-learn's ``fetch_openml`` (the task's dataset id and target come from the OpenML API) and
written there once. OpenML publishes no file checksum: the CSV is trusted on first use and
verified on every later one.

**ACS** (Ding et al. 2021; QMIA uses New York, 2018, 1-year): folktables' person survey file
under ``<root>/acs/``, turned into one of its four prediction tasks by folktables' own
definitions, so features and labels are exactly the benchmark's.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Literal

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.data.download import DatasetUnavailable, require_file

OPENML_TASK_URL = "https://www.openml.org/api/v1/json/task/{task}"
ACS_TASKS = {"coverage": "ACSPublicCoverage", "income": "ACSIncome",
             "travel": "ACSTravelTime", "mobility": "ACSMobility"}


def write_openml_csv(path: Path, X: np.ndarray, y: np.ndarray, columns: list[str]) -> None:
    """The CSV :func:`openml_task` reads: feature columns, then ``target``."""
    import pandas as pd

    from miarepro.io import atomic_path

    frame = pd.DataFrame(X, columns=columns).assign(target=y)
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def _download_openml(task: int, path: Path) -> None:
    from sklearn.datasets import fetch_openml

    with urllib.request.urlopen(OPENML_TASK_URL.format(task=task), timeout=60) as response:
        description = json.load(response)["task"]["input"]
    source = next(item["data_set"] for item in description if "data_set" in item)
    bunch = fetch_openml(data_id=int(source["data_set_id"]), target_column=source[
        "target_feature"], as_frame=True, data_home=str(path.parent / "cache"))
    features = bunch.data.apply(lambda column: column.cat.codes if column.dtype == "category"
                                else column)
    write_openml_csv(path, features.to_numpy(np.float32), bunch.target.to_numpy(),
                     list(features.columns))


def openml_task(root: Path, task: int, download: bool = False) -> Dataset:
    """One OpenML classification task as float32 features and integer labels (the target's
    distinct values in sorted order)."""
    import pandas as pd

    path = Path(root) / "openml" / f"task-{task}.csv"
    how = (f"run with download: true on a machine with internet, or export OpenML task "
           f"{task}'s dataset as CSV (features, then a 'target' column) to {path}")
    if download and not path.exists():
        try:
            _download_openml(task, path)
        except OSError as error:  # no network, a timeout, an HTTP error
            raise DatasetUnavailable(f"could not download OpenML task {task} ({error}): {how}"
                                     ) from error
    require_file(path, how_to_get=how)
    frame = pd.read_csv(path)
    if "target" not in frame.columns:
        raise ValueError(f"{path}: no 'target' column; columns are {list(frame.columns)}")
    classes, y = np.unique(frame.pop("target").to_numpy(), return_inverse=True)
    X = frame.to_numpy(np.float32)
    if np.isnan(X).any():
        raise ValueError(f"{path}: missing feature values; QMIA's tasks have none")
    return Dataset(X=X, y=y.astype(np.int64), n_classes=len(classes), input_shape=X.shape[1:],
                   name=f"openml_{task}",
                   meta={"source": "openml_task", "task": task, "columns": list(frame.columns),
                         "class_names": [str(c) for c in classes],
                         "citation": "Grinsztajn, Oyallon & Varoquaux 2022 (OpenML suite)",
                         "license": "see the OpenML dataset page"})


def acs(root: Path, task: Literal["coverage", "income", "travel", "mobility"],
        state: str = "NY", year: int = 2018, download: bool = False) -> Dataset:
    """One folktables ACS task for one state and survey year (1-year person survey)."""
    folder = Path(root) / "acs"
    try:
        import folktables
    except ImportError:
        raise DatasetUnavailable("the ACS tasks are built by folktables, which is not installed:"
                                 " pip install folktables") from None
    source = folktables.ACSDataSource(survey_year=str(year), horizon="1-Year",
                                      survey="person", root_dir=str(folder))
    try:
        frame = source.get_data(states=[state], download=download)
    except (FileNotFoundError, OSError) as error:
        how = ("copy folktables' data folder there" if download else
               "run with download: true on a machine with internet, or copy folktables' "
               "data folder there")
        raise DatasetUnavailable(
            f"ACS {year} 1-year person survey of {state} "
            + ("could not be downloaded" if download else "not found")
            + f" under {folder} ({error}); {how}") from None
    X, y, _ = getattr(folktables, ACS_TASKS[task]).df_to_numpy(frame)
    return Dataset(X=X.astype(np.float32), y=y.astype(np.int64), n_classes=2,
                   input_shape=X.shape[1:], name=f"acs_{state.lower()}_{task}",
                   meta={"source": "acs", "task": task, "state": state, "year": year,
                         "citation": "Ding, Hardt, Miller & Schmidt 2021 (folktables)",
                         "license": "US Census Bureau ACS PUMS terms"})
