"""End-to-end runs of their own: interrupted, cached, bundled, misconfigured, replicated."""

import copy
import os
import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from workflow_runs import (
    ROOT,
    SNAKEMAKE,
    TINY,
    Plan,
    planned_jobs,
    run,
    run_with_cache,
)


def test_one_artifact_runs_only_the_jobs_it_needs(tmp_path):
    jobs = Plan(run(tmp_path, TINY, "--dry-run", "results/artifacts/BMIA-T1.md"))
    # one dataset, the two targets of study "part" and BMIA's reference model of each, the
    # reference models of study "wide" that bmia-ref-wide uses (and their split), four
    # Laplace fits and QMIA's two (one per target), the five attacks of "part", the table
    assert jobs == {"dataset": 1, "split": 2, "train": 6, "fit": 6, "score": 5,
                    "table": 1}, jobs
    assert "study=bal" not in jobs.output


def test_conda_environment_names_no_local_paths():
    """Snakemake builds the environment from a copy elsewhere: pins inline, no -r / -e."""
    environment = yaml.safe_load((ROOT / "envs" / "miarepro.yaml").read_text())
    pip = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    assert not [line for line in pip if line.startswith(("-", ".", "/"))]
    runtime = [line for line in (ROOT / "envs" / "requirements.txt").read_text().splitlines()
               if line and not line.startswith("#")
               and line not in ("pytest", "pytest-xdist", "ruff")]
    assert pip == runtime


