"""Where each study's results live and which attack parameters are the attack's own: the
naming the config, the rules, the jobs and the artifact builders share. It sits below all of
them and imports nothing of the package at module level, so none of them imports another
upward to find a path.
"""

from __future__ import annotations

from typing import Any

#: Keys of an attack entry that only name it in the tables and claims (a score job's params
#: leave them out, so that relabelling an attack rescores nothing).
DISPLAY_KEYS = frozenset({"label", "paper_attack", "paper_setting"})
# Keys of an attack entry that the workflow consumes; the rest are the attack's own parameters.
WORKFLOW_KEYS = DISPLAY_KEYS | {"attack", "n_reference", "loo_models", "loo_records", "records",
                                "reference_study"}


def attack_params(entry: dict[str, Any]) -> dict[str, Any]:
    """The attack function's own parameters of one attack entry."""
    return {key: value for key, value in entry.items() if key not in WORKFLOW_KEYS}


def model_home(name: str, study: dict[str, Any]) -> str:
    """The study whose directory holds this study's split, models, signals and fits."""
    return study.get("models_from", name)


def reference_home(name: str, study: dict[str, Any], attack: dict[str, Any]) -> str:
    """The study whose reference models (and fits of them) an attack instance uses."""
    return attack.get("reference_study") or model_home(name, study)


def replicate_name(study: str, replicate: int) -> str:
    """The generated study that runs replicate ``replicate`` (0 is the study itself)."""
    return study if replicate == 0 else f"{study}-r{replicate}"


def replicates_of(name: str, config: dict[str, Any]) -> list[str]:
    """Every generated replicate of study ``name``, itself first: a balanced study's copies
    under new seeds; a partition study replicates as repetitions (its targets), in itself."""
    study = config["studies"][name]
    copies = 1 if _partitioned(study) else study.get("replicates", 1)
    return [replicate_name(name, r) for r in range(copies)]


def independent_runs(name: str, config: dict[str, Any]) -> int:
    """How many independent runs of the experiment study ``name`` holds: its repetitions
    (targets) for a partition study, its generated replicates for a balanced one, whose
    targets share a pool and reference models."""
    study = config["studies"][name]
    return study.get("targets", 1) if _partitioned(study) else len(replicates_of(name, config))


def _partitioned(study: dict[str, Any]) -> bool:
    return study.get("split", {}).get("scheme") == "partition"


def fit_paths(results: str, study_name: str, study: dict[str, Any],
              attack: dict[str, Any]) -> list[str]:
    """Per target, the fit an attack instance reads (without suffix; ``[]`` if it has none).

    A ``references``-scoped fit belongs to the target's reference models: one per repetition
    of a partition study, one shared by all targets of a balanced study. It lives with those
    models (:func:`reference_home`), so every study using them shares it.
    """
    from miarepro.attacks import get_attack

    spec = get_attack(attack["attack"])
    if spec.fit is None:
        return []
    key = spec.fit_key(attack_params(attack), attack.get("n_reference", 0))
    scoped = spec.fit_scope == "references"
    shared = scoped and study["split"]["scheme"] == "balanced"
    owner = (reference_home(study_name, study, attack) if scoped
             else model_home(study_name, study))
    return [f"{results}/studies/{owner}/fits/{key}/{0 if shared else target}"
            for target in range(study["targets"])]


def loo_model_indices(records: int, models: int) -> list[int]:
    """The leave-one-out models of ``records`` records, ``models`` each, record by record
    (:func:`miarepro.splits.training_indices` numbers them seed-major)."""
    from miarepro.splits import STRIDE

    return [j * STRIDE + k for k in range(records) for j in range(models)]
