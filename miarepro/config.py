"""Load and validate the workflow config: JSON schema first, then names against the registries.

Validation runs at start-up (the Snakefile calls :func:`validate`), so a typo fails before any
job starts, with a message naming the bad key and listing the known values.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

from miarepro.options import did_you_mean, unknown
from miarepro.paths import WORKFLOW_KEYS, attack_params, replicate_name
from miarepro.schema import INHERITED, ConfigError, load_schema


def _with_defaults(validator_class: type) -> type:
    """A validator that fills in ``default`` values while it validates (jsonschema recipe),
    and whose integers are ints: JSON Schema counts ``2.0`` as an integer, which then fails
    deep in ``range()`` (a score job's bootstrap, after every model has trained) rather than
    at start-up naming its key."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    integers = validator_class.TYPE_CHECKER.redefine(
        "integer", lambda _, value: isinstance(value, int) and not isinstance(value, bool))
    return jsonschema.validators.extend(validator_class, {"properties": set_defaults},
                                        type_checker=integers)


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Validate ``config`` in place (filling defaults, merging in the configs it ``include``s:
    :mod:`miarepro.includes`) and return it; raise ConfigError."""
    from miarepro import includes

    includes.resolve(config)
    _inherit_models(config)
    validator = _with_defaults(jsonschema.Draft202012Validator)(load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        raise ConfigError(_describe(errors[0]))
    _check_names(config)
    _expand_replicates(config)
    return config


#: A replicate's seeds: the study's own plus this times the replicate's number.
REPLICATE_SEED_STEP = 1000


def _expand_replicates(config: dict[str, Any]) -> None:
    """Give every study its ``replicates``: whole runs of the experiment under new seeds.

    A partition study's repetitions already are such runs (target *t* has its own partition,
    drawn from ``(seed, t)``, its own reference models and its own fits), so its replicates are
    repetitions: it gets at least that many ``targets``, and the studies auditing its models
    (``models_from``) take them too. A balanced study's targets share one pool and its
    reference models, so each replicate beyond the first is a generated copy of the study
    (``<name>-r<r>``) with its split seed and training seed moved by
    :data:`REPLICATE_SEED_STEP` per replicate: its split draw, its models and its fits (seeded
    from the training seed: ``StudyFiles.fit_seed``) are new, its ``models_from`` and
    ``reference_study`` point at the same replicate of those studies, and it records
    ``replicate_of``; artifacts name the first replicate only. Repetitions cost no score,
    split or artifact job of their own. The top-level ``replicates`` is every study's least
    number (the default config sets 3; ``--config replicates=1`` drops what it adds)."""
    studies = config["studies"]
    for study in studies.values():
        study["replicates"] = max(study["replicates"], config["replicates"])
        if study["split"]["scheme"] == "partition" and "models_from" not in study:
            study["targets"] = max(study["targets"], study["replicates"])
    for name, study in list(studies.items()):
        partition = study["split"]["scheme"] == "partition"
        for source in model_sources(study):
            runs = studies[source]["targets" if partition else "replicates"]
            if runs < study["replicates"]:
                raise _fail(f"studies.{name}.replicates", f"{study['replicates']}, but study "
                            f"{source!r}, whose models it uses, has {runs} "
                            + ("repetitions (targets)" if partition else "replicates"))
        if "models_from" in study:  # it audits every repetition of those models
            study["targets"] = studies[study["models_from"]]["targets"]
        if partition:
            continue
        for r in range(1, study["replicates"]):
            copy_name = replicate_name(name, r)
            if copy_name in studies:
                raise _fail(f"studies.{copy_name}", f"the name of replicate {r} of study "
                            f"{name!r}; rename the study")
            replica = copy.deepcopy(study)
            replica["replicate_of"] = name
            replica["split"]["seed"] += REPLICATE_SEED_STEP * r
            replica["training"]["seed"] = study["training"]["seed"] + REPLICATE_SEED_STEP * r
            if "models_from" in study:
                replica["models_from"] = replicate_name(study["models_from"], r)
            for entry in replica["attacks"].values():
                if "reference_study" in entry:
                    entry["reference_study"] = replicate_name(entry["reference_study"], r)
            studies[copy_name] = replica


def model_sources(study: dict[str, Any]) -> list[str]:
    """The studies whose models ``study`` uses and whose replicates bound its own: its
    ``models_from``, and a balanced study's attacks' ``reference_study`` (a partition study's
    repetitions train the reference models they take from another study themselves)."""
    return ([study["models_from"]] if "models_from" in study else []) + [
        entry["reference_study"] for entry in study["attacks"].values()
        if "reference_study" in entry and study["split"]["scheme"] != "partition"]


def _describe(error: jsonschema.ValidationError) -> str:
    """A schema error as ``config key <path>: <what is wrong>``, with a did-you-mean."""
    path = [str(part) for part in error.absolute_path]
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        known = list(error.schema.get("properties", {}))
        key = sorted(set(error.instance) - set(known))[0]
        return f"config key {'.'.join([*path, key])}: " + unknown("key", key, known)
    where = ".".join(path) or "<top level>"
    if error.validator == "enum":
        return f"config key {where}: " + unknown("value", error.instance, error.validator_value)
    return f"config key {where}: {error.message}"


def _inherit_models(config: dict[str, Any]) -> None:
    """A study with ``models_from`` audits another study's models in another way (BMIA Table 2:
    out-of-distribution non-members): it takes their dataset, split and recipe, so no model
    is trained twice, and may not set them itself."""
    studies = config.get("studies")
    if not isinstance(studies, dict):
        return
    for name, study in studies.items():
        if not isinstance(study, dict) or "models_from" not in study:
            continue
        where, source = f"studies.{name}", study["models_from"]
        if source not in studies:
            raise _fail(f"{where}.models_from", unknown("study", source, studies))
        _require_own_models(f"{where}.models_from", source, studies[source])
        for key in INHERITED:
            if key in study:
                raise _fail(f"{where}.{key}", f"comes from models_from study {source!r}; "
                            "remove it here")
            if key in studies[source]:
                study[key] = copy.deepcopy(studies[source][key])


def _require_own_models(where: str, name: str, study: dict[str, Any]) -> None:
    """Models are borrowed from the study that trains them, never through a second study."""
    if "models_from" in study:
        raise _fail(where, f"study {name!r} takes its models from {study['models_from']!r}; "
                    "name that study instead")


def _fail(where: str, message: str) -> ConfigError:
    return ConfigError(f"config key {where}: {message}")


def _check_names(config: dict[str, Any]) -> None:
    """Everything the schema cannot say: names against the registries, options against the
    components' signatures, and cross-field constraints (split sizes, model counts)."""
    from miarepro.data import check_spec

    for key, spec in config["datasets"].items():
        try:
            check_spec(spec)
        except ValueError as error:
            raise _fail(f"datasets.{key}", str(error)) from None
    for name, study in config["studies"].items():  # first, so no other check blames another
        if study["dataset"] not in config["datasets"]:
            raise _fail(f"studies.{name}.dataset", unknown("dataset", study["dataset"],
                                                           config["datasets"]))
    for name, study in config["studies"].items():
        _check_study(f"studies.{name}", study, config)
    _check_artifacts(config)


