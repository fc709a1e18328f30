"""Attacks that need no reference model: a global threshold on one statistic of the target.

LOSS (Yeom et al.), Attack-P (Ye et al.; BMIA's baseline on the hinge score), QMIA's "Marginal"
baseline and Subpop's "Yeom" row are all this one attack with a different statistic: the score
is the statistic itself, and sweeping the ROC threshold is the global threshold. The naive
attack of Stolen Memories predicts "member" exactly when the target classifies the sample
correctly.
"""

from __future__ import annotations

import numpy as np

from miarepro.attacks.base import AttackContext, register
from miarepro.signals import Statistic


def marginal_quantiles(ctx: AttackContext, taus: np.ndarray, statistic: Statistic = "loss",
                       **_: object) -> tuple[np.ndarray, np.ndarray] | None:
    """The marginal baseline's threshold: one quantile of the statistic over the attacker's
    public non-members, the same for every sample (Yeom et al.; QMIA's Lemma 1); None where
    the split leaves the attacker no public records."""
    if not len(ctx.public):
        return None
    value = ctx.target_statistic(statistic).mean(axis=0)
    public = ctx.target_statistic(statistic, ctx.public).mean(axis=0)
    return value, np.broadcast_to(np.quantile(public, taus), (len(value), len(taus)))


@register("marginal", quantiles=marginal_quantiles)
def marginal(ctx: AttackContext, statistic: Statistic = "loss") -> np.ndarray:
    """Global threshold on one target statistic (LOSS, Attack-P, Marginal, Yeom)."""
    return ctx.target_statistic(statistic).mean(axis=0)


@register("naive", threshold=0.5)
def naive(ctx: AttackContext) -> np.ndarray:
    """Member if and only if the target predicts the label correctly (label-only)."""
    return ctx.target_statistic("correct")[0]