def test_jobs_and_warm_workers_keep_the_callers_python_path(tmp_path):
    """Libraries found through the caller's PYTHONPATH (a module system's, or Snakemake itself
    installed beside an image's Python) reach every job and warm worker: the Snakefile puts
    the package in front of that path, not in its place. A ``sitecustomize`` found only there
    records each Python process started."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, sys\n"
        "with open(os.environ['STARTED_PYTHONS'], 'a') as record:\n"
        "    record.write(' '.join(sys.argv) + '\\n')\n")
    started = tmp_path / "started.txt"
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY))
    result = subprocess.run(
        [*SNAKEMAKE, "results/studies/part/models/target/0.pt", "--directory", str(tmp_path),
         "--configfile", str(tmp_path / "config.yaml"), "--cores", "2"],
        capture_output=True, text=True, check=False,
        env={**os.environ, "STARTED_PYTHONS": str(started), "PYTHONPATH": os.pathsep.join(
            filter(None, [str(site), os.environ.get("PYTHONPATH")]))})
    assert result.returncode == 0, result.stderr[-3000:]
    pythons = started.read_text().splitlines()
    assert [p for p in pythons if p.startswith("-m ") and p.split()[1].endswith("/torch")]
    assert [p for p in pythons if re.search(r"\.snakemake/scripts/\S+\.train\.py", p)]
    assert "listening on" in (tmp_path / "logs" / "warm-torch.log").read_text()  # it imported


def test_after_kill_9_a_rerun_recomputes_only_the_interrupted_jobs(tmp_path):
    import signal
    import time

    config = copy.deepcopy(TINY)  # one study of six models is enough to kill mid-flight
    part = {**config["studies"]["part"], "targets": 1, "attacks": {
        "attack-p": {"attack": "marginal", "statistic": "hinge"},
        "lira": {"attack": "lira", "mode": "offline", "n_reference": 5}}}
    config.update(studies={"part": part}, artifacts={"leaderboard": {"builder": "leaderboard"}},
                  datasets={"tiny": config["datasets"]["tiny"]})
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    command = [*SNAKEMAKE, "--directory", str(tmp_path), "--configfile",
               str(tmp_path / "config.yaml"), "--cores", "1", "--rerun-incomplete"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    cards = tmp_path / "results" / "studies"

    def wait_for(condition):
        deadline = time.monotonic() + 240
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.1)

    wait_for(lambda: list(cards.glob("*/models/*/*.json")))
    done = {str(p.relative_to(tmp_path)).removesuffix(".json")
            for p in cards.glob("*/models/*/*.json")}
    assert done, "no model finished before the kill"
    # once a job that was not running yet has written its log, Snakemake has recorded the
    # finished models as complete: kill everything then, mid-flight
    logs = set((tmp_path / "logs").rglob("*.log"))
    wait_for(lambda: set((tmp_path / "logs").rglob("*.log")) - logs)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    subprocess.run([*command, "--unlock"], capture_output=True, check=True)
    planned = subprocess.run([*command, "--dry-run"], capture_output=True, text=True,
                             check=True).stdout
    replanned = {f"results/studies/{s}/models/{r}/{i}" for s, r, i in re.findall(
        r"wildcards: study=(\w+), role=(\w+), index=(\d+)", planned)}
    assert replanned and not replanned & done, (replanned, done)
    subprocess.run([*command, "--cores", "2"], capture_output=True, check=True)
    leftovers = [p for p in (tmp_path / "results").rglob(".*") if p.is_file()]
    assert leftovers == [] and (tmp_path / "results/artifacts/index.md").exists()


def test_bundled_models_and_fits_come_from_the_between_workflow_cache_as_trained_alone(
        tmp_path):
    """Snakemake's own cache (`--cache`, `SNAKEMAKE_OUTPUT_CACHE`): a second checkout of the
    same config takes every model and fit from the first one's cache instead of retraining.
    With ``ten_per_job: [reference]`` one job makes references 10k to 10k+9, the same models
    (seeds, weights, signals) as a job each would, here trained as one stack
    (``train_stacked``): bitwise the same on one CPU thread, at float tolerance on a GPU. Of
    the next ten, only reference 10 is read, and only it is trained (rule train_tens_1)."""
    config = copy.deepcopy(TINY)
    part = {**config["studies"]["part"], "targets": 1,
            "attacks": {"lira": {"attack": "lira", "mode": "offline", "n_reference": 11},
                        "bmia": config["studies"]["part"]["attacks"]["bmia"]}}
    del part["regime"]  # its baseline attack is not here
    config.update(studies={"part": part}, artifacts={"leaderboard": {"builder": "leaderboard"}},
                  datasets={"tiny": config["datasets"]["tiny"]})
    bundled = {**config, "studies": {"part": {**part, "ten_per_job": ["reference"],
                                              "train_stacked": ["reference"]}}}
    (tmp_path / "first").mkdir()
    jobs = planned_jobs(tmp_path / "first", bundled)
    assert jobs.get("train_tens") == jobs.get("train_tens_1") == jobs.get("train") == 1, jobs
    compared = (0, 9, 10)  # the first and last of a bundle, the first of the next
    alone = [f"results/studies/part/models/reference/{i}.npy" for i in compared]
    outputs = run_with_cache(tmp_path, {"first": bundled, "second": bundled, "alone": config},
                             targets={"alone": alone})
    study = tmp_path / "first" / "results/studies/part"
    models, fits = sorted(study.rglob("models/*/*.pt")), sorted(study.rglob("fits/*/*.npz"))
    assert len(models) == 12 and fits  # the target and references 0 to 10, nothing unread
    for path in models + fits:
        relative = path.relative_to(tmp_path / "first")
        assert f"{relative} from cache" in outputs["second"], relative
        assert (tmp_path / "second" / relative).read_bytes() == path.read_bytes()
    # every model is its own, not another model of the study with the same recipe and data
    for path in models:
        card = yaml.safe_load(path.with_suffix(".json").read_text())
        assert f"{card['role']}/{card['index']}" == f"{path.parent.name}/{path.stem}", path
    for index in compared:
        relative = f"results/studies/part/models/reference/{index}"
        card, alone_card = (yaml.safe_load((home / f"{relative}.json").read_text())
                            for home in (tmp_path / "first", tmp_path / "alone"))
        assert card["seed"] == alone_card["seed"] and card["stacked"] == (10 if index < 10
                                                                           else 1)
        # bitwise on a CPU; a GPU rounds a batched product unlike a single one (about 1e-6)
        tolerance = dict(rtol=0, atol=0) if card["device"] == "cpu" else dict(rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(*(np.load(home / f"{relative}.npy")
                                     for home in (tmp_path / "first", tmp_path / "alone")),
                                   **tolerance)
        torch.testing.assert_close(*(torch.load(home / f"{relative}.pt", weights_only=True)[
            "1.weight"] for home in (tmp_path / "first", tmp_path / "alone")),
            **tolerance)
    assert not (tmp_path / "alone" / "results/studies/part/models/reference/11.pt").exists()


def test_missing_datasets_are_reported_together_before_any_job(tmp_path):
    """Two real datasets absent (one downloadable) and QMIA's pretrained backbone: a dry run
    lists them and still plans; the run stops before its first job, naming each absent file
    and the studies that need it."""
    config = copy.deepcopy(TINY)
    config["data_dir"] = str(tmp_path / "data")
    config["datasets"]["tiny"] = {"source": "cifar10", "ood": {"source": "image_like"}}
    config["datasets"]["tiny-tab"] = {"source": "pima", "download": True}
    config["studies"]["part"]["attacks"]["qmia"]["backbone"] = {
        "arch": "convnext", "weights": "weights/convnext_tiny.pt"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    command = [*SNAKEMAKE, "--directory", str(tmp_path), "--configfile",
               str(tmp_path / "config.yaml"), "--cores", "1"]
    planned = subprocess.run([*command, "--dry-run"], capture_output=True, text=True,
                             check=False)
    assert planned.returncode == 0, planned.stderr[-2000:]
    listed = planned.stdout + planned.stderr  # a dry run logs to stdout
    assert "1 dataset(s) are not on disk" in listed
    assert "A run stops before its first job until then" in listed
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert ("1 dataset(s) and 1 pretrained weight file(s) this run needs are absent (listed "
            "above)") in result.stderr
    assert "- weights/convnext_tiny.pt (for part)" in result.stderr
    assert "1 dataset(s) are not on disk" in result.stderr
    assert re.search(r"^- tiny \(source cifar10, for .*\bpart, part-ood, wide\): ",
                     result.stderr, re.M)
    # CIFAR's archive would do only with `download: true`: the extracted folder is what is absent
    assert f"{tmp_path}/data/cifar10/cifar-10-batches-py\n" in result.stderr
    assert "1 dataset(s) will be downloaded" in result.stderr
    assert re.search(r"^- tiny-tab \(source pima, for ", result.stderr, re.M)
    assert not (tmp_path / "results").exists()


def _typo_in_a_paper_setting(config: dict) -> str:
    study = next(s for s in config["studies"].values() if "bmia" in s["attacks"])
    study["attacks"]["bmia"]["paper_setting"] = "n=11"
    return yaml.safe_dump(config)


def _a_key_twice(config: dict) -> str:
    return yaml.safe_dump(config) + "scale: paper\n"  # the second 'scale' would win silently


@pytest.mark.parametrize(("write", "message"), [
    (_typo_in_a_paper_setting, "attacks.bmia.paper_setting: unknown setting 'n=11'"),
    (_a_key_twice, "key 'scale' is given twice in one mapping"),
])
def test_a_bad_config_fails_the_dry_run_naming_the_key(tmp_path, write, message):
    (tmp_path / "config.yaml").write_text(write(copy.deepcopy(TINY)))
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"),
         "--cores", "1", "--dry-run"], capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr, (result.stdout + result.stderr)[-2000:]


def test_replicates_run_for_the_claims_only(tmp_path):
    """A balanced study run as 3 replicates adds its two copies' splits, models, fits and the
    scores of the attacks its claims compare, read by the claims alone: tables and figures
    show the first replicate, and an attack no claim compares (SIF, IHA-CG here) is not run
    in the copies. A partition study's replicates are repetitions: more targets, no job of
    its own to score or split them."""
    from miarepro import config as miarepro_config
    from miarepro.artifacts import builders, claims

    for folder in ("plain", "replicated"):
        (tmp_path / folder).mkdir()
    config = copy.deepcopy(TINY)
    bal = config["studies"]["bal"]  # standing in for Purchase-100, as IHA's claims need
    bal["paper_dataset"] = "purchase100"
    bal["attacks"]["loss"]["paper_attack"] = "loss"
    bal["attacks"]["iha"]["paper_attack"] = "iha"
    plain = planned_jobs(tmp_path / "plain", copy.deepcopy(config))
    bal["replicates"] = 3
    config["studies"]["tab"]["replicates"] = 3
    replicated = planned_jobs(tmp_path / "replicated", config)
    assert {"study=bal-r1", "study=bal-r2"} <= set(replicated.wildcards("split"))
    assert not [s for s in replicated.wildcards("split") if s.startswith("study=tab-")]
    validated = miarepro_config.validate(copy.deepcopy(config))
    assert claims.attacks_read("bal", validated) == ["loss", "iha"]
    # tab: a regressor and a target more; bal: both copies of its 2 claimed scores and split
    assert replicated.get("split") - plain.get("split") == 2
    assert replicated.get("score") - plain.get("score") == 2 * 2
    assert validated["studies"]["tab"]["targets"] == 3
    read_by = {name: [Path(path).parts[2:] for path in builders.inputs(
                   "results", settings, validated) if path.startswith("results/studies/")]
               for name, settings in validated["artifacts"].items()}
    assert {"bal", "bal-r1", "bal-r2", "tab"} <= {parts[0] for parts in read_by["claims"]}
    scored = {(parts[0], parts[-1]) for parts in read_by["claims"] if parts[1] == "metrics"}
    for copy_name in ("bal-r1", "bal-r2"):
        assert {attack for study, attack in scored if study == copy_name} == {
            "loss.parquet", "iha.parquet"}
    assert not any({"bal-r1", "bal-r2"} & {parts[0] for parts in files}
                   for name, files in read_by.items() if name != "claims")


def test_both_profiles_print_a_failed_jobs_log():
    """The README promises a failed job's traceback on screen, locally and on a cluster."""
    for profile in (ROOT / "profiles" / "local" / "config.yaml", ROOT / "slurm" / "profile.yaml"):
        assert yaml.safe_load(profile.read_text()).get("show-failed-logs") is True, profile
