"""QMIA and its quantile regressor: Theorem 1 on known quantiles, hand cases, separation."""

import dataclasses

import numpy as np
import pytest
from overfit import overfit_context

from miarepro import metrics, quantile
from miarepro.attacks import get_attack

BACKBONE = {"arch": "mlp", "widths": [64, 64]}
RECIPE = quantile.QuantileRecipe(epochs=60, lr=1e-3, weight_decay=0.0, batch_size=128)


def heteroscedastic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores ``sin(2 x0) + (0.2 + |x1|) e``: true conditional quantiles known, spread varying."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, 4)).astype(np.float32)
    return X, np.sin(2 * X[:, 0]) + (0.2 + np.abs(X[:, 1])) * rng.standard_normal(n)


@pytest.fixture(scope="module")
def fitted():
    X, s = heteroscedastic(6000, 0)
    taus = quantile.levels(21, smallest=1e-2)
    heads = {head: quantile.fit(X, s, BACKBONE, head, taus, RECIPE, seed=0)
             for head in ("gaussian", "quantiles")}
    return heads, taus


@pytest.mark.parametrize("head", ["gaussian", "quantiles"])
def test_theorem_1_fpr_at_each_level_is_the_level(fitted, head):
    """Held-out non-members reach the predicted (1 - a) quantile with probability a, overall
    and within the low- and high-spread halves (group-conditional, Theorem 2's point)."""
    heads, taus = fitted
    X, s = heteroscedastic(20000, 1)
    arrays = heads[head](X)
    wide = np.abs(X[:, 1]) > 0.75
    for alpha in (0.05, 0.1, 0.2):
        flagged = s >= quantile.quantile_at(arrays, 1 - alpha, taus)
        error = 3 * np.sqrt(alpha * (1 - alpha) / len(s)) + 0.01  # sampling + fit error
        assert abs(flagged.mean() - alpha) < error, (head, alpha, flagged.mean())
        for group in (wide, ~wide):
            assert abs(flagged[group].mean() - alpha) < 2 * error, (head, alpha)
    # a constant threshold at the same overall FPR over-flags the high-spread group
    constant = s >= np.quantile(s, 0.9)
    assert constant[wide].mean() > 0.13 and constant[~wide].mean() < 0.07


def test_quantile_levels_and_pinball_loss_by_hand():
    taus = quantile.levels(3, smallest=0.01)
    np.testing.assert_allclose(taus, [0.0, 0.9, 0.99])
    loss = quantile.pinball(np.array([[1.0, 2.0]]), np.array([1.5]), np.array([0.1, 0.9]))
    # level 0.1 under-predicts by 0.5: 0.1 * 0.5; level 0.9 over-predicts by 0.5: 0.1 * 0.5
    assert loss == pytest.approx((0.05 + 0.05) / 2)


def test_exceedance_score_is_the_interpolated_level_index():
    q = np.array([[0.0, 1.0, 3.0]] * 5)
    score = quantile.exceedance_score(np.array([0.5, 2.0, 3.0, -1.0, 1e9]), q)
    np.testing.assert_allclose(score[:3], [0.5, 1.5, 2.0])
    assert -1 < score[3] < 0 and 2 < score[4] <= 3
    more = quantile.exceedance_score(np.array([3.5, 4.0]), q[:2])
    assert score[2] < more[0] < more[1] < score[4]  # beyond the last level: ranked by margin


def test_gaussian_score_by_hand():
    ctx = overfit_context()
    few = dataclasses.replace(ctx, audit=ctx.audit[:3], fit={
        "mu": np.full(len(ctx.labels), 1.0), "sigma": np.full(len(ctx.labels), 2.0)})
    hinge = few.target_statistic("hinge")[0]
    np.testing.assert_allclose(get_attack("qmia").fn(few), (hinge - 1.0) / 2.0)


@pytest.mark.parametrize("head", ["gaussian", "quantiles"])
def test_qmia_separates_members_of_an_overfit_target(head):
    from overfit import _data

    ctx = overfit_context()
    X, _ = _data(len(ctx.labels), 0)
    hinge = ctx.target_statistic("hinge", np.arange(len(ctx.labels)))[0]
    taus = quantile.levels(21)
    predict = quantile.fit(X[ctx.population], hinge[ctx.population], BACKBONE, head, taus,
                           RECIPE, seed=0)
    scores = get_attack("qmia").fn(dataclasses.replace(ctx, fit={**predict(X), "taus": taus}))
    assert metrics.auc(ctx.target_mask[ctx.audit], scores) > 0.7
