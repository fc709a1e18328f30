"""LiRA, the likelihood-ratio attack of Carlini et al. (2022), "Membership Inference Attacks From
First Principles".

For each audited sample, the reference models' statistics (logit-scaled confidence by default)
are modelled as Gaussians: ``N(mu_in, s_in^2)`` over models trained on the sample and
``N(mu_out, s_out^2)`` over models that were not. Online LiRA scores the target's statistic by
the log-likelihood ratio of the two; offline LiRA, which needs no IN model, by the one-sided test
``Pr[Z <= s]`` for ``Z ~ N(mu_out, s_out^2)``. With several queries per sample (augmentations),
one Gaussian is fitted per query and the log-likelihoods are summed over queries, which is
Carlini et al.'s diagonal-covariance model (their code averages, which ranks identically).

Means are sample means, as in the paper (the authors' code uses medians); variances are
unbiased per-sample estimates, or with ``variance="global"`` one pooled within-sample variance
per group and query, which the paper recommends with few reference models. See
:func:`miarepro.attacks.reference.moments` for samples with too few IN or OUT models.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from scipy.special import log_ndtr

from miarepro.attacks.base import AttackContext, register
from miarepro.attacks.reference import Variance, moments, require_in_references
from miarepro.signals import ScoreStatistic


def offline_score(target: np.ndarray, values: np.ndarray, member: np.ndarray,
                  variance: str) -> np.ndarray:
    """``sum_a log Phi((s_a - mu_out,a) / s_out,a)``: the one-sided test against OUT models.

    The log of the Gaussian CDF ranks exactly as the CDF but keeps members far in the upper
    tail distinct (the CDF itself rounds to 1 beyond about 8 standard deviations).
    """
    fit = moments(values, member, variance)
    return log_ndtr((target - fit.mean_out) / np.sqrt(fit.var_out)).sum(axis=0)


def online_score(target: np.ndarray, values: np.ndarray, member: np.ndarray,
                 variance: str) -> np.ndarray:
    """``sum_a [log N(s_a; mu_in, s_in^2) - log N(s_a; mu_out, s_out^2)]``."""
    fit = moments(values, member, variance)
    log_in = _log_normal_pdf(target, fit.mean_in, fit.var_in)
    log_out = _log_normal_pdf(target, fit.mean_out, fit.var_out)
    return (log_in - log_out).sum(axis=0)


def _log_normal_pdf(x: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    return -0.5 * ((x - mean) ** 2 / var + np.log(2 * np.pi * var))


def lira_quantiles(ctx: AttackContext, taus: np.ndarray,
                   variance: Variance = "per_example",
                   statistic: ScoreStatistic = "logit_confidence",
                   **_: object) -> tuple[np.ndarray, np.ndarray]:
    """LiRA's implied threshold: the ``taus`` quantiles of each sample's OUT Gaussian,
    ``mu_out + s_out Phi^-1(tau)`` (QMIA's pinball comparison), on the first query."""
    from scipy.special import ndtri  # the normal quantile, without scipy.stats's import

    fit = moments(ctx.reference_statistic(statistic), ctx.reference_in(), variance)
    spread = np.sqrt(fit.var_out[0])[:, None] * ndtri(taus)[None]
    return ctx.target_statistic(statistic)[0], fit.mean_out[0][:, None] + spread


@register("lira", needs_references=True, quantiles=lira_quantiles)
def lira(ctx: AttackContext, mode: Literal["online", "offline"] = "online",
         variance: Variance = "per_example",
         statistic: ScoreStatistic = "logit_confidence") -> np.ndarray:
    """LiRA (Carlini et al. 2022): Gaussian likelihood ratio of IN/OUT reference statistics.

    ``mode="online"`` needs IN reference models (each sample IN for about half of them) and
    raises if every reference model is OUT for every audited sample. A sample with no IN model
    takes the OUT mean plus the average IN-minus-OUT shift of the other samples, and the pooled
    IN variance. ``mode="offline"`` uses only the models that did not train on each sample.
    ``statistic`` is ``logit_confidence`` (``log p_y - log sum_{y' != y} p_y'``, Carlini's
    choice), ``hinge`` (BMIA, QMIA) or ``loss`` (IHA's description; scored as ``-loss``).
    """
    member = ctx.reference_in()
    values = ctx.reference_statistic(statistic)
    target = ctx.target_statistic(statistic)
    if mode == "offline":
        return offline_score(target, values, member, variance)
    require_in_references(member, "online LiRA")
    return online_score(target, values, member, variance)
