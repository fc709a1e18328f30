"""Config validation: every bad input is rejected at start-up, naming the key and the fix."""

import copy
from pathlib import Path

import pytest
import yaml

from miarepro import config as cfg
from miarepro import paths, schema
from miarepro.io import read_yaml

ROOT = Path(__file__).resolve().parent.parent
#: parsed once (libyaml's parser where PyYAML has it); each test edits its own deep copy
DEFAULT = read_yaml((ROOT / "config" / "config.yaml").read_text())


@pytest.fixture
def default():
    return copy.deepcopy(DEFAULT)


def test_default_config_is_valid_and_gets_defaults(default):
    validated = cfg.validate(copy.deepcopy(default))
    study = next(iter(validated["studies"].values()))
    assert study["targets"] >= 1 and "queries" in study and "deviations" in study
    assert validated["metrics"]["bootstrap"] == 1000


def test_every_paper_config_is_valid():
    paths = sorted((ROOT / "config" / "papers").glob("*.yaml"))
    assert {path.stem for path in paths} >= {"bmia", "stolen-memories", "qmia", "iha", "subpop",
                                              "all"}
    for path in paths:
        validated = cfg.validate(yaml.safe_load(path.read_text()))
        assert validated["studies"], path.name


def bmia(c):
    return c["studies"]["bmia-purchase"]


def iha(c):
    return c["studies"]["iha-purchase"]


def tiny_dataset(c):
    c["datasets"]["purchase-like-iha"]["n_samples"] = 200


