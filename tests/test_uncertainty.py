"""Intervals and resolvability: exactness against metrics.py and nominal coverage."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import norm

from miarepro import metrics
from miarepro import uncertainty as u


def scores_with_ties(rng, n):
    member = rng.random(n) < 0.5
    member[:2] = [True, False]
    return member, np.round(rng.normal(0.7 * member, 1.0), int(rng.integers(0, 3)))


def test_point_metrics_equal_metrics_summary():
    rng = np.random.default_rng(0)
    for _ in range(100):
        member, score = scores_with_ties(rng, int(rng.integers(20, 300)))
        ours = u.point_metrics(member, score, (0.01, 0.1, 0.3))
        reference = metrics.summary(member, score, (0.01, 0.1, 0.3))
        assert ours == pytest.approx(reference, abs=1e-12)


def test_weighted_replicate_equals_the_repeated_sample():
    """A bootstrap replicate is the metric of the sample with each record repeated."""
    rng = np.random.default_rng(1)
    for _ in range(50):
        member, score = scores_with_ties(rng, 60)
        w_in = rng.integers(0, 3, (1, member.sum()))
        w_out = rng.integers(0, 3, (1, (~member).sum()))
        w_in[0, 0] = w_out[0, 0] = 1
        ours = u._SortedScores(member, score).metrics(w_in, w_out, (0.05, 0.2))
        repeated_member = np.repeat([True, False], [w_in.sum(), w_out.sum()])
        repeated_score = np.concatenate([np.repeat(score[member], w_in[0]),
                                         np.repeat(score[~member], w_out[0])])
        reference = metrics.summary(repeated_member, repeated_score, (0.05, 0.2))
        assert {k: v[0] for k, v in ours.items()} == pytest.approx(reference, abs=1e-12)


def test_bootstrap_interval_covers_the_true_value_at_its_nominal_rate():
    """Members ~ N(1, 1), non-members ~ N(0, 1): AUC = Phi(1 / sqrt 2), TPR@10% known."""
    rng = np.random.default_rng(2)
    truth = {"auc": norm.cdf(1 / np.sqrt(2)), "tpr@10%": norm.sf(norm.isf(0.1) - 1.0)}
    covered = {name: 0 for name in truth}
    trials = 200
    for trial in range(trials):
        member = np.repeat([True, False], 400)
        score = rng.normal(member.astype(float), 1.0)
        replicates = u.bootstrap_metrics(member, score, (0.1,), seed=trial, n_boot=400)
        for name, value in truth.items():
            low, high = u.Estimate(0.0, replicates[name], "bootstrap").interval()
            covered[name] += low <= value <= high
    for name in truth:  # a 90% interval covers 0.915 and 0.905 of these
        assert 0.925 <= covered[name] / trials <= 0.975, (name, covered[name])


def test_replicate_interval_covers_the_truth_with_training_noise_where_one_run_cannot():
    """Each replicate trains a model of its own separability (theta ~ N(1, 0.3^2): training
    noise); attack A sees it fully and B at half. Over 3 replicates the Student-t interval of
    the paired AUC difference covers E[AUC_A - AUC_B] at about 95%; the bootstrap over one
    run's records, blind to training, covers it far less often. (The t-interval assumes
    near-normal replicate values: with theta's sd at 0.5 the differences are skewed, -1.5,
    and 3 replicates cover 89%.)"""
    rng = np.random.default_rng(7)
    thetas = rng.normal(1.0, 0.3, 400_000)
    truth = float(np.mean(norm.cdf(thetas / np.sqrt(2)) - norm.cdf(0.5 * thetas / np.sqrt(2))))
    member = np.repeat([True, False], 300)

    def run(theta: float, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return member * theta + noise, member * 0.5 * theta + noise

    def auc(score: np.ndarray) -> u.Estimate:
        value = u.point_metrics(member, score, ())["auc"]
        return u.Estimate(value, np.array([value]), "bootstrap")

    covered = one_run_covered = 0
    trials, one_run_trials = 600, 150
    for trial in range(trials):
        runs = [run(rng.normal(1.0, 0.3), rng.normal(size=len(member))) for _ in range(3)]
        a = u.over_replicates([auc(scores_a) for scores_a, _ in runs])
        b = u.over_replicates([auc(scores_b) for _, scores_b in runs])
        low, high = (a - b).interval()
        covered += low <= truth <= high
        if trial < one_run_trials:
            draws = [u.bootstrap_metrics(member, scores, (), seed=trial, n_boot=200)["auc"]
                     for scores in runs[0]]
            low, high = np.quantile(draws[0] - draws[1], [0.025, 0.975])
            one_run_covered += low <= truth <= high
    assert 0.92 <= covered / trials <= 0.98, covered / trials
    assert one_run_covered / one_run_trials < 0.8, one_run_covered / one_run_trials


def test_difference_of_two_studies_targets_is_welchs_interval():
    """Targets (or replicates) of two studies are not paired: Welch's t interval, as scipy."""
    from scipy import stats

    rng = np.random.default_rng(5)
    x, y = rng.normal(0.6, 0.05, 4), rng.normal(0.55, 0.1, 6)
    difference = u.difference_across_studies(u.Estimate(x.mean(), x, "targets"),
                                             u.Estimate(y.mean(), y, "replicates"))
    expected = stats.ttest_ind(x, y, equal_var=False).confidence_interval(0.95)
    assert difference.value == pytest.approx(x.mean() - y.mean())
    assert difference.interval() == pytest.approx((expected.low, expected.high))
    # a bootstrap beside per-target values: its draws' spread with unlimited freedom
    draws = np.random.default_rng(0).normal(0.5, 0.02, 1000)
    mixed = u.difference_across_studies(u.Estimate(0.5, draws, "bootstrap"),
                                        u.Estimate(x.mean(), x, "targets"))
    error = np.hypot(draws.std(ddof=1), x.std(ddof=1) / 2)
    low, high = mixed.interval()
    assert (high - low) / 2 > 1.96 * error  # t with finite Welch freedom is wider than normal
    with pytest.raises(ValueError, match="binomial"):
        u.difference_across_studies(mixed, u.Estimate(0.1, np.array([1, 10]), "binomial"))
    # replicates without spread (TPR@0.1% of 0 in all three) beside a bootstrap: the
    # bootstrap's spread alone, with unlimited freedom (it once divided by zero)
    flat = u.difference_across_studies(u.Estimate(0.0, np.zeros(3), "replicates"),
                                       u.Estimate(0.5, draws, "bootstrap"))
    assert flat.interval() == pytest.approx((-0.5 - 1.959964 * draws.std(ddof=1),
                                             -0.5 + 1.959964 * draws.std(ddof=1)), rel=1e-4)


