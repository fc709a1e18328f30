"""Read what the score jobs measured and turn it into rows for tables and figures: the one place
every artifact gets its metrics, intervals and audit sizes from."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from miarepro import io, metrics, uncertainty
from miarepro.artifacts.registry import COSTS
from miarepro.paths import fit_paths, model_home, replicates_of

RESULTS = "results"  # relative to the workflow's working directory


def studies_of(settings: dict[str, Any], config: dict[str, Any],
               replicates: bool = False) -> list[str]:
    """The studies an artifact reads: its ``studies`` setting, or every study; each followed
    by its further replicates (:func:`miarepro.paths.replicates_of`) with ``replicates``."""
    studies = [name for name in settings.get("studies", config["studies"])
               if "replicate_of" not in config["studies"][name]]
    if replicates:
        return [copy for name in studies for copy in replicates_of(name, config)]
    return studies


def studies_read(settings: dict[str, Any], config: dict[str, Any],
                 regime: bool = False, replicates: bool = False) -> dict[str, Any]:
    """The configs of the studies an artifact reads, with only the attacks it reads.

    An artifact naming its ``attacks`` neither reads nor reruns for the study's other attacks,
    except, for tables with a ``regime`` section, the regime's baseline.
    """
    studies = {}
    for study in studies_of(settings, config, replicates):
        study_config = config["studies"][study]
        if "attacks" in settings:
            baseline = study_config.get("regime", {}).get("baseline") if regime else None
            study_config = {**study_config, "attacks": {
                name: study_config["attacks"][name]
                for name in [*settings["attacks"], *([baseline] if baseline else [])]
                if name in study_config["attacks"]}}
        studies[study] = study_config
    return studies


def score_path(results: str, study: str, attack: str) -> Path:
    return Path(results) / "studies" / study / "scores" / f"{attack}.parquet"


def metrics_path(results: str, study: str, attack: str) -> Path:
    return Path(results) / "studies" / study / "metrics" / f"{attack}.parquet"


def target_card(results: str, study: str, target: int) -> Path:
    return Path(results) / "studies" / study / "models" / "target" / f"{target}.json"


#: attack families whose fit checks itself and may fail: a GAN still collapsed after every
#: attempt (:func:`miarepro.attacks.subpop._fit_bigan`); its card says ``good_enough``
CHECKED_FITS = ("subpop", "subpop_blackbox")


def checked_fit_cards(results: str, study: str, study_config: dict[str, Any],
                      attack: str) -> list[str]:
    """The cards of an attack's fits (one per target) where its fit checks itself, else []."""
    entry = study_config["attacks"][attack]
    if entry["attack"] not in CHECKED_FITS:
        return []
    return [f"{path}.json" for path in fit_paths(results, study, study_config, entry)]


def failed_fit(results: str, study: str, study_config: dict[str, Any],
               attack: str) -> str | None:
    """What an attack's fit measured where it failed its own check (any target's), else None:
    its scores are then those of a generator that is not the paper's, and no claim reads them."""
    for card in checked_fit_cards(results, study, study_config, attack):
        info = io.read_json(card)["info"]
        if not info.get("good_enough", True):
            tries = len(info["attempts"])
            return (f"{info['class_kept']:.0%} of the attacker's records kept their class in "
                    + ("its one attempt" if tries == 1 else f"the best of {tries} attempts")
                    + f", against {info['min_class_kept']:.0%}")
    return None


@functools.cache
def _metrics_table(results: str, study: str, attack: str) -> pd.DataFrame:
    """One attack's metrics file, read once per artifact job (tables, regime and legends all
    ask for it); callers must not modify it."""
    return io.read_table(metrics_path(results, study, attack))


@functools.cache
def attack_estimates(results: str, study: str, attack: str) -> dict[str, uncertainty.Estimate]:
    """Every metric's estimate of one attack, made once per artifact job, as the metrics file
    it reads is read once: the claims table asks for an attack's estimates once per claim and
    side (943 times for 228 attacks in the default run). Callers must not modify it."""
    return uncertainty.estimates(_metrics_table(results, study, attack))


def audit_size(results: str, study: str, attack: str) -> tuple[int, int]:
    """(members, non-members) of the smallest target audit of an attack."""
    table = _metrics_table(results, study, attack)
    points = table[table["replicate"] < 0]
    return int(points["n_members"].min()), int(points["n_nonmembers"].min())


