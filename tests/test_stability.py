"""The stability benchmark: its prediction of what more replicates would buy on hand cases, the
seeds of its second run, and how it brings finished runs up to date (no workflow runs)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from miarepro.artifacts import claims
from miarepro.uncertainty import Estimate

sys.path.append(str(Path(__file__).resolve().parent.parent / "benchmarks"))
import stability  # benchmarks/stability.py, found through the path above


def _runs(quantity: float, half_width: float, replicates: int = 3) -> pd.DataFrame:
    """One row of a "greater" claim, as the claims table of a run gives it (twice the same)."""
    claim = next(c for c in claims.load_claims("bmia") if c.kind == "greater")
    verdict = claims.decide(claim, Estimate(quantity, [quantity], "bootstrap"))
    return pd.DataFrame([{
        "claim": claim.id, "study": "s", "paper": "bmia", "verdict": verdict,
        "replicates": float(replicates), "quantity": quantity,
        "quantity_low": quantity - half_width, "quantity_high": quantity + half_width}])


def test_rows_far_from_their_boundary_agree_and_rows_on_its_edge_toss_a_coin():
    far = stability.predicted(_runs(0.05, 0.01), _runs(0.05, 0.01)).iloc[0]
    assert far["agree_now"] > 0.99 and far["resolved_now"] > 0.99
    # the interval's lower end on 0: "holds" about half the time at 3 replicates (a little
    # more: the spread of 3 values falls below its truth more often than above)
    edge = stability.predicted(_runs(0.02, 0.02), _runs(0.02, 0.02)).iloc[0]
    assert 0.4 < edge["resolved_now"] < 0.7 and 0.45 < edge["agree_now"] < 0.6
    # at 20 replicates the interval is 4.30 / 2.09 x sqrt(20 / 3) = 5.3 times narrower
    assert edge["resolved_20"] > 0.99 and edge["agree_20"] > 0.98


def test_a_cost_row_is_drawn_on_its_logs_as_its_interval_is():
    """BMIA-C36 (gpu_minutes, a ratio at most 0.13) whose geometric interval ends on its bound:
    [0.05^2 / 0.13, 0.13] around 0.05. On its logs, its top is on the bound and holds about
    half the time; read on the raw scale, its centre would sit at 0.075 and it would hold at
    most reruns."""
    claim = next(c for c in claims.load_claims("bmia") if c.id == "BMIA-C36")
    assert claim.kind == "ratio_at_most" and claim.value == 0.13
    run = pd.DataFrame([{"claim": claim.id, "study": "s", "paper": "bmia", "verdict": "holds",
                         "replicates": 3.0, "quantity": 0.05, "quantity_low": 0.05**2 / 0.13,
                         "quantity_high": 0.13}])
    edge = stability.predicted(run, run).iloc[0]
    assert 0.4 < edge["resolved_now"] < 0.7


def test_the_replication_column_is_checked_against_the_second_run():
    first = pd.DataFrame({"claim": ["A", "B", "C", "D"], "study": "s",
                          "verdict": ["holds", "holds", "inconclusive", "not run"],
                          "replication": [1.0, 0.5, 0.5, float("nan")]})
    second = first.assign(verdict=["holds", "inconclusive", "inconclusive", "not run"])
    lines = "\n".join(stability.replication_lines(first, second))
    assert "(3 rows testable in the first, over replicates): predicted 67% kept, observed 67%" \
        in lines
    # by band: rows, predicted, observed (B and C on the edge: one kept, one turned)
    assert re.search(r"\| below 0.6 *\| *2 \| *0.5 \| *0.5 \|", lines)
    assert re.search(r"\| 0.95 or more *\| *1 \| *1 *\| *1 *\|", lines)


def test_the_second_run_moves_every_studys_seeds_once_even_where_an_anchor_shares_them():
    config = yaml.safe_load("""
studies:
  a: {split: &split {scheme: partition, seed: 0}, training: &recipe {lr: 0.1}}
  b: {split: *split, training: *recipe}
  c: {split: {scheme: balanced, seed: 7}, training: {lr: 0.1, seed: 3}}
  d: {models_from: c}
