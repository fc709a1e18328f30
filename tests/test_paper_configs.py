"""The paper-scale configs and all five as one (config/papers/all.yaml): each DAG builds in a
dry run with the models the papers' settings imply (BMIA: a target and 8 reference models per
repetition, never more), and training and fit jobs ask for memory and time that follow their
model."""

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from miarepro import config as miarepro_config

sys.path.append(str(Path(__file__).resolve().parent.parent / "benchmarks"))
from workflow import models_per_job  # benchmarks/workflow.py, through the path above

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ("bmia", "qmia", "iha", "subpop", "stolen-memories")
SMALL = {"mlp", "logistic", "cnn", "lenet", "catboost"}


@pytest.fixture(scope="module", params=(*PAPERS, "all"))
def plan(request, tmp_path_factory):
    """(config, jobs): every planned job as (rule, wildcards, resources). How long the dry run
    takes is measured by benchmarks/dag.py, not here: a timed test fails on a slower machine."""
    path = ROOT / "config" / "papers" / f"{request.param}.yaml"
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
         "--configfile", str(path), "--directory", str(tmp_path_factory.mktemp("dry")),
         "--dry-run"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    jobs = []
    for block in result.stdout.split("\nrule ")[1:]:
        rule = block.split(":", 1)[0]
        fields = dict(re.findall(r"^    (wildcards|resources): (.*)$", block, re.M))
        parse = lambda text: dict(item.split("=", 1) for item in text.split(", ") if "=" in item)  # noqa: E731
        jobs.append((rule, parse(fields.get("wildcards", "")), parse(fields.get("resources", ""))))
    config = miarepro_config.validate(yaml.safe_load(path.read_text()))  # all.yaml: included
    return config, jobs


def models_trained(jobs) -> Counter:
    """(study, role): models its training jobs make."""
    trained: Counter = Counter()
    for rule, wildcards, _ in jobs:
        if models_per_job(rule):
            trained[(wildcards["study"], wildcards["role"])] += models_per_job(rule)
    return trained


def test_each_study_trains_its_targets_and_no_more_references_than_its_attacks_use(plan):
    """Models trained ten to a job are those read: a group of ten read in part trains only
    its first models, so no role's count is rounded up."""
    config, jobs = plan
    trained = models_trained(jobs)
    for name, study in config["studies"].items():
        if "models_from" in study:
            assert (name, "target") not in trained
            continue
        targets = study["targets"]
        assert trained[(name, "target")] == targets, name
        used = max([a.get("n_reference", 0) for owner, other in config["studies"].items()
                    for a in other["attacks"].values()
                    if a.get("reference_study", other.get("models_from", owner)) == name] + [0])
        per_group = targets if study["split"]["scheme"] == "partition" else 1
        assert trained[(name, "reference")] <= used * per_group, name
        if study["paper"] == "bmia":  # at most the paper's 8 per repetition, all of them used
            assert used <= 8 and trained[(name, "reference")] == used * targets, name


def test_large_models_ask_for_more_memory_and_time_than_small_ones(plan):
    """A ResNet-50 / DenseNet-121 training job is not sized like an MLP's (per model, where
    one job trains ten), and no job asks for more than the 3 days clusters commonly allow."""
    config, jobs = plan
    sizes: dict[str, set[tuple[int, int]]] = {"small": set(), "other": set()}
    for rule, wildcards, resources in jobs:
        if not models_per_job(rule):
            continue
        model = config["studies"][wildcards["study"]]["model"]
        per_model = int(resources["runtime"]) // models_per_job(rule)
        small = model["arch"] in SMALL or model.get("depth") == 20  # ResNet-20: 0.27M weights
        sizes["small" if small else "other"].add((int(resources["mem_mb"]), per_model))
    if sizes["small"] and sizes["other"]:
        assert max(sizes["small"]) <= min(sizes["other"]), sizes
    longest = max(int(resources["runtime"]) for rule, _, resources in jobs
                  if models_per_job(rule) or rule == "fit")
    assert longest <= 3 * 24 * 60, longest
    heavy = [resources for rule, wildcards, resources in jobs if rule == "train" and re.search(
        r"depth': (50|121)", str(config["studies"][wildcards["study"]]["model"]))]
    for resources in heavy:
        assert int(resources["mem_mb"]) >= 64000 and int(resources["runtime"]) >= 1440


def test_bundles_ask_for_their_models_time_and_fits_for_their_own(plan):
    """A bundle job asks for its study's per-model time times its models; a fit job for the
    study's fit_runtime_min where it sets one, else the training time."""
    config, jobs = plan
    checked = 0
    for rule, wildcards, resources in jobs:
        if not rule.startswith("train_tens") and rule != "fit":
            continue
        study = config["studies"][wildcards["study"]]
        own = {**config["resources"], **study.get("resources", {})}
        expected = (models_per_job(rule) * own["train_runtime_min"] if rule != "fit"
                    else own.get("fit_runtime_min", own["train_runtime_min"]))
        assert int(resources["runtime"]) == expected, (rule, wildcards)
        checked += 1
    assert checked


