"""Every metric of the five papers, computed from membership scores only.

Conventions (REPRODUCTION-MATRIX §0.4): scores are higher for members; ``member`` is a boolean
array. The ROC comes from :func:`sklearn.metrics.roc_curve`.

TPR at a fixed FPR uses the *conservative* rule: among the ROC operating points whose FPR does
not exceed the target, take the one with the largest TPR (i.e. the largest threshold-defined
FPR ≤ target). No interpolation between thresholds is done, so the reported TPR is always
achievable by an actual threshold and never flatters an attack. With ``n`` non-members, FPRs
below ``1/n`` can only be met by a threshold above every non-member (the TPR is then the share of
members scoring above the highest non-member), which is why low-FPR numbers need many
non-members.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

DEFAULT_FPRS = (0.001, 0.01)


def metric_name(kind: str, fpr: float) -> str:
    """``tpr@1%``, ``precision@0.1%``, ``pinball@1%``, ...: a metric at one FPR or level."""
    return f"{kind}@{fpr * 100:g}%"


def _check(member: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    member = np.asarray(member).astype(bool)
    score = np.asarray(score, dtype=np.float64)
    if member.shape != score.shape or member.ndim != 1:
        raise ValueError(f"member {member.shape} and score {score.shape} must be equal 1-D shapes")
    if member.all() or not member.any():
        raise ValueError("need at least one member and one non-member")
    if not np.isfinite(score).all():
        raise ValueError("scores contain NaN or infinity")
    return member, score


def roc(member: np.ndarray, score: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr, tpr, thresholds)`` of the full ROC curve (no points dropped)."""
    from sklearn.metrics import roc_curve  # imported on use: the Snakefile imports this module

    member, score = _check(member, score)
    return roc_curve(member, score, drop_intermediate=False)


def auc(member: np.ndarray, score: np.ndarray) -> float:
    from sklearn.metrics import roc_auc_score

    member, score = _check(member, score)
    return float(roc_auc_score(member, score))


def tpr_at_fpr(member: np.ndarray, score: np.ndarray, fpr: float) -> float:
    """Largest TPR among thresholds whose FPR is at most ``fpr`` (conservative, see module)."""
    curve_fpr, curve_tpr, _ = roc(member, score)
    return float(curve_tpr[curve_fpr <= fpr + 1e-12].max())


def decisions_at_fpr(member: np.ndarray, score: np.ndarray, fpr: float) -> np.ndarray:
    """Member calls at the threshold :func:`tpr_at_fpr` reports: the lowest ROC threshold
    whose FPR is at most ``fpr`` (``score >= threshold``)."""
    curve_fpr, _, thresholds = roc(member, score)
    threshold = thresholds[np.flatnonzero(curve_fpr <= fpr + 1e-12)[-1]]
    return np.asarray(score, dtype=np.float64) >= threshold


def precision_at_fpr(member: np.ndarray, score: np.ndarray, fpr: float) -> float:
    """QMIA's precision ``TPR / (TPR + FPR)`` at the conservative operating point for ``fpr``.

    The realised FPR of that operating point is used (not the nominal one). With no positive
    prediction at all the precision is undefined; we return 0.5, the balanced-prior chance
    level, as Stolen Memories defines it.
    """
    curve_fpr, curve_tpr, _ = roc(member, score)
    allowed = np.flatnonzero(curve_fpr <= fpr + 1e-12)
    best = allowed[np.argmax(curve_tpr[allowed])]
    tpr, realised = curve_tpr[best], curve_fpr[best]
    return 0.5 if tpr + realised == 0 else float(tpr / (tpr + realised))


def pinball_losses(threshold: np.ndarray, score: np.ndarray, alpha: float) -> np.ndarray:
    """Per-sample pinball loss of a predicted ``(1-alpha)``-quantile ``threshold`` of ``score``:
    ``PB(ŷ, y) = max(alpha (ŷ - y), (1 - alpha)(y - ŷ))`` (QMIA Definition 3)."""
    diff = np.asarray(threshold, dtype=np.float64) - np.asarray(score, dtype=np.float64)
    return np.maximum(alpha * diff, (alpha - 1.0) * diff)


def pinball_loss(threshold: np.ndarray, score: np.ndarray, alpha: float) -> float:
    """Mean pinball loss (:func:`pinball_losses`), evaluated on held-out non-members."""
    return float(np.mean(pinball_losses(threshold, score, alpha)))


def decision_metrics(member: np.ndarray, predicted: np.ndarray) -> dict[str, float]:
    """Accuracy, advantage, precision and recall of hard member predictions (Stolen Memories).

    Precision is 1/2 when nothing is predicted a member, as the paper defines it.
    """
    member = np.asarray(member).astype(bool)
    predicted = np.asarray(predicted).astype(bool)
    accuracy = float(np.mean(member == predicted))
    positives = int(predicted.sum())
    true_positives = int((member & predicted).sum())
    return {
        "accuracy": accuracy,
        "advantage": 2.0 * accuracy - 1.0,
        "precision": 0.5 if positives == 0 else true_positives / positives,
        "recall": true_positives / max(int(member.sum()), 1),
    }


def class_thresholds(score: np.ndarray, labels: np.ndarray, alpha: float,
                     n_classes: int) -> np.ndarray:
    """Stolen Memories' Algorithm 3: per class ``y``, the ``alpha``-th percentile of the
    attack's scores on records of class ``y`` known to be non-members, ``sort(P_y)[alpha |P_y|]``.

    Calling "member" above it gives each class a false-positive rate of about ``1 - alpha``.
    A class without such records takes the threshold of all classes pooled.
    """
    score, labels = np.asarray(score, dtype=np.float64), np.asarray(labels)
    if not len(score):
        raise ValueError("calibration needs scores of known non-members")

    def percentile(values: np.ndarray) -> float:
        ordered = np.sort(values)
        return float(ordered[min(int(alpha * len(ordered)), len(ordered) - 1)])

    pooled = percentile(score)
    return np.array([percentile(score[labels == c]) if np.any(labels == c) else pooled
                     for c in range(n_classes)])


def summary(
    member: np.ndarray, score: np.ndarray, fprs: Iterable[float] = DEFAULT_FPRS
) -> dict[str, float]:
    """AUC, TPR@FPR and precision@FPR for each FPR, as one flat dictionary."""
    result = {"auc": auc(member, score)}
    for fpr in fprs:
        result[metric_name("tpr", fpr)] = tpr_at_fpr(member, score, fpr)
        result[metric_name("precision", fpr)] = precision_at_fpr(member, score, fpr)
    return result
