"""Artifact builders: each turns attack scores of some studies into one table or figure.

A config entry ``artifacts: {NAME: {builder: B, ...settings}}`` asks builder ``B`` for artifact
``NAME``; paper artifacts use their checklist ID as NAME (e.g. ``BMIA-T1``). Tables are written
as ``NAME.csv`` (long, machine-readable, with the paper's value beside ours) and ``NAME.md``;
figures as ``NAME.png`` and ``NAME.pdf``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from miarepro import io, uncertainty
from miarepro.artifacts import results as res
from miarepro.artifacts.catalog import (
    contradictions,
    for_model,
    implemented,
    paper_number,
    paper_value,
    stated_not_measured,
)
from miarepro.artifacts.regime import regime_markdown, regime_rows
from miarepro.artifacts.registry import BUILDERS, COMPUTE
from miarepro.artifacts.results import RESULTS, studies_of, studies_read
from miarepro.metrics import metric_name
from miarepro.paths import model_home, reference_home


def inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """What an artifact reads: per attack its metrics (and its scores where it draws them),
    and the cards of the targets where it shows their regime."""
    builder = BUILDERS[settings["builder"]]
    if builder.inputs is not None:
        return builder.inputs(results, settings, config)
    return score_inputs(results, settings, config, builder.regime, builder.replicates,
                        builder.scores)


def score_inputs(results: str, settings: dict[str, Any], config: dict[str, Any],
                 regime: bool = False, replicates: bool = False,
                 scores: bool = False) -> list[str]:
    """The files of :func:`inputs` for the attacks an artifact reads (and, with ``regime``,
    the regime's baseline; with ``replicates``, in every replicate of its studies)."""
    files = [path for study, study_config in
             studies_read(settings, config, regime, replicates).items()
             for path in study_inputs(results, study, study_config, regime, scores)]
    return sorted(set(files), key=files.index)


def regime_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]
                  ) -> list[str]:
    """What a table's regime section reads (:func:`write_table_page`): each study's target
    cards and its regime baseline's metrics."""
    files = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        baseline = study_config.get("regime", {}).get("baseline")
        files += [str(res.metrics_path(results, study, baseline))] if baseline else []
        files += [str(res.target_card(results, model_home(study, study_config), t))
                  for t in range(study_config["targets"])]
    return files


def study_inputs(results: str, study: str, study_config: dict[str, Any],
                 regime: bool = True, scores: bool = False) -> list[str]:
    """What reading ``study_config``'s attacks takes: each one's metrics (which also hold the
    seconds of its models and fits) and the cards of fits that check themselves
    (:func:`miarepro.artifacts.results.failed_fit`), with ``scores`` its scores too, and with
    ``regime`` the cards of the study's targets, whose accuracies place it against the paper's
    setting. Only what is read: each input of each artifact costs every dry run time."""
    files = []
    for attack in study_config["attacks"]:
        files += [str(res.score_path(results, study, attack))] if scores else []
        files.append(str(res.metrics_path(results, study, attack)))
        files += res.checked_fit_cards(results, study, study_config, attack)
    home = model_home(study, study_config)
    return files + [str(res.target_card(results, home, t))
                    for t in range(study_config["targets"]) if regime]


def scale_note(config: dict[str, Any], study: dict[str, Any]) -> str:
    if config["scale"] == "paper" and not study["deviations"]:
        return "paper settings"
    return "scaled-down proxy: " + ("; ".join(study["deviations"]) or "miniature settings")


def deviation_notes(config: dict[str, Any], studies: list[str]) -> list[str]:
    """Markdown bullets of the studies' deviations, each said once: those several studies
    share (their replicates, a variant of a reference attack) under all of them, first, then
    each study's own. A page of three studies of one paper had repeated a shared line per
    study."""
    sharing: dict[str, list[str]] = {}  # deviation -> the listed studies that make it
    for study in dict.fromkeys(studies):
        for deviation in dict.fromkeys(config["studies"][study]["deviations"]):
            sharing.setdefault(deviation, []).append(study)
    groups: dict[tuple[str, ...], list[str]] = {}
    for deviation, holders in sharing.items():
        groups.setdefault(tuple(holders), []).append(deviation)
    shared = sorted((g for g in groups if len(g) > 1), key=len, reverse=True)

    def named(group: tuple[str, ...]) -> str:
        return ", ".join(f"**{study}** ({config['studies'][study].get('paper_dataset', '?')})"
                         for study in group)

    lines = [f"- {named(group)}: " + scale_note(config, {"deviations": groups[group]})
             for group in shared]
    for study in dict.fromkeys(studies):
        own = groups.get((study,), [])
        text = (scale_note(config, {"deviations": own}) if own or not any(
            study in group for group in shared) else "scaled-down proxy: as above")
        lines.append(f"- {named((study,))}: {text}")
    return lines