# (edit, words every message must contain): each probe is one mistake a user makes.
PROBES = [
    (lambda c: c.update(typo=1), ["config key typo", "unknown key"]),
    (lambda c: c["metrics"].update(fprs=[0.01, 2]), ["metrics.fprs.1"]),
    (lambda c: c["datasets"]["mnist-subset"].update(source="mnist_subst"),
     ["datasets.mnist-subset", "did you mean 'mnist_subset'"]),
    (lambda c: c["datasets"]["purchase-like-iha"].update(n_sample=10),
     ["datasets.purchase-like-iha", "'n_sample'", "did you mean 'n_samples'"]),
    (lambda c: c["datasets"]["purchase-like-iha"].update(taste_weight=2),
     ["taste_weight", "outside [0, 1]"]),
    (lambda c: bmia(c).update(dataset="purchase-lik"), ["studies.bmia-purchase.dataset",
                                                        "did you mean"]),
    (lambda c: bmia(c).update(paper="bmai"), ["studies.bmia-purchase.paper",
                                              "did you mean 'bmia'"]),
    (lambda c: bmia(c)["attacks"].update(x={"attack": "lria"}),
     ["attacks.x.attack", "unknown attack 'lria'"]),
    (lambda c: bmia(c)["attacks"]["loss"].update(statistc="loss"),
     ["attacks.loss.statistc", "did you mean 'statistic'"]),
    (lambda c: bmia(c)["attacks"]["lira-n2"].update(n_references=4),
     ["attacks.lira-n2.n_references", "did you mean 'n_reference'", "the workflow's keys"]),
    (lambda c: c["studies"]["bmia-mnist-mlp"].update(dataset="mnist-subst"),
     ["studies.bmia-mnist-mlp.dataset", "did you mean 'mnist-subset'"]),
    (lambda c: bmia(c)["attacks"]["lira-n2"].update(statistic="hinj"),
     ["attacks.lira-n2.statistic", "'hinj'", "did you mean 'hinge'"]),
    (lambda c: iha(c)["attacks"]["lira-online"].update(mode="onlin"),
     ["attacks.lira-online.mode", "did you mean 'online'"]),
    (lambda c: iha(c)["attacks"]["rmia-online"].update(a=1.5), ["rmia-online.a", "[0, 1]"]),
    (lambda c: bmia(c)["split"].update(fractions={"target_train": 0.4, "target_test": 0.4,
                                                  "reference_pool": 0.8}),
     ["split.fractions", "sum to 1.6"]),
    (lambda c: bmia(c)["split"]["fractions"].update(target_test=0),
     ["split.fractions.target_test", "must be positive"]),
    (lambda c: bmia(c)["split"].pop("fractions"), ["split.fractions", "required"]),
    (lambda c: iha(c)["split"].update(fractions={"target_train": 0.5}),
     ["studies.iha-purchase.split.fractions", "only for the 'partition' scheme"]),
    (lambda c: bmia(c)["split"].update(scheme="partion"), ["split.scheme",
                                                           "did you mean 'partition'"]),
    (lambda c: bmia(c)["split"]["fractions"].update(reference_pool=0.0),
     ["n_reference", "leaves reference models 0 records"]),
    (lambda c: bmia(c)["split"]["fractions"].update(population=0.0),
     ["attacks.rmia-n2", "population"]),
    (lambda c: (odd(c)["split"].pop("population_fraction"), odd(c)["attacks"].update(
        q={"attack": "qmia"})), ["studies.iha-mnist-odd.split", "attack 'q' (qmia)",
                                 "public non-members", "population"]),
    (lambda c: c["studies"]["qmia-tabular"].update(
        split={"scheme": "partition", "seed": 0,
               "fractions": {"target_train": 0.5, "target_test": 0.5}},
        attacks={"qmia": {"attack": "qmia", "backbone": {"arch": "catboost"}}}),
     ["studies.qmia-tabular.split", "attack 'qmia' (qmia)", "public non-members"]),
    (lambda c: bmia(c).update(model={"arch": "transformer"}),
     ["studies.bmia-purchase.model.arch", "unknown architecture 'transformer'"]),
    (lambda c: bmia(c).update(model={"arch": "resnet", "depth": 13}),
     ["model.depth", "unknown value 13", "[10, 18, 20, 34, 50]"]),
    (lambda c: bmia(c)["model"].update(widht=[3]), ["model.widht", "did you mean 'widths'"]),
    (lambda c: bmia(c)["model"].update(activation="gelu"), ["model.activation", "'gelu'"]),
    (lambda c: bmia(c)["training"].update(epochs=0), ["training.epochs"]),
    (lambda c: iha(c).update(train_stacked=["target"]),
     ["studies.iha-purchase.train_stacked", "['target'] train one to a job"]),
    (lambda c: c["studies"]["iha-mnist-odd"].update(train_stacked=["reference"]),
     ["studies.iha-mnist-odd.train_stacked", "only MLPs", "'logistic'"]),
    (lambda c: iha(c).update(train_stacked=["reference"], training={
        **iha(c)["training"], "dp": {"epsilon": 8.0, "delta": 1e-5, "max_grad_norm": 1.0}}),
     ["studies.iha-purchase.train_stacked", "DP-SGD"]),
    (lambda c: bmia(c)["training"].update(optimiser="adam"),
     ["training.optimiser", "did you mean 'optimizer'"]),
    (lambda c: bmia(c)["attacks"]["lira-n8"].update(n_reference=1500),
     ["attacks.lira-n8.n_reference", "below 1000"]),
    (lambda c: (tiny_dataset(c), iha(c)["attacks"].update(l={
        "attack": "l_attack", "loo_records": 2000, "loo_models": 2})),
     ["attacks.l.loo_records", "2000 is more than"]),
    (lambda c: iha(c)["attacks"].update(l={"attack": "lira_l", "loo_records": 4}),
     ["attacks.l", "loo_models"]),
    (lambda c: c["studies"]["iha-mnist"]["attacks"]["iha-cg"].update(records=5000),
     ["studies.iha-mnist.attacks.iha-cg.records", "5000 is more than the 4000"]),
    (lambda c: c["studies"]["iha-mnist"]["attacks"]["iha"].update(terms=["I5"]),
     ["attacks.iha.terms", "'I5'"]),
    (lambda c: c["studies"]["iha-mnist"]["attacks"]["iha"].update(conditioning="lowrank"),
     ["attacks.iha.conditioning", "did you mean 'low_rank'"]),
    (lambda c: c["studies"]["iha-mnist"]["attacks"]["iha"].update(fraction=0),
     ["attacks.iha.fraction", "(0, 1]"]),
    (lambda c: c["artifacts"]["IHA-T5a"].pop("fpr"), ["artifacts.IHA-T5a.fpr", "required"]),
    (lambda c: bmia(c)["regime"].update(baseline="attack-q"),
     ["regime.baseline", "did you mean 'attack-p'"]),
    (lambda c: c["artifacts"].update(x={"builder": "rco"}), ["artifacts.x.builder",
                                                           "did you mean 'roc'"]),
    (lambda c: c["artifacts"].update(x={"builder": "paper_table", "metrics": ["auc"]}),
     ["artifacts.x", "artifact ID"]),
    (lambda c: c["artifacts"]["BMIA-T1"].pop("metrics"), ["artifacts.BMIA-T1.metrics",
                                                          "required"]),
    (lambda c: c["artifacts"]["ROC-iha-purchase"].update(studes=["iha-purchase"]),
     ["artifacts.ROC-iha-purchase.studes", "did you mean 'studies'"]),
    (lambda c: c["artifacts"]["leaderboard"].update(title="x"),
     ["artifacts.leaderboard.title", "builder 'leaderboard'"]),
    (lambda c: c["artifacts"]["ROC-reference-count"]["attacks"].append("lira-n16"),
     ["artifacts.ROC-reference-count.attacks", "'lira-n16'", "did you mean 'lira-n8'"]),
    (lambda c: c["artifacts"]["IHA-T2"].update(metrics=["acc"]),
     ["artifacts.IHA-T2.metrics", "unknown metric 'acc'"]),
    (lambda c: c["artifacts"]["leaderboard"].update(fprs=[0.02]),
     ["artifacts.leaderboard.fprs", "not in metrics.fprs"]),
    (lambda c: c["artifacts"]["IHA-T2"].update(studies=["iha-purchse"]),
     ["artifacts.IHA-T2.studies", "did you mean 'iha-purchase'"]),
    (lambda c: c["artifacts"]["SM-F12"].update(bound_studies=["sm-bcw-eps-0-5"]),
     ["artifacts.SM-F12.bound_studies", "the artifact's studies", "did you mean"]),
    (lambda c: bmia(c)["attacks"].update(q={"attack": "qmia", "backbone": {"arch": "mpl"}}),
     ["attacks.q.backbone.arch", "did you mean 'mlp'"]),
    (lambda c: bmia(c)["attacks"]["qmia"].update(head="quantile"),
     ["attacks.qmia.head", "did you mean 'quantiles'"]),
    (lambda c: bmia(c)["attacks"]["qmia"].update(recipe={"epoch": 3}),
     ["attacks.qmia.recipe.epoch", "did you mean 'epochs'"]),
    (lambda c: bmia(c)["attacks"]["qmia"].update(trials=4, space={"lr": {"low": 1e-3}}),
     ["attacks.qmia.space.lr", "needs low and high"]),
    (lambda c: bmia(c)["attacks"]["qmia"].update(backbone={"arch": "catboost", "depth": 3}),
     ["attacks.qmia.backbone", "from 'recipe'"]),
    (lambda c: c["studies"]["qmia-tabular"]["model"].update(trials=-1),
     ["studies.qmia-tabular.model.trials", "outside"]),
    (lambda c: ood(c).update(models_from="bmia-mnst"),
     ["studies.bmia-mnist-ood.models_from", "did you mean 'bmia-mnist'"]),
    (lambda c: ood(c).update(dataset="mnist-ood"),
     ["studies.bmia-mnist-ood.dataset", "comes from models_from study 'bmia-mnist'"]),
    (lambda c: c["studies"].update(again={**ood(c), "models_from": "bmia-mnist-ood"}),
     ["studies.again.models_from", "name that study instead"]),
    (lambda c: c["datasets"]["mnist-ood"].pop("ood_rotation"),
     ["studies.bmia-mnist-ood.nonmembers", "has no ood records"]),
    (lambda c: (c["datasets"]["mnist-ood"].pop("ood_rotation"), c["datasets"]["mnist-ood"].update(
        ood={"source": "digits", "layot": "mnist"})),
     ["datasets.mnist-ood", "ood:", "did you mean 'layout'"]),
    (lambda c: c["datasets"]["mnist-ood"].update(ood_rotation=200),
     ["datasets.mnist-ood", "ood_rotation", "outside"]),
    (lambda c: c["datasets"]["mnist-ood"].update(ood={"source": "digits"}),
     ["datasets.mnist-ood", "either ood"]),
    (lambda c: c["studies"]["bmia-mnist-mlp"]["split"].update(seed=1),
     ["bmia-mnist.attacks.bmia-ref-mlp.reference_study", "another split"]),
    (lambda c: c["studies"]["bmia-mnist"]["attacks"]["bmia-ref-mlp"].update(
        reference_study="bmia-purchase"), ["bmia-ref-mlp.reference_study", "another dataset"]),
    (lambda c: c["artifacts"]["BMIA-F4"]["attacks"].append("bmia-ref-cnn"),
     ["artifacts.BMIA-F4.attacks", "'bmia-ref-cnn'"]),
    (lambda c: c["artifacts"]["BMIA-F4"].update(metrics=["auc", "tpr@1%"]),
     ["artifacts.BMIA-F4.metrics", "one metric"]),
    (lambda c: c["artifacts"]["BMIA-F2"].update(studies=["bmia-mnist", "bmia-purchase"]),
     ["artifacts.BMIA-F2.studies", "one study"]),
    (lambda c: c["artifacts"]["BMIA-F2"].pop("attacks"), ["artifacts.BMIA-F2.attacks",
                                                          "required"]),
    # a paper key that names nothing of the paper would blank its column and its claims
    (lambda c: bmia(c)["attacks"]["bmia"].update(paper_attack="bmai"),
     ["studies.bmia-purchase.attacks.bmia.paper_attack", "'bmai'", "did you mean 'bmia'",
      "paper_values.csv"]),
    (lambda c: bmia(c)["attacks"]["lira-n2"].update(paper_setting="n=99"),
     ["attacks.lira-n2.paper_setting", "'n=99'", "attack 'lira_offline'", "'n=2'"]),
    (lambda c: bmia(c)["attacks"]["loss"].update(paper_setting="n=2"),
     ["attacks.loss.paper_setting", "give paper_attack too"]),
    (lambda c: bmia(c).update(paper_dataset="purchase-100"),
     ["studies.bmia-purchase.paper_dataset", "did you mean 'purchase100'"]),
    (lambda c: c["artifacts"]["IHA-T4"].update(paper_dataset="purchase100s"),
     ["artifacts.IHA-T4.paper_dataset", "did you mean 'purchase100_s'"]),
    (lambda c: c["artifacts"]["IHA-T9"].update(default_setting="fraction=1"),
     ["artifacts.IHA-T9.default_setting", "'fraction=1'", "did you mean 'fraction=1.0'"]),
    # silently wrong output otherwise: a figure against None, broken links, twin rows
    (lambda c: c["artifacts"]["BMIA-F3a"].update(x="n_sample"),
     ["artifacts.BMIA-F3a.x", "unknown parameter 'n_sample'", "did you mean 'n_samples'"]),
    (lambda c: c["artifacts"]["BMIA-F3a"].update(series="hesian"),
     ["artifacts.BMIA-F3a.series", "did you mean 'hessian'"]),
    (lambda c: c["artifacts"].update({"my table": {"builder": "leaderboard"}}),
     ["config key artifacts", "'my table' does not match"]),
    (lambda c: c["artifacts"].update({"a/b": {"builder": "leaderboard"}}),
     ["config key artifacts", "'a/b' does not match"]),
    (lambda c: bmia(c)["attacks"]["loss"].update(label="Attack-P"),
     ["studies.bmia-purchase.attacks.loss.label", "'Attack-P' is also the label of "
      "'attack-p'"]),
    (lambda c: c["artifacts"]["BMIA-T1"].update(studies=[]),
     ["artifacts.BMIA-T1.studies", "should be non-empty"]),
    (lambda c: c["artifacts"]["IHA-T2"].update(metrics=[]),
     ["artifacts.IHA-T2.metrics", "should be non-empty"]),
    (lambda c: c["artifacts"]["SM-F5"].update(attacks=[]),
     ["artifacts.SM-F5.attacks", "should be non-empty"]),
    # caught inside a job before, without the key
    (lambda c: c["datasets"]["mnist-subset"].update(subsample=6000),
     ["datasets.mnist-subset", "subsample: 6000 is more than the 5000 records"]),
    (lambda c: c["datasets"]["adult-like-1000"].update(subsample=5000),
     ["datasets.adult-like-1000", "more than the 4000 records of source 'tabular_like'"]),
    (lambda c: c["datasets"]["mnist-subset"].update(subsample="abc"),
     ["datasets.mnist-subset", "subsample", "'abc'"]),
    (lambda c: c["datasets"]["mnist-subset"].update(subsample=-5),
     ["datasets.mnist-subset", "subsample: -5 is outside"]),
    (lambda c: c["datasets"]["sm-synthetic-800"].update(n_samples=801),
     ["datasets.sm-synthetic-800", "n_samples=801 must be a multiple of n_classes=10"]),
    (lambda c: bmia(c).update(model={"arch": "lenet"}),
     ["studies.bmia-purchase.model.arch", "'lenet' is a convolutional model",
      "'purchase-like-bmia' gives feature vectors"]),
    (lambda c: (c["datasets"]["mnist-ood"].pop("ood_rotation"), c["datasets"]["mnist-ood"].update(
        ood={"source": "purchase_like", "n_samples": 100})),
     ["datasets.mnist-ood", "ood: source 'purchase_like' gives feature vectors"]),
    (lambda c: c["datasets"]["purchase-like-iha"].update(ood_rotation=15),
     ["datasets.purchase-like-iha", "ood_rotation rotates images"]),
    (lambda c: (c["datasets"]["mnist-ood"].pop("ood_rotation"), c["datasets"]["mnist-ood"].update(
        ood={"source": "digits"})),
     ["datasets.mnist-ood", "ood: records of shape (1, 8, 8) ('digits')", "(1, 28, 28)"]),
    (lambda c: c["datasets"]["purchase-like-iha"].update(
        ood={"source": "purchase_like", "n_features": 60}),
     ["datasets.purchase-like-iha", "ood: records of shape (60,)", "gives (600,)"]),
    (lambda c: iha(c)["split"].update(references_train_on=["target_train"]),
     ["studies.iha-purchase.split.references_train_on", "only for the 'partition' scheme"]),
    (lambda c: (bmia(c)["split"]["fractions"].pop("population"),
                bmia(c)["split"].update(references_train_on=["target_train", "population"])),
     ["studies.bmia-purchase.split.references_train_on", "'population'", "leaves empty"]),
    (lambda c: bmia(c)["split"].update(references_train_on=["target_train", "reference_pool"]),
     ["studies.bmia-purchase.split.references_train_on", "(bmia)", "OUT for every audited"]),
    (lambda c: c["studies"]["sm-bcw"]["split"].update(references_train_on=["target_train"]),
     ["split.references_train_on", "(shadow)", "never train on"]),
    (lambda c: bmia(c)["split"].update(references_train_on=["target_test"]),
     ["studies.bmia-purchase.split.references_train_on.0", "target_test"]),
    # a repeated FPR would name two metrics columns alike, failing every score job at the end
    (lambda c: c["metrics"].update(fprs=[0.01, 0.1, 0.01]), ["metrics.fprs", "non-unique"]),
    (lambda c: c["studies"]["qmia-mnist-mlp1"].update(paper_model="resnet-10"),
     ["studies.qmia-mnist-mlp1.paper_model", "unknown model 'resnet-10'", "resnet10"]),
    (lambda c: c["datasets"].update({"tiny gauss": {"source": "digits"}}),
     ["datasets", "'tiny gauss'"]),
    # a whole-number float is no count: it once passed, to fail in range() deep in a job
    (lambda c: c["metrics"].update(bootstrap=1000.0),
     ["metrics.bootstrap", "1000.0 is not of type 'integer'"]),
    (lambda c: c["studies"]["sm-bcw"].update(targets=2.0), ["studies.sm-bcw.targets"]),
    (lambda c: bmia(c)["attacks"]["lira-n8"].update(n_reference=4.0),
     ["studies.bmia-purchase.attacks.lira-n8.n_reference", "4.0"]),
]