def test_difference_of_two_studies_on_one_split_pairs_their_targets():
    """A DP sweep's studies audit the same records target by target, so their values move
    together with the draw: the difference is paired, Student-t over the per-target
    differences as scipy's paired t; Welch's, blind to the shared draw, is wider here."""
    from scipy import stats

    rng = np.random.default_rng(3)
    draw = rng.normal(0.0, 0.05, 5)  # what each target's records do to both studies
    x, y = 0.6 + draw + rng.normal(0, 0.01, 5), 0.55 + draw + rng.normal(0, 0.01, 5)
    sides = u.Estimate(x.mean(), x, "targets"), u.Estimate(y.mean(), y, "targets")
    paired = u.difference_across_studies(*sides, paired=True)
    expected = stats.ttest_rel(x, y).confidence_interval(0.95)
    assert paired.method == "targets"
    assert paired.interval() == pytest.approx((expected.low, expected.high))
    welch = u.difference_across_studies(*sides).interval()
    assert welch[1] - welch[0] > 2 * (expected.high - expected.low)


def test_mean_of_studies_is_welchs_interval_and_covers_the_truth():
    """A claim stated on average over settings (studies trained apart, unpaired): the mean of
    their values with a Welch-Satterthwaite t interval; by hand on two studies of three
    replicates (standard errors 1/sqrt 3 and 2/sqrt 3, halved), and at its nominal rate over
    three studies of ten replicates with unequal spreads. One study is its own mean."""
    from scipy import stats

    a, b = u.Estimate(2.0, np.array([1.0, 2.0, 3.0]), "targets"), u.Estimate(
        6.0, np.array([4.0, 6.0, 8.0]), "replicates")
    mean = u.mean_across_studies([a, b])
    parts = np.array([1 / 3, 4 / 3]) / 4  # squared standard errors, each weighted by 1/2
    dof = parts.sum() ** 2 / (parts**2 / 2).sum()
    half = stats.t.ppf(0.975, dof) * np.sqrt(parts.sum())
    assert mean.value == 4.0
    assert mean.interval() == pytest.approx((4.0 - half, 4.0 + half))
    assert u.mean_across_studies([a]) is a
    with pytest.raises(ValueError, match="binomial"):
        u.mean_across_studies([a, u.Estimate(0.1, np.array([1, 10]), "binomial")])
    rng = np.random.default_rng(7)
    covered, trials = 0, 2000
    for _ in range(trials):
        studies = [rng.normal(centre, spread, 10) for centre, spread in
                   ((0.5, 0.02), (0.6, 0.05), (0.7, 0.1))]
        low, high = u.mean_across_studies(
            [u.Estimate(x.mean(), x, "replicates") for x in studies]).interval()
        covered += low <= 0.6 <= high
    assert 0.93 <= covered / trials <= 0.97, covered / trials


