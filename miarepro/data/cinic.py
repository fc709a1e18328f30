"""CINIC-10 (Darlow et al. 2018): CIFAR-10's ten classes, with images drawn from ImageNet.

BMIA Table 2 queries a CIFAR-10 target with CINIC-10 images as out-of-distribution
non-members. CINIC-10 also contains CIFAR-10's own images (files named ``cifar10-*``); they
are left out by default, since they are not out of distribution, and some are the target's
own training images. The archive has no published checksum: it is trusted on first use and
verified on every later one (:func:`miarepro.data.download.require_file`).
"""

from __future__ import annotations

import tarfile
from pathlib import Path
from typing import Literal

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.data.download import (
    DatasetUnavailable,
    extracting,
    fetch,
    locked,
    require_file,
)

URL = "https://datashare.ed.ac.uk/bitstream/handle/10283/3192/CINIC-10.tar.gz"
ARCHIVE = "CINIC-10.tar.gz"
#: CIFAR-10's label order, which CINIC-10's class folders follow
CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship",
           "truck")


def cinic10(root: Path, part: Literal["train", "valid", "test"] = "test",
            imagenet_only: bool = True, download: bool = False) -> Dataset:
    """One part of CINIC-10 (90,000 images each; 70,000 from ImageNet) as 3×32×32 in [0, 1].

    Reads ``<root>/cinic10/<part>/<class>/*.png``; extracts ``<root>/cinic10/CINIC-10.tar.gz``
    there first if the folders are missing (downloading it if ``download`` is set).
    """
    from PIL import Image

    folder = Path(root) / "cinic10"
    if not (folder / part).is_dir():
        archive = folder / ARCHIVE
        how = (f"download {URL} into {folder}, or extract it there so that "
               f"{folder / part}/<class>/ exist")
        with locked(folder):  # one job downloads it; the other parts' jobs wait for it
            if download and not archive.exists():
                try:
                    fetch(URL, archive, sha256=None, archive=True)
                except OSError as error:  # the network's, not a missing file's
                    raise DatasetUnavailable(f"downloading CINIC-10 failed ({error}): {how}"
                                             ) from error
        require_file(archive, how_to_get=how, archive=True)
        with extracting(folder) as scratch:
            if not (folder / part).is_dir():  # or another part's job extracted it meanwhile
                with tarfile.open(archive) as tar:
                    tar.extractall(scratch, filter="data")
    files, labels = [], []
    for label, name in enumerate(CLASSES):
        found = sorted(p for p in (folder / part / name).glob("*.png")
                       if not (imagenet_only and p.name.startswith("cifar10-")))
        files += found
        labels += [label] * len(found)
    if not files:
        raise ValueError(f"no CINIC-10 images under {folder / part}/<class>/*.png")
    X = np.stack([np.asarray(Image.open(p).convert("RGB"), dtype=np.uint8) for p in files])
    X = X.transpose(0, 3, 1, 2).astype(np.float32) / np.float32(255.0)
    return Dataset(
        X=X, y=np.asarray(labels, dtype=np.int64), n_classes=10, input_shape=X.shape[1:],
        name=f"cinic10_{part}",
        meta={"source": "cinic10", "part": part, "imagenet_only": imagenet_only,
              "citation": "Darlow, Crowley, Antoniou & Storkey 2018, CINIC-10 is not ImageNet "
                          "or CIFAR-10", "license": "MIT (CINIC-10); ImageNet terms apply",
              "class_names": list(CLASSES),
              "preprocessing": "PNG to RGB, pixels divided by 255, channel-first"},
    )
