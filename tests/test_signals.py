import numpy as np
import pytest
from scipy.special import softmax

from miarepro import signals


def test_statistics_hand_case():
    logits = np.array([[2.0, 1.0, 0.0]])
    labels = np.array([0])
    p = softmax(logits[0])
    assert signals.cross_entropy(logits, labels)[0] == pytest.approx(-np.log(p[0]))
    assert signals.hinge(logits, labels)[0] == pytest.approx(1.0)
    assert signals.logit_confidence(logits, labels)[0] == pytest.approx(np.log(p[0] / (1 - p[0])))
    assert signals.correct(logits, np.array([1]))[0] == 0.0


@pytest.mark.parametrize("scale", [1.0, 50.0, 1e3])
def test_logit_confidence_equals_scipy_s_logsumexp_of_the_other_classes(scale):
    """The log-sum-exp with float32 exponentials (LiRA's and RMIA's scoring, twice as fast) is
    within one float32 step at 1 of scipy's float64 computation: below the rounding of the
    stored float32 logits themselves."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(0)
    logits = (scale * rng.standard_normal((3, 400, 100))).astype(np.float32)
    labels = rng.integers(0, 100, 400)
    wide = logits.astype(np.float64)
    others = np.where(np.arange(100) != labels[:, None], wide, -np.inf)
    expected = wide[:, np.arange(400), labels] - logsumexp(others, axis=-1)
    error = np.abs(signals.logit_confidence(logits, labels) - expected)
    assert error.max() <= np.spacing(np.float32(1)), error.max()
    assert signals.logit_confidence(logits, labels).dtype == np.float64


def test_logit_confidence_is_stable_for_huge_logits():
    logits = np.array([[1000.0, 0.0, -5.0], [0.0, 800.0, 0.0]])
    values = signals.logit_confidence(logits, np.array([0, 0]))
    assert np.all(np.isfinite(values))
    assert values[0] == pytest.approx(1000.0 - np.log(np.exp(0.0) + np.exp(-5.0)))
    assert values[1] == pytest.approx(-800.0 - 0.0 + 0.0, abs=1e-9)


def test_leading_axes_broadcast():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 3, 10, 5))
    labels = rng.integers(0, 5, 10)
    batched = signals.hinge(logits, labels)
    assert batched.shape == (4, 3, 10)
    np.testing.assert_allclose(batched[2, 1], signals.hinge(logits[2, 1], labels))


def test_statistic_orientation_and_errors():
    logits = np.array([[3.0, 0.0]])
    labels = np.array([0])
    assert signals.statistic("loss", logits, labels)[0] == -signals.cross_entropy(logits, labels)[0]
    with pytest.raises(KeyError, match="known"):
        signals.statistic("nope", logits, labels)


def test_squared_error_is_the_mse_training_loss_per_sample():
    """The statistic ``mse`` is what :func:`miarepro.training.per_sample_loss` trains on: on a
    3-class hand case, on random logits, and on IHA's one-logit model ``[0, s]``, where it is
    ``(sigmoid(s) - y)^2``."""
    import torch

    from miarepro.training import per_sample_loss

    p = softmax(np.array([2.0, 1.0, 0.0]))
    hand = ((p[0] - 1) ** 2 + p[1] ** 2 + p[2] ** 2) / 3
    assert signals.squared_error(np.array([[2.0, 1.0, 0.0]]), np.array([0]))[0] == \
        pytest.approx(hand, rel=1e-12)
    rng = np.random.default_rng(0)
    logits, labels = 3 * rng.standard_normal((50, 5)), rng.integers(0, 5, 50)
    expected = per_sample_loss("mse", torch.tensor(logits), torch.tensor(labels)).numpy()
    np.testing.assert_allclose(signals.squared_error(logits, labels), expected, rtol=1e-10)
    s, y = 4 * rng.standard_normal(20), rng.integers(0, 2, 20)
    one_logit = np.stack([np.zeros(20), s], axis=1)
    np.testing.assert_allclose(signals.squared_error(one_logit, y),
                               (1 / (1 + np.exp(-s)) - y) ** 2, rtol=1e-10)
    assert np.array_equal(signals.statistic("mse", one_logit, y),
                          -signals.squared_error(one_logit, y))


def test_squared_error_separates_confident_predictions():
    """Summed from the other classes, it stays exact where ``1 - p_y`` rounds to 0."""
    values = signals.squared_error(np.array([[0.0, 40.0], [0.0, 60.0]]), np.array([1, 1]))
    np.testing.assert_allclose(values, np.exp([-80.0, -120.0]), rtol=1e-12)
