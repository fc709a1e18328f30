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
    write_table_page,
)
from miarepro.artifacts.catalog import paper_value, paper_values
from miarepro.artifacts.registry import AUDIT_MINUTES
from miarepro.artifacts.results import RESULTS, studies_of

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
    write_table_page(prefix, table, f"{name}: model access, reference models and leave-one-out "
                     "knowledge", [
        "Read from each attack's registration in `miarepro.attacks` (what the workflow hands "
        "it), beside IHA Table 1 (access / reference models / leave-one-out knowledge)."])


# --- Table 5: decision agreement ---------------------------------------------------------------

GROUND_TRUTH = "ground_truth"


def member_agreement(member: np.ndarray, score_a: np.ndarray, score_b: np.ndarray,
                     fpr: float) -> float:
    """Share of the members on which two attacks, each at its own threshold for ``fpr``
    (:func:`~miarepro.metrics.decisions_at_fpr`), make the same call: the upper triangle of
    Table 5, which tells whether two attacks flag the same records, where their TPRs only say
    how many."""
    member = np.asarray(member, dtype=bool)
    same = (metrics.decisions_at_fpr(member, score_a, fpr)
            == metrics.decisions_at_fpr(member, score_b, fpr))
    return float(same[member].mean())


def paper_agreement(papers: pd.DataFrame, dataset: str | None, a: str, b: str, fpr: float,
                    population: str = "members", model: str | None = None) -> float | None:
    """The paper's agreement of attacks ``a`` and ``b`` at ``fpr`` on ``population`` (members
    or nonmembers: the upper or lower triangle), printed in either orientation (agreement is
    symmetric)."""
    for row, column in ((a, b), (b, a)):
        value = paper_value(papers, dataset, row, f"fpr={fpr:g};vs={column}",
                            f"agreement_{population}", model)
        if value is not None:
            return value
    return None


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
                paper = paper_agreement(papers, study_config.get("paper_dataset"), keys[a],
                                        keys[b], fpr, which)
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
    io.write_table(prefix + ".csv", pd.DataFrame(rows))
    io.write_text(prefix + ".md", "\n".join(lines) + "\n")


# --- Table 6: costs ---------------------------------------------------------------------------

#: IHA §4.1 trains 128 models, so each target has 127 reference models: LiRA's precompute in
#: Table 6 trains them
PAPER_REFERENCES = 127
#: §4.5.1: "computing the audit for 1K samples takes less overall time for IHA (~1 hour) than it
#: does for LiRA (~3 hours)": Table 6's precompute plus a thousand times its time per sample
AUDIT_RECORDS = 1000


def _costs(study: str, study_config: dict[str, Any], attack: str) -> dict[str, float]:
    """Table 6's columns of one attack instance, in seconds and MB, and ``audit_seconds``: the
    seconds of an audit of :data:`AUDIT_RECORDS` records at the paper's reference count.

    Precompute is what does not depend on the audited records: the attack's fit (IHA's Hessian
    and eigendecomposition) or the training of the reference models it uses (LiRA). The exact
    IHA fit also projects every audited record's gradient onto the eigenbasis; that is work per
    record, so it counts in the time per record, as the paper's time per sample does.
    """
    cards = _fit_cards(RESULTS, study, study_config, attack)[:1]
    fits = [io.read_json(path) for path in cards]
    trains = [io.read_json(path) for path in _model_cards(RESULTS, study, study_config, attack)]
    projection = sum(f["info"].get("projection_seconds", 0.0) for f in fits)
    projected = sum(len(io.read_arrays(path.removesuffix(".json") + ".npz", ["audit"])["audit"])
                    for path, f in zip(cards, fits, strict=True)
                    if "projection_seconds" in f["info"])
    members, nonmembers = res.audit_size(RESULTS, study, attack)
    per_record = (res.score_seconds(RESULTS, study, attack) / (members + nonmembers)
                  + (projection / projected if projected else 0.0))
    references = [t["train_seconds"] for t in trains if t["role"] == "reference"]
    own = (sum(f["fit_seconds"] for f in fits) - projection
           + sum(t["train_seconds"] for t in trains if t["role"] != "reference"))
    at_paper = own + (np.mean(references) * PAPER_REFERENCES if references else 0.0)
    precompute_mb = max([f["peak_memory_mb"] for f in fits + trains] + [0.0])
    runtime_mb = res.score_memory_mb(RESULTS, study, attack)
    return {"precompute_seconds": own + sum(references),
            "seconds_per_sample": per_record, "precompute_memory_mb": precompute_mb,
            "runtime_memory_mb": runtime_mb, "peak_memory_mb": max(precompute_mb, runtime_mb),
            "audit_seconds": at_paper + AUDIT_RECORDS * per_record}


