"""The regime benchmark's config of one study, with and without changes (no run)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import yaml

from miarepro import config as config_module

sys.path.append(str(Path(__file__).resolve().parent.parent / "benchmarks"))
import regime  # benchmarks/regime.py, found through the path above

DEFAULT = yaml.safe_load((Path(regime.ROOT) / "config" / "config.yaml").read_text())


def test_a_change_reaches_the_study_and_a_typo_names_its_key():
    study = DEFAULT["studies"]["bmia-purchase"]
    smaller = regime.changed(study, ["training.epochs=15", "model.widths=[512, 256]"])
    assert smaller["training"]["epochs"] == 15 and smaller["model"]["widths"] == [512, 256]
    assert study["training"]["epochs"] == 30  # the default config is left as it is
    with pytest.raises(ValueError, match="'epoch'"):
        regime.changed(study, ["training.epoch=15"])
    with pytest.raises(ValueError, match="'trainig'"):
        regime.changed(study, ["trainig.epochs=15"])


def test_the_study_alone_is_a_valid_config_of_its_targets_and_baseline():
    study = regime.changed(DEFAULT["studies"]["sm-mnist-lenet"], ["training.epochs=5"])
    alone = regime.study_alone(DEFAULT, "sm-mnist-lenet", study, targets=2)
    config = config_module.validate(copy.deepcopy(alone))
    assert list(config["studies"]) == ["sm-mnist-lenet"]  # no replicates
    probed = config["studies"]["sm-mnist-lenet"]
    assert probed["targets"] == 2 and list(probed["attacks"]) == ["naive"]
    assert probed["training"]["epochs"] == 5
    with pytest.raises(ValueError, match="another study's models"):
        regime.study_alone(DEFAULT, "bmia-mnist-ood", DEFAULT["studies"]["bmia-mnist-ood"], 3)
