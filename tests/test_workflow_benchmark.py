"""The workflow benchmark's per-rule overhead, on a hand-made run directory."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.append(str(Path(__file__).resolve().parent.parent / "benchmarks"))
import workflow  # benchmarks/workflow.py, found through the path above

LOG = """Building DAG of jobs...
[Fri Nov 27 04:18:18 2026]
localrule dataset:
    output: results/datasets/d.npz, results/datasets/d.json
    jobid: 1
[Fri Nov 27 04:18:19 2026]
Finished jobid: 1 (Rule: dataset)
[Fri Nov 27 04:18:19 2026]
rule train_tens:
    output: M/0.pt, M/0.json, M/1.json
    jobid: 2
[Fri Nov 27 04:18:20 2026]
rule score:
    output: results/studies/s/scores/loss.parquet, results/studies/s/metrics/loss.parquet
    jobid: 3
[Fri Nov 27 04:18:23 2026]
Finished jobid: 3 (Rule: score)
[Fri Nov 27 04:18:27 2026]
Finished jobid: 2 (Rule: train_tens)
""".replace("M/", "results/studies/s/models/reference/")


def test_overhead_is_wall_time_less_each_jobs_measured_work(tmp_path):
    (tmp_path / ".snakemake" / "log").mkdir(parents=True)
    (tmp_path / ".snakemake" / "log" / "run.snakemake.log").write_text(LOG)
    models = tmp_path / "results/studies/s/models/reference"
    models.mkdir(parents=True)
    for index, seconds in ((0, 2.5), (1, 3.0)):  # two models of one job: 5.5 s of 8
        (models / f"{index}.json").write_text(json.dumps({"train_seconds": seconds}))
    bench = tmp_path / "results/benchmarks/s"
    bench.mkdir(parents=True)
    (bench / "score-loss.tsv").write_text("s\th:m:s\n2.25\t0:00:02\n")  # 3 s of wall
    assert workflow.overhead_by_rule(tmp_path) == {
        "dataset": (1, 1.0), "train_tens": (1, 2.5), "score": (1, 0.75)}
