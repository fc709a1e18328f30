"""ImageNet-1k (ILSVRC 2012; Russakovsky et al. 2015), downsampled to arrays.

BMIA Table 1 and QMIA Table 1 / Figure 1 audit ResNet-50 targets trained on ImageNet. Every
dataset of this workflow is one in-memory float32 array, which ImageNet at 224 x 224 would make
770 GB; this loader centre-crops and resizes each image to ``resolution`` pixels a side
(64 by default: 63 GB for the 1.28M training images; 32: 16 GB), optionally keeping the first
``classes`` classes and ``per_class`` images of each (the matrix's "100 classes at 64 x 64"
proxy), so a study states its resolution as a deviation from the paper.

ImageNet cannot be downloaded without an account: place either the extracted folders
``<root>/imagenet/<part>/<wnid>/*.JPEG`` (torchvision's ImageFolder layout), or the archives
``ILSVRC2012_img_<part>.tar`` and ``ILSVRC2012_devkit_t12.tar.gz`` in ``<root>/imagenet/``,
which torchvision checks against their published MD5 and extracts into that layout.
"""

from __future__ import annotations

import logging
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Annotated, Literal

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.data.download import DatasetUnavailable, extracting
from miarepro.options import Range

log = logging.getLogger(__name__)
DEVKIT = "ILSVRC2012_devkit_t12.tar.gz"
ARCHIVES = {"train": "ILSVRC2012_img_train.tar", "val": "ILSVRC2012_img_val.tar"}
EXTENSIONS = (".jpeg", ".jpg", ".png")
_CHUNK = 512  # images per task of the decoding pool


def imagenet(root: Path, part: Literal["train", "val"] = "train",
             resolution: Annotated[int, Range(8, 512)] = 64,
             classes: Annotated[int, Range(1, 1000)] | None = None,
             per_class: Annotated[int, Range(1)] | None = None) -> Dataset:
    """One part of ImageNet-1k as ``3 x resolution x resolution`` images in [0, 1].

    Labels follow the sorted WordNet IDs (ImageFolder's and torchvision's order); ``classes``
    keeps the first ones, ``per_class`` the first images (sorted by file name) of each.
    Decoding uses every core the job has (about 5 ms per JPEG on one core).
    """
    folder = Path(root) / "imagenet"
    if not (folder / part).is_dir():
        _extract(folder, part)
    wnids = sorted(p.name for p in (folder / part).iterdir() if p.is_dir())[:classes]
    files, labels = [], []
    for label, wnid in enumerate(wnids):
        found = sorted(p for p in (folder / part / wnid).iterdir()
                       if p.suffix.lower() in EXTENSIONS)[:per_class]
        files += found
        labels += [label] * len(found)
    if not files:
        raise ValueError(f"no ImageNet images under {folder / part}/<wnid>/")
    X = np.empty((len(files), 3, resolution, resolution), dtype=np.float32)
    chunks = [files[start:start + _CHUNK] for start in range(0, len(files), _CHUNK)]
    workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1
    with ProcessPoolExecutor(max_workers=workers) as pool:
        start = 0
        for done, images in enumerate(pool.map(_decode, chunks, [resolution] * len(chunks))):
            X[start:start + len(images)] = images.transpose(0, 3, 1, 2) / np.float32(255.0)
            start += len(images)
            if done % 100 == 0:
                log.info("ImageNet %s: %d of %d images decoded", part, start, len(files))
    return Dataset(
        X=X, y=np.asarray(labels, dtype=np.int64), n_classes=len(wnids),
        input_shape=X.shape[1:], name=f"imagenet_{part}_{resolution}",
        meta={"source": "imagenet", "part": part, "resolution": resolution,
              "classes": len(wnids), "per_class": per_class, "wnids": wnids,
              "citation": "Russakovsky et al. 2015, ImageNet Large Scale Visual Recognition "
                          "Challenge", "license": "ImageNet terms of access (non-commercial "
                                                  "research and education)",
              "preprocessing": f"RGB, shorter side resized to {resolution} (bilinear, "
                               "antialiased), centre crop, pixels divided by 255, "
                               "channel-first"},
    )


def _extract(folder: Path, part: str) -> None:
    """Let torchvision verify and extract the archives, or say what to put where."""
    archives = [folder / ARCHIVES[part], folder / DEVKIT]
    if not all(path.is_file() for path in archives):
        raise DatasetUnavailable(
            f"ImageNet-1k {part!r} is not in {folder}: place the extracted images as "
            f"{folder / part}/<wnid>/*.JPEG, or {' and '.join(p.name for p in archives)} in "
            f"{folder} (from https://image-net.org after signing its terms; they cannot be "
            "downloaded here)")
    from miarepro.compat import ensure_torchvision

    ensure_torchvision()
    from torchvision.datasets import ImageNet

    log.info("checking the MD5 of %s and extracting them into %s", archives, folder / part)
    with extracting(folder) as scratch:  # torchvision reads the archives in the folder it fills
        for path in archives:
            (scratch / path.name).symlink_to(path.resolve())
        ImageNet(str(scratch), split=part)


def _decode(paths: list[Path], resolution: int) -> np.ndarray:
    """Images as uint8 ``(n, resolution, resolution, 3)``: shorter side resized, centre crop."""
    from PIL import Image

    out = np.empty((len(paths), resolution, resolution, 3), dtype=np.uint8)
    for k, path in enumerate(paths):
        with Image.open(path) as image:
            image = image.convert("RGB")
            width, height = image.size
            scale = resolution / min(width, height)
            size = (max(resolution, round(width * scale)), max(resolution, round(height * scale)))
            image = image.resize(size, Image.Resampling.BILINEAR)
            left, top = (size[0] - resolution) // 2, (size[1] - resolution) // 2
            out[k] = np.asarray(image.crop((left, top, left + resolution, top + resolution)))
    return out
