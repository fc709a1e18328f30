"""The tiny config of the end-to-end tests and the helpers that run Snakemake on it."""

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]


SM_FIT = {"proxies": 2, "shadows": 2, "displacement_widths": [0, 2], "meta_widths": [0],
          "epochs": 4}


TINY = {
    "scale": "miniature",
    "metrics": {"fprs": [0.01, 0.1], "bootstrap": 200},
    "datasets": {"tiny": {"source": "purchase_like", "n_samples": 600, "n_features": 60,
                          "n_classes": 10, "seed": 0,
                          "ood": {"source": "purchase_like", "n_samples": 150,
                                  "n_features": 60, "n_classes": 10, "seed": 5}},
                 "tiny-tab": {"source": "tabular_like", "n_samples": 400, "n_features": 8,
                              "n_informative": 4, "label_noise": 0.2},
                 "tiny-gauss": {"source": "sm_synthetic", "n_samples": 200, "n_features": 16,
                                "n_classes": 4}},
    "studies": {
        "part": {
            "paper": "bmia", "paper_dataset": "purchase100", "dataset": "tiny", "targets": 2,
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.2, "target_test": 0.2,
                                    "reference_pool": 0.4, "population": 0.2}},
            "model": {"arch": "mlp", "widths": [64]},
            "training": {"epochs": 8, "lr": 0.1, "batch_size": 32},
            "deviations": ["tiny test config"],
            "regime": {"reference": "a tiny reference", "test_accuracy": 0.8,
                       "baseline": "attack-p"},
            "attacks": {
                "attack-p": {"attack": "marginal", "statistic": "hinge",
                             "paper_attack": "attack_p"},
                "naive": {"attack": "naive"},
                "bmia": {"attack": "bmia", "n_reference": 1, "n_samples": 20,
                         "paper_attack": "bmia", "paper_setting": "n=1"},
                "bmia-ref-wide": {"attack": "bmia", "n_reference": 1, "n_samples": 20,
                                  "reference_study": "wide"},
                "qmia": {"attack": "qmia", "recipe": {"epochs": 2}, "paper_attack": "qmia"},
            },
        },
        "part-ood": {  # part's models, audited with out-of-distribution non-members
            "paper": "bmia", "models_from": "part", "nonmembers": "ood",
            "attacks": {"attack-p": {"attack": "marginal", "statistic": "hinge"},
                        "bmia": {"attack": "bmia", "n_reference": 1, "n_samples": 20}},
        },
        "wide": {  # another architecture on part's split (BMIA Figure 4)
            "paper": "bmia", "dataset": "tiny",
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.2, "target_test": 0.2,
                                    "reference_pool": 0.4, "population": 0.2}},
            "model": {"arch": "mlp", "widths": [128]},
            "training": {"epochs": 8, "lr": 0.1, "batch_size": 32},
            "attacks": {"bmia": {"attack": "bmia", "n_reference": 1, "n_samples": 20},
                        "bmia-ref-part": {"attack": "bmia", "n_reference": 1, "n_samples": 20,
                                          "reference_study": "part"}},
        },
        "tab": {  # QMIA's tabular setting: CatBoost models, each tuned by 2-fold CV
            "paper": "qmia", "paper_dataset": "openml_361057", "dataset": "tiny-tab",
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.4, "target_test": 0.2,
                                    "reference_pool": 0.4}},
            "model": {"arch": "catboost", "iterations": 30, "trials": 2, "folds": 2},
            "training": {},
            "attacks": {
                "marginal": {"attack": "marginal", "statistic": "hinge"},
                "lira-n2": {"attack": "lira", "mode": "offline", "variance": "global",
                            "statistic": "hinge", "n_reference": 2, "paper_attack": "lira",
                            "paper_setting": "n=2"},
                "qmia": {"attack": "qmia", "backbone": {"arch": "catboost"}, "trials": 3,
                         "space": {"depth": {"low": 1, "high": 4},
                                   "iterations": {"low": 10, "high": 50}},
                         "paper_attack": "qmia"},
            },
        },
        "bal": {
            "paper": "iha", "dataset": "tiny", "targets": 2,
            "split": {"scheme": "balanced", "seed": 1, "population_fraction": 0.2},
            "model": {"arch": "mlp", "widths": [8]},
            "training": {"epochs": 6, "lr": 0.1, "batch_size": 32, "momentum": 0.9,
                         "weight_decay": 5e-4},
            "attacks": {"loss": {"attack": "marginal", "statistic": "loss"},
                        # IHA and SIF share one Hessian fit per target; CG fits no Hessian
                        "iha": {"attack": "iha"},
                        "sif": {"attack": "sif", "eps": 0.5},
                        "iha-cg": {"attack": "iha", "solver": "cg", "records": 40}},
        },
        "sm": {  # Stolen Memories: white-box attacks sharing one fit, decisions calibrated
            "paper": "stolen-memories", "paper_dataset": "synthetic", "dataset": "tiny-gauss",
            "replicates": 2,  # two runs of the whole study: two repetitions of the split
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.25, "target_test": 0.25,
                                    "reference_pool": 0.5}},
            "model": {"arch": "mlp", "widths": []},
            "training": {"epochs": 20, "lr": 0.1, "batch_size": 16},
            "attacks": {"omniscient": {"attack": "omniscient", "paper_attack": "omniscient"},
                        "bayes-wb": {"attack": "bayes_wb", **SM_FIT, "paper_attack": "bayes_wb"},
                        "general-wb": {"attack": "general_wb", **SM_FIT},
                        "naive": {"attack": "naive"}},
        },
        "sm-dp": {  # the same target trained by DP-SGD
            "paper": "stolen-memories", "dataset": "tiny-gauss",
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.25, "target_test": 0.25,
                                    "reference_pool": 0.5}},
            "model": {"arch": "mlp", "widths": []},
            "training": {"epochs": 20, "lr": 0.1, "batch_size": 16, "dp": {"epsilon": 4.0}},
            "attacks": {"naive": {"attack": "naive"}},
        },
    },
    "artifacts": {
        "leaderboard": {"builder": "leaderboard"},
        "BMIA-T1": {"builder": "paper_table", "studies": ["part"],
                    "metrics": ["tpr@1%", "tpr@10%"]},
        "claims": {"builder": "claims"},
        "BMIA-F3a": {"builder": "sweep", "studies": ["part"], "attacks": ["bmia"],
                     "x": "n_samples", "series": "hessian", "metrics": ["tpr@10%", "seconds"]},
        "ROC-part": {"builder": "roc", "studies": ["part"]},
        "BMIA-F2": {"builder": "density", "studies": ["part"], "attacks": ["attack-p", "bmia"]},
        "BMIA-F4": {"builder": "grid", "studies": ["part", "wide"], "metrics": ["tpr@10%"],
                    "attacks": ["bmia", "bmia-ref-wide", "bmia-ref-part"]},
        "QMIA-T3": {"builder": "accuracy_table", "studies": ["tab"]},
        "QMIA-T5": {"builder": "search_table", "studies": ["tab"], "attacks": ["qmia"]},
        "QMIA-T6": {"builder": "paper_table", "studies": ["tab"],
                    "metrics": ["pinball@1%", "precision@10%"]},
        "QMIA-X1": {"builder": "fit_costs", "studies": ["part", "tab"], "attacks": ["qmia"]},
        "IHA-T1": {"builder": "threat_models"},
        "SM-F2": {"builder": "two_gaussians", "studies": ["sm"]},
        "SM-F5": {"builder": "bars", "studies": ["sm"],
                  "attacks": ["omniscient", "bayes-wb", "general-wb"],
                  "metrics": ["advantage", "precision@cal90"]},
        "SM-F6": {"builder": "displacement_sweep", "studies": ["sm"], "attacks": ["general-wb"],
                  "title": "Figure 6 in small: general-wb's validation against its test accuracy "
                           "over the widths of its displacements and meta model"},
        "SM-F1a": {"builder": "influence_explanations", "studies": ["sm"]},
        "SM-F8": {"builder": "dataset_size_trend", "studies": ["sm"],
                  "attacks": ["bayes-wb", "general-wb"], "metrics": ["accuracy"]},
        "SM-F13": {"builder": "dp_utility", "studies": ["sm", "sm-dp"]},
        "IHA-T5a": {"builder": "agreement", "studies": ["bal"], "attacks": ["loss", "iha"],
                    "fpr": 0.1},
        "IHA-T6": {"builder": "attack_costs", "studies": ["bal"], "paper_dataset": "purchase100",
                   "attacks": ["iha", "iha-cg", "loss"]},
    },
}


