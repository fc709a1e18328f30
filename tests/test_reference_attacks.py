"""Reference-model attacks: hand computations, an overfit target, invariances and errors."""

import dataclasses

import numpy as np
import pytest
from overfit import loo_context, overfit_context
from scipy.stats import norm
from study_files import partition_study

from miarepro import metrics
from miarepro.attacks import REGISTRY, AttackContext, get_attack
from miarepro.attacks.reference import percentile_rank, quantile_score
from miarepro.attacks.shadow import features

# --- a tiny case: 4 reference models, 3 audited samples, 2 population samples, 3 classes ------
# Model k puts logit v[k, i] on the label of sample i and 0 on the two other classes, so
#   hinge = v,  logit-scaled confidence = v - log 2,  p_y = e^v / (e^v + 2),
#   loss = log(1 + 2 e^-v).
V = np.array([[4.0, 1.0, 2.0, 0.5, 1.0],
              [6.0, 3.0, 0.0, 1.0, 2.0],
              [1.0, 5.0, 4.0, 1.5, 0.0],
              [3.0, 0.0, 6.0, 2.0, 1.0]])
T = np.array([2.5, 0.75, 0.5, 1.0, 3.0])  # the target's logit on the label
IN = np.array([[1, 0, 0, 0, 0],  # sample 0: IN {4, 6}, OUT {1, 3}
               [1, 1, 0, 0, 0],  # sample 1: IN {3, 5}, OUT {1, 0}
               [0, 1, 1, 0, 0],  # sample 2: IN {4, 6}, OUT {2, 0}
               [0, 0, 1, 0, 0]], dtype=bool)  # samples 3, 4: population, OUT everywhere
LABELS = np.array([0, 1, 2, 0, 1])


def _logits(values: np.ndarray) -> np.ndarray:
    """(..., M) values on the label -> (..., M, 3) logits."""
    one_hot = np.eye(3)[LABELS]
    return values[..., None] * one_hot


def tiny(values: np.ndarray = V, target: np.ndarray = T, member: np.ndarray = IN,
         scale: tuple[float, ...] = (1.0,)) -> AttackContext:
    """Queries ``a`` multiply every value by ``scale[a]`` (a second, stretched view)."""
    stretch = np.array(scale)[:, None]
    return AttackContext(
        labels=LABELS, audit=np.arange(3), population=np.array([3, 4]),
        validation=np.empty(0, dtype=int), target_logits=_logits(stretch * target),
        target_mask=np.array([1, 0, 1, 0, 0], dtype=bool),
        reference_logits=_logits(stretch[None] * values[:, None]), reference_masks=member,
        reference_pool=np.arange(3), seed=0)


def _loss(v):
    return np.log1p(2 * np.exp(-np.asarray(v, dtype=float)))


def _p(v):
    v = np.asarray(v, dtype=float)
    return np.exp(v) / (np.exp(v) + 2)


def run(name: str, ctx: AttackContext, **params) -> np.ndarray:
    return get_attack(name).fn(ctx, **params)


def test_families_are_registered_with_their_needs():
    for name in ("lira", "attack_r", "rmia", "shadow", "watson", "sablayrolles"):
        assert REGISTRY[name].needs_references and not REGISTRY[name].needs_loo
    for name in ("l_attack", "lira_l"):
        assert REGISTRY[name].needs_loo
    assert REGISTRY["lira"].defaults() == {
        "mode": "online", "variance": "per_example", "statistic": "logit_confidence"}