def _check_study(where: str, study: dict[str, Any], config: dict[str, Any]) -> None:
    from miarepro.attacks import get_attack
    from miarepro.data import gives_images
    from miarepro.models import IMAGE_ARCHITECTURES, check_architecture
    from miarepro.splits import STRIDE, has_public

    try:
        check_architecture(study["model"], f"{where}.model")
    except ValueError as error:
        raise ConfigError(f"config key {error}") from None
    _check_stacked(where, study)
    if (study["model"]["arch"] in IMAGE_ARCHITECTURES
            and not gives_images(config["datasets"][study["dataset"]])):
        raise _fail(f"{where}.model.arch", f"{study['model']['arch']!r} is a convolutional "
                    f"model for images; dataset {study['dataset']!r} gives feature vectors "
                    "(mlp, logistic or catboost take them)")
    if study["model"]["arch"] == "catboost":
        torch_only = [a for a, e in study["attacks"].items()
                      if get_attack(e["attack"]).loads_models]
        if torch_only:
            raise _fail(f"{where}.attacks.{torch_only[0]}", "a white-box or query attack needs "
                        "a torch model; this study's models are catboost")
    sizes = _split_sizes(where, study, config)
    _check_dp(where, study, sizes)
    for attack_name, entry in study["attacks"].items():
        at = f"{where}.attacks.{attack_name}"
        try:
            spec = get_attack(entry["attack"])
        except KeyError as error:
            raise _fail(f"{at}.attack", error.args[0]) from None
        try:
            spec.check_params(attack_params(entry), at, WORKFLOW_KEYS)
        except ValueError as error:
            raise ConfigError(f"config key {error}") from None
        if ({**spec.defaults(), **entry}.get("statistic") == "loss"
                and study.get("training", {}).get("loss") == "mse"):
            raise _fail(f"{at}.statistic", "'loss' is the cross-entropy, but this study's "
                        "models train on the squared error (training.loss: mse): an attack on "
                        "their loss reads statistic 'mse'")
        references = entry.get("n_reference", 0)
        if spec.needs_references and references < 1:
            raise _fail(f"{at}.n_reference", f"attack {spec.name!r} needs at least one "
                                              "reference model")
        if study["split"]["scheme"] == "partition" and references >= STRIDE:
            raise _fail(f"{at}.n_reference", f"{references} is too many: a repetition of a "
                        f"partition study numbers its reference models below {STRIDE}")
        if spec.public_data and not has_public(study["split"]):
            raise _fail(f"{where}.split", f"attack {attack_name!r} ({spec.name}) trains on the "
                        "attacker's public non-members, and this split has none outside the "
                        "audit: give it a population (split.population_fraction, or "
                        "split.fractions.population / reference_pool of a partition)")
        trained_on = study["split"].get("references_train_on", ["reference_pool"])
        if spec.name == "bmia" and "target_train" in trained_on:
            raise _fail(f"{where}.split.references_train_on", f"attack {attack_name!r} (bmia) "
                        "takes its one reference model as OUT for every audited record, and "
                        "these references train on the target's members")
        if spec.name == "shadow" and "reference_pool" not in trained_on:
            raise _fail(f"{where}.split.references_train_on", f"attack {attack_name!r} "
                        "(shadow) learns IN and OUT from the reference models' outputs on the "
                        "reference pool, which these references never train on")
        if spec.needs_loo and not {"loo_records", "loo_models"} <= set(entry):
            raise _fail(at, f"attack {spec.name!r} needs loo_records and loo_models")
        if sizes:
            _check_attack_sizes(at, entry, spec, sizes)
        for key in ("loo_models", "loo_records"):  # leave-one-out models number both by STRIDE
            if entry.get(key, 0) >= STRIDE:
                raise _fail(f"{at}.{key}", f"at most {STRIDE - 1}")
        if "reference_study" in entry:
            _check_reference_study(at, study, entry, config)
    if study["nonmembers"] == "ood":
        if study["split"]["scheme"] != "partition":
            raise _fail(f"{where}.nonmembers", "ood non-members need a 'partition' split")
        spec = config["datasets"][study["dataset"]]
        if spec.get("ood") is None and spec.get("ood_rotation") is None:
            raise _fail(f"{where}.nonmembers", f"dataset {study['dataset']!r} has no ood "
                        "records (give it an 'ood' dataset spec or an ood_rotation)")
    labels: dict[str, str] = {}
    for attack_name, entry in study["attacks"].items():
        label = entry.get("label", attack_name)
        if label in labels:
            raise _fail(f"{where}.attacks.{attack_name}.label", f"{label!r} is also the label "
                        f"of {labels[label]!r}: tables and figures could not tell them apart")
        labels[label] = attack_name
    baseline = study.get("regime", {}).get("baseline")
    if baseline is not None and baseline not in study["attacks"]:
        raise _fail(f"{where}.regime.baseline", unknown("attack", baseline, study["attacks"]))
    _check_paper_keys(where, study)


