"""Shared machinery of the reference-model attacks (LiRA, Attack-R, RMIA, L-attack, calibration).

Every function here is vectorised over models, queries and samples: per-sample statistics are
masked sums over the model axis, never Python loops over samples. Arrays follow one layout:

- ``values``: ``(K, A, N)`` member-high statistics of ``K`` models, ``A`` queries, ``N`` samples;
- ``member``: ``(K, N)`` booleans, True where model ``k`` trained on sample ``n`` (IN).

Statistics of reference models come from :meth:`AttackContext.reference_statistic`, which
works in cache-sized blocks on the requested samples only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from miarepro import signals
from miarepro.attacks.base import AttackContext

Variance = Literal["per_example", "global"]
#: stands in for a variance of exactly 0 (all reference scores coincide), so that Gaussians stay
#: finite; a variance above 0 is kept however small (the loss of a model that fits a record
#: spreads by 1e-12 or less, and a floor there would tie such records)
VARIANCE_FLOOR = 1e-24


def check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    """Reject an unknown option value, naming the known ones."""
    if value not in choices:
        raise ValueError(f"unknown {name} {value!r}; known: {list(choices)}")


def loo_statistic(ctx: AttackContext, name: str) -> np.ndarray:
    """``(J, A, N)`` member-high statistic of the leave-one-out models on their own records."""
    if ctx.loo_logits is None:
        raise ValueError("this attack needs leave-one-out models (ctx.loo_logits is None)")
    loo = np.moveaxis(np.asarray(ctx.loo_logits), 0, 2)  # (N, J, A, C) -> (J, A, N, C)
    return signals.statistic(name, loo, ctx.labels[ctx.audit])


def require_in_references(member: np.ndarray, attack: str) -> None:
    """Online attacks need IN reference models; fail clearly in the all-OUT (BMIA) setting."""
    if not np.asarray(member).any():
        raise ValueError(
            f"{attack} needs reference models trained on the audited samples (IN models), but "
            "every reference model is OUT for every audited sample (disjoint reference pool); "
            "use an offline variant instead"
        )


@dataclass(frozen=True)
class Moments:
    """Per-sample means and variances of the IN and OUT reference statistics, ``(A, N)`` each.

    Samples without any model in a group get that group's mean from the other group shifted by
    the average IN-minus-OUT difference (over samples that have both). Samples with fewer than
    two models in a group, and ``global`` variance, use the pooled within-sample variance of the
    group (sum of squared deviations over sum of ``n - 1``), per query.
    """

    mean_in: np.ndarray
    mean_out: np.ndarray
    var_in: np.ndarray
    var_out: np.ndarray
    n_in: np.ndarray  # (N,)
    n_out: np.ndarray  # (N,)


def _group(values: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, ...]:
    """Masked mean, per-sample unbiased variance and pooled variance of one group."""
    weight = mask[:, None, :]
    count = mask.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(weight, values, 0.0).sum(axis=0) / count
        squares = np.where(weight, (values - mean) ** 2, 0.0).sum(axis=0)
        var = np.where(count >= 2, squares / (count - 1), np.nan)
    dof = np.maximum(count - 1, 0).sum()
    if dof > 0:
        pooled = squares[:, count >= 2].sum(axis=1) / dof
    elif mask.any():  # at most one model per sample: spread of the group's values across samples
        pooled = np.array([values[:, a][mask].var() for a in range(values.shape[1])])
    else:
        pooled = np.full(values.shape[1], np.nan)
    return mean, var, pooled, count


def moments(values: np.ndarray, member: np.ndarray, variance: Variance = "per_example") -> Moments:
    """IN/OUT Gaussian parameters of each sample (see :class:`Moments` for the fallbacks)."""
    check_choice("variance", variance, ("per_example", "global"))
    member = np.asarray(member, dtype=bool)
    mean_in, var_in, pooled_in, n_in = _group(values, member)
    mean_out, var_out, pooled_out, n_out = _group(values, ~member)
    if not n_out.any():
        raise ValueError("every reference model trained on every audited sample: there is no "
                         "OUT model to calibrate against")
    both = (n_in > 0) & (n_out > 0)
    if not both.all():
        if not both.any() and ((n_in == 0).any() and (n_out == 0).any()):
            raise ValueError("no sample has both IN and OUT reference models, so a sample "
                             "missing one group cannot be calibrated")
        shift = (mean_in[:, both] - mean_out[:, both]).mean(axis=1, keepdims=True) \
            if both.any() else np.zeros((values.shape[1], 1))
        mean_in = np.where(n_in > 0, mean_in, mean_out + shift)
        mean_out = np.where(n_out > 0, mean_out, mean_in - shift)
    if variance == "global":
        var_in = np.broadcast_to(pooled_in[:, None], mean_in.shape)
        var_out = np.broadcast_to(pooled_out[:, None], mean_out.shape)
    else:
        var_in = np.where(n_in >= 2, var_in, pooled_in[:, None])
        var_out = np.where(n_out >= 2, var_out, pooled_out[:, None])
    return Moments(mean_in, mean_out, np.where(var_in > 0, var_in, VARIANCE_FLOOR),
                   np.where(var_out > 0, var_out, VARIANCE_FLOOR), n_in, n_out)


# Ends appended to every sample's reference values before its quantiles are taken, in the raw
# units of each statistic. For the loss they are ML Privacy Meter's (Ye et al.'s code:
# ``linear_itp_threshold_func`` appends ``signal_min=0`` and ``signal_max=1000``); for the
# unbounded hinge and logit-scaled confidence no paper gives them: a symmetric, wide range.
SIGNAL_RANGES = {"loss": (0.0, 1000.0), "hinge": (-1000.0, 1000.0),
                 "logit_confidence": (-1000.0, 1000.0)}


def quantile_score(reference: np.ndarray, valid: np.ndarray, target: np.ndarray,
                   statistic: str) -> np.ndarray:
    """Ye et al.'s reference-quantile test as one ROC score per sample, in [0, 1].

    Ye et al. flag ``x`` at FPR ``alpha`` when the target's loss is below the linearly
    interpolated ``alpha``-quantile of its reference losses with the two ends of
    :data:`SIGNAL_RANGES` appended. The score is the percentile of the target within those
    values (:func:`percentile_rank`), so thresholding it at ``1 - alpha`` makes exactly their
    decision for every ``alpha``. The appended ends keep the score continuous beyond the range
    of a few reference models: a member whose loss is below every reference loss scores by how
    far below, instead of tying at 1 with every other such sample. ``reference`` and ``target``
    are member-high statistics (``-loss`` for the loss), as everywhere in the attacks.
    """
    if statistic not in SIGNAL_RANGES:
        raise ValueError(f"unknown statistic {statistic!r} for a reference-quantile attack; "
                         f"known: {sorted(SIGNAL_RANGES)}")
    low, high = SIGNAL_RANGES[statistic]
    if not signals.MEMBER_HIGH[statistic]:
        low, high = -high, -low
    n = reference.shape[1]
    values = np.concatenate([reference, np.full((1, n), low), np.full((1, n), high)])
    mask = np.concatenate([np.asarray(valid, dtype=bool), np.ones((2, n), dtype=bool)])
    return percentile_rank(values, mask, np.clip(target, low, high))


def percentile_rank(reference: np.ndarray, valid: np.ndarray, target: np.ndarray) -> np.ndarray:
    """Where ``target`` (N,) falls in the empirical distribution of ``reference`` (J, N), in [0, 1].

    Inverts the piecewise-linear quantile function of :func:`numpy.quantile` (default method):
    with the ``n`` valid reference values sorted, ``v_(j)`` is the ``j / (n - 1)`` quantile and
    values in between are interpolated linearly, so the score is the smallest ``1 - alpha``
    whose ``(1 - alpha)``-quantile threshold the target reaches: the ROC of thresholding at
    every alpha. A target exactly on a run of tied values gets the middle of their quantile
    range; below the minimum 0, above the maximum 1. With one valid value the score is 0, 1/2
    or 1; with none it is 1/2 (no information).
    """
    valid = np.asarray(valid, dtype=bool)
    n = valid.sum(axis=0)
    below = (valid & (reference < target)).sum(axis=0)
    ties = (valid & (reference == target)).sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        midrank = np.where(n > 0, (below + 0.5 * ties) / n, 0.5)
    if reference.shape[0] < 2:
        return midrank
    ordered = np.sort(np.where(valid, reference, np.inf), axis=0)
    low, high = ordered[:-1], ordered[1:]
    pair = np.arange(1, reference.shape[0])[:, None] < n  # both ends are valid values
    with np.errstate(invalid="ignore"):
        width = np.where(pair, high - low, 1.0)
        ramp = np.where(width > 0, np.clip((target - low) / np.where(width > 0, width, 1.0), 0, 1),
                        (target > low) + 0.5 * (target == low))
    linear = np.where(pair, ramp, 0.0).sum(axis=0) / np.maximum(n - 1, 1)
    return np.where(n >= 2, linear, midrank)
