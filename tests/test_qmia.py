"""QMIA and its quantile regressor: Theorem 1 on known quantiles, hand cases, separation."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from overfit import overfit_context

from miarepro import metrics, quantile, signals
from miarepro.attacks import get_attack

BACKBONE = {"arch": "mlp", "widths": [64, 64]}
RECIPE = {"epochs": 60, "lr": 1e-3, "weight_decay": 0.0, "batch_size": 128, "accumulate": 1,
          "hidden_dims": []}


def heteroscedastic(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores ``sin(2 x0) + (0.2 + |x1|) e``: true conditional quantiles known, spread varying."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1.5, 1.5, size=(n, 4)).astype(np.float32)
    return X, np.sin(2 * X[:, 0]) + (0.2 + np.abs(X[:, 1])) * rng.standard_normal(n)


@pytest.fixture(scope="module")
def fitted():
    """Both heads trained to convergence: with 12,000 records and a learning rate of 3e-4, as
    at 1e-3 the pinball loss's sign-like gradients leave the predicted quantiles' offset
    moving by a few points of FPR from one epoch to the next."""
    X, s = heteroscedastic(12000, 0)
    taus = quantile.levels(21, smallest=1e-2)
    heads = {head: quantile.fit(X, s, BACKBONE, head, taus, {**RECIPE, "lr": 3e-4}, seed=0)[0]
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


def test_selection_keeps_fresh_non_members_within_the_binomial_interval_of_a():
    """A regressor with a [512, 512] head on 3,200 public scores memorises them within a few
    epochs (trained 40 epochs, it flagged 2.1% of fresh scores at a = 1%); selected on the
    held-out 800 by pinball loss, the share of 4,000 fresh scores above its predicted
    ``1 - a`` quantile lies within the exact binomial interval of ``a`` at 1, 5 and 10%."""
    from miarepro.uncertainty import Estimate

    X, s = heteroscedastic(4000, 0)
    taus = quantile.levels(21, smallest=1e-2)
    predict, selection = quantile.fit(X, s, BACKBONE, "gaussian", taus,
                                      {"epochs": 40, "hidden_dims": [512, 512]}, seed=0)
    assert selection["n_validation"] == 800 and selection["kept"] != "epoch 40 of 40"
    assert len(selection["validation_losses"]) < 40  # stopped after `patience` epochs
    X_fresh, s_fresh = heteroscedastic(4000, 1)
    arrays = predict(X_fresh)
    for alpha in (0.01, 0.05, 0.1):
        flagged = int((s_fresh >= quantile.quantile_at(arrays, 1 - alpha, taus)).sum())
        low, high = Estimate(flagged / 4000, np.array([flagged, 4000.0]), "binomial").interval()
        assert low <= alpha <= high, (alpha, flagged / 4000, low, high)


def test_quantile_levels_and_pinball_loss_by_hand():
    taus = quantile.levels(3, smallest=0.01)
    np.testing.assert_allclose(taus, [0.0, 0.9, 0.99])
    loss = quantile.pinball(np.array([[1.0, 2.0]]), np.array([1.5]), np.array([0.1, 0.9]))
    # level 0.1 under-predicts by 0.5: 0.1 * 0.5; level 0.9 over-predicts by 0.5: 0.1 * 0.5
    assert loss == pytest.approx((0.05 + 0.05) / 2)


def test_validation_loss_scores_each_level_with_its_own_column():
    """The selection criterion by hand: level 0's column is left out, every other level is
    scored with its own column (not its neighbour's), and the true quantiles beat shifted ones."""
    taus = np.array([0.0, 0.5, 0.9])
    scores = np.array([0.0, 1.0, 2.0, 3.0])
    columns = np.array([[-5.0, 1.5, 2.7]] * len(scores))
    expected = quantile.pinball(columns[:, 1:], scores, taus[1:])
    assert quantile.validation_loss({"quantiles": columns}, scores, taus) == pytest.approx(expected)
    moved = columns.copy()
    moved[:, 0] = -50.0  # level 0 carries no information: its column changes nothing
    assert quantile.validation_loss({"quantiles": moved}, scores, taus) == pytest.approx(expected)
    rng = np.random.default_rng(0)
    fresh = rng.standard_normal(20000)
    levels = quantile.levels(9, smallest=1e-2)
    true = np.tile(np.quantile(fresh, np.clip(levels, 1e-3, None)), (len(fresh), 1))
    true[:, 0] = -10.0
    losses = [quantile.validation_loss({"quantiles": true + shift}, fresh, levels)
              for shift in (0.0, 0.3, -0.3)]
    assert losses[0] < min(losses[1:])


def test_exceedance_score_is_the_interpolated_level_index():
    q = np.array([[0.0, 1.0, 3.0]] * 5)
    score = quantile.exceedance_score(np.array([0.5, 2.0, 3.0, -1.0, 1e9]), q)
    np.testing.assert_allclose(score[:3], [0.5, 1.5, 2.0])
    assert score[3] == pytest.approx(-np.log(2))  # one first gap below: -log(1 + 1)
    more = quantile.exceedance_score(np.array([3.5, 4.0]), q[:2])
    assert more[0] == pytest.approx(2 + np.log(1.25))  # a quarter of the last gap above
    assert score[2] < more[0] < more[1] < score[4] < np.inf  # ranked by margin, never tied


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
    predict, _ = quantile.fit(X[ctx.population], hinge[ctx.population], BACKBONE, head, taus,
                              RECIPE, seed=0)
    scores = get_attack("qmia").fn(dataclasses.replace(ctx, fit={**predict(X), "taus": taus}))
    assert metrics.auc(ctx.target_mask[ctx.audit], scores) > 0.7


def test_catboost_regressor_meets_theorem_1():
    """QMIA's tabular regressor: both CatBoost heads flag about ``a`` of held-out scores at
    level ``1 - a``, also within the high- and low-spread halves."""
    X, s = heteroscedastic(6000, 0)
    taus = quantile.levels(21, smallest=1e-2)
    Xt, st = heteroscedastic(20000, 1)
    wide = np.abs(Xt[:, 1]) > 0.75
    for head in ("gaussian", "quantiles"):
        arrays = quantile.fit(X, s, {"arch": "catboost"}, head, taus, {}, seed=0)[0](Xt)
        for alpha in (0.05, 0.1, 0.2):
            flagged = st >= quantile.quantile_at(arrays, 1 - alpha, taus)
            error = 3 * np.sqrt(alpha * (1 - alpha) / len(st)) + 0.015
            assert abs(flagged.mean() - alpha) < error, (head, alpha, flagged.mean())
            for group in (wide, ~wide):
                assert abs(flagged[group].mean() - alpha) < 2 * error, (head, alpha)


class StubStudy:
    """The parts of a study QMIA's fit reads: features, labels, target logits, the split."""

    def __init__(self, X: np.ndarray, logits: np.ndarray, labels: np.ndarray,
                 parts: dict[str, np.ndarray]) -> None:
        self.X, self.logits, self.y, self._parts = X, logits, labels, parts

    def features(self):
        return self.X

    def labels(self):
        return self.y

    def signals(self, role, index):
        return self.logits[None]

    def parts(self, group):
        return self._parts

    def fit_seed(self, group):
        return group


def test_the_search_never_sees_the_audited_records():
    """Poisoning every audited record (features and the target's logits) changes neither the
    search's trials and choice nor the regressor's predictions on public records."""
    rng = np.random.default_rng(0)
    n, public = 900, np.arange(0, 500)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(n, 3)).astype(np.float32) * (1 + np.abs(X[:, :1]))
    parts = {"population": public, "reference_pool": np.arange(0), "audit": np.arange(500, n),
             "target_train": np.arange(500, 700), "target_test": np.arange(700, n)}
    params = {"trials": 3, "backbone": {"arch": "mlp", "widths": []},
              "recipe": {"epochs": 3, "hidden_dims": [16]},
              "space": {"lr": {"low": 1e-4, "high": 1e-2, "log": True},
                        "epochs": {"low": 1, "high": 4}}}
    fit = get_attack("qmia").fit
    clean, clean_info = fit(StubStudy(X, logits, labels, parts), 0, **params)
    X_bad, logits_bad = X.copy(), logits.copy()
    X_bad[parts["audit"]] = 1e3
    logits_bad[parts["audit"]] = rng.normal(size=(n - 500, 3)) * 1e4
    poisoned, poisoned_info = fit(StubStudy(X_bad, logits_bad, labels, parts), 0, **params)
    assert clean_info["search"] == poisoned_info["search"]
    for key in ("mu", "sigma"):
        np.testing.assert_array_equal(clean[key][public], poisoned[key][public])
    assert len(clean_info["search"]["trials"]) == 3
    assert clean_info["recipe"]["epochs"] == clean_info["search"]["chosen"]["epochs"]


