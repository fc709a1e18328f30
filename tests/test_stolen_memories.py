"""Stolen Memories: Theorem 1 by hand, Observation 1 and Algorithm 4 against the models'
weights and outputs, member separation on overfitted targets, calibration (Algorithm 3) and the
decision metrics of a balanced audit."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from miarepro import metrics, splits, uncertainty
from miarepro.attacks import get_attack
from miarepro.attacks.stolen_memories import _bayes_logit, _pairs, omniscient_logits
from miarepro.data.synthetic import sm_synthetic
from miarepro.ensemble import private_sums, train_ensemble
from miarepro.influence import split_at
from miarepro.models import build_model
from miarepro.pipeline import attack_context, calibration_records, decision_columns
from miarepro.training import predict_logits, train_model

RECIPE = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True,
          "weight_decay": 1e-4, "epochs": 60, "batch_size": 32}
SPLIT = {"scheme": "partition", "seed": 0,
         "fractions": {"target_train": 0.25, "target_test": 0.25, "reference_pool": 0.5}}


class Study:
    """The white-box handle of one trained target (what :class:`StudyFiles` gives a fit)."""

    def __init__(self, dataset, split, architecture, model) -> None:
        self.dataset, self.split = dataset, split
        self.architecture, self.model = architecture, model

    def features(self):
        return self.dataset.X

    def labels(self):
        return self.dataset.y

    def meta(self):
        return self.dataset.meta

    def new_model(self):
        return build_model(self.architecture, self.dataset.input_shape, self.dataset.n_classes)

    def load_model(self, role, index):
        return self.model.eval()

    def training_indices(self, role, index):
        return splits.training_indices(self.split, role, index)

    def parts(self, group):
        return splits.repetition(self.split, group)

    def recipe(self):
        return dict(RECIPE)

    def fit_seed(self, group):
        return group


def test_omniscient_is_theorem_1_by_hand():
    # two features, one class: mu* = (0, 1), mu_hat = (1, 1), sigma^2 = (2, 1), x = (3, 5)
    # w = ((1-0)/2, 0) = (0.5, 0); b = (0 - 1)/4 + (1 - 1)/2 = -0.25; logit = 1.5 - 0.25
    logit = omniscient_logits(np.array([[3.0, 5.0]]), np.array([0]), np.array([[0.0, 1.0]]),
                              np.array([2.0, 1.0]), np.array([[1.0, 1.0]]))
    assert logit == pytest.approx([1.25])
    # and it is the log-likelihood ratio of N(mu_hat, sigma^2) against N(mu*, sigma^2)
    from scipy.stats import norm

    x = np.array([3.0, 5.0])
    ratio = (norm.logpdf(x, [1.0, 1.0], np.sqrt([2.0, 1.0]))
             - norm.logpdf(x, [0.0, 1.0], np.sqrt([2.0, 1.0]))).sum()
    assert logit[0] == pytest.approx(ratio)


def test_bayes_wb_top_layer_is_observation_1():
    """At a linear layer the local linear model is the weights: the score is
    (W_y - mean W~_y)^T x + b_y - mean b~_y."""
    torch.manual_seed(0)
    target, proxies = torch.nn.Linear(5, 3), [torch.nn.Linear(5, 3) for _ in range(3)]
    x, y = torch.randn(7, 5), torch.tensor([0, 1, 2, 0, 1, 2, 0])
    logit = _bayes_logit(_pairs(target, proxies, x, y, steps=4))
    weight = target.weight - torch.stack([p.weight for p in proxies]).mean(0)
    bias = target.bias - torch.stack([p.bias for p in proxies]).mean(0)
    by_hand = (weight[y] * x).sum(1) + bias[y]
    assert torch.allclose(logit, by_hand, atol=1e-5)


def test_bayes_wb_deep_layer_is_the_logit_gap():
    """Efficiency makes Algorithm 4's local linear test the target's minus the proxies' mean
    logit of the record's class, at any layer (up to the Riemann error)."""
    torch.manual_seed(1)
    model = build_model({"arch": "mlp", "widths": [16, 8], "activation": "tanh"}, (6,), 3).double()
    proxies = [build_model({"arch": "mlp", "widths": [16, 8], "activation": "tanh"}, (6,),
                           3).double()[3:] for _ in range(2)]
    h, g = split_at(model, 3)
    x, y = torch.randn(10, 6, dtype=torch.float64), torch.arange(10) % 3
    z = h(x).detach()
    logit = _bayes_logit(_pairs(g, proxies, z, y, steps=256))
    gap = (g(z).gather(1, y[:, None])[:, 0]
           - torch.stack([p(z).gather(1, y[:, None])[:, 0] for p in proxies]).mean(0))
    assert torch.allclose(logit, gap.detach(), atol=1e-4)


