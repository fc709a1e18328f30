"""Artifact builders: each turns attack scores of some studies into one table or figure.

A config entry ``artifacts: {NAME: {builder: B, ...settings}}`` asks builder ``B`` for artifact
``NAME``; paper artifacts use their checklist ID as NAME (e.g. ``BMIA-T1``). Tables are written
as ``NAME.csv`` (long, machine-readable, with the paper's value beside ours) and ``NAME.md``;
figures as ``NAME.png`` and ``NAME.pdf``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from miarepro import io
from miarepro.artifacts import results as res
from miarepro.artifacts.results import RESULTS

SUFFIXES = {"table": (".csv", ".md"), "figure": (".png", ".pdf")}


@dataclass(frozen=True)
class Builder:
    kind: str
    build: Callable[[str, dict[str, Any], dict[str, Any], str], None]
    description: str

    def outputs(self, results: str, name: str, config: dict[str, Any]) -> list[str]:
        return [f"{results}/artifacts/{name}{suffix}" for suffix in SUFFIXES[self.kind]]


def studies_of(settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The studies an artifact reads: its ``studies`` setting, or every study."""
    return list(settings.get("studies", config["studies"]))


def inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """Score files (and score benchmarks, for compute columns) of the artifact's studies."""
    files = []
    for study in studies_of(settings, config):
        for attack in config["studies"][study]["attacks"]:
            files.append(str(res.score_path(results, study, attack)))
            files.append(f"{results}/benchmarks/{study}/score-{attack}.tsv")
        study_config = config["studies"][study]
        files += [_card(results, study, role, i) for attack in study_config["attacks"]
                  for role, i in _models_used(study_config, attack)]
    return files


def scale_note(config: dict[str, Any], study: dict[str, Any]) -> str:
    if config["scale"] == "paper" and not study["deviations"]:
        return "paper settings"
    return "scaled-down proxy: " + ("; ".join(study["deviations"]) or "miniature settings")


# --- leaderboard ----------------------------------------------------------------------------

