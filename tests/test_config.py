import copy
from pathlib import Path

import pytest
import yaml

from miarepro import config as cfg

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def default():
    return yaml.safe_load((ROOT / "config" / "config.yaml").read_text())


def test_default_config_is_valid_and_gets_defaults(default):
    validated = cfg.validate(copy.deepcopy(default))
    study = next(iter(validated["studies"].values()))
    assert study["targets"] >= 1 and "queries" in study and "deviations" in study


def test_every_paper_config_is_valid():
    for path in sorted((ROOT / "config" / "papers").glob("*.yaml")):
        cfg.validate(yaml.safe_load(path.read_text()))


@pytest.mark.parametrize("edit,message", [
    (lambda c: c.update(typo=1), "Additional properties"),
    (lambda c: next(iter(c["studies"].values())).update(dataset="nope"), "dataset: unknown"),
    (lambda c: next(iter(c["studies"].values()))["attacks"].update(x={"attack": "nope"}),
     "known attacks"),
    (lambda c: next(iter(c["studies"].values()))["attacks"].update(
        x={"attack": "marginal", "statistc": "loss"}), "unknown parameter"),
    (lambda c: next(iter(c["datasets"].values())).update(source="nope"), "unknown source"),
    (lambda c: c["artifacts"].update(x={"builder": "nope"}), "unknown builder"),
    (lambda c: c["artifacts"].update(x={"builder": "paper_table", "metrics": ["auc"]}),
     "artifact ID"),
    (lambda c: next(iter(c["studies"].values()))["training"].update(epochs=0), "epochs"),
])
def test_bad_configs_fail_naming_the_key(default, edit, message):
    broken = copy.deepcopy(default)
    edit(broken)
    with pytest.raises(cfg.ConfigError, match=message):
        cfg.validate(broken)


def test_reference_counts_come_from_the_attacks():
    study = {"attacks": {"a": {"attack": "marginal"}, "b": {"attack": "x", "n_reference": 4},
                         "c": {"attack": "y", "n_reference": 2}}}
    assert cfg.n_references(study) == 4
    assert cfg.attack_params({"attack": "lira", "n_reference": 2, "mode": "online"}) == \
        {"mode": "online"}
