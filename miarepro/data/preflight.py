"""Before any job starts: which real datasets are not on disk, reported for all studies at once.

Without this, a paper config on a cluster learns of a missing archive one dataset job at a time,
each after its queue wait. The check looks only for the files or folders each loader reads
(never loads or verifies them: the dataset job does that, with checksums) and says, for every
absent dataset, where to put what and which studies need it. Datasets whose spec allows
``download: true`` are listed as downloads to come rather than as errors.

Run it by hand before submitting: ``python -m miarepro.data.preflight config/papers/bmia.yaml``.
The workflow runs it too, once, before its first job.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miarepro.data import cinic, imagenet, tabular_archives, uci

#: MNIST-style sets: torchvision reads the decompressed images file (or decompresses the .gz
#: it finds when ``download`` is set)
_IDX = "train-images-idx3-ubyte"


def _uci(table: uci.Table) -> Callable[..., list[tuple[str, ...]]]:
    return lambda **_: [(f"{table.name}/{file}",) for file in table.files]


def _archive(archive: tabular_archives.Archive) -> Callable[..., list[tuple[str, ...]]]:
    """The archive, or every member extracted."""
    folder = archive.name
    return lambda **_: [(f"{folder}/{archive.filename}", f"{folder}/{member}")
                        for member in archive.members]


#: Per real source, what it reads under the data directory: a list of requirements, each a
#: tuple of alternatives (any one present will do).
LOCATIONS: dict[str, Callable[..., list[tuple[str, ...]]]] = {
    "cifar10": lambda **_: [("cifar10/cifar-10-batches-py", "cifar10/cifar-10-python.tar.gz")],
    "cifar100": lambda **_: [("cifar100/cifar-100-python", "cifar100/cifar-100-python.tar.gz")],
    "mnist": lambda **_: [(f"mnist/MNIST/raw/{_IDX}", f"mnist/MNIST/raw/{_IDX}.gz")],
    "fashion_mnist": lambda **_: [(f"fashion_mnist/FashionMNIST/raw/{_IDX}",
                                   f"fashion_mnist/FashionMNIST/raw/{_IDX}.gz")],
    "svhn": lambda extra=False, **_: [(f"svhn/{part}_32x32.mat",)
                                      for part in ("train", "test", *(("extra",) * extra))],
    "purchase100": _archive(tabular_archives.PURCHASE100),
    "texas100": _archive(tabular_archives.TEXAS100),
    "cinic10": lambda part="test", **_: [(f"cinic10/{part}", f"cinic10/{cinic.ARCHIVE}")],
    "imagenet": lambda part="train", **_: [
        (f"imagenet/{part}", f"imagenet/{archive}")
        for archive in (imagenet.ARCHIVES[part], imagenet.DEVKIT)],
    "openml_task": lambda task, **_: [(f"openml/task-{task}.csv",)],
    "acs": lambda year=2018, **_: [(f"acs/{year}/1-Year",)],
    "adult": _uci(uci.ADULT),
    "pima": _uci(uci.PIMA),
    "hepatitis": _uci(uci.HEPATITIS),
    "german_credit": _uci(uci.GERMAN_CREDIT),
    "lfw": lambda **_: [("lfw/lfw_home",)],
}


@dataclass(frozen=True)
class Absent:
    """A dataset (or its out-of-distribution part) some of whose files are not on disk."""

    dataset: str
    source: str
    missing: tuple[tuple[Path, ...], ...]  # requirements with no alternative present
    download: bool
    studies: tuple[str, ...]

    def describe(self) -> str:
        paths = "; ".join(" or ".join(map(str, alternatives)) for alternatives in self.missing)
        return (f"- {self.dataset} (source {self.source}, for {', '.join(self.studies)}): "
                f"{paths}")


def _absent_parts(name: str, spec: Mapping[str, Any], root: Path,
                  studies: tuple[str, ...]) -> Iterable[Absent]:
    options = {key: value for key, value in spec.items() if key not in ("source", "ood")}
    locate = LOCATIONS.get(spec["source"])
    if locate is not None:  # embedded and generated sources need no files
        required = [tuple(root / path for path in alternatives)
                    for alternatives in locate(**options)]
        missing = tuple(paths for paths in required if not any(map(Path.exists, paths)))
        if missing:
            yield Absent(name, spec["source"], missing, bool(spec.get("download")), studies)
    if isinstance(spec.get("ood"), Mapping):
        yield from _absent_parts(f"{name} (ood)", spec["ood"], root, studies)


def absent(config: Mapping[str, Any], datasets: Iterable[str] | None = None) -> list[Absent]:
    """The datasets among ``datasets`` (default: every dataset a study uses) whose files are
    not under the (validated) config's ``data_dir``."""
    root = Path(config["data_dir"])
    users: dict[str, list[str]] = {}
    for study_name, study in config["studies"].items():
        if "dataset" in study:
            users.setdefault(study["dataset"], []).append(study_name)
    wanted = sorted(users if datasets is None else datasets)
    return [part for name in wanted
            for part in _absent_parts(name, config["datasets"][name], root,
                                      tuple(users.get(name, ())))]


def report(found: list[Absent]) -> tuple[str, bool]:
    """A message listing every absent dataset, and whether the run must stop (some absent
    dataset may not be downloaded)."""
    blocking = [entry for entry in found if not entry.download]
    downloads = [entry for entry in found if entry.download]
    lines = []
    if blocking:
        lines += [f"{len(blocking)} dataset(s) are not on disk and their specs do not allow "
                  "`download: true`. Put these files or folders in place, or set "
                  "`download: true` in the dataset's spec (config/README.md names each "
                  "source's origin):",
                  *(entry.describe() for entry in blocking)]
    if downloads:
        lines += [f"{len(downloads)} dataset(s) will be downloaded by their dataset jobs, which "
                  "run on the machine that runs Snakemake (it needs internet):",
                  *(entry.describe() for entry in downloads)]
    return "\n".join(lines), bool(blocking)


def main(argv: list[str]) -> int:
    """``python -m miarepro.data.preflight CONFIG.yaml``: exit 1 if a run would stop."""
    from miarepro import config as config_module
    from miarepro.schema import read_file

    if len(argv) != 1:
        print(__doc__.strip().splitlines()[0], "\nusage: python -m miarepro.data.preflight "
              "CONFIG.yaml", file=sys.stderr)
        return 2
    try:
        config = read_file(argv[0])
        config_module.validate(config)
    except config_module.ConfigError as error:
        print(error, file=sys.stderr)
        return 2
    message, blocking = report(absent(config))
    print(message or f"every dataset of {argv[0]} is under {config['data_dir']}/")
    return int(blocking)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