def test_difference_of_two_studies_bootstraps_covers_the_truth():
    """Two studies with audits of their own, bootstrapped under one seed (the same weights):
    the draw-by-draw difference covers the true AUC difference at its nominal rate."""
    rng = np.random.default_rng(6)
    truth = norm.cdf(1 / np.sqrt(2)) - norm.cdf(0.5 / np.sqrt(2))
    covered, trials = 0, 200
    member = np.repeat([True, False], 300)
    for trial in range(trials):
        sides = []
        for shift in (1.0, 0.5):
            score = rng.normal(shift * member, 1.0)
            draws = u.bootstrap_metrics(member, score, (), seed=trial, n_boot=400)["auc"]
            sides.append(u.Estimate(u.point_metrics(member, score, ())["auc"], draws,
                                    "bootstrap"))
        low, high = u.difference_across_studies(*sides).interval()
        covered += low <= truth <= high
    assert 0.90 <= covered / trials <= 0.99, covered / trials


def test_an_interval_over_replicates_needs_two_and_keeps_resolvability():
    ok, unresolved = u.Estimate(0.6, np.array([0.6]), "bootstrap"), u.Estimate(
        0.5, np.array([0.5]), "bootstrap", resolvable=False)
    with pytest.raises(ValueError, match="at least 2"):
        u.over_replicates([ok])
    both = u.over_replicates([ok, unresolved])
    assert both.method == "replicates" and both.value == pytest.approx(0.55)
    assert not both.resolvable
    low, high = u.over_replicates([ok, ok, unresolved]).interval()  # t(2) over 0.6, 0.6, 0.5
    half = 4.302653 * np.std([0.6, 0.6, 0.5], ddof=1) / np.sqrt(3)
    assert (low, high) == pytest.approx((0.5667 - half, 0.5667 + half), abs=1e-4)


def test_bootstrap_is_seeded_and_paired():
    rng = np.random.default_rng(3)
    member, score = scores_with_ties(rng, 200)
    first = u.bootstrap_metrics(member, score, (0.1,), seed=[7, 0], n_boot=200)
    again = u.bootstrap_metrics(member, score, (0.1,), seed=[7, 0], n_boot=200)
    for name in first:
        np.testing.assert_array_equal(first[name], again[name])
    # a second attack that ranks identically gives identical replicates: difference exactly 0
    shifted = u.bootstrap_metrics(member, 3 * score + 1, (0.1,), seed=[7, 0], n_boot=200)
    np.testing.assert_array_equal(first["auc"], shifted["auc"])


@pytest.mark.parametrize(("metric", "members", "nonmembers", "expected"), [
    ("tpr@1%", 5000, 1000, True),
    ("tpr@1%", 5000, 999, False),
    ("tpr@0.1%", 5000, 5000, False),
    ("tpr@0.1%", 10000, 10000, True),
    ("precision@1%", 2000, 2000, True),
    ("auc", 20, 20, True),
    ("auc", 5, 5, False),  # a handful of records resolves nothing
    ("tpr@50%", 19, 1000, False),
    # a calibrated decision's precision calls about 1 - a of the non-members: 1.4 of 142
    ("precision@cal99", 142, 142, False),
    ("precision@cal99", 1000, 1000, True),
    ("precision@cal90", 142, 142, True),
    ("accuracy@cal99", 142, 142, True),
])
def test_resolvability_rule(metric, members, nonmembers, expected):
    assert u.resolvable(metric, members, nonmembers) is expected


