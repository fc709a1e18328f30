"""Attack-R of Ye et al. (2022), "Enhanced Membership Inference Attacks against Machine Learning
Models": a per-sample threshold taken from reference models that did not train on the sample.

For a target FPR ``alpha`` the attack flags ``x`` when the target's loss is below the
``alpha``-quantile of the OUT reference losses of ``x``, linearly interpolated after appending
the loss range ``[0, 1000]``, exactly as the authors' ML Privacy Meter code
(``linear_itp_threshold_func``) does, and sweeps ``alpha`` for the ROC. The score returned here
is the percentile of the target within those values, so thresholding it at ``1 - alpha`` makes
the same decision for every ``alpha`` (:func:`miarepro.attacks.reference.quantile_score`).

With ``n`` OUT models the reference values alone resolve FPRs only down to about
``1 / (n + 1)``; the appended range ends rank the samples beyond every reference value by how
far beyond they are, which is what the authors' sweep does at its smallest ``alpha``.
"""

from __future__ import annotations

import numpy as np

from miarepro.attacks.base import AttackContext, register
from miarepro.attacks.reference import quantile_score
from miarepro.signals import ScoreStatistic


@register("attack_r", needs_references=True)
def attack_r(ctx: AttackContext, statistic: ScoreStatistic = "loss") -> np.ndarray:
    """Attack-R (Ye et al. 2022): quantile of the target statistic among OUT reference ones.

    ``statistic`` is the loss, as Ye et al. use it (BMIA does not say which score its Attack-R
    used), or ``hinge`` / ``logit_confidence`` with a symmetric range of +-1000 appended.
    Queries (augmentations) are averaged. A sample without any OUT model is ranked within the
    range ends alone.
    """
    values = ctx.reference_statistic(statistic).mean(axis=1)
    target = ctx.target_statistic(statistic).mean(axis=0)
    return quantile_score(values, ~ctx.reference_in(), target, statistic)
