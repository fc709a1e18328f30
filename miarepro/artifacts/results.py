"""Read attack scores and turn them into per-attack metrics: the one place metrics are computed
for every table and figure."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from miarepro import metrics

DEFAULT_FPRS = (0.001, 0.01)
RESULTS = "results"  # relative to the workflow's working directory


def metric_name(kind: str, fpr: float) -> str:
    return f"{kind}@{fpr * 100:g}%"


def attack_metrics(scores: pd.DataFrame, fprs: Iterable[float] = DEFAULT_FPRS) -> dict[str, float]:
    """AUC, TPR@FPR and precision@FPR averaged over target models (``*_std`` across targets)."""
    per_target = pd.DataFrame([
        metrics.summary(group["member"].to_numpy(), group["score"].to_numpy(), tuple(fprs))
        for _, group in scores.groupby("target")
    ])
    result = per_target.mean().to_dict()
    if len(per_target) > 1:
        result.update({f"{k}_std": v for k, v in per_target.std(ddof=1).items()})
    result["n_members"] = int(scores["member"].sum())
    result["n_nonmembers"] = int((~scores["member"]).sum())
    return result


def score_path(results: str, study: str, attack: str) -> Path:
    return Path(results) / "studies" / study / "scores" / f"{attack}.parquet"


def study_metrics(results: str, study: str, study_config: dict,
                  fprs: Iterable[float] = DEFAULT_FPRS) -> pd.DataFrame:
    """One row per attack instance of a study, with its metrics and paper keys."""
    rows = []
    for name, attack in study_config["attacks"].items():
        scores = pd.read_parquet(score_path(results, study, name))
        rows.append({
            "study": study, "attack": name, "label": attack.get("label", name),
            "family": attack["attack"], "n_reference": attack.get("n_reference", 0),
            "paper_attack": attack.get("paper_attack"),
            "paper_setting": attack.get("paper_setting"),
            **attack_metrics(scores, fprs),
        })
    return pd.DataFrame(rows)


def roc_points(scores: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """ROC of all targets pooled (each target's audit set is balanced the same way)."""
    fpr, tpr, _ = metrics.roc(scores["member"].to_numpy(), scores["score"].to_numpy())
    return fpr, tpr