def leaderboard(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """Every attack on every study: AUC, TPR@0.1%/1% and the compute each attack needed."""
    from miarepro.artifacts.catalog import paper_values

    fprs = tuple(settings.get("fprs", res.DEFAULT_FPRS))
    papers = paper_values()
    frames = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        table = res.study_metrics(RESULTS, study, study_config, fprs)
        table["compute_seconds"] = [_compute_seconds(RESULTS, study, attack, study_config)
                                    for attack in table["attack"]]
        table["paper_dataset"] = study_config.get("paper_dataset")
        table["scale"] = scale_note(config, study_config)
        frames.append(table)
    board = pd.concat(frames, ignore_index=True)
    metric = res.metric_name("tpr", max(fprs))
    board[f"paper_{metric}"] = [
        _paper_value(papers, row.paper_dataset, row.paper_attack, row.paper_setting, metric)
        for row in board.itertuples()
    ]
    board = board.sort_values(["study", metric], ascending=[True, False])
    io.write_table(prefix + ".csv", board)
    shown = ["study", "label", "n_reference", "auc", *[res.metric_name("tpr", f) for f in fprs],
             f"paper_{metric}", "compute_seconds"]
    lines = [f"# {name}: all attacks on the same targets", "",
             "TPR in %, AUC as a fraction (mean over targets). Compute = training seconds of the "
             "reference and leave-one-out models an attack uses (for one target) plus its "
             "scoring seconds. Paper values are those "
             "of the paper each study reproduces, for the dataset it stands in for.", ""]
    for study, group in board.groupby("study", sort=False):
        lines += [f"## {study}", "", f"_{group['scale'].iloc[0]}_", "",
                  _markdown(_percent(group[shown], fprs)), ""]
    io.write_text(prefix + ".md", "\n".join(lines))


def _models_used(study_config: dict[str, Any], attack_name: str) -> list[tuple[str, int]]:
    """Attack-side models target 0's attack needs: its references and leave-one-out models."""
    from miarepro.pipeline import loo_model_indices
    from miarepro.splits import reference_indices

    attack = study_config["attacks"][attack_name]
    references = reference_indices(study_config["split"]["scheme"], 0,
                                   attack.get("n_reference", 0))
    loo = loo_model_indices(attack.get("loo_records", 0), attack.get("loo_models", 0))
    return [("reference", i) for i in references] + [("loo", i) for i in loo]


def _card(results: str, study: str, role: str, index: int) -> str:
    return f"{results}/studies/{study}/models/{role}/{index}.json"


def _compute_seconds(results: str, study: str, attack: str, study_config: dict) -> float:
    """Scoring seconds plus training seconds of the models the attack needs (per target)."""
    bench = pd.read_csv(f"{results}/benchmarks/{study}/score-{attack}.tsv", sep="\t")
    cards = [io.read_json(_card(results, study, role, i))
             for role, i in _models_used(study_config, attack)]
    return round(float(bench["s"].iloc[0]) + sum(c["train_seconds"] for c in cards), 2)


def _paper_value(papers: pd.DataFrame, dataset, attack, setting, metric: str) -> float | None:
    """The paper's number for one cell; missing keys (None or NaN) match empty settings."""
    if _missing(dataset) or _missing(attack):
        return None
    rows = papers[(papers["dataset"] == dataset) & (papers["attack"] == attack)
                  & (papers["metric"] == metric)]
    rows = rows[rows["setting"].fillna("") == ("" if _missing(setting) else setting)]
    return None if rows.empty else float(rows["value"].iloc[0])


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


def _percent(frame: pd.DataFrame, fprs) -> pd.DataFrame:
    frame = frame.copy()
    for fpr in fprs:
        column = res.metric_name("tpr", fpr)
        frame[column] = (100 * frame[column]).round(2)
    frame["auc"] = frame["auc"].round(3)
    return frame


def _markdown(frame: pd.DataFrame) -> str:
    header = "| " + " | ".join(frame.columns) + " |"
    rule = "|" + "---|" * len(frame.columns)
    body = ["| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |"
            for row in frame.itertuples(index=False)]
    return "\n".join([header, rule, *body])


# --- paper tables ---------------------------------------------------------------------------

def paper_table(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """A paper's table: our value beside the paper's for each (dataset, attack, metric) cell.

    Rows come from the attacks of the listed studies that name a ``paper_attack``; the paper's
    value is looked up in ``paper_values.csv`` by artifact, the study's ``paper_dataset``, the
    attack and its ``paper_setting``. Percent metrics are reported in percent, like the papers.
    """
    from miarepro.artifacts.catalog import paper_values

    papers = paper_values(name)
    metrics = list(settings["metrics"])
    fprs = sorted({float(m.split("@")[1].rstrip("%")) / 100 for m in metrics if "@" in m})
    rows = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        table = res.study_metrics(RESULTS, study, study_config, fprs or res.DEFAULT_FPRS)
        for row in table[table["paper_attack"].notna()].to_dict("records"):
            for metric in metrics:
                scale = 100.0 if "@" in metric else 1.0
                rows.append({
                    "artifact": name, "paper_dataset": study_config.get("paper_dataset"),
                    "study": study, "attack": row["label"], "paper_attack": row["paper_attack"],
                    "setting": row["paper_setting"], "metric": metric,
                    "ours": round(scale * row[metric], 4) if metric in row else None,
                    "paper": _paper_value(papers, study_config.get("paper_dataset"),
                                          row["paper_attack"], row["paper_setting"], metric),
                    "scale": scale_note(config, study_config),
                })
    table = pd.DataFrame(rows)
    io.write_table(prefix + ".csv", table)
    wide = table.pivot_table(index=["study", "attack"], columns="metric",
                             values=["ours", "paper"], aggfunc="first", sort=False)
    wide.columns = [f"{metric} ({who})" for who, metric in wide.columns]
    ordered = [f"{m} ({who})" for m in metrics for who in ("ours", "paper")
               if f"{m} ({who})" in wide.columns]
    wide = wide[ordered].reset_index()
    notes = [f"- **{s}** ({config['studies'][s].get('paper_dataset', '?')}): "
             f"{scale_note(config, config['studies'][s])}" for s in studies_of(settings, config)]
    lines = [f"# {name}", "", "Ours beside the paper's value; TPR and precision in %.", "",
             *notes, "", _markdown(wide.round(2)), ""]
    io.write_text(prefix + ".md", "\n".join(lines))


# --- ROC figures ----------------------------------------------------------------------------

def roc_figure(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """Log-log ROC curves (low-FPR regime, as Carlini et al. advocate), one panel per study."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    import seaborn as sns

    studies = studies_of(settings, config)
    sns.set_theme(style="whitegrid", context="paper")
    figure, axes = plt.subplots(1, len(studies), figsize=(7.2 * len(studies), 4.2), squeeze=False)
    for axis, study in zip(axes[0], studies, strict=True):
        study_config = config["studies"][study]
        wanted = settings.get("attacks", list(study_config["attacks"]))
        palette = sns.color_palette("colorblind" if len(wanted) <= 10 else "husl", len(wanted))
        floor = 1.0
        for colour, attack in zip(palette, wanted, strict=True):
            scores = pd.read_parquet(res.score_path(RESULTS, study, attack))
            fpr, tpr = res.roc_points(scores)
            label = study_config["attacks"][attack].get("label", attack)
            auc = res.attack_metrics(scores)["auc"]
            axis.plot(fpr, tpr, color=colour, label=f"{label} (AUC {auc:.3f})", lw=1.4)
            floor = min(floor, 1.0 / max(int((~scores["member"]).sum()), 1))
        grid = np.logspace(np.log10(floor), 0, 50)
        axis.plot(grid, grid, ls="--", color="grey", lw=0.8, label="chance")
        axis.set(xscale="log", yscale="log", xlim=(floor, 1), ylim=(floor, 1),
                 xlabel="False positive rate", ylabel="True positive rate", title=study)
        axis.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.02, 0.5))
    figure.suptitle(textwrap.fill(settings.get("title", name), 70 * len(studies)), fontsize=9)
    figure.tight_layout()
    for suffix in (".png", ".pdf"):
        with io.atomic_path(prefix + suffix) as tmp:
            figure.savefig(tmp, dpi=150, format=suffix[1:])
    plt.close(figure)


BUILDERS: dict[str, Builder] = {
    "leaderboard": Builder("table", leaderboard, "cross-paper leaderboard"),
    "paper_table": Builder("table", paper_table, "a paper's table, ours beside theirs"),
    "roc": Builder("figure", roc_figure, "log-log ROC curves"),
}


def build(name: str, settings: dict[str, Any], config: dict[str, Any], output: str) -> None:
    prefix = str(Path(output).with_suffix(""))
    BUILDERS[settings["builder"]].build(name, settings, config, prefix)
