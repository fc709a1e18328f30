"""Attack-R of Ye et al. (2022), "Enhanced Membership Inference Attacks against Machine Learning
Models": a per-sample threshold taken from reference models that did not train on the sample.

For a target FPR ``alpha`` the attack flags ``x`` when the target's statistic exceeds the
``(1 - alpha)``-quantile of the OUT reference statistics of ``x``. Sweeping ``alpha`` is the
same as ranking samples by the percentile of the target statistic within those reference
statistics, which is the score returned here. BMIA runs it with 2, 4 or 8 reference models, so
how the quantile is interpolated matters; see
:func:`miarepro.attacks.reference.percentile_rank`.
"""

from __future__ import annotations

import numpy as np

from miarepro.attacks.base import AttackContext, register
from miarepro.attacks.reference import check_choice, percentile_rank


@register("attack_r", needs_references=True)
def attack_r(ctx: AttackContext, statistic: str = "hinge",
             interpolation: str = "linear") -> np.ndarray:
    """Attack-R (Ye et al. 2022): percentile of the target statistic among OUT reference ones.

    Defaults follow REPRODUCTION-MATRIX A7 (an engineering choice, not stated by BMIA): the
    hinge score, and ``linear`` interpolation of the empirical quantile (numpy's default
    quantile rule, inverted). ``midrank`` counts OUT values strictly below plus half the ties.
    Queries (augmentations) are averaged. Samples without any OUT model score 1/2. With ``n``
    OUT models every target above all of them scores 1, so FPRs below about ``1 / (n + 1)``
    cannot be resolved: a limit of the empirical quantile itself, not of the rule.
    """
    check_choice("interpolation", interpolation, ("linear", "midrank"))
    values = ctx.reference_statistic(statistic).mean(axis=1)
    target = ctx.target_statistic(statistic).mean(axis=0)
    return percentile_rank(values, ~ctx.reference_in(), target, interpolation)
