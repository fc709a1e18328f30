"""Conditional quantile models of a score: QMIA's attack-side regressor (Bertran et al. 2024).

A model ``q(x)`` is fitted on public non-members ``(x, s(x, y))`` so that ``s >= q_{1-a}(x)``
happens with probability ``a`` for a non-member (Theorem 1). Two heads, as in the authors'
code: a Gaussian (predict ``mu(x)`` and ``log sigma(x)``, Gaussian negative log-likelihood;
``q_{1-a} = mu + sigma * Phi^-1(1-a)``) and direct multi-quantile regression (one output per
level, pinball loss, levels log-spaced in ``a`` from 1e-4 to 1). The quantiles are sorted at
prediction time (the monotone rearrangement), which the authors' code does only for linearly
spaced levels: sorting changes a prediction only where its quantiles cross, and the
exceedance score needs them in order. The regressor is a backbone (any architecture of
:mod:`miarepro.models`, independent of the target's) with an MLP head, or a CatBoost regressor
on tabular data (``RMSEWithUncertainty`` for the Gaussian head, ``MultiQuantile`` for the
quantile head). Every regressor is selected on a held-out share of the public records by its
pinball loss (:func:`fit`); :func:`search_and_fit` also tunes it with optuna over QMIA's
Tables 4 and 5.

Scores are standardised by the public mean and standard deviation while training, so one
learning rate serves hinge scores of any scale.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

Head = Literal["gaussian", "quantiles"]


def levels(count: int = 41, smallest: float = 1e-4) -> np.ndarray:
    """Quantile levels ``1 - a`` for ``a`` log-spaced from ``smallest`` to 1, increasing."""
    return np.sort(1.0 - np.logspace(np.log10(smallest), 0.0, count))


def pinball(predictions: Any, target: Any, taus: Any) -> Any:
    """Mean pinball loss of ``(n, L)`` predictions of the ``taus`` quantiles of ``(n,)`` targets
    (numpy or torch): ``max(tau (y - q), (tau - 1)(y - q))``."""
    residual = target[:, None] - predictions
    return (residual * (taus - (residual < 0) * 1.0)).mean()


#: How the neural regressor trains when no search runs: AdamW with gradient clipping at 1.0
#: (the authors' code), and the values QMIA's Table 4 search settled on: the [512, 512] head,
#: 2 accumulated batches of 32 (effective batch 64), 10-20 epochs (here the most; the epoch
#: kept is the one with the lowest validation pinball loss, training stops ``patience``
#: epochs after it). Learning rate and weight decay are "near the middle" of their ranges in
#: the paper; these are ours.
TORCH_RECIPE: dict[str, Any] = {"epochs": 15, "lr": 1e-3, "weight_decay": 1e-4,
                                "hidden_dims": [512, 512], "accumulate": 2, "batch_size": 32,
                                "patience": 10}
#: The CatBoost regressor's settings when no search runs: shallower and fewer trees than
#: CatBoost's defaults (1,000 of depth 6), which overfit a few thousand scores and then
#: under-estimate the spread, so flag more than ``a`` of non-members (measured: 8.5% at 5%).
CATBOOST_RECIPE: dict[str, Any] = {"iterations": 100, "depth": 4, "learning_rate": 0.1,
                                   "l2_leaf_reg": 3.0, "subsample": 0.8, "border_count": 254}
#: QMIA Table 4 (image regressors; the exponents' signs, lost in the text, restored).
TABLE4_SPACE = {"lr": {"low": 1e-6, "high": 1e-2, "log": True},
                "weight_decay": {"low": 2e-6, "high": 5e-3, "log": True},
                "hidden_dims": {"choices": [[], [512, 512]]},
                "accumulate": {"choices": [1, 2, 4, 8, 16, 32, 64]},
                "epochs": {"low": 5, "high": 50, "step": 5}}
#: QMIA Table 5 (CatBoost regressor on tabular data).
TABLE5_SPACE = {"depth": {"low": 1, "high": 10},
                "l2_leaf_reg": {"low": 1e-2, "high": 1e6, "log": True},
                "learning_rate": {"low": 1e-6, "high": 1.0, "log": True},
                "subsample": {"low": 1e-2, "high": 1.0, "log": True},
                "iterations": {"low": 1, "high": 1000, "log": True}}
FEATURES = 128  # width of the backbone's output that the MLP head reads


def default_recipe(architecture: dict[str, Any]) -> dict[str, Any]:
    return dict(CATBOOST_RECIPE if architecture["arch"] == "catboost" else TORCH_RECIPE)


def default_space(architecture: dict[str, Any]) -> dict[str, Any]:
    return dict(TABLE5_SPACE if architecture["arch"] == "catboost" else TABLE4_SPACE)


def adamw(model: Any, recipe: dict[str, Any]) -> Any:
    """AdamW at the recipe's rate, decaying the weights only: Table 4's weight decay is "l2
    weight regularization (excluding biases)"."""
    import torch

    named = list(model.named_parameters())
    return torch.optim.AdamW(
        [{"params": [p for name, p in named if not name.endswith("bias")]},
         {"params": [p for name, p in named if name.endswith("bias")], "weight_decay": 0.0}],
        lr=recipe["lr"], weight_decay=recipe["weight_decay"])


