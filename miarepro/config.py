"""Load and validate the workflow config: JSON schema first, then names against the registries.

Validation runs at start-up (the Snakefile calls :func:`validate`), so a typo fails before any
job starts, with a message naming the bad key and listing the known values.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonschema
import yaml

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "config" / "schema.yaml"
# Keys of an attack entry that the workflow consumes; the rest are the attack's own parameters.
WORKFLOW_KEYS = frozenset(
    {"attack", "n_reference", "loo_models", "loo_records", "label", "paper_attack",
     "paper_setting"}
)


class ConfigError(ValueError):
    """A config value is invalid; the message names the key path."""


def _with_defaults(validator_class: type) -> type:
    """A validator that fills in ``default`` values while it validates (jsonschema recipe)."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema):
        if isinstance(instance, dict):
            for name, subschema in properties.items():
                if "default" in subschema:
                    instance.setdefault(name, copy.deepcopy(subschema["default"]))
        yield from validate_properties(validator, properties, instance, schema)

    return jsonschema.validators.extend(validator_class, {"properties": set_defaults})


def load_schema() -> dict[str, Any]:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """Validate ``config`` in place (filling defaults) and return it; raise ConfigError."""
    validator = _with_defaults(jsonschema.Draft202012Validator)(load_schema())
    errors = sorted(validator.iter_errors(config), key=lambda e: list(e.absolute_path))
    if errors:
        error = errors[0]
        where = ".".join(str(part) for part in error.absolute_path) or "<top level>"
        raise ConfigError(f"config key {where}: {error.message}")
    _check_names(config)
    return config


def attack_params(entry: dict[str, Any]) -> dict[str, Any]:
    """The attack function's own parameters of one attack entry."""
    return {key: value for key, value in entry.items() if key not in WORKFLOW_KEYS}


def n_references(study: dict[str, Any]) -> int:
    """Reference models a study needs: the most any of its attacks asks for."""
    return max((a.get("n_reference", 0) for a in study["attacks"].values()), default=0)


def loo_plan(study: dict[str, Any]) -> tuple[int, int]:
    """(records, models per record) of the study's leave-one-out models, 0 if none."""
    entries = [a for a in study["attacks"].values() if "loo_records" in a]
    return (max((a["loo_records"] for a in entries), default=0),
            max((a["loo_models"] for a in entries), default=0))


def _check_names(config: dict[str, Any]) -> None:
    from miarepro.artifacts.builders import BUILDERS
    from miarepro.attacks import get_attack
    from miarepro.data import SOURCES, check_spec

    for key, spec in config["datasets"].items():
        if spec["source"] not in SOURCES:
            raise ConfigError(f"config key datasets.{key}.source: unknown source "
                              f"{spec['source']!r}; known: {sorted(SOURCES)}")
        try:
            check_spec(spec)
        except ValueError as error:
            raise ConfigError(f"config key datasets.{key}: {error}") from None
    for name, study in config["studies"].items():
        where = f"studies.{name}"
        if study["dataset"] not in config["datasets"]:
            raise ConfigError(f"config key {where}.dataset: unknown dataset "
                              f"{study['dataset']!r}; known: {sorted(config['datasets'])}")
        scheme = study["split"]["scheme"]
        if scheme == "partition" and "fractions" not in study["split"]:
            raise ConfigError(f"config key {where}.split.fractions: required by 'partition'")
        for attack_name, entry in study["attacks"].items():
            at = f"{where}.attacks.{attack_name}"
            try:
                spec = get_attack(entry["attack"])
            except KeyError as error:
                raise ConfigError(f"config key {at}.attack: {error.args[0]}") from None
            try:
                spec.check_params(attack_params(entry), f"config key {at}")
            except ValueError as error:
                raise ConfigError(str(error)) from None
            if spec.needs_references and entry.get("n_reference", 0) < 1:
                raise ConfigError(f"config key {at}.n_reference: attack {spec.name!r} needs "
                                  "at least one reference model")
            if spec.needs_loo and not {"loo_records", "loo_models"} <= set(entry):
                raise ConfigError(f"config key {at}: attack {spec.name!r} needs loo_records "
                                  "and loo_models")
        baseline = study.get("regime", {}).get("baseline")
        if baseline is not None and baseline not in study["attacks"]:
            raise ConfigError(f"config key {where}.regime.baseline: unknown attack "
                              f"{baseline!r}; known: {sorted(study['attacks'])}")
    from miarepro.artifacts.catalog import ARTIFACT_IDS

    for artifact, settings in config["artifacts"].items():
        where = f"config key artifacts.{artifact}"
        if settings["builder"] not in BUILDERS:
            raise ConfigError(f"{where}.builder: unknown builder {settings['builder']!r}; "
                              f"known: {sorted(BUILDERS)}")
        if settings["builder"] == "paper_table" and artifact not in ARTIFACT_IDS:
            raise ConfigError(f"{where}: a paper table must be named by its artifact ID; "
                              f"known IDs: {list(ARTIFACT_IDS)}")
        for study in settings.get("studies", []):
            if study not in config["studies"]:
                raise ConfigError(f"{where}.studies: unknown study {study!r}; "
                                  f"known: {sorted(config['studies'])}")
        _check_measured(settings, config["metrics"]["fprs"], where)


def _check_measured(settings: dict[str, Any], fprs: list[float], where: str) -> None:
    """An artifact can only show metrics the score jobs measure (``metrics.fprs``)."""
    from miarepro.uncertainty import metric_names

    measured = metric_names(fprs)
    for fpr in settings.get("fprs", []):
        if f"tpr@{fpr * 100:g}%" not in measured:
            raise ConfigError(f"{where}.fprs: {fpr} is not in metrics.fprs {fprs}")
    for metric in settings.get("metrics", []):
        if metric not in measured:
            raise ConfigError(f"{where}.metrics: {metric!r} is not measured; known: {measured} "
                              "(add its FPR to metrics.fprs)")