def test_search_space_errors_name_the_entry():
    from miarepro import search

    with pytest.raises(ValueError, match=r"space\.lr: needs 0 < low"):
        search.check_space({"lr": {"low": 0.0, "high": 1.0, "log": True}})
    with pytest.raises(ValueError, match=r"space\.depth: needs low and high"):
        search.check_space({"depth": {"low": 1, "hgh": 3}})
    with pytest.raises(ValueError, match=r"space\.dims: a categorical"):
        search.check_space({"dims": {"choices": []}})
    with pytest.raises(ValueError, match=r"space\.depht: unknown setting 'depht'"):
        quantile.check_recipe({"depht": {}}, {"arch": "catboost"}, "space")


def test_search_is_seeded_and_keeps_list_choices():
    from miarepro import search

    space = {"x": {"low": -2.0, "high": 2.0}, "dims": {"choices": [[], [8, 8]]},
             "n": {"low": 1, "high": 9, "step": 2}}

    def objective(params, report):
        report(0, params["x"] ** 2)
        return params["x"] ** 2 + len(params["dims"]) + params["n"]

    first = search.run(objective, space, 8, seed=3)
    assert first == search.run(objective, space, 8, seed=3)
    chosen, trials = first
    assert chosen["dims"] in ([], [8, 8]) and chosen["n"] in (1, 3, 5, 7, 9)
    best = min(t["loss"] for t in trials if t["loss"] is not None)
    assert objective(chosen, lambda *_: None) == best


