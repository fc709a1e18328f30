"""Time `snakemake -n` of every paper config, and of all five as one DAG.

    .venv/bin/python benchmarks/dag.py [--out FILE]

The budget is 10 s per dry run on two cores. The union merges the papers' datasets, studies
and artifacts (study names are unique across papers; a dataset name two papers define
differently gets its paper as a prefix, and the metric FPR grids are joined); it is the DAG a
`config/papers/all.yaml` would plan. Snakemake's own cost per planned job sets a floor, so the
report also gives seconds per job.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import yaml
from workflow import ROOT, job_counts, timed  # benchmarks/workflow.py

from report import emit  # benchmarks/report.py

PAPERS = ("bmia", "qmia", "iha", "subpop", "stolen-memories")


def union(configs: dict[str, dict]) -> dict:
    """One config running every paper's studies and artifacts."""
    merged: dict = {"datasets": {}, "studies": {}, "artifacts": {}}
    for paper, config in configs.items():
        renamed = {}
        for name, spec in config["datasets"].items():
            if merged["datasets"].get(name, spec) != spec:
                renamed[name] = f"{paper}-{name}"
            merged["datasets"][renamed.get(name, name)] = spec
        for name, study in config["studies"].items():
            if study.get("dataset") in renamed:
                study = {**study, "dataset": renamed[study["dataset"]]}
            merged["studies"][name] = study
        merged["artifacts"].update(config["artifacts"])
        for key, value in config.items():
            if key == "metrics" and "metrics" in merged:
                merged["metrics"]["fprs"] = sorted({*merged["metrics"]["fprs"], *value["fprs"]})
            elif key not in merged:
                merged[key] = value
    return merged


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
    configs = {paper: yaml.safe_load((ROOT / "config" / "papers" / f"{paper}.yaml").read_text())
               for paper in PAPERS}
    lines = ["# Dry runs of the paper configs", "", "| config | seconds | jobs | ms per job |",
             "|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as folder:
        paths = {paper: ROOT / "config" / "papers" / f"{paper}.yaml" for paper in PAPERS}
        paths["all five papers"] = Path(folder) / "all.yaml"
        paths["all five papers"].write_text(yaml.safe_dump(union(configs)))
        for name, path in paths.items():
            seconds, jobs = dry_run(path)
            lines.append(f"| {name} | {seconds:.1f} | {jobs} | {1000 * seconds / jobs:.1f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