def test_catboost_takes_no_gpu_and_imagenet_scoring_its_memory(plan):
    """CatBoost (QMIA's tabular targets) trains on CPUs: its training jobs take no GPU and run
    on the CPU partition, where torch's take one on the GPU partition. A score job reads its
    study's logits: ImageNet's (5 GB a model) ask for more than the default 8 GB."""
    config, jobs = plan
    for rule, wildcards, resources in jobs:
        study = config["studies"][wildcards.get("study", "")] if "study" in wildcards else {}
        own = {**config["resources"], **study.get("resources", {})}
        if rule == "score":
            assert int(resources["mem_mb"]) == own["score_mem_mb"], wildcards
            assert int(resources["runtime"]) == own["score_runtime_min"], wildcards
        if models_per_job(rule):
            gpus = 0 if study["model"]["arch"] == "catboost" else own["train_gpus"]
            assert int(resources["gpu"]) == gpus, wildcards
            assert resources["slurm_partition"] == own["gpu_partition" if gpus
                                                       else "cpu_partition"], wildcards
    catboost = [wildcards for rule, wildcards, _ in jobs if models_per_job(rule)
                and config["studies"][wildcards["study"]]["model"]["arch"] == "catboost"]
    assert catboost or not any(study["model"]["arch"] == "catboost"
                               for study in config["studies"].values())
    imagenet = [resources for rule, wildcards, resources in jobs
                if rule == "score" and "imagenet" in wildcards["study"]]
    assert all(int(r["mem_mb"]) >= 64000 and int(r["runtime"]) >= 240 for r in imagenet)


def test_the_gpu_smoke_config_fits_every_attack_side_model(tmp_path):
    """config/smoke-gpu.yaml: one ResNet-18 epoch on generated images and one fit of each
    attack-side model family, with no download."""
    result = subprocess.run(
        [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
         "--configfile", str(ROOT / "config" / "smoke-gpu.yaml"), "--directory",
         str(tmp_path), "--dry-run"], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    fits = set(re.findall(r"wildcards: study=[\w-]+, fit=([a-z_]+)-", result.stdout))
    assert fits == {"bmia", "qmia", "hessian", "stolen_memories", "subpop", "merlin"}, fits


def test_a_defended_study_keeps_its_undefended_studys_deviations():
    """A study under DP-SGD or dropout (``<study>-eps-*``, ``<study>-dropout``) repeats the
    deviations of the study it defends (its recipe's assumptions, the fit's choices): a YAML
    merge replaces a list, so a defended study's own list once left them out. A deviation that
    names an attack the defended study does not run (shadow-bb) is exempt."""
    checked = 0
    for path in [ROOT / "config" / "config.yaml",
                 *(ROOT / "config" / "papers" / f"{p}.yaml" for p in PAPERS)]:
        checked += _defended_studies_checked(path)
    assert checked >= 20, checked  # the default config's and Stolen Memories' paper config's


def _defended_studies_checked(path: Path) -> int:
    """Check each defended study of the config at ``path``; how many there are."""
    studies = yaml.safe_load(path.read_text())["studies"]
    checked = 0
    for name, study in studies.items():
        base = re.match(r"(.+)-(?:eps-[\d-]+|dropout)$", name)
        if base is None or base.group(1) not in studies:
            continue
        checked += 1
        labels = {a.get("label", key) for key, a in studies[base.group(1)]["attacks"].items()}
        absent = labels - {a.get("label", key) for key, a in study["attacks"].items()}
        missing = [d for d in studies[base.group(1)].get("deviations", [])
                   if d not in study.get("deviations", [])
                   and not any(d.startswith(label) for label in absent)]
        assert not missing, f"{path.name}: {name} leaves out {missing}"
    return checked


def test_a_retried_job_asks_for_twice_the_memory_and_time(tmp_path):
    """A job the cluster kills for its memory or its time fails alike to Snakemake; its one
    retry (slurm/profile.yaml) asks for twice both, in every rule that asks a cluster for them;
    the time no more than ``resources.max_runtime_min`` (3 days) however often it is retried.
    Read from the workflow as Snakemake loads it, with the default config."""
    from snakemake.api import SnakemakeApi
    from snakemake.settings.types import (
        ConfigSettings,
        OutputSettings,
        ResourceSettings,
        StorageSettings,
        WorkflowSettings,
    )

    class Wildcards(dict):  # what a resource function reads: attributes and keys()
        __getattr__ = dict.__getitem__

    study = next(name for name, settings in yaml.safe_load(
        (ROOT / "config" / "config.yaml").read_text())["studies"].items()
        if "ten_per_job" in settings)
    wildcards = Wildcards(study=study, role="target", tens="0", attack="loss", group="0")
    with SnakemakeApi(OutputSettings()) as api:
        workflow = api.workflow(
            resource_settings=ResourceSettings(), config_settings=ConfigSettings(),
            storage_settings=StorageSettings(), workflow_settings=WorkflowSettings(),
            snakefile=ROOT / "Snakefile", workdir=tmp_path)._workflow
        asked = {}
        for rule in workflow.rules:
            for name in ("mem_mb", "runtime"):
                resource = rule.resources.get(name)
                if resource is not None and resource.is_evaluable():  # a rule's own function
                    asked[rule.name, name] = [resource.evaluate(wildcards, attempt=attempt).value
                                              for attempt in (1, 2, 10)]
    assert {"score", "score_models", "fit", "train", "train_tens"} <= {r for r, _ in asked}
    for (rule, name), (first, second, tenth) in asked.items():
        assert second == 2 * first > 0, (rule, name, first, second)
        assert tenth == (4320 if name == "runtime" else 2**9 * first), (rule, name, tenth)