def scores_frame(n_targets, n=300, seed=0):
    rng = np.random.default_rng(seed)
    frames = []
    for target in range(n_targets):
        member = np.arange(n) % 2 == 0
        frames.append(pd.DataFrame({"sample": np.arange(n), "target": target, "member": member,
                                    "score": rng.normal(member * 0.5, 1.0)}))
    return pd.concat(frames, ignore_index=True)


def test_few_targets_use_the_bootstrap_and_many_the_spread_over_targets():
    two = u.estimates(u.metric_table(scores_frame(2), (0.1,), seed=0, n_boot=200))
    assert two["auc"].method == "bootstrap" and two["auc"].draws.shape == (200,)
    low, high = two["auc"].interval()
    assert low < two["auc"].value < high
    table = u.metric_table(scores_frame(4), (0.1,), seed=0)
    assert (table["replicate"] == -1).all() and len(table) == 4
    four = u.estimates(table)["auc"]
    assert four.method == "targets"
    spread = 3.182446305284263 * four.draws.std(ddof=1) / 2  # t(0.975, 3) * sd / sqrt(4)
    assert four.interval() == pytest.approx((four.value - spread, four.value + spread))


def test_targets_that_share_a_pool_are_one_realisation_however_many():
    """A balanced split's targets share their pool and reference models: their spread is not a
    rerun's, so four of them take the bootstrap over their records, never a t(3) interval."""
    table = u.metric_table(scores_frame(4), (0.1,), seed=0, n_boot=200, repetitions=False)
    assert (table["replicate"] >= 0).any()
    shared = u.estimates(table)["auc"]
    assert shared.method == "bootstrap" and shared.draws.shape == (200,)
    assert shared.value == pytest.approx(u.estimates(u.metric_table(
        scores_frame(4), (0.1,), seed=0))["auc"].value)  # the same mean over targets


def test_unresolvable_metrics_are_marked():
    estimates = u.estimates(u.metric_table(scores_frame(1, n=300), (0.01, 0.1), 0, 100))
    assert estimates["tpr@10%"].resolvable and not estimates["tpr@1%"].resolvable


def test_runs_pool_their_exceedances_where_each_has_enough():
    """TPR@0.1% on 2,000 non-members rests on 2 of them above the threshold: n/r in one run,
    its 4 repetitions pooling 8, and 3 replicates of those 24; a run with fewer than 2 pools
    nothing, and a metric without an FPR needs no pooling."""
    table = u.metric_table(scores_frame(4, n=4000), (0.001,), seed=0)
    tpr = u.estimates(table)["tpr@0.1%"]
    assert not tpr.resolvable and tpr.method == "targets"
    assert tpr.exceedances == pytest.approx(8.0)
    assert u.over_replicates([tpr, tpr, tpr]).exceedances == pytest.approx(24.0)
    more = u.estimates(u.metric_table(scores_frame(4, n=6000), (0.001,), seed=0))["tpr@0.1%"]
    few = u.estimates(u.metric_table(scores_frame(4, n=2000), (0.001,), seed=0))["tpr@0.1%"]
    assert more.exceedances == pytest.approx(12.0) and few.exceedances == 0.0  # 1 a run
    assert (tpr - more).exceedances == pytest.approx(8.0)  # a pair: its fewer
    assert (more - few).exceedances == 0.0
    assert u.over_replicates([tpr, few]).exceedances == 0.0
    # the conservative threshold admits floor(n a) of them: 2,999 non-members hold 2
    assert u.exceedances("tpr@0.1%", 500, 2999) == 2.0
    assert u.estimates(table)["auc"].exceedances == np.inf


def test_paired_difference_needs_the_same_resampling():
    a = u.Estimate(0.5, np.array([0.4, 0.5, 0.6]), "targets")
    b = u.Estimate(0.3, np.array([0.3, 0.3, 0.3]), "targets")
    difference = a - b
    assert difference.value == pytest.approx(0.2)
    np.testing.assert_allclose(difference.draws, [0.1, 0.2, 0.3])
    assert a.ratio(b).value == pytest.approx(0.5 / 0.3)
    with pytest.raises(ValueError, match="same targets"):
        a - u.Estimate(0.3, np.zeros(100), "bootstrap")


