"""Conditional quantile models of a score: QMIA's attack-side regressor (Bertran et al. 2024).

A model ``q(x)`` is fitted on public non-members ``(x, s(x, y))`` so that ``s >= q_{1-a}(x)``
happens with probability ``a`` for a non-member (Theorem 1). Two heads, as in the authors'
code: a Gaussian (predict ``mu(x)`` and ``log sigma(x)``, Gaussian negative log-likelihood;
``q_{1-a} = mu + sigma * Phi^-1(1-a)``) and direct multi-quantile regression (one output per
level, pinball loss, levels log-spaced in ``a`` from 1e-4 to 1, quantiles sorted at prediction
time: the monotone rearrangement). The backbone is any architecture of :mod:`miarepro.models`
with the head's width as its output size; it does not depend on the target's architecture.

Scores are standardised by the public mean and standard deviation while training, so one
learning rate serves hinge scores of any scale.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class QuantileRecipe:
    """How the regressor trains: AdamW with gradient clipping at 1.0 (the authors' code)."""

    epochs: int = 15
    lr: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 64


def fit(X: np.ndarray, scores: np.ndarray, architecture: dict[str, Any], head: Head,
        taus: np.ndarray, recipe: QuantileRecipe, seed: int) -> Any:
    """Train the regressor on ``(X, scores)``; returns a callable ``X -> arrays``.

    The arrays are ``{"mu", "sigma"}`` for the Gaussian head and ``{"quantiles"}`` (``(n, L)``,
    sorted) for the quantile head, in the scores' own units.
    """
    import torch

    from miarepro.models import build_model

    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    center, scale = float(scores.mean()), float(scores.std()) or 1.0
    outputs = 2 if head == "gaussian" else len(taus)
    model = build_model(architecture, tuple(X.shape[1:]), outputs)
    optimizer = torch.optim.AdamW(model.parameters(), lr=recipe.lr,
                                  weight_decay=recipe.weight_decay)
    inputs = torch.as_tensor(X, dtype=torch.float32)
    targets = torch.as_tensor((scores - center) / scale, dtype=torch.float32)
    levels_t = torch.as_tensor(taus, dtype=torch.float32)
    model.train()
    for _ in range(recipe.epochs):
        order = torch.randperm(len(inputs), generator=generator)
        for start in range(0, len(order), recipe.batch_size):
            batch = order[start : start + recipe.batch_size]
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
    model.eval()

    def predict(features: np.ndarray) -> dict[str, np.ndarray]:
        with torch.no_grad():
            out = torch.cat([model(torch.as_tensor(features[i : i + 4096], dtype=torch.float32))
                             for i in range(0, len(features), 4096)]).double().numpy()
        if head == "gaussian":
            return {"mu": center + scale * out[:, 0], "sigma": scale * np.exp(out[:, 1])}
        return {"quantiles": center + scale * np.sort(out, axis=1)}

    return predict


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
    (and below the first) the score keeps increasing with the distance, in units of the nearest
    gap between quantiles, so samples flagged at every level still rank by their margin.
    """
    n_levels = quantiles.shape[1]
    count = (score[:, None] >= quantiles).sum(axis=1)
    rows = np.arange(len(score))
    below = quantiles[rows, np.clip(count - 1, 0, n_levels - 1)]
    above = quantiles[rows, np.clip(count, 0, n_levels - 1)]
    gap = np.where(above > below, above - below, 1.0)
    first_gap = np.maximum(quantiles[:, 1] - quantiles[:, 0], 1e-12)
    last_gap = np.maximum(quantiles[:, -1] - quantiles[:, -2], 1e-12)
    under = -(1 - np.exp(np.minimum(score - quantiles[:, 0], 0) / first_gap))
    over = n_levels - np.exp(np.minimum(quantiles[:, -1] - score, 0) / last_gap)
    return np.where(count == 0, under,
                    np.where(count == n_levels, over, count - 1 + (score - below) / gap))
