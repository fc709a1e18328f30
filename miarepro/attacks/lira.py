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
from scipy.special import log_ndtr, logsumexp

from miarepro.attacks.base import AttackContext, register
from miarepro.attacks.reference import Variance, moments, require_in_references
from miarepro.signals import ScoreStatistic

#: above this z, ``-log Phi(z)`` equals the upper tail ``Q(z) = Phi(-z)`` to float64 precision
#: (``Q(30)`` is 5e-198, and ``-log(1 - Q) = Q (1 + Q / 2 + ...)``)
_TAIL = 30.0


def offline_score(target: np.ndarray, values: np.ndarray, member: np.ndarray,
                  variance: str) -> np.ndarray:
    """The one-sided test against OUT models, ``sum_a log Phi(z_a)`` with ``z_a = (s_a -
    mu_out,a) / s_out,a``, returned as ``-log(-sum_a log Phi(z_a))``, which ranks exactly as it.

    The sum itself rounds to 0 for every record beyond about 38 standard deviations (the
    CDF to 1 beyond about 8): with two reference models whose statistics nearly agree, z
    reaches thousands, and a block of members and non-members tied at the top took every
    TPR at a low FPR with it. ``log(-log Phi(z))`` is ``log Q(z)`` there, which stays finite
    and strictly decreasing to far beyond any z a float64 holds.
    """
    fit = moments(values, member, variance)
    z = (target - fit.mean_out) / np.sqrt(fit.var_out)
    with np.errstate(divide="ignore"):  # log(0) where -log Phi underflows is replaced below
        log_neg_log_cdf = np.where(z > _TAIL, log_ndtr(-z),
                                   np.log(-log_ndtr(np.minimum(z, _TAIL))))
    return -logsumexp(log_neg_log_cdf, axis=0)


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
