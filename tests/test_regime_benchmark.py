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


def test_compared_attacks_join_the_baseline_and_a_typo_names_the_attack():
    study = DEFAULT["studies"]["bmia-purchase"]
    alone = regime.study_alone(DEFAULT, "bmia-purchase", study, 2, ["bmia", "lira-n2"])
    probed = config_module.validate(copy.deepcopy(alone))["studies"]["bmia-purchase"]
    assert list(probed["attacks"]) == ["attack-p", "bmia", "lira-n2"]
    with pytest.raises(ValueError, match="'bmai'"):
        regime.study_alone(DEFAULT, "bmia-purchase", study, 2, ["bmai"])
    mnist = DEFAULT["studies"]["bmia-mnist"]
    with pytest.raises(ValueError, match="another study's models"):
        regime.study_alone(DEFAULT, "bmia-mnist", mnist, 2, ["bmia-ref-mlp"])


def test_attack_cells_are_means_and_paired_differences(tmp_path):
    """Two attacks over three targets, by hand: every series below has sd 1 (percent), so
    each half-width is t(0.975, 2) / sqrt(3); bootstrap rows (replicate >= 0) are ignored."""
    import numpy as np
    import pandas as pd

    folder = tmp_path / "results" / "studies" / "s" / "metrics"
    folder.mkdir(parents=True)
    for attack, by_target in (("a", [0.01, 0.02, 0.03]), ("b", [0.02, 0.04, 0.03])):
        table = {"target": [2, 0, 1, 0], "replicate": [-1, -1, -1, 5],
                 "tpr@1%": [by_target[2], by_target[0], by_target[1], 0.9]}
        pd.DataFrame(table).to_parquet(folder / f"{attack}.parquet")
    half = 4.302653 / np.sqrt(3)

    def cell(mean: float) -> str:
        return f"{mean:.2f} [{mean - half:.2f}, {mean + half:.2f}]"

    # a: 1, 2, 3 percent; b: 2, 4, 3; b - a: 1, 2, 0
    assert regime.attack_cells(tmp_path, "s", ["a", "b"], "tpr@1%") == [
        cell(2.0), f"{cell(3.0)}; {cell(1.0)}"]