def audit_minutes(study: str, study_config: dict[str, Any], attack: str) -> float:
    """Minutes of an audit of a thousand records, the precompute at the paper's 127 reference
    models (what IHA's cost claim compares: our studies train fewer)."""
    return _costs(study, study_config, attack)["audit_seconds"] / 60


def attack_costs(name: str, settings: dict[str, Any], config: dict[str, Any],
                 prefix: str) -> None:
    """Precompute and per-record seconds and peak memory of each listed attack (IHA Table 6),
    as measured by this run, and the minutes of a thousand-record audit that §4.5.1 compares
    (:func:`_costs`)."""
    papers = paper_values(name)
    rows = []
    for study in studies_of(settings, config):
        study_config = with_paper_dataset(config["studies"][study], settings)
        for attack in settings["attacks"]:
            entry = study_config["attacks"][attack]
            costs = _costs(study, study_config, attack)
            ours = {"precompute_seconds": round(costs["precompute_seconds"], 2),
                    "seconds_per_sample": float(f"{costs['seconds_per_sample']:.3g}"),
                    **{key: round(costs[key]) for key in
                       ("precompute_memory_mb", "runtime_memory_mb", "peak_memory_mb")},
                    AUDIT_MINUTES: round(costs["audit_seconds"] / 60, 2)}
            key = entry.get("paper_attack", attack)
            rows.append({"study": study, "attack": entry.get("label", attack), **ours,
                         **{f"paper_{k}": paper_value(papers, study_config.get("paper_dataset"),
                                                      key, "", k) for k in ours}})
    table = pd.DataFrame(rows)
    write_table_page(prefix, table, f"{name}: runtime and memory", [
        "Measured by this run on its own device (2 CPU cores for the default configuration): "
        "precompute = the attack's fit (IHA: Hessian and eigendecomposition) or the training "
        "of the reference models it uses (LiRA), for one target; seconds per record = the "
        "attack's scoring time over the records it scored (reading its fit and loading the "
        "target, torch's import included, left out), plus, for the exact IHA, its fit's "
        "projection of each audited record's gradient; memory = peak resident size of "
        "those jobs (the fit or training job; the scoring job). The paper's numbers (Purchase-"
        "100 MLP-2 on a GPU, 100 members) are beside, not comparable in absolute terms.", "",
        f"`{AUDIT_MINUTES}`: an audit of {AUDIT_RECORDS:,} records, precompute plus "
        f"{AUDIT_RECORDS:,} times the time per record, with LiRA's reference models scaled to "
        f"the paper's {PAPER_REFERENCES} (the mean of ours times {PAPER_REFERENCES}); the "
        "paper's are its text's \"about 1 hour\" (IHA) and \"about 3 hours\" (LiRA)."],
        config, studies_of(settings, config))


def cost_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The usual inputs of the listed attacks and the cards of the models they train."""
    from miarepro.artifacts.builders import regime_inputs, score_inputs

    files = score_inputs(results, settings, config) + regime_inputs(results, settings, config)
    for study in studies_of(settings, config):
        for attack in settings["attacks"]:
            files += cost_files(results, study, config["studies"][study], attack)
    return files


def cost_files(results: str, study: str, study_config: dict[str, Any], attack: str) -> list[str]:
    """What one attack instance's costs read beyond its metrics (:func:`_costs`): the card and
    arrays of its first fit and the cards of the models it uses."""
    fits = _fit_cards(results, study, study_config, attack)[:1]
    return [*fits, *(path.removesuffix(".json") + ".npz" for path in fits),
            *_model_cards(results, study, study_config, attack)]
