"""CatBoost models: QMIA's tabular targets and its tabular quantile regressor.

Targets (``model: {arch: catboost, ...}``) are multi-class CatBoost classifiers whose raw
scores are the logits; their signals are log-probabilities on every record, so every black-box
attack runs on them unchanged. With ``trials > 0`` each model tunes its own hyperparameters by
optuna with ``folds``-fold cross-validated log-loss on its own training set (QMIA §3.5: 5-fold CV
on the private data; the paper gives no ranges: :data:`TARGET_SPACE`). Reference models
train the same way, as shadow models copy the target's training procedure.

Every model is seeded, never writes ``catboost_info/`` and uses the thread count of its job.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

#: The targets' own search. The paper gives no ranges for it; these are CatBoost's usual
#: working ranges. Table 5's (depth up to 10, 1,000 trees) are for the regressor: a 10-trial
#: 5-fold search over them takes 10 minutes for one 4-class target on 2,000 records (1 thread).
TARGET_SPACE = {"depth": {"low": 2, "high": 8},
                "learning_rate": {"low": 1e-2, "high": 0.3, "log": True},
                "l2_leaf_reg": {"low": 1.0, "high": 30.0, "log": True},
                "iterations": {"low": 50, "high": 500, "log": True}}


class Diverged(ArithmeticError):
    """Training blew up: its loss went to infinity, so there is no model to keep (a search
    trial with a large step and little regularisation; :mod:`miarepro.search` drops it)."""


def _common(seed: int, threads: int) -> dict[str, Any]:
    return {"random_seed": seed, "thread_count": threads, "verbose": 0,
            "allow_writing_files": False}


def _tree_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """CatBoost keywords of a recipe; subsampling needs Bernoulli bagging to apply."""
    params = {key: settings[key] for key in ("iterations", "depth", "learning_rate",
                                             "l2_leaf_reg", "border_count") if key in settings}
    for key in ("iterations", "depth", "border_count"):  # a search may hand back floats
        if key in params:
            params[key] = int(params[key])
    if "subsample" in settings:
        params.update(bootstrap_type="Bernoulli", subsample=float(settings["subsample"]))
    return params


def classifier(X: np.ndarray, y: np.ndarray, n_classes: int, settings: dict[str, Any],
               seed: int, threads: int) -> Any:
    """A fitted multi-class CatBoost classifier (MultiClass loss even for two classes, so its
    raw scores are one logit per class)."""
    from catboost import CatBoostClassifier

    model = CatBoostClassifier(loss_function="MultiClass", class_names=list(range(n_classes)),
                               **_tree_settings(settings), **_common(seed, threads))
    return model.fit(X, y)


def logits(model: Any, X: np.ndarray) -> np.ndarray:
    """``(1, M, C)`` float32 logits (CatBoost's raw multi-class scores), one query."""
    raw = np.asarray(model.predict(X, prediction_type="RawFormulaVal"), dtype=np.float64)
    return raw[None].astype(np.float32)


def cross_validated_loss(X: np.ndarray, y: np.ndarray, n_classes: int,
                         settings: dict[str, Any], folds: int, seed: int, threads: int) -> float:
    """Mean held-out log-loss over stratified ``folds`` folds of ``(X, y)``."""
    from scipy.special import log_softmax
    from sklearn.model_selection import StratifiedKFold

    losses = []
    splitter = StratifiedKFold(folds, shuffle=True, random_state=seed % 2**31)
    for train, test in splitter.split(X, y):
        model = classifier(X[train], y[train], n_classes, settings, seed, threads)
        log_p = log_softmax(logits(model, X[test])[0].astype(np.float64), axis=1)
        losses.append(-log_p[np.arange(len(test)), y[test]].mean())
    return float(np.mean(losses))


def train_target(X: np.ndarray, y: np.ndarray, n_classes: int, spec: dict[str, Any], seed: int,
                 threads: int) -> tuple[Any, dict[str, Any]]:
    """Train one CatBoost model from its ``model`` spec, searching first if ``trials > 0``.

    Unset keys take the defaults that :func:`miarepro.models.catboost` documents. Returns the
    model and what its card records (chosen settings, the search's trial log).
    """
    from miarepro.models import catboost
    from miarepro.options import parameters

    spec = {**{p.name: p.default for p in parameters(catboost, skip=2)}, **spec}
    settings = {k: v for k, v in spec.items() if k not in ("arch", "trials", "folds", "space")}
    info: dict[str, Any] = {}
    if spec["trials"]:
        from miarepro import search

        space = spec["space"] or TARGET_SPACE
        chosen, trial_log = search.run(
            lambda params, _report: cross_validated_loss(
                X, y, n_classes, {**settings, **params}, spec["folds"], seed, threads),
            space, spec["trials"], seed)
        settings.update(chosen)
        info["search"] = {"space": space, "chosen": chosen, "trials": trial_log,
                          "folds": spec["folds"]}
    info["settings"] = settings
    return classifier(X, y, n_classes, settings, seed, threads), info


def fit_quantiles(X: np.ndarray, scores: np.ndarray, head: str, taus: np.ndarray,
                  recipe: dict[str, Any], seed: int, X_val: np.ndarray,
                  loss_of: Callable[[np.ndarray], float]
                  ) -> tuple[Callable, list[float], str]:
    """QMIA's tabular regressor, cut to the number of trees with the lowest validation loss.

    ``loss_of`` scores raw outputs on ``X_val``: ``(n, 2)`` ``(mu, log sigma)`` for the
    Gaussian head (``RMSEWithUncertainty``, whose raw second output is the log standard
    deviation) or ``(n, L)`` quantiles (``MultiQuantile``; CatBoost needs levels strictly
    inside (0, 1), so 0 becomes 1e-4). It is evaluated after every ``iterations / 50``
    trees. Returns ``X -> raw outputs`` of the cut model, the loss of every stage and which
    stage was kept, in words.
    """
    import torch
    from catboost import CatBoostError, CatBoostRegressor

    if head == "gaussian":
        loss = "RMSEWithUncertainty"
    else:
        alphas = np.clip(taus, 1e-4, 1 - 1e-6)
        loss = "MultiQuantile:alpha=" + ",".join(f"{a:.8g}" for a in alphas)
    model = CatBoostRegressor(loss_function=loss, **_tree_settings(recipe),
                              **_common(seed, torch.get_num_threads()))
    try:
        model.fit(X.reshape(len(X), -1), scores)
    except CatBoostError as error:  # it stops on a degenerate solution, then fails to log inf
        if "invalid float value" in str(error):
            raise Diverged(f"CatBoost's {loss} diverged with {_tree_settings(recipe)}") from error
        raise
    period = max(1, model.tree_count_ // 50)
    stages = [loss_of(np.asarray(out, dtype=np.float64).reshape(len(X_val), -1))
              for out in model.staged_predict(X_val.reshape(len(X_val), -1), eval_period=period,
                                              prediction_type="RawFormulaVal")]
    trees = model.tree_count_
    model.shrink(min(trees, period * (int(np.argmin(stages)) + 1)))

    def raw(features: np.ndarray) -> np.ndarray:
        out = model.predict(features.reshape(len(features), -1), prediction_type="RawFormulaVal")
        return np.asarray(out, dtype=np.float64).reshape(len(features), -1)

    return raw, stages, f"{model.tree_count_} of {trees} trees"
