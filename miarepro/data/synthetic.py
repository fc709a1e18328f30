"""Generated datasets: the papers' own synthetic data, and offline stand-ins for missing data.

Every generator draws from ``numpy.random.default_rng(seed)`` in a fixed order, so the same
parameters always give bit-identical arrays on any machine.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from miarepro.data.dataset import Dataset

GENERATED = "generated data; no licence restrictions"


def _check_positive(**values: int) -> None:
    for key, value in values.items():
        if int(value) != value or value < 1:
            raise ValueError(f"{key} must be a positive integer, got {value!r}")


def sm_synthetic(root: Path, n_samples: int = 400, n_features: int = 75, n_classes: int = 10,
                 seed: int = 0) -> Dataset:
    """Stolen Memories' Gaussian naive-Bayes data (paper sizes: 400, 800 or 1,600 records).

    Each class y gets a mean vector with ``μ_yj ~ U[0, 1]``; one diagonal covariance with
    ``Σ_jj ~ U[0.5, 1.5]`` is shared by all classes (the paper writes ``x ~ N(μ_y, Σ)`` with no
    class index on Σ; with a shared Σ the Bayes-optimal classifier is linear, matching the
    paper's softmax-regression target). Records are equally many per class, then shuffled.

    The generating parameters go into ``meta`` (``means``: n_classes × n_features,
    ``variances``: n_features) because the "omniscient" attack evaluates the true likelihoods.
    """
    _check_positive(n_samples=n_samples, n_features=n_features, n_classes=n_classes)
    if n_samples % n_classes:
        raise ValueError(f"n_samples={n_samples} must be a multiple of n_classes={n_classes} "
                         f"(the paper uses equally many records per class)")
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


def purchase_like(root: Path, n_samples: int = 10000, n_features: int = 600,
                  n_classes: int = 100, noise: float = 0.1, seed: int = 0) -> Dataset:
    """A generated stand-in for Purchase100 (600 binary "bought item j" features, 100 classes).

    The real set clusters shopping histories into 100 classes with k-means; here each class is
    a prototype vector of purchase probabilities and each record one Bernoulli draw from its
    class's prototype. A prototype mixes a global item popularity (``Beta(0.3, 6)``, shared by
    all classes, so classes overlap as real shoppers do) with a class-specific taste
    (``Beta(0.3, 3)``), half and half; both are sparse, giving about 6-7% ones per record. For
    a fraction ``noise`` of each record's features the class is ignored and the global
    popularity is used instead, so a record is never a clean copy of its prototype. Labels are
    drawn uniformly, so class sizes vary a little, as in the real set.

    Measured with scikit-learn's ``MLPClassifier`` (Adam, default settings, ``random_state=0``)
    on the default generator settings, training on the first records and testing on the rest:
    one hidden layer of 256 units trained on 1,000 of 3,000 records reaches 100% train and
    62.9% test accuracy (64.2% and 63.0% for seeds 1 and 2; chance is 1%), so it overfits
    strongly, which membership inference needs, yet learns the task. 32 hidden units trained
    on 20,000 of 25,000 records reach 100% train and 84.3% test accuracy, close to the ~84%
    that IHA reports for its 2-layer, 32-unit MLP on the real Purchase-100(S).
    """
    _check_positive(n_samples=n_samples, n_features=n_features, n_classes=n_classes)
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must lie in [0, 1], got {noise!r}")
    rng = np.random.default_rng(seed)
    popularity = rng.beta(0.3, 6.0, size=n_features)
    taste = rng.beta(0.3, 3.0, size=(n_classes, n_features))
    prototypes = 0.5 * popularity + 0.5 * taste
    y = rng.integers(0, n_classes, size=n_samples)
    X = np.empty((n_samples, n_features), dtype=np.float32)
    chunk = 8192  # bounded memory at the real set's size (~200k records); fixed for determinism
    for start in range(0, n_samples, chunk):
        rows = slice(start, min(start + chunk, n_samples))
        probabilities = prototypes[y[rows]]
        ignore_class = rng.random(probabilities.shape) < noise
        probabilities = np.where(ignore_class, popularity, probabilities)
        X[rows] = rng.random(probabilities.shape) < probabilities
    return Dataset(
        X=X, y=y.astype(np.int64), n_classes=n_classes, input_shape=(n_features,),
        name="purchase_like",
        meta={"source": "purchase_like",
              "description": "generated stand-in for Purchase100 (Shokri et al. 2017): "
                             "Bernoulli draws from per-class prototypes of item purchase "
                             "probabilities, 0.5*Beta(0.3,6) popularity + 0.5*Beta(0.3,3) "
                             f"class taste, feature noise {noise}",
              "license": GENERATED, "noise": noise, "seed": seed},
    )


def toy_sin(root: Path, n_samples: int = 500, noise_std: float = 0.01, mode_std: float = 0.8,
            seed: int = 0) -> Dataset:
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
