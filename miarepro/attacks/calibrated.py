"""Difficulty-calibrated loss attacks, as Subpop compares them: Watson et al. (2021) and
Sablayrolles et al. (2019).

Both subtract from the target's loss what the loss of the sample usually is, estimated with
shadow (reference) models, so that hard non-members no longer look like non-members and easy
ones no longer look like members. Subpop uses the loss as the base score for both (§5.1).
"""

from __future__ import annotations

import numpy as np

from miarepro.attacks.base import AttackContext, register
from miarepro.attacks.reference import moments, require_in_references
from miarepro.signals import Statistic


def _calibration(ctx: AttackContext, statistic: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Target statistic ``(N,)``, reference statistics ``(K, 1, N)`` and IN mask, over queries."""
    values = ctx.reference_statistic(statistic).mean(axis=1, keepdims=True)
    return ctx.target_statistic(statistic).mean(axis=0), values, ctx.reference_in()


@register("watson", needs_references=True)
def watson(ctx: AttackContext, statistic: Statistic = "loss") -> np.ndarray:
    """Watson et al. (2021) difficulty calibration: ``mean_OUT loss_ref(x) - loss_target(x)``.

    Only shadow models that did not train on ``x`` are used (Subpop Eq. 2), so no model has to
    be retrained for a new sample. With another ``statistic`` ``s`` (member-high) the score is
    ``s_target(x) - mean_OUT s_ref(x)``.
    """
    target, values, member = _calibration(ctx, statistic)
    return target - moments(values, member).mean_out[0]


@register("sablayrolles", needs_references=True)
def sablayrolles(ctx: AttackContext, statistic: Statistic = "loss") -> np.ndarray:
    """Sablayrolles et al. (2019) calibrated loss: ``tau(x) - loss_target(x)`` with IN and OUT.

    Their per-sample threshold ``tau(x)`` is estimated from shadow models trained with and
    without ``x``; Subpop reconstructs it as the average loss over both kinds (Eq. 1). We take
    ``tau(x) = (mean_IN loss(x) + mean_OUT loss(x)) / 2``, the midpoint of the two class means,
    which equals Subpop's pooled average when the masks are balanced and does not drift when a
    sample happens to be IN for more models than OUT. A sample with no IN (or OUT) model takes
    that mean from the other group shifted by the average IN-minus-OUT difference. Raises if
    no reference model trained on any audited sample.
    """
    target, values, member = _calibration(ctx, statistic)
    require_in_references(member, "Sablayrolles et al.'s calibration")
    fit = moments(values, member)
    return target - 0.5 * (fit.mean_in[0] + fit.mean_out[0])
