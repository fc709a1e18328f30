"""Purchase100 and Texas100 from the archives that Shokri et al. (2017) published.

These two ``.tgz`` files are what membership-inference papers (and privacy-meter) use, so
results stay comparable across papers. Formats:

* ``dataset_purchase.tgz`` holds one file, ``dataset_purchase``: comma-separated rows of a label
  1..100 followed by 600 binary features (197,324 rows).
* ``dataset_texas.tgz`` holds ``texas/100/feats`` (comma-separated binary features, 6,169 per
  row, 67,330 rows) and ``texas/100/labels`` (one label 1..100 per line).

The loaders read the members straight out of the archive (no extraction step to go stale), or
from already-extracted files if a user has those instead. Labels are shifted to 0..99.
"""

from __future__ import annotations

import contextlib
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.data.download import DatasetUnavailable, fetch, locked, require_file, sha256_of

N_CLASSES = 100


@dataclass(frozen=True)
class Archive:
    """Where an archive lives (``<root>/<name>/<filename>``), where to get it, what it holds."""

    name: str
    filename: str
    urls: tuple[str, ...]
    sha256: str | None
    members: tuple[str, ...]
    citation: str
    license: str


# The SHA-256 digests of the two archives could not be confirmed from any source available
# when this was written, so they are None: any file is accepted and its digest is recorded in
# the dataset's meta (and logged on download) so it can be pinned here later.
PURCHASE100 = Archive(
    name="purchase100",
    filename="dataset_purchase.tgz",
    urls=("https://www.comp.nus.edu.sg/~reza/files/dataset_purchase.tgz",
          "https://github.com/privacytrustlab/datasets/raw/master/dataset_purchase.tgz"),
    sha256=None,
    members=("dataset_purchase",),
    citation="Shokri, Stronati, Song & Shmatikov 2017; Kaggle 'Acquire Valued Shoppers "
             "Challenge' 2014 purchase histories, 600 items, clustered into 100 classes",
    license="derived from Kaggle competition data; research use under the competition rules",
)
TEXAS100 = Archive(
    name="texas100",
    filename="dataset_texas.tgz",
    urls=("https://www.comp.nus.edu.sg/~reza/files/dataset_texas.tgz",
          "https://github.com/privacytrustlab/datasets/raw/master/dataset_texas.tgz"),
    sha256=None,
    members=("texas/100/feats", "texas/100/labels"),
    citation="Shokri, Stronati, Song & Shmatikov 2017; Texas Department of State Health "
             "Services, Hospital Discharge Public Use Data File 2006, 100 most frequent "
             "procedures",
    license="derived from the Texas DSHS public use data file; subject to its data use "
            "agreement",
)


def _how_to_get(archive: Archive, folder: Path) -> str:
    return (f"download {' or '.join(archive.urls)} to {folder / archive.filename} "
            f"(or set `download: true` in the dataset spec); extracted members "
            f"{', '.join(str(folder / member) for member in archive.members)} are accepted too")


def _archive_path(archive: Archive, folder: Path, download: bool) -> Path:
    """The archive on disk, downloaded first if allowed; DatasetUnavailable otherwise."""
    path = folder / archive.filename
    how = _how_to_get(archive, folder)
    with locked(folder):  # two datasets of one source: one job downloads, the other waits
        if not path.is_file() and download:
            failures = []
            for url in archive.urls:
                try:
                    fetch(url, path, archive.sha256, archive=True)
                    break
                except OSError as error:  # network failure: try the next mirror
                    failures.append(f"  {url}: {error}")
            else:
                raise DatasetUnavailable(f"could not download {path}:\n"
                                         + "\n".join(failures) + f"\n  how to get it: {how}")
    return require_file(path, archive.sha256, how, archive=True)