def odd(c):
    return c["studies"]["iha-mnist-odd"]


def ood(c):
    return c["studies"]["bmia-mnist-ood"]


@pytest.mark.parametrize(("edit", "words"), PROBES)
def test_bad_configs_fail_naming_the_key_and_the_fix(default, edit, words):
    broken = copy.deepcopy(default)
    edit(broken)
    with pytest.raises(cfg.ConfigError) as error:
        cfg.validate(broken)
    message = str(error.value)
    assert message.startswith("config key "), message
    for word in words:
        assert word in message, (word, message)


def test_a_study_with_models_from_audits_the_same_models():
    validated = cfg.validate(copy.deepcopy(DEFAULT))
    source, derived = validated["studies"]["bmia-mnist"], validated["studies"]["bmia-mnist-ood"]
    for key in cfg.INHERITED:
        assert derived[key] == source[key], key
    assert paths.model_home("bmia-mnist-ood", derived) == "bmia-mnist"
    assert paths.reference_home("bmia-mnist-ood", derived, derived["attacks"]["bmia"]) == \
        "bmia-mnist"
    mlp = source["attacks"]["bmia-ref-mlp"]
    assert paths.reference_home("bmia-mnist", source, mlp) == "bmia-mnist-mlp"


def test_attack_params_are_what_the_workflow_does_not_consume():
    assert paths.attack_params({"attack": "lira", "n_reference": 2, "mode": "online"}) == \
        {"mode": "online"}