def _check_paper_keys(where: str, study: dict[str, Any]) -> None:
    """``paper_dataset``, ``paper_attack``, ``paper_setting`` and ``paper_model`` must name what
    the paper prints (``paper_values.csv``) or plots (``paper_keys.yaml``): a typo would blank
    the paper column and turn the claims that read it into "not run"."""
    from miarepro.artifacts.catalog import paper_keys

    paper = study["paper"]
    keys = paper_keys(paper)
    owner = f"paper {paper!r} (paper_values.csv, paper_keys.yaml)"
    if "paper_dataset" in study and study["paper_dataset"] not in keys.datasets:
        raise _fail(f"{where}.paper_dataset", unknown("dataset", study["paper_dataset"],
                                                      keys.datasets, owner))
    if "paper_model" in study and study["paper_model"] not in keys.models:
        raise _fail(f"{where}.paper_model", unknown("model", study["paper_model"], keys.models,
                                                    owner))
    for name, entry in study["attacks"].items():
        at = f"{where}.attacks.{name}"
        if "paper_setting" in entry and "paper_attack" not in entry:
            raise _fail(f"{at}.paper_setting", "names a setting of the paper's attack: give "
                        "paper_attack too")
        if "paper_attack" not in entry:
            continue
        attack = entry["paper_attack"]
        if attack not in keys.settings:
            raise _fail(f"{at}.paper_attack", unknown("attack", attack, keys.settings, owner))
        setting = entry.get("paper_setting")
        if setting is not None and setting not in keys.settings[attack]:
            raise _fail(f"{at}.paper_setting", unknown(
                "setting", setting, keys.settings[attack], f"attack {attack!r} of {owner}"))