def test_a_diverging_catboost_regressor_is_a_pruned_search_trial():
    """A large step with almost no regularisation makes CatBoost's Gaussian head diverge: it
    raises Diverged, and a search drops such a trial instead of failing the fit (found on a
    replicate's QMIA search, whose seeds reached a learning rate of 0.96)."""
    from miarepro import boosting, search

    X, s = heteroscedastic(2000, 0)
    wild = {"depth": 8, "l2_leaf_reg": 1e-6, "learning_rate": 1.0, "subsample": 0.6,
            "iterations": 100}
    with pytest.raises(boosting.Diverged, match="diverged"):
        boosting.fit_quantiles(X, s, "gaussian", np.array([0.5]), wild, 0, X[:10],
                               lambda raw: 0.0)

    def objective(params, report):
        if params["x"] > 0:
            raise boosting.Diverged("blew up")
        return params["x"] ** 2

    chosen, trials = search.run(objective, {"x": {"low": -1.0, "high": 1.0}}, 12, seed=0)
    assert chosen["x"] <= 0
    assert {t["state"] for t in trials if t["params"]["x"] > 0} == {"PRUNED"}


def test_implied_quantiles_by_hand():
    """Marginal: the public quantile, for everyone; LiRA: ``mu_out + s_out Phi^-1(tau)``;
    QMIA: the regressor's own."""
    from scipy.stats import norm

    ctx = overfit_context()
    few = dataclasses.replace(ctx, audit=ctx.audit[:4])
    taus = np.array([0.9, 0.99])
    value, thresholds = get_attack("marginal").quantiles(few, taus, statistic="hinge")
    public = ctx.target_statistic("hinge", ctx.population)[0]
    np.testing.assert_allclose(thresholds, np.tile(np.quantile(public, taus), (4, 1)))
    np.testing.assert_allclose(value, few.target_statistic("hinge")[0])
    lira = dataclasses.replace(few, reference_logits=ctx.reference_logits[:3],
                               reference_masks=np.zeros_like(ctx.reference_masks[:3]))
    _, implied = get_attack("lira").quantiles(lira, taus, variance="per_example",
                                             statistic="hinge")
    refs = lira.reference_statistic("hinge")[:, 0]
    expected = refs.mean(0)[:, None] + refs.std(0, ddof=1)[:, None] * norm.ppf(taus)
    np.testing.assert_allclose(implied, expected)
    fitted = dataclasses.replace(few, fit={"mu": np.full(len(ctx.labels), 1.0),
                                           "sigma": np.full(len(ctx.labels), 2.0),
                                           "taus": quantile.levels(5)})
    _, own = get_attack("qmia").quantiles(fitted, taus)
    np.testing.assert_allclose(own, np.tile(1.0 + 2.0 * norm.ppf(taus), (4, 1)))


def test_pinball_metric_is_the_nonmember_mean_with_paired_replicates():
    from miarepro import uncertainty

    rng = np.random.default_rng(0)
    member = np.repeat([True, False], 50)
    score = rng.normal(size=100) + member
    loss = rng.uniform(size=100)
    table = uncertainty.metric_table(
        __import__("pandas").DataFrame({"sample": np.arange(100), "target": 0,
                                        "member": member, "score": score,
                                        "pinball@1%": loss}), [0.1], seed=0, n_boot=50)
    point = table[table["replicate"] < 0]["pinball@1%"].iloc[0]
    assert point == pytest.approx(loss[~member].mean())
    replicates = table[table["replicate"] >= 0]["pinball@1%"]
    assert replicates.std() > 0 and replicates.between(loss.min(), loss.max()).all()