def test_white_box_attacks_are_refused_on_catboost_targets(default, monkeypatch):
    from miarepro.attacks import REGISTRY, base

    spec = base.AttackSpec("probe_wb", lambda ctx: None, False, False, True, "a white-box probe")
    monkeypatch.setitem(REGISTRY, "probe_wb", spec)
    broken = copy.deepcopy(default)
    broken["studies"]["qmia-tabular"]["attacks"]["w"] = {"attack": "probe_wb"}
    with pytest.raises(cfg.ConfigError, match=r"qmia-tabular\.attacks\.w: .*needs a torch model"):
        cfg.validate(broken)


@pytest.mark.parametrize("attack", ["loss", "lira-online"])
def test_an_attack_on_the_cross_entropy_of_a_squared_error_model_fails(default, attack):
    """IHA's MNIST-Odd model trains on the squared error: an attack "on the loss" must read
    that loss, not the cross-entropy (the marginal attack's default statistic)."""
    broken = copy.deepcopy(default)
    entry = broken["studies"]["iha-mnist-odd"]["attacks"][attack]
    if attack == "loss":
        entry.pop("statistic")
    else:
        entry["statistic"] = "loss"
    with pytest.raises(cfg.ConfigError, match=rf"iha-mnist-odd\.attacks\.{attack}\.statistic: "
                       r"'loss' is the cross-entropy.*training\.loss: mse"):
        cfg.validate(broken)


