"""Do the claims' verdicts survive another seed? Run the claims under a second base seed and
count the verdicts that agree with the first.

    .venv/bin/python benchmarks/stability.py --keep DIR [--first RUN] [--shift K] [--out FILE]
    .venv/bin/python benchmarks/stability.py --first RUN --second RUN2 [--update] [--out FILE]

The second run is the default config with every study's split seed and training seed moved by
``K`` x 100,000 (so also its attack-side fits, :meth:`miarepro.pipeline.StudyFiles.fit_seed`):
another draw of every split, model and fit, on the same data. Only the claims table and what it
reads are built, in ``DIR`` (a new directory). ``--first`` names the results of a default run
already made (its ``results/`` is read, and its claims are rebuilt with the current code);
without it, the first run is made too, in ``DIR/first``. ``--update`` first brings two
finished runs up to the current config, rerunning only what it changed: after raising one
study's replicates, two runs of that study instead of two of everything. A verdict agrees
when both runs give the same word for a (claim, study) row; rows "not run" in both are left
out.

It checks the claims table's ``replication`` column, the chance that a rerun keeps each
verdict as the first run alone predicts it, against the second run (:func:`replication_lines`).
It then asks what more replicates would buy (:func:`predicted`): each row testable in both
runs is drawn anew under a normal model of its replicate-level quantity (the two runs' mean and
pooled spread) and decided by the claims' own rule, at its replicate count and at 5, 10 and
20; the report gives the expected agreement and resolved share, overall and study by study.

    .venv/bin/python benchmarks/stability.py --first RUN --second RUN2 --fewer STUDY=K ...

measures what fewer replicates would cost, with no training: both runs' claims are rebuilt
for the config with only the first ``K`` replicates of each named study (a partition study's
first ``K`` repetitions, a balanced study's first ``K`` generated copies), read from the runs
as they are (:func:`results_view`), since a replicate's draws depend on its index alone. The
report gives their agreement and resolved share, and the in-job minutes the cut saves.

    .venv/bin/python benchmarks/stability.py --first RUN --second RUN2 --allocate

asks how the same in-job minutes could be spread otherwise (:func:`allocate`): the rows are
drawn anew at every replicate count from 2 to 40, and replicates go, one at a time from 3 of
each study, to the study whose rows gain the most chance of being resolved alike by two runs
per minute, at the configured cost and at twice it.
"""

from __future__ import annotations

import argparse
import copy
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from workflow import ROOT, SNAKEMAKE, job_seconds, study_seconds, timed  # benchmarks/workflow.py

from miarepro import io
from miarepro.artifacts import claims as claims_module
from miarepro.config import model_sources, validate
from miarepro.paths import _partitioned as partitioned
from miarepro.paths import independent_runs, replicates_of
from miarepro.uncertainty import student_half_width
from report import emit  # benchmarks/report.py

SEED_SHIFT = 100_000  # above any replicate's seed step, so no run repeats another's draw
TESTABLE = ["holds", "fails", "inconclusive"]
COUNTS = (5, 10, 20, 40)  # replicate counts the prediction tries


def shifted(config: dict, shift: int) -> dict:
    """The config with every study's split and training seeds moved by ``shift``, once each:
    studies that share a YAML anchor (``split: *sm-split``) share one dict, which moving in
    place would move once per study."""
    config = copy.deepcopy(config)
    for study in config["studies"].values():
        for key in ("split", "training"):
            if key in study:  # a models_from study takes both from its source
                study[key] = {**study[key], "seed": study[key].get("seed", 0) + shift}
    return config