def target_spread(results: str, study: str, attack: str, metric: str) -> tuple[float, int]:
    """(standard deviation over the study's target models, number of targets) of an attack's
    metric: the seed noise a paper's ± reports (IHA: over target models that share a pool,
    as a balanced study's do). NaN below two targets or where a target cannot resolve it."""
    points = _metrics_table(results, study, attack)
    values = points.loc[points["replicate"] < 0, metric].to_numpy(dtype=float)
    return (float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")), len(values)


def score_seconds(results: str, study: str, attack: str) -> float:
    """Seconds the attack itself took to score one target (mean over targets)."""
    table = _metrics_table(results, study, attack)
    return float(table.loc[table["replicate"] < 0, "score_seconds"].mean())


def target_seconds(results: str, study: str, attack: str) -> pd.DataFrame:
    """Per target (the index): the seconds of its scoring, of training the attack-side models
    it read and of its fit, as its score job recorded them (:func:`miarepro.pipeline.score`)."""
    table = _metrics_table(results, study, attack)
    points = table[table["replicate"] < 0].set_index("target")
    return points[["score_seconds", "model_seconds", "fit_seconds"]].astype(float)


def score_memory_mb(results: str, study: str, attack: str) -> float:
    """Peak resident memory of the job that scored the attack (MB), as it measured itself."""
    return float(_metrics_table(results, study, attack)["peak_memory_mb"].max())


def study_metrics(results: str, study: str, study_config: dict,
                  metric_names: Iterable[str]) -> pd.DataFrame:
    """One row per attack instance of a study: each metric with its 95% interval.

    Columns per metric ``m``: ``m`` (mean over targets, NaN where the audit cannot resolve it),
    ``m_low``, ``m_high`` and ``m_resolvable``; plus audit sizes, the interval method and the
    paper keys of the instance.
    """
    metric_names = list(metric_names)
    rows = []
    for name, attack in study_config["attacks"].items():
        estimates = attack_estimates(results, study, name)
        members, nonmembers = audit_size(results, study, name)
        row: dict[str, Any] = {
            "study": study, "attack": name, "label": attack.get("label", name),
            "family": attack["attack"], "n_reference": attack.get("n_reference", 0),
            "paper_attack": attack.get("paper_attack"),
            "paper_setting": attack.get("paper_setting"),
            "n_members": members, "n_nonmembers": nonmembers,
            "interval": next(iter(estimates.values())).method,
        }
        for metric in metric_names:
            row.update(estimate_columns(metric, estimates[metric]))
        rows.append(row)
    return pd.DataFrame(rows)


def estimate_columns(metric: str, estimate: uncertainty.Estimate,
                     clip: bool = True) -> dict[str, Any]:
    """``{m, m_low, m_high, m_resolvable}``; values are NaN where not resolvable.

    Rates live in [0, 1] and an advantage (TPR - FPR) in [-1, 1], so a Student-t interval
    over a few targets is clipped to the metric's range; a difference of two metrics
    (``clip=False``), a pinball loss (in score units) and a cost (minutes) are not.
    """
    low, high = estimate.interval()
    if clip and not metric.startswith("pinball") and metric not in COSTS:
        floor = -1.0 if metric.split("@")[0] == "advantage" else 0.0
        low, high = np.clip([low, high], floor, 1.0)
    shown = estimate.resolvable
    return {metric: estimate.value if shown else math.nan,
            f"{metric}_low": float(low) if shown else math.nan,
            f"{metric}_high": float(high) if shown else math.nan,
            f"{metric}_resolvable": shown}


def scaled_interval(metric: str, row: dict[str, Any]) -> dict[str, Any]:
    """A row of :func:`estimate_columns` as a plot reads it: ``value``, ``low`` and ``high``
    in the papers' units (:func:`uncertainty.percent_scale`), and ``resolvable``."""
    scale = uncertainty.percent_scale(metric)
    return {"value": scale * row[metric], "low": scale * row[f"{metric}_low"],
            "high": scale * row[f"{metric}_high"], "resolvable": row[f"{metric}_resolvable"]}


def listed_attacks(settings: dict[str, Any], config: dict[str, Any]
                   ) -> Iterator[tuple[str, dict[str, Any], str]]:
    """``(study, its config, attack)`` for each listed attack that a listed study has."""
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        for attack in settings["attacks"]:
            if attack in study_config["attacks"]:
                yield study, study_config, attack


def format_estimate(row: dict[str, Any] | pd.Series, metric: str, paper: str | None = None
                    ) -> str:
    """``4.60 [3.12, 6.01]`` in ``paper``'s unit (TPR and precision in %), or ``n/r``."""
    if not row.get(f"{metric}_resolvable", True) or pd.isna(row.get(metric)):
        return "n/r"
    scale = uncertainty.percent_scale(metric, paper)
    digits = 2 if scale == 100.0 else 4 if metric.startswith("pinball") else 3
    value, low, high = (scale * float(row[key]) for key in
                        (metric, f"{metric}_low", f"{metric}_high"))
    return f"{value:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"


def regime(results: str, study: str, study_config: dict[str, Any]) -> dict[str, Any]:
    """The target's accuracy (mean over targets, and the lowest target's train accuracy, which
    shows a target that did not train) and the study's calibration reference."""
    home = model_home(study, study_config)
    cards = [io.read_json(target_card(results, home, t)) for t in range(study_config["targets"])]
    trains = [c["train_accuracy"] for c in cards]
    train, test = float(np.mean(trains)), float(np.mean([c["test_accuracy"] for c in cards]))
    settings = study_config.get("regime", {})
    return {"train_accuracy": train, "lowest_train_accuracy": float(min(trains)),
            "test_accuracy": test, "gap": train - test,
            "reference": settings.get("reference"),
            "paper_test_accuracy": settings.get("test_accuracy"),
            "paper_gap": settings.get("gap"), "baseline": settings.get("baseline")}


def roc_points(scores: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """ROC of all targets pooled (each target's audit set is balanced the same way)."""
    fpr, tpr, _ = metrics.roc(scores["member"].to_numpy(), scores["score"].to_numpy())
    return fpr, tpr
