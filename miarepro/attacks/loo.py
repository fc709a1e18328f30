"""Leave-one-out reference attacks, as IHA (Suri et al.) evaluates them: the L-attack of Ye et
al. (2022) and LiRA-L.

The workflow trains, for each of a configurable number of records ``x``, ``J`` models on the
target's training set without ``x`` and restricts the audit set to those records;
``ctx.loo_logits`` holds their logits ``(N, J, A, C)``. Those models are exactly the OUT
distribution for ``x`` with every other training record held fixed, the strongest reference a
black-box attacker can have (IHA Table 1, "leave-one-out knowledge").
"""

from __future__ import annotations

import numpy as np

from miarepro.attacks.base import AttackContext, register
from miarepro.attacks.lira import offline_score
from miarepro.attacks.reference import Variance, loo_statistic, quantile_score
from miarepro.signals import ScoreStatistic


@register("l_attack", needs_loo=True)
def l_attack(ctx: AttackContext, statistic: ScoreStatistic = "loss") -> np.ndarray:
    """L-attack (Ye et al. 2022): quantile of the target's loss among leave-one-out losses.

    The threshold at FPR ``alpha`` is the ``alpha``-quantile of the LOO models' losses, taken
    as in Attack-R (:func:`miarepro.attacks.reference.quantile_score`), so the ROC score is the
    target's percentile among them. Queries are averaged.
    """
    values = loo_statistic(ctx, statistic).mean(axis=1)
    target = ctx.target_statistic(statistic).mean(axis=0)
    return quantile_score(values, np.ones(values.shape, dtype=bool), target, statistic)


@register("lira_l", needs_loo=True)
def lira_l(ctx: AttackContext, variance: Variance = "per_example",
           statistic: ScoreStatistic = "loss") -> np.ndarray:
    """LiRA-L (IHA): offline LiRA with the leave-one-out models as the OUT distribution.

    One-sided Gaussian test ``sum_a log Phi((s_a - mu_LOO,a) / s_LOO,a)``, scored as
    :func:`miarepro.attacks.lira.offline_score` keeps its tail apart; the loss is the default
    statistic because IHA describes its LiRA baselines on loss scores (matrix A20).
    """
    values = loo_statistic(ctx, statistic)
    member = np.zeros((values.shape[0], values.shape[2]), dtype=bool)
    return offline_score(ctx.target_statistic(statistic), values, member, variance)