INTERVAL_NOTE = ("Intervals are 95%: Student-t over target models where a study has at least "
                 f"{uncertainty.MIN_TARGETS} repetitions (a partition split's targets; those of a "
                 "balanced split share their pool and count as one run), else a stratified "
                 "bootstrap over audited samples "
                 f"({'{bootstrap}'} replicates). **n/r**: the audit cannot resolve the metric "
                 f"(fewer than {uncertainty.MIN_EXCEEDANCES}/FPR non-members, for a decision "
                 f"calibrated at level a fewer than {uncertainty.MIN_EXCEEDANCES}/(1 - a), or "
                 "fewer than "
                 f"{uncertainty.MIN_PER_CLASS} members or non-members per target).")


def with_paper_dataset(study: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    """The study as an artifact reads it: with the artifact's ``paper_dataset``, where the
    miniature runs that table on a stand-in for another dataset (IHA Tables 4, 5 and 9)."""
    if "paper_dataset" in settings:
        return {**study, "paper_dataset": settings["paper_dataset"]}
    return study


def interval_note(config: dict[str, Any]) -> str:
    return INTERVAL_NOTE.replace("{bootstrap}", str(config["metrics"]["bootstrap"]))


# --- leaderboard ----------------------------------------------------------------------------

def leaderboard(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """Every attack on every study: AUC, TPR@FPR with intervals, and the compute each needed.

    Within a study, rows whose ranking metric (TPR at the largest FPR) the audit can resolve
    come first, by that metric; rows scored on too few records follow, never above them.
    """
    fprs = tuple(settings.get("fprs", config["metrics"]["fprs"]))
    ranking = metric_name("tpr", max(fprs))
    shown_metrics = ["auc", *[metric_name("tpr", f) for f in fprs]]
    frames = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        table = res.study_metrics(RESULTS, study, study_config, shown_metrics)
        table["compute_seconds"] = [compute_seconds(RESULTS, study, attack, study_config)
                                    for attack in table["attack"]]
        table["paper_dataset"] = study_config.get("paper_dataset")
        table[f"paper_{ranking}"] = [
            paper_number(study_config["paper"], study_config.get("paper_dataset"),
                         row.paper_attack, row.paper_setting, ranking,
                         study_config.get("paper_model"))
            for row in table.itertuples()]
        table["scale"] = scale_note(config, study_config)
        frames.append(table.sort_values([f"{ranking}_resolvable", ranking],
                                        ascending=[False, False], na_position="last"))
    board = pd.concat(frames, ignore_index=True)
    io.write_table(prefix + ".csv", board)
    lines = [f"# {name}: all attacks on the same targets", "",
             "TPR in %, AUC as a fraction (mean over targets) with 95% intervals. Rows are "
             f"ranked by {ranking}; rows the audit cannot resolve come last. Compute = training "
             "seconds of the reference and leave-one-out models an attack uses, its fit and its "
             "scoring, for one target. Paper values are those of the paper each study "
             "reproduces, for the dataset it stands in for.", "", interval_note(config), "",
             "## Regime", "",
             *regime_markdown(regime_rows(config, studies_of(settings, config))), ""]
    for study, group in board.groupby("study", sort=False):
        shown = pd.DataFrame({
            "attack": group["label"], "n_reference": group["n_reference"],
            "members / non-members": [f"{a} / {b}" for a, b in
                                      zip(group["n_members"], group["n_nonmembers"],
                                          strict=True)],
            **{metric: [res.format_estimate(row, metric) for _, row in group.iterrows()]
               for metric in shown_metrics},
            f"paper {ranking}": group[f"paper_{ranking}"],
            "compute s": group["compute_seconds"]})
        lines += [f"## {study}", "", f"_{group['scale'].iloc[0]}_", "", _markdown(shown), ""]
    io.write_text(prefix + ".md", "\n".join(lines))


def _models_used(study_config: dict[str, Any], attack_name: str, target: int = 0
                 ) -> list[tuple[str, int]]:
    """Attack-side models a target's attack needs: its references and leave-one-out models
    (those of target 0: the only one that has them)."""
    from miarepro.paths import loo_model_indices
    from miarepro.splits import reference_indices

    attack = study_config["attacks"][attack_name]
    references = reference_indices(study_config["split"]["scheme"], target,
                                   attack.get("n_reference", 0))
    loo = loo_model_indices(attack.get("loo_records", 0), attack.get("loo_models", 0))
    return [("reference", i) for i in references] + [("loo", i) for i in loo]


def _model_cards(results: str, study: str, study_config: dict, attack: str,
                 target: int = 0) -> list[str]:
    """Cards of the attack-side models of :func:`_models_used`, wherever they live."""
    homes = {"reference": reference_home(study, study_config, study_config["attacks"][attack]),
             "loo": model_home(study, study_config)}
    return [f"{results}/studies/{homes[role]}/models/{role}/{index}.json"
            for role, index in _models_used(study_config, attack, target)]


def _fit_cards(results: str, study: str, study_config: dict, attack: str) -> list[str]:
    from miarepro.paths import fit_paths

    return [f"{path}.json" for path in fit_paths(results, study, study_config,
                                                   study_config["attacks"][attack])]


def compute_seconds(results: str, study: str, attack: str, study_config: dict) -> float:
    """Seconds an attack needs for one target: training the models it uses and its fit, plus
    scoring one target; in a partition study the mean over its repetitions, each with its own
    models and fit (:func:`target_compute_seconds`), else those of target 0 and the mean
    scoring over targets.

    The score job's wall time would not do: it scores every target of the study and includes
    starting Python, so it counted BMIA's sampling five times against one reference model."""
    if has_repetitions(study_config):
        seconds = target_compute_seconds(results, study, attack, study_config)
        return round(sum(seconds) / len(seconds), 2)
    costs = res.target_seconds(results, study, attack)
    return round(costs["score_seconds"].mean() + costs["model_seconds"].iloc[0]
                 + costs["fit_seconds"].iloc[0], 2)


def has_repetitions(study_config: dict) -> bool:
    """Whether a study's targets are repetitions, each with its own partition, reference
    models and fits."""
    return (study_config.get("split", {}).get("scheme") == "partition"
            and study_config.get("targets", 1) > 1)


def target_compute_seconds(results: str, study: str, attack: str, study_config: dict
                           ) -> list[float]:
    """:func:`compute_seconds` of each target of a partition study, from that repetition's
    own reference models, fit and scoring: as many timings of the same work, each made apart,
    as the study has repetitions."""
    costs = res.target_seconds(results, study, attack)
    return (costs["score_seconds"] + costs["model_seconds"] + costs["fit_seconds"]).tolist()


def write_table_page(prefix: str, table: pd.DataFrame, title: str, intro: list[str],
                     config: dict[str, Any] | None = None, studies: list[str] = ()) -> None:
    """``prefix.csv`` and ``prefix.md``: a title, the ``intro`` lines and the table, then, for
    a table of ``studies``, where their targets sit against the papers' (the regime) and
    their deviations: a paper's number beside ours is read with both, as in every paper
    table."""
    io.write_table(prefix + ".csv", table)
    about = ([] if not studies else
             ["## Regime", "", *regime_markdown(regime_rows(config, list(studies))), "",
              "## Deviations", "", *deviation_notes(config, list(studies)), ""])
    io.write_text(prefix + ".md", "\n".join([f"# {title}", "", *intro, "", _markdown(table), "",
                                             *about]))


def _markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


# --- paper tables ---------------------------------------------------------------------------

def paper_table(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """A paper's table: our value and 95% interval beside the paper's for each cell.

    Rows come from the attacks of the listed studies that name a ``paper_attack``; the paper's
    value is looked up in ``paper_values.csv`` by artifact, the study's ``paper_dataset``, the
    attack and its ``paper_setting``. Percent metrics are reported in percent, like the papers.
    A regime section shows where each study's target sits against the paper's setting.
    ``default_setting`` is the paper's setting that instances without a ``paper_setting``
    stand for (IHA Table 8: damping 0.2, the setting of the main results); ``attacks`` keeps
    only those instances; ``paper_dataset`` shows the paper's numbers for that dataset where
    the miniature runs a table on a stand-in for another one (IHA Tables 4 and 9).
    """
    from miarepro.artifacts.catalog import paper_values

    papers = paper_values(name)
    metrics = list(settings["metrics"])
    studies = studies_of(settings, config)
    default = settings.get("default_setting", "")
    labels = _paper_labels(config)
    rows = []
    for study in studies:
        study_config = with_paper_dataset(config["studies"][study], settings)
        table = res.study_metrics(RESULTS, study, study_config,
                                  [m for m in metrics if m != COMPUTE])
        if "attacks" in settings:
            table = table[table["attack"].isin(settings["attacks"])]
        for row in table[table["paper_attack"].notna()].to_dict("records"):
            if pd.isna(row["paper_setting"]) or not row["paper_setting"]:
                row["paper_setting"] = default
            label = row["label"]
            if why := res.failed_fit(RESULTS, study, study_config, row["attack"]):
                label += f" (its generator fell short, {why}: no claim reads it)"
            if COMPUTE in metrics:  # minutes of the models and fit the attack needs, no CI
                minutes = compute_seconds(RESULTS, study, row["attack"], study_config) / 60
                row.update({COMPUTE: minutes, f"{COMPUTE}_low": minutes,
                            f"{COMPUTE}_high": minutes, f"{COMPUTE}_resolvable": True})
            for metric in metrics:
                scale = uncertainty.percent_scale(metric, study_config["paper"])
                keys = (papers, study_config.get("paper_dataset"), row["paper_attack"],
                        row["paper_setting"], metric, study_config.get("paper_model"))
                spread, targets = ((float("nan"), 0) if metric == COMPUTE else
                                   res.target_spread(RESULTS, study, row["attack"], metric))
                rows.append({
                    "artifact": name, "paper_dataset": study_config.get("paper_dataset"),
                    "study": study, "attack": label, "paper_attack": row["paper_attack"],
                    "setting": row["paper_setting"], "metric": metric,
                    "ours": scale * row[metric], "ours_low": scale * row[f"{metric}_low"],
                    "ours_high": scale * row[f"{metric}_high"],
                    "resolvable": row[f"{metric}_resolvable"], "interval": row["interval"],
                    "n_members": row["n_members"], "n_nonmembers": row["n_nonmembers"],
                    "paper": paper_value(*keys),
                    # seed noise: ours over target models beside the paper's printed ±
                    "ours_sd": scale * spread, "targets": targets,
                    "paper_sd": paper_value(*keys, column="std"),
                    "scale": scale_note(config, study_config),
                    "ours_text": (f"{row[metric]:.2f}" if metric == COMPUTE
                                  else res.format_estimate(row, metric, study_config["paper"])),
                })
        rows += _rows_not_run(name, papers, study, study_config, settings, default, labels)
    table = pd.DataFrame(rows)
    io.write_table(prefix + ".csv", table.drop(columns="ours_text"))
    noisy = set(table.loc[table["paper_sd"].notna(), "metric"]) if "paper_sd" in table else set()
    wide = pd.DataFrame([
        {"study": key[0], "attack": key[1],
         "members / non-members": f"{key[2]} / {key[3]}" if key[2] else "—",
         **{f"{row['metric']} ({who})": row[column] for row in group.to_dict("records")
            for who, column in (("ours", "ours_text"), ("paper", "paper"))},
         **{f"{row['metric']} sd over targets (ours / paper)": _seed_noise(row)
            for row in group.to_dict("records") if row["metric"] in noisy}}
        for key, group in table.groupby(["study", "attack", "n_members", "n_nonmembers"],
                                        sort=False)])
    notes = deviation_notes(config, studies)
    auc_unit = ("in %" if uncertainty.percent_scale("auc", config["studies"][studies[0]]["paper"])
                == 100 else "as a fraction")
    lines = [f"# {name}", "", f"Ours beside the paper's value; TPR and precision in %, AUC "
             f"{auc_unit}."
             + (f" {COMPUTE}: minutes to train the reference models an attack uses, plus (ours "
                "only) its fit and its scoring of one target, on the device of the run; the "
                "paper's are GPU minutes of training alone."
                if COMPUTE in metrics else "")
             + (" *sd over targets*: the metric's standard deviation over the study's target "
                "models beside the ± the paper prints (its seed noise, over its own targets); "
                "with 2 targets ours is a rough figure, with 1 there is none."
                if noisy else ""),
             interval_note(config), "", "## Regime", "",
             *regime_markdown(regime_rows(config, studies)), "", "## Results", "", *notes, "",
             _markdown(wide), ""]
    if stated := stated_not_measured(name):
        lines += ["## Values the paper states, not measures", "", "The paper column holds, "
                  "for these, what the paper derives rather than a number it measured:", "",
                  *stated, ""]
    if doubts := contradictions(name):
        lines += ["## Cells the paper contradicts", "", "The paper column copies each number "
                  "as printed; the paper contradicts these elsewhere (another table, a "
                  "duplicated cell, a series that does not add up; the anomaly's number in "
                  "the reproduction matrix in brackets):", "", *doubts, ""]
    io.write_text(prefix + ".md", "\n".join(lines))


def _seed_noise(row: dict[str, Any]) -> str:
    """``0.004 (2 targets) / 0.004``: the spread of a metric over our target models beside the
    ± the paper prints (over its own targets), where either exists."""
    targets = row.get("targets")
    if pd.isna(targets) or not targets:  # a paper row this run does not reproduce
        return "—"
    ours = (f"{row['ours_sd']:.3g} ({int(targets)} targets)" if pd.notna(row["ours_sd"])
            else f"— ({int(targets)} target{'' if targets == 1 else 's'})")
    paper = row.get("paper_sd")
    return f"{ours} / {'—' if paper is None or pd.isna(paper) else f'{paper:g}'}"


def _paper_labels(config: dict[str, Any]) -> dict[tuple[str, str], str]:
    """``(paper attack, paper setting) -> label`` of the first instance anywhere in the config
    that reproduces that row of a paper; ``(paper attack, "*")``: the first label of any
    instance of it, without its bracketed setting ("LiRA" of "LiRA (n=8)")."""
    labels: dict[tuple[str, str], str] = {}
    for study_config in config["studies"].values():
        for attack in study_config["attacks"].values():
            if attack.get("paper_attack") and "label" in attack:
                key = attack["paper_attack"]
                labels.setdefault((key, attack.get("paper_setting") or ""), attack["label"])
                labels.setdefault((key, "*"), attack["label"].split(" (")[0])
    return labels


def _rows_not_run(name: str, papers: pd.DataFrame, study: str, study_config: dict[str, Any],
                  settings: dict[str, Any], default: str = "",
                  labels: dict[tuple[str, str], str] | None = None) -> list[dict[str, Any]]:
    """The paper's rows for the study's dataset that none of its attack instances reproduces,
    with the paper's numbers and why ours are missing, so a table never hides a row. A row is
    named as another study's instance of it names it (``labels``), else by its paper keys."""
    dataset, metrics = study_config.get("paper_dataset"), settings["metrics"]
    shown = settings.get("attacks", list(study_config["attacks"]))
    done = {(a.get("paper_attack"), a.get("paper_setting") or default)
            for name, a in study_config["attacks"].items() if name in shown}
    papers = for_model(papers, study_config.get("paper_model"))
    labels = labels or {}
    printed = papers[(papers["dataset"] == dataset) & papers["metric"].isin(metrics)]
    rows = []
    for (attack, setting), group in printed.groupby(["attack", "setting"], sort=False):
        if (attack, setting) in done:
            continue
        why = "not run in this study" if implemented(attack) else "not implemented yet"
        values = dict(zip(group["metric"], group["value"], strict=True))
        base = labels.get((attack, "*"), attack)
        label = labels.get((attack, setting or ""), f"{base} ({setting})" if setting else base)
        rows += [{"artifact": name, "paper_dataset": dataset, "study": study,
                  "attack": label,
                  "paper_attack": attack, "setting": setting, "metric": metric,
                  "ours": float("nan"), "resolvable": False, "n_members": 0,
                  "n_nonmembers": 0, "paper": values.get(metric), "ours_text": why}
                 for metric in metrics]
    return rows




def build(name: str, settings: dict[str, Any], config: dict[str, Any], output: str) -> None:
    prefix = str(Path(output).with_suffix(""))
    BUILDERS[settings["builder"]].build(name, settings, config, prefix)