def test_lira_online_hand_case():
    # (mu_in, var_in, mu_out, var_out) per sample, unbiased variances of two values
    expected = [
        norm.logpdf(2.5, 5, np.sqrt(2)) - norm.logpdf(2.5, 2, np.sqrt(2)),
        norm.logpdf(0.75, 4, np.sqrt(2)) - norm.logpdf(0.75, 0.5, np.sqrt(0.5)),
        norm.logpdf(0.5, 5, np.sqrt(2)) - norm.logpdf(0.5, 1, np.sqrt(2)),
    ]
    for statistic in ("hinge", "logit_confidence"):  # a constant shift changes nothing
        np.testing.assert_allclose(run("lira", tiny(), statistic=statistic), expected)
    # global variance: pooled IN (2 + 2 + 2) / 3 = 2, pooled OUT (2 + 0.5 + 2) / 3 = 1.5
    expected_global = [
        norm.logpdf(2.5, 5, np.sqrt(2)) - norm.logpdf(2.5, 2, np.sqrt(1.5)),
        norm.logpdf(0.75, 4, np.sqrt(2)) - norm.logpdf(0.75, 0.5, np.sqrt(1.5)),
        norm.logpdf(0.5, 5, np.sqrt(2)) - norm.logpdf(0.5, 1, np.sqrt(1.5)),
    ]
    np.testing.assert_allclose(run("lira", tiny(), statistic="hinge", variance="global"),
                               expected_global)
    # two queries, the second stretched by 3: the two Gaussian terms per query are summed
    doubled = run("lira", tiny(scale=(1.0, 3.0)), statistic="hinge")
    np.testing.assert_allclose(doubled, 2 * np.array(expected))


def test_lira_offline_hand_case():
    """The one-sided test log Phi(z) against the OUT Gaussian, returned as -log(-log Phi(z))
    (the same ranking; see the next test)."""
    def score(z):
        return -np.log(-norm.logcdf(z))

    expected = score(np.array([(2.5 - 2) / np.sqrt(2), (0.75 - 0.5) / np.sqrt(0.5),
                               (0.5 - 1) / np.sqrt(2)]))
    np.testing.assert_allclose(run("lira", tiny(), mode="offline", statistic="hinge"), expected)
    # on the loss: Gaussians of -loss over the OUT models
    out = {0: [1.0, 3.0], 1: [1.0, 0.0], 2: [2.0, 0.0]}
    expected_loss = [score((-_loss(T[i]) - np.mean(-_loss(v))) / np.std(_loss(v), ddof=1))
                     for i, v in out.items()]
    np.testing.assert_allclose(run("lira", tiny(), mode="offline", statistic="loss"),
                               expected_loss)


def test_lira_offline_keeps_records_far_in_the_tail_apart():
    """With two OUT models that nearly agree, z reaches thousands, where sum log Phi(z) rounds
    to 0 (beyond about 38.5): such records tied at the top, members and non-members alike,
    and every TPR at a low FPR fell to 0. The score ranks as sum_a log Phi(z_a) does, and
    keeps them apart: log(-log Phi(z)) is log Phi(-z) there."""
    from miarepro.attacks.lira import offline_score

    z = np.array([[-40.0, -3.0, 0.0, 8.0, 29.0, 31.0, 39.0, 45.0, 1e3, 1e5],
                  [0.0, 1.0, -2.0, 0.5, 3.0, 2.0, 40.0, 50.0, 60.0, 70.0]])  # (A=2, N)
    values = np.stack([np.zeros_like(z) - 1.0, np.zeros_like(z) + 1.0])  # OUT: mean 0, var 2
    score = offline_score(z * np.sqrt(2.0), values, np.zeros((2, z.shape[1]), bool),
                          "per_example")
    log_cdf = norm.logcdf(z).sum(axis=0)
    unsaturated = log_cdf < 0
    assert np.isfinite(score).all() and len(set(score)) == len(score)
    assert (np.argsort(score[unsaturated]) == np.argsort(log_cdf[unsaturated])).all()
    np.testing.assert_allclose(score[unsaturated], -np.log(-log_cdf[unsaturated]), rtol=1e-12)
    # the last four round to 0 in log Phi; their tails Q(39) + Q(40) > ... > Q(1e5) + Q(70)
    assert not unsaturated[-4:].any() and (np.diff(score[-4:]) > 0).all()


def test_lira_online_without_in_models_uses_shift_and_pooled_variance():
    member = IN.copy()
    member[:, 2] = False  # sample 2: OUT for all four models {2, 0, 4, 6}
    # IN-minus-OUT shift from samples 0 and 1: ((5 - 2) + (4 - 0.5)) / 2 = 3.25
    mu_out = 3.0
    var_out = np.var([2.0, 0.0, 4.0, 6.0], ddof=1)
    expected = norm.logpdf(0.5, mu_out + 3.25, np.sqrt(2)) - norm.logpdf(0.5, mu_out,
                                                                         np.sqrt(var_out))
    score = run("lira", tiny(member=member), statistic="hinge")
    assert score[2] == pytest.approx(expected)


