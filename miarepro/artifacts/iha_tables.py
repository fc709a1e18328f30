"""IHA's tables that are not a metric per attack: the threat models of the attacks (Table 1),
their pairwise decision agreement (Table 5) and their costs (Table 6)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from miarepro import io, metrics
from miarepro.artifacts import results as res
from miarepro.artifacts.builders import (
    _fit_cards,
    _markdown,
    _model_cards,
    scale_note,
    with_paper_dataset,
)
from miarepro.artifacts.catalog import paper_value, paper_values
from miarepro.artifacts.results import RESULTS, studies_of


def _write(prefix: str, table: pd.DataFrame, lines: list[str]) -> None:
    io.write_table(prefix + ".csv", table)
    io.write_text(prefix + ".md", "\n".join(lines) + "\n")


# --- Table 1: threat models ------------------------------------------------------------------

#: IHA Table 1 as printed: (access, reference models, leave-one-out knowledge), by family
PAPER_THREAT_MODELS = {
    "LOSS": ("marginal", "black-box", "no", "no"),
    "LiRA": ("lira", "black-box", "yes", "no"),
    "SIF": ("sif", "white-box", "no", "no"),
    "L-attack": ("l_attack", "black-box", "yes", "yes"),
    "LiRA-L": ("lira_l", "black-box", "yes", "yes"),
    "IHA": ("iha", "white-box", "no", "yes"),
}


def threat_models(name: str, settings: dict[str, Any], config: dict[str, Any],
                  prefix: str) -> None:
    """What each attack reads, from how its implementation is registered (white-box, reference
    models, leave-one-out models or the rest of the training set), beside the paper's table."""
    from miarepro.attacks import get_attack

    rows = []
    for label, (family, access, references, loo) in PAPER_THREAT_MODELS.items():
        spec = get_attack(family)
        ours = ("white-box" if spec.whitebox else "black-box",
                "yes" if spec.needs_references or spec.needs_loo else "no",
                "yes" if spec.needs_loo or spec.knows_training_set else "no")
        rows.append({"attack": label, "family": family, "access": ours[0],
                     "reference_models": ours[1], "leave_one_out_knowledge": ours[2],
                     "paper": " / ".join((access, references, loo)),
                     "matches_paper": ours == (access, references, loo)})
    table = pd.DataFrame(rows)
    _write(prefix, table, [
        f"# {name}: model access, reference models and leave-one-out knowledge", "",
        "Read from each attack's registration in `miarepro.attacks` (what the workflow hands "
        "it), beside IHA Table 1 (access / reference models / leave-one-out knowledge).", "",
        _markdown(table)])


# --- Table 5: decision agreement ---------------------------------------------------------------

GROUND_TRUTH = "ground_truth"


