"""RMIA of Zarifzadeh et al. (2024), "Low-Cost High-Power Membership Inference Attacks".

The attack compares the target's likelihood ratio on ``x`` with its ratio on population
samples ``z`` that no model trained on:

    LR(x, z) = (p(x | theta) / p(x)) / (p(z | theta) / p(z)),   Score(x) = Pr_z[LR(x, z) >= gamma]

where ``p(x | theta)`` is the softmax probability of the true label (averaged over queries)
and ``p(x)`` its average over reference models: over all of them online (IN and OUT), or
offline ``p(x) ~ ((1 + a) mean_OUT p(x | theta_ref) + (1 - a)) / 2``, applied to ``x`` and
``z`` alike as in the authors' code. Ratios are compared in log space, and the population
ratios are sorted once so that each ``x`` costs one binary search:
``O((N + |Z|) log |Z|)`` instead of ``N x |Z|`` comparisons.

The fraction of ``Z`` dominated is a step function of ``LR(x)``: every ``x`` above the largest
population ratio scores exactly 1 (with |Z| = 500 most members of an overfit target do), and
those ties hide the ranking the ratio itself gives. Since that fraction only ever increases
with the ratio, ranking by the ratio refines it without reordering anything; the score returned
is therefore the fraction made continuous (:func:`continuous_rank`).
"""

from __future__ import annotations

from typing import Annotated, Literal

import numpy as np

from miarepro.attacks.base import AttackContext, register
from miarepro.attacks.reference import require_in_references
from miarepro.options import Range


def _log_mean(log_p: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    """``log`` of the mean of ``exp(log_p)`` over the (masked) entries of the first axis.

    A record the models fit has ``log p`` near ``-1e-8`` (near ``-1e-15`` at the margins of a
    full-scale model), its spread over the models smaller still: ``exp`` of the differences
    rounds to 1 (in float32 below about 6e-8, in float64 below 1e-16), the mean to the largest
    term, and such records' ratios would be ordered by rounding
    (:func:`miarepro.signals.logsumexp` trades that precision for speed where its terms differ
    more). So the mean is ``top + log1p(mean(expm1(log_p - top)))``, in float64, exact for the
    smallest differences. numpy's own: scipy's log-sum-exp made 80% of offline RMIA's traced
    memory (six copies of the ``(K, N)`` array) at 64 models x 30,000 samples.
    """
    values = np.asarray(log_p, dtype=np.float64)
    if mask is None:
        mask = np.ones(values.shape, dtype=bool)
    top = np.where(mask, values, -np.inf).max(axis=0)
    terms = np.where(mask, np.expm1(values - top), 0.0)
    return top + np.log1p(terms.sum(axis=0) / mask.sum(axis=0))


def _log_ratio(ctx: AttackContext, indices: np.ndarray, mode: str, a: float) -> np.ndarray:
    """``log p(x | theta) - log p(x)`` on ``indices``."""
    log_target = _log_mean(ctx.target_statistic("loss", indices))  # over queries
    log_ref = _log_mean(np.moveaxis(ctx.reference_statistic("loss", indices), 1, 0))
    member = ctx.reference_in(indices)
    if mode == "online":
        return log_target - _log_mean(log_ref)
    out = ~member
    # Samples without any OUT model (only with very few models) use the mean over all models.
    out = np.where(out.any(axis=0), out, True)
    log_out = _log_mean(log_ref, out)
    # log(((1 + a) m + 1 - a) / 2) = log1p((1 + a) / 2 (m - 1)), m = exp(log_out): exact
    # where m is within 1e-16 of 1 (a sum of log1p(a) and log_out would drop log_out there)
    log_p = np.log1p((1 + a) / 2 * np.expm1(log_out))
    return log_target - log_p


@register("rmia", needs_references=True)
def rmia(ctx: AttackContext, mode: Literal["online", "offline"] = "offline",
         gamma: Annotated[float, Range(0, None, low_open=True)] = 1.0,
         a: Annotated[float, Range(0, 1)] = 0.3) -> np.ndarray:
    """RMIA (Zarifzadeh et al. 2024): fraction of population samples ``x`` dominates by ``gamma``.

    The defaults ``gamma = 1`` and ``a = 0.3`` are the engineer's choice recorded in
    REPRODUCTION-MATRIX A7 (BMIA does not state them). Against a fixed population the score
    is increasing in the record's own ratio for any ``gamma``, so ``gamma`` moves decisions at a
    fixed score threshold but no ROC metric; ``a`` does. ``mode="online"`` averages
    ``p(x | theta_ref)`` over all reference models and needs IN models for the audited samples.
    """
    if len(ctx.population) == 0:
        raise ValueError("RMIA needs a population set Z (ctx.population is empty)")
    if mode == "online":
        require_in_references(ctx.reference_in(), "online RMIA")
    ratio_x = _log_ratio(ctx, ctx.audit, mode, a)
    ratio_z = np.sort(_log_ratio(ctx, ctx.population, mode, a))
    # LR(x, z) >= gamma  <=>  log-ratio(z) <= log-ratio(x) - log(gamma)
    return continuous_rank(ratio_z, ratio_x - np.log(gamma))


def continuous_rank(population: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``(d + f) / (|Z| + 1)``: ``d`` population values ``<= v``, plus where ``v`` lies after them.

    ``f`` in ``[0, 1)`` is the linear position of ``v`` between its two neighbours in the sorted
    ``population``, ``exp(v - z_min)`` below the smallest and ``1 - exp(z_max - v)`` above the
    largest. The result is strictly increasing in ``v``, orders samples exactly as ``d`` does
    wherever ``d`` differs, and breaks ``d``'s ties by the value itself.
    """
    ordered = np.sort(population)
    dominated = np.searchsorted(ordered, values, side="right")
    lower = ordered[np.maximum(dominated - 1, 0)]
    upper = ordered[np.minimum(dominated, len(ordered) - 1)]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inside = (values - lower) / (upper - lower)
        position = np.where(dominated == 0, np.exp(values - ordered[0]),
                            np.where(dominated == len(ordered),
                                     -np.expm1(ordered[-1] - values), inside))
    return (dominated + position) / (len(ordered) + 1)
