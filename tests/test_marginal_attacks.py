import numpy as np
import pytest
from scipy.special import log_softmax

from miarepro import metrics
from miarepro.attacks import AttackContext, get_attack


def tiny_context(target_logits: np.ndarray, labels: np.ndarray) -> AttackContext:
    n = len(labels)
    return AttackContext(
        labels=labels, audit=np.arange(n), population=np.empty(0, int),
        validation=np.empty(0, int), target_logits=target_logits,
        target_mask=np.arange(n) % 2 == 0, reference_logits=np.zeros((0, *target_logits.shape)),
        reference_masks=np.zeros((0, n), bool), reference_pool=np.empty(0, int))


def test_marginal_and_naive_hand_computation():
    logits = np.array([[[3.0, 0.0, 0.0], [0.0, 2.0, 1.0], [1.0, 1.0, 0.0]]])
    labels = np.array([0, 2, 1])
    ctx = tiny_context(logits, labels)
    loss = -log_softmax(logits[0], axis=1)[np.arange(3), labels]
    np.testing.assert_allclose(get_attack("marginal").fn(ctx, statistic="loss"), -loss)
    np.testing.assert_allclose(get_attack("marginal").fn(ctx, statistic="hinge"),
                               [3.0, -1.0, 0.0])
    np.testing.assert_array_equal(get_attack("naive").fn(ctx), [1.0, 0.0, 0.0])


def test_marginal_averages_augmented_queries():
    logits = np.array([[[2.0, 0.0]], [[0.0, 0.0]]])  # two queries of one sample
    ctx = tiny_context(logits, np.array([0]))
    assert get_attack("marginal").fn(ctx, statistic="hinge")[0] == pytest.approx(1.0)


def test_marginal_attacks_separate_members_of_an_overfit_model():
    from overfit import overfit_context

    ctx = overfit_context()
    member = ctx.target_mask[ctx.audit]
    for statistic in ("loss", "hinge", "logit_confidence"):
        score = get_attack("marginal").fn(ctx, statistic=statistic)
        assert metrics.auc(member, score) > 0.7, statistic
    naive = get_attack("naive").fn(ctx)
    # the naive rule's accuracy is the train/test accuracy gap: clearly above chance here
    assert metrics.decision_metrics(member, naive > 0.5)["accuracy"] > 0.6