def test_a_tiny_reference_variance_is_kept_and_only_zero_is_floored():
    """The loss of a model that fits a record spreads by 1e-12 or less over reference models:
    such a variance is the record's own (a floor would give every such record the same
    Gaussian); only an exact 0 takes the floor."""
    from miarepro.attacks.reference import VARIANCE_FLOOR, moments

    values = np.array([[[1e-13, 2e-13, 5.0]], [[3e-13, 6e-13, 5.0]]])  # (K=2, A=1, N=3)
    fit = moments(values, np.zeros((2, 3), dtype=bool), "per_example")
    np.testing.assert_allclose(fit.var_out[0], [2e-26, 8e-26, VARIANCE_FLOOR], rtol=1e-9)


def test_attack_r_hand_case():
    # OUT hinge values: sample 0 {1, 3}, sample 1 {0, 1}, sample 2 {0, 2}, with the range ends
    # -1000 and 1000 appended: sorted values sit at quantiles 0, 1/3, 2/3, 1
    expected = [1 / 3 + (2.5 - 1) / 2 / 3, 1 / 3 + 0.75 / 3, 1 / 3 + 0.5 / 2 / 3]
    np.testing.assert_allclose(run("attack_r", tiny(), statistic="hinge"), expected)


def privacy_meter_threshold(distribution, alpha, signal_min=0.0, signal_max=1000.0):
    """ML Privacy Meter's ``linear_itp_threshold_func`` (the code of Ye et al.), transcribed."""
    distribution = np.append(np.append(distribution, signal_min), signal_max)
    return np.quantile(distribution, q=alpha, method="linear")


def test_attack_r_makes_ml_privacy_meter_decisions_at_every_alpha():
    # Ye et al. flag x at level alpha when its target loss is below the alpha-quantile of its
    # OUT reference losses; thresholding our score at 1 - alpha must make the same decision.
    values = np.array([[4.0, 1.0, 2.0, 0.5, 1.0], [6.0, 3.0, 0.0, 1.0, 2.0],
                       [1.0, 5.0, 4.0, 1.5, 0.0], [3.0, 0.0, 6.0, 2.0, 1.0]])
    target = np.array([7.0, 0.75, 9.0, 1.0, 3.0])  # samples 0 and 2 beyond every reference
    ctx = tiny(values=values, target=target)
    score = run("attack_r", ctx)
    out = ~ctx.reference_in()
    for alpha in np.linspace(0.0005, 0.9995, 2000):
        for i in range(3):
            threshold = privacy_meter_threshold(_loss(values[out[:, i], i]), alpha)
            assert (_loss(target[i]) < threshold) == (score[i] > 1 - alpha), (i, alpha)
    # beyond the references, samples are still ranked by how far beyond (no tie at 1)
    assert 2 / 3 < score[0] < score[2] < 1


def test_quantile_score_rejects_unknown_statistics():
    with pytest.raises(ValueError, match="unknown statistic"):
        quantile_score(np.zeros((2, 1)), np.ones((2, 1), bool), np.zeros(1), "confidence")


def test_percentile_rank_inverts_numpy_quantile():
    values = np.array([[0.0], [7.0], [1.0], [3.0], [1.0]])
    valid = np.ones(values.shape, dtype=bool)
    for target in (0.5, 1.0, 2.0, 5.0):
        rank = percentile_rank(values, valid, np.array([target]))[0]
        if target != 1.0:
            assert np.quantile(values[:, 0], rank) == pytest.approx(target)
    # tied values 1, 1 occupy quantiles 1/4 .. 2/4: a target on them gets the middle
    assert percentile_rank(values, valid, np.array([1.0]))[0] == pytest.approx(0.375)
    assert percentile_rank(values, valid, np.array([2.0]))[0] == pytest.approx(0.625)
    assert percentile_rank(values, valid, np.array([-1.0]))[0] == 0
    assert percentile_rank(values, valid, np.array([9.0]))[0] == 1
    # masked entries are ignored; one valid value: 0, 1/2 or 1; none: 1/2
    valid[1:] = False
    assert percentile_rank(values, valid, np.array([0.0]))[0] == 0.5
    assert percentile_rank(values, np.zeros_like(valid), np.array([0.0]))[0] == 0.5


