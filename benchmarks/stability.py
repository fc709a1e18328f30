"""Do the claims' verdicts survive another seed? Run the claims under a second base seed and
count the verdicts that agree with the first.

    .venv/bin/python benchmarks/stability.py --keep DIR [--first RUN] [--shift K] [--out FILE]
    .venv/bin/python benchmarks/stability.py --first RUN --second RUN2 [--out FILE]

The second run is the default config with every study's split seed and training seed moved by
``K`` x 100,000 (so also its attack-side fits, :meth:`miarepro.pipeline.StudyFiles.fit_seed`):
another draw of every split, model and fit, on the same data. Only the claims table and what it
reads are built, in ``DIR`` (a new directory). ``--first`` names the results of a default run
already made (its ``results/`` is read, and its claims are rebuilt with the current code);
without it, the first run is made too, in ``DIR/first``. A verdict agrees when both runs give
the same word for a (claim, study) row; rows "not run" in both are left out.
"""

from __future__ import annotations

import argparse
import copy
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from workflow import ROOT, SNAKEMAKE, timed  # benchmarks/workflow.py

from report import emit  # benchmarks/report.py

SEED_SHIFT = 100_000  # above any replicate's seed step, so no run repeats another's draw


def shifted(config: dict, shift: int) -> dict:
    """The config with every study's split and training seeds moved by ``shift``."""
    config = copy.deepcopy(config)
    for study in config["studies"].values():
        for key in ("split", "training"):
            if key in study:  # a models_from study takes both from its source
                study[key]["seed"] = study[key].get("seed", 0) + shift
    return config


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


def run_claims(work: Path, config: dict) -> float:
    work.mkdir(parents=True)
    path = work / "config.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    command = [part if part != str(ROOT / "config" / "config.yaml") else str(path)
               for part in SNAKEMAKE]
    seconds, _ = timed([*command, "--directory", str(work), "results/artifacts/claims.csv"],
                       ROOT)
    return seconds


def agreement(first: pd.DataFrame, second: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rows of both runs side by side, counts of first x second verdicts)."""
    key = ["claim", "study"]
    both = first[[*key, "verdict"]].merge(second[[*key, "verdict"]], on=key, how="outer",
                                          suffixes=("_first", "_second")).fillna("absent")
    both = both[~((both["verdict_first"] == "not run") & (both["verdict_second"] == "not run"))]
    return both, pd.crosstab(both["verdict_first"], both["verdict_second"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="a new directory for the runs")
    parser.add_argument("--first", type=Path, help="the directory of a finished default run")
    parser.add_argument("--second", type=Path, help="the directory of a finished second run "
                        "(its config.yaml beside results/): compare only")
    parser.add_argument("--shift", type=int, default=1, help="the second run's seed shift K")
    parser.add_argument("--out", type=Path, help="write the report here too")
    args = parser.parse_args()
    if args.keep is None and (args.first is None or args.second is None):
        parser.error("--keep DIR: a new directory for the run(s) to make")
    default_path = ROOT / "config" / "config.yaml"
    default = yaml.safe_load(default_path.read_text())
    rows = []
    first = args.first
    if first is None:
        first = args.keep / "first"
        rows.append(("first run (claims only), 2 cores", f"{run_claims(first, default):.0f} s"))
    second = args.second
    if second is None:
        second = args.keep / "second"
        rows.append((f"second run, seeds + {args.shift * SEED_SHIFT:,} (claims only), 2 cores",
                     f"{run_claims(second, shifted(default, args.shift * SEED_SHIFT)):.0f} s"))
    both, table = agreement(claims_of(first, default_path),
                            claims_of(second, second / "config.yaml"))
    testable = both[both["verdict_first"].isin(["holds", "fails", "inconclusive"])
                    | both["verdict_second"].isin(["holds", "fails", "inconclusive"])]
    same = (both["verdict_first"] == both["verdict_second"])
    rows += [("rows compared (claim x study, not 'not run' in both)", str(len(both))),
             ("verdicts that agree", f"{same.sum()} ({same.mean():.0%})"),
             ("of the rows testable in either run (holds, fails, inconclusive)",
              f"{(testable['verdict_first'] == testable['verdict_second']).mean():.0%} "
              f"of {len(testable)}"),
             ("flips between holds and fails", str(int(
                 (both[["verdict_first", "verdict_second"]].isin(["holds", "fails"]).all(axis=1)
                  & ~same).sum())))]
    changed = both[~same].sort_values(["claim", "study"])
    lines = ["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows), "",
             "Verdicts, first run (rows) x second run (columns):", "",
             table.to_markdown(), "", "Rows whose verdict changed:", "",
             changed.to_markdown(index=False) if len(changed) else "none"]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
