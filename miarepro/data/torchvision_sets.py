"""CIFAR-10/100, MNIST, Fashion-MNIST and SVHN through torchvision's dataset classes.

torchvision knows the official URLs and MD5 sums and verifies them, so it is the download path.
The official train and test splits are concatenated (train first) because every paper here
re-splits the pool itself; ``meta["official_test_start"]`` keeps the boundary for studies that
want the official split back. Arrays are converted directly from ``.data``/``.targets``: going
through PIL images one by one would take minutes for 60,000 images.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.data.download import DatasetUnavailable, locked


@dataclass(frozen=True)
class _Source:
    cls: str
    citation: str
    license: str


_SOURCES = {
    "cifar10": _Source("CIFAR10", "Krizhevsky 2009, Learning Multiple Layers of Features from "
                       "Tiny Images", "no explicit licence; distributed for research use"),
    "cifar100": _Source("CIFAR100", "Krizhevsky 2009, Learning Multiple Layers of Features "
                        "from Tiny Images", "no explicit licence; distributed for research use"),
    "mnist": _Source("MNIST", "LeCun, Bottou, Bengio & Haffner 1998",
                     "CC BY-SA 3.0 (as commonly stated)"),
    "fashion_mnist": _Source("FashionMNIST", "Xiao, Rasul & Vollgraf 2017, Fashion-MNIST",
                             "MIT"),
    "svhn": _Source("SVHN", "Netzer et al. 2011, Reading Digits in Natural Images with "
                    "Unsupervised Feature Learning", "non-commercial use only"),
}


def _missing_message(name: str, cls: type, folder: Path, download: bool) -> str:
    """Say exactly which files torchvision looks for, and how to put them there offline."""
    if hasattr(cls, "base_folder"):  # CIFAR: one archive extracted into a folder of batches
        files = [entry[0] for entry in (*cls.train_list, *cls.test_list)]
        expected = folder / cls.base_folder
        origin = f"{cls.url} (md5 {cls.tgz_md5})"
        offline = (f"download {cls.filename} and extract it into {folder}, or put the archive "
                   f"itself in {folder} and set `download: true` (torchvision then checks its "
                   f"md5 and extracts it without network)")
    elif hasattr(cls, "split_list"):  # SVHN: one .mat file per split
        files = [entry[1] for entry in cls.split_list.values()]
        expected = folder
        origin = ", ".join(f"{url} (md5 {md5})" for url, _, md5 in cls.split_list.values())
        offline = f"put the .mat files in {folder}"
    else:  # MNIST-style: four gzipped IDX files, used uncompressed from the raw folder
        files = [Path(filename).stem for filename, _ in cls.resources]
        expected = folder / cls.__name__ / "raw"
        origin = ", ".join(f"{cls.mirrors[0]}{filename} (md5 {md5})"
                           for filename, md5 in cls.resources)
        offline = (f"put the four .gz files in {expected} and set `download: true` "
                   f"(torchvision then checks their md5 and decompresses them without network)")
    attempted = "the download failed" if download else "`download` is not set in its spec"
    return (f"dataset {name!r} is not available under {folder} ({attempted}).\n"
            f"  expected files in {expected}: {', '.join(files)}\n"
            f"  from: {origin}\n"
            f"  offline: {offline}")


def _images(data: object, layout: str) -> np.ndarray:
    """uint8 images (N, H, W), (N, H, W, C) or (N, C, H, W) (``layout``) → float32
    (N, C, H, W) in [0, 1], converted in place."""
    array = np.asarray(data)
    array = {"NHW": lambda a: a[:, None, :, :], "NHWC": lambda a: a.transpose(0, 3, 1, 2),
             "NCHW": lambda a: a}[layout](array)
    images = array.astype(np.float32)
    images /= np.float32(255.0)
    return images


def _load(name: str, root: Path, download: bool, parts: tuple[dict, ...] = (
        {"train": True}, {"train": False})) -> tuple[Dataset, list[int]]:
    """The official ``parts`` (constructor arguments, train first) concatenated, and where
    each part ends."""
    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision import datasets

    source = _SOURCES[name]
    cls = getattr(datasets, source.cls)
    folder = Path(root) / name
    try:
        with locked(folder):  # two studies' jobs downloading one set into one folder
            splits = [cls(str(folder), download=download, **part) for part in parts]
    except RuntimeError as error:
        text = str(error).lower()
        if "not found" not in text and "download" not in text:
            raise
        raise DatasetUnavailable(_missing_message(name, cls, folder, download)) from error
    except OSError as error:  # network failures while downloading (URLError and friends)
        if not download:
            raise
        raise DatasetUnavailable(_missing_message(name, cls, folder, download)) from error
    layout = "NHWC" if hasattr(cls, "base_folder") else "NCHW" if name == "svhn" else "NHW"
    X = _images(np.concatenate([np.asarray(split.data) for split in splits]), layout)
    y = np.concatenate([np.asarray(getattr(split, "targets", getattr(split, "labels", None)),
                                   dtype=np.int64) for split in splits])
    ends = np.cumsum([len(split.data) for split in splits]).tolist()
    classes = getattr(splits[0], "classes", [str(c) for c in range(10)])
    return Dataset(
        X=X, y=y, n_classes=len(classes), input_shape=tuple(X.shape[1:]), name=name,
        meta={"source": name, "citation": source.citation, "license": source.license,
              "official_test_start": ends[0],
              "class_names": [str(label) for label in classes],
              "preprocessing": "official train then test split; pixels divided by 255; "
                               "channel-first"},
    ), ends


def cifar10(root: Path, download: bool = False) -> Dataset:
    """CIFAR-10: 60,000 colour images 3×32×32, 10 classes (50,000 train + 10,000 test)."""
    return _load("cifar10", root, download)[0]


def cifar100(root: Path, download: bool = False) -> Dataset:
    """CIFAR-100 with its 100 fine labels: 60,000 images 3×32×32 (50,000 + 10,000)."""
    return _load("cifar100", root, download)[0]


def mnist(root: Path, download: bool = False) -> Dataset:
    """MNIST: 70,000 handwritten digits 1×28×28, 10 classes (60,000 train + 10,000 test)."""
    return _load("mnist", root, download)[0]


def fashion_mnist(root: Path, download: bool = False) -> Dataset:
    """Fashion-MNIST: 70,000 clothing images 1×28×28, 10 classes (60,000 + 10,000)."""
    return _load("fashion_mnist", root, download)[0]


def svhn(root: Path, download: bool = False, extra: bool = False) -> Dataset:
    """SVHN: 99,289 house-number digits 3×32×32 (73,257 train + 26,032 test). ``extra`` appends
    the 531,131 images of the extra split as records no model trains on (``meta["ood_start"]``:
    a split's ``ood`` part), the pool of Subpop's natural subpopulations."""
    parts = ({"split": "train"}, {"split": "test"}) + (({"split": "extra"},) if extra else ())
    dataset, ends = _load("svhn", root, download, parts)
    if not extra:
        return dataset
    return Dataset(X=dataset.X, y=dataset.y, n_classes=10, input_shape=dataset.input_shape,
                   name="svhn", meta={**dataset.meta, "ood_start": ends[1],
                                      "ood": "SVHN's extra split (in distribution; never "
                                             "trained on)"})