def test_balanced_replicates_are_the_study_under_new_seeds_with_their_sources_replicates(
        default):
    """A balanced study's targets share its pool and reference models: each replicate is a
    generated copy under new seeds, taking its reference models from the same replicate of
    the study that trains them."""
    config = copy.deepcopy(default)
    config["replicates"] = 1  # the study's own key, not the default config's least number
    config["studies"]["subpop-mnist"]["replicates"] = 3
    mnist = config["studies"]["iha-mnist"]
    mnist["replicates"] = 3
    mnist["attacks"]["lira-cross"] = {**mnist["attacks"]["lira-online"], "label": "cross",
                                      "reference_study": "iha-mnist-odd"}
    config["studies"]["iha-mnist-odd"].update(replicates=3, dataset="mnist-subset")
    studies = cfg.validate(config)["studies"]
    first, third = studies["subpop-mnist"], studies["subpop-mnist-r2"]
    assert paths.replicates_of("subpop-mnist", config) == ["subpop-mnist", "subpop-mnist-r1",
                                                         "subpop-mnist-r2"]
    assert paths.independent_runs("subpop-mnist", config) == 3
    assert third["replicate_of"] == "subpop-mnist" and "replicate_of" not in first
    assert third["split"]["seed"] == first["split"]["seed"] + 2 * cfg.REPLICATE_SEED_STEP
    assert third["training"]["seed"] == first["training"]["seed"] + 2 * cfg.REPLICATE_SEED_STEP
    assert {k: v for k, v in third.items() if k not in ("split", "training", "replicate_of")
            } == {k: v for k, v in first.items() if k not in ("split", "training")}
    assert third["targets"] == first["targets"] == 1
    assert studies["iha-mnist-r1"]["attacks"]["lira-cross"]["reference_study"] == (
        "iha-mnist-odd-r1")
    assert paths.replicates_of("iha-purchase", config) == ["iha-purchase"]  # one by default
    assert paths.independent_runs("iha-purchase", config) == 1  # its 2 targets share a pool


