"""Generated datasets: the papers' own synthetic data, and offline stand-ins for missing data.

Every generator draws from ``numpy.random.default_rng(seed)`` in a fixed order, so the same
parameters always give bit-identical arrays on any machine.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np

from miarepro.data.dataset import Dataset
from miarepro.options import Range

Positive = Annotated[int, Range(1)]

GENERATED = "generated data; no licence restrictions"


def _check_positive(**values: int) -> None:
    for key, value in values.items():
        if int(value) != value or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")


def check_sm_synthetic(n_samples: int, n_classes: int, **_: Any) -> None:
    """What :func:`sm_synthetic` needs of its spec, checked before any job (config validation
    calls it through ``miarepro.data.SPEC_CHECKS``)."""
    _check_positive(n_samples=n_samples, n_classes=n_classes)
    if n_samples % n_classes:
        raise ValueError(f"n_samples={n_samples} must be a multiple of n_classes={n_classes} "
                         f"(the paper uses equally many records per class)")


def sm_synthetic(root: Path, n_samples: Positive = 400, n_features: Positive = 75,
                 n_classes: Positive = 10, seed: int = 0) -> Dataset:
    """Stolen Memories' Gaussian naive-Bayes data (paper sizes: 400, 800 or 1,600 records).

    Each class y gets a mean vector with ``μ_yj ~ U[0, 1]``; one diagonal covariance with
    ``Σ_jj ~ U[0.5, 1.5]`` is shared by all classes (the paper writes ``x ~ N(μ_y, Σ)`` with no
    class index on Σ; with a shared Σ the Bayes-optimal classifier is linear, matching the
    paper's softmax-regression target). Records are equally many per class, then shuffled.

    The generating parameters go into ``meta`` (``means``: n_classes × n_features,
    ``variances``: n_features) because the "omniscient" attack evaluates the true likelihoods.
    """
    check_sm_synthetic(n_samples=n_samples, n_classes=n_classes)
    _check_positive(n_features=n_features)
    rng = np.random.default_rng(seed)
    means = rng.uniform(0.0, 1.0, size=(n_classes, n_features))
    variances = rng.uniform(0.5, 1.5, size=n_features)
    y = rng.permutation(np.repeat(np.arange(n_classes), n_samples // n_classes))
    X = means[y] + rng.standard_normal((n_samples, n_features)) * np.sqrt(variances)
    return Dataset(
        X=X.astype(np.float32), y=y.astype(np.int64), n_classes=n_classes,
        input_shape=(n_features,), name="sm_synthetic",
        meta={"source": "sm_synthetic",
              "citation": "Leino & Fredrikson 2020 (Stolen Memories), synthetic data",
              "description": "x ~ N(mu_y, diag(variances)); mu_yj ~ U[0,1]; "
                             "variances_j ~ U[0.5,1.5], shared by all classes; "
                             "equal records per class",
              "license": GENERATED,
              "means": means.tolist(), "variances": variances.tolist(),
              "class_prior": [1.0 / n_classes] * n_classes, "seed": seed},
    )


def purchase_like(root: Path, n_samples: Positive = 10000, n_features: Positive = 600,
                  n_classes: Positive = 100, n_profiles: Positive = 100,
                  taste_weight: Annotated[float, Range(0, 1)] = 0.7, seed: int = 0) -> Dataset:
    """A generated stand-in for Purchase100, built the way the real set was built.

    Shokri et al. (2017) made Purchase100 from shopping histories: one binary feature per
    product ("bought item j"), then k-means clustering of the records into 100 classes, so a
    class is a Voronoi cell of the binary records, not a noisy label. Here each record comes
    from one of ``n_profiles`` latent shopper profiles: item purchase probabilities mixing a
    global popularity (``Beta(0.3, 6)``, shared, so profiles overlap) with the profile's own
    taste (``Beta(0.3, 3)``) in proportion ``taste_weight``; the records are then clustered by
    k-means (Lloyd's algorithm from ``n_classes`` random records, at most 100 iterations) and
    the cluster is the label. ``taste_weight`` sets how separable the clusters are, hence the
    test accuracy a model reaches from a given number of records, hence its generalisation gap.

    Calibrated (default recipe of each study, 25,000 records, members = half or a fifth of the
    pool) against the papers' own reports for the real set:

    - ``taste_weight=0.7``, MLP 600-32-100 (IHA's MLP-2) on 10,000 records: 99% train and 92%
      test accuracy, LOSS AUC 0.58 and TPR@1% 1.0%, online LiRA (8 references) AUC 0.66 and
      TPR@1% 5.8%. IHA reports 90% test accuracy on Purchase-100 and LOSS 0.531 / 0.97%,
      LiRA 0.644 / 4.70% (IHA Table 2).
    - ``taste_weight=0.5``, same model: 82% test accuracy, LOSS 0.67 / 1.5%, LiRA 0.77 / 9.1%;
      IHA's Purchase-100(S): 84%, LOSS 0.589 / 1.04%, LiRA 0.743 / 9.56% (IHA Table 7).
    - ``taste_weight=0.8``, BMIA's 4-layer MLP on 5,000 records: 100% train and 84% test
      accuracy, Attack-P TPR@1% 2.2%, offline LiRA (8 references) 7.1%; BMIA reports
      Attack-P 1.10% and LiRA 4.60% on Purchase100 (Table 1).
    """
    _check_positive(n_samples=n_samples, n_features=n_features, n_classes=n_classes,
                    n_profiles=n_profiles)
    if not 0.0 <= taste_weight <= 1.0:
        raise ValueError(f"taste_weight must lie in [0, 1], got {taste_weight!r}")
    if n_classes > n_samples:
        raise ValueError(f"n_classes={n_classes} exceeds n_samples={n_samples}")
    rng = np.random.default_rng(seed)
    popularity = rng.beta(0.3, 6.0, size=n_features)
    taste = rng.beta(0.3, 3.0, size=(n_profiles, n_features))
    profiles = (1.0 - taste_weight) * popularity + taste_weight * taste
    profile = rng.integers(0, n_profiles, size=n_samples)
    X = np.empty((n_samples, n_features), dtype=np.float32)
    chunk = 8192  # bounded memory at the real set's size (~200k records); fixed for determinism
    for start in range(0, n_samples, chunk):
        rows = slice(start, min(start + chunk, n_samples))
        X[rows] = rng.random((len(profile[rows]), n_features)) < profiles[profile[rows]]
    y, iterations = kmeans_labels(X, n_classes, rng)
    return Dataset(
        X=X, y=y, n_classes=n_classes, input_shape=(n_features,), name="purchase_like",
        meta={"source": "purchase_like",
              "description": "generated stand-in for Purchase100 (Shokri et al. 2017): binary "
                             "purchase records drawn from latent shopper profiles "
                             f"({1 - taste_weight:g} * Beta(0.3,6) popularity + "
                             f"{taste_weight:g} * Beta(0.3,3) taste), labelled by k-means "
                             f"into {n_classes} clusters as the real set was",
              "license": GENERATED, "n_profiles": n_profiles, "taste_weight": taste_weight,
              "kmeans_iterations": iterations, "seed": seed,
              "class_sizes": np.bincount(y, minlength=n_classes).tolist()},
    )


def kmeans_labels(X: np.ndarray, k: int, rng: np.random.Generator,
                  max_iterations: int = 100) -> tuple[np.ndarray, int]:
    """Lloyd's k-means from ``k`` distinct random records: (cluster of each record, iterations).

    Written out (rather than scikit-learn's threaded implementation) so the labels depend only
    on the generator's draws. An emptied cluster restarts at the record farthest from its centre.
    """
    points = X.astype(np.float32)
    norms = (points**2).sum(axis=1)
    centres = points[rng.choice(len(points), size=k, replace=False)].copy()
    labels = np.full(len(points), -1)
    for iteration in range(1, max_iterations + 1):
        distances = norms[:, None] - 2.0 * points @ centres.T + (centres**2).sum(axis=1)
        assigned = distances.argmin(axis=1)
        if np.array_equal(assigned, labels):
            return labels.astype(np.int64), iteration
        labels = assigned
        one_hot = np.zeros((len(points), k), dtype=np.float32)
        one_hot[np.arange(len(points)), labels] = 1.0
        counts, sums = one_hot.sum(axis=0), one_hot.T @ points
        filled = counts > 0
        centres[filled] = sums[filled] / counts[filled, None]
        if not filled.all():
            farthest = np.argsort(-distances[np.arange(len(points)), labels])
            centres[~filled] = points[farthest[: int((~filled).sum())]]
    return labels.astype(np.int64), max_iterations


def toy_sin(root: Path, n_samples: Positive = 500,
            noise_std: Annotated[float, Range(0)] = 0.01,
            mode_std: Annotated[float, Range(0)] = 0.8, seed: int = 0) -> Dataset:
    """BMIA Figure 1's 1-D regression with a low-density gap in the middle.

    ``y = sin(1.2 x) + ε`` with ``ε ~ N(0, noise_std²)`` and ``x`` from an equal mixture of
    ``N(-3, mode_std²)`` and ``N(3, mode_std²)``. The paper writes ``N(0, 0.01)`` and "σ = 0.8"
    without saying whether they are variances; following the reproduction register (A8), both
    are read as standard deviations, with 500 points. X has shape (n_samples, 1).
    """
    _check_positive(n_samples=n_samples)
    rng = np.random.default_rng(seed)
    component = rng.integers(0, 2, size=n_samples)
    x = np.where(component == 0, -3.0, 3.0) + mode_std * rng.standard_normal(n_samples)
    y = np.sin(1.2 * x) + noise_std * rng.standard_normal(n_samples)
    return Dataset(
        X=x.astype(np.float32)[:, None], y=y.astype(np.float32), n_classes=0, input_shape=(1,),
        name="toy_sin", task="regression",
        meta={"source": "toy_sin",
              "citation": "BMIA Figure 1 toy regression",
              "description": "y = sin(1.2x) + N(0, noise_std^2); x ~ 0.5 N(-3, mode_std^2) "
                             "+ 0.5 N(3, mode_std^2); 0.01 and 0.8 read as standard "
                             "deviations (register A8)",
              "license": GENERATED, "noise_std": noise_std, "mode_std": mode_std,
              "seed": seed},
    )


def tabular_like(root: Path, n_samples: Positive = 5000, n_features: Positive = 20,
                 n_informative: Positive = 8, n_classes: Positive = 2,
                 label_noise: Annotated[float, Range(0, 1)] = 0.1,
                 class_sep: Annotated[float, Range(0, low_open=True)] = 1.0,
                 seed: int = 0) -> Dataset:
    """A generated stand-in for QMIA's tabular benchmarks (Grinsztajn et al.'s OpenML tasks,
    about 5,000 records; ACS tasks): scikit-learn's ``make_classification`` (Gaussian clusters
    on the vertices of a hypercube, informative, redundant and noise features), with a share
    ``label_noise`` of labels drawn at random. Those records are what gradient-boosted trees
    memorise, so ``label_noise`` sets the leakage of a CatBoost target."""
    from sklearn.datasets import make_classification

    _check_positive(n_samples=n_samples, n_features=n_features, n_informative=n_informative,
                    n_classes=n_classes)
    if n_informative > n_features:
        raise ValueError(f"n_informative={n_informative} exceeds n_features={n_features}")
    X, y = make_classification(
        n_samples=n_samples, n_features=n_features, n_informative=n_informative,
        n_redundant=min(2, n_features - n_informative), n_classes=n_classes,
        flip_y=label_noise, class_sep=class_sep, random_state=seed)
    return Dataset(
        X=X.astype(np.float32), y=y.astype(np.int64), n_classes=n_classes,
        input_shape=(n_features,), name="tabular_like",
        meta={"source": "tabular_like",
              "description": f"generated tabular classification (scikit-learn "
                             f"make_classification, {n_informative} informative of {n_features}"
                             f" features, label noise {label_noise:g})",
              "license": GENERATED, "seed": seed})


def image_like(root: Path, n_samples: Positive = 2000, n_classes: Positive = 10,
               side: Positive = 32, channels: Positive = 3,
               noise: Annotated[float, Range(0, low_open=True)] = 0.3,
               seed: int = 0) -> Dataset:
    """Generated CIFAR-shaped images (``channels x side x side`` in [0, 1]) for checking the
    image path end to end without a download, e.g. on a GPU node (``config/smoke-gpu.yaml``):
    each class is a smooth random pattern (a sum of low-frequency waves per channel), each
    image its class's pattern plus Gaussian pixel noise of scale ``noise``, clipped. Nothing
    about them resembles a real image; they only have the shape and scale of one."""
    _check_positive(n_samples=n_samples, n_classes=n_classes, side=side, channels=channels)
    rng = np.random.default_rng(seed)
    grid = np.linspace(0.0, 2.0 * np.pi, side)
    rows, cols = np.meshgrid(grid, grid, indexing="ij")
    templates = np.zeros((n_classes, channels, side, side))
    for _ in range(3):  # three waves of random low frequency, phase and amplitude per channel
        freq = rng.integers(1, 4, size=(n_classes, channels, 2))
        phase = rng.uniform(0, 2 * np.pi, size=(n_classes, channels, 1, 1))
        amp = rng.uniform(0.1, 0.25, size=(n_classes, channels, 1, 1))
        templates += amp * np.sin(freq[..., 0, None, None] * rows + freq[..., 1, None, None]
                                  * cols + phase)
    y = rng.permutation(np.arange(n_samples) % n_classes)
    X = templates[y] + 0.5 + noise * rng.standard_normal((n_samples, channels, side, side))
    return Dataset(
        X=np.clip(X, 0.0, 1.0).astype(np.float32), y=y.astype(np.int64), n_classes=n_classes,
        input_shape=(channels, side, side), name="image_like",
        meta={"source": "image_like", "license": GENERATED, "seed": seed,
              "description": f"generated {channels}x{side}x{side} images: {n_classes} smooth "
                             f"class patterns plus pixel noise {noise:g}"})