def rmia_reference(ratio_x: np.ndarray, ratio_z: np.ndarray, gamma: float) -> np.ndarray:
    """Zarifzadeh et al.'s score with ties broken by the ratio: (d + f) / (|Z| + 1)."""
    log_x, log_z = np.log(ratio_x) - np.log(gamma), np.sort(np.log(ratio_z))
    scores = []
    for v in log_x:
        d = int(np.sum(log_z <= v))  # Pr_z[LR(x, z) >= gamma] = d / |Z|
        if d == 0:
            f = np.exp(v - log_z[0])
        elif d == len(log_z):
            f = 1 - np.exp(log_z[-1] - v)
        else:
            f = (v - log_z[d - 1]) / (log_z[d] - log_z[d - 1])
        scores.append((d + f) / (len(log_z) + 1))
    return np.array(scores)


def test_rmia_averages_the_models_probabilities_in_float64():
    """A record the models fit has log p near -1e-8 (-1e-15 on a full-scale model), spread over
    the models below float32's (float64's) resolution at 1: its mean over the models is not
    rounded to the largest term (which ordered such records' ratios by rounding)."""
    from miarepro.attacks.rmia import _log_mean

    rng = np.random.default_rng(0)
    mask = rng.random((8, 50)) < 0.5
    mask[0] = True
    for scale in (1e-8, 1e-15):  # a miniature's confident records; a full-scale model's
        log_p = -scale * (1 + rng.random((8, 50)))  # the largest and the mean 0.3 scale apart
        for given, kept in ((None, np.ones_like(mask)), (mask, mask)):
            # log(mean(exp(v))) as log1p(mean(expm1(v))): exact to float64 at these sizes
            expected = np.log1p(np.nanmean(np.where(kept, np.expm1(log_p), np.nan), axis=0))
            np.testing.assert_allclose(_log_mean(log_p, given), expected, rtol=1e-9)


def test_rmia_hand_case():
    a, gamma = 0.3, 1.0
    p_ref, p_target = _p(V), _p(T)
    out = ~IN
    offline_px = 0.5 * ((1 + a) * (p_ref * out).sum(0) / out.sum(0) + (1 - a))
    online_px = p_ref.mean(0)
    for mode, px in (("offline", offline_px), ("online", online_px)):
        ratio = p_target / px
        score = run("rmia", tiny(), mode=mode)
        np.testing.assert_allclose(score, rmia_reference(ratio[:3], ratio[3:], gamma))
        # the integer part is the paper's count of population samples dominated
        dominated = [np.sum([ratio[x] / ratio[z] >= gamma for z in (3, 4)]) for x in range(3)]
        np.testing.assert_array_equal(np.floor(score * 3), dominated)
    # a gamma between the pairwise ratios counts a different set of z
    ratio = p_target / offline_px
    gamma = float(np.median(ratio[:3, None] / ratio[None, 3:]))
    np.testing.assert_allclose(run("rmia", tiny(), gamma=gamma),
                               rmia_reference(ratio[:3], ratio[3:], gamma))
    # but it orders the records as gamma = 1 does: no ROC metric depends on gamma
    assert np.array_equal(np.argsort(run("rmia", tiny(), gamma=gamma)),
                          np.argsort(run("rmia", tiny())))


def test_rmia_ranks_by_the_ratio_when_the_fraction_saturates():
    # identical reference models: p(x) is the same for every x, so the ratio orders as p_y
    target = np.array([3.0, 2.0, 0.0, 1.5, 0.5])  # samples 0 and 1 dominate all of Z
    values = np.zeros_like(V)
    score = run("rmia", tiny(values=values, target=target, member=np.zeros_like(IN)))
    assert score[2] < 1 / 3 and 2 / 3 < score[1] < score[0] < 1
    assert np.array_equal(np.argsort(score), np.argsort(target[:3]))


