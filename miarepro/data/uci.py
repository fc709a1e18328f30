"""Stolen Memories' UCI tables: Adult, Pima Indians Diabetes, Hepatitis and German Credit.

Each is read from its original UCI file under ``<root>/<name>/`` (downloaded there only when
the spec says ``download: true``). UCI publishes no checksums, so a file is trusted on first
use and verified against that record afterwards (:func:`miarepro.data.download.require_file`).

The papers do not state their encoding (matrix §2.3), so one encoding serves all four, each
choice listed in the dataset's ``meta``: categorical columns one-hot (a missing value ``?``
is a category of its own), numeric columns with missing values imputed by the column median
plus a 0/1 "was missing" column, and every numeric column z-scored with whole-dataset
statistics (as :func:`miarepro.data.embedded.breast_cancer`: the stored arrays stay
independent of any split, and one mean and standard deviation per column leak nothing that
matters for membership inference). Labels: the positive class of each task is 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.data.download import DatasetUnavailable, fetch, require_file

UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
LICENSE = "CC BY 4.0 (UCI Machine Learning Repository)"


@dataclass(frozen=True)
class Table:
    """One UCI file: where it comes from and how its columns read."""

    name: str
    files: tuple[str, ...]
    urls: tuple[str, ...]
    columns: tuple[str, ...]      # every column of the file, the label included
    label: str
    positive: tuple[str, ...]     # label values of class 1 (after stripping a trailing '.')
    categorical: tuple[str, ...]
    separator: str | None         # None: runs of whitespace
    citation: str


ADULT = Table(
    name="adult", files=("adult.data", "adult.test"),
    urls=(f"{UCI}/adult/adult.data", f"{UCI}/adult/adult.test"),
    columns=("age", "workclass", "fnlwgt", "education", "education_num", "marital_status",
             "occupation", "relationship", "race", "sex", "capital_gain", "capital_loss",
             "hours_per_week", "native_country", "income"),
    label="income", positive=(">50K",),
    categorical=("workclass", "education", "marital_status", "occupation", "relationship",
                 "race", "sex", "native_country"),
    separator=",",  # adult.test opens with a "|1x3 Cross validator" line: skipped as a comment
    citation="Kohavi 1996; Becker & Kohavi, UCI Adult (1994 census extract)")
PIMA = Table(
    name="pima", files=("pima-indians-diabetes.data.csv",),
    urls=("https://raw.githubusercontent.com/jbrownlee/Datasets/master/"
          "pima-indians-diabetes.data.csv",),
    columns=("pregnancies", "glucose", "blood_pressure", "skin_thickness", "insulin", "bmi",
             "pedigree", "age", "diabetic"),
    label="diabetic", positive=("1",), categorical=(), separator=",",
    citation="Smith et al. 1988, Pima Indians Diabetes (National Institute of Diabetes and "
             "Digestive and Kidney Diseases; formerly in the UCI repository)")
HEPATITIS = Table(
    name="hepatitis", files=("hepatitis.data",), urls=(f"{UCI}/hepatitis/hepatitis.data",),
    columns=("class", "age", "sex", "steroid", "antivirals", "fatigue", "malaise", "anorexia",
             "liver_big", "liver_firm", "spleen_palpable", "spiders", "ascites", "varices",
             "bilirubin", "alk_phosphate", "sgot", "albumin", "protime", "histology"),
    label="class", positive=("1",),  # 1 = died, 2 = lived
    categorical=("sex", "steroid", "antivirals", "fatigue", "malaise", "anorexia", "liver_big",
                 "liver_firm", "spleen_palpable", "spiders", "ascites", "varices",
                 "histology"),
    separator=",", citation="Diaconis & Efron 1983; Cestnik et al. 1987, UCI Hepatitis")
GERMAN_CREDIT = Table(
    name="german_credit", files=("german.data",),
    urls=(f"{UCI}/statlog/german/german.data",),
    columns=("checking", "duration", "history", "purpose", "amount", "savings", "employment",
             "installment_rate", "personal_status", "debtors", "residence", "property", "age",
             "installment_plans", "housing", "credits", "job", "dependents", "telephone",
             "foreign_worker", "risk"),
    label="risk", positive=("2",),  # 1 = good, 2 = bad credit risk
    categorical=("checking", "history", "purpose", "savings", "employment", "personal_status",
                 "debtors", "property", "installment_plans", "housing", "job", "telephone",
                 "foreign_worker"),
    separator=None, citation="Hofmann 1994, UCI Statlog (German Credit Data)")
TABLES = {table.name: table for table in (ADULT, PIMA, HEPATITIS, GERMAN_CREDIT)}


def _path(table: Table, root: Path, file: str, url: str, download: bool) -> Path:
    path = Path(root) / table.name / file
    if download and not path.is_file():
        try:
            fetch(url, path, None)
        except OSError as error:
            raise DatasetUnavailable(f"could not download {url} to {path}: {error}") from None
    return require_file(path, how_to_get=f"download {url} to {path} (or set `download: true` "
                                         f"in the dataset spec)")


def _rows(table: Table, path: Path) -> list[list[str]]:
    """The file's records as fields; blank lines and ``|`` comment lines are skipped."""
    rows = []
    for number, line in enumerate(path.read_text().splitlines()):
        if not line.strip() or line.startswith("|"):
            continue
        fields = [f.strip() for f in (line.split(table.separator) if table.separator
                                      else line.split())]
        if len(fields) != len(table.columns):
            raise ValueError(f"{path}, line {number + 1}: {len(fields)} fields, expected "
                             f"{len(table.columns)} ({', '.join(table.columns)})")
        rows.append(fields)
    return rows