def fewer(config: dict, counts: dict[str, int]) -> dict:
    """The config with only the first ``counts[study]`` replicates of each named study: a
    partition study's repetitions (``targets``), a balanced study's generated copies
    (``replicates``); a study that takes another's models follows its source.

    The top-level ``replicates`` is every study's least number, which would raise a cut
    study back (``--fewer s=2`` under 3 once ran 3 and reported the saving): each study's
    own count is written out at what that floor gives it, and the floor lowered to 1."""
    config = copy.deepcopy(config)
    floor = config.get("replicates", 1)
    config["replicates"] = 1
    for study in config["studies"].values():
        if "models_from" in study:  # its repetitions are its source's
            continue
        own = max(study.get("replicates", 1), floor)
        if partitioned(study):  # its replicates are its repetitions
            study["targets"], study["replicates"] = max(study.get("targets", 1), own), 1
        else:
            study["replicates"] = own
    for name, count in counts.items():
        study = config["studies"].get(name)
        if study is None:
            raise SystemExit(f"--fewer {name}={count}: the config has no study {name!r}")
        key = "targets" if partitioned(study) else "replicates"
        now = study.get(key, 1)
        if not 1 <= count <= now:
            raise SystemExit(f"--fewer {name}={count}: {name} has {now} replicates ({key}); "
                             f"give 1 to {now}")
        study[key] = count
    return config


def results_view(run: Path, config: dict, view: Path) -> Path:
    """``view/results``: ``run``'s results as links, as a run of ``config`` (validated, with
    fewer replicates than ``run``'s) would hold them: each partition study's metrics keep the
    rows of its first ``targets`` repetitions. A balanced study's later copies stay, unread:
    the claims read the copies ``config`` names. Returns ``view``."""
    source, results = run.resolve() / "results", view / "results"
    (results / "studies").mkdir(parents=True)
    for entry in source.iterdir():
        if entry.name != "studies":
            (results / entry.name).symlink_to(entry)
    for folder in (source / "studies").iterdir():
        study = config["studies"].get(folder.name)
        into = results / "studies" / folder.name
        if study is None or not partitioned(study):
            into.symlink_to(folder)
            continue
        into.mkdir()
        for entry in folder.iterdir():
            if entry.name != "metrics":
                (into / entry.name).symlink_to(entry)
        (into / "metrics").mkdir()
        for table in (folder / "metrics").glob("*.parquet"):
            frame = pd.read_parquet(table)
            frame[frame["target"] < study["targets"]].to_parquet(into / "metrics" / table.name)
    return view


def minutes_saved(counts: dict[str, int], config: dict, minutes: dict[str, float]) -> float:
    """In-job minutes a run of ``config`` (validated) spends on the replicates ``counts`` cuts,
    at :func:`minutes_per_replicate`'s price."""
    return sum((independent_runs(name, config) - count) * minutes.get(name, 0.0)
               for name, count in counts.items())


