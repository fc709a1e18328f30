"""Before any job starts: which real datasets (and pretrained weight files) are not on disk,
reported for all studies at once.

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

#: MNIST-style sets: torchvision reads the four decompressed files (and decompresses the .gz
#: files it finds only when ``download`` is set)
_IDX = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
        "t10k-labels-idx1-ubyte")


def _torchvision(folder: str, archive: str | None = None
                 ) -> Callable[..., list[tuple[str, ...]]]:
    """A torchvision set: CIFAR's extracted folder (``archive`` also does, but only where
    ``download`` is set: torchvision then checks its md5 and extracts it without network), or
    MNIST's four files under ``folder`` (their .gz likewise)."""
    def locate(download: bool = False, **_: Any) -> list[tuple[str, ...]]:
        if archive is not None:
            return [(folder, *((str(Path(folder).parent / archive),) * download))]
        return [(f"{folder}/{name}", *((f"{folder}/{name}.gz",) * download)) for name in _IDX]

    return locate


#: the states' FIPS codes in the ACS file names folktables reads (its ``_STATE_CODES``)
_ACS_STATES = {
    "AL": "01", "AK": "02", "AZ": "04", "AR": "05", "CA": "06", "CO": "08", "CT": "09",
    "DE": "10", "FL": "12", "GA": "13", "HI": "15", "ID": "16", "IL": "17", "IN": "18",
    "IA": "19", "KS": "20", "KY": "21", "LA": "22", "ME": "23", "MD": "24", "MA": "25",
    "MI": "26", "MN": "27", "MS": "28", "MO": "29", "MT": "30", "NE": "31", "NV": "32",
    "NH": "33", "NJ": "34", "NM": "35", "NY": "36", "NC": "37", "ND": "38", "OH": "39",
    "OK": "40", "OR": "41", "PA": "42", "RI": "44", "SC": "45", "SD": "46", "TN": "47",
    "TX": "48", "UT": "49", "VT": "50", "VA": "51", "WA": "53", "WV": "54", "WI": "55",
    "WY": "56", "PR": "72"}


def _acs_file(state: str, year: int) -> str:
    """The person-survey file folktables reads for ``state`` and ``year``: the folder alone
    holds any state's, or none (folktables makes it before it looks)."""
    if int(year) >= 2017:
        return f"psam_p{_ACS_STATES.get(state, state)}.csv"
    return f"ss{str(year)[-2:]}p{state.lower()}.csv"


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
    "cifar10": _torchvision("cifar10/cifar-10-batches-py", "cifar-10-python.tar.gz"),
    "cifar100": _torchvision("cifar100/cifar-100-python", "cifar-100-python.tar.gz"),
    "mnist": _torchvision("mnist/MNIST/raw"),
    "fashion_mnist": _torchvision("fashion_mnist/FashionMNIST/raw"),
    "svhn": lambda extra=False, **_: [(f"svhn/{part}_32x32.mat",)
                                      for part in ("train", "test", *(("extra",) * extra))],
    "purchase100": _archive(tabular_archives.PURCHASE100),
    "texas100": _archive(tabular_archives.TEXAS100),
    "cinic10": lambda part="test", **_: [(f"cinic10/{part}", f"cinic10/{cinic.ARCHIVE}")],
    "imagenet": lambda part="train", **_: [
        (f"imagenet/{part}", f"imagenet/{archive}")
        for archive in (imagenet.ARCHIVES[part], imagenet.DEVKIT)],
    "openml_task": lambda task, **_: [(f"openml/task-{task}.csv",)],
    "acs": lambda year=2018, state="NY", **_: [(f"acs/{year}/1-Year/{_acs_file(state, year)}",)],
    "adult": _uci(uci.ADULT),
    "pima": _uci(uci.PIMA),
    "hepatitis": _uci(uci.HEPATITIS),
    "german_credit": _uci(uci.GERMAN_CREDIT),
    # scikit-learn makes lfw_home before it looks for the images: the folder proves nothing
    "lfw": lambda **_: [("lfw/lfw_home/lfw_funneled",)],
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


def absent_weights(config: Mapping[str, Any], studies: Iterable[str] | None = None
                   ) -> dict[str, list[str]]:
    """Pretrained weight files (``weights`` of a study's model or of an attack's backbone:
    QMIA's ConvNeXt) not on disk, each with the studies among ``studies`` (default: all) that
    read it. Without this a missing file surfaces in a fit job, after every model trained."""
    def found(value: Any) -> Iterable[str]:
        if isinstance(value, Mapping):
            if isinstance(value.get("weights"), str):
                yield value["weights"]
            for item in value.values():
                yield from found(item)

    wanted = config["studies"] if studies is None else studies
    users: dict[str, list[str]] = {}
    for name in wanted:
        study = config["studies"][name]
        for path in dict.fromkeys(found({"model": study.get("model"),
                                         "attacks": study.get("attacks")})):
            if not Path(path).is_file():
                users.setdefault(path, []).append(name)
    return users


def report(found: list[Absent], weights: Mapping[str, list[str]] | None = None
           ) -> tuple[str, bool]:
    """A message listing every absent dataset and weight file, and whether the run must stop
    (some absent dataset may not be downloaded, or a weight file is absent)."""
    blocking = [entry for entry in found if not entry.download]
    downloads = [entry for entry in found if entry.download]
    lines = []
    if weights:
        lines += [f"{len(weights)} pretrained weight file(s) are not on disk: save torchvision's "
                  "ImageNet weights there (torch.save(model.state_dict(), path) on a machine "
                  "with internet):",
                  *(f"- {path} (for {', '.join(names)})" for path, names in weights.items())]
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
    return "\n".join(lines), bool(blocking or weights)


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
    message, blocking = report(absent(config), absent_weights(config))
    print(message or f"every dataset and weight file of {argv[0]} is on disk")
    return int(blocking)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