@pytest.fixture(scope="module")
def overfit():
    """A linear softmax target on 100 records of Stolen Memories' synthetic data (75 features):
    it fits its training set and generalises poorly, so membership leaks."""
    dataset = sm_synthetic(Path("."), n_samples=400)
    split = splits.make_split(len(dataset.y), SPLIT)
    architecture = {"arch": "mlp", "widths": []}
    trained = train_model(dataset.X, dataset.y, split["target_train"], architecture, RECIPE,
                          dataset.n_classes, seed=0, eval_indices=split["target_test"])
    study = Study(dataset, split, architecture, trained.model)
    arrays, info = get_attack("bayes_wb").fit(study, 0, proxies=4, shadows=3,
                                              displacement_widths=[0, 4], meta_widths=[0])
    logits = predict_logits(trained.model, dataset.X)
    context = attack_context({"attack": "bayes_wb"}, dataset.y, split, 0, logits, {},
                             study=study)
    return dataclasses.replace(context, fit=arrays), info, trained.info


@pytest.mark.parametrize(("attack", "params"), [
    ("omniscient", {}), ("bayes_wb", {}), ("bayes_wb", {"meta": True}), ("general_wb", {}),
    ("general_wb", {"n_d": 0, "n_m": 0}), ("general_wb", {"n_d": 4, "n_m": 0})])
def test_white_box_attacks_separate_members_of_an_overfitted_target(overfit, attack, params):
    context, _, card = overfit
    assert card["train_accuracy"] == 1.0 and card["test_accuracy"] < 0.7
    member = context.target_mask[context.audit]
    score = get_attack(attack).fn(context, **params)
    assert metrics.auc(member, score) > 0.8
    decided = metrics.decision_metrics(member, score > get_attack(attack).threshold)
    assert decided["advantage"] > 0.3  # the paper's own decision rule (logit > 0) works


def test_the_fit_chooses_on_validation_shadows(overfit):
    context, info, _ = overfit
    accuracy = [point["validation_accuracy"] for point in info["sweep"]]
    assert len(accuracy) == 2 and info["chosen"]["n_d"] == [0, 4][int(np.argmax(accuracy))]
    assert np.array_equal(get_attack("general_wb").fn(context),
                          context.fit["general_wb"][int(np.argmax(accuracy))][context.audit])
    saved = {key.split(".")[0] for key in context.fit if "." in key}
    assert saved == {"meta_model", "general_wb_model"}  # the trained attack models themselves
    assert {key.split(".")[1] for key in context.fit
            if key.startswith("general_wb_model.")} == {"0", "1"}  # each point of the sweep
    with pytest.raises(ValueError, match="not in the fit's sweep"):
        get_attack("general_wb").fn(context, n_d=16, n_m=0)
    with pytest.raises(ValueError, match="both n_d and n_m"):
        get_attack("general_wb").fn(context, n_d=0)
    with pytest.raises(ValueError, match="layer 3 is not attacked"):
        get_attack("bayes_wb").fn(context, layer=3)


def test_the_fit_is_deterministic(overfit):
    context, _, _ = overfit
    study = context.study
    again, _ = get_attack("bayes_wb").fit(study, 0, proxies=4, shadows=3,
                                          displacement_widths=[0, 4], meta_widths=[0])
    for key in ("bayes_wb", "bayes_wb_meta", "general_wb"):
        assert np.array_equal(again[key], context.fit[key])