def test_partition_replicates_are_repetitions_of_the_study(default):
    """A partition study's target *t* has its own partition, reference models and fits: its
    replicates are repetitions (targets), generated copies of nothing, and the studies that
    audit its models audit every repetition."""
    config = copy.deepcopy(default)
    config["replicates"] = 1  # the study's own key, not the default config's least number
    for name in ("bmia-mnist", "bmia-mnist-mlp", "sm-digits"):  # one target each, as if
        config["studies"][name]["targets"] = 1                      # the default had one
    config["studies"]["bmia-mnist"]["replicates"] = 3
    config["studies"]["sm-digits"]["replicates"] = 3  # one target: two more
    config["studies"]["sm-bcw"].update(replicates=3, targets=5)  # already more: kept
    studies = cfg.validate(config)["studies"]
    copied = {study["replicate_of"] for study in studies.values() if "replicate_of" in study}
    assert all(studies[name]["split"]["scheme"] == "balanced" for name in copied)
    assert studies["bmia-mnist"]["targets"] == studies["bmia-mnist-ood"]["targets"] == 3
    assert studies["qmia-grid-lenet"]["targets"] == 3  # audits bmia-mnist's models
    assert (studies["sm-digits"]["targets"], studies["sm-bcw"]["targets"]) == (3, 5)
    assert paths.replicates_of("bmia-mnist", config) == ["bmia-mnist"]
    assert paths.independent_runs("bmia-mnist", config) == 3
    assert paths.independent_runs("sm-bcw", config) == 5
    source_studies = studies
    config = copy.deepcopy(default)  # a source with as many repetitions needs no replicates
    config["replicates"] = 1
    config["studies"]["bmia-mnist"]["targets"] = 3
    config["studies"]["bmia-mnist-ood"]["replicates"] = 3
    assert cfg.validate(config)["studies"]["bmia-mnist-ood"]["targets"] == 3
    assert source_studies["bmia-mnist-mlp"]["targets"] == 1  # asked for nothing: bmia-mnist's
    # repetitions take their references of its architecture from it all the same (BMIA Fig. 4)
    assert source_studies["bmia-mnist"]["attacks"]["bmia-ref-mlp"]["reference_study"] == (
        "bmia-mnist-mlp")


