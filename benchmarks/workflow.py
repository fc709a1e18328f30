"""Measure the workflow's targets: set-up time, dry-run time, cold default run, job counts.

    .venv/bin/python benchmarks/workflow.py [--setup] [--tests] [--out FILE] [--keep DIR]

The default run happens in a fresh working directory (cold: empty results/): a temporary one,
or ``DIR`` with ``--keep`` (which must not exist yet), kept even if the run fails, to read its
tables and per-job benchmarks afterwards. With
``--setup`` the environment is also built from scratch in a temporary copy of the repository,
and ``--tests`` times the test suite. Prints a Markdown report (and writes it to ``--out``).

The report also gives the claims table recomputed from the run's scores, and scores recomputed
from its models' logits, by code that does not import the package
(``benchmarks/recheck_claims.py``, ``benchmarks/recheck_scores.py``), so that a timing run
checks its verdicts too.

Machines differ two to three times for this workload, so the report opens with a machine-speed
figure: a fixed calibration workload on one thread (:data:`CALIBRATION`: one epoch of a LeNet
on 5,000 generated digits, and the exact Hessian of a 4,780-parameter MLP over 2,000 records,
IHA's MNIST fit in small), timed in a fresh process before and after the run. Divide a
measured time by the calibration seconds to compare runs taken on different machines; where
before and after differ, the machine's speed drifted during the run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

from miarepro.config import validate
from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
             "--configfile", str(ROOT / "config" / "config.yaml"),
             "--profile", str(ROOT / "profiles" / "local")]  # the README's command: 2 cores
#: the studies as the workflow sees them: a balanced study's replicates are generated studies
STUDIES = validate(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))["studies"]
#: roles whose models train ten to a job, per study
TEN_PER_JOB = {name: study.get("ten_per_job", []) for name, study in STUDIES.items()}


def timed(command: list[str], cwd: Path) -> tuple[float, str]:
    start = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(command)}\n{result.stdout[-2000:]}{result.stderr[-4000:]}")
    return time.perf_counter() - start, result.stdout + result.stderr


def children_cpu() -> float:
    """CPU seconds of every finished process this one started, and theirs (all descendants)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


#: runs Snakemake's command line and writes the CPU seconds of its own process (the scheduler:
#: DAG, job preparation, bookkeeping; not its jobs' processes) to the file in $SCHEDULER_CPU
SCHEDULER = (
    "import atexit, os, resource, runpy, sys\n"
    "def report():\n"
    "    usage = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    open(os.environ['SCHEDULER_CPU'], 'w').write(str(usage.ru_utime + usage.ru_stime))\n"
    "atexit.register(report)\n"
    "sys.argv[0] = 'snakemake'\n"
    "runpy.run_module('snakemake', run_name='__main__', alter_sys=True)\n")


CALIBRATION = """
import time, numpy as np, torch
from miarepro import hessian, training
torch.set_num_threads(1)
rng = np.random.default_rng(0)
X = rng.standard_normal((5000, 1, 28, 28), dtype=np.float32)
y = rng.integers(0, 10, 5000)
start = time.perf_counter()
training.train_model(X, y, np.arange(5000), {"arch": "lenet"},
                     {"epochs": 1, "batch_size": 64, "lr": 0.05}, 10, seed=0)
epoch = time.perf_counter() - start
model = training.build_model({"arch": "mlp", "widths": [6]}, (784,), 10)
flat = hessian.FlatLoss(model)
start = time.perf_counter()
hessian.hessian(flat, X[:2000].reshape(2000, -1), y[:2000])
print(epoch, time.perf_counter() - start)
"""