def test_a_catboost_model_trains_without_importing_torch():
    """A job training CatBoost targets (QMIA's tabular setting) does not pay torch's 2 s
    import: the training path, from the pipeline down, never imports it."""
    code = """
import sys
import numpy as np
from miarepro import pipeline
rng = np.random.default_rng(0)
data = {"X": rng.normal(size=(150, 4)).astype(np.float32), "y": rng.integers(0, 2, 150)}
spec = {"arch": "catboost", "iterations": 10, "depth": 2}
logits, info, _ = pipeline._train_catboost(data, np.arange(100), np.arange(100, 150), spec,
                                           2, 0, 1)
print(logits.shape, "torch" in sys.modules)
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=Path(__file__).resolve().parents[1])
    assert result.stdout.split() == ["(1,", "150,", "2)", "False"], result.stdout


def test_catboost_targets_round_trip_and_are_deterministic(tmp_path):
    """A CatBoost target: logits of every record ``(1, M, C)``, the same for the same seed,
    and the saved checkpoint (CatBoost's own format) predicts them again."""
    from catboost import CatBoostClassifier

    from miarepro import boosting

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=300) > 0).astype(np.int64) + (X[:, 1] > 1)
    spec = {"arch": "catboost", "iterations": 30, "depth": 3, "trials": 2, "folds": 2}
    model, info = boosting.train_target(X[:200], y[:200], 3, spec, seed=5, threads=1)
    again, info_again = boosting.train_target(X[:200], y[:200], 3, spec, seed=5, threads=1)
    logits = boosting.logits(model, X)
    assert logits.shape == (1, 300, 3) and logits.dtype == np.float32
    np.testing.assert_array_equal(logits, boosting.logits(again, X))
    assert info == info_again and len(info["search"]["trials"]) == 2
    model.save_model(str(tmp_path / "model.cbm"), format="cbm")
    loaded = CatBoostClassifier().load_model(str(tmp_path / "model.cbm"), format="cbm")
    np.testing.assert_array_equal(boosting.logits(loaded, X), logits)
    other, _ = boosting.train_target(X[:200], y[:200], 3, {**spec, "trials": 0}, seed=6,
                                     threads=1)
    assert not np.array_equal(boosting.logits(other, X), logits)
    # members are fitted better than non-members: the leakage every attack measures
    hinge = signals.hinge(logits[0], y)
    assert hinge[:200].mean() > hinge[200:].mean()


def test_catboost_border_count_bounds_how_finely_a_feature_is_split():
    """``border_count`` reaches both CatBoost models: on one feature quantised into 4 borders,
    the target's logits and the regressor's outputs take at most 5 values (one per bin); at
    CatBoost's default (254, the value the settings state) many more."""
    from miarepro import boosting

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 1)).astype(np.float32)
    y = (X[:, 0] + 0.5 * rng.normal(size=400) > 0).astype(np.int64)
    scores = np.sin(2 * X[:, 0]) + 0.3 * rng.standard_normal(400)
    taus = quantile.levels(5)

    def distinct(settings: dict) -> tuple[int, int]:
        spec = {"arch": "catboost", "iterations": 30, "depth": 3, **settings}
        model, info = boosting.train_target(X, y, 2, spec, seed=0, threads=1)
        assert info["settings"]["border_count"] == settings.get("border_count", 254)
        arrays = quantile.fit(X, scores, {"arch": "catboost"}, "gaussian", taus,
                              {"iterations": 30, **settings}, seed=0)[0](X)
        return (len(np.unique(boosting.logits(model, X)[0], axis=0)),
                len(np.unique(arrays["mu"])))

    coarse, fine = distinct({"border_count": 4}), distinct({})
    assert max(coarse) <= 5 and min(fine) > 20, (coarse, fine)


def test_a_fits_name_does_not_depend_on_the_order_of_a_recipes_keys():
    """Reordering a structured parameter's keys in a config changes no fit's folder, so it
    neither refits nor misses the between-workflow cache; changing a value does."""
    from miarepro.attacks import get_attack

    spec = get_attack("qmia")
    key = spec.fit_key({"recipe": {"lr": 0.01, "epochs": 5}}, 0)
    assert key == spec.fit_key({"recipe": {"epochs": 5, "lr": 0.01}}, 0)
    assert key != spec.fit_key({"recipe": {"epochs": 6, "lr": 0.01}}, 0)


def test_the_regressor_decays_its_weights_but_not_its_biases():
    """Table 4: "l2 weight regularization (excluding biases)"."""
    from torch import nn

    from miarepro.quantile import adamw

    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    groups = adamw(model, {"lr": 1e-3, "weight_decay": 0.01}).param_groups
    decay = {id(p): group["weight_decay"] for group in groups for p in group["params"]}
    assert {decay[id(model[0].weight)], decay[id(model[2].weight)]} == {0.01}
    assert {decay[id(model[0].bias)], decay[id(model[2].bias)]} == {0.0}
    assert len(decay) == len(list(model.parameters()))
