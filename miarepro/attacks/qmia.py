"""QMIA of Bertran et al. (2024), "Scalable Membership Inference Attacks via Quantile Regression".

No reference model: a regressor ``q(x)`` learns, on public data known not to be members (the
study's population, or its reference pool where it has none: QMIA's 50/50 split), the
conditional distribution of the target's hinge score, and a sample is flagged at FPR ``a`` when
its score reaches ``q_{1-a}(x)`` (:mod:`miarepro.quantile`). The fit (a ``fit`` job per target)
predicts the distribution for every record once; scoring only
compares. With ``trials > 0`` the fit first searches ``space`` (Table 4 for neural
regressors, Table 5 for CatBoost) with optuna, scoring trials on a held-out share of the public
data: never on the audited members or non-members (the authors' code validates on them). The
trial log and chosen values are saved in the fit's card. Choices where the paper is silent,
each also in the studies' deviations:

- the regressor sees ``x`` only, not the label (the authors' code default);
- the Gaussian head is trained on the Gaussian negative log-likelihood (the code's loss);
- without a search: AdamW, 2 x 32 batches, head [512, 512], at most 15 epochs, the values
  Table 4's search settled on (:data:`miarepro.quantile.TORCH_RECIPE`);
- every regressor, searched or not, is selected on the held-out ``validation_fraction`` of
  the public data by its pinball loss (the best epoch, or number of trees): the paper's
  selection criterion. Without it, a regressor of a few thousand records memorised them and
  its 99% quantile flagged a third of fresh non-members;
- the default backbone is a small CNN for images and a linear layer for tabular data, each
  under the MLP head, instead of a pretrained ConvNeXt-Tiny at 224 x 224; a CatBoost
  regressor with ``backbone: {arch: catboost}`` (QMIA's tabular attack).

Scores: the Gaussian head gives ``(s - mu(x)) / sigma(x)``, whose threshold at
``Phi^-1(1-a)`` is ``q_{1-a}``; the quantile head gives the (interpolated) number of levels the
score reaches. Both trace QMIA's ROC level by level.
"""

from __future__ import annotations

from typing import Annotated, Any

import numpy as np

from miarepro import quantile, signals, splits
from miarepro.attacks.base import AttackContext, StudyHandle, register
from miarepro.models import ArchitectureSpec, SearchSpace
from miarepro.options import Range, unknown

IMAGE_BACKBONE = {"arch": "cnn", "filters": [16, 32]}
TABULAR_BACKBONE = {"arch": "mlp", "widths": []}


class Backbone(ArchitectureSpec):
    """A neural backbone of :mod:`miarepro.models`, or ``{arch: catboost}``: the
    regressor's settings then come from ``recipe``, not the spec."""

    def check(self, value: Any, where: str) -> None:
        if value is not None and value.get("arch") == "catboost":
            if set(value) != {"arch"}:
                raise ValueError(f"{where}: a catboost regressor takes its settings from "
                                 "'recipe' (iterations, depth, ...), not from the backbone")
            return
        super().check(value, where)


class RecipeSettings:
    """``recipe``: settings of the neural regressor or of the CatBoost one."""

    def check(self, value: Any, where: str) -> None:
        known = {**quantile.TORCH_RECIPE, **quantile.CATBOOST_RECIPE}
        for key in value or {}:
            if key not in known:
                raise ValueError(f"{where}.{key}: " + unknown("setting", key, known,
                                                             "a quantile regressor"))


def fit_qmia(study: StudyHandle, group: int, head: quantile.Head = "gaussian",
             backbone: Annotated[dict | None, Backbone()] = None,
             recipe: Annotated[dict | None, RecipeSettings()] = None,
             trials: Annotated[int, Range(0)] = 0,
             space: Annotated[dict | None, SearchSpace()] = None,
             validation_fraction: Annotated[float, Range(0, 1, low_open=True,
                                                         high_open=True)] = 0.2,
             levels: Annotated[int, Range(2)] = 41) -> tuple[dict[str, np.ndarray],
                                                              dict[str, Any]]:
    """Fit the quantile regressor of target ``group`` on its public non-members, searching
    its recipe first when ``trials > 0``."""
    features, labels = study.features(), study.labels()
    hinge = signals.hinge(study.signals("target", group)[0], labels)
    public = splits.public(study.parts(group))
    if len(public) < 2:
        raise ValueError("QMIA trains on public non-members: the study's split has neither a "
                         "population nor a reference pool outside the audit")
    architecture = backbone or (IMAGE_BACKBONE if features.ndim == 4 else TABULAR_BACKBONE)
    recipe = dict(recipe or {})
    quantile.check_recipe(recipe, architecture, "recipe")
    taus = quantile.levels(levels)
    info: dict[str, Any] = {"head": head, "backbone": architecture, "n_public": len(public),
                            "recipe": {**quantile.default_recipe(architecture), **recipe}}
    if trials:
        predict, info["search"] = quantile.search_and_fit(
            features[public], hinge[public], architecture, head, taus, recipe,
            space or quantile.default_space(architecture), trials, seed=study.fit_seed(group),
            validation_fraction=validation_fraction)
        info["recipe"].update(info["search"]["chosen"])
        info["selection"] = info["search"].pop("selection")
    else:
        predict, info["selection"] = quantile.fit(features[public], hinge[public], architecture,
                                                  head, taus, recipe, seed=study.fit_seed(group),
                                                  validation_fraction=validation_fraction)
    return {**predict(features), "taus": taus}, info


def qmia_quantiles(ctx: AttackContext, taus: np.ndarray,
                   **_: object) -> tuple[np.ndarray, np.ndarray]:
    """The regressor's predicted quantiles of the hinge at ``taus`` on the audited samples."""
    arrays = {key: value[ctx.audit] for key, value in ctx.fit.items() if key != "taus"}
    thresholds = [quantile.quantile_at(arrays, tau, ctx.fit["taus"]) for tau in taus]
    return ctx.target_statistic("hinge")[0], np.stack(thresholds, axis=1)


@register("qmia", fit=fit_qmia, fit_scope="target", quantiles=qmia_quantiles,
          public_data=True)
def qmia(ctx: AttackContext) -> np.ndarray:
    """QMIA (Bertran et al.): the target's hinge against its predicted non-member quantiles."""
    if ctx.fit is None:
        raise ValueError("QMIA needs its fit (the quantile regressor's predictions)")
    score = ctx.target_statistic("hinge")[0]
    if "mu" in ctx.fit:
        return (score - ctx.fit["mu"][ctx.audit]) / ctx.fit["sigma"][ctx.audit]
    return quantile.exceedance_score(score, ctx.fit["quantiles"][ctx.audit])