def test_top_level_replicates_are_every_studys_least(default):
    """``--config replicates=3``: every study runs three times (sources and the studies that
    use their models alike), and a study asking for more keeps its own."""
    config = copy.deepcopy(default)
    config["replicates"] = 3
    config["studies"]["iha-mnist"]["replicates"] = 4
    studies = cfg.validate(config)["studies"]
    originals = [name for name, study in studies.items() if "replicate_of" not in study]
    assert all(paths.independent_runs(name, config) >= 3 for name in originals)
    assert paths.independent_runs("iha-mnist", config) == 4
    assert paths.independent_runs("iha-mnist-odd", config) == 5  # its own, above 3
    balanced = [name for name in originals if studies[name]["split"]["scheme"] == "balanced"]
    assert len(studies) == len(originals) + 2 * len(balanced) + 1 + 2
    assert paths.replicates_of("iha-mnist", config)[-1] == "iha-mnist-r3"
    assert studies["bmia-mnist-ood"]["targets"] == studies["bmia-mnist"]["targets"]
    unset = {key: value for key, value in copy.deepcopy(default).items() if key != "replicates"}
    assert cfg.validate(unset)["replicates"] == 1


@pytest.mark.parametrize(("edit", "words"), [
    (lambda c: c.update(replicates=0), ["config key replicates"]),
    (lambda c: c["studies"]["bmia-mnist-ood"].update(replicates=11),
     ["studies.bmia-mnist-ood.replicates",
      "study 'bmia-mnist', whose models it uses, has 10 repetitions (targets)"]),
    (lambda c: (c["studies"]["iha-mnist"].update(replicates=2), c["studies"].update(
        {"iha-mnist-r1": copy.deepcopy(c["studies"]["iha-mnist-odd"])})),
     ["studies.iha-mnist-r1", "replicate 1 of study 'iha-mnist'"]),
    (lambda c: c["studies"]["iha-mnist"].update(replicates=0), ["iha-mnist.replicates"]),
])
def test_bad_replicates_fail_naming_the_key(default, edit, words):
    broken = copy.deepcopy(default)
    edit(broken)
    with pytest.raises(cfg.ConfigError) as error:
        cfg.validate(broken)
    for word in words:
        assert word in str(error.value), (word, str(error.value))