def test_general_wb_attacks_every_layer_of_an_mlp_and_bayes_wb_its_top_one(overfit):
    """§5: general-wb learns a displacement for each layer of every target and its meta model
    combines them (Figure 6 sweeps that model's width on an MLP); bayes-wb on an MLP is
    Algorithm 1 on the final layer. A fit with its defaults on a one-hidden-layer MLP does both."""
    context = overfit[0]
    study = context.study
    mlp = {"arch": "mlp", "widths": [16]}
    trained = train_model(study.dataset.X, study.dataset.y, study.split["target_train"], mlp,
                          RECIPE, study.dataset.n_classes, seed=0)
    hidden = Study(study.dataset, study.split, mlp, trained.model)
    arrays, info = get_attack("general_wb").fit(hidden, 0, proxies=2, shadows=2, epochs=4,
                                                displacement_widths=[0], meta_widths=[4])
    assert len(info["layers"]) == 2 and arrays["bayes_wb"].shape[0] == 2
    assert {key.split(".")[3] for key in arrays if key.startswith(
        "general_wb_model.0.displacements.")} == {"0", "1"}
    assert arrays["general_wb_model.0.meta.0.weight"].shape == (4, 2)  # both layers' logits
    ctx = dataclasses.replace(context, fit=arrays)
    assert np.array_equal(get_attack("bayes_wb").fn(ctx), arrays["bayes_wb"][-1][ctx.audit])


def test_omniscient_needs_generated_gaussian_data(overfit):
    context, _, _ = overfit

    class NoTruth(Study):
        def meta(self):
            return {"source": "breast_cancer"}

    handle = NoTruth(context.study.dataset, context.study.split, {"arch": "mlp", "widths": []},
                     context.study.model)
    with pytest.raises(ValueError, match="known Gaussian class means"):
        get_attack("omniscient").fn(dataclasses.replace(context, study=handle))


def test_calibration_gives_each_class_the_false_positive_rate_asked_for():
    """Algorithm 3 on one sample of non-members; the FPR measured on a fresh sample of them is
    about 1 - alpha in every class, though the classes' score scales differ."""
    rng = np.random.default_rng(0)
    n, shift = 20000, np.array([0.0, 3.0, -2.0])
    labels, fresh_labels = rng.integers(0, 3, n), rng.integers(0, 3, n)
    scores = rng.normal(shift[labels], 1.0 + labels)
    fresh = rng.normal(shift[fresh_labels], 1.0 + fresh_labels)
    for alpha in (0.9, 0.99):
        tau = metrics.class_thresholds(scores, labels, alpha, 3)
        for c in range(3):
            fpr = np.mean(fresh[fresh_labels == c] > tau[c])
            assert fpr == pytest.approx(1 - alpha, abs=0.25 * (1 - alpha) + 0.003)
    # a class without calibration records takes the pooled threshold
    tau = metrics.class_thresholds(np.array([1.0, 2.0, 3.0]), np.array([0, 0, 0]), 0.5, 2)
    assert tau.tolist() == [2.0, 2.0]


def test_decision_columns_and_calibration_records():
    values, labels = np.array([0.5, -1.0, 2.0, 0.1]), np.array([0, 0, 1, 1])
    held_out, held_labels = np.array([-3.0, -2.0, 0.2, 1.0, 3.0, 0.0]), np.array([0, 0, 0, 1, 1, 1])
    columns = decision_columns(values, labels, 0.0, held_out, held_labels, [0.5])
    assert columns["decision"].tolist() == [True, False, True, True]
    # class 0 threshold: sorted(-3, -2, 0.2)[1] = -2; class 1: sorted(0, 1, 3)[1] = 1
    assert columns["decision@cal50"].tolist() == [True, True, True, False]
    assert "decision@cal50" not in decision_columns(values, labels, 0.0, held_out[:0],
                                                    held_labels[:0], [0.5])
    split = splits.make_split(40, SPLIT)
    context = attack_context({"attack": "naive"}, np.zeros(40, int), split, 0,
                             np.zeros((1, 40, 2), np.float32), {})
    assert np.array_equal(calibration_records(context), split["reference_pool"])
    balanced = splits.make_split(40, {"scheme": "balanced", "seed": 0})
    context = attack_context({"attack": "naive"}, np.zeros(40, int), balanced, 0,
                             np.zeros((1, 40, 2), np.float32), {})
    assert len(calibration_records(context)) == 0  # its pool is the audit