def agreement(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """How often two attacks make the same call at one FPR (IHA Table 5): above the diagonal
    on the members, below it on the non-members; the ground-truth column / row is each
    attack's TPR / TNR. Target 0 of each study, on the records every listed attack scored."""
    fpr = float(settings["fpr"])
    papers = paper_values(name)
    rows, lines = [], [f"# {name}: decision agreement at FPR {fpr:g}", "",
                       "Upper triangle: share of members on which the row and column attacks "
                       "agree; lower triangle: the same on non-members. Ground truth (GT): the "
                       "attack's TPR (upper) and TNR (lower). Each attack thresholds its own "
                       "scores at the lowest threshold whose FPR is at most the target FPR. "
                       "Ours (paper).", ""]
    for study in studies_of(settings, config):
        study_config = with_paper_dataset(config["studies"][study], settings)
        attacks = list(settings["attacks"])
        frames = [io.read_table(res.score_path(RESULTS, study, a)).query("target == 0")
                  .set_index("sample") for a in attacks]
        common = sorted(set.intersection(*(set(f.index) for f in frames)))
        member = frames[0].loc[common, "member"].to_numpy(dtype=bool)
        decisions = {a: metrics.decisions_at_fpr(member, f.loc[common, "score"].to_numpy(), fpr)
                     for a, f in zip(attacks, frames, strict=True)}
        decisions[GROUND_TRUTH] = member
        keys = {a: study_config["attacks"][a].get("paper_attack", a) for a in attacks}
        keys[GROUND_TRUTH] = GROUND_TRUTH
        names = [*attacks, GROUND_TRUTH]
        cells = {}
        for i, a in enumerate(names):
            for j, b in enumerate(names):
                if i == j:
                    continue
                group = member if i < j else ~member
                which = "members" if i < j else "nonmembers"
                ours = float(np.mean(decisions[a][group] == decisions[b][group]))
                paper = _paper_agreement(papers, study_config, keys[a], keys[b], fpr, which)
                rows.append({"study": study, "attack": a, "versus": b, "population": which,
                             "agreement": round(ours, 3), "paper": paper,
                             "n": int(group.sum())})
                cells[a, b] = f"{ours:.3f}" + (f" ({paper:.3f})" if paper is not None else "")
        labels = [study_config["attacks"][a].get("label", a) for a in attacks] + ["GT"]
        matrix = pd.DataFrame([[cells.get((a, b), "—") for b in names] for a in names],
                              columns=labels)
        matrix.insert(0, "", labels)
        lines += [f"## {study}", "", f"_{scale_note(config, study_config)}_", "",
                  f"{int(member.sum())} members and {int((~member).sum())} non-members.", "",
                  _markdown(matrix), ""]
    _write(prefix, pd.DataFrame(rows), lines)


def _paper_agreement(papers: pd.DataFrame, study_config: dict[str, Any], a: str, b: str,
                     fpr: float, which: str) -> float | None:
    """The paper's cell, in either orientation (agreement is symmetric)."""
    for row, column in ((a, b), (b, a)):
        value = paper_value(papers, study_config.get("paper_dataset"), row,
                            f"fpr={fpr:g};vs={column}", f"agreement_{which}")
        if value is not None:
            return value
    return None


# --- Table 6: costs ---------------------------------------------------------------------------

def _max_rss(path: str) -> float:
    return float(pd.read_csv(path, sep="\t")["max_rss"].iloc[0])


def attack_costs(name: str, settings: dict[str, Any], config: dict[str, Any],
                 prefix: str) -> None:
    """Precompute and per-record seconds and peak memory of each listed attack (IHA Table 6),
    as measured by this run: precompute is the attack's fit (IHA's Hessian) or the training of
    the reference models it uses (LiRA); memory is the peak resident size of those jobs."""
    papers = paper_values(name)
    rows = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        for attack in settings["attacks"]:
            entry = study_config["attacks"][attack]
            fits = [io.read_json(p) for p in _fit_cards(RESULTS, study, study_config, attack)[:1]]
            models = _model_cards(RESULTS, study, study_config, attack)
            trains = [io.read_json(p) for p in models]
            precompute = (sum(f["fit_seconds"] for f in fits)
                          + sum(t["train_seconds"] for t in trains))
            precompute_mb = max([f["peak_memory_mb"] for f in fits + trains] + [0.0])
            members, nonmembers = res.audit_size(RESULTS, study, attack)
            per_record = res.score_seconds(RESULTS, study, attack) / (members + nonmembers)
            runtime_mb = _max_rss(f"{RESULTS}/benchmarks/{study}/score-{attack}.tsv")
            key = entry.get("paper_attack", attack)
            ours = {"precompute_seconds": round(precompute, 2),
                    "seconds_per_sample": float(f"{per_record:.3g}"),
                    "precompute_memory_mb": round(precompute_mb),
                    "runtime_memory_mb": round(runtime_mb),
                    "peak_memory_mb": round(max(precompute_mb, runtime_mb))}
            rows.append({"study": study, "attack": entry.get("label", attack), **ours,
                         **{f"paper_{k}": paper_value(papers, "purchase100", key, "", k)
                            for k in ours}})
    table = pd.DataFrame(rows)
    _write(prefix, table, [
        f"# {name}: runtime and memory", "",
        "Measured by this run on its own device (2 CPU cores for the default configuration): "
        "precompute = the attack's fit (IHA: Hessian and eigendecomposition) or the training "
        "of the reference models it uses (LiRA), for one target; seconds per record = the "
        "attack's scoring time over the records it scored; memory = peak resident size of "
        "those jobs (the fit or training job; the scoring job). The paper's numbers (Purchase-"
        "100 MLP-2 on a GPU, 100 members) are beside, not comparable in absolute terms.", "",
        _markdown(table)])


def cost_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The usual inputs of the listed attacks and the cards of the models they train."""
    from miarepro.artifacts.builders import score_inputs

    files = score_inputs(results, settings, config)
    for study in studies_of(settings, config):
        for attack in settings["attacks"]:
            files += _model_cards(results, study, config["studies"][study], attack)
    return files
