# Helpers shared by the rules: config lookups and input functions (no rules here).
import re

from miarepro.artifacts import builders as artifact_builders
from miarepro.artifacts.results import studies_read
from miarepro.config import attack_params
from miarepro.pipeline import fit_paths, loo_model_indices
from miarepro.attacks import get_attack
from miarepro.splits import reference_indices

RESULTS = "results"  # outputs live under the working directory (see --directory)
ENV = "../envs/miarepro.yaml"

wildcard_constraints:
    study="[a-z0-9][a-z0-9-]*",
    attack="[a-z0-9][a-z0-9-]*",
    role="target|reference|loo",
    fit=r"[A-Za-z0-9_=.-]+",
    group=r"\d+",
    index=r"\d+",
    dataset=r"[A-Za-z0-9_.-]+",


def study_config(wildcards):
    return config["studies"][wildcards.study]


def dataset_file(wildcards):
    return f"{RESULTS}/datasets/{study_config(wildcards)['dataset']}.npz"


def signal_files(study, role, indices):
    return [f"{RESULTS}/studies/{study}/signals/{role}/{i}.npy" for i in indices]


def attack_inputs(wildcards):
    """Signals an attack instance reads: all targets, their references, its LOO models.

    White-box attacks also get the model files of those models.
    """
    study = study_config(wildcards)
    attack = study["attacks"][wildcards.attack]
    loo = loo_model_indices(attack.get("loo_records", 0), attack.get("loo_models", 0))
    references = sorted({i for target in range(study["targets"])
                         for i in reference_indices(study["split"]["scheme"], target,
                                                    attack.get("n_reference", 0))})
    models = {"target": range(study["targets"]), "reference": references, "loo": loo}
    inputs = {
        "dataset": dataset_file(wildcards),
        "split": f"{RESULTS}/studies/{wildcards.study}/split.npz",
        "targets": signal_files(wildcards.study, "target", models["target"]),
        "references": signal_files(wildcards.study, "reference", references),
        "loo": signal_files(wildcards.study, "loo", loo),
    }
    if get_attack(attack["attack"]).whitebox:
        inputs["models"] = [f"{RESULTS}/studies/{wildcards.study}/models/{role}/{i}.pt"
                            for role, indices in models.items() for i in indices]
    inputs["fits"] = [f"{path}.npz" for path in fit_paths(RESULTS, wildcards.study, study,
                                                           attack)]
    return inputs


def fit_settings(wildcards):
    """Family, fit parameters and reference count of the fit named by the wildcards."""
    for attack in study_config(wildcards)["attacks"].values():
        spec = get_attack(attack["attack"])
        params = attack_params(attack)
        if spec.fit and spec.fit_key(params, attack.get("n_reference", 0)) == wildcards.fit:
            return {"attack": spec.name, "params": spec.split_params(params)[0],
                    "n_reference": attack.get("n_reference", 0)}
    raise ValueError(f"no attack of study {wildcards.study!r} needs fit {wildcards.fit!r}")


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
            "signals": [f"{base}/signals/{role}/{i}.npy" for role, i in models]}


def whitebox_params(wildcards):
    study = study_config(wildcards)
    if not get_attack(study["attacks"][wildcards.attack]["attack"]).whitebox:
        return {}
    return {"model": study["model"], "training": study["training"]}


def artifact_outputs():
    return [path for name, settings in config["artifacts"].items()
            for path in artifact_builders.BUILDERS[settings["builder"]].outputs(RESULTS, name,
                                                                                  config)]

def artifacts_of_kind(kind):
    names = [n for n, s in config["artifacts"].items()
             if artifact_builders.BUILDERS[s["builder"]].kind == kind]
    return "|".join(re.escape(n) for n in names) or "^$"


def artifact_inputs(wildcards):
    return artifact_builders.inputs(RESULTS, config["artifacts"][wildcards.name], config)


def artifact_params(wildcards):
    """The artifact's settings and the parts of the config it reads (reruns follow edits)."""
    settings = config["artifacts"][wildcards.name]
    return {"settings": settings, "studies": studies_read(settings, config),
            "scale": config["scale"], "metrics": config["metrics"]}