def run(workdir: Path, config: dict, *args: str) -> str:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"),
         "--cores", "2", *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout + result.stderr


class Plan(dict):
    """Rule -> number of jobs a dry run would execute; :meth:`wildcards` lists one rule's jobs
    from the same dry run. Scoring counts as ``score`` whichever node it asks for (rule
    ``score_models`` is the scoring of attacks that run the models)."""

    def __init__(self, output: str):
        table = output.split("Job stats:")[-1] if "Job stats:" in output else ""
        counts = {m.group(1): int(m.group(2))
                  for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}
        if "score_models" in counts:
            counts["score"] = counts.get("score", 0) + counts.pop("score_models")
        super().__init__(counts)
        self.output = output

    def wildcards(self, rule: str) -> list[str]:
        name = "score(?:_models)?" if rule == "score" else rule
        return re.findall(rf"rule {name}:.*?wildcards: ([^\n]+)", self.output, re.S)


def planned_jobs(workdir: Path, config: dict) -> Plan:
    return Plan(run(workdir, config, "--dry-run"))


def run_with_cache(tmp_path: Path, checkouts: dict[str, dict],
                   targets: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Run each config in its own directory (a checkout), in order, all sharing one
    between-workflow cache (`--cache`), up to the checkout's ``targets`` if given (else
    everything); return each run's output."""
    env = {**os.environ, "SNAKEMAKE_OUTPUT_CACHE": str(tmp_path / "cache")}
    (tmp_path / "cache").mkdir()
    outputs = {}
    for checkout, config in checkouts.items():
        (tmp_path / checkout).mkdir(exist_ok=True)
        (tmp_path / checkout / "config.yaml").write_text(yaml.safe_dump(config))
        result = subprocess.run(
            [*SNAKEMAKE, *(targets or {}).get(checkout, []),  # first: options take lists
             "--directory", str(tmp_path / checkout), "--configfile",
             str(tmp_path / checkout / "config.yaml"), "--cores", "2", "--cache"],
            capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        outputs[checkout] = result.stdout + result.stderr
    return outputs