def test_decision_metrics_of_a_balanced_audit_match_the_definitions():
    rng = np.random.default_rng(3)
    member = np.repeat([True, False], 50)
    called = rng.random(100) < np.where(member, 0.8, 0.3)
    point = uncertainty.point_metrics(member, rng.random(100), [0.1],
                                      decisions={"decision": called, "decision@cal90": ~called})
    expected = metrics.decision_metrics(member, called)
    for name in uncertainty.DECISION_METRICS:
        assert point[name] == pytest.approx(expected[name])
    assert point["recall@cal90"] == pytest.approx(1 - expected["recall"])
    draws = uncertainty.bootstrap_metrics(member, rng.random(100), [0.1], 0, 200,
                                          decisions={"decision": called})
    assert abs(np.mean(draws["accuracy"]) - expected["accuracy"]) < 0.02
    assert uncertainty.percent_scale("precision@cal99") == 100
    assert uncertainty.decision_metric_names([0.9])[-1] == "recall@cal90"


def test_private_sums_clip_each_sample_then_add_noise_by_hand():
    """DP-SGD's gradient of a stack, against a hand computation: per model, the sampled
    records' gradients scaled to norm <= C (over all parameters), summed, noised, divided
    by the expected batch size; padding contributes nothing."""
    g = {"w": torch.tensor([[[3.0, 4.0], [0.3, 0.4]], [[6.0, 8.0], [1.0, 0.0]]]),
         "b": torch.tensor([[[0.0], [0.0]], [[0.0], [1.0]]])}
    weight = torch.tensor([[1.0, 1.0], [1.0, 0.0]])  # model 1's second record is padding
    quiet = private_sums(g, weight, 1.0, 0.0, 2.0, torch.Generator().manual_seed(0))
    # model 0: |(3,4,0)| = 5 -> (0.6, 0.8); |(0.3,0.4,0)| = 0.5 kept; model 1: (0.6, 0.8) alone
    torch.testing.assert_close(quiet["w"], torch.tensor([[0.45, 0.6], [0.3, 0.4]]),
                               atol=1e-6, rtol=0)
    torch.testing.assert_close(quiet["b"], torch.zeros(2, 1))
    noisy = private_sums(g, weight, 1.0, 2.0, 2.0, torch.Generator().manual_seed(0))
    expected_noise = torch.normal(0.0, 2.0, size=(2, 2), generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(noisy["w"], quiet["w"] + expected_noise / 2.0)


def test_a_dp_recipe_trains_the_stack_by_dp_sgd():
    """Strong privacy (epsilon 0.25) keeps a stack from memorising random labels that the
    same recipe without DP fits; the noise is drawn from the seed (same seed, same models)."""
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.normal(size=(200, 10)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 2, 200))
    subsets = np.stack([rng.choice(200, 40, replace=False) for _ in range(3)])
    recipe = {**RECIPE, "epochs": 80, "batch_size": 8}

    def train(dp):
        return train_ensemble(lambda: build_model({"arch": "mlp", "widths": [32]}, (10,), 2),
                              X, y, subsets, {**recipe, "dp": dp} if dp else recipe, seed=0)

    def fitted(ensemble):
        logits = ensemble(X)
        return np.mean([(logits[k].argmax(-1) == y).numpy()[subsets[k]].mean()
                        for k in range(3)])

    private = train({"epsilon": 0.25})
    assert fitted(train(None)) > 0.95 and fitted(private) < 0.8
    torch.testing.assert_close(private(X), train({"epsilon": 0.25})(X))


def test_an_ensemble_trains_each_model_on_its_own_rows():
    """Each model of the stack fits its own subset (as if trained alone) and no other's."""
    rng = np.random.default_rng(0)
    X = torch.tensor(rng.normal(size=(200, 10)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 2, 200))  # random labels: only memorisation fits them
    subsets = np.stack([rng.choice(200, 40, replace=False) for _ in range(3)])
    ensemble = train_ensemble(lambda: build_model({"arch": "mlp", "widths": [32]}, (10,), 2),
                              X, y, subsets, {**RECIPE, "epochs": 80}, seed=0)
    logits = ensemble(X)
    for k in range(3):
        fitted = (logits[k].argmax(-1) == y).numpy()
        others = np.setdiff1d(np.arange(200), subsets[k])
        assert fitted[subsets[k]].mean() > 0.95 and fitted[others].mean() < 0.7
        assert torch.allclose(ensemble.module(k)(X), logits[k], atol=1e-5)


