"""Figure builders: log-log ROC curves, parameter sweeps, architecture grids and one sample's
non-member score densities, as PNG and PDF."""

from __future__ import annotations

import textwrap
from typing import Any

import numpy as np
import pandas as pd

from miarepro import io, uncertainty
from miarepro.artifacts import results as res
from miarepro.artifacts.registry import SECONDS
from miarepro.artifacts.results import RESULTS, studies_of

#: seaborn's "colorblind" palette: the figures' colours, without importing seaborn (1.8 s of
#: scipy and pandas per figure job) where matplotlib's bundled seaborn styles do the theming
COLORBLIND = ("#0173B2", "#DE8F05", "#029E73", "#D55E00", "#CC78BC", "#CA9161", "#FBAFE4",
              "#949494", "#ECE133", "#56B4E9")


def pyplot(style: str = "whitegrid") -> Any:
    """matplotlib.pyplot on the headless backend, with the figures' common (seaborn) theme."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.style.use(["default", f"seaborn-v0_8-{style}", "seaborn-v0_8-paper"])
    # the seaborn styles draw markers without an edge, and error bars' caps are markers: with
    # no edge, every interval lost its caps and one series' bar hid another's end
    plt.rcParams["lines.markeredgewidth"] = 1.0
    return plt


def palette(n: int) -> list[Any]:
    """``n`` distinguishable colours: the colorblind palette, or evenly spaced hues past 10."""
    if n <= len(COLORBLIND):
        return list(COLORBLIND[:n])
    import matplotlib

    return [matplotlib.colormaps["hsv"](k / n) for k in range(n)]


def error_bars(value: Any, low: Any, high: Any) -> list[np.ndarray]:
    """Matplotlib's ``yerr`` for an interval: a bootstrap percentile interval of a nonlinear
    metric (precision) may exclude the point estimate; the bar then stops at the point."""
    value = np.asarray(value, dtype=float)
    return [np.maximum(value - np.asarray(low, dtype=float), 0),
            np.maximum(np.asarray(high, dtype=float) - value, 0)]


#: a line's width in characters per point of font size and inch of figure: the mean advance of
#: a character of the figures' sans-serif font is about 0.55 em (72 points to the inch), less
#: a margin
_CHARACTERS_PER_POINT_INCH = 72 / 0.6


def title(figure: Any, text: str, fontsize: float = 9) -> None:
    """The figure's title, wrapped to the figure's width. A fixed number of characters per
    line cut the title of a narrow figure (a single panel) off at both sides."""
    width = int(figure.get_figwidth() * _CHARACTERS_PER_POINT_INCH / fontsize)
    figure.suptitle(textwrap.fill(text, max(width, 20)), fontsize=fontsize)


def _save(figure: Any, prefix: str) -> None:
    import matplotlib.pyplot as plt

    figure.tight_layout()
    for suffix in (".png", ".pdf"):
        with io.atomic_path(prefix + suffix) as tmp:
            figure.savefig(tmp, dpi=150, format=suffix[1:])
    plt.close(figure)


def roc_figure(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """Log-log ROC curves (low-FPR regime, as Carlini et al. advocate), one panel per study.

    Grey: the FPRs that no curve's audit resolves (fewer than
    :data:`~miarepro.uncertainty.MIN_EXCEEDANCES` non-members above them). A curve whose own
    audit is smaller (IHA's 100 records beside the full audit) is thin and dotted, in its own
    colour, where only it cannot resolve the FPR, so that one small audit does not grey out
    every other curve. Past ten curves the colours repeat with dashed, then dotted lines."""
    plt = pyplot()
    studies = studies_of(settings, config)
    wanted = {study: settings.get("attacks", list(config["studies"][study]["attacks"]))
              for study in studies}
    width = 7.2 if max(len(attacks) for attacks in wanted.values()) <= 10 else 9.0  # legend
    figure, axes = plt.subplots(1, len(studies), figsize=(width * len(studies), 4.2),
                                squeeze=False)
    for axis, study in zip(axes[0], studies, strict=True):
        study_config = config["studies"][study]
        curves = []  # (label, fpr, tpr, the smallest FPR its audit resolves)
        floor = 1.0  # the axes' floor: one pooled non-member of the largest audit
        for attack in wanted[study]:
            label = study_config["attacks"][attack].get("label", attack)
            auc = res.estimate_columns("auc", res.attack_estimates(RESULTS, study, attack)["auc"])
            members, nonmembers = res.audit_size(RESULTS, study, attack)
            if not auc["auc_resolvable"]:  # a curve through a handful of records says nothing
                curves.append((f"{label}: not drawn, {members} / {nonmembers} records (n/r)",
                               None, None, None))
                continue
            scores = io.read_table(res.score_path(RESULTS, study, attack))
            floor = min(floor, 1.0 / max(int((~scores["member"]).sum()), 1))
            curves.append((f"{label} (AUC {res.format_estimate(auc, 'auc')})",
                           *res.roc_points(scores), uncertainty.MIN_EXCEEDANCES / nonmembers))
        shared = min((curve[3] for curve in curves if curve[1] is not None), default=1.0)
        for k, (label, fpr, tpr, limit) in enumerate(curves):
            colour, style = COLORBLIND[k % len(COLORBLIND)], ("-", "--", ":")[k // 10 % 3]
            if fpr is None:
                axis.plot([], [], " ", label=label)
                continue
            if limit > shared:  # thin where only this curve's smaller audit cannot resolve
                label += f"; thin: n/r below FPR {limit:.2g}"
                cut = int(np.searchsorted(fpr, limit))  # fpr ascends: the two parts meet
                axis.plot(fpr[:cut + 1], tpr[:cut + 1], color=colour, ls=":", lw=0.8)
                fpr, tpr = fpr[cut:], tpr[cut:]
            axis.plot(fpr, tpr, color=colour, ls=style, lw=1.4, label=label)
        grid = np.logspace(np.log10(floor), 0, 50)
        axis.plot(grid, grid, ls="--", color="grey", lw=0.8, label="chance")
        if shared > floor:
            axis.axvspan(floor, min(shared, 1.0), lw=0, color="0.92",
                         label="FPR the audit cannot resolve")
        axis.set(xscale="log", yscale="log", xlim=(floor, 1), ylim=(floor, 1),
                 xlabel="False positive rate", ylabel="True positive rate", title=study)
        axis.legend(fontsize=6.5, loc="center left", bbox_to_anchor=(1.02, 0.5))
    title(figure, settings.get("title", name))
    _save(figure, prefix)


def sweep_figure(name: str, settings: dict[str, Any], config: dict[str, Any],
                 prefix: str) -> None:
    """A metric against one attack parameter (``x``), a line or bar group per ``series``.

    The attacks are instances of one study that differ in those parameters (BMIA's posterior
    sample count, Hessian structure, prior tuning, predictive). One panel per metric, with 95%
    intervals; ``seconds`` plots the attack's own scoring time. A numeric ``x`` gives lines, a
    categorical one points side by side per category. Points the audit cannot resolve are left
    out and listed.
    """
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
            rows.append({"attack": attack, "x": values.get(settings["x"]),
                         "series": str(values.get(settings.get("series"), "")),
                         "metric": metric, **res.scaled_interval(metric, row)})
    table = pd.DataFrame(rows)
    numeric = pd.api.types.is_numeric_dtype(table["x"])
    ticks = list(dict.fromkeys(table["x"]))  # categories in the order the attacks are listed
    plt = pyplot()
    metrics = list(settings["metrics"])
    figure, axes = plt.subplots(1, len(metrics), figsize=(4.2 * len(metrics), 3.6),
                                squeeze=False)
    series = list(dict.fromkeys(table["series"]))
    colours = dict(zip(series, palette(len(series)), strict=True))
    for axis, metric in zip(axes.ravel(), metrics, strict=True):
        part = table[(table["metric"] == metric) & table["resolvable"]]
        for k, (label, group) in enumerate(part.groupby("series", sort=False)):
            group = group.sort_values("x") if numeric else group
            offset = (k - len(series) / 2 + 0.5) * 0.8 / len(series)
            # series side by side, so that one's interval never hides another's
            where = (group["x"] * (1 + 0.3 * offset) if numeric
                     else [ticks.index(x) + offset for x in group["x"]])
            axis.errorbar(where, group["value"], capsize=3, marker="o",
                          yerr=error_bars(group["value"], group["low"], group["high"]),
                          ls="-" if numeric else "none", color=colours[label],
                          label=label or None)
        if numeric:
            axis.set_xscale("log")
            axis.minorticks_off()
            axis.set_xticks(sorted(ticks), [f"{t:g}" for t in sorted(ticks)])
        else:  # points, not bars from zero: the values compared are close to each other
            axis.set_xticks(range(len(ticks)), [str(t) for t in ticks])
            axis.set_xlim(-0.6, len(ticks) - 0.4)
        percent = uncertainty.percent_scale(metric) == 100
        unit = " (s)" if metric == SECONDS else " (%)" if percent else ""
        missing = table[(table["metric"] == metric) & ~table["resolvable"]]
        axis.set(xlabel=settings["x"], ylabel=f"{metric}{unit}",
                 title=metric + (" (n/r points left out)" if len(missing) else ""))
        if len(series) > 1:
            axis.legend(title=settings.get("series"), fontsize=7)
    title(figure, f"{settings.get('title', name)} [{study}]")
    _save(figure, prefix)


def grid_figure(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """BMIA Figure 4: a metric for every (target, reference) architecture pair, as a heatmap.

    Rows are the listed studies (one target architecture each); an attack of a row takes its
    reference model from its ``reference_study`` (the column) or, without one, from its own
    study (the diagonal). A listed study may audit another's models (``models_from``): its
    column is then the one of the study whose models it audits. Cells show the estimate and its
    95% interval; a row's best cell is framed, and the title counts the rows whose matched
    reference is best, the paper's claim.
    """
    from miarepro.paths import model_home, reference_home

    studies = studies_of(settings, config)
    column_of = {model_home(s, config["studies"][s]): s for s in studies}
    (metric,) = settings["metrics"]
    scale = uncertainty.percent_scale(metric)
    values = pd.DataFrame(np.nan, index=studies, columns=studies)
    text = pd.DataFrame("", index=studies, columns=studies)
    for study, study_config, attack in res.listed_attacks(settings, config):
        home = reference_home(study, study_config, study_config["attacks"][attack])
        column = column_of.get(home, home)
        row = res.estimate_columns(metric, res.attack_estimates(RESULTS, study, attack)[metric])
        text.loc[study, column] = res.format_estimate(row, metric).replace(" [", "\n[")
        if row[f"{metric}_resolvable"]:
            values.loc[study, column] = scale * row[metric]
    labels = [_model_label(config["studies"][s]["model"]) for s in studies]
    best = values.idxmax(axis=1)
    matched = sum(best[s] == s for s in studies if values.loc[s].notna().any())
    import seaborn as sns  # its annotated heatmap is the one thing matplotlib lacks here

    plt = pyplot("white")
    figure, axis = plt.subplots(figsize=(1.6 * len(studies) + 2.2, 1.2 * len(studies) + 1.4))
    sns.heatmap(values, annot=text.to_numpy(), fmt="", cmap="viridis", ax=axis,
                xticklabels=labels, yticklabels=labels, annot_kws={"fontsize": 7},
                cbar_kws={"label": f"{metric}" + (" (%)" if scale == 100 else "")})
    # seaborn leaves a missing value's cell blank: one the audit runs but cannot resolve
    # says "n/r", unlike a pair no attack runs
    for k, j in np.argwhere(values.isna().to_numpy() & (text != "").to_numpy()):
        axis.text(j + 0.5, k + 0.5, text.iat[k, j], ha="center", va="center", fontsize=7)
    for k, study in enumerate(studies):
        if values.loc[study].notna().any():
            axis.add_patch(plt.Rectangle((studies.index(best[study]), k), 1, 1, fill=False,
                                         edgecolor="red", lw=2))
    axis.set(xlabel="reference architecture", ylabel="target architecture")
    title(figure, f"{settings.get('title', name)}. Red frame: each target's best reference; "
                  f"the matched one (diagonal) is best for {matched} of {len(studies)} targets")
    _save(figure, prefix)


def _model_label(model: dict[str, Any]) -> str:
    extras = [str(v) if not isinstance(v, list) else "-".join(map(str, v))
              for k, v in model.items() if k not in ("arch", "activation")]
    return " ".join([model["arch"], *extras])


def bars_figure(name: str, settings: dict[str, Any], config: dict[str, Any],
                prefix: str) -> None:
    """Grouped bars: one group per study, one bar per attack, one panel per metric, with 95%
    intervals (Stolen Memories' Figures 5 and 9-12: attacks across targets). An attack missing
    from a study leaves its bar out; a metric the audit cannot resolve writes "n/r" in its
    place, so that an empty slot is never read as zero."""
    studies = studies_of(settings, config)
    rows = []
    for study, study_config, attack in res.listed_attacks(settings, config):
        estimates = res.attack_estimates(RESULTS, study, attack)
        label = study_config["attacks"][attack].get("label", attack)
        rows += [{"study": study, "attack": attack, "label": label, "metric": metric,
                  **res.scaled_interval(metric, res.estimate_columns(metric, estimates[metric]))}
                 for metric in settings["metrics"]]
    table = pd.DataFrame(rows)
    plt = pyplot()
    metrics = list(settings["metrics"])
    columns = len(metrics) if len(metrics) <= 2 else 1  # three side by side ran 22 in wide
    rows = len(metrics) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(
        max(4.2, 1.1 * len(studies) + 2) * columns, 3.8 if rows == 1 else 3.0 * rows),
        squeeze=False)
    series = list(dict.fromkeys(table["attack"]))  # instances: one label may vary by study
    labels = table.drop_duplicates("attack").set_index("attack")["label"]
    colours = dict(zip(series, palette(len(series)), strict=True))
    width = 0.8 / len(series)

    def slot(study: str, k: int) -> float:  # the k-th attack's bar in the study's group
        return studies.index(study) + (k - len(series) / 2 + 0.5) * width

    for axis, metric in zip(axes.ravel(), metrics, strict=True):
        shown = table[table["metric"] == metric]
        part = shown[shown["resolvable"]]
        for k, attack in enumerate(series):
            group = part[part["attack"] == attack]
            axis.bar([slot(s, k) for s in group["study"]], group["value"], width=width,
                     color=colours[attack], label=labels[attack],
                     yerr=error_bars(group["value"], group["low"], group["high"]), capsize=2)
            for study in shown[(shown["attack"] == attack) & ~shown["resolvable"]]["study"]:
                axis.text(slot(study, k), 0, "n/r", rotation=90, ha="center", va="bottom",
                          fontsize=6, color="0.35")
        axis.set_xticks(range(len(studies)), [textwrap.fill(s, 14) for s in studies],
                        fontsize=7)
        axis.set_xlim(-0.5, len(studies) - 0.5)
        if metric in settings.get("bounds", {}):  # over the groups it bounds (all: the axis)
            bound, where = settings["bounds"][metric], settings.get("bound_studies", studies)
            axis.hlines([bound] * len(where), [studies.index(s) - 0.45 for s in where],
                        [studies.index(s) + 0.45 for s in where], ls="--", color="0.3", lw=1,
                        label=f"bound ({bound:g})")
        percent = uncertainty.percent_scale(metric) == 100
        axis.set(ylabel=f"{metric}" + (" (%)" if percent else ""), title=metric)
    # beside the last panel, never over a bar; each label once, a bound's from its panel
    entries = {label: handle for axis in axes.ravel()
               for handle, label in zip(*axis.get_legend_handles_labels(), strict=True)}
    axes.ravel()[-1].legend(entries.values(), entries.keys(), fontsize=7, loc="center left",
                            bbox_to_anchor=(1.02, 0.5))
    title(figure, settings.get("title", name))
    _save(figure, prefix)
