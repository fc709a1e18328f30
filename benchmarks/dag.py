"""Time `snakemake -n` of every paper config, and of all five as one DAG.

    .venv/bin/python benchmarks/dag.py [--out FILE]

The budget is 10 s per dry run on two cores. `config/papers/all.yaml` includes the five
paper configs (miarepro.includes). Snakemake's own cost per planned job and per input file
sets a floor, so the report also gives milliseconds per job.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from workflow import ROOT, job_counts, timed  # benchmarks/workflow.py

from report import emit  # benchmarks/report.py

CONFIGS = ("bmia", "qmia", "iha", "subpop", "stolen-memories", "all")


def dry_run(config_path: Path) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as work:
        seconds, output = timed([sys.executable, "-m", "snakemake", "--snakefile",
                                 str(ROOT / "Snakefile"), "--configfile", str(config_path),
                                 "--directory", work, "--dry-run"], ROOT)
    return seconds, job_counts(output)["total"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    lines = ["# Dry runs of the paper configs", "", "| config | seconds | jobs | ms per job |",
             "|---|---|---|---|"]
    for name in CONFIGS:
        seconds, jobs = dry_run(ROOT / "config" / "papers" / f"{name}.yaml")
        lines.append(f"| {name} | {seconds:.1f} | {jobs} | {1000 * seconds / jobs:.1f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
