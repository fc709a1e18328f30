"""CIFAR-10/100, MNIST and Fashion-MNIST through torchvision's dataset classes.

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
from miarepro.data.download import DatasetUnavailable


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


def _images(data: object, channels_last: bool) -> np.ndarray:
    """uint8 images (N, H, W[, C]) → float32 (N, C, H, W) in [0, 1], converted in place."""
    array = np.asarray(data)
    array = array.transpose(0, 3, 1, 2) if channels_last else array[:, None, :, :]
    images = array.astype(np.float32)
    images /= np.float32(255.0)
    return images


def _load(name: str, root: Path, download: bool) -> Dataset:
    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision import datasets

    source = _SOURCES[name]
    cls = getattr(datasets, source.cls)
    folder = Path(root) / name
    try:
        splits = [cls(str(folder), train=train, download=download) for train in (True, False)]
    except RuntimeError as error:
        text = str(error).lower()
        if "not found" not in text and "download" not in text:
            raise
        raise DatasetUnavailable(_missing_message(name, cls, folder, download)) from error
    except OSError as error:  # network failures while downloading (URLError and friends)
        if not download:
            raise
        raise DatasetUnavailable(_missing_message(name, cls, folder, download)) from error
    channels_last = hasattr(cls, "base_folder")
    X = _images(np.concatenate([np.asarray(split.data) for split in splits]), channels_last)
    y = np.concatenate([np.asarray(split.targets, dtype=np.int64) for split in splits])
    return Dataset(
        X=X, y=y, n_classes=len(splits[0].classes), input_shape=tuple(X.shape[1:]), name=name,
        meta={"source": name, "citation": source.citation, "license": source.license,
              "official_test_start": len(splits[0].targets),
              "class_names": [str(label) for label in splits[0].classes],
              "preprocessing": "official train then test split; pixels divided by 255; "
                               "channel-first"},
    )


def cifar10(root: Path, download: bool = False) -> Dataset:
    """CIFAR-10: 60,000 colour images 3×32×32, 10 classes (50,000 train + 10,000 test)."""
    return _load("cifar10", root, download)


def cifar100(root: Path, download: bool = False) -> Dataset:
    """CIFAR-100 with its 100 fine labels: 60,000 images 3×32×32 (50,000 + 10,000)."""
    return _load("cifar100", root, download)


def mnist(root: Path, download: bool = False) -> Dataset:
    """MNIST: 70,000 handwritten digits 1×28×28, 10 classes (60,000 train + 10,000 test)."""
    return _load("mnist", root, download)


def fashion_mnist(root: Path, download: bool = False) -> Dataset:
    """Fashion-MNIST: 70,000 clothing images 1×28×28, 10 classes (60,000 + 10,000)."""
    return _load("fashion_mnist", root, download)
