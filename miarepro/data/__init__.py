"""The dataset registry: every dataset of every study is loaded through :func:`load_dataset`.

A config names a dataset by a spec such as ``{"source": "purchase_like", "n_samples": 5000}``.
``source`` picks a loader from :data:`SOURCES`; the other keys are that loader's parameters,
plus a few options that apply to every source (:data:`COMMON_OPTIONS`). Typos fail at once with
the offending key named, instead of silently falling back to a default.

Heavy libraries (torchvision, scikit-learn, mlxtend, pandas) are imported inside the loaders, so
importing this package to validate a config stays cheap.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import numpy as np

from miarepro.data import (
    cinic,
    embedded,
    imagenet,
    lfw,
    synthetic,
    tabular_archives,
    tabular_benchmarks,
    torchvision_sets,
    uci,
)
from miarepro.data.dataset import Dataset
from miarepro.data.download import DatasetUnavailable, fetch, require_file
from miarepro.options import Range, check_value, evaluated_annotation, unknown

__all__ = ["COMMON_OPTIONS", "SOURCES", "Dataset", "DatasetUnavailable", "check_spec", "fetch",
           "load_dataset", "relabel", "require_file", "subsample", "with_ood",
           "with_rotated_copies"]

SOURCES: dict[str, Callable[..., Dataset]] = {
    # embedded: shipped with installed packages, offline
    "digits": embedded.digits,
    "breast_cancer": embedded.breast_cancer,
    "mnist_subset": embedded.mnist_subset,
    # generated
    "sm_synthetic": synthetic.sm_synthetic,
    "purchase_like": synthetic.purchase_like,
    "toy_sin": synthetic.toy_sin,
    "tabular_like": synthetic.tabular_like,
    "image_like": synthetic.image_like,
    # real datasets, read from <root>/<source>/ (downloaded there only if the spec allows it)
    "cifar10": torchvision_sets.cifar10,
    "cifar100": torchvision_sets.cifar100,
    "mnist": torchvision_sets.mnist,
    "fashion_mnist": torchvision_sets.fashion_mnist,
    "svhn": torchvision_sets.svhn,
    "purchase100": tabular_archives.purchase100,
    "texas100": tabular_archives.texas100,
    "cinic10": cinic.cinic10,
    "imagenet": imagenet.imagenet,
    "openml_task": tabular_benchmarks.openml_task,
    "acs": tabular_benchmarks.acs,
    "adult": uci.adult,
    "pima": uci.pima,
    "hepatitis": uci.hepatitis,
    "german_credit": uci.german_credit,
    "lfw": lfw.lfw,
}

#: Sources shipped with installed packages or generated: they read nothing under ``data_dir``.
OFFLINE_SOURCES = frozenset(name for name, loader in SOURCES.items()
                            if loader.__module__ in (embedded.__name__, synthetic.__name__))

#: Checks of a source's parameters that its signature cannot state, run at config validation.
SPEC_CHECKS: dict[str, Callable[..., None]] = {"sm_synthetic": synthetic.check_sm_synthetic}

#: Spec keys handled here for every source, with their defaults.
COMMON_OPTIONS: dict[str, Any] = {"subsample": None, "subsample_seed": 0, "relabel": None,
                                   "calibration": None, "ood": None, "ood_rotation": None}
RELABELINGS = ("odd_even",)
#: Records of the sources whose size no parameter sets (the config check sizes splits with it).
KNOWN_SIZES = {"digits": 1797, "breast_cancer": 569, "mnist_subset": 5000, "cifar10": 60000,
               "cifar100": 60000, "mnist": 70000, "fashion_mnist": 70000,
               "svhn": 99289,
               "purchase100": 197324, "texas100": 67330, "adult": 48842, "pima": 768,
               "hepatitis": 155, "german_credit": 1000}


#: Sources whose records are images (channels x height x width); every other gives flat
#: feature vectors. Convolutional models and ood_rotation need the former.
IMAGE_SOURCES = frozenset({"digits", "mnist_subset", "image_like", "cifar10", "cifar100",
                           "mnist", "fashion_mnist", "svhn", "cinic10", "imagenet", "lfw"})


#: Record shapes of the sources whose shape no parameter sets (None: only the files say).
KNOWN_SHAPES = {"mnist_subset": (1, 28, 28), "mnist": (1, 28, 28), "fashion_mnist": (1, 28, 28),
                "cifar10": (3, 32, 32), "cifar100": (3, 32, 32), "svhn": (3, 32, 32),
                "cinic10": (3, 32, 32), "purchase100": (600,), "texas100": (6169,),
                "breast_cancer": (30,), "toy_sin": (1,)}


def _with_defaults(source: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """A source's loader parameters (after ``root``): the spec's, else their defaults."""
    parameters = inspect.signature(SOURCES[source]).parameters
    return {key: options.get(key, parameters[key].default) for key in list(parameters)[1:]}


def _record_shape(source: str, options: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The shape of one record of a source, from its parameters where they set it."""
    parameters = _with_defaults(source, options)
    value = parameters.get
    if source == "image_like":
        return (value("channels"), value("side"), value("side"))
    if source == "imagenet":
        return (3, value("resolution"), value("resolution"))
    if source == "digits":
        return (1, 8, 8) if value("layout") == "8x8" else (1, 28, 28)
    if "n_features" in parameters:
        return (value("n_features"),)
    return KNOWN_SHAPES.get(source)


