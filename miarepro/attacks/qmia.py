"""QMIA of Bertran et al. (2024), "Scalable Membership Inference Attacks via Quantile Regression".

No reference model: a regressor ``q(x)`` learns, on public data known not to be members (the
study's population), the conditional distribution of the target's hinge score, and a sample is
flagged at FPR ``a`` when its score reaches ``q_{1-a}(x)`` (:mod:`miarepro.quantile`). The
fit (a ``fit`` job per target) predicts the distribution for every record once; scoring only
compares. Choices where the paper is silent, each also in the studies' deviations:

- the regressor sees ``x`` only, not the label (the authors' code default);
- the Gaussian head is trained on the Gaussian negative log-likelihood (the code's loss);
- no hyperparameter search yet: AdamW, 15 epochs at batch 64, the values Table 4's search
  settled on (Table 4's search itself is not run);
- the default backbone is a small CNN for images and an MLP with two hidden layers of 512
  (the head Table 4's search always chose) for tabular data, instead of ConvNeXt-Tiny.

Scores: the Gaussian head gives ``(s - mu(x)) / sigma(x)``, whose threshold at
``Phi^-1(1-a)`` is ``q_{1-a}``; the quantile head gives the (interpolated) number of levels the
score reaches. Both trace QMIA's ROC level by level.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np

from miarepro import quantile, signals
from miarepro.attacks.base import AttackContext, StudyHandle, register
from miarepro.models import ArchitectureSpec
from miarepro.options import Range

IMAGE_BACKBONE = {"arch": "cnn", "filters": [16, 32]}
TABULAR_BACKBONE = {"arch": "mlp", "widths": [512, 512]}


def fit_qmia(study: StudyHandle, group: int, head: quantile.Head = "gaussian",
             backbone: Annotated[dict | None, ArchitectureSpec()] = None,
             epochs: Annotated[int, Range(1)] = 15,
             lr: Annotated[float, Range(0, low_open=True)] = 1e-3,
             weight_decay: Annotated[float, Range(0)] = 1e-4,
             batch_size: Annotated[int, Range(1)] = 64,
             levels: Annotated[int, Range(2)] = 41) -> tuple[dict[str, np.ndarray],
                                                              dict[str, Any]]:
    """Fit the quantile regressor of target ``group`` on its population (public non-members)."""
    features, labels = study.features(), study.labels()
    hinge = signals.hinge(study.signals("target", group)[0], labels)
    public = study.parts(group)["population"]
    if len(public) < 2:
        raise ValueError("QMIA trains on public non-members: the study's split has no "
                         "population (split.fractions.population)")
    architecture = backbone or (IMAGE_BACKBONE if features.ndim == 4 else TABULAR_BACKBONE)
    taus = quantile.levels(levels)
    recipe = quantile.QuantileRecipe(epochs, lr, weight_decay, batch_size)
    predict = quantile.fit(features[public], hinge[public], architecture, head, taus, recipe,
                           seed=group)
    arrays = predict(features)
    info = {"head": head, "backbone": architecture, "n_public": len(public),
            "recipe": vars(recipe)}
    return {**arrays, "taus": taus}, info


@register("qmia", fit=fit_qmia, fit_scope="target")
def qmia(ctx: AttackContext) -> np.ndarray:
    """QMIA (Bertran et al.): the target's hinge against its predicted non-member quantiles."""
    if ctx.fit is None:
        raise ValueError("QMIA needs its fit (the quantile regressor's predictions)")
    score = ctx.target_statistic("hinge")[0]
    if "mu" in ctx.fit:
        return (score - ctx.fit["mu"][ctx.audit]) / ctx.fit["sigma"][ctx.audit]
    return quantile.exceedance_score(score, ctx.fit["quantiles"][ctx.audit])