def test_watson_and_sablayrolles_hand_case():
    loss_t = _loss(T[:3])
    mean_out = np.array([_loss([1, 3]).mean(), _loss([1, 0]).mean(), _loss([2, 0]).mean()])
    mean_in = np.array([_loss([4, 6]).mean(), _loss([3, 5]).mean(), _loss([4, 6]).mean()])
    np.testing.assert_allclose(run("watson", tiny()), mean_out - loss_t)
    np.testing.assert_allclose(run("sablayrolles", tiny()), (mean_in + mean_out) / 2 - loss_t)


def tiny_loo(target: np.ndarray, loo_values: np.ndarray) -> AttackContext:
    """3 audited records with J leave-one-out models each, values on the label as above."""
    ctx = tiny(target=np.append(target, [0.0, 0.0]))
    loo = np.eye(3)[LABELS[:3]][:, None, None, :] * loo_values[:, :, None, None]
    return dataclasses.replace(ctx, loo_logits=loo)  # (N, J, A=1, C)


def test_l_attack_and_lira_l_hand_case():
    loo_values = np.array([[1.0, 2.0, 4.0, 5.0], [0.0, 1.0, 2.0, 3.0], [2.0, 2.5, 3.0, 6.0]])
    target = np.array([3.0, -1.0, 2.75])
    ctx = tiny_loo(target, loo_values)
    # L-attack on -loss: invert numpy's linear quantile of each record's LOO values, with the
    # loss range ends 0 and 1000 appended as in Attack-R
    expected = []
    for i in range(3):
        reference = np.sort(-np.append(_loss(loo_values[i]), [0.0, 1000.0]))
        expected.append(np.interp(-_loss(target[i]), reference, np.arange(6) / 5))
    np.testing.assert_allclose(run("l_attack", ctx), expected)
    # LiRA-L: one-sided test against the LOO models
    np.testing.assert_allclose(
        run("lira_l", ctx, statistic="hinge"),
        -np.log(-norm.logcdf((target - loo_values.mean(1)) / loo_values.std(1, ddof=1))))
    reference = -_loss(loo_values)
    np.testing.assert_allclose(
        run("lira_l", ctx),
        -np.log(-norm.logcdf((-_loss(target) - reference.mean(1))
                             / reference.std(1, ddof=1))))