def test_a_key_given_twice_or_bad_yaml_fails_naming_the_file_and_line(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("studies:\n  a: {paper: bmia}\n  b: {paper: iha}\n  a: {paper: qmia}\n")
    with pytest.raises(cfg.ConfigError, match=r"config\.yaml, line 4: key 'a' is given twice "
                                              r"in one mapping \(first on line 2\)"):
        schema.read_file(path)
    path.write_text("base: &b {x: 1}\nover: {<<: *b, x: 2}\n")  # a merge key may be overridden
    assert schema.read_file(path) == {"base": {"x": 1}, "over": {"x": 2}}
    path.write_text("studies:\n  a: [1, 2\n  b: 3\n")
    with pytest.raises(cfg.ConfigError, match=r"config\.yaml, line 3, column 4: not valid YAML"):
        schema.read_file(path)


def test_an_included_config_is_read_strictly(tmp_path, monkeypatch):
    from miarepro import includes

    (tmp_path / "part.yaml").write_text("scale: miniature\nscale: paper\n")
    monkeypatch.setattr(includes, "CONFIG_DIR", tmp_path)
    with pytest.raises(cfg.ConfigError, match=r"part\.yaml, line 2: key 'scale' is given twice"):
        cfg.validate({"include": ["part.yaml"]})