def test_a_convolutional_stack_trains_one_by_one_as_under_vmap(monkeypatch):
    """On a CPU a LeNet stack runs its models one after another (vmap's grouped convolutions
    are slower there): same batches, same updates, so the same models as under ``vmap``."""
    from miarepro import ensemble as stacks

    rng = np.random.default_rng(0)
    X = torch.tensor(rng.normal(size=(64, 1, 28, 28)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 10, 64))
    subsets = np.stack([rng.choice(64, 32, replace=False) for _ in range(2)])

    def train(one_by_one: bool) -> torch.Tensor:
        monkeypatch.setattr(stacks, "_one_by_one", lambda base, device: one_by_one)
        trained = train_ensemble(lambda: build_model({"arch": "lenet"}, (1, 28, 28), 10), X, y,
                                 subsets, {**RECIPE, "epochs": 2, "batch_size": 8}, seed=0)
        assert trained.one_by_one is one_by_one
        return trained(X)

    assert stacks._one_by_one(build_model({"arch": "lenet"}, (1, 28, 28), 10),
                              torch.device("cpu"))
    torch.testing.assert_close(train(True), train(False), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("shared", [True, False])
def test_a_dense_stack_trains_by_batched_products_as_under_vmap(monkeypatch, shared):
    """Dense stacks run as batched products rather than under ``vmap`` (0.87 of a fit's time
    on the digits study): the same operations, so the same models bit for bit, with inputs
    shared by every model (proxies) or each model's own (shadow models' features)."""
    from miarepro import ensemble as stacks

    rng = np.random.default_rng(0)
    X = torch.tensor(rng.normal(size=(3, 90, 256)), dtype=torch.float32)
    y = torch.tensor(rng.integers(0, 10, (3, 90)))
    X, y = (X[0], y[0]) if shared else (X, y)
    subsets = np.stack([rng.choice(90, 45, replace=False) for _ in range(3)])
    build = lambda: build_model({"arch": "mlp", "widths": [120, 84]}, (256,), 10)  # noqa: E731

    def train(batched: bool) -> dict[str, torch.Tensor]:
        monkeypatch.setattr(stacks, "_batched_products", lambda base: batched)
        trained = train_ensemble(build, X, y, subsets, {**RECIPE, "epochs": 3}, seed=0)
        assert trained.batched is batched
        return {**trained.params, "logits": trained(X if shared else X[0])}

    assert stacks._batched_products(build())
    assert not stacks._batched_products(
        build_model({"arch": "mlp", "widths": [8], "dropout": 0.5}, (256,), 10))
    batched, under_vmap = train(True), train(False)
    assert all(torch.equal(batched[name], under_vmap[name]) for name in under_vmap)


def test_the_attack_models_train_as_with_batches_gathered_one_by_one():
    """``_train`` gathers an epoch's shuffled rows once and slices its batches, with the
    displacement's pairs stacked once, and steps Adam over all parameters in one call
    (``foreach``): the very weights of a loop that gathers and stacks every batch anew and
    steps Adam parameter by parameter (the loop it replaced, written out here)."""
    from miarepro.attacks import stolen_memories as sm

    generator = torch.Generator().manual_seed(0)
    layers = [tuple(torch.randn(300, width, generator=generator) for _ in range(3))
              + tuple(torch.randn(300, generator=generator) for _ in range(2)) for width in (12, 5)]
    labels = (torch.rand(300, generator=generator) < 0.5).float()
    build = lambda: sm._general_wb_model(2, 4, 4)  # noqa: E731
    model = sm._train(build, layers, labels, 3, 1e-2, seed=5)

    torch.manual_seed(5)
    order_of = torch.Generator().manual_seed(5)
    reference = build()
    optimizer = torch.optim.Adam(reference.parameters(), lr=1e-2, foreach=False)
    for _ in range(3):
        for batch in torch.randperm(300, generator=order_of).split(sm._ADAM_BATCH):
            rows = [(torch.stack([chi[batch], chi_p[batch]], -1), z[batch],
                     torch.stack([bias[batch], bias_p[batch]], -1))
                    for chi, chi_p, z, bias, bias_p in layers]
            optimizer.zero_grad(set_to_none=True)
            torch.nn.functional.binary_cross_entropy_with_logits(
                reference(rows), labels[batch]).backward()
            optimizer.step()
    assert all(torch.equal(a, b) for a, b in
               zip(model.state_dict().values(), reference.state_dict().values(), strict=True))


def test_the_attack_models_train_in_float32_as_in_float64(monkeypatch):
    """general-wb's displacements and meta model train in float32 (half the memory traffic of
    float64, which they used to train in): the same predictions to float32's tolerance."""
    from miarepro.attacks import stolen_memories as sm

    generator = torch.Generator().manual_seed(0)
    layers = [tuple(torch.randn(96, width, generator=generator) for _ in range(3))
              + tuple(torch.randn(96, generator=generator) for _ in range(2)) for width in (12, 5)]
    labels = (torch.rand(96, generator=generator) < 0.5).float()

    def predictions(dtype: str) -> np.ndarray:
        monkeypatch.setattr(sm, "_MODEL_DTYPE", dtype)
        model = sm._train(lambda: sm._general_wb_model(2, 4, 4), layers, labels, 8, 1e-2, seed=0)
        assert next(model.parameters()).dtype == getattr(torch, dtype)
        return sm._predict(model, layers)

    np.testing.assert_allclose(predictions("float32"), predictions("float64"), atol=1e-4)


def test_an_attack_model_is_its_seeds_alone():
    """general-wb's and bayes-wb's meta models start from their own seed's weights: whatever
    drew from torch's global generator before (the proxies and shadows trained in the same
    fit, another job in the same process) changes nothing, and another seed changes them."""
    from miarepro.attacks import stolen_memories as sm

    generator = torch.Generator().manual_seed(0)
    layers = [tuple(torch.randn(64, 6, generator=generator) for _ in range(3))
              + tuple(torch.randn(64, generator=generator) for _ in range(2))]
    labels = (torch.rand(64, generator=generator) < 0.5).float()

    def weights(seed: int, drawn_before: int) -> torch.Tensor:
        torch.manual_seed(drawn_before)
        torch.rand(drawn_before + 1)
        model = sm._train(lambda: sm._general_wb_model(1, 4, 4), layers, labels, 0, 1e-2, seed)
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    assert torch.equal(weights(3, drawn_before=0), weights(3, drawn_before=7))
    assert not torch.equal(weights(3, drawn_before=0), weights(4, drawn_before=0))


@pytest.mark.parametrize(("variant", "layers", "epochs"),
                         [("classic", 5, 2), ("stolen_memories", 4, 1)])  # the larger, once
def test_a_lenet_target_is_attacked_at_each_of_its_layers(variant, layers, epochs):
    """The LeNet-5 path of the default run's Figure 9: a fit with ``layers: all`` slices the
    target before both convolutions and the dense layers, scores every record at each, and its
    meta model combines them; the paper's LeNet with dropout below three of its cuts too (its
    proxies train with that dropout)."""
    from miarepro.data import load_dataset
    from miarepro.influence import layer_boundaries

    digits = load_dataset({"source": "digits", "layout": "mnist"})
    dataset = dataclasses.replace(digits, X=digits.X[:600], y=digits.y[:600])  # a third: faster
    split = splits.make_split(len(dataset.y), SPLIT)
    architecture = {"arch": "lenet", "variant": variant}
    recipe = {"optimizer": "adam", "lr": 1e-2, "epochs": epochs, "batch_size": 64}
    trained = train_model(dataset.X, dataset.y, split["target_train"], architecture, recipe,
                          dataset.n_classes, seed=0)
    study = Study(dataset, split, architecture, trained.model)
    study.recipe = lambda: dict(recipe)
    arrays, info = get_attack("bayes_wb").fit(study, 0, layers="all", proxies=1, shadows=1,
                                              shadow_records=100, steps=2, epochs=2,
                                              displacement_widths=[0], meta_widths=[0])
    assert info["layers"] == layer_boundaries(trained.model) and len(info["layers"]) == layers
    assert arrays["bayes_wb"].shape == (layers, len(dataset.y))
    assert np.isfinite(arrays["bayes_wb"]).all() and np.isfinite(arrays["bayes_wb_meta"]).all()


def _dense_by_hand(state: dict, prefix: str, x: np.ndarray) -> np.ndarray:
    """``_small_mlp``'s output in numpy: one linear map, or linear-ReLU-linear."""
    if f"{prefix}.weight" in state:  # no hidden layer
        bias = state.get(f"{prefix}.bias", 0.0)
        return x @ state[f"{prefix}.weight"].T + bias
    hidden = np.maximum(x @ state[f"{prefix}.0.weight"].T + state[f"{prefix}.0.bias"], 0)
    return hidden @ state[f"{prefix}.2.weight"].T + state[f"{prefix}.2.bias"]


@pytest.mark.parametrize(("n_d", "n_m"), [(0, 0), (3, 0), (0, 2), (3, 2)])
def test_general_wb_is_its_displacements_and_meta_model_by_hand(n_d, n_m):
    """Algorithm 2's score on two layers of three records, in numpy: at layer l each weight
    pair (chi_j, chi~_j) goes through the displacement D_l, the layer's logit is
    sum_j D_l(chi_j, chi~_j) z_j + D_l(b, b~), and the meta model maps the layers' logits to
    the score. The network's weights are drawn, then read back as arrays."""
    from miarepro.attacks import stolen_memories as sm

    torch.manual_seed(n_d * 10 + n_m)
    model = sm._general_wb_model(2, n_d, n_m).float()
    generator = torch.Generator().manual_seed(1)
    layers = [tuple(torch.randn(3, width, generator=generator) for _ in range(3))
              + tuple(torch.randn(3, generator=generator) for _ in range(2))
              for width in (4, 2)]
    state = {key: value.numpy() for key, value in model.state_dict().items()}
    logits = []
    for index, (chi, chi_p, z, b, b_p) in enumerate(layers):
        def displaced(a, c, index=index):
            return _dense_by_hand(state, f"displacements.{index}", np.stack([a, c], -1))[..., 0]
        logits.append((displaced(chi.numpy(), chi_p.numpy()) * z.numpy()).sum(1)
                      + displaced(b.numpy(), b_p.numpy()))
    by_hand = _dense_by_hand(state, "meta", np.stack(logits, 1))[:, 0]
    np.testing.assert_allclose(sm._predict(model, layers), by_hand, rtol=1e-5, atol=1e-5)


def test_general_wb_at_minimal_capacity_can_subtract():
    """§4.3: a displacement of no hidden units, ``a chi + c chi~``, represents bayes-wb's
    subtraction: at a = 1, c = -1 and an identity meta model, general-wb is bayes-wb."""
    from miarepro.attacks import stolen_memories as sm

    model = sm._general_wb_model(1, 0, 0).float()
    with torch.no_grad():
        model.displacements[0].weight.copy_(torch.tensor([[1.0, -1.0]]))
        model.meta.weight.fill_(1.0)
        model.meta.bias.zero_()
    generator = torch.Generator().manual_seed(2)
    pairs = tuple(torch.randn(5, 7, generator=generator) for _ in range(3)) + tuple(
        torch.randn(5, generator=generator) for _ in range(2))
    np.testing.assert_allclose(sm._predict(model, [pairs]), _bayes_logit(pairs).numpy(),
                               rtol=1e-5, atol=1e-5)


def test_bayes_wb_meta_is_its_meta_model_on_the_layer_logits(overfit):
    """bayes-wb's meta variant (§4.2) scores a record by the fit's meta model (16 hidden
    units) applied to its bayes-wb logit at every attacked layer: recomputed in numpy from
    the saved weights and the saved per-layer logits, and returned for the audited records."""
    context, _, _ = overfit
    fit = context.fit
    state = {key.removeprefix("meta_model."): value for key, value in fit.items()
             if key.startswith("meta_model.")}
    assert state["meta.0.weight"].shape == (16, len(fit["bayes_wb"]))
    by_hand = _dense_by_hand(state, "meta", fit["bayes_wb"].T.astype(np.float32))[:, 0]
    np.testing.assert_allclose(fit["bayes_wb_meta"], by_hand, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(get_attack("bayes_wb").fn(context, meta=True),
                                  fit["bayes_wb_meta"][context.audit])
