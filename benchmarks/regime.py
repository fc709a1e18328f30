"""Would a smaller miniature stay in its paper's regime? One study's targets and its regime
baseline, trained as configured and with changes, side by side.

    .venv/bin/python benchmarks/regime.py --study bmia-purchase [--set training.epochs=15]
        [--set model.widths=[512,256,128,64]] [--attack bmia --attack lira-n2]
        [--metric tpr@1%] [--targets 3] [--keep DIR] [--out FILE]

Making the default run fit its budget means shrinking studies (fewer epochs, narrower models,
less data), and a change of size is a change of the miniature: its regime row (the target's
train and test accuracy, its baseline attack's AUC and TPR@1% beside the paper's) must still
hold. This builds a config of the study alone, ``--targets`` targets and the attack its
``regime`` names, runs it through the workflow twice (as the default config has it, then with
each ``--set PATH=VALUE`` applied: a dotted path into the study's config, a YAML value), and
prints both regime rows with the training seconds per target, so that a change's saving and
its effect on the regime are read together. One replicate's targets only: a row that moves is
a lead to check with the full study, not a verdict.

The regime row is necessary, not sufficient: narrowing bmia-purchase's MLP to 256-128-64-64
kept its row (gap and Attack-P) but cut BMIA's own TPR@1% by a quarter and changed four of its
verdicts. ``--attack`` adds attacks of the study (the ones its claims compare) and prints each
one's ``--metric`` over the targets, and its paired difference from the first, as configured
and changed: a change that moves them is a different miniature of the paper's method.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from workflow import ROOT, SNAKEMAKE, timed  # benchmarks/workflow.py

from report import emit  # benchmarks/report.py


def changed(study: dict[str, Any], settings: list[str]) -> dict[str, Any]:
    """The study config with each ``PATH=VALUE`` setting applied (a path that names no key of
    the study fails, naming it: a typo would otherwise measure the unchanged study)."""
    study = copy.deepcopy(study)
    for setting in settings:
        path, sep, value = setting.partition("=")
        if not sep:
            raise ValueError(f"--set wants PATH=VALUE, got {setting!r}")
        *parents, key = path.split(".")
        node = study
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                raise ValueError(f"--set {path}: the study has no {part!r}")
        if not isinstance(node, dict) or key not in node:
            raise ValueError(f"--set {path}: the study has no {key!r} there")
        node[key] = yaml.safe_load(value)
    return study


def study_alone(config: dict[str, Any], name: str, study: dict[str, Any],
                targets: int, attacks: list[str] = ()) -> dict[str, Any]:
    """A config of one study: its targets, its regime baseline and ``attacks``, once (no
    replicates), and the leaderboard, whose regime table is what this benchmark reads."""
    if "models_from" in study:
        raise ValueError(f"{name} audits another study's models: probe that study instead")
    baseline = study.get("regime", {}).get("baseline")
    if not baseline:
        raise ValueError(f"{name} names no regime baseline: nothing to compare")
    for attack in attacks:
        if attack not in study["attacks"]:
            raise ValueError(f"--attack {attack}: {name} has no attack {attack!r}; it has "
                             f"{sorted(study['attacks'])}")
        if "reference_study" in study["attacks"][attack]:
            raise ValueError(f"--attack {attack} reads another study's models: not alone")
    study = {**copy.deepcopy(study), "targets": targets,
             "attacks": {a: study["attacks"][a] for a in dict.fromkeys([baseline, *attacks])}}
    study.pop("replicates", None)
    kept = {k: v for k, v in config.items() if k not in ("studies", "artifacts", "include")}
    return {**kept, "replicates": 1, "studies": {name: study},
            "artifacts": {"leaderboard": {"builder": "leaderboard"}}}


def regime_row(run: Path, name: str, targets: int) -> tuple[list[str], float]:
    """The cells of the study's row in the run's own regime table (the leaderboard's), and its
    targets' mean training seconds."""
    from miarepro import io
    from miarepro.artifacts.results import target_card

    board = (run / "results" / "artifacts" / "leaderboard.md").read_text()
    table = board.split("## Regime", 1)[1]
    line = next(line for line in table.splitlines() if line.startswith(f"| {name} |"))
    seconds = float(np.mean([io.read_json(target_card(str(run / "results"), name, t))[
        "train_seconds"] for t in range(targets)]))
    return line.strip("|").split("|")[1:], seconds


def attack_cells(run: Path, name: str, attacks: list[str], metric: str) -> list[str]:
    """Per attack, ``metric`` over the targets (mean, Student-t 95% interval) and, after the
    first, its paired difference from the first's: what a claim comparing them reads."""
    import pandas as pd

    from miarepro.uncertainty import percent_scale, student_half_width

    values = {}
    for attack in attacks:
        table = pd.read_parquet(run / "results" / "studies" / name / "metrics" /
                                f"{attack}.parquet")
        values[attack] = (table[table["replicate"] < 0].sort_values("target")[metric]
                          .to_numpy() * percent_scale(metric))

    def interval(x: np.ndarray) -> str:
        half = student_half_width(x.std(ddof=1) / np.sqrt(len(x)), len(x) - 1)
        return f"{x.mean():.2f} [{x.mean() - half:.2f}, {x.mean() + half:.2f}]"

    first = values[attacks[0]]
    return [interval(x) + ("" if attack == attacks[0] else f"; {interval(x - first)}")
            for attack, x in values.items()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--study", required=True)
    parser.add_argument("--set", action="append", default=[], dest="settings",
                        metavar="PATH=VALUE")
    parser.add_argument("--attack", action="append", default=[], dest="attacks",
                        help="an attack of the study to compare as well (repeatable)")
    parser.add_argument("--metric", default="tpr@1%", help="the --attack metric")
    parser.add_argument("--targets", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="run here (a new directory) and keep it; "
                        "without it, the runs are made in a temporary folder and deleted")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    if args.study not in config["studies"]:
        sys.exit(f"no study {args.study!r} in config/config.yaml")
    study = config["studies"][args.study]
    variants = {"as configured": study_alone(config, args.study, study, args.targets,
                                             args.attacks),
                "changed": study_alone(config, args.study, changed(study, args.settings),
                                       args.targets, args.attacks)}
    if args.keep:
        emit(compare(args, variants, args.keep), args.out)
        return
    with tempfile.TemporaryDirectory(prefix="regime-") as scratch:  # deleted, finished or not
        emit(compare(args, variants, Path(scratch)), args.out)


def compare(args: argparse.Namespace, variants: dict[str, dict], work: Path) -> list[str]:
    """Both runs in ``work``, and the report's lines."""
    lines = [f"Regime of {args.study} ({args.targets} targets, one replicate), as configured "
             f"and with {', '.join(args.settings) or 'no change'}:", "",
             "| run | seconds to train a target | wall s | " + " | ".join(
                 ["train acc %", "test acc % (ours / reference)", "gap % (ours / reference)",
                  "baseline", "AUC (ours / paper)", "TPR@1% (ours / paper)", "within 2x"]) + " |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    compared = []  # the --attack table's rows
    for label, variant in variants.items():
        run = work / label.replace(" ", "-")
        run.mkdir(parents=True)
        (run / "config.yaml").write_text(yaml.safe_dump(variant))
        wall, _ = timed([*SNAKEMAKE, "--directory", str(run), "--configfile",
                         str(run / "config.yaml"), "--cores", "2", "--quiet"], ROOT)
        cells, seconds = regime_row(run, args.study, args.targets)
        lines.append(f"| {label} | {seconds:.1f} | {wall:.0f} |" + "|".join(cells) + "|")
        if args.attacks:
            compared.append(f"| {label} | " + " | ".join(
                attack_cells(run, args.study, args.attacks, args.metric)) + " |")
    if args.attacks:
        lines += ["", f"{args.metric} over the targets (mean [95% interval]; after the first "
                  f"attack, its paired difference from {args.attacks[0]}):", "",
                  "| run | " + " | ".join(args.attacks) + " |",
                  "|---|" + "---|" * len(args.attacks), *compared]
    return lines


if __name__ == "__main__":
    main()