def check_recipe(recipe: dict[str, Any], architecture: dict[str, Any], what: str) -> None:
    """Every key of ``recipe`` (or of a search space) must be a setting of the backbone."""
    known = default_recipe(architecture)
    for key in recipe:
        if key not in known:
            from miarepro.options import unknown

            raise ValueError(f"{what}.{key}: " + unknown(
                "setting", key, known, f"a {architecture['arch']} quantile regressor"))


Predictor = Callable[[np.ndarray], dict[str, np.ndarray]]


def holdout(n: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(train, validation)`` rows: a seeded ``fraction`` of ``n`` public records held out."""
    order = np.random.default_rng([seed, 7]).permutation(n)
    n_val = min(n - 1, max(1, round(fraction * n)))
    return np.sort(order[n_val:]), np.sort(order[:n_val])


def fit(X: np.ndarray, scores: np.ndarray, architecture: dict[str, Any], head: Head,
        taus: np.ndarray, recipe: dict[str, Any], seed: int,
        validation_fraction: float = 0.2) -> tuple[Predictor, dict[str, Any]]:
    """Train the regressor on public ``(X, scores)``, selected on a held-out share of them.

    A seeded ``validation_fraction`` of the records is held out; the rest trains, and the
    model kept is the one with the lowest validation pinball loss: the best epoch of a neural
    regressor, the best number of trees of a CatBoost one (the paper selects its regressors
    on held-out pinball loss; without it a regressor of a few thousand records memorises
    their scores and its thresholds flag far more than ``a`` of fresh non-members). Returns
    the predictor and the selection's record. See :func:`train_selected` for the arrays.
    """
    train, val = holdout(len(scores), validation_fraction, seed)
    return train_selected(X[train], scores[train], X[val], scores[val], architecture, head,
                          taus, recipe, seed)


def train_selected(X: np.ndarray, scores: np.ndarray, X_val: np.ndarray, val_scores: np.ndarray,
                   architecture: dict[str, Any], head: Head, taus: np.ndarray,
                   recipe: dict[str, Any], seed: int,
                   report: Callable[[int, float], None] | None = None
                   ) -> tuple[Predictor, dict[str, Any]]:
    """Train on ``(X, scores)`` and keep the stage with the lowest pinball loss on the
    validation records; returns a callable ``X -> arrays`` and the selection's record (the
    validation loss of every stage, the one kept, the two sizes).

    The arrays are ``{"mu", "sigma"}`` for the Gaussian head and ``{"quantiles"}`` (``(n, L)``,
    sorted) for the quantile head, in the scores' own units. ``report(epoch, loss)`` is called
    after every epoch of a neural regressor (a search's pruner reads it).
    """
    recipe = {**default_recipe(architecture), **recipe}
    center, scale = float(scores.mean()), float(scores.std()) or 1.0

    def arrays(out: np.ndarray, shift: float = 0.0, factor: float = 1.0) -> dict[str, np.ndarray]:
        if head == "gaussian":
            return {"mu": shift + factor * out[:, 0], "sigma": factor * np.exp(out[:, 1])}
        return {"quantiles": shift + factor * np.sort(out, axis=1)}

    standard_val = (val_scores - center) / scale

    def loss_of(out: np.ndarray) -> float:  # validation pinball loss in standardised units
        return validation_loss(arrays(out), standard_val, taus)

    if architecture["arch"] == "catboost":
        from miarepro import boosting

        raw, stages, kept = boosting.fit_quantiles(X, (scores - center) / scale, head, taus,
                                                   recipe, seed, X_val, loss_of)
    else:
        raw, stages, kept = _fit_torch(X, (scores - center) / scale, X_val, architecture, head,
                                       taus, recipe, seed, loss_of, report)
    selection = {"validation_loss": min(stages) * scale, "kept": kept,
                 "validation_losses": [round(loss * scale, 6) for loss in stages],
                 "n_train": len(scores), "n_validation": len(val_scores)}
    return (lambda features: arrays(raw(features), center, scale)), selection


def _fit_torch(X: np.ndarray, targets_np: np.ndarray, X_val: np.ndarray,
               architecture: dict[str, Any], head: Head, taus: np.ndarray,
               recipe: dict[str, Any], seed: int, loss_of: Callable[[np.ndarray], float],
               report: Callable[[int, float], None] | None
               ) -> tuple[Callable, list[float], str]:
    """The neural regressor: the backbone (any :mod:`miarepro.models` architecture, ending in
    :data:`FEATURES` outputs), then an MLP head with ``hidden_dims`` (Table 4). Trains for
    ``epochs`` at most, stopping after ``patience`` epochs without a lower validation loss,
    and keeps the weights of the best epoch. Returns the raw outputs in standardised units,
    ``(mu, log sigma)`` or one column per level, the validation loss of every epoch and which
    epoch was kept, in words."""
    import copy

    import torch
    from torch import nn

    from miarepro.models import build_model, mlp
    from miarepro.training import device

    dev = device()  # the GPU where there is one; the batch order is drawn on the CPU alike
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    outputs = 2 if head == "gaussian" else len(taus)
    model = nn.Sequential(build_model(architecture, tuple(X.shape[1:]), FEATURES), nn.ReLU(),
                          mlp((FEATURES,), outputs, list(recipe["hidden_dims"]))).to(dev)
    optimizer = adamw(model, recipe)
    inputs = torch.as_tensor(X, dtype=torch.float32, device=dev)
    targets = torch.as_tensor(targets_np, dtype=torch.float32, device=dev)
    levels_t = torch.as_tensor(taus, dtype=torch.float32, device=dev)
    batch_size = int(recipe["batch_size"]) * int(recipe["accumulate"])

    def raw(features: np.ndarray) -> np.ndarray:
        model.eval()
        with torch.no_grad():
            return torch.cat([model(torch.as_tensor(features[i : i + 4096], dtype=torch.float32,
                                                    device=dev)).cpu()
                              for i in range(0, len(features), 4096)]).double().numpy()

    losses: list[float] = []
    best, best_state = 0, None
    for epoch in range(int(recipe["epochs"])):
        model.train()
        order = torch.randperm(len(inputs), generator=generator).to(dev)
        for start in range(0, len(order), batch_size):
            batch = order[start : start + batch_size]
            output = model(inputs[batch])
            if head == "gaussian":
                mu, log_sigma = output[:, 0], output[:, 1]
                loss = (log_sigma + 0.5 * torch.exp(-2 * log_sigma)
                        * (targets[batch] - mu) ** 2).mean()
            else:
                loss = pinball(output, targets[batch], levels_t)
            optimizer.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
        losses.append(loss_of(raw(X_val)))
        if report is not None:
            report(epoch, losses[-1])
        if losses[-1] < losses[best] or best_state is None:
            best, best_state = epoch, copy.deepcopy(model.state_dict())
        elif epoch - best >= int(recipe["patience"]):
            break
    model.load_state_dict(best_state)
    model.eval()
    return raw, losses, f"epoch {best + 1} of {len(losses)}"


def validation_loss(arrays: dict[str, np.ndarray], scores: np.ndarray,
                    taus: np.ndarray) -> float:
    """Mean pinball loss over all levels of predicted quantiles on held-out scores: what
    selection minimises (Table 4's "validation pinball loss"), for either head. Level 0 (the
    Gaussian's -inf) carries no information and is left out; the quantile head's columns are
    still looked up among all of ``taus``, one per level."""
    kept = taus[(taus > 0) & (taus < 1)]
    predicted = np.stack([quantile_at(arrays, tau, taus) for tau in kept], axis=1)
    return float(pinball(predicted, scores, kept))


def search_and_fit(X: np.ndarray, scores: np.ndarray, architecture: dict[str, Any], head: Head,
                   taus: np.ndarray, recipe: dict[str, Any], space: dict[str, Any],
                   trials: int, seed: int, validation_fraction: float = 0.2
                   ) -> tuple[Predictor, dict[str, Any]]:
    """Search ``space`` for the recipe with the lowest validation pinball loss.

    ``(X, scores)`` are the attacker's public non-members only: the held-out share of
    :func:`fit` scores every trial (and selects its stage), the rest trains. The best trial's
    regressor is kept (not refitted), as a Ray Tune search keeps its best checkpoint. Returns
    it and a record of the search: space, chosen values, trial log, the best selection.
    """
    from miarepro import search

    search.check_space(space)
    check_recipe(space, architecture, "space")
    train, val = holdout(len(scores), validation_fraction, seed)
    best: dict[str, Any] = {}

    def objective(params: dict[str, Any], report: Callable[[int, float], None]) -> float:
        predict, selection = train_selected(X[train], scores[train], X[val], scores[val],
                                            architecture, head, taus, {**recipe, **params},
                                            seed, report)
        if selection["validation_loss"] < best.get("selection", {}).get("validation_loss",
                                                                         np.inf):
            best.update(selection=selection, predict=predict)
        return selection["validation_loss"]

    chosen, trial_log = search.run(objective, space, trials, seed)
    return best["predict"], {"space": space, "chosen": chosen, "trials": trial_log,
                             "validation_loss": best["selection"]["validation_loss"],
                             "n_validation": len(val), "selection": best["selection"]}


def quantile_at(arrays: dict[str, np.ndarray], tau: float,
                taus: np.ndarray | None = None) -> np.ndarray:
    """The predicted ``tau`` quantile of each row: ``mu + sigma Phi^-1(tau)`` or the level
    nearest ``tau`` of the quantile head."""
    from scipy import stats

    if "mu" in arrays:
        return arrays["mu"] + arrays["sigma"] * stats.norm.ppf(tau)
    return arrays["quantiles"][:, int(np.argmin(np.abs(taus - tau)))]


def exceedance_score(score: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """How many of a row's sorted quantiles ``score`` reaches, with linear interpolation
    between the two it falls between: the level index at which QMIA first flags the sample.

    Sweeping a threshold over it traces QMIA's ROC level by level. Beyond the last quantile
    (and below the first) the score keeps growing with the distance, logarithmically in units
    of the nearest gap between quantiles, so samples flagged at every level still rank by
    their margin instead of tying (members of an overfit target often pass every level).
    """
    n_levels = quantiles.shape[1]
    count = (score[:, None] >= quantiles).sum(axis=1)
    rows = np.arange(len(score))
    below = quantiles[rows, np.clip(count - 1, 0, n_levels - 1)]
    above = quantiles[rows, np.clip(count, 0, n_levels - 1)]
    gap = np.where(above > below, above - below, 1.0)
    first_gap = np.maximum(quantiles[:, 1] - quantiles[:, 0], 1e-12)
    last_gap = np.maximum(quantiles[:, -1] - quantiles[:, -2], 1e-12)
    under = -np.log1p(np.maximum(quantiles[:, 0] - score, 0) / first_gap)
    over = n_levels - 1 + np.log1p(np.maximum(score - quantiles[:, -1], 0) / last_gap)
    return np.where(count == 0, under,
                    np.where(count == n_levels, over, count - 1 + (score - below) / gap))
