"""Tables about the models rather than the attacks' scores: target accuracies (QMIA Table 3),
the attack-side hyperparameter searches (Tables 4 and 5) and fit costs (QMIA's compute text).

They read model and fit cards only, so they rebuild when those change, not when scoring does.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from miarepro import io, quantile
from miarepro.artifacts import results as res
from miarepro.artifacts.builders import regime_inputs, write_table_page
from miarepro.artifacts.catalog import for_model, paper_value, paper_values
from miarepro.artifacts.results import RESULTS, studies_of
from miarepro.paths import reference_home


def _fit_card(results: str, study: str, study_config: dict[str, Any], attack: str,
              target: int = 0) -> str:
    from miarepro.paths import fit_paths

    paths = fit_paths(results, study, study_config, study_config["attacks"][attack])
    if not paths:
        raise ValueError(f"attack {attack!r} of study {study!r} has no fit")
    return f"{paths[target]}.json"


# --- inputs ---------------------------------------------------------------------------------

def accuracy_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    return regime_inputs(results, settings, config)  # the target cards, and its section


def fit_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The fit cards of the listed attacks (target 0), and the reference model cards the cost
    table compares them with."""
    files = []
    for study, study_config, attack in res.listed_attacks(settings, config):
        files.append(_fit_card(results, study, study_config, attack))
        if settings["builder"] == "fit_costs":
            files.append(_reference_card(results, study, study_config, attack))
    return list(dict.fromkeys(files + regime_inputs(results, settings, config)))


def _reference_card(results: str, study: str, study_config: dict[str, Any], attack: str) -> str:
    home = reference_home(study, study_config, study_config["attacks"][attack])
    return f"{results}/studies/{home}/models/reference/0.json"


# --- QMIA Table 3: target accuracies --------------------------------------------------------

def accuracy_table(name: str, settings: dict[str, Any], config: dict[str, Any],
                   prefix: str) -> None:
    """Each study's target accuracies (mean over targets) beside the paper's test accuracy
    for the model and dataset it stands in for."""
    papers = paper_values(name)
    rows = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        regime = res.regime(RESULTS, study, study_config)
        model = study_config.get("paper_model")
        paper = {metric: paper_value(for_model(papers, model), study_config.get("paper_dataset"),
                                     "", "", metric) if not papers.empty else None
                 for metric in ("train_acc", "test_acc")}
        rows.append({"study": study, "paper_dataset": study_config.get("paper_dataset"),
                     "paper_model": model, "model": json.dumps(study_config["model"]),
                     "train_acc": round(100 * regime["train_accuracy"], 1),
                     "paper_train_acc": paper["train_acc"],
                     "test_acc": round(100 * regime["test_accuracy"], 1),
                     "paper_test_acc": paper["test_acc"]})
    table = pd.DataFrame(rows)
    if table["paper_train_acc"].isna().all():  # most papers print test accuracy only
        table = table.drop(columns="paper_train_acc")
    write_table_page(prefix, table, f"{name}: target accuracy (%)",
           ["Train and test accuracy of each study's target models (mean over targets), beside "
            "the paper's for the model it stands in for."], config, studies_of(settings, config))


# --- QMIA Tables 4 and 5: search spaces and chosen values -----------------------------------

#: how the paper prints a range that is drawn otherwise here: Table 5's depth is "uniform(1,10)",
#: drawn as an integer, a tree's depth being one
PAPER_WORDING = {"depth": "uniform(1, 10)"}


def _describe(spec: dict[str, Any]) -> str:
    if "choices" in spec:
        return "choice(" + ", ".join(json.dumps(c) for c in spec["choices"]) + ")"
    kind = "loguniform" if spec.get("log") else (
        "randint" if isinstance(spec["low"], int) else "uniform")
    step = f", step={spec['step']}" if "step" in spec else ""
    return f"{kind}({spec['low']:g}, {spec['high']:g}{step})"


def search_table(name: str, settings: dict[str, Any], config: dict[str, Any],
                 prefix: str) -> None:
    """The search space of each listed fit, the values its search chose and what the trials
    did, read from the fit card (target 0) where the trial log is saved."""
    rows, notes = [], []
    for study, study_config, attack in res.listed_attacks(settings, config):
        card = io.read_json(_fit_card(RESULTS, study, study_config, attack))
        search = card["info"].get("search")
        if search is None:
            raise ValueError(f"{name}: attack {attack!r} of study {study!r} runs no search "
                             "(give it trials > 0)")
        states = pd.Series([t["state"] for t in search["trials"]]).value_counts()
        notes.append(f"- **{study} / {attack}**: {len(search['trials'])} trials ("
                     + ", ".join(f"{n} {s.lower()}" for s, n in states.items())
                     + f"), best validation pinball loss {search['validation_loss']:.4g} "
                     f"on {search['n_validation']} held-out public records; fit "
                     f"{card['fit_seconds']:.1f} s")
        paper = quantile.default_space(card["info"]["backbone"])
        for key, spec in search["space"].items():
            chosen = search["chosen"][key]
            rows.append({"study": study, "attack": attack, "hyperparameter": key,
                         "configuration": _describe(spec),
                         "paper": (PAPER_WORDING.get(key, _describe(paper[key]))
                                   if key in paper else ""),
                         "chosen": json.dumps(chosen) if not isinstance(chosen, float)
                         else f"{chosen:.3g}"})
    write_table_page(prefix, pd.DataFrame(rows), f"{name}: hyperparameter search",
           ["Search space as configured (optuna TPE sampler, successive-halving pruner) beside "
            "the paper's (Table 4 for neural regressors, Table 5 for CatBoost), and the values "
            "the search chose. Trials are scored on a held-out share of the "
            "attacker's public data, never on the audited members or non-members.", "",
            *notes], config, studies_of(settings, config))


# --- QMIA compute text: fit seconds with and without a search --------------------------------

def fit_costs(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """Seconds of each listed fit (target 0) against one reference model's training seconds,
    the paper's claim that QMIA costs about one shadow model; the paper's GPU minutes beside."""
    papers = paper_values(name)
    rows = []
    for study, study_config, attack in res.listed_attacks(settings, config):
        card = io.read_json(_fit_card(RESULTS, study, study_config, attack))
        reference = io.read_json(_reference_card(RESULTS, study, study_config, attack))
        searched = "search" in card["info"]
        trials = len(card["info"]["search"]["trials"]) if searched else 0
        paper = paper_value(papers, study_config.get("paper_dataset"), "qmia",
                            "training+hpo" if searched else "training", "gpu_minutes")
        rows.append({
            "study": study, "attack": attack, "search_trials": trials,
            "fit_seconds": card["fit_seconds"], "device": reference.get("device", "?"),
            "reference_train_seconds": reference["train_seconds"],
            "fit_per_reference_model": round(card["fit_seconds"]
                                             / reference["train_seconds"], 2),
            "paper_gpu_minutes": np.nan if paper is None else paper})
    write_table_page(prefix, pd.DataFrame(rows), f"{name}: cost of the quantile regressor",
           ["Fit seconds of the attack's own model (target 0; with a search: all trials) and "
            "the training seconds of one reference model of the same study, on the device of "
            "this run. QMIA claims its regressor costs about one shadow model; the paper's "
            "GPU minutes per attack (training, or training plus search) for the study's paper "
            "dataset are shown beside (it prints none for tabular data)."],
           config, studies_of(settings, config))