def encode(table: Table, rows: Sequence[Sequence[str]]) -> tuple[np.ndarray, np.ndarray,
                                                                  list[str]]:
    """Features, labels and feature names of ``rows`` (the module docstring's encoding)."""
    values = np.array(rows, dtype=object)
    where = {name: i for i, name in enumerate(table.columns)}
    label = np.array([v.rstrip(".") for v in values[:, where[table.label]]])
    y = np.isin(label, table.positive).astype(np.int64)
    blocks, names = [], []
    for name in table.columns:
        if name == table.label:
            continue
        column = values[:, where[name]].astype(str)
        if name in table.categorical:
            levels = sorted(set(column))
            blocks.append(np.stack([column == level for level in levels], axis=1))
            names += [f"{name}={level}" for level in levels]
            continue
        missing = column == "?"
        numbers = np.where(missing, "nan", column).astype(np.float64)
        numbers[missing] = np.median(numbers[~missing]) if (~missing).any() else 0.0
        blocks.append(_zscore(numbers)[:, None])
        names.append(name)
        if missing.any():
            blocks.append(missing[:, None])
            names.append(f"{name} missing")
    return np.concatenate(blocks, axis=1).astype(np.float32), y, names


def _zscore(values: np.ndarray) -> np.ndarray:
    spread = values.std()
    return (values - values.mean()) / (spread if spread > 0 else 1.0)


def load_table(table: Table, root: Path, download: bool = False) -> Dataset:
    rows = [row for file, url in zip(table.files, table.urls, strict=True)
            for row in _rows(table, _path(table, root, file, url, download))]
    X, y, names = encode(table, rows)
    return Dataset(X=X, y=y, n_classes=2, input_shape=(X.shape[1],), name=table.name,
                   meta={"source": table.name, "files": list(table.files), "features": names,
                         "positive_class": list(table.positive), "citation": table.citation,
                         "license": LICENSE, "preprocessing":
                             "categorical columns one-hot ('?' a category of its own); numeric "
                             "columns median-imputed with a missing flag, z-scored with "
                             "whole-dataset statistics"})


def adult(root: Path, download: bool = False) -> Dataset:
    """UCI Adult: adult.data and adult.test together (48,842 records), income > 50K = 1."""
    return load_table(ADULT, root, download)


def pima(root: Path, download: bool = False) -> Dataset:
    """Pima Indians Diabetes: 768 records, 8 numeric features, diabetic = 1."""
    return load_table(PIMA, root, download)


def hepatitis(root: Path, download: bool = False) -> Dataset:
    """UCI Hepatitis: 155 records with missing values, died = 1."""
    return load_table(HEPATITIS, root, download)


def german_credit(root: Path, download: bool = False) -> Dataset:
    """UCI Statlog German Credit: 1,000 records, bad credit risk = 1."""
    return load_table(GERMAN_CREDIT, root, download)