@contextlib.contextmanager
def open_members(archive: Archive, root: Path,
                 download: bool = False) -> Iterator[tuple[dict[str, IO[bytes]], dict]]:
    """Yield binary handles to the archive's members, and provenance facts for ``meta``."""
    folder = Path(root) / archive.name
    extracted = [folder / member for member in archive.members]
    with contextlib.ExitStack() as stack:
        if all(path.is_file() for path in extracted):
            handles = {member: stack.enter_context(open(path, "rb"))
                       for member, path in zip(archive.members, extracted, strict=True)}
            yield handles, {"read_from": "extracted files"}
            return
        path = _archive_path(archive, folder, download)
        tar = stack.enter_context(tarfile.open(path, "r:*"))
        found = {info.name.removeprefix("./"): info for info in tar.getmembers() if info.isfile()}
        missing = [member for member in archive.members if member not in found]
        if missing:
            raise ValueError(f"{path} does not contain {missing}; it holds {sorted(found)[:10]}")
        handles = {member: stack.enter_context(tar.extractfile(found[member]))
                   for member in archive.members}
        yield handles, {"read_from": archive.filename, "archive_sha256": sha256_of(path)}


def _read_table(handle: IO[bytes], what: str) -> np.ndarray:
    """Parse a headerless comma-separated numeric file (pandas' C parser: seconds, not minutes)."""
    import pandas as pd

    table = pd.read_csv(handle, header=None, dtype=np.float32, engine="c").to_numpy()
    if table.size == 0:
        raise ValueError(f"{what} is empty")
    return table


def _labels(values: np.ndarray, what: str) -> np.ndarray:
    """1-based labels 1..100 → int64 0..99, refusing anything else rather than guessing."""
    labels = values.astype(np.int64)
    if not np.array_equal(labels, values) or labels.min() < 1 or labels.max() > N_CLASSES:
        raise ValueError(f"{what}: labels must be integers in 1..{N_CLASSES}, got range "
                         f"{values.min()}..{values.max()}")
    return labels - 1


def parse_purchase(handle: IO[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``label,f1,...,f600`` rows → (float32 features, int64 labels 0..99)."""
    table = _read_table(handle, "dataset_purchase")
    return np.ascontiguousarray(table[:, 1:]), _labels(table[:, 0], "dataset_purchase")


def parse_texas(features: IO[bytes], labels: IO[bytes]) -> tuple[np.ndarray, np.ndarray]:
    """``texas/100/feats`` and ``texas/100/labels`` → (float32 features, int64 labels 0..99)."""
    X = _read_table(features, "texas/100/feats")
    y = _labels(_read_table(labels, "texas/100/labels")[:, 0], "texas/100/labels")
    if len(X) != len(y):
        raise ValueError(f"texas/100/feats has {len(X)} rows but texas/100/labels {len(y)}")
    return X, y


def _dataset(archive: Archive, X: np.ndarray, y: np.ndarray, provenance: dict) -> Dataset:
    return Dataset(
        X=X, y=y, n_classes=N_CLASSES, input_shape=(X.shape[1],), name=archive.name,
        meta={"source": archive.name, "citation": archive.citation, "license": archive.license,
              "urls": list(archive.urls), "preprocessing": "binary features as float32; "
              "labels shifted from 1..100 to 0..99", **provenance},
    )


def purchase100(root: Path, download: bool = False) -> Dataset:
    """Purchase100 from ``<root>/purchase100/dataset_purchase.tgz`` (or its extracted file)."""
    with open_members(PURCHASE100, root, download) as (handles, provenance):
        X, y = parse_purchase(handles["dataset_purchase"])
    return _dataset(PURCHASE100, X, y, provenance)


def texas100(root: Path, download: bool = False) -> Dataset:
    """Texas100 from ``<root>/texas100/dataset_texas.tgz`` (or ``texas/100/*`` extracted)."""
    with open_members(TEXAS100, root, download) as (handles, provenance):
        X, y = parse_texas(handles["texas/100/feats"], handles["texas/100/labels"])
    return _dataset(TEXAS100, X, y, provenance)