def claims_of(run: Path, config_path: Path) -> pd.DataFrame:
    """The claims table of a finished run, rebuilt from its scores with the current code, in a
    process of its own (the results readers cache by relative path: two runs in one process
    would read the first one's metrics twice)."""
    code = ("import sys, yaml; from miarepro import config; from miarepro.artifacts import claims;"
            " c = config.validate(yaml.safe_load(open(sys.argv[1])));"
            " claims.build('claims', c['artifacts']['claims'], c, 'stability-claims')")
    subprocess.run([sys.executable, "-c", code, str(config_path)], cwd=run, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    return pd.read_csv(run / "stability-claims.csv")


def run_claims(work: Path, config: dict, update: bool = False) -> float:
    """Build the claims table of ``config`` in ``work``: a new directory, or (``update``) a
    finished run's, where only the jobs whose parameters or inputs changed rerun. Snakemake's
    code trigger is left out there: it reruns every job after any edit of the rules, which a
    config change does not need; a change of the code that computes results needs new runs."""
    work.mkdir(parents=True, exist_ok=update)
    path = work / "config.yaml"
    io.write_text(path, yaml.safe_dump(config, sort_keys=False))
    command = [part if part != str(ROOT / "config" / "config.yaml") else str(path)
               for part in SNAKEMAKE]
    triggers = ["--rerun-triggers", "mtime", "params", "input"] if update else []
    seconds, _ = timed([*command, *triggers, "--directory", str(work),
                        "results/artifacts/claims.csv"], ROOT)
    return seconds


def agreement(first: pd.DataFrame, second: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows of both runs side by side, counts of first x second verdicts)."""
    key = ["claim", "study"]
    both = first[[*key, "verdict"]].merge(second[[*key, "verdict"]], on=key, how="outer",
                                          suffixes=("_first", "_second")).fillna("absent")
    both = both[~((both["verdict_first"] == "not run") & (both["verdict_second"] == "not run"))]
    return both, pd.crosstab(both["verdict_first"], both["verdict_second"])


def predicted(first: pd.DataFrame, second: pd.DataFrame, draws: int = 1000,
              seed: int = 0, counts: Sequence[int] | None = None) -> pd.DataFrame:
    """Per row testable in both runs: its replicate count, and at that count and at each of
    :data:`COUNTS` (or its own where higher) the chance that two runs agree (the sum of each
    verdict's squared probability), the chance of a verdict (holds or fails) and the chance
    that both runs give the same one of those two. With
    ``counts``, those chances at each of ``counts`` instead (``agree_<c>``, ``resolved_<c>``,
    ``decided_<c>``), fewer than the row's own included.

    The replicate-level quantity (a cost's log) is modelled as normal, with the two runs' mean
    and their pooled replicate spread (read back from each Student-t interval); a trend's
    interval is Welch's, read as if it had n - 1 degrees of freedom. A row whose quantity lies
    within about an interval's half-width of the claimed boundary agrees by chance; more
    replicates narrow that band as 1 / sqrt(n), no faster."""
    claims = {claim.id: claim for paper in first["paper"].unique()
              for claim in claims_module.load_claims(paper)}
    key = ["claim", "study"]
    both = first.merge(second, on=key, suffixes=("_1", "_2"))
    intervals = both[["quantity_1", "quantity_low_1", "quantity_high_1", "quantity_2",
                      "quantity_low_2", "quantity_high_2"]]
    # a predicted order's interval is of the side its losses predict better, which two runs
    # may name differently, and none where they predict nothing: such rows are not drawn
    predicted = both["claim"].map(lambda claim: claims[claim].kind == "predicted")
    both = both[both["verdict_1"].isin(TESTABLE) & both["verdict_2"].isin(TESTABLE)
                & (both["replicates_1"] >= 2) & np.isfinite(intervals).all(axis=1) & ~predicted]
    rng = np.random.default_rng(seed)
    rows = []
    for row in both.itertuples(index=False):
        now = int(row.replicates_1)
        t = student_half_width(1.0, now - 1)
        value, low, high = (np.array([getattr(row, f"quantity{part}_{run}") for run in (1, 2)])
                            for part in ("", "_low", "_high"))
        # a cost's interval over its logs (uncertainty.geometric) is drawn on them: such an
        # interval is symmetric on the log scale, value^2 = low x high (one on the raw scale,
        # a cost with a 0 among its replicates, is value^2 - half-width^2)
        logged = (claims[row.claim].metric in claims_module.COSTS and (low > 0).all()
                  and np.allclose(value**2, low * high, rtol=1e-9))
        if logged:
            value, low, high = np.log(value), np.log(low), np.log(high)
        spreads = (high - low) / 2 / t * np.sqrt(now)
        centre, spread = value.mean(), np.sqrt(np.mean(np.square(spreads)))
        out = {"claim": row.claim, "study": row.study, "replicates": now,
               "agree_observed": row.verdict_1 == row.verdict_2}
        labels = ([(str(c), c) for c in counts] if counts is not None else
                  [("now", now), *((str(c), max(now, c)) for c in COUNTS)])
        shares = {}
        # each row of draws a rerun's replicates, its first ``count`` read at each count: one
        # draw for all counts, so that a curve over the counts moves by the count alone
        reruns = rng.normal(centre, spread, (draws, max(count for _, count in labels)))
        for count in sorted({count for _, count in labels}):
            values = reruns[:, :count]
            means, half = values.mean(axis=1), student_half_width(
                values.std(axis=1, ddof=1), count - 1) / np.sqrt(count)  # as Estimate's
            bounds = (means - half, means + half)
            shares[count] = pd.Series(claims_module.decide_bounds(
                claims[row.claim], *(np.exp(bounds) if logged else bounds))
            ).value_counts(normalize=True)
        for label, count in labels:
            resolved = shares[count].drop("inconclusive", errors="ignore")
            out[f"agree_{label}"] = float((shares[count]**2).sum())
            out[f"resolved_{label}"] = float(resolved.sum())
            out[f"decided_{label}"] = float((resolved**2).sum())  # both runs, the same word
        rows.append(out)
    return pd.DataFrame(rows)


def allocate(curves: pd.DataFrame, minutes: dict[str, float], budget: float,
             fixed: dict[str, int], minimum: int = 3) -> dict[str, int]:
    """Replicates per study that spend ``budget`` in-job minutes for the most rows expected to
    be resolved alike by two runs (``decided``: holds twice or fails twice; agreement alone
    would reward being undecided, as an inconclusive row that stays so agrees). Studies of
    ``fixed`` keep their counts; every other study of ``minutes`` (the price of one
    replicate) starts at ``minimum``, and one more replicate at a time goes to the study whose
    rows (``curves``: :func:`predicted` at consecutive counts from ``minimum``) gain the most
    per minute, while one fits in the budget; where the start alone is over it, that is all.
    A study without a price keeps ``minimum``."""
    per_study = curves.groupby("study").sum(numeric_only=True)
    counts = {study: fixed.get(study, minimum) for study in minutes}
    spent = _spent(counts, minutes)
    while True:
        gains = {study: (per_study.at[study, f"decided_{counts[study] + 1}"]
                         - per_study.at[study, f"decided_{counts[study]}"]) / minutes[study]
                 for study in per_study.index
                 if study in counts and study not in fixed
                 and f"decided_{counts[study] + 1}" in per_study
                 and spent + minutes[study] <= budget and minutes[study] > 0}
        if not gains or max(gains.values()) <= 0:
            return counts
        best = max(gains, key=gains.get)
        counts[best] += 1
        spent += minutes[best]


def _spent(counts: dict[str, int], minutes: dict[str, float]) -> float:
    return sum(count * minutes[study] for study, count in counts.items())


def sources(config: dict) -> dict[str, str]:
    """Each study of ``config`` (validated) whose replicates are tied to another's, through the
    models it uses (:func:`miarepro.config.model_sources`, as the config's validation ties
    them), mapped to one study of its group: the groups are the connected studies."""
    parent: dict[str, str] = {}

    def root(name: str) -> str:
        while parent.get(name, name) != name:
            name = parent[name]
        return name

    studies = {name: study for name, study in config["studies"].items()
               if "replicate_of" not in study}
    for name, study in studies.items():
        for source in model_sources(study):
            if root(name) != root(source):
                parent[root(name)] = root(source)
    return {name: root(name) for name in studies if root(name) != name}


def allocation_lines(both: pd.DataFrame, curves: pd.DataFrame, minutes: dict[str, float],
                     current: dict[str, int], source: dict[str, str],
                     minimum: int = 3) -> list[str]:
    """The report's section on spending in-job minutes otherwise (:func:`allocate`): expected
    agreement, resolved share and rows resolved alike, for the replicates as configured, for
    ``minimum`` of each study that may move, and reallocated at the configured cost and at
    twice it; then the studies that move at the configured cost.

    A study that uses another's models (``source``, :func:`sources`) moves with it, as one
    unit: their rows and prices summed. A unit moves if it has rows drawn (``curves``) and no
    trend or pooled row reads any of its studies with another study: such rows, like every
    unit without drawn rows, keep their configured counts."""
    unit_of = {study: source.get(study, study) for study in minutes}
    single = curves["study"].isin(unit_of)
    units = curves.assign(study=curves["study"].map(lambda s: unit_of.get(s, s)))
    shared = {unit_of[name] for label in curves.loc[~single, "study"]
              for name in re.split(r" vs |, ", label)}
    price = {unit: sum(m for study, m in minutes.items() if unit_of[study] == unit)
             for unit in set(unit_of.values())}
    drawn = set(units.loc[single, "study"])
    fixed = {unit: current[unit] for unit in price if unit in shared or unit not in drawn}

    def per_study(unit_counts: dict[str, int]) -> dict[str, int]:
        return {study: current[study] if unit in fixed else unit_counts[unit]
                for study, unit in unit_of.items()}

    # the rows not drawn, as they agreed or not
    agreeing_fixed = int((both["verdict_first"] == both["verdict_second"]).sum()
                         - curves["agree_observed"].sum())

    def expected(counts: dict[str, int]) -> tuple[float, float, float]:
        own = [counts[study] if study in counts else int(now) for study, now in
               zip(curves["study"], curves["replicates"], strict=True)]
        chance = {kind: sum(curves.at[i, f"{kind}_{c}"] for i, c in zip(curves.index, own,
                                                                         strict=True))
                  for kind in ("agree", "resolved", "decided")}
        return ((agreeing_fixed + chance["agree"]) / len(both), chance["resolved"] / len(curves),
                chance["decided"] / len(curves))

    configured = _spent(current, minutes)
    plans = [("as configured", current),
             (f"{minimum} of each study that may move",
              per_study({unit: fixed.get(unit, minimum) for unit in price})),
             *((label, per_study(allocate(units[single], price, budget, fixed, minimum)))
               for label, budget in (("reallocated at the configured cost", configured),
                                     ("reallocated at twice it", 2 * configured)))]
    lines = ["", "The same rows at other replicate counts (rows testable in both runs drawn "
             f"anew at their study's count, {len(both) - len(curves)} others, those and "
             "predicted orders, as they are; "
             "in-job minutes at the first run's price of a replicate; a study that uses "
             "another's models moves with it; "
             f"{sum(unit_of[s] in fixed for s in unit_of)} studies keep their counts: those "
             "without drawn rows, and those a trend or pooled row reads with another):", "",
             "| replicates | in-job minutes | verdicts that agree | resolved, of rows testable "
             "in both | resolved alike by both runs |", "|---|---|---|---|---|"]
    for label, counts in plans:
        agree, resolved, decided = expected(counts)
        lines.append(f"| {label} | {_spent(counts, minutes):.0f} | {agree:.0%} | "
                     f"{resolved:.0%} | {decided:.0%} |")
    same_cost = plans[2][1]
    lines += ["", "Studies that move when reallocated at the configured cost:", "",
              "| study | configured | reallocated | minutes per replicate |", "|---|---|---|---|",
              *(f"| {study} | {current[study]} | {same_cost[study]} | {minutes[study]:.2f} |"
                for study in sorted(minutes) if current[study] != same_cost[study])]
    return lines


def replication_lines(first: pd.DataFrame, second: pd.DataFrame) -> list[str]:
    """Does the first run's ``replication`` column (the chance a rerun keeps each verdict)
    predict the second run? Overall and by band of that chance."""
    key = ["claim", "study"]
    both = first[[*key, "verdict", "replication"]].merge(second[[*key, "verdict"]], on=key,
                                                         suffixes=("", "_second"))
    both = both[both["verdict"].isin(TESTABLE) & both["replication"].notna()]
    if both.empty:
        return []
    both["kept"] = both["verdict"] == both["verdict_second"]
    bands = pd.cut(both["replication"], [0, 0.6, 0.8, 0.95, 1.01], right=False,
                   labels=["below 0.6", "0.6 to 0.8", "0.8 to 0.95", "0.95 or more"])
    table = both.groupby(bands, observed=True).agg(
        rows=("kept", "size"), predicted=("replication", "mean"),
        observed=("kept", "mean")).round(2)
    return ["", f"The first run's `replication` column against the second run ({len(both)} rows "
            f"testable in the first, over replicates): predicted "
            f"{both['replication'].mean():.0%} kept, observed {both['kept'].mean():.0%}.", "",
            table.to_markdown()]


def minutes_per_replicate(run: Path, config: dict) -> dict[str, float]:
    """In-job minutes (training, fits, scoring: :func:`workflow.job_seconds`) that one more
    replicate of each study costs, read from a finished run of ``config`` (validated, with
    its generated copies): the mean of a balanced study's copies, which run only what the
    claims read, or a partition study's seconds over its repetitions. A study that takes
    another's models is charged its fits and scores only; the other pays for the models."""
    seconds = dict(study_seconds(job_seconds(run)))
    minutes = {}
    for name, study in config["studies"].items():
        if "replicate_of" in study:
            continue
        copies = replicates_of(name, config)[1:]
        total = (sum(seconds.get(copy_, 0.0) for copy_ in copies) / len(copies) if copies
                 else seconds.get(name, 0.0) / independent_runs(name, config))
        minutes[name] = total / 60
    return minutes


def prediction_lines(both: pd.DataFrame, table: pd.DataFrame,
                     minutes: dict[str, float] | None = None) -> list[str]:
    """The report's section on what more replicates would buy, and with ``minutes`` (per
    replicate of each study) at what cost: the rows gained by raising a study to 10
    replicates, per in-job hour those replicates take."""
    fixed = len(both) - len(table)  # rows not drawn: counted as they agreed or not
    fixed_agree = int((both["verdict_first"] == both["verdict_second"]).sum()
                      - table["agree_observed"].sum())
    columns = ["now", *map(str, COUNTS)]
    agree = [(fixed_agree + table[f"agree_{c}"].sum()) / len(both) for c in columns]
    resolved = [table[f"resolved_{c}"].mean() for c in columns]
    studies = table.groupby("study").agg(
        rows=("claim", "size"), replicates=("replicates", "first"),
        agree_observed=("agree_observed", "sum"),
        **{f"agree_{c}": (f"agree_{c}", "sum") for c in columns})
    studies["gain_at_10"] = studies["agree_10"] - studies["agree_now"]
    if minutes is not None:
        studies["minutes_per_replicate"] = [minutes.get(study, np.nan)
                                            for study in studies.index]
        hours = (10 - studies["replicates"]).clip(lower=0) * studies["minutes_per_replicate"] / 60
        studies["gain_per_hour_to_10"] = studies["gain_at_10"] / hours.where(hours > 0)
    return ["", "What more replicates would buy (every study at its count or more; rows "
            f"testable in both runs drawn anew, but predicted orders; {fixed} others as they "
            "are):", "",
            "| | now | " + " | ".join(f"{c} or more" for c in COUNTS) + " |",
            "|---|---|" + "---|" * len(COUNTS),
            "| verdicts that agree | " + " | ".join(f"{a:.0%}" for a in agree) + " |",
            "| resolved, of rows testable in both | "
            + " | ".join(f"{r:.0%}" for r in resolved) + " |", "",
            "By study (rows agreeing: observed, expected now, expected with more replicates):",
            "", studies.sort_values("gain_at_10", ascending=False).round(
                {column: 2 if column.startswith("minutes") else 1 for column in studies}
            ).to_markdown()]


def fewer_lines(cuts: dict[str, int], first: Path, second: Path, default: dict,
                saved: float) -> list[str]:
    """The report's section on the claims with fewer replicates of the ``cuts`` studies: both
    runs' claims rebuilt for the cut configs from views of the runs (:func:`results_view`),
    and the in-job minutes ``saved``."""
    tables = []
    with tempfile.TemporaryDirectory() as folder:
        for name, run, raw in (("first", first, default),
                               ("second", second, yaml.safe_load((second / "config.yaml")
                                                                 .read_text()))):
            config = fewer(raw, cuts)
            view = results_view(run, validate(copy.deepcopy(config)), Path(folder) / name)
            (view / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
            tables.append(claims_of(view, view / "config.yaml"))
    both, _ = agreement(*tables)
    same = both["verdict_first"] == both["verdict_second"]
    return ["", "With fewer replicates (" + ", ".join(f"{k}: {v}" for k, v in cuts.items())
            + "), the same two runs read anew:", "", "| measure | value |", "|---|---|",
            f"| verdicts that agree | {same.sum()} of {len(both)} ({same.mean():.0%}) |",
            "| testable rows resolved, first / second run | "
            + " / ".join(f"{resolved_share(table):.0%}" for table in tables) + " |",
            f"| in-job minutes saved | {saved:.1f} |"]


def resolved_share(claims: pd.DataFrame) -> float:
    """The share of a claims table's testable rows (holds, fails, inconclusive) that resolve
    (holds or fails): the verdicts issue asks for 60%."""
    testable = claims["verdict"][claims["verdict"].isin(TESTABLE)]
    return float((testable != "inconclusive").mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="a new directory for the runs")
    parser.add_argument("--first", type=Path, help="the directory of a finished default run")
    parser.add_argument("--second", type=Path, help="the directory of a finished second run "
                        "(its config.yaml beside results/): compare only")
    parser.add_argument("--update", action="store_true", help="with --first and --second: "
                        "bring both runs up to the current config first, rerunning only the "
                        "studies it changed (a config change, such as a study's replicates)")
    parser.add_argument("--shift", type=int, default=1, help="the second run's seed shift K")
    parser.add_argument("--fewer", nargs="+", metavar="STUDY=K", default=[],
                        help="with --first and --second: also the claims with only the first K "
                        "replicates of each STUDY, read from the same runs")
    parser.add_argument("--allocate", action="store_true", help="also: the agreement the "
                        "same in-job minutes would buy spread otherwise over the studies")
    parser.add_argument("--out", type=Path, help="write the report here too")
    args = parser.parse_args()
    if args.keep is None and (args.first is None or args.second is None):
        parser.error("--keep DIR: a new directory for the run(s) to make")
    if args.update and (args.first is None or args.second is None):
        parser.error("--update brings --first and --second up to date: name both")
    if args.fewer and (args.first is None or args.second is None):
        parser.error("--fewer reads two finished runs: name --first and --second")
    if args.first and args.second and args.keep:
        parser.error("--keep is for runs to make: with --first and --second there are none")
    if args.first and args.second and not args.update and args.shift != 1:
        parser.error("--shift moves the seeds of a second run to make or to --update: "
                     "a finished --second keeps its own")
    try:
        cuts = {name: int(count) for name, count in (item.split("=") for item in args.fewer)}
    except ValueError:
        parser.error("--fewer takes STUDY=K items, K a whole number")
    default_path = ROOT / "config" / "config.yaml"
    default = yaml.safe_load(default_path.read_text())
    rows = []
    if args.update:
        second_config = shifted(default, args.shift * SEED_SHIFT)
        for name, run, config in (("first", args.first, default),
                                  ("second", args.second, second_config)):
            rows.append((f"{name} run brought up to the current config, 2 cores",
                         f"{run_claims(run, config, update=True):.0f} s"))
    first = args.first
    if first is None:
        first = args.keep / "first"
        rows.append(("first run (claims only), 2 cores", f"{run_claims(first, default):.0f} s"))
    second = args.second
    if second is None:
        second = args.keep / "second"
        rows.append((f"second run, seeds + {args.shift * SEED_SHIFT:,} (claims only), 2 cores",
                     f"{run_claims(second, shifted(default, args.shift * SEED_SHIFT)):.0f} s"))
    first_claims = claims_of(first, default_path)
    second_claims = claims_of(second, second / "config.yaml")
    both, table = agreement(first_claims, second_claims)
    validated = validate(copy.deepcopy(default))
    minutes = minutes_per_replicate(first, validated)
    cut_lines = (fewer_lines(cuts, first, second, default,
                             minutes_saved(cuts, validated, minutes)) if cuts else [])
    testable = both[both["verdict_first"].isin(TESTABLE) | both["verdict_second"].isin(TESTABLE)]
    same = (both["verdict_first"] == both["verdict_second"])
    rows += [("rows compared (claim x study, not 'not run' in both)", str(len(both))),
             ("verdicts that agree", f"{same.sum()} ({same.mean():.0%})"),
             ("of the rows testable in either run (holds, fails, inconclusive)",
              f"{(testable['verdict_first'] == testable['verdict_second']).mean():.0%} "
              f"of {len(testable)}"),
             ("testable rows resolved, first / second run",
              f"{resolved_share(first_claims):.0%} / {resolved_share(second_claims):.0%}"),
             ("flips between holds and fails", str(int(
                 (both[["verdict_first", "verdict_second"]].isin(["holds", "fails"]).all(axis=1)
                  & ~same).sum())))]
    changed = both[~same].sort_values(["claim", "study"])
    lines = ["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), "",
             "Verdicts, first run (rows) x second run (columns):", "",
             table.to_markdown(), "", "Rows whose verdict changed:", "",
             changed.to_markdown(index=False) if len(changed) else "none",
             *replication_lines(first_claims, second_claims),
             *prediction_lines(both, predicted(first_claims, second_claims), minutes),
             *cut_lines]
    if args.allocate:
        current = {name: independent_runs(name, validated) for name in minutes}
        top = max(COUNTS[-1], *current.values())
        curves = predicted(first_claims, second_claims, counts=range(2, top + 1))
        lines += allocation_lines(both, curves, minutes, current, sources(validated))
    emit(lines, args.out)


if __name__ == "__main__":
    main()
