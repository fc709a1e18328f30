# Helpers shared by the rules: config lookups and input functions (no rules here).
import functools
import inspect
import os
import re
from types import SimpleNamespace

from miarepro.artifacts import builders as artifact_builders
from miarepro.artifacts import claims as artifact_claims
from miarepro.artifacts import report as artifact_report
from miarepro.artifacts.results import studies_read
from miarepro.paths import (DISPLAY_KEYS, attack_params, fit_paths, loo_model_indices,
                            model_home, reference_home)
from miarepro import provenance
from miarepro.attacks import get_attack
from miarepro.splits import reference_indices

RESULTS = "results"  # outputs live under the working directory (see --directory)
ENV = "../envs/miarepro.yaml"

STUDY = "[a-z0-9][a-z0-9-]*"

wildcard_constraints:
    study=STUDY,
    attack="[a-z0-9][a-z0-9-]*",
    role="target|reference|loo",
    fit=r"[A-Za-z0-9_=.-]+",
    group=r"\d+",
    index=r"\d+",
    dataset=r"[A-Za-z0-9_.-]+",


def announce_absent_datasets():
    """When the workflow is read (a dry run included, which skips `onstart`): every dataset a
    study uses that is neither built under results/ nor on disk, all reported at once
    (:mod:`miarepro.data.preflight`), so a reviewer planning a run learns of it then."""
    from snakemake.logging import logger

    from miarepro.data import preflight

    unbuilt = {study["dataset"] for study in config["studies"].values()
               if not os.path.exists(f"{RESULTS}/datasets/{study['dataset']}.npz")}
    message, blocking = preflight.report(preflight.absent(config, unbuilt),
                                         preflight.absent_weights(config))
    if message:
        logger.warning(message + ("\nA run stops before its first job until then."
                                  if blocking else ""))