def test_ratio_over_replicates_is_the_ratio_of_means_with_its_delta_method_interval():
    """By hand: R = mean(a) / mean(b), standard error sd(a_i - R b_i) / (sqrt(n) mean(b)); one
    replicate with b near 0 no longer makes the interval that of the per-replicate ratios."""
    a = np.array([0.70, 0.72, 0.75, 0.69, 0.71, 0.74, 0.73, 0.70, 0.72, 0.02])
    b = np.array([0.80, 0.79, 0.82, 0.76, 0.78, 0.81, 0.80, 0.77, 0.79, 0.02])
    ratio = u.Estimate(a.mean(), a, "replicates").ratio(u.Estimate(b.mean(), b, "replicates"))
    value = a.mean() / b.mean()
    error = (a - value * b).std(ddof=1) / np.sqrt(len(a)) / b.mean()
    half = 2.2621571627409915 * error  # t(0.975, 9)
    assert ratio.value == pytest.approx(value)
    assert ratio.interval() == pytest.approx((value - half, value + half))
    assert ratio.interval()[1] - ratio.interval()[0] < 0.1  # per-replicate ratios: about 0.7
    bootstrap = u.Estimate(1.0, np.array([1.0, 2.0]), "bootstrap").ratio(
        u.Estimate(2.0, np.array([4.0, 4.0]), "bootstrap"))
    np.testing.assert_allclose(bootstrap.draws, [0.25, 0.5])  # draw by draw


def test_a_cost_over_replicates_is_its_geometric_mean_with_the_logs_interval():
    """SUB-C6's shape: three replicates' BiGAN fits of 0.5, 0.5 and 1.0 minutes (the last
    retried a collapsed generator). On the raw scale the interval reached below 0; on the log
    scale, by hand, it is exp(mean(log) +- t sd(log) / sqrt(3)), above 0. A ratio of two
    costs divides replicate by replicate, and its value is the geometric mean of the ratios.
    """
    values = np.array([0.5, 0.5, 1.0])
    raw = u.over_replicates([u.Estimate(v, np.array([v]), "bootstrap") for v in values])
    assert raw.interval()[0] < 0
    cost = u.geometric(raw)
    logs = np.log(values)
    half = 4.302652729749464 * logs.std(ddof=1) / np.sqrt(3)  # t(0.975, 2)
    assert cost.value == pytest.approx(np.exp(logs.mean()))
    assert cost.interval() == pytest.approx(np.exp([logs.mean() - half, logs.mean() + half]))
    other = u.geometric(u.Estimate(2.0, np.array([2.0, 2.5, 2.0]), "replicates"))
    ratio = cost.ratio(other)
    assert ratio.log_scale
    np.testing.assert_allclose(ratio.draws, values / [2.0, 2.5, 2.0])
    assert ratio.value == pytest.approx(np.exp(np.log(values / [2.0, 2.5, 2.0]).mean()))
    assert u.standard_error(ratio)[0] == pytest.approx(
        np.log(values / [2.0, 2.5, 2.0]).std(ddof=1) / np.sqrt(3))
    # one run's bootstrap is already drawn log-normal: left as it is
    once = u.Estimate(1.0, np.array([0.9, 1.1]), "bootstrap")
    assert u.geometric(once) is once
    # an attack that trains nothing costs 0: no log holds it, so it stays on the raw scale,
    # and a ratio against it takes both there (the delta method's)
    free = u.Estimate(0.5, np.array([0.0, 1.0, 0.5]), "replicates")
    assert u.geometric(free) is free
    mixed = free.ratio(cost)
    assert not mixed.log_scale
    assert mixed.value == pytest.approx(free.value / values.mean())
    with pytest.raises(ValueError, match="ratio alone"):
        cost - other  # a difference of geometric means is not their logs' difference
    with pytest.raises(ValueError, match="log scale"):
        u.mean_across_studies([cost, other])


def test_binomial_interval_is_clopper_pearson_by_hand():
    """k = 0 of 10: the upper limit solves (1 - p)^10 = 0.025; k = 10 mirrors it; an
    interior count matches scipy's exact interval."""
    from scipy.stats import binomtest

    none = u.Estimate(0.0, np.array([0.0, 10.0]), "binomial").interval()
    assert none == pytest.approx((0.0, 1 - 0.025 ** 0.1))
    every = u.Estimate(1.0, np.array([10.0, 10.0]), "binomial").interval()
    assert every == pytest.approx((0.025 ** 0.1, 1.0))
    exact = binomtest(7, 400).proportion_ci(0.95, method="exact")
    assert u.Estimate(7 / 400, np.array([7.0, 400.0]), "binomial").interval() == pytest.approx(
        (exact.low, exact.high))
    with pytest.raises(ValueError, match="paired comparison"):  # compared with a constant
        u.Estimate(0.1, np.array([1.0, 10.0]), "binomial") - u.Estimate(
            0.2, np.array([2.0, 10.0]), "binomial")