def calibration() -> tuple[float, float]:
    """Seconds of the calibration workload's CNN epoch and Hessian, one thread, fresh process."""
    result = subprocess.run([sys.executable, "-c", CALIBRATION], capture_output=True, text=True,
                            check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    epoch, hessian = (float(v) for v in result.stdout.split())
    return epoch, hessian


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[-1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def models_per_job(rule: str) -> int:
    """Models one job of a workflow rule trains: ``train`` one, ``train_tens`` ten,
    ``train_tens_<k>`` (the first k of a group of ten read only in part) k; other rules none."""
    if rule == "train":
        return 1
    if rule == "train_tens":
        return 10
    return int(rule.removeprefix("train_tens_")) if rule.startswith("train_tens_") else 0


def card_seconds(card: Path) -> float:
    """A model's training or a fit's seconds, from its JSON card."""
    info = json.loads(card.read_text())
    return info["train_seconds"] if "train_seconds" in info else info["fit_seconds"]


def benchmark_seconds(bench: Path) -> float:
    """A job's seconds from its Snakemake benchmark file (the first value of its one row)."""
    return float(bench.read_text().splitlines()[1].split("\t")[0])


def job_seconds(work: Path) -> list[tuple[str, float]]:
    """In-job seconds per job, longest first: training and fits from their cards (cacheable
    jobs have no benchmark file; a job training ten models has ten cards), scoring from
    Snakemake's benchmark files. Named ``study/train/role/model``, ``study/fit/fit/group``,
    ``study/score/attack``."""
    totals: dict[str, float] = {}
    studies = work / "results" / "studies"
    for pattern in ("*/models/*/*.json", "*/fits/*/*.json"):
        for card in studies.glob(pattern):
            study, kind, group = card.relative_to(studies).parts[:3]
            job = card.stem
            if kind == "models" and group in TEN_PER_JOB.get(study, ()):
                job = f"{int(job) // 10 * 10}-{int(job) // 10 * 10 + 9}"  # ten to a job
            name = f"{study}/{'fit' if kind == 'fits' else 'train'}/{group}/{job}"
            totals[name] = totals.get(name, 0.0) + card_seconds(card)
    for bench in (work / "results" / "benchmarks").glob("*/score-*.tsv"):
        totals[f"{bench.parent.name}/score/{bench.stem[6:]}"] = benchmark_seconds(bench)
    return sorted(totals.items(), key=lambda item: -item[1])


def _own_seconds(work: Path, output: str) -> float:
    """A job's own measured seconds behind one of its outputs: a model's or a fit's card, or
    a score file's benchmark (the whole script); 0 for anything else."""
    path = work / output
    if path.suffix == ".json" and path.parent.parent.name in ("models", "fits"):
        return card_seconds(path)
    if path.parent.name == "scores":
        return benchmark_seconds(
            work / "results" / "benchmarks" / path.parts[-3] / f"score-{path.stem}.tsv")
    return 0.0


def overhead_by_rule(work: Path) -> dict[str, tuple[int, float]]:
    """Per rule: its jobs, and a job's mean wall seconds outside its own measured work (for
    training and fits: starting Python, imports, reading inputs and writing outputs; scoring's
    benchmark times its whole script, so there only Snakemake's bookkeeping is left; rules
    with no measured work count whole). From Snakemake's log, whose timestamps have whole
    seconds: a mean over many jobs. With two jobs at a time these are shared-core seconds."""
    log = max((work / ".snakemake" / "log").glob("*.log"), key=lambda p: p.stat().st_mtime)
    started: dict[int, dict] = {}
    finished: dict[int, datetime] = {}
    stamp = current = None
    for line in log.read_text().splitlines():
        if match := re.fullmatch(r"\[(\w{3} \w{3} +\d+ [\d:]+ \d{4})\]", line):
            stamp = datetime.strptime(match.group(1), "%a %b %d %H:%M:%S %Y")
        elif match := re.fullmatch(r"(?:local)?rule (\w+):", line):
            current = {"rule": match.group(1), "start": stamp, "outputs": []}
        elif current is not None and (match := re.fullmatch(r"\s+output: (.*)", line)):
            current["outputs"] = match.group(1).split(", ")
        elif current is not None and (match := re.fullmatch(r"\s+jobid: (\d+)", line)):
            started[int(match.group(1))] = current
            current = None
        elif match := re.match(r"Finished jobid: (\d+)", line):
            finished[int(match.group(1))] = stamp
    totals: dict[str, list[float]] = {}
    for job, info in started.items():
        if job in finished:
            rest = (finished[job] - info["start"]).total_seconds() - sum(
                _own_seconds(work, output) for output in info["outputs"])
            totals.setdefault(info["rule"], []).append(rest)
    return {rule: (len(rests), sum(rests) / len(rests)) for rule, rests in totals.items()}


def study_seconds(jobs: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """In-job seconds per study (training, fits, scoring) of :func:`job_seconds`' jobs, largest
    first."""
    totals: dict[str, float] = {}
    for name, seconds in jobs:
        study = name.split("/")[0]
        totals[study] = totals.get(study, 0.0) + seconds
    return sorted(totals.items(), key=lambda item: -item[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setup", action="store_true", help="also time a from-scratch set-up")
    parser.add_argument("--tests", action="store_true", help="also time the test suite")
    parser.add_argument("--out", type=Path, help="write the report here too")
    parser.add_argument("--keep", type=Path, help="run in this new directory and keep it")
    args = parser.parse_args()
    if args.keep and args.keep.exists():
        parser.error(f"--keep {args.keep}: a new directory, and this one exists")
    before = calibration()
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as scratch:
        work = args.keep or Path(scratch) / "run"
        work.mkdir(parents=True)
        dry_seconds, dry = timed([*SNAKEMAKE, "--directory", str(work), "--dry-run"], ROOT)
        jobs = job_counts(dry)
        rows.append(("`snakemake -n` (default config)", f"{dry_seconds:.1f} s"))
        rows.append(("jobs planned", ", ".join(f"{k} {v}" for k, v in jobs.items())))
        scheduler_file = Path(scratch) / "scheduler-cpu"
        os.environ["SCHEDULER_CPU"] = str(scheduler_file)
        cpu_before = children_cpu()
        run_seconds, _ = timed([sys.executable, "-c", SCHEDULER, *SNAKEMAKE[3:],
                                "--directory", str(work)], ROOT)
        cpu_total = children_cpu() - cpu_before
        rows.append(("default run, cold, 2 cores", f"{run_seconds:.0f} s"))
        after = calibration()  # the speed can drift during a long run: measured on both sides
        rows.insert(0, ("machine speed: calibration workload, 1 thread (CNN epoch + Hessian), "
                        "before / after the run", " / ".join(
                            f"{sum(c):.1f} s ({c[0]:.1f} + {c[1]:.1f})" for c in (before, after))))
        cards = sorted((work / "results" / "studies").glob("*/models/*/*.json"))
        infos = [json.loads(c.read_text()) for c in cards]
        distinct = {(STUDIES[card.parents[2].name]["dataset"], i["train_indices_sha256"],
                     i["seed"], json.dumps([i["architecture"], i["recipe"]], sort_keys=True))
                    for card, i in zip(cards, infos, strict=True)}
        planned = sum(count * models_per_job(rule) for rule, count in jobs.items())
        rows.append(("models planned / trained / distinct (dataset, training indices, seed, "
                     "architecture, recipe)",
                     f"{planned} / {len(cards)} / {len(distinct)}"))
        per_job = job_seconds(work)
        for stage, label in (("train", "in-job training"), ("score", "score-job"),
                             ("fit", "in-job fit")):
            seconds = sum(s for name, s in per_job if name.split("/")[1] == stage)
            rows.append((f"sum of {label} seconds", f"{seconds:.0f} s"))
        rows.append(("in-job seconds by study (training, fits, scoring)", ", ".join(
            f"{study} {seconds:.0f}" for study, seconds in study_seconds(per_job))))
        in_job = sum(seconds for _, seconds in per_job)
        scheduler = float(scheduler_file.read_text())
        total_jobs = jobs.get("total", 0)
        rows.append(("CPU seconds of the run: all processes / the scheduler process / per "
                     "job, the rest outside training, fits and score jobs (datasets, splits, "
                     "tables and figures included)",
                     f"{cpu_total:.0f} / {scheduler:.0f} / "
                     f"{(cpu_total - scheduler - in_job) / max(total_jobs, 1):.2f} s "
                     f"(in-job work {in_job:.0f} s, {total_jobs} jobs)"))
        rows.append(("wall seconds per job outside its measured work, by rule (jobs)", ", ".join(
            f"{rule} {round(seconds, 2) or 0.0:.2f} ({count})"
            for rule, (count, seconds) in sorted(overhead_by_rule(work).items(),
                                                 key=lambda item: -item[1][0]))))
        rows.append(("longest jobs (in-job seconds)", ", ".join(
            f"{name} {seconds:.0f}" for name, seconds in per_job[:10])))
        recheck = subprocess.run([sys.executable, str(ROOT / "benchmarks/recheck_claims.py"),
                                  "--run", str(work)], capture_output=True, text=True,
                                 check=False)
        rows.append(("claims recomputed without the package's code (`recheck_claims.py`)",
                     "; ".join(line.removeprefix("- ") for line in recheck.stdout.splitlines()
                               if line.startswith(("- rechecked", "- verdicts", "- mismatches")))
                     or f"failed: {recheck.stderr.strip()[-300:]}"))
        scores = subprocess.run([sys.executable, str(ROOT / "benchmarks/recheck_scores.py"),
                                 "--run", str(work), "--float32"], capture_output=True,
                                text=True, check=False)
        words = ("MATCH", "CLOSE", "MISMATCH", "CONSISTENT", "INCONSISTENT")
        verdicts = re.findall(rf" ({'|'.join(words)})$", scores.stdout, re.MULTILINE)
        rows.append(("scores recomputed from the saved logits and weights, the drawn ones "
                     "(BMIA, Subpop, MERLIN, bayes-wb) drawn anew (`recheck_scores.py "
                     "--float32`): study and attack pairs", ", ".join(
                         f"{verdicts.count(v)} {v}" for v in words)
                     if verdicts else f"failed: {scores.stderr.strip()[-300:]}"))
        if args.setup:
            copy = Path(scratch) / "repo"
            shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
                ".venv", "results", ".snakemake", "logs", ".git", "__pycache__"))
            setup_seconds, _ = timed(["bash", "setup.sh"], copy)
            rows.append(("environment set-up from scratch", f"{setup_seconds:.0f} s"))
    if args.tests:
        test_seconds, output = timed([sys.executable, "-m", "pytest", "-q"], ROOT)
        summary = output.strip().splitlines()[-1]
        rows.append(("test suite", f"{test_seconds:.0f} s ({summary})"))
    emit(["| measure | value |", "|---|---|", *(f"| {k} | {v} |" for k, v in rows)], args.out)


if __name__ == "__main__":
    main()