def before_first_job():
    """Before the first job: say how many models the run trains (a config edit can turn a
    miniature into thousands of jobs), and stop if a dataset it builds is absent and may not
    be downloaded (listed when the workflow was read: :func:`announce_absent_datasets`)."""
    from snakemake.exceptions import WorkflowError
    from snakemake.logging import logger

    from miarepro.data import preflight

    jobs = list(workflow.dag.needrun_jobs())
    models = sum(len(job.output) // 3 for job in jobs if job.rule.name.startswith("train"))
    if models:
        logger.info(f"This run trains {models} model{'s' * (models != 1)} in {len(jobs)} jobs.")
    building = {job.wildcards["dataset"] for job in jobs if job.rule.name == "dataset"}
    blocking = [entry for entry in preflight.absent(config, building) if not entry.download]
    loading = {job.wildcards["study"] for job in jobs  # a model or fit with weights to load
               if job.rule.name == "fit" or job.rule.name.startswith("train")}
    weights = preflight.absent_weights(config, sorted(loading & set(config["studies"])))
    absent = [f"{len(blocking)} dataset(s)"] * bool(blocking) + [
        f"{len(weights)} pretrained weight file(s)"] * bool(weights)
    if absent:
        raise WorkflowError(f"{' and '.join(absent)} this run needs are absent (listed "
                            "above): stopping before the first job")


def stored_signature(function):
    """Snakemake reads the signature of an input, params or resource function at each of its
    calls (tens of thousands in a paper config's dry run); a stored ``__signature__`` turns
    that into a lookup."""
    function.__signature__ = inspect.signature(function)
    return function


def study_value(*keys):
    """A params function: the study's config at ``keys``."""

    def value(wildcards):
        found = study_config(wildcards)
        for key in keys:
            found = found[key]
        return found

    return stored_signature(value)


def study_config(wildcards):
    return config["studies"][wildcards.study]


def home(wildcards):
    """The study directory holding this study's split and models (see ``models_from``)."""
    return f"{RESULTS}/studies/{model_home(wildcards.study, study_config(wildcards))}"


@stored_signature
def attack_entry(wildcards):
    return study_config(wildcards)["attacks"][wildcards.attack]


@stored_signature
def scored_attack(wildcards):
    """A score job's attack entry, without the keys that only name it: relabelling an attack
    rebuilds the artifacts that show it, and rescores nothing."""
    return {key: value for key, value in attack_entry(wildcards).items()
            if key not in DISPLAY_KEYS}


def dataset_sources(wildcards):
    """The sources a dataset is read from: its own, and its out-of-distribution records'."""
    spec = config["datasets"][wildcards.dataset]
    return [spec["source"]] + ([spec["ood"]["source"]] if spec.get("ood") else [])


@stored_signature
def dataset_code(wildcards):
    """The code a dataset job runs: the registry, and the loaders of its sources alone, so
    that editing ImageNet's loader, or the downloads every loader of files imports, rebuilds
    no generated dataset (nor what trains on it)."""
    from miarepro import data

    loaders = [data.SOURCES[source].__module__ for source in dataset_sources(wildcards)]
    return code("make_dataset", "miarepro.data", "miarepro.data.dataset", "miarepro.options",
                *loaders)


@stored_signature
def dataset_root(wildcards):
    """``data_dir`` for a dataset read from files; "" for one that is shipped or generated,
    which moving ``data_dir`` leaves as it is."""
    from miarepro.data import OFFLINE_SOURCES

    return "" if set(dataset_sources(wildcards)) <= OFFLINE_SOURCES else config["data_dir"]


@stored_signature
def dataset_file(wildcards):
    return f"{RESULTS}/datasets/{study_config(wildcards)['dataset']}.npz"


def model_files(study_dir, role, indices, suffix):
    """A model's checkpoint (``.pt``) or its saved logits (``.npy``), side by side."""
    return [f"{study_dir}/models/{role}/{i}{suffix}" for i in indices]


@stored_signature
def attack_inputs(wildcards):
    """Signals an attack instance reads: all targets, their references, its LOO models.

    White-box attacks also get the model files of those models. Targets and leave-one-out
    models come from the study's model home, references from the attack's reference home.
    """
    study = study_config(wildcards)
    attack = study["attacks"][wildcards.attack]
    references = sorted({i for target in range(study["targets"])
                         for i in reference_indices(study["split"]["scheme"], target,
                                                    attack.get("n_reference", 0))})
    own = home(wildcards)
    models = {  # input name: (study directory, role, indices)
        "targets": (own, "target", range(study["targets"])),
        "references": (f"{RESULTS}/studies/{reference_home(wildcards.study, study, attack)}",
                       "reference", references),
        "loo": (own, "loo", loo_model_indices(attack.get("loo_records", 0),
                                              attack.get("loo_models", 0))),
    }
    inputs = {"dataset": dataset_file(wildcards), "split": f"{own}/split.npz",
              **{name: model_files(*where, ".npy") for name, where in models.items()}}
    if get_attack(attack["attack"]).loads_models:
        inputs["models"] = [path for where in models.values()
                            for path in model_files(*where, ".pt")]
    inputs["fits"] = [f"{path}.npz" for path in fit_paths(RESULTS, wildcards.study, study,
                                                           attack)]
    return inputs


def study_resources(wildcards):
    """The top-level ``resources`` with the study's own memory and time (training, fits)."""
    return {**config["resources"], **study_config(wildcards).get("resources", {})}


def on_retry(value, attempt):
    """``value`` doubled on each retry: a job the cluster killed for its memory or its time
    fails alike to Snakemake, and a retry that asked for the same would be killed again."""
    return value * 2 ** (attempt - 1)


def time_on_retry(minutes, attempt):
    """A job's time, doubled on each retry (:func:`on_retry`) up to ``max_runtime_min``."""
    return min(on_retry(minutes, attempt), config["resources"]["max_runtime_min"])


@stored_signature
def retry_memory(wildcards, attempt):
    """The study's memory, doubled on each retry (:func:`on_retry`)."""
    return on_retry(study_resources(wildcards)["train_mem_mb"], attempt)


@stored_signature
def job_gpus(wildcards):
    """A training, fit or model-scoring job's GPUs: none where it runs CatBoost alone (QMIA's
    tabular targets, a CatBoost regressor), a CPU library that would hold a GPU idle."""
    if "fit" in wildcards.keys():
        arch = fit_settings(wildcards)["params"].get("backbone", {}).get("arch")
    else:
        arch = study_config(wildcards)["model"]["arch"]
    return 0 if arch == "catboost" else config["resources"]["train_gpus"]


@stored_signature
def job_partition(wildcards):
    """The GPU partition for a job that takes a GPU, else the CPU one."""
    return config["resources"]["gpu_partition" if job_gpus(wildcards) else "cpu_partition"]


@stored_signature
def score_memory(wildcards, attempt):
    """A score job's memory, the study's (the logits it reads grow with the dataset), doubled
    on each retry."""
    return on_retry(study_resources(wildcards)["score_mem_mb"], attempt)


@stored_signature
def score_runtime(wildcards, attempt):
    """A score job's time, the study's, doubled on each retry."""
    return time_on_retry(study_resources(wildcards)["score_runtime_min"], attempt)


@stored_signature
def training_runtime(wildcards, attempt):
    """The study's time per model, times the models of a bundle job (:func:`bundle_sizes`),
    doubled on each retry."""
    per_model = study_resources(wildcards)["train_runtime_min"]
    models = (1 if "tens" not in wildcards.keys() else
              bundle_sizes().get((wildcards.study, wildcards.role, wildcards.tens), 10))
    return time_on_retry(per_model * models, attempt)


@stored_signature
def fit_runtime(wildcards, attempt):
    """A fit's (or a model-scoring job's) time, the study's, doubled on each retry."""
    resources = study_resources(wildcards)
    return time_on_retry(resources.get("fit_runtime_min", resources["train_runtime_min"]),
                         attempt)


@stored_signature
def trained_stacked(wildcards):
    """Whether a train_tens job trains its ten models as one stack (``train_stacked``)."""
    return wildcards.role in study_config(wildcards)["train_stacked"]


def split_studies(lookaheads: dict[str, str], chosen: bool) -> str:
    """The study-name pattern of one of two rules that share an output pattern: each study
    in ``lookaheads`` followed by its lookahead (``chosen``), or any other path.

    No file may match both rules: Snakemake would build both candidate jobs of every such
    file before a ruleorder discarded one, which doubled the planning time of
    config/papers/all.yaml. The lookaheads see the path after the study's name."""
    pairs = "|".join(rf"{re.escape(name)}(?={ahead})" for name, ahead in lookaheads.items())
    if chosen:
        return pairs or "^$"
    return rf"(?!(?:{pairs})){STUDY}" if pairs else STUDY


def bundled_roles() -> dict[str, list[str]]:
    """Per study that trains its own models: its ``ten_per_job`` roles, where it lists any."""
    return {name: study["ten_per_job"] for name, study in config["studies"].items()
            if study["ten_per_job"] and "models_from" not in study}


def trained_ten_per_job(bundled: bool) -> str:
    """The study-name pattern of the bundle jobs (``bundled``): each study whose
    ``ten_per_job`` lists roles, followed by one of them; or of the train jobs."""
    return split_studies({name: f"/models/(?:{'|'.join(roles)})/"
                          for name, roles in bundled_roles().items()}, bundled)


MODEL_FILE = re.compile(r"/studies/([^/]+)/models/(\w+)/(\d+)\.\w+$")


def _listed(inputs) -> list[str]:
    """The paths of an input function's answer: a list, or a dict of paths and lists."""
    values = inputs.values() if isinstance(inputs, dict) else [inputs]
    return [path for value in values for path in ([value] if isinstance(value, str) else value)]


@functools.cache
def bundle_sizes() -> dict[tuple[str, str, str], int]:
    """``(study, role, tens) -> k``: of the models ``{tens}0`` to ``{tens}9`` of a
    ``ten_per_job`` role, the run reads the first ``k`` (``tens`` is empty for models 0 to 9).

    A bundle job trains those ``k``, never a model nothing reads: a repetition's 8 reference
    models are one job of 8, not one of 10 with 2 unread. Read off the files that every score,
    fit and artifact job asks for, so a model some job needs always has a bundle."""
    bundled = bundled_roles()
    if not bundled:
        return {}
    paths = []
    for name, study in config["studies"].items():
        for key, attack in study["attacks"].items():
            paths += _listed(attack_inputs(SimpleNamespace(study=name, attack=key)))
            for fit in fit_paths(RESULTS, name, study, attack):
                *_, owner, _, folder, group = fit.split("/")  # results/studies/S/fits/F/G
                paths += _listed(fit_inputs(SimpleNamespace(study=owner, fit=folder,
                                                            group=group)))
    for name in config["artifacts"]:
        paths += inputs_of_artifact(name)
    sizes: dict[tuple[str, str, str], int] = {}
    for path in paths:
        match = MODEL_FILE.search(path)
        if match and match.group(2) in bundled.get(match.group(1), ()):
            index = int(match.group(3))
            key = (match.group(1), match.group(2), str(index // 10) if index >= 10 else "")
            sizes[key] = max(sizes.get(key, 0), index % 10 + 1)
    return sizes


def bundle_pattern(size: int) -> str:
    """The study-name pattern of the jobs that train bundles of ``size`` models
    (:func:`bundle_sizes`): rule train_tens every group of ten read whole, rule
    train_tens_<k> the groups of which the first k are read."""
    groups: dict[tuple[str, str], dict[int, list[str]]] = {}
    for (study, role, tens), k in bundle_sizes().items():
        groups.setdefault((study, role), {}).setdefault(k, []).append(re.escape(tens))
    lookaheads: dict[str, list[str]] = {}
    for study, roles in bundled_roles().items():
        for role in roles:
            found = groups.get((study, role), {})
            if size == 10:  # every group of the role but those read in part
                partial = [tens for k, listed in found.items() if k < 10 for tens in listed]
                lookaheads.setdefault(study, []).append(
                    rf"{role}/(?!(?:{'|'.join(partial)})\d\.)" if partial else f"{role}/")
            elif size in found:
                lookaheads.setdefault(study, []).append(
                    rf"{role}/(?:{'|'.join(found[size])})\d\.")
    return split_studies({study: f"/models/(?:{'|'.join(ahead)})"
                          for study, ahead in lookaheads.items()}, True)


def scored_on_models(models: bool) -> str:
    """The study-name pattern of the score jobs whose attack runs the models (``models``:
    white-box attacks and those that query the models, :attr:`AttackSpec.loads_models`), or
    of all other score jobs. The lookahead covers the scores, the metrics and the benchmark
    file, so that each names one rule."""
    lookaheads = {}
    for name, study in config["studies"].items():
        attacks = [re.escape(key) for key, attack in study["attacks"].items()
                   if get_attack(attack["attack"]).loads_models]
        if attacks:
            lookaheads[name] = (rf"/(?:scores/|metrics/|score-)(?:{'|'.join(attacks)})"
                                r"\.(?:parquet|tsv)$")
    return split_studies(lookaheads, models)


def code(steps, *entries):
    """The digest of the package code a step runs (:mod:`miarepro.provenance`), a param of
    every rule: editing a module reruns the jobs that run it, and only those. ``steps``
    names the functions of :mod:`miarepro.pipeline` the rule's script calls (comma-separated):
    of the driver, only what they reach counts."""
    return provenance.digest((f"miarepro.pipeline:{steps}", *entries))


#: what a score job runs of miarepro.uncertainty: the metrics of its scores, not the claims'
#: intervals, so editing those rebuilds the claims without rescoring (a test checks that
#: these are all the names the scoring step takes from the module)
SCORING_UNCERTAINTY = ("miarepro.uncertainty:"
                       "metric_table,decision_name,exceedance_name,pinball_name")


@stored_signature
def attack_code(wildcards):
    spec = get_attack(attack_entry(wildcards)["attack"])
    models = ("miarepro.training",) if spec.loads_models else ()  # StudyFiles rebuilds them
    return code("StudyFiles,score,measure", spec.fn.__module__, SCORING_UNCERTAINTY,
                "miarepro.metrics", *models)


@stored_signature
def fit_code(wildcards):
    return code("StudyFiles,fit", get_attack(fit_settings(wildcards)["attack"]).fit.__module__,
                "miarepro.training")


@stored_signature
def artifact_code(wildcards):
    builder = artifact_builders.BUILDERS[config["artifacts"][wildcards.name]["builder"]]
    return provenance.digest(("miarepro.artifacts.builders", builder.build.__module__))


@stored_signature
def fit_settings(wildcards):
    """Family, fit parameters and reference count of the fit named by the wildcards: the fit of
    some attack, of any study, that lives with this study's models (see ``fit_paths``)."""
    folder = f"{RESULTS}/studies/{wildcards.study}/fits/{wildcards.fit}"
    try:
        return fits_by_folder()[folder]
    except KeyError:
        raise ValueError(
            f"no attack needs fit {wildcards.fit!r} of study {wildcards.study!r}") from None


@functools.cache
def fits_by_folder():
    """Every fit folder any attack reads, with its settings (the first attack that names it),
    built once: a DAG asks for each fit job's settings twice, and scanning every study each
    time made dry runs of the paper configs quadratic in their size."""
    folders = {}
    for name, study in config["studies"].items():
        for attack in study["attacks"].values():
            paths = fit_paths(RESULTS, name, study, attack)
            if not paths:
                continue
            spec = get_attack(attack["attack"])
            settings = {"attack": spec.name,
                        "params": spec.split_params(attack_params(attack))[0],
                        "n_reference": attack.get("n_reference", 0)}
            for path in paths:
                folders.setdefault(path.rsplit("/", 1)[0], settings)
    return folders


@stored_signature
def fit_inputs(wildcards):
    """A fit reads the models of its group: the target's, or the references it fits."""
    study, settings = study_config(wildcards), fit_settings(wildcards)
    group = int(wildcards.group)
    if get_attack(settings["attack"]).fit_scope == "target":
        models = [("target", group)]
    else:
        models = [("reference", i) for i in reference_indices(study["split"]["scheme"], group,
                                                               settings["n_reference"])]
    base = f"{RESULTS}/studies/{wildcards.study}"
    return {"dataset": dataset_file(wildcards), "split": f"{base}/split.npz",
            "models": [f"{base}/models/{role}/{i}.pt" for role, i in models],
            "signals": [f"{base}/models/{role}/{i}.npy" for role, i in models]}


@stored_signature
def whitebox_params(wildcards):
    study = study_config(wildcards)
    if not get_attack(study["attacks"][wildcards.attack]["attack"]).loads_models:
        return {}
    return {"model": study["model"], "training": study["training"],
            "models": f"{home(wildcards)}/models"}


# Snakemake's HTML report (--report): one category per paper, one subcategory per kind
@stored_signature
def report_category(wildcards):
    return artifact_report.category(wildcards.name, config)


@stored_signature
def report_subcategory(wildcards):
    return artifact_report.subcategory(wildcards.name, config)


@stored_signature
def report_labels(wildcards):
    return {"artifact": wildcards.name, "title": artifact_report.title(wildcards.name, config)}


def artifact_outputs():
    return [path for name, settings in config["artifacts"].items()
            for path in artifact_builders.BUILDERS[settings["builder"]].outputs(RESULTS, name,
                                                                                  config)]

def artifacts_of_kind(kind, data=False):
    """The artifacts one rule makes: tables, or figures with or without a CSV of their data."""
    builders = {n: artifact_builders.BUILDERS[s["builder"]]
                for n, s in config["artifacts"].items()}
    names = [n for n, b in builders.items() if (b.kind, b.data) == (kind, data)]
    return "|".join(re.escape(n) for n in names) or "^$"


@stored_signature
def artifact_inputs(wildcards):
    return list(inputs_of_artifact(wildcards.name))  # a copy: the cached list stays as built


@functools.cache
def inputs_of_artifact(name):
    """An artifact's input files, built once: :func:`bundle_sizes` reads them too."""
    return artifact_builders.inputs(RESULTS, config["artifacts"][name], config)


@stored_signature
def artifact_params(wildcards):
    """The artifact's settings and the parts of the config it reads (reruns follow edits)."""
    settings = config["artifacts"][wildcards.name]
    builder = artifact_builders.BUILDERS[settings["builder"]]
    mapped = (artifact_claims.artifacts_read(config) if settings["builder"] == "claims"
              else {})
    return {"settings": settings,
            "studies": (studies_read(settings, config, builder.regime, builder.replicates)
                        if builder.reads_studies else {}),
            "scale": config["scale"], "metrics": config["metrics"], "artifacts": mapped}
