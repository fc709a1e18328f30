"""Configs made of other configs: ``include: [papers/bmia.yaml, ...]`` runs them as one.

``config/papers/all.yaml`` is the five paper configs in one DAG, so a model, dataset or fit
that two papers need is made once and every table comes out of one run. The merge is strict
where a silent choice would change a result: two studies or artifacts of one name must be
identical, and so must every other top-level setting, unless the including config sets it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from miarepro.schema import INHERITED, ConfigError, load_schema, read_file

CONFIG_DIR = Path(__file__).resolve().parent.parent / "config"
#: What decides the models a study trains besides its dataset (compared by its spec): what a
#: ``models_from`` study takes from its source. Studies agreeing on all of it share models.
TRAINING = tuple(key for key in INHERITED if key != "dataset")


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Merge ``config``'s ``include`` list (paths relative to ``config/``) into it, in place,
    and return it; its own top-level keys win over the included ones'."""
    if "include" not in config:
        return config
    names = config.pop("include")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ConfigError("config key include: a list of config files (relative to config/)")
    parts = {}
    for name in names:
        path = CONFIG_DIR / name
        if not path.is_file():
            raise ConfigError(f"config key include: {name!r} is not a file ({path})")
        parts[Path(name).stem] = read_file(path)
    own = dict(config)
    config.clear()
    config.update(union(parts, settled=set(own)), **own)
    return config


def union(parts: dict[str, dict[str, Any]], settled: Collection[str] = ()) -> dict[str, Any]:
    """One config running every part's studies and artifacts (parts keyed by a short name);
    the top-level keys in ``settled`` are the including config's to set, so parts may differ.

    A dataset is built once, under its first name; a name two parts give different datasets
    gets the part's name as a prefix. The metrics' FPR grids are joined and the larger
    bootstrap kept. A study whose dataset and training equal an earlier study's audits that
    study's models (``models_from``) instead of training them again.
    """
    merged: dict[str, Any] = {"datasets": {}, "studies": {}, "artifacts": {}}
    defined_by: dict[str, tuple[set[str], list[str]]] = {}  # part: its artifacts and studies
    metric_defaults = {key: spec["default"] for key, spec
                       in load_schema()["properties"]["metrics"]["properties"].items()
                       if "default" in spec}
    metrics: list[dict[str, Any]] = []
    for part, config in parts.items():
        config = copy.deepcopy(config)
        renamed = {}
        for name, spec in config.pop("datasets", {}).items():
            same = [known for known, other in merged["datasets"].items() if other == spec]
            if same or merged["datasets"].get(name, spec) != spec:
                renamed[name] = same[0] if same else f"{part}-{name}"
            merged["datasets"][renamed.get(name, name)] = spec
        config_studies = config.pop("studies", {})
        for name, study in config_studies.items():
            if study.get("dataset") in renamed:
                study["dataset"] = renamed[study["dataset"]]
            _add(merged["studies"], "studies", name, study, part)
        artifacts = config.pop("artifacts", {})
        for name, artifact in artifacts.items():
            _add(merged["artifacts"], "artifacts", name, artifact, part)
        defined_by[part] = (set(artifacts), list(config_studies))
        metrics.append({**metric_defaults, **config.pop("metrics", {})})
        for key, value in config.items():
            if merged.setdefault(key, value) != value and key not in settled:
                raise ConfigError(f"config key {key}: included configs disagree ({part!r} has "
                                  f"{value!r}); set it in the including config")
    merged["metrics"] = {**metrics[0],
                         "fprs": sorted({f for m in metrics for f in m["fprs"]}),
                         "bootstrap": max(m["bootstrap"] for m in metrics)}
    _keep_artifacts_to_their_part(merged["artifacts"], defined_by)
    _share_models(merged)
    return merged


def _keep_artifacts_to_their_part(artifacts: dict[str, Any],
                                  defined_by: dict[str, tuple[set[str], list[str]]]) -> None:
    """An artifact without ``studies`` reads every study: one part's (BMIA's ROC curves) keeps
    to that part's studies; one that several parts define (the leaderboard, the claims)
    spans them all."""
    from miarepro.artifacts.registry import BUILDERS

    for name, settings in artifacts.items():
        parts = [studies for names, studies in defined_by.values() if name in names]
        if (len(parts) == 1 and "studies" not in settings
                and BUILDERS[settings["builder"]].reads_studies):
            settings["studies"] = parts[0]


def _add(into: dict[str, Any], kind: str, name: str, value: Any, part: str) -> None:
    if into.get(name, value) != value:
        raise ConfigError(f"config key {kind}.{name}: defined differently by {part!r} and an "
                          "earlier included config; rename one")
    into[name] = value


def _share_models(config: dict[str, Any]) -> None:
    """Point each study that would train the models of an earlier one at those models."""
    trainers: dict[str, str] = {}
    owners: dict[str, str] = {}
    for name, study in config["studies"].items():
        if "models_from" not in study:
            key = json.dumps([config["datasets"].get(study["dataset"])]
                             + [study.get(k) for k in TRAINING], sort_keys=True)
            owners[name] = trainers.setdefault(key, name)
    for name, study in config["studies"].items():
        owner = owners.get(study.get("models_from", name), name)
        if owner != name:
            for inherited in INHERITED:
                study.pop(inherited, None)
            study["models_from"] = owner