def _check_stacked(where: str, study: dict[str, Any]) -> None:
    """``train_stacked`` roles must be bundled (``ten_per_job``) and their models stackable."""
    from miarepro.models import stacking_obstacle

    if not study["train_stacked"]:
        return
    unbundled = sorted(set(study["train_stacked"]) - set(study["ten_per_job"]))
    if unbundled:
        raise _fail(f"{where}.train_stacked", f"{unbundled} train one to a job; a stack is the "
                    "ten models of a ten_per_job role")
    obstacle = stacking_obstacle(study["model"], study["training"])
    if obstacle is not None:
        raise _fail(f"{where}.train_stacked", obstacle)


def _check_dp(where: str, study: dict[str, Any], sizes: dict[str, int]) -> None:
    """A ``training.dp`` block's guarantee must hold for every model the study trains: its
    delta is checked against the largest training set (target or reference half), and a
    CatBoost study, which ignores ``training``, may not claim one."""
    from miarepro.privacy import check_dp

    dp = study["training"].get("dp")
    if dp is None:
        return
    if study["model"]["arch"] == "catboost":
        raise _fail(f"{where}.training.dp", "DP-SGD trains torch models; catboost models "
                    "ignore the training recipe")
    # a pool of odd size gives odd-numbered references the larger half (splits._half)
    largest = (max(sizes["members"], sizes["reference_training"] - sizes["reference_training"]
                   // 2) if sizes else None)
    try:
        check_dp(dp, largest, f"{where}.training.dp")
    except ValueError as error:
        raise ConfigError(f"config key {error}") from None


def _check_reference_study(at: str, study: dict[str, Any], entry: dict[str, Any],
                           config: dict[str, Any]) -> None:
    """Reference models of another study (BMIA Figure 4: another architecture) must be trained
    on the same split, so that each is IN or OUT for the audited samples as the study's own
    are."""
    from miarepro.attacks import get_attack

    other = entry["reference_study"]
    if get_attack(entry["attack"]).loads_models:
        raise _fail(f"{at}.reference_study", "white-box and query attacks load the study's own "
                    "models")
    if other not in config["studies"]:
        raise _fail(f"{at}.reference_study", unknown("study", other, config["studies"]))
    source = config["studies"][other]
    _require_own_models(f"{at}.reference_study", other, source)
    for key in ("dataset", "split"):
        if source[key] != study[key]:
            raise _fail(f"{at}.reference_study", f"study {other!r} has another {key} "
                        f"({source[key]!r} vs {study[key]!r}); reference models must come from "
                        "the same split")


def _split_sizes(where: str, study: dict[str, Any], config: dict[str, Any]) -> dict[str, int]:
    """Sizes of the parts of the study's split (empty if the dataset size is unknown)."""
    from miarepro.data import expected_size
    from miarepro.splits import make_split, reference_training_pool

    split = study["split"]
    scheme = split["scheme"]
    if scheme == "partition":
        if "fractions" not in split:
            raise _fail(f"{where}.split.fractions", "required by the 'partition' scheme")
        if "population_fraction" in split:
            raise _fail(f"{where}.split.population_fraction", "only for the 'balanced' scheme; "
                        "a partition gives its population a fraction of its own")
        total = sum(split["fractions"].values())
        if total > 1 + 1e-9:
            raise _fail(f"{where}.split.fractions", f"sum to {total:g}; at most 1")
        for part in ("target_train", "target_test"):
            if split["fractions"].get(part, 0) <= 0:
                raise _fail(f"{where}.split.fractions.{part}", "must be positive: the target "
                            "needs members and non-members")
        for part in split.get("references_train_on", ()):
            if split["fractions"].get(part, 0) <= 0:
                raise _fail(f"{where}.split.references_train_on", f"names {part!r}, which "
                            "split.fractions leaves empty")
    elif "fractions" in split:
        raise _fail(f"{where}.split.fractions", "only for the 'partition' scheme; 'balanced' "
                    "takes population_fraction")
    elif "references_train_on" in split:
        raise _fail(f"{where}.split.references_train_on", "only for the 'partition' scheme; "
                    "a balanced split's references already share the targets' pool")
    n_samples = expected_size(config["datasets"][study["dataset"]])
    if n_samples is None:
        return {}
    parts = make_split(n_samples, split)
    sizes = {name: len(parts[name]) for name in ("target_train", "target_test", "reference_pool",
                                                 "population")}
    sizes["reference_training"] = len(reference_training_pool(parts))
    if scheme == "partition":
        sizes["members"], sizes["nonmembers"] = sizes["target_train"], sizes["target_test"]
    else:
        sizes["members"] = sizes["reference_pool"] // 2
        sizes["nonmembers"] = sizes["reference_pool"] - sizes["members"]
    if min(sizes["members"], sizes["nonmembers"]) < 1:
        raise _fail(f"{where}.split", f"{n_samples} records leave the target "
                    f"{sizes['members']} members and {sizes['nonmembers']} non-members")
    return sizes


def _check_attack_sizes(at: str, entry: dict[str, Any], spec: Any,
                        sizes: dict[str, int]) -> None:
    if spec.needs_references and sizes["reference_training"] < 2:
        raise _fail(f"{at}.n_reference", f"the split leaves reference models "
                    f"{sizes['reference_training']} records; each trains on half of them, so "
                    "they need at least 2")
    if spec.name == "rmia" and sizes["population"] < 1:
        raise _fail(at, "RMIA compares with population records, but the split has none "
                    "(split.fractions.population or split.population_fraction)")
    most = 2 * min(sizes["members"], sizes["nonmembers"])
    for key in ("loo_records", "records"):
        records = entry.get(key, 0)
        if records > most:
            raise _fail(f"{at}.{key}", f"{records} is more than the {most} the audit can "
                        f"balance ({sizes['members']} members, {sizes['nonmembers']} "
                        "non-members)")


def _check_artifacts(config: dict[str, Any]) -> None:
    from miarepro.artifacts.catalog import ARTIFACT_IDS
    from miarepro.artifacts.registry import BUILDERS

    for artifact, settings in config["artifacts"].items():
        where = f"artifacts.{artifact}"
        if settings["builder"] not in BUILDERS:
            raise _fail(f"{where}.builder", unknown("builder", settings["builder"], BUILDERS))
        builder = BUILDERS[settings["builder"]]
        for key in settings:
            if key != "builder" and key not in builder.keys:
                raise _fail(f"{where}.{key}", unknown("setting", key, builder.keys,
                                                      f"builder {settings['builder']!r}"))
        if settings["builder"] == "paper_table":
            if artifact not in ARTIFACT_IDS:
                raise _fail(where, "a paper table must be named by its artifact ID"
                            + did_you_mean(artifact, ARTIFACT_IDS) + f"; known: "
                            f"{list(ARTIFACT_IDS)}")
        for key in builder.required:
            if key not in settings:
                raise _fail(f"{where}.{key}", f"required by a {settings['builder']} artifact")
        if settings["builder"] in ("sweep", "density") and len(settings["studies"]) != 1:
            raise _fail(f"{where}.studies", f"a {settings['builder']} draws on one study")
        if settings["builder"] == "grid" and len(settings["metrics"]) != 1:
            raise _fail(f"{where}.metrics", "a grid shows one metric")
        studies = settings.get("studies", list(config["studies"]))
        for study in studies:
            if study not in config["studies"]:
                raise _fail(f"{where}.studies", unknown("study", study, config["studies"]))
        for study in settings.get("bound_studies", []):
            if study not in studies:
                raise _fail(f"{where}.bound_studies", unknown("study", study, studies,
                                                              "the artifact's studies"))
        for attack in settings.get("attacks", []):
            holders = [s for s in studies if attack in config["studies"][s]["attacks"]]
            if not holders or (not builder.attacks_in_some_study
                               and len(holders) < len(studies)):
                study = next(s for s in studies if s not in holders)
                raise _fail(f"{where}.attacks", unknown(
                    "attack", attack, config["studies"][study]["attacks"],
                    f"study {study!r}"))
        if settings["builder"] == "sweep":
            _check_sweep_axes(where, settings, config)
        _check_measured(settings, config["metrics"], where)
        _check_artifact_paper_keys(where, settings, [config["studies"][s] for s in studies])


def _check_sweep_axes(where: str, settings: dict[str, Any], config: dict[str, Any]) -> None:
    """A sweep's ``x`` and ``series`` must be parameters of each attack it draws (set in the
    entry or defaulted by the attack): another name would be drawn against None."""
    from miarepro.attacks import get_attack

    study = config["studies"][settings["studies"][0]]
    for key in ("x", "series"):
        if key not in settings:
            continue
        for attack in settings["attacks"]:
            entry = study["attacks"][attack]
            known = set(get_attack(entry["attack"]).defaults()) | set(entry)
            if settings[key] not in known:
                raise _fail(f"{where}.{key}", unknown("parameter", settings[key], known,
                                                      f"attack instance {attack!r}"))


def _check_artifact_paper_keys(where: str, settings: dict[str, Any],
                               studies: list[dict[str, Any]]) -> None:
    """An artifact's ``paper_dataset`` (a stand-in's paper dataset) and ``default_setting`` (the
    paper setting of instances without one) must be names of its studies' papers."""
    from miarepro.artifacts.catalog import paper_keys

    keys = [paper_keys(paper) for paper in sorted({study["paper"] for study in studies})]
    if "paper_dataset" in settings:
        known = set().union(*(k.datasets for k in keys))
        if settings["paper_dataset"] not in known:
            raise _fail(f"{where}.paper_dataset", unknown("dataset", settings["paper_dataset"],
                                                          known, "the studies' papers"))
    if "default_setting" in settings:
        known = set().union(*(s for k in keys for s in k.settings.values()))
        if settings["default_setting"] not in known:
            raise _fail(f"{where}.default_setting", unknown(
                "setting", settings["default_setting"], known, "the studies' papers"))


def _check_measured(settings: dict[str, Any], metrics: dict[str, Any], where: str) -> None:
    """An artifact can only show metrics the score jobs measure (``metrics.fprs``,
    ``metrics.calibration`` and ``metrics.alphas``)."""
    from miarepro.artifacts.registry import COMPUTE, SECONDS
    from miarepro.metrics import metric_name
    from miarepro.uncertainty import (
        decision_metric_names,
        exceedance_name,
        metric_names,
        pinball_name,
    )

    fprs = metrics["fprs"]
    measured = (metric_names(fprs) + [pinball_name(fpr) for fpr in fprs]
                + decision_metric_names(metrics["calibration"])
                + [exceedance_name(alpha) for alpha in metrics["alphas"]])
    for fpr in settings.get("fprs", []):
        if metric_name("tpr", fpr) not in measured:
            raise _fail(f"{where}.fprs", f"{fpr} is not in metrics.fprs {fprs}")
    for metric in settings.get("metrics", []):
        if metric not in measured and metric not in (COMPUTE, SECONDS):
            raise _fail(f"{where}.metrics", unknown("metric", metric, measured)
                        + " (add its FPR to metrics.fprs, its level to metrics.calibration "
                        "or metrics.alphas)")