def test_empirical_fprs_pool_the_flagged_non_members_of_every_target():
    frame = scores_frame(2, n=400)
    nonmember = ~frame["member"].to_numpy()
    flagged = np.zeros(len(frame), dtype=bool)
    flagged[np.flatnonzero(nonmember)[[0, 1, 2, 250, 399]]] = True  # 3 of target 0's, 2 of 1's
    frame["fpr@1%"] = flagged
    estimate = u.estimates(u.metric_table(frame, (0.1,), seed=0, n_boot=100))["fpr@1%"]
    assert estimate.method == "binomial"
    np.testing.assert_array_equal(estimate.draws, [5, 400])
    assert estimate.value == pytest.approx(5 / 400)
    assert u.percent_scale("fpr@1%") == 100.0


def test_empirical_fprs_of_three_repetitions_are_judged_over_them():
    """From three targets on, each a repetition with a quantile model of its own, an empirical
    FPR's interval is Student-t over the targets' own FPRs, as any metric's: pooling their
    non-members would hide how far one model's training seed moves the FPR it delivers."""
    frame = scores_frame(3, n=400)
    nonmember = ~frame["member"].to_numpy()
    flagged = np.zeros(len(frame), dtype=bool)
    per_target = [2, 6, 12]  # of each target's 200 non-members
    for target, count in enumerate(per_target):
        rows = np.flatnonzero(nonmember & (frame["target"] == target).to_numpy())
        flagged[rows[:count]] = True
    frame["fpr@1%"] = flagged
    estimate = u.estimates(u.metric_table(frame, (0.1,), seed=0, n_boot=100))["fpr@1%"]
    shares = np.array(per_target) / 200
    assert estimate.method == "targets"
    np.testing.assert_allclose(estimate.draws, shares)
    half = 4.302653 * shares.std(ddof=1) / np.sqrt(3)
    assert estimate.interval() == pytest.approx((shares.mean() - half, shares.mean() + half))


def _audit(rng, shift: float, n_in: int = 300, n_out: int = 1500, rate: float = 0.3
           ) -> pd.DataFrame:
    """One target's scores file: scores ``N(shift * member, 1)``, calls at ``rate`` (and at
    ``rate + shift / 2`` for members)."""
    member = np.repeat([True, False], [n_in, n_out])
    return pd.DataFrame({"sample": np.arange(n_in + n_out), "target": 0, "member": member,
                         "score": rng.normal(shift * member, 1.0),
                         "decision": rng.random(n_in + n_out) < rate + shift / 2 * member})


NULL_METRICS = ("auc", "tpr@1%", "precision@1%", "accuracy", "advantage", "precision")


def test_null_draws_follow_an_attack_without_signal():
    """Audits of scores and calls that ignore membership: each metric's mean and spread over
    500 of them match :func:`null_draws` at the same size."""
    rng = np.random.default_rng(3)
    points = pd.concat([u.metric_table(_audit(rng, 0.0), (0.01,), seed=0, n_boot=1)
                        for _ in range(500)])
    points = points[points["replicate"] < 0]
    for metric in NULL_METRICS:
        draws = u.null_draws(metric, points.iloc[0].to_dict(), np.random.default_rng(0), 20_000)
        observed = points[metric].to_numpy(float)
        assert abs(observed.mean() - draws.mean()) < 0.2 * draws.std(), metric
        assert observed.std() == pytest.approx(draws.std(), rel=0.15), metric
    assert u.null_draws("recall", points.iloc[0].to_dict(), rng) is None  # no chance level
    assert u.null_draws("pinball@1%", points.iloc[0].to_dict(), rng) is None