""")
    moved = stability.shifted(config, 100_000)["studies"]
    assert [moved[s]["split"]["seed"] for s in "abc"] == [100_000, 100_000, 100_007]
    assert [moved[s]["training"]["seed"] for s in "abc"] == [100_000, 100_000, 100_003]
    assert "split" not in moved["d"] and config["studies"]["a"]["split"]["seed"] == 0


def test_an_update_reruns_a_finished_run_on_changed_params_and_inputs_only(tmp_path, monkeypatch):
    commands = []

    def timed(command: list[str], cwd: Path) -> tuple[float, str]:
        commands.append(command)
        return 1.0, ""

    monkeypatch.setattr(stability, "timed", timed)
    run = tmp_path / "second"
    run.mkdir()  # a finished run
    config = {"studies": {"a": {"split": {"seed": 100_000}}}}
    with pytest.raises(FileExistsError, match="second"):  # never over a finished run
        stability.run_claims(run, config)
    stability.run_claims(run, config, update=True)
    command = commands[-1]
    assert yaml.safe_load((run / "config.yaml").read_text()) == config
    assert command[command.index("--configfile") + 1] == str(run / "config.yaml")
    at = command.index("--rerun-triggers")
    assert command[at + 1 : at + 4] == ["mtime", "params", "input"]  # not "code": any rule edit
    assert command[command.index("--directory") + 1] == str(run)
    monkeypatch.setattr(sys, "argv", ["stability.py", "--first", str(run), "--update"])
    with pytest.raises(SystemExit) as stop:  # --update names both runs
        stability.main()
    assert stop.value.code == 2  # argparse's usage error


def test_a_replicates_cost_is_its_copies_mean_or_a_repetitions_share(tmp_path):
    """One more replicate of a balanced study costs what its generated copies took on average
    (they run only what the claims read, the first replicate also its tables' extras); of a
    partition study, its seconds over its repetitions: cards for training and fits, benchmark
    files for scoring."""
    def card(study: str, kind: str, group: str, name: int, seconds: float) -> None:
        path = tmp_path / "results" / "studies" / study / kind / group / f"{name}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        key = "train_seconds" if kind == "models" else "fit_seconds"
        path.write_text(f'{{"{key}": {seconds}}}')

    def score(study: str, attack: str, seconds: float) -> None:
        path = tmp_path / "results" / "benchmarks" / study / f"score-{attack}.tsv"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"s\th:m:s\n{seconds}\t0:00:00\n")

    for study, seconds in (("b", 600.0), ("b-r1", 120.0), ("b-r2", 240.0)):
        card(study, "models", "target", 0, seconds)
    score("b", "loss", 60.0)  # the first replicate's extra: not what a copy costs
    for target in range(4):
        card("p", "models", "target", target, 30.0)
        card("p", "fits", "fit", target, 45.0)
    score("p", "loss", 60.0)
    config = {"studies": {
        "b": {"split": {"scheme": "balanced"}, "replicates": 3},
        "b-r1": {"split": {"scheme": "balanced"}, "replicate_of": "b"},
        "b-r2": {"split": {"scheme": "balanced"}, "replicate_of": "b"},
        "p": {"split": {"scheme": "partition"}, "targets": 4}}}
    minutes = stability.minutes_per_replicate(tmp_path, config)
    assert minutes == pytest.approx({"b": 3.0, "p": (4 * 75.0 + 60.0) / 4 / 60})
    # the report's study table: the rows gained at 10 replicates per in-job hour they take
    first = _runs(0.02, 0.02).assign(study="b")
    both, _ = stability.agreement(first, first)
    table = stability.predicted(first, first)
    lines = stability.prediction_lines(both, table, minutes)
    row = next(line for line in lines[-1].splitlines() if line.startswith("| b "))
    gain = table["agree_10"].iloc[0] - table["agree_now"].iloc[0]
    assert row.split("|")[-3].strip() == "3" and float(row.split("|")[-2]) == pytest.approx(
        gain / (7 * 3 / 60), abs=0.06)


def test_fewer_replicates_are_read_from_the_runs_as_a_run_of_the_cut_config_holds_them(
        tmp_path):
    """--fewer: a partition study keeps its first K repetitions (its metrics' rows of later
    targets dropped in a view of the run, every other file linked, the run untouched), a
    balanced study its first K copies (the config names fewer); a count above a study's own
    fails naming it; the saving is the cut replicates at their measured price."""
    run = tmp_path / "run"
    metrics = run / "results" / "studies" / "p" / "metrics"
    metrics.mkdir(parents=True)
    scores = pd.DataFrame({"target": [0, 1, 2, 3], "replicate": -1, "auc": [.6, .7, .8, .9]})
    scores.to_parquet(metrics / "loss.parquet")
    (run / "results" / "studies" / "p" / "split.npz").write_bytes(b"split")
    (run / "results" / "studies" / "b").mkdir()
    (run / "results" / "datasets").mkdir()
    raw = {"studies": {"p": {"split": {"scheme": "partition"}, "targets": 4},
                       "b": {"split": {"scheme": "balanced"}, "replicates": 5}}}
    cut = stability.fewer(raw, {"p": 2, "b": 3})
    assert (cut["studies"]["p"]["targets"], cut["studies"]["b"]["replicates"]) == (2, 3)
    assert raw["studies"]["p"]["targets"] == 4  # the config it was given is left as it was
    view = stability.results_view(run, cut, tmp_path / "view") / "results"
    read = pd.read_parquet(view / "studies" / "p" / "metrics" / "loss.parquet")
    assert read["target"].tolist() == [0, 1] and read["auc"].tolist() == [.6, .7]
    assert (view / "studies" / "p" / "split.npz").read_bytes() == b"split"
    assert (view / "studies" / "b").is_symlink() and (view / "datasets").is_symlink()
    assert len(pd.read_parquet(metrics / "loss.parquet")) == 4
    with pytest.raises(SystemExit, match="p has 4 replicates"):
        stability.fewer(raw, {"p": 5})
    with pytest.raises(SystemExit, match="no study 'q'"):
        stability.fewer(raw, {"q": 1})
    assert stability.minutes_saved({"p": 2, "b": 3}, raw, {"p": 1.5, "b": 0.5}) == 2 * 1.5 + 2 * 0.5


def test_fewer_cuts_below_the_top_level_replicates_and_nothing_else():
    """The default config runs every study 3 times (top-level ``replicates``): a cut to 1 or 2
    must survive validation, which once raised it back to 3, and leave every other study as
    it was."""
    import copy

    from miarepro.config import validate
    from miarepro.paths import independent_runs

    config = Path(__file__).resolve().parents[1] / "config" / "config.yaml"
    raw = yaml.safe_load(config.read_text())
    before = validate(copy.deepcopy(raw))
    after = validate(stability.fewer(raw, {"iha-mnist": 1, "sm-mnist-lenet": 2}))
    runs = {name: (independent_runs(name, before), independent_runs(name, after))
            for name in after["studies"] if name in before["studies"]}
    assert {name: pair for name, pair in runs.items() if pair[0] != pair[1]} == {
        "iha-mnist": (3, 1), "sm-mnist-lenet": (3, 2)}
    assert set(before["studies"]) - set(after["studies"]) == {"iha-mnist-r1", "iha-mnist-r2"}


def test_the_resolved_share_counts_holds_and_fails_among_testable_rows():
    verdicts = ["holds", "fails", "inconclusive", "inconclusive", "not run", "no signal"]
    assert stability.resolved_share(pd.DataFrame({"verdict": verdicts})) == 0.5


def _curves(rows: dict[str, list[float]], replicates: int = 3) -> pd.DataFrame:
    """Rows of :func:`stability.predicted` at counts 2 to 6: per study, each row's chance of
    being resolved alike by two runs at each count (agreement and resolution alike)."""
    records = []
    for study, decided in rows.items():
        chance = {f"{kind}_{count}": value for count, value in zip(range(2, 7), decided,
                                                                  strict=True)
                  for kind in ("agree", "resolved", "decided")}
        records.append({"claim": "C", "study": study, "replicates": replicates,
                        "agree_observed": True, **chance})
    return pd.DataFrame(records)


def test_replicates_go_where_they_resolve_the_most_rows_per_minute():
    """Greedy on the gain of the next replicate per minute: the cheap study whose rows still
    resolve with more replicates gets them, a study whose rows are settled stays at the
    minimum, a fixed study keeps its count, and no replicate is added past the budget."""
    curves = _curves({"steep": [0.1, 0.3, 0.5, 0.7, 0.8], "flat": [0.9, 0.9, 0.9, 0.9, 0.9],
                      "dear": [0.1, 0.3, 0.5, 0.7, 0.8]})
    minutes = {"steep": 1.0, "flat": 1.0, "dear": 4.0, "kept": 2.0}
    counts = stability.allocate(curves, minutes, budget=15.0, fixed={"kept": 5}, minimum=3)
    # the start (3 + 3 + 12 + 10 = 28) is over the budget already: nothing is added
    assert counts == {"steep": 3, "flat": 3, "dear": 3, "kept": 5}
    counts = stability.allocate(curves, minutes, budget=33.0, fixed={"kept": 5}, minimum=3)
    # 28 + steep to 6 (3 minutes: +0.2, +0.2, +0.1 per minute); dear's 4 do not fit in 2
    assert counts == {"steep": 6, "flat": 3, "dear": 3, "kept": 5}
    counts = stability.allocate(curves, minutes, budget=45.0, fixed={"kept": 5}, minimum=3)
    assert counts == {"steep": 6, "flat": 3, "dear": 6, "kept": 5}  # flat gains nothing


def test_the_allocation_moves_a_study_with_the_one_whose_models_it_uses_and_keeps_shared_ones():
    """A study that uses another's models moves with it (their prices summed); a study a
    trend row reads with another keeps its count even where its own rows would gain, as do
    studies without drawn rows."""
    steep = [0.1, 0.2, 0.4, 0.6, 0.7]
    curves = pd.concat([_curves({"a": steep, "b": steep}), _curves({"b vs c": [0.5] * 5})],
                       ignore_index=True)
    both = pd.DataFrame({"claim": ["C"] * 4, "study": ["a", "b", "b vs c", "d"],
                         "verdict_first": ["holds"] * 4, "verdict_second": ["holds"] * 4})
    minutes = dict.fromkeys("abcdf", 1.0)
    current = {"a": 3, "b": 4, "c": 4, "d": 2, "f": 3}
    lines = "\n".join(stability.allocation_lines(both, curves, minutes, current, {"f": "a"}))
    assert "3 studies keep their counts" in lines  # b and c (the trend), d (no rows)
    # twice the configured 16 minutes: the unit of a and f (2 a replicate) rises to 6
    assert "| reallocated at twice it | 22 |" in lines
    assert "| a | 3 |" not in lines  # at the configured cost there is no room to move
    # a settled study configured at 5 gives its replicates to a and f at the same cost
    curves = pd.concat([curves, _curves({"e": [0.9] * 5})], ignore_index=True)
    both = pd.concat([both, both.iloc[:1].assign(study="e")], ignore_index=True)
    lines = "\n".join(stability.allocation_lines(both, curves, {**minutes, "e": 1.0},
                                                  {**current, "e": 5}, {"f": "a"}))
    assert "| a | 3 | 4 | 1.00 |" in lines and "| f | 3 | 4 | 1.00 |" in lines
    assert "| e | 5 | 3 | 1.00 |" in lines
    assert "| b |" not in lines and "| d |" not in lines


def test_a_study_follows_the_root_of_the_models_it_uses():
    """As the config's validation ties them: ``models_from`` always, ``reference_study`` for
    a balanced study only (a partition study's repetitions train those models themselves)."""
    partition, balanced = {"scheme": "partition"}, {"scheme": "balanced"}
    config = {"studies": {
        "base": {"split": balanced, "attacks": {}},
        "audit": {"split": balanced, "models_from": "base", "attacks": {}},
        "grid": {"split": balanced, "attacks": {"x": {"reference_study": "audit"}}},
        "own": {"split": partition, "attacks": {"x": {"reference_study": "base"}}},
        "base-r1": {"split": balanced, "replicate_of": "base", "attacks": {}}}}
    assert stability.sources(config) == {"audit": "base", "grid": "base"}
