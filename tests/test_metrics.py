import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from miarepro import metrics


@pytest.fixture
def scores():
    rng = np.random.default_rng(0)
    member = rng.random(4000) < 0.5
    return member, rng.normal(size=4000) + 1.2 * member


def test_auc_matches_sklearn(scores):
    member, score = scores
    assert metrics.auc(member, score) == pytest.approx(roc_auc_score(member, score))


def test_tpr_at_fpr_is_conservative_against_brute_force(scores):
    member, score = scores
    for target in (0.001, 0.01, 0.1):
        # brute force over every threshold: best TPR whose FPR does not exceed the target
        best = 0.0
        for threshold in np.unique(score):
            flagged = score >= threshold
            if flagged[~member].mean() <= target:
                best = max(best, flagged[member].mean())
        assert metrics.tpr_at_fpr(member, score, target) == pytest.approx(best)


def test_tpr_at_fpr_hand_case():
    member = np.array([1, 1, 1, 0, 0, 0, 0], dtype=bool)
    score = np.array([0.9, 0.8, 0.3, 0.85, 0.2, 0.1, 0.05])
    # threshold 0.9 -> TPR 1/3, FPR 0; 0.85 -> FPR 1/4 (too high for 10%);
    # threshold 0.3 -> all three members at FPR 1/4
    assert metrics.tpr_at_fpr(member, score, 0.1) == pytest.approx(1 / 3)
    assert metrics.tpr_at_fpr(member, score, 0.25) == pytest.approx(1.0)
    assert metrics.tpr_at_fpr(member, score, 0.0) == pytest.approx(1 / 3)


def test_precision_at_fpr_uses_realised_operating_point():
    member = np.array([1, 1, 1, 0, 0, 0, 0], dtype=bool)
    score = np.array([0.9, 0.8, 0.3, 0.85, 0.2, 0.1, 0.05])
    # at FPR <= 25%: TPR 1 at FPR 1/4 -> precision 1 / (1 + 1/4)
    assert metrics.precision_at_fpr(member, score, 0.25) == pytest.approx(0.8)
    assert metrics.precision_at_fpr(member, score, 0.0) == pytest.approx(1.0)
    # nothing flagged at FPR 0 -> precision defined as 1/2
    assert metrics.precision_at_fpr(member, -score, 0.0) == 0.5


def test_roc_matches_sklearn(scores):
    member, score = scores
    fpr, tpr, _ = metrics.roc(member, score)
    expected_fpr, expected_tpr, _ = roc_curve(member, score, drop_intermediate=False)
    np.testing.assert_allclose(fpr, expected_fpr)
    np.testing.assert_allclose(tpr, expected_tpr)


def test_pinball_loss_hand_case():
    # alpha = 0.1: over-prediction costs 0.1 per unit, under-prediction 0.9 per unit
    threshold = np.array([1.0, 1.0])
    observed = np.array([0.0, 3.0])
    assert metrics.pinball_loss(threshold, observed, 0.1) == pytest.approx((0.1 * 1 + 0.9 * 2) / 2)


def test_pinball_minimised_by_the_quantile():
    observed = np.random.default_rng(1).normal(size=20000)
    grid = np.linspace(0, 3, 301)
    losses = [metrics.pinball_loss(np.full_like(observed, q), observed, 0.05) for q in grid]
    assert grid[int(np.argmin(losses))] == pytest.approx(np.quantile(observed, 0.95), abs=0.03)


def test_decision_metrics():
    member = np.array([1, 1, 0, 0], dtype=bool)
    result = metrics.decision_metrics(member, np.array([1, 0, 1, 0], dtype=bool))
    assert result == {"accuracy": 0.5, "advantage": 0.0, "precision": 0.5, "recall": 0.5}
    nothing = metrics.decision_metrics(member, np.zeros(4, dtype=bool))
    assert nothing["precision"] == 0.5 and nothing["recall"] == 0.0


def test_rejects_bad_input():
    with pytest.raises(ValueError, match="at least one member"):
        metrics.auc(np.ones(3, dtype=bool), np.zeros(3))
    with pytest.raises(ValueError, match="NaN"):
        metrics.auc(np.array([1, 0], dtype=bool), np.array([np.nan, 0.0]))


def test_decisions_at_fpr_are_the_calls_behind_tpr_at_fpr():
    rng = np.random.default_rng(3)
    member = rng.random(400) < 0.5
    score = np.round(rng.normal(member * 0.8, 1.0), 1)  # rounded: many ties
    for fpr in (0.01, 0.05, 0.3):
        calls = metrics.decisions_at_fpr(member, score, fpr)
        assert calls[~member].mean() <= fpr
        assert calls[member].mean() == pytest.approx(metrics.tpr_at_fpr(member, score, fpr))
