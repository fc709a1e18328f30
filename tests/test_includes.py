"""Configs made of other configs (miarepro.includes): config/papers/all.yaml and its merge."""

import copy

import pytest
import yaml

from miarepro import config as miarepro_config
from miarepro import includes
from miarepro.config import ConfigError

STUDY = {"paper": "bmia", "dataset": "data", "targets": 1,
         "split": {"scheme": "partition", "seed": 0},
         "model": {"arch": "mlp", "widths": [8]}, "training": {"epochs": 2},
         "attacks": {"loss": {"attack": "marginal", "statistic": "loss"}}}


def part(study: str, dataset: dict, **top) -> dict:
    return {"scale": "paper", "datasets": {"data": dataset},
            "studies": {study: copy.deepcopy(STUDY)},
            "artifacts": {f"ROC-{study}": {"builder": "roc"},
                          "leaderboard": {"builder": "leaderboard"}}, **top}


def test_a_dataset_defined_differently_is_renamed_and_an_equal_one_shared():
    third = part("three", {"source": "digits"})
    third["studies"]["three"]["training"] = {"epochs": 3}  # its own models
    fourth = part("four", {"source": "digits", "subsample": 100})
    fourth["studies"]["four"]["training"] = {"epochs": 4}
    merged = includes.union({"a": part("one", {"source": "digits"}),
                             "b": part("two", {"source": "digits", "subsample": 100}),
                             "c": third, "d": fourth})
    assert merged["datasets"] == {"data": {"source": "digits"},
                                  "b-data": {"source": "digits", "subsample": 100}}
    assert [s["dataset"] for s in merged["studies"].values()] == ["data", "b-data", "data",
                                                                    "b-data"]


def test_a_study_training_what_another_trains_audits_its_models():
    merged = includes.union({"a": part("one", {"source": "digits"}),
                             "b": part("two", {"source": "digits"})})
    two = merged["studies"]["two"]
    assert two["models_from"] == "one"
    assert not set(miarepro_config.INHERITED) & set(two)  # they come from "one"
    assert "models_from" not in merged["studies"]["one"]


def test_a_study_borrowing_from_a_borrower_borrows_from_the_trainer():
    b = part("two", {"source": "digits"})
    b["studies"]["two-ood"] = {"paper": "bmia", "models_from": "two",
                               "attacks": STUDY["attacks"]}
    merged = includes.union({"a": part("one", {"source": "digits"}), "b": b})
    assert merged["studies"]["two-ood"]["models_from"] == "one"


def test_one_part_s_artifact_keeps_to_its_studies_and_a_shared_one_spans_all():
    merged = includes.union({"a": part("one", {"source": "digits"}),
                             "b": part("two", {"source": "breast_cancer"})})
    assert merged["artifacts"]["ROC-one"]["studies"] == ["one"]
    assert merged["artifacts"]["ROC-two"]["studies"] == ["two"]
    assert "studies" not in merged["artifacts"]["leaderboard"]


def test_fpr_grids_are_joined_and_the_larger_bootstrap_kept():
    defaults = {key: spec["default"] for key, spec in miarepro_config.load_schema()
                ["properties"]["metrics"]["properties"].items() if "default" in spec}
    merged = includes.union({
        "a": part("one", {"source": "digits"}, metrics={"fprs": [0.2], "bootstrap": 50}),
        "b": part("two", {"source": "breast_cancer"})})  # the schema's defaults
    assert merged["metrics"]["fprs"] == sorted({0.2, *defaults["fprs"]})
    assert merged["metrics"]["bootstrap"] == max(50, defaults["bootstrap"])


@pytest.mark.parametrize("clash, key", [
    ({"studies": {"one": {**STUDY, "targets": 2}}}, "studies.one"),
    ({"artifacts": {"leaderboard": {"builder": "leaderboard", "fprs": [0.1]}}},
     "artifacts.leaderboard"),
    ({"data_dir": "/elsewhere"}, "data_dir"),
])
def test_conflicting_definitions_fail_naming_the_key(clash, key):
    first = part("one", {"source": "digits"}, data_dir="data")
    second = {**part("two", {"source": "digits"}, data_dir="data"), **clash}
    if "studies" in clash:
        second["studies"] = {**part("two", {"source": "digits"})["studies"], **clash["studies"]}
    with pytest.raises(ConfigError, match=f"config key {key}"):
        includes.union({"a": first, "b": second})


def test_the_including_config_s_own_settings_win(tmp_path, monkeypatch):
    monkeypatch.setattr(includes, "CONFIG_DIR", tmp_path)
    for name, study in (("a", "one"), ("b", "two")):
        (tmp_path / f"{name}.yaml").write_text(yaml.safe_dump(
            part(study, {"source": "digits"}, data_dir=f"data-{name}")))
    config = includes.resolve({"include": ["a.yaml", "b.yaml"], "data_dir": "shared"})
    assert config["data_dir"] == "shared" and set(config["studies"]) == {"one", "two"}
    with pytest.raises(ConfigError, match=r"config key include: 'c\.yaml' is not a file"):
        includes.resolve({"include": ["c.yaml"]})


def test_all_yaml_is_the_five_papers():
    config = miarepro_config.validate(yaml.safe_load(
        (includes.CONFIG_DIR / "papers" / "all.yaml").read_text()))
    studies, artifacts = set(), set()
    for paper in ("bmia", "qmia", "iha", "subpop", "stolen-memories"):
        own = yaml.safe_load((includes.CONFIG_DIR / "papers" / f"{paper}.yaml").read_text())
        studies |= set(own["studies"])
        artifacts |= set(own["artifacts"])
    assert set(config["studies"]) == studies and set(config["artifacts"]) == artifacts
