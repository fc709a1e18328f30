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

import numpy as np
import pandas as pd

from miarepro import io, uncertainty
from miarepro.artifacts import results as res
from miarepro.artifacts.results import RESULTS

SUFFIXES = {"table": (".csv", ".md"), "figure": (".png", ".pdf")}
#: The papers' compute column (BMIA-T1's "Time"): ours is the minutes of training the models an
#: attack uses plus its fit, on whatever device ran them (the table says which).
COMPUTE = "gpu_minutes"


@dataclass(frozen=True)
class Builder:
    kind: str
    build: Callable[[str, dict[str, Any], dict[str, Any], str], None]
    description: str
    keys: tuple[str, ...] = ("studies",)  # the settings it reads besides ``builder``

    def outputs(self, results: str, name: str, config: dict[str, Any]) -> list[str]:
        return [f"{results}/artifacts/{name}{suffix}" for suffix in SUFFIXES[self.kind]]


def studies_of(settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The studies an artifact reads: its ``studies`` setting, or every study."""
    return list(settings.get("studies", config["studies"]))


def studies_read(settings: dict[str, Any], config: dict[str, Any]) -> dict[str, Any]:
    """The configs of the studies an artifact reads, with only the attacks it reads.

    A figure naming its ``attacks`` neither reads nor reruns for the study's other attacks.
    """
    studies = {}
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        if "attacks" in settings:
            study_config = {**study_config, "attacks": {
                name: study_config["attacks"][name] for name in settings["attacks"]}}
        studies[study] = study_config
    return studies


def inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """What an artifact reads: per attack its scores, metrics and score benchmark, and the
    cards of the models it used (compute columns) and of the targets (regime)."""
    files = []
    for study, study_config in studies_read(settings, config).items():
        for attack in study_config["attacks"]:
            files += [str(res.score_path(results, study, attack)),
                      str(res.metrics_path(results, study, attack)),
                      f"{results}/benchmarks/{study}/score-{attack}.tsv"]
            files += [_card(results, study, role, i) for role, i in _models_used(study_config,
                                                                                 attack)]
            files += _fit_cards(results, study, study_config, attack)[:1]
        files += [str(res.target_card(results, study, t)) for t in range(study_config["targets"])]
    return sorted(set(files), key=files.index)


def scale_note(config: dict[str, Any], study: dict[str, Any]) -> str:
    if config["scale"] == "paper" and not study["deviations"]:
        return "paper settings"
    return "scaled-down proxy: " + ("; ".join(study["deviations"]) or "miniature settings")


INTERVAL_NOTE = ("Intervals are 95%: Student-t over target models where a study has at least "
                 f"{uncertainty.MIN_TARGETS}, else a stratified bootstrap over audited samples "
                 f"({'{bootstrap}'} replicates). **n/r**: the audit cannot resolve the metric "
                 f"(fewer than {uncertainty.MIN_EXCEEDANCES}/FPR non-members, or fewer than "
                 f"{uncertainty.MIN_PER_CLASS} members or non-members per target).")


def interval_note(config: dict[str, Any]) -> str:
    return INTERVAL_NOTE.replace("{bootstrap}", str(config["metrics"]["bootstrap"]))


# --- regime ---------------------------------------------------------------------------------

def regime_rows(config: dict[str, Any], studies: list[str]) -> pd.DataFrame:
    """Per study: the target's accuracy and baseline leakage beside the calibration reference.

    The baseline's paper values come from ``paper_values.csv`` (never typed into the config);
    ``within_2x`` says whether our value lies within a factor of two of the paper's.
    """
    rows = []
    for study in studies:
        study_config = config["studies"][study]
        regime = res.regime(RESULTS, study, study_config)
        row = {"study": study, "paper_dataset": study_config.get("paper_dataset"), **regime}
        baseline = regime["baseline"]
        if baseline:
            estimates = res.attack_estimates(RESULTS, study, baseline)
            attack = study_config["attacks"][baseline]
            for metric in ("auc", "tpr@1%"):
                row.update({f"baseline_{k}": v for k, v in
                            res.estimate_columns(metric, estimates[metric]).items()})
                paper = paper_number(study_config["paper"], study_config.get("paper_dataset"),
                                     attack.get("paper_attack"), attack.get("paper_setting"),
                                     metric)
                ours = row[f"baseline_{metric}"] * (100 if "@" in metric else 1)
                row[f"paper_baseline_{metric}"] = paper
                row[f"within_2x_{metric}"] = (None if paper is None or pd.isna(ours)
                                              else bool(paper / 2 <= ours <= 2 * paper))
        rows.append(row)
    return pd.DataFrame(rows)


def regime_markdown(frame: pd.DataFrame) -> list[str]:
    """The regime table and where each reference comes from."""
    def percent(value) -> str:
        return "" if value is None or pd.isna(value) else f"{100 * value:.1f}"

    def paper(value, digits=2) -> str:
        return "" if value is None or pd.isna(value) else f"{value:.{digits}f}"

    lines = ["| study | train acc % | test acc % (ours / reference) | gap % (ours / reference) "
             "| baseline | AUC (ours / paper) | TPR@1% (ours / paper) | within 2x |",
             "|---|---|---|---|---|---|---|---|"]
    for row in frame.to_dict("records"):
        baseline = row.get("baseline") or ""
        checks = [row.get(f"within_2x_{m}") for m in ("auc", "tpr@1%")]
        verdict = ", ".join(f"{m}: {'yes' if c else 'no'}" for m, c in
                            zip(("AUC", "TPR@1%"), checks, strict=True) if c is not None)
        lines.append(
            f"| {row['study']} | {percent(row['train_accuracy'])} | "
            f"{percent(row['test_accuracy'])} / {percent(row['paper_test_accuracy']) or '?'} | "
            f"{percent(row['gap'])} / {percent(row['paper_gap']) or '?'} | {baseline} | "
            + (f"{res.format_estimate(_prefixed(row, 'auc'), 'auc')} / "
               f"{paper(row.get('paper_baseline_auc'), 3) or '?'} | "
               f"{res.format_estimate(_prefixed(row, 'tpr@1%'), 'tpr@1%')} / "
               f"{paper(row.get('paper_baseline_tpr@1%')) or '?'} | {verdict} |"
               if baseline else " | | |"))
    lines.append("")
    lines += [f"- {row['study']}: {row['reference']}" for row in frame.to_dict("records")
              if row.get("reference")]
    return lines


def _prefixed(row: dict[str, Any], metric: str) -> dict[str, Any]:
    return {key[len("baseline_"):]: value for key, value in row.items()
            if key.startswith(f"baseline_{metric}")}


def paper_values_of(artifact: str) -> pd.DataFrame:
    """The numbers the paper prints for one artifact (empty for figures without any)."""
    from miarepro.artifacts.catalog import paper_values

    return paper_values(artifact)


def paper_number(paper: str, dataset, attack, setting, metric: str) -> float | None:
    """The paper's first printed number for one (dataset, attack, setting, metric) cell."""
    from miarepro.artifacts.catalog import PAPERS, paper_values

    values = paper_values()
    prefixes = tuple(f"{prefix}-" for prefix, name in PAPERS.items() if name == paper)
    return paper_value(values[values["artifact"].str.startswith(prefixes)], dataset, attack,
                        setting, metric)


# --- leaderboard ----------------------------------------------------------------------------

def leaderboard(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """Every attack on every study: AUC, TPR@FPR with intervals, and the compute each needed.

    Within a study, rows whose ranking metric (TPR at the largest FPR) the audit can resolve
    come first, by that metric; rows scored on too few records follow, never above them.
    """
    fprs = tuple(settings.get("fprs", config["metrics"]["fprs"]))
    ranking = res.metric_name("tpr", max(fprs))
    shown_metrics = ["auc", *[res.metric_name("tpr", f) for f in fprs]]
    frames = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        table = res.study_metrics(RESULTS, study, study_config, shown_metrics)
        table["compute_seconds"] = [_compute_seconds(RESULTS, study, attack, study_config)
                                    for attack in table["attack"]]
        table["paper_dataset"] = study_config.get("paper_dataset")
        table[f"paper_{ranking}"] = [
            paper_number(study_config["paper"], study_config.get("paper_dataset"),
                         row.paper_attack, row.paper_setting, ranking)
            for row in table.itertuples()]
        table["scale"] = scale_note(config, study_config)
        frames.append(table.sort_values([f"{ranking}_resolvable", ranking],
                                        ascending=[False, False], na_position="last"))
    board = pd.concat(frames, ignore_index=True)
    io.write_table(prefix + ".csv", board)
    lines = [f"# {name}: all attacks on the same targets", "",
             "TPR in %, AUC as a fraction (mean over targets) with 95% intervals. Rows are "
             f"ranked by {ranking}; rows the audit cannot resolve come last. Compute = training "
             "seconds of the reference and leave-one-out models an attack uses (for one target) "
             "plus its scoring seconds. Paper values are those of the paper each study "
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


def _fit_cards(results: str, study: str, study_config: dict, attack: str) -> list[str]:
    from miarepro.pipeline import fit_paths

    return [f"{path}.json" for path in fit_paths(results, study, study_config,
                                                   study_config["attacks"][attack])]


def _compute_seconds(results: str, study: str, attack: str, study_config: dict) -> float:
    """Scoring seconds plus training seconds of the models and fit the attack needs (target 0)."""
    bench = pd.read_csv(f"{results}/benchmarks/{study}/score-{attack}.tsv", sep="\t")
    cards = [io.read_json(_card(results, study, role, i))
             for role, i in _models_used(study_config, attack)]
    fits = [io.read_json(path) for path in _fit_cards(results, study, study_config, attack)[:1]]
    return round(float(bench["s"].iloc[0]) + sum(c["train_seconds"] for c in cards)
                 + sum(c["fit_seconds"] for c in fits), 2)


def paper_value(papers: pd.DataFrame, dataset, attack, setting, metric: str) -> float | None:
    """The paper's number for one cell; missing keys (None or NaN) match empty settings."""
    if _missing(dataset) or _missing(attack):
        return None
    rows = papers[(papers["dataset"] == dataset) & (papers["attack"] == attack)
                  & (papers["metric"] == metric)]
    rows = rows[rows["setting"].fillna("") == ("" if _missing(setting) else setting)]
    return None if rows.empty else float(rows["value"].iloc[0])


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


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
    """
    from miarepro.artifacts.catalog import paper_values

    papers = paper_values(name)
    metrics = list(settings["metrics"])
    studies = studies_of(settings, config)
    rows = []
    for study in studies:
        study_config = config["studies"][study]
        table = res.study_metrics(RESULTS, study, study_config,
                                  [m for m in metrics if m != COMPUTE])
        for row in table[table["paper_attack"].notna()].to_dict("records"):
            if COMPUTE in metrics:  # minutes of the models and fit the attack needs, no CI
                minutes = _compute_seconds(RESULTS, study, row["attack"], study_config) / 60
                row.update({COMPUTE: minutes, f"{COMPUTE}_low": minutes,
                            f"{COMPUTE}_high": minutes, f"{COMPUTE}_resolvable": True})
            for metric in metrics:
                scale = 100.0 if "@" in metric else 1.0
                rows.append({
                    "artifact": name, "paper_dataset": study_config.get("paper_dataset"),
                    "study": study, "attack": row["label"], "paper_attack": row["paper_attack"],
                    "setting": row["paper_setting"], "metric": metric,
                    "ours": scale * row[metric], "ours_low": scale * row[f"{metric}_low"],
                    "ours_high": scale * row[f"{metric}_high"],
                    "resolvable": row[f"{metric}_resolvable"], "interval": row["interval"],
                    "n_members": row["n_members"], "n_nonmembers": row["n_nonmembers"],
                    "paper": paper_value(papers, study_config.get("paper_dataset"),
                                          row["paper_attack"], row["paper_setting"], metric),
                    "scale": scale_note(config, study_config),
                    "ours_text": (f"{row[metric]:.2f}" if metric == COMPUTE
                                  else res.format_estimate(row, metric)),
                })
    table = pd.DataFrame(rows)
    io.write_table(prefix + ".csv", table.drop(columns="ours_text"))
    wide = pd.DataFrame([
        {"study": key[0], "attack": key[1], "members / non-members": f"{key[2]} / {key[3]}",
         **{f"{row['metric']} ({who})": row[column] for row in group.to_dict("records")
            for who, column in (("ours", "ours_text"), ("paper", "paper"))}}
        for key, group in table.groupby(["study", "attack", "n_members", "n_nonmembers"],
                                        sort=False)])
    notes = [f"- **{s}** ({config['studies'][s].get('paper_dataset', '?')}): "
             f"{scale_note(config, config['studies'][s])}" for s in studies]
    lines = [f"# {name}", "", "Ours beside the paper's value; TPR and precision in %."
             + (f" {COMPUTE}: minutes to train the reference models an attack uses plus its "
                "fit (ours on the device of the run, the paper's on a GPU)."
                if COMPUTE in metrics else ""),
             interval_note(config), "", "## Regime", "",
             *regime_markdown(regime_rows(config, studies)), "", "## Results", "", *notes, "",
             _markdown(wide), ""]
    io.write_text(prefix + ".md", "\n".join(lines))


# --- ROC figures ----------------------------------------------------------------------------

def roc_figure(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """Log-log ROC curves (low-FPR regime, as Carlini et al. advocate), one panel per study."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    studies = studies_of(settings, config)
    sns.set_theme(style="whitegrid", context="paper")
    figure, axes = plt.subplots(1, len(studies), figsize=(7.2 * len(studies), 4.2), squeeze=False)
    for axis, study in zip(axes[0], studies, strict=True):
        study_config = config["studies"][study]
        wanted = settings.get("attacks", list(study_config["attacks"]))
        palette = sns.color_palette("colorblind" if len(wanted) <= 10 else "husl", len(wanted))
        floor, limit = 1.0, 0.0  # axis floor; smallest FPR every target's audit resolves
        for colour, attack in zip(palette, wanted, strict=True):
            label = study_config["attacks"][attack].get("label", attack)
            auc = res.estimate_columns("auc", res.attack_estimates(RESULTS, study, attack)["auc"])
            if not auc["auc_resolvable"]:  # a curve through a handful of records says nothing
                members, nonmembers = res.audit_size(RESULTS, study, attack)
                axis.plot([], [], " ", label=f"{label}: not drawn, {members} / {nonmembers} "
                                             "records (n/r)")
                continue
            scores = io.read_table(res.score_path(RESULTS, study, attack))
            fpr, tpr = res.roc_points(scores)
            axis.plot(fpr, tpr, color=colour, lw=1.4,
                      label=f"{label} (AUC {res.format_estimate(auc, 'auc')})")
            floor = min(floor, 1.0 / max(int((~scores["member"]).sum()), 1))
            limit = max(limit, uncertainty.MIN_EXCEEDANCES / res.audit_size(RESULTS, study,
                                                                            attack)[1])
        grid = np.logspace(np.log10(floor), 0, 50)
        axis.plot(grid, grid, ls="--", color="grey", lw=0.8, label="chance")
        if limit > floor:
            axis.axvspan(floor, min(limit, 1.0), lw=0, color="0.92",
                         label="FPR the audit cannot resolve")
        axis.set(xscale="log", yscale="log", xlim=(floor, 1), ylim=(floor, 1),
                 xlabel="False positive rate", ylabel="True positive rate", title=study)
        axis.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.02, 0.5))
    figure.suptitle(textwrap.fill(settings.get("title", name), 70 * len(studies)), fontsize=9)
    figure.tight_layout()
    for suffix in (".png", ".pdf"):
        with io.atomic_path(prefix + suffix) as tmp:
            figure.savefig(tmp, dpi=150, format=suffix[1:])
    plt.close(figure)


def claims(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """The papers' headline claims checked on this run (:mod:`miarepro.artifacts.claims`)."""
    from miarepro.artifacts import claims as claims_module

    claims_module.build(name, settings, config, prefix)


# --- parameter sweeps ----------------------------------------------------------------------

SECONDS = "seconds"  # a sweep's pseudo-metric: the attack's own scoring time per target


def sweep_figure(name: str, settings: dict[str, Any], config: dict[str, Any],
                 prefix: str) -> None:
    """A metric against one attack parameter (``x``), a line or bar group per ``series``.

    The attacks are instances of one study that differ in those parameters (BMIA's posterior
    sample count, Hessian structure, prior tuning, predictive). One panel per metric, with 95%
    intervals; ``seconds`` plots the attack's own scoring time. A numeric ``x`` gives lines, a
    categorical one grouped bars. Points the audit cannot resolve are left out and listed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import seaborn as sns

    from miarepro.attacks import get_attack

    (study,) = studies_of(settings, config)
    study_config = config["studies"][study]
    rows = []
    for attack in settings["attacks"]:
        entry = study_config["attacks"][attack]
        values = {**get_attack(entry["attack"]).defaults(), **entry}
        estimates = res.attack_estimates(RESULTS, study, attack)
        for metric in settings["metrics"]:
            if metric == SECONDS:
                value = res.score_seconds(RESULTS, study, attack)
                row = {metric: value, f"{metric}_low": value, f"{metric}_high": value,
                       f"{metric}_resolvable": True}
            else:
                row = res.estimate_columns(metric, estimates[metric])
            scale = 100.0 if "@" in metric else 1.0
            rows.append({"attack": attack, "x": values.get(settings["x"]),
                         "series": str(values.get(settings.get("series"), "")),
                         "metric": metric, "value": scale * row[metric],
                         "low": scale * row[f"{metric}_low"],
                         "high": scale * row[f"{metric}_high"],
                         "resolvable": row[f"{metric}_resolvable"]})
    table = pd.DataFrame(rows)
    numeric = pd.api.types.is_numeric_dtype(table["x"])
    ticks = list(dict.fromkeys(table["x"]))  # categories in the order the attacks are listed
    sns.set_theme(style="whitegrid", context="paper")
    metrics = list(settings["metrics"])
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6),
                                squeeze=False)
    series = list(dict.fromkeys(table["series"]))
    palette = dict(zip(series, sns.color_palette("colorblind", len(series)), strict=True))
    for axis, metric in zip(axes[0], metrics, strict=True):
        part = table[(table["metric"] == metric) & table["resolvable"]]
        for k, (label, group) in enumerate(part.groupby("series", sort=False)):
            group = group.sort_values("x") if numeric else group
            offset = (k - len(series) / 2 + 0.5) * 0.8 / len(series)
            where = group["x"] if numeric else [ticks.index(x) + offset for x in group["x"]]
            error = [group["value"] - group["low"], group["high"] - group["value"]]
            if numeric:
                axis.errorbar(where, group["value"], yerr=error, marker="o", capsize=3,
                              color=palette[label], label=label or None)
            else:
                axis.bar(where, group["value"], width=0.8 / len(series), yerr=error,
                         capsize=3, color=palette[label], label=label or None)
        if numeric:
            axis.set_xscale("log")
        else:
            axis.set_xticks(range(len(ticks)), [str(t) for t in ticks])
        unit = " (s)" if metric == SECONDS else " (%)" if "@" in metric else ""
        missing = table[(table["metric"] == metric) & ~table["resolvable"]]
        axis.set(xlabel=settings["x"], ylabel=f"{metric}{unit}",
                 title=metric + (" (n/r points left out)" if len(missing) else ""))
        if len(series) > 1:
            axis.legend(title=settings.get("series"), fontsize=7)
    figure.suptitle(textwrap.fill(f"{settings.get('title', name)} [{study}]", 90), fontsize=9)
    figure.tight_layout()
    for suffix in (".png", ".pdf"):
        with io.atomic_path(prefix + suffix) as tmp:
            figure.savefig(tmp, dpi=150, format=suffix[1:])
    plt.close(figure)


BUILDERS: dict[str, Builder] = {
    "leaderboard": Builder("table", leaderboard, "cross-paper leaderboard", ("studies", "fprs")),
    "claims": Builder("table", claims, "the papers' claims: holds / fails / inconclusive"),
    "paper_table": Builder("table", paper_table, "a paper's table, ours beside theirs",
                           ("studies", "metrics")),
    "roc": Builder("figure", roc_figure, "log-log ROC curves", ("studies", "attacks", "title")),
    "sweep": Builder("figure", sweep_figure, "a metric against one attack parameter",
                     ("studies", "attacks", "x", "series", "metrics", "title")),
}


def build(name: str, settings: dict[str, Any], config: dict[str, Any], output: str) -> None:
    prefix = str(Path(output).with_suffix(""))
    BUILDERS[settings["builder"]].build(name, settings, config, prefix)
