"""Where a study's target sits against the paper's setting: accuracy, gap, baseline leakage.

A miniature is only worth running in the paper's regime. Each study's ``regime`` config names
the reference it was calibrated against; these rows put the target's train and test accuracy
and its baseline attack's AUC and TPR@1% (with intervals) beside the paper's values, and say
whether the generalisation gap and the baseline's leakage (its AUC above chance, its TPR@1%)
lie within a factor of two of the paper's. Tables and the claims print them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from miarepro import uncertainty
from miarepro.artifacts import catalog
from miarepro.artifacts import results as res
from miarepro.artifacts.results import RESULTS


def regime_rows(config: dict[str, Any], studies: list[str]) -> pd.DataFrame:
    """Per study: the target's accuracy and baseline leakage beside the calibration reference.

    The baseline's paper values come from ``paper_values.csv`` (never typed into the config);
    ``within_2x_*`` says whether our value (the gap, the baseline's AUC and TPR@1%) lies within
    a factor of two of the paper's, and is None where either is missing (the table then says
    "—", never "yes").
    """
    rows = []
    for study in studies:
        study_config = config["studies"][study]
        regime = res.regime(RESULTS, study, study_config)
        row = {"study": study, "paper": study_config["paper"],
               "paper_dataset": study_config.get("paper_dataset"), **regime,
               "within_2x_gap": _within_2x(regime["gap"], regime["paper_gap"])}
        baseline = regime["baseline"]
        if baseline:
            estimates = res.attack_estimates(RESULTS, study, baseline)
            attack = study_config["attacks"][baseline]
            for metric in ("auc", "tpr@1%"):
                row.update({f"baseline_{k}": v for k, v in
                            res.estimate_columns(metric, estimates[metric]).items()})
                paper = catalog.paper_number(
                    study_config["paper"], study_config.get("paper_dataset"),
                    attack.get("paper_attack"), attack.get("paper_setting"), metric,
                    study_config.get("paper_model"))
                scale = uncertainty.percent_scale(metric, study_config["paper"])
                ours = row[f"baseline_{metric}"] * scale
                row[f"paper_baseline_{metric}"] = paper
                row[f"within_2x_{metric}"] = _within_2x(*(
                    _leakage(metric, value, scale) for value in (ours, paper)))
        rows.append(row)
    return pd.DataFrame(rows)


def regime_markdown(frame: pd.DataFrame) -> list[str]:
    """The regime table and where each reference comes from."""
    def percent(value) -> str:
        return "" if value is None or pd.isna(value) else f"{100 * value:.1f}"

    def paper(value, digits=2) -> str:
        return "" if value is None or pd.isna(value) else f"{value:.{digits}f}"

    def train(row) -> str:  # the lowest target beside the mean where there are several
        lowest = row.get("lowest_train_accuracy")
        return percent(row["train_accuracy"]) + (
            "" if _missing(lowest) or lowest == row["train_accuracy"]
            else f" (lowest {percent(lowest)})")

    lines = ["| study | train acc % | test acc % (ours / reference) | gap % (ours / reference) "
             "| baseline | AUC (ours / paper) | TPR@1% (ours / paper) | within 2x |",
             "|---|---|---|---|---|---|---|---|"]
    for row in frame.to_dict("records"):
        baseline = "" if _missing(row.get("baseline")) else row["baseline"]
        auc_in_percent = uncertainty.percent_scale("auc", row.get("paper")) == 100
        checks = {label: row.get(f"within_2x_{key}") for label, key in
                  (("gap", "gap"), ("AUC", "auc"), ("TPR@1%", "tpr@1%"))}
        verdict = ", ".join(f"{label}: {'yes' if check else 'no'}"
                            for label, check in checks.items() if not _missing(check)) or "—"
        lines.append(
            f"| {row['study']} | {train(row)} | "
            f"{percent(row['test_accuracy'])} / {percent(row['paper_test_accuracy']) or '?'} | "
            f"{percent(row['gap'])} / {percent(row['paper_gap']) or '?'} | {baseline} | "
            + (f"{res.format_estimate(_prefixed(row, 'auc'), 'auc', row.get('paper'))} / "
               f"{paper(row.get('paper_baseline_auc'), 2 if auc_in_percent else 3) or '?'} | "
               f"{res.format_estimate(_prefixed(row, 'tpr@1%'), 'tpr@1%')} / "
               f"{paper(row.get('paper_baseline_tpr@1%')) or '?'} | {verdict} |"
               if baseline else f"— | — | {verdict} |"))
    lines += ["", "A row is a study's first replicate, or the mean over its repetitions where "
              "it replicates by repeating its partition split (the lowest target's train "
              "accuracy beside the mean, where they differ); the claims read every replicate, "
              "so their numbers for a study run as generated copies (`-r1`, `-r2`) can differ "
              "from its row. AUC is in the paper's units (Subpop's in percent).", ""]
    lines += [f"- {row['study']}: {row['reference']}" for row in frame.to_dict("records")
              if not _missing(row.get("reference"))]
    return lines


def _leakage(metric: str, value: float | None, scale: float) -> float | None:
    """What a metric says of leakage, for the factor-of-two check: an AUC's distance above
    chance (every AUC from 0.25 to 1 is within a factor of two of 0.5; 0.583 against the
    paper's 0.531 is 2.7 times its leakage), a TPR at FPR ``a`` as it is (it is the ratio
    ``TPR / a`` of the attack's threshold, which a factor compares as it stands)."""
    if metric != "auc" or _missing(value):
        return value
    return value - uncertainty.chance_level(metric) * scale


def _within_2x(ours: float | None, paper: float | None) -> bool | None:
    """Whether ours lies within a factor of two of the paper's value; None where either is
    missing. A paper value of 0 (a gap of zero) admits only 0."""
    if _missing(ours) or _missing(paper):
        return None
    return bool(paper / 2 <= ours <= 2 * paper)


def _missing(value: Any) -> bool:
    """None, or NaN where a table had no value for the row (a study without a baseline)."""
    return value is None or (isinstance(value, float) and pd.isna(value))


def _prefixed(row: dict[str, Any], metric: str) -> dict[str, Any]:
    return {key[len("baseline_"):]: value for key, value in row.items()
            if key.startswith(f"baseline_{metric}")}