def test_shadow_scores_each_class_by_a_classifier_of_its_own_rows_by_hand():
    """Shokri et al.'s per-class attack models: an audited record of class c is scored by a
    classifier fitted on the shadow rows of class c alone, (model, sample) pairs of the pool
    with their ML-Leaks features and label IN / OUT; fitted here by hand, in the rows' natural
    order (the attack sorts them by content: gradient boosting does not care)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(3)
    n, classes, models = 120, 3, 4
    labels = rng.integers(0, classes, n)
    member = rng.random((models, n)) < 0.5
    logits = rng.normal(0, 1, (models, 1, n, classes)) + 2.5 * member[:, None, :, None] * (
        np.eye(classes)[labels])[None, None]
    target = rng.normal(0, 1, (1, n, classes)) + 2.5 * np.eye(classes)[labels] * (
        rng.random(n) < 0.5)[None, :, None]
    empty = np.empty(0, dtype=int)
    ctx = AttackContext(labels=labels, audit=np.arange(60), population=empty, validation=empty,
                        target_logits=target, target_mask=np.zeros(n, dtype=bool),
                        reference_logits=logits, reference_masks=member,
                        reference_pool=np.arange(60, n), seed=5, target_index=1)
    seed = int(np.random.SeedSequence([5, 1]).generate_state(1)[0])
    score = run("shadow", ctx, classifier="gbdt", top_k=2)
    for c in range(classes):
        pool = np.arange(60, n)[labels[60:] == c]
        rows = np.concatenate([features(logits[k][:, pool].swapaxes(0, 1), labels[pool], 2)
                               for k in range(models)])
        inside = np.concatenate([member[k, pool] for k in range(models)])
        audited = np.flatnonzero(labels[:60] == c)
        model = HistGradientBoostingClassifier(max_iter=100, random_state=seed).fit(rows, inside)
        expected = model.decision_function(
            features(target[:, audited].swapaxes(0, 1), labels[audited], 2))
        np.testing.assert_allclose(score[audited], expected, atol=1e-6)


def test_shadow_log_odds_are_the_mlp_before_its_logistic_and_never_tie_at_one():
    """The MLP's log-odds, by a forward pass of its weights, are the logit of its predicted
    probability; far out, where that probability is exactly 1.0 for several records, they
    still order them (the score used to be the probability, which tied them at the top)."""
    from scipy.special import expit

    from miarepro.attacks.shadow import _classifier, log_odds

    rng = np.random.default_rng(1)
    X = rng.normal(0, 1, (400, 3))
    y = (X[:, 0] + 0.3 * rng.normal(0, 1, 400) > 0).astype(int)
    model = _classifier("mlp", 0).fit(X, y)
    near = rng.normal(0, 1, (50, 3))
    np.testing.assert_allclose(expit(log_odds(model, near)), model.predict_proba(near)[:, 1],
                               rtol=1e-12, atol=1e-15)
    far = np.column_stack([np.linspace(200, 400, 5), np.zeros((5, 2))])
    assert (model.predict_proba(far)[:, 1] == 1.0).sum() > 1
    assert len(np.unique(log_odds(model, far))) == 5


def test_shadow_features_and_scores():
    v = np.array([2.0, -1.0])  # two (model, sample) rows, one query, labels 0 and 1
    labels = np.array([0, 1])
    logits = (v[:, None] * np.eye(3)[labels])[:, None, :]  # (2, A=1, 3)
    p, q = np.exp(v) / (np.exp(v) + 2), 1 / (np.exp(v) + 2)
    expected = np.array([[p[0], q[0], q[0], 2.0 - np.log(2)],
                         [q[1], q[1], p[1], -1.0 - np.log(2)]])
    np.testing.assert_allclose(features(logits, labels, top_k=3), expected)
    np.testing.assert_allclose(features(logits, labels, top_k=1), expected[:, [0, 3]])
    # Shadow models that fit their IN samples: a member-like target output scores higher.
    rng = np.random.default_rng(0)
    member = rng.random((8, 200)) < 0.5
    values = np.where(member, 4.0, 0.0) + rng.normal(0, 0.5, member.shape)
    labels = rng.integers(0, 3, 200)
    labels[:2] = 0
    ctx = AttackContext(
        labels=labels, audit=np.arange(2), population=np.empty(0, dtype=int),
        validation=np.empty(0, dtype=int),
        target_logits=(np.array([[4.0], [0.0]] + [[0.0]] * 198) * np.eye(3)[labels])[None],
        target_mask=np.zeros(200, dtype=bool),
        reference_logits=(values[:, :, None] * np.eye(3)[labels])[:, None],
        reference_masks=member, reference_pool=np.arange(200), seed=0)
    sure = np.log(9)  # log-odds of a member probability of 0.9
    for classifier in ("mlp", "gbdt"):
        score = run("shadow", ctx, classifier=classifier)
        assert score[0] > sure and score[1] < -sure
    # a class whose shadow rows are all IN falls back to the classifier of all classes
    lopsided = member | (labels == 0)[None]
    values = np.where(lopsided, 4.0, 0.0) + rng.normal(0, 0.5, member.shape)
    score = run("shadow", dataclasses.replace(
        ctx, reference_masks=lopsided,
        reference_logits=(values[:, :, None] * np.eye(3)[labels])[:, None]))
    assert score[0] > sure and score[1] < -sure
    # each target (a repetition of a partition study) draws its rows and classifier anew
    many = dataclasses.replace(ctx, audit=np.arange(200))
    first = run("shadow", many, max_rows=100)
    np.testing.assert_array_equal(first, run("shadow", many, max_rows=100))
    assert not np.array_equal(first, run("shadow", dataclasses.replace(many, target_index=1),
                                         max_rows=100))


# --- an overfit target -------------------------------------------------------------------------
ATTACKS = [
    ("lira", {"mode": "online"}),
    ("lira", {"mode": "offline"}),
    ("lira", {"mode": "online", "variance": "global", "statistic": "loss"}),
    ("lira", {"mode": "offline", "variance": "global", "statistic": "hinge"}),
    ("attack_r", {}),
    ("rmia", {"mode": "offline"}),
    ("rmia", {"mode": "online"}),
    ("watson", {}),
    ("sablayrolles", {}),
    ("shadow", {}),
]
LOO_ATTACKS = [("l_attack", {}), ("lira_l", {}), ("lira_l", {"statistic": "logit_confidence"})]


def _ids(cases):
    return [f"{name}-{'-'.join(map(str, params.values()))}" for name, params in cases]


@pytest.mark.parametrize(("name", "params"), ATTACKS, ids=_ids(ATTACKS))
def test_attacks_separate_members_of_an_overfit_target(name, params):
    ctx = overfit_context()
    assert metrics.auc(ctx.target_mask[ctx.audit], run(name, ctx, **params)) > 0.7


@pytest.mark.parametrize(("name", "params"), LOO_ATTACKS, ids=_ids(LOO_ATTACKS))
def test_loo_attacks_separate_members_of_an_overfit_target(name, params):
    ctx = loo_context()
    member = ctx.target_mask[ctx.audit]
    assert member.sum() == len(member) // 2
    assert metrics.auc(member, run(name, ctx, **params)) > 0.7


def test_tpr_at_low_fpr_orders_as_in_the_literature():
    ctx = overfit_context()
    member = ctx.target_mask[ctx.audit]
    online = metrics.tpr_at_fpr(member, run("lira", ctx, mode="online"), 0.01)
    offline = metrics.tpr_at_fpr(member, run("lira", ctx, mode="offline"), 0.01)
    attack_p = metrics.tpr_at_fpr(member, run("marginal", ctx, statistic="hinge"), 0.01)
    assert online >= offline >= attack_p
    assert online > 0.1


# --- invariances -------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "params"), ATTACKS, ids=_ids(ATTACKS))
def test_scores_do_not_depend_on_model_or_sample_order(name, params):
    ctx = overfit_context()
    base = run(name, ctx, **params)
    rng = np.random.default_rng(1)
    models = rng.permutation(ctx.n_references)
    shuffled = dataclasses.replace(ctx, reference_logits=ctx.reference_logits[models],
                                   reference_masks=ctx.reference_masks[models])
    np.testing.assert_allclose(run(name, shuffled, **params), base, rtol=1e-9, atol=1e-12)
    samples = rng.permutation(len(ctx.audit))
    reordered = dataclasses.replace(ctx, audit=ctx.audit[samples])
    np.testing.assert_allclose(run(name, reordered, **params), base[samples], rtol=1e-9,
                               atol=1e-12)


@pytest.mark.parametrize(("name", "params"), LOO_ATTACKS, ids=_ids(LOO_ATTACKS))
def test_loo_scores_do_not_depend_on_model_or_sample_order(name, params):
    ctx = loo_context()
    base = run(name, ctx, **params)
    rng = np.random.default_rng(2)
    models = rng.permutation(ctx.loo_logits.shape[1])
    shuffled = dataclasses.replace(ctx, loo_logits=ctx.loo_logits[:, models])
    np.testing.assert_allclose(run(name, shuffled, **params), base, rtol=1e-9, atol=1e-12)
    samples = rng.permutation(len(ctx.audit))
    reordered = dataclasses.replace(ctx, audit=ctx.audit[samples],
                                    loo_logits=ctx.loo_logits[samples])
    np.testing.assert_allclose(run(name, reordered, **params), base[samples], rtol=1e-9,
                               atol=1e-12)


# --- errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("name", "params"), [
    ("lira", {"mode": "online"}), ("rmia", {"mode": "online"}), ("sablayrolles", {})])
def test_online_attacks_reject_references_that_are_out_everywhere(name, params):
    with pytest.raises(ValueError, match="OUT for every audited sample"):
        run(name, tiny(member=np.zeros_like(IN)), **params)


@pytest.mark.parametrize("n_models", [1, 2, 4])
def test_offline_attacks_accept_references_that_are_out_everywhere(n_models):
    # BMIA's setting: a disjoint reference pool, down to a single reference model
    ctx = tiny(values=V[:n_models], member=np.zeros_like(IN[:n_models]))
    for name, params in [("lira", {"mode": "offline"}),
                         ("lira", {"mode": "offline", "variance": "global"}),
                         ("attack_r", {}), ("rmia", {}), ("watson", {})]:
        scores = run(name, ctx, **params)
        assert np.all(np.isfinite(scores)) and np.ptp(scores) > 0, name  # a ranking, not a constant


@pytest.mark.parametrize(("name", "params", "match"), [
    ("lira", {"mode": "both"}, r"mode: unknown value 'both'"),
    ("rmia", {"mode": "both"}, r"mode: unknown value 'both'"),
    ("lira", {"variance": "pooled"}, r"variance: unknown value 'pooled'"),
    ("lira", {"statistic": "confidence"}, r"statistic: unknown value 'confidence'"),
    ("attack_r", {"statistic": "confidence"}, r"statistic: unknown value"),
    ("shadow", {"classifier": "svm"}, r"classifier: unknown value 'svm'"),
    ("rmia", {"a": 1.5}, r"a: 1.5 is outside \[0, 1\]"),
    ("rmia", {"gamma": 0}, r"gamma: 0 is outside \(0, inf\]"),
    ("lira", {"varaince": "global"}, "did you mean 'variance'"),
])
def test_bad_parameters_raise(name, params, match):
    with pytest.raises(ValueError, match=match):
        run(name, tiny(), **params)


def test_missing_inputs_raise():
    with pytest.raises(ValueError, match="leave-one-out"):
        run("l_attack", tiny())
    with pytest.raises(ValueError, match="population"):
        run("rmia", dataclasses.replace(tiny(), population=np.empty(0, dtype=int)))
    empty = dataclasses.replace(tiny(), reference_logits=np.zeros((0, 1, 5, 3)),
                                reference_masks=np.zeros((0, 5), dtype=bool))
    with pytest.raises(ValueError, match="reference models"):
        run("lira", empty, mode="offline")


def test_records_restrict_a_black_box_attacks_rows_not_what_it_pools(tmp_path, monkeypatch):
    """An entry's ``records`` keeps those rows of a black-box attack, in their order, but the
    attack scores the whole audit: LiRA's global variance, pooled across records, is the same
    with ``records`` as without it, so a record's score does not depend on which others are
    audited (IHA's comparisons on 40 or 100 records). Its time is the records' share of the
    whole audit's, so that seconds per scored row are comparable (IHA Table 6)."""
    from miarepro import io, pipeline, splits

    rng = np.random.default_rng(1)
    n = 400
    dataset, split = partition_study(tmp_path, n, rng)
    signals = {}
    for role, index in (("target", 0), ("reference", 0), ("reference", 1)):
        signals[role, index] = str(tmp_path / role / f"{index}.npy")
        io.write_array(signals[role, index], rng.normal(size=(1, n, 3)).astype(np.float32))
        io.write_json(signals[role, index].replace(".npy", ".json"), {"train_seconds": 1.0})
    attack = {"attack": "lira", "mode": "offline", "variance": "global", "n_reference": 2}

    seconds = []
    clock = iter(range(1000))  # each reading of the clock one second later

    def scores(entry: dict):
        path = str(tmp_path / f"{len(entry)}.parquet")
        monkeypatch.setattr(pipeline.time, "perf_counter", lambda: float(next(clock)))
        seconds.append(pipeline.score(entry, str(dataset), split, [signals["target", 0]],
                                      [signals["reference", 0], signals["reference", 1]], [],
                                      path)[0]["score_seconds"])
        monkeypatch.undo()
        return io.read_table(path)

    whole, some = scores(attack), scores({**attack, "records": 20})
    assert seconds[0] > 0 and seconds[1] == pytest.approx(seconds[0] * 20 / len(whole))
    part = io.read_arrays(split)
    expected = splits.balanced_records(part["audit"], splits.training_mask(part, "target", 0),
                                       0, 20)
    np.testing.assert_array_equal(some["sample"], expected)
    np.testing.assert_array_equal(some["score"], whole.set_index("sample").loc[expected, "score"])