def test_the_chance_test_over_replicates_keeps_its_level_and_pools_their_records():
    """Without signal, an attack is told from chance in about 5% of studies of 3 replicates;
    with a weak one (AUC 0.54, advantage 0.075), the test on every replicate's records at once
    finds it almost always, where the t(2) interval over the replicates' values rarely does
    (it made "no signal" a coin toss from one seed to the next)."""
    rng = np.random.default_rng(5)
    # without signal 400 studies, enough to tell a 5% test (here 5.25% and 4.75%) from a 10%
    for shift, trials, bounds in ((0.0, 400, (0.025, 0.085)), (0.15, 100, (0.85, 1.0))):
        found = {metric: 0 for metric in ("auc", "advantage")}
        t_found = dict(found)
        for _ in range(trials):
            tables = [u.estimates(u.metric_table(_audit(rng, shift), (0.01,), seed=i, n_boot=1))
                      for i in range(3)]
            for metric in found:
                estimate = u.over_replicates([table[metric] for table in tables])
                chance = u.chance_level(metric)
                found[metric] += not estimate.consistent_with_chance(chance)
                low, high = estimate.interval()
                t_found[metric] += not low <= chance <= high
        for metric, count in found.items():
            assert bounds[0] <= count / trials <= bounds[1], (shift, metric, count / trials)
            if shift:
                assert t_found[metric] < count - 30, (metric, t_found[metric], count)


def test_without_null_draws_the_chance_test_reads_the_interval():
    estimate = u.Estimate(0.52, np.linspace(0.49, 0.55, 101), "bootstrap")
    assert estimate.consistent_with_chance(0.5)
    assert not estimate.consistent_with_chance(0.48)
    assert (estimate - estimate).null is None  # a difference has no chance level


def test_an_attacks_estimates_are_made_once_per_job_and_equal_those_made_afresh(tmp_path):
    """The artifact jobs ask for an attack's estimates many times (the claims table once per
    claim and side): they are made once, from the metrics file, and equal a fresh computation,
    chance draws included (seeded by target and metric)."""
    from miarepro import io
    from miarepro.artifacts import results

    table = u.metric_table(scores_frame(2), (0.1,), seed=0, n_boot=200)
    path = results.metrics_path(str(tmp_path), "s", "a")
    path.parent.mkdir(parents=True)
    io.write_table(path, table)
    first = results.attack_estimates(str(tmp_path), "s", "a")
    assert results.attack_estimates(str(tmp_path), "s", "a") is first
    for metric, fresh in u.estimates(io.read_table(path)).items():
        made = first[metric]
        assert (made.value, made.method) == (fresh.value, fresh.method)
        np.testing.assert_array_equal(made.draws, fresh.draws)
        np.testing.assert_array_equal(made.null, fresh.null)


def test_shown_intervals_are_clipped_to_each_metric_s_range():
    """A rate's interval stops at 0 and 1, an advantage's (TPR - FPR) at -1 and 1: clipped at
    0, an attack at chance read "advantage [0, 17.5]" beside its accuracy's [46.4, 58.7]."""
    from miarepro.artifacts.results import estimate_columns

    straddling = u.Estimate(0.05, np.array([-0.1, 0.05, 0.2]), "replicates")
    low, high = straddling.interval()
    assert low < 0 < high
    for metric in ("advantage", "advantage@cal"):
        row = estimate_columns(metric, straddling)
        assert (row[f"{metric}_low"], row[f"{metric}_high"]) == pytest.approx((low, high))
    rate = estimate_columns("tpr@1%", straddling)
    assert (rate["tpr@1%_low"], rate["tpr@1%_high"]) == pytest.approx((0.0, high))
    wide = u.Estimate(0.0, np.array([-0.9, 0.0, 0.9]), "replicates")
    assert estimate_columns("advantage", wide)["advantage_low"] == -1.0


def test_bootstrap_draws_are_each_replicates_mean_over_the_targets():
    """An attack's bootstrap draws of a metric: for each replicate, the mean of its targets'
    values (all metrics computed at once, as the per-metric pivot did)."""
    table = u.metric_table(scores_frame(2), (0.1,), seed=3, n_boot=50)
    found = u.estimates(table)
    boot = table[table["replicate"] >= 0]
    for metric in ("auc", "tpr@10%", "precision@10%"):
        by_hand = boot.pivot(index="replicate", columns="target", values=metric).mean(axis=1)
        assert found[metric].method == "bootstrap"
        np.testing.assert_array_equal(found[metric].draws, by_hand.to_numpy(float))