def gives_images(spec: Mapping[str, Any]) -> bool:
    """Whether a spec's records are images, without loading it."""
    return _split_spec(spec)[0] in IMAGE_SOURCES


def loader_parameters(source: str) -> list[str]:
    """The spec keys a source's loader accepts (its parameters after ``root``)."""
    parameters = list(inspect.signature(SOURCES[source]).parameters)
    return parameters[1:]


def _split_spec(spec: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(source, loader parameters, common options) of a spec, or ValueError naming the key."""
    options = dict(spec)
    if "source" not in options:
        raise ValueError(f"dataset spec {dict(spec)!r} has no 'source'; known sources: "
                         f"{sorted(SOURCES)}")
    source = options.pop("source")
    if source not in SOURCES:
        raise ValueError(unknown("dataset source", source, SOURCES))
    common = {key: options.pop(key, default) for key, default in COMMON_OPTIONS.items()}
    accepted = loader_parameters(source)
    for key in options:
        if key not in accepted:
            raise ValueError(unknown("parameter", key, accepted + sorted(COMMON_OPTIONS),
                                     f"dataset source {source!r}"))
    parameters = inspect.signature(SOURCES[source]).parameters
    for key, value in options.items():
        check_value(value, evaluated_annotation(SOURCES[source], parameters[key]), key)
    if common["relabel"] is not None and common["relabel"] not in RELABELINGS:
        raise ValueError(unknown("relabel", common["relabel"], RELABELINGS))
    if common["ood"] is not None and common["ood_rotation"] is not None:
        raise ValueError("give either ood (another dataset) or ood_rotation (rotated copies)")
    if common["ood_rotation"] is not None:
        check_value(common["ood_rotation"], Annotated[float, Range(0, 180, low_open=True)],
                    "ood_rotation")
        if source not in IMAGE_SOURCES:
            raise ValueError(f"ood_rotation rotates images; source {source!r} gives feature "
                             "vectors (give an ood dataset spec instead)")
    if common["ood"] is not None:
        if not isinstance(common["ood"], Mapping) or "ood" in common["ood"]:
            raise ValueError("ood must be one dataset spec (without an ood of its own), "
                             f"got {common['ood']!r}")
        try:
            ood_source, ood_options, _ = _split_spec(common["ood"])
        except ValueError as error:
            raise ValueError(f"ood: {error}") from None
        if (ood_source in IMAGE_SOURCES) != (source in IMAGE_SOURCES):
            kinds = {True: "images", False: "feature vectors"}
            raise ValueError(f"ood: source {ood_source!r} gives "
                             f"{kinds[ood_source in IMAGE_SOURCES]}, {source!r} "
                             f"{kinds[source in IMAGE_SOURCES]}: a model of one cannot be "
                             "queried with the other")
        shapes = _record_shape(ood_source, ood_options), _record_shape(source, options)
        if None not in shapes and shapes[0] != shapes[1]:
            raise ValueError(f"ood: records of shape {shapes[0]} ({ood_source!r}), but "
                             f"{source!r} gives {shapes[1]}: the model cannot be queried with "
                             "them")
    if common["subsample"] is not None:
        check_value(common["subsample"], Annotated[int, Range(1)], "subsample")
        size = _source_size(source, options)
        if size is not None and common["subsample"] > size:
            raise ValueError(f"subsample: {common['subsample']} is more than the {size} "
                             f"records of source {source!r}")
    if source in SPEC_CHECKS:
        SPEC_CHECKS[source](**_with_defaults(source, options))
    return source, options, common


def _source_size(source: str, options: Mapping[str, Any]) -> int | None:
    """Records of a source before any subsample (None where only its files would say)."""
    parameters = _with_defaults(source, options)
    return int(parameters["n_samples"]) if "n_samples" in parameters else KNOWN_SIZES.get(source)


def expected_size(spec: Mapping[str, Any]) -> int | None:
    """How many in-distribution records ``spec`` gives, without loading it (None if unknown).

    Splits draw from these; ``ood`` records come after them and are only ever queried.
    """
    source, options, common = _split_spec(spec)
    if common["subsample"] is not None:
        return int(common["subsample"])
    return _source_size(source, options)


def check_spec(spec: Mapping[str, Any]) -> None:
    """Validate a spec's source and keys without loading anything (for config checks)."""
    _split_spec(spec)


def load_dataset(spec: Mapping[str, Any], root: str | os.PathLike[str] = "data") -> Dataset:
    """Load the dataset described by ``spec``; real datasets live under ``root/<source>/``.

    Raises ValueError for an unknown source or parameter, and DatasetUnavailable (a
    FileNotFoundError) when a real dataset's files are missing.
    """
    source, options, common = _split_spec(spec)
    dataset = SOURCES[source](Path(root), **options)
    if common["relabel"] is not None:
        dataset = relabel(dataset, common["relabel"])
    if common["subsample"] is not None:
        dataset = subsample(dataset, common["subsample"], common["subsample_seed"])
    if common["calibration"] is not None:  # what a stand-in was calibrated against (card only)
        dataset = dataclasses.replace(dataset, meta={**dataset.meta,
                                                     "calibration": common["calibration"]})
    if common["ood"] is not None:
        dataset = with_ood(dataset, load_dataset(common["ood"], root))
    if common["ood_rotation"] is not None:
        dataset = with_rotated_copies(dataset, float(common["ood_rotation"]))
    return dataset


def with_ood(dataset: Dataset, ood: Dataset) -> Dataset:
    """``dataset`` followed by out-of-distribution records of the same classes and shape.

    No model ever trains on the appended records (splits draw from the first
    ``meta["ood_start"]`` records only); a study auditing with ``nonmembers: ood`` queries
    them as non-members, as BMIA Table 2 queries CINIC-10 images against a CIFAR-10 target.
    """
    if (ood.task, ood.n_classes, ood.input_shape) != (dataset.task, dataset.n_classes,
                                                       dataset.input_shape):
        raise ValueError(f"ood {ood.name!r} ({ood.task}, {ood.n_classes} classes, shape "
                         f"{ood.input_shape}) does not match {dataset.name!r} ({dataset.task}, "
                         f"{dataset.n_classes} classes, shape {dataset.input_shape})")
    return dataclasses.replace(
        dataset, X=np.concatenate([dataset.X, ood.X]), y=np.concatenate([dataset.y, ood.y]),
        name=f"{dataset.name}+{ood.name}",
        meta={**dataset.meta, "ood_start": len(dataset), "ood": ood.meta})


def with_rotated_copies(dataset: Dataset, degrees: float) -> Dataset:
    """``dataset`` followed by a copy of every image rotated by ``degrees``, alternately
    clockwise and anticlockwise: a mild, tunable distribution shift of the same classes.

    The copy of record ``i`` is record ``ood_start + i`` (``meta["ood_aligned"]``), so a study
    auditing with ``nonmembers: ood`` queries the copies of its target's *test* records only:
    copies of training records would still be members in all but name.
    """
    from scipy import ndimage

    if dataset.X.ndim != 4:
        raise ValueError(f"ood_rotation needs images, {dataset.name!r} has shape "
                         f"{dataset.X.shape[1:]}")
    copies = np.empty_like(dataset.X)
    for sign, rows in ((1, slice(0, None, 2)), (-1, slice(1, None, 2))):
        copies[rows] = ndimage.rotate(dataset.X[rows], sign * degrees, axes=(2, 3),
                                      reshape=False, order=1)
    return dataclasses.replace(
        dataset, X=np.concatenate([dataset.X, np.clip(copies, 0.0, 1.0)]),
        y=np.concatenate([dataset.y, dataset.y]), name=f"{dataset.name}+rotated",
        meta={**dataset.meta, "ood_start": len(dataset), "ood_aligned": True,
              "ood": {"description": f"every image rotated by {degrees:g} degrees, "
                                     "alternately clockwise and anticlockwise (bilinear)"}})


def relabel(dataset: Dataset, scheme: str) -> Dataset:
    """Derive a new labelling; ``"odd_even"`` is IHA's MNIST-Odd (label = digit % 2)."""
    if scheme not in RELABELINGS:
        raise ValueError(f"unknown relabel {scheme!r}; known: {list(RELABELINGS)}")
    if dataset.task != "classification":
        raise ValueError(f"relabel {scheme!r} needs a classification dataset, "
                         f"{dataset.name!r} is {dataset.task}")
    return dataclasses.replace(
        dataset, y=dataset.y % 2, n_classes=2, name=f"{dataset.name}_{scheme}",
        meta={**dataset.meta, "relabel": scheme, "class_names": ["even", "odd"],
              "relabel_description": "label = original label % 2 (0 even, 1 odd)"},
    )


def subsample(dataset: Dataset, size: int, seed: int = 0) -> Dataset:
    """A seeded random subset of ``size`` records, kept in their original order.

    Keeping the order means ``meta["official_test_start"]`` can be updated to the number of
    kept records that came from the official training split.
    """
    total = len(dataset)
    if int(size) != size or not 1 <= size <= total:
        raise ValueError(f"subsample must be an integer in 1..{total} for {dataset.name!r}, "
                         f"got {size!r}")
    keep = np.sort(np.random.default_rng(seed).choice(total, size=int(size), replace=False))
    meta = {**dataset.meta, "subsample": {"size": int(size), "seed": seed, "of": total}}
    for boundary in ("official_test_start", "ood_start"):
        if boundary in meta:
            meta[boundary] = int(np.searchsorted(keep, meta[boundary]))
    return dataclasses.replace(dataset, X=dataset.X[keep], y=dataset.y[keep], meta=meta)
