"""Per-sample statistics derived from saved logits, shared by every logit-based attack.

All functions take logits of shape ``(..., n, C)`` and integer labels of shape ``(n,)`` and
return ``(..., n)``: leading axes (models, augmentations) broadcast, so attacks never loop over
models or samples.
"""

from __future__ import annotations

from typing import Literal

import numpy as np

#: Member-high statistics of the true label that attacks threshold or model.
#: ``loss`` is the cross-entropy, ``mse`` the squared error of a model trained on it (IHA's
#: MNIST-Odd logistic regression): an attack "on the loss" reads the model's own loss.
Statistic = Literal["loss", "mse", "confidence", "hinge", "logit_confidence", "correct"]
#: The continuous ones that parametric (Gaussian) and quantile attacks model.
ScoreStatistic = Literal["loss", "mse", "hinge", "logit_confidence"]


def _class_index(shape: tuple[int, ...], labels: np.ndarray) -> np.ndarray:
    return np.broadcast_to(labels[..., None], (*shape[:-1], 1))


def _true_class(values: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return np.take_along_axis(values, _class_index(values.shape, labels), axis=-1)[..., 0]


def _others_mask(shape: tuple[int, ...], labels: np.ndarray) -> np.ndarray:
    return np.arange(shape[-1]) != labels[..., None]


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Cross-entropy loss of the true label (``-log p_y``); low for members.

    Computed as ``softplus(-logit_confidence)``, i.e. ``log1p(sum_{y' != y} p_y' / p_y)``, so it
    stays positive and distinct for confident predictions: ``logsumexp(z) - z_y`` rounds to
    exactly 0 once the margin exceeds about 37 nats, which would tie every such sample.
    """
    return np.logaddexp(0.0, -logit_confidence(logits, labels))


def squared_error(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``|softmax(z) - onehot(y)|^2 / C``: the training loss ``mse`` of
    :func:`miarepro.training.per_sample_loss`, per sample; low for members. For IHA's
    one-logit model (logits ``[0, s]``) it is ``(sigmoid(s) - y)^2``. It ranks records as the
    cross-entropy does there, but a Gaussian over it (LiRA) is another test.

    Summed from the other classes' probabilities, ``(sum p_c)^2 + sum p_c^2``, which stay
    exact where ``1 - p_y`` would round to 0 for a confident prediction."""
    logits = np.asarray(logits, dtype=np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    p = np.exp(shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True)))
    others = np.where(_others_mask(p.shape, labels), p, 0.0)
    return (others.sum(axis=-1) ** 2 + (others * others).sum(axis=-1)) / logits.shape[-1]


def confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Softmax probability of the true label, ``p_y``."""
    return np.exp(-cross_entropy(logits, labels))


def hinge(logits: np.ndarray, labels: np.ndarray, overwrite: bool = False) -> np.ndarray:
    """``z_y - max_{y' != y} z_{y'}``: the hinge score of Carlini et al. used by BMIA and QMIA.

    The result is float64. ``overwrite=True``, for a large array the caller owns (BMIA's
    posterior draws): the true class's logit becomes ``-inf`` in ``logits`` itself before the
    maximum, the same numbers without a float64 copy and a masked copy of the array.
    """
    if overwrite:
        true = _true_class(logits, labels).astype(np.float64)
        np.put_along_axis(logits, _class_index(logits.shape, labels), -np.inf, axis=-1)
        return true - logits.max(axis=-1)
    logits = np.asarray(logits, dtype=np.float64)
    others = np.where(_others_mask(logits.shape, labels), logits, -np.inf)
    return _true_class(logits, labels) - others.max(axis=-1)


def logit_confidence(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``log p_y - log sum_{y' != y} p_{y'}``, computed in log space so it never overflows.

    This is LiRA's logit-scaled confidence ``log(p / (1 - p))``; the softmax normaliser cancels,
    so it equals ``z_y - logsumexp_{y' != y} z_{y'}``. The result is float64; float32 logits
    stay float32 up to the exponentials (see :func:`logsumexp`).
    """
    logits = np.asarray(logits)
    if logits.dtype != np.float32:
        logits = logits.astype(np.float64, copy=False)
    others = np.where(_others_mask(logits.shape, labels), logits, -np.inf)
    return _true_class(logits, labels).astype(np.float64) - logsumexp(others)


def logsumexp(values: np.ndarray) -> np.ndarray:
    """``log sum exp`` over the last axis, in float64, shifted by the maximum so nothing
    overflows; ``values`` is overwritten (a row of ``-inf`` gives ``-inf``).

    The shifted values (all ``<= 0``) are exponentiated in float32 and summed in float64: the
    result is within about 1e-7 of the float64 computation (below the rounding of float32 logits
    themselves) where the terms differ by more than float32's resolution at 1, as other classes'
    logits do (RMIA's mean over models of probabilities near 1 is taken in float64 instead), and
    on a CPU without AVX-512 numpy's float32 exponential is 4x faster than its float64 one,
    which was most of LiRA's scoring time. scipy's ``logsumexp`` computes the same in float64,
    but its checks and copies made it 85% of LiRA's scoring time (64 models x 30,000 samples x
    100 classes).
    """
    top = values.max(axis=-1, keepdims=True)
    top[top == -np.inf] = 0.0
    values -= top
    shifted = values.astype(np.float32, copy=False)
    np.exp(shifted, out=shifted)
    return np.log(shifted.sum(axis=-1, dtype=np.float64)) + top[..., 0]


def correct(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """1.0 where the arg-max prediction equals the label, else 0.0."""
    return (np.asarray(logits).argmax(axis=-1) == labels).astype(np.float64)


STATISTICS = {
    "loss": cross_entropy,
    "mse": squared_error,
    "confidence": confidence,
    "hinge": hinge,
    "logit_confidence": logit_confidence,
    "correct": correct,
}
MEMBER_HIGH = {"loss": False, "mse": False, "confidence": True, "hinge": True,
               "logit_confidence": True, "correct": True}


def statistic(name: str, logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Compute a named statistic, oriented so that higher means more likely a member."""
    if name not in STATISTICS:
        raise KeyError(f"unknown statistic {name!r}; known: {sorted(STATISTICS)}")
    values = STATISTICS[name](logits, labels)
    return values if MEMBER_HIGH[name] else -values
