"""Recheck the claims table from a run's score files: a reviewer's independent recomputation.

    .venv/bin/python benchmarks/recheck_claims.py --run DIR [--config config/config.yaml]
        [--out FILE] [--repo DIR]

A verdict in ``DIR/results/artifacts/claims.csv`` is the package's metric, interval and
decision code applied to the run's scores. This recomputes it with code of its own, reading the
config and the claims' YAML as data (never importing ``miarepro``) and the score files, so that
a verdict does not rest on that code alone: each side's metric per run, the paired difference
(a ratio: its delta-method pseudo-values), its Student-t 95% interval, whether the audits
resolve the metric, the verdict (a ``versus`` side: a pair's agreement, the share of members
both attacks call alike at their thresholds for the FPR). Rechecked: orderings, parities,
ratios, bounds and equalities on one study; matched-best orders (every rival beaten at 95%, any
one failing at Bonferroni's level); predicted orders (the lower loss the better, where the
losses' interval excludes 0); trends (the ends of the axis among the studies of the row's
dataset: paired run by run on one split, else Welch); pooled rows (the studies' mean, Welch).
Costs and "not run" rows are listed as not. The chance test is not re-run: a "no signal" that
vacuous parity does not give is accepted where the interval holds what attacks at chance give
(0; a ratio 1). Exit status 1 where a verdict, the studies or the number of runs differs, or a
quantity or bound beyond a relative 1e-9.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
import yaml
from scipy import stats

REPO = Path(__file__).resolve().parent.parent
COMPARISONS = ("greater", "close", "not_below")  # paired differences; the rest bound one side
ORDERINGS, TRENDS = ("greater", "matched_best", "predicted"), ("increases", "decreases")
KINDS = (*COMPARISONS, "at_least", "at_most", "equals", *ORDERINGS[1:], *TRENDS)
RATIOS = ("ratio_at_least", "ratio_at_most")  # rechecked too; their bound has no units
CHANCE_TESTED = (*COMPARISONS, *RATIOS, *TRENDS)  # matched_best, predicted: as greater
COSTS = ("gpu_minutes", "audit_minutes", "train_minutes", "seconds")
DECISIONS = ("accuracy", "advantage", "precision", "recall")
AT_FPR = re.compile(r"^(tpr|precision|fpr)@([0-9.]+)%$")
AGREEMENT = re.compile(r"^agreement@([0-9.]+)%$")
MIN_EXCEEDANCES, MIN_RUN_EXCEEDANCES, MIN_PER_CLASS, MIN_TARGETS = 10, 2, 20, 3
CHANCE = {"auc": 0.5, "accuracy": 0.5, "advantage": 0.0, "precision": 0.5}  # else by FPR
REL_TOL, ABS_TOL = 1e-9, 1e-12  # the absolute one only for quantities at 0


class NotRechecked(Exception):
    """A row left to the package; the message says why."""


class Recheck(NamedTuple):
    """A row recomputed; ``chance``: the chance test (not re-run) could make it "no signal"."""
    quantity: float
    low: float
    high: float
    verdict: str
    runs: int
    chance: bool
    study: str  # the studies it rests on, named as the row names them


#: a row this finds no studies for, where the table found some: it reads as a mismatch
NO_STUDIES_FOUND = Recheck(math.nan, math.nan, math.nan, "no studies found", 0, False, "")


@dataclass
class Side:
    values: np.ndarray  # the side's metric in each independent run
    resolvable: bool
    exceedances: float  # non-members above threshold over the runs; 0: not poolable
    chance: float | None = None  # what an attack without signal averages at these audits


def fpr_of(metric: str) -> float | None:
    """The FPR a ``tpr@1%``, ``precision@0.1%`` or ``fpr@1%`` is read at; None otherwise."""
    match = AT_FPR.match(metric)
    return float(match.group(2)) / 100 if match else None


def rates_at(member: np.ndarray, score: np.ndarray, fpr: float) -> tuple[float, float]:
    """TPR and realised FPR at the conservative threshold: members strictly above the (k+1)-th
    highest non-member, k = floor(fpr n_out), so no more false positives pass than ``fpr``
    allows; realised FPR at the lowest flagged member (the highest threshold of that TPR)."""
    members, nonmembers = score[member], np.sort(score[~member])[::-1]
    k = math.floor(fpr * len(nonmembers) + 1e-9)
    cut = nonmembers[k] if k < len(nonmembers) else -np.inf
    flagged = members[members > cut]
    return ((len(flagged) / len(members), float((nonmembers >= flagged.min()).mean()))
            if len(flagged) else (0.0, 0.0))


def precision_at(member: np.ndarray, score: np.ndarray, fpr: float) -> float:
    """Precision at the conservative threshold: TPR over TPR plus the realised FPR (1/2 where
    nothing is flagged)."""
    tpr, realised = rates_at(member, score, fpr)
    return tpr / (tpr + realised) if tpr + realised > 0 else 0.5


def calls_at(member: np.ndarray, score: np.ndarray, fpr: float) -> np.ndarray:
    """Member calls at the conservative threshold: strictly above the (k+1)-th highest
    non-member, k = floor(fpr n_out)."""
    nonmembers = np.sort(score[~member])[::-1]
    k = math.floor(fpr * len(nonmembers) + 1e-9)
    return score > (nonmembers[k] if k < len(nonmembers) else -np.inf)


def nominal_chance(metric: str) -> float | None:
    """What an attack without signal scores on ``metric`` nominally: TPR at FPR a, a; AUC,
    accuracy and precision 1/2; advantage 0; None for the rest."""
    return fpr_of(metric) if metric.startswith("tpr@") else CHANCE.get(metric.split("@")[0])


def chance_at(group: pd.DataFrame, metric: str, draws: int = 2000) -> float | None:
    """What an attack without signal averages on ``metric`` at this target's audit, where
    that is not the nominal level: TPR at FPR a passes the (k+1)-th highest non-member, above
    which a share (k + 1) / (n_out + 1) of a common score distribution lies on average;
    precision at FPR a by simulation (scores drawn alike for members and non-members). None
    elsewhere, where the nominal level is taken: AUC, a decision's accuracy and advantage
    average it without signal (a decision's precision too on a balanced audit; the package's
    null draws also average these within their Monte Carlo error, about 3e-4 for AUC)."""
    fpr = fpr_of(metric)
    if fpr is None or metric.startswith("fpr@"):
        return None
    member = group["member"].to_numpy(bool)
    n_out = int((~member).sum())
    if metric.startswith("tpr@"):
        return (math.floor(fpr * n_out + 1e-9) + 1) / (n_out + 1)
    rng = np.random.default_rng(0)
    return float(np.mean([precision_at(member, rng.random(len(member)), fpr)
                          for _ in range(draws)]))


def rank_auc(member: np.ndarray, score: np.ndarray) -> float:
    """AUC as Mann-Whitney's statistic with average ranks: ties count half."""
    n_in, n_out = member.sum(), (~member).sum()
    return float((stats.rankdata(score)[member].sum() - n_in * (n_in + 1) / 2) / (n_in * n_out))


def target_value(group: pd.DataFrame, metric: str) -> float:
    """One target's ``metric`` from its scores file rows."""
    member, score = group["member"].to_numpy(bool), group["score"].to_numpy(float)
    if metric == "auc":
        return rank_auc(member, score)
    if metric.startswith(("pinball@", "fpr@")):  # per-sample columns, non-members' mean
        return float(group.loc[~member, metric].to_numpy(float).mean())
    if (fpr := fpr_of(metric)) is not None:
        return (rates_at(member, score, fpr)[0] if metric.startswith("tpr@")
                else precision_at(member, score, fpr))
    base, _, level = metric.partition("@cal")  # Stolen Memories' decisions on its audits
    calls = group["decision" + (f"@cal{level}" if level else "")].to_numpy(bool)
    tpr, fpr = calls[member].mean(), calls[~member].mean()  # advantage: Yeom et al.'s
    return float({"accuracy": (calls == member).mean(), "advantage": tpr - fpr, "recall": tpr,
                  "precision": calls[member].sum() / calls.sum() if calls.any() else 0.5}[base])


def exceedances(metric: str, n_in: int, n_out: int) -> float:
    """Non-members above the threshold the metric rests on in one audit: floor(n_out a)
    (inf without an FPR; 0 under 20 per class); precision@calNN rests on FPR 1 - NN%."""
    if min(n_in, n_out) < MIN_PER_CLASS:
        return 0.0
    fpr = fpr_of(metric)
    if metric.startswith("precision@cal"):
        fpr = 1 - float(metric.removeprefix("precision@cal")) / 100
    return math.inf if fpr is None else float(math.floor(n_out * fpr + 1e-9))


def decide(kind: str, low: float, high: float, value: float, margin: float) -> str:
    """Where the interval lies against the claimed bound (``value``, ``margin`` as fractions)."""
    kind = "greater" if kind in (*ORDERINGS, *TRENDS) else kind.removeprefix("ratio_")
    if kind in ("close", "equals"):
        centre, width = (0.0, value) if kind == "close" else (value, margin)
        holds = centre - width <= low and high <= centre + width
        fails = low > centre + width or high < centre - width
    else:
        holds, fails = {"greater": (low > 0, high < 0), "at_most": (high <= value, low > value),
                        "not_below": (low >= -value, high < -value),
                        "at_least": (low >= value, high < value)}[kind]
    return "holds" if holds else "fails" if fails else "inconclusive"


def interval(parts: list[np.ndarray], weights: list[float], level: float = 0.95
             ) -> tuple[float, float, float]:
    """sum w mean(part), parts independent (studies trained apart), with a Student-t interval
    from each part's standard error over its runs and Welch-Satterthwaite's degrees of freedom;
    one part gives the plain interval over its n - 1."""
    pairs = list(zip(weights, parts, strict=True))
    value = float(sum(w * p.mean() for w, p in pairs))
    errors = [abs(w) * p.std(ddof=1) / math.sqrt(len(p)) for w, p in pairs]
    variance = sum(e**2 for e in errors)
    dof = (variance**2 / sum(e**4 / (len(p) - 1) for e, p in zip(errors, parts, strict=True))
           if variance > 0 else math.inf)
    half = stats.t.ppf(0.5 + level / 2, dof) * math.sqrt(variance)
    return value, value - half, value + half


def scale(claim: dict[str, Any], paper: str) -> float:
    """100 where the paper prints the metric in percent (the claim's bounds are in its units)."""
    metric = claim["metric"]
    percent = (fpr_of(metric) is not None or metric.split("@")[0] in DECISIONS
               or (metric == "auc" and paper == "subpop"))
    return 100.0 if percent and claim["kind"] not in RATIOS else 1.0


def judge(claim: dict[str, Any], paper: str, parts: list[np.ndarray], weights: list[float],
          resolvable: bool, study: str) -> Recheck:
    """The interval of ``interval(parts, weights)`` and the verdict it gives on the claim."""
    kind, (mean, low, high) = claim["kind"], interval(parts, weights)
    value, margin = ((claim.get(key) or 0.0) / scale(claim, paper) for key in ("value", "margin"))
    verdict = decide(kind, low, high, value, margin) if resolvable else "not resolvable"
    chance = resolvable and kind in CHANCE_TESTED and low <= float(kind in RATIOS) <= high
    return Recheck(mean, low, high, verdict, min(map(len, parts)), chance, study)


class Run:
    """A finished run's scores, each (study copy, attack) file read once."""

    def __init__(self, results: Path, config: dict[str, Any]) -> None:
        self.results, self.config, self.studies = results, config, config["studies"]
        self._targets: dict[tuple[str, str], list[pd.DataFrame]] = {}

    def targets(self, copy: str, attack: str) -> list[pd.DataFrame]:
        """One attack's scores in one study copy, target by target (read once: sides share)."""
        if (copy, attack) not in self._targets:
            path = self.results / "studies" / copy / "scores" / f"{attack}.parquet"
            if not path.exists():
                raise NotRechecked("score file missing")
            self._targets[copy, attack] = [g for _, g in pd.read_parquet(path).groupby("target")]
        return self._targets[copy, attack]

    def side(self, study: str, names: tuple[str, ...], metric: str) -> Side:
        """A side's metric per run: a partition study's targets are its runs; a balanced
        study's targets share one pool, so its runs are its copies (at least the top-level
        ``replicates``). A ``sum_over`` side (several names) is summed run by run."""
        cfg = self.studies[study]
        split = cfg.get("split") or self.studies[cfg["models_from"]]["split"]
        partition = split["scheme"] == "partition"
        count = 1 if partition else max(cfg.get("replicates", 1), self.config.get("replicates", 1))
        if (match := AGREEMENT.match(metric)) is not None:
            return self.agreement(study, names, float(match.group(1)) / 100, partition, count)
        parts = []
        for name in names:
            values, resolvable, runs, chances = [], True, [], []
            for copy in [study] + [f"{study}-r{r}" for r in range(1, count)]:
                groups = self.targets(copy, name)
                per_target = [target_value(g, metric) for g in groups]
                chances += [chance_at(g, metric) for g in groups]
                exceeding = exceedances(metric, min(int(g["member"].sum()) for g in groups),
                                        min(int((~g["member"]).sum()) for g in groups))
                resolvable &= exceeding >= MIN_EXCEEDANCES
                # pooled over runs (targets, then copies) only where each has 2 or more
                runs.append(exceeding * len(groups) if exceeding >= MIN_RUN_EXCEEDANCES else 0)
                values += per_target if partition else [float(np.mean(per_target))]
            if len(values) < (MIN_TARGETS if partition else 2):
                raise NotRechecked("too few runs: a bootstrap interval")
            parts.append(Side(np.array(values), resolvable,
                              sum(runs) if min(runs) >= MIN_RUN_EXCEEDANCES else 0.0,
                              None if None in chances else float(np.mean(chances))))
        if len(parts) == 1:
            return parts[0]
        return Side(sum(p.values for p in parts), all(p.resolvable for p in parts),
                    min(p.exceedances for p in parts))  # a sum: its nominal chance

    def agreement(self, study: str, pair: tuple[str, ...], fpr: float, partition: bool,
                  count: int) -> Side:
        """A ``versus`` side: the share of members both attacks of ``pair`` call alike at their
        thresholds for ``fpr``, per run (as :meth:`side`), on the records both scored."""
        values, resolvable = [], True
        for copy in [study] + [f"{study}-r{r}" for r in range(1, count)]:
            per_target = []
            for first, second in zip(*(self.targets(copy, name) for name in pair), strict=True):
                both = first.merge(second, on="sample", suffixes=("", "_b"))
                member = both["member"].to_numpy(bool)
                same = (calls_at(member, both["score"].to_numpy(float), fpr)
                        == calls_at(member, both["score_b"].to_numpy(float), fpr))
                per_target.append(float(same[member].mean()))
                resolvable &= exceedances(f"tpr@{100 * fpr:g}%", int(member.sum()),
                                          int((~member).sum())) >= MIN_EXCEEDANCES
            values += per_target if partition else [float(np.mean(per_target))]
        if len(values) < (MIN_TARGETS if partition else 2):
            raise NotRechecked("too few runs: a bootstrap interval")
        return Side(np.array(values), resolvable, 0.0)

    def instances(self, study: str, claim: dict[str, Any]) -> list[tuple[str, ...]]:
        """Each side's attack instances: the paper attack at its setting (or the artifact's
        default), on the records of the first side that scores a subset (IHA's CG on 200),
        so both sides see the same records; a ``sum_over`` side's at every setting."""
        attacks = self.studies[study]["attacks"]
        default = self.config["artifacts"].get(claim["artifact"], {}).get("default_setting", "")
        specs = [claim["a"]] + ([claim["b"]] if claim.get("b") else [])

        def scored(name: str | None) -> int | None:
            attack = attacks.get(name, {})
            return attack.get("records") or attack.get("loo_records")

        def find(spec: dict[str, str], records: int | None) -> str | None:
            found = [n for n, a in attacks.items() if a.get("paper_attack") == spec["attack"]
                     and (a.get("paper_setting") or default) == spec.get("setting", "")]
            return next((n for n in found if scored(n) == records), found[0] if found else None)

        shared = next((records for spec in specs if "sum_over" not in spec
                       and (records := scored(find(spec, None)))), None)
        names = [tuple(n for n, a in attacks.items() if a.get("paper_attack") == spec["attack"]
                       and (a.get("paper_setting") or "").startswith(f"{spec['sum_over']}="))
                 if "sum_over" in spec else tuple(filter(None, [
                     find(spec, shared), *([find({"attack": spec["versus"]}, shared)]
                                           if "versus" in spec else [])]))
                 for spec in specs]
        if not all(names) or any(len(n) < 2 for n, spec in zip(names, specs, strict=True)
                                 if "versus" in spec):
            raise NotRechecked("attack instance not in the config")
        return names

    def quantity(self, study: str, claim: dict[str, Any], names: list[tuple[str, ...]]
                 ) -> tuple[np.ndarray, bool, list[Side], list[str]]:
        """The compared quantity in each run (a - b; a ratio's pseudo-values R + (a - R b) /
        mean(b), whose spread is R's, not that of a / b run by run; or a), whether the audits
        resolve it, each side and its metric."""
        kind = claim["kind"]
        metrics = [s.get("metric", claim["metric"])
                   for s in (claim["a"], claim.get("b") or claim["a"])][:len(names)]
        sides = [self.side(study, n, m) for n, m in zip(names, metrics, strict=True)]
        values, resolvable = sides[0].values, all(side.resolvable for side in sides)
        if kind in RATIOS:
            ratio = values.mean() / sides[1].values.mean()
            values = ratio + (values - ratio * sides[1].values) / sides[1].values.mean()
        elif len(sides) > 1:
            values = values - sides[1].values
        if (kind in ORDERINGS and not resolvable
                and min(s.exceedances for s in sides) >= MIN_EXCEEDANCES
                and all(m.startswith(("tpr@", "precision@")) and fpr_of(m) is not None
                        for m in metrics)):
            resolvable = True  # an ordering at low FPR, decided over the runs pooled
        return values, resolvable, sides, metrics

    def judged(self, study: str, claim: dict[str, Any], names: list[tuple[str, ...]],
               paper: str) -> Recheck:
        """A claim on one study, from its sides' instances ``names``."""
        values, resolvable, sides, metrics = self.quantity(study, claim, names)
        ours = judge(claim, paper, [values], [1.0], resolvable, study)
        if vacuous(claim, paper, ours, sides, metrics):
            return ours._replace(verdict="no signal")
        return ours

    def recheck(self, row: pd.Series, claim: dict[str, Any]) -> Recheck:
        """The row's quantity, its interval, the verdict they give and the runs they rest on."""
        study, paper, kind = row["study"], row["paper"], claim["kind"]
        if claim.get("pooled") or kind in TRENDS:
            return (self.pooled if claim.get("pooled") else self.trend)(row, claim)
        names, ordering = self.instances(study, claim), {**claim, "kind": "greater"}
        if kind == "matched_best":  # beats every rival (another study's references): each at
            # 95%; fails where one loses at Bonferroni's level; shown against it, else the
            # rival with the lowest lower bound
            pairs = [[names[0], (n,)] for n, a in self.studies[study]["attacks"].items()
                     if a.get("reference_study") and a.get("paper_attack") == claim["a"]["attack"]]
            found = [self.judged(study, ordering, pair, paper) for pair in pairs]
            if "not resolvable" in (words := [f.verdict for f in found]):
                return found[words.index("not resolvable")]
            highs = np.array([interval([self.quantity(study, ordering, pair)[0]], [1.0],
                                       1 - 0.05 / len(pairs))[2] for pair in pairs])
            if (highs < 0).any():  # a NaN bound (a missing value) neither fails nor hides
                return found[int(np.argmin(np.where(highs < 0, highs, np.inf)))]._replace(
                    verdict="fails")
            lows = np.nan_to_num([f.low for f in found], nan=-np.inf)
            return found[int(np.argmin(lows))]._replace(
                verdict="holds" if set(words) == {"holds"} else "inconclusive",
                chance=all(f.chance for f in found))
        if kind == "predicted":  # greater, of the side with the lower loss where told apart
            gap, known, *_ = self.quantity(study, {**ordering, "metric": claim["predictor"]},
                                           names[::-1])  # loss b - loss a
            _, low, high = interval([gap], [1.0])
            known = known and not np.isnan([low, high]).any()  # NaN: a loss is missing
            if known and not low <= 0.0 <= high:
                return self.judged(study, ordering, names[::1 if low > 0 else -1], paper)
            ours = self.judged(study, ordering, names, paper)  # no prediction: no quantity
            return ours._replace(quantity=math.nan, low=math.nan, high=math.nan, verdict=(
                "inconclusive" if known and ours.verdict != "not resolvable" else "not resolvable"))
        return self.judged(study, claim, names, paper)

    def standing_for(self, row: pd.Series, claim: dict[str, Any]) -> list[str]:
        """The studies of the row's paper that stand for its dataset in the claim's artifact
        (the artifact's ``paper_dataset`` where it runs a study as a stand-in), in config order,
        their target of an architecture the claim is made for."""
        settings = self.config["artifacts"].get(claim["artifact"], {})
        stand_in = settings.get("paper_dataset")
        return [study for study, cfg in self.studies.items() if cfg["paper"] == row["paper"]
                and cfg.get("model", {}).get("arch") in claim.get("architectures", [
                    cfg.get("model", {}).get("arch")])
                and (stand_in if stand_in and study in settings.get("studies", ())
                     else cfg.get("paper_dataset")) == row["paper_dataset"]]

    def trend(self, row: pd.Series, claim: dict[str, Any]) -> Recheck:
        """The attack's metric where ``over`` (DP epsilon; training-set size, from the first
        target's card) is largest against where smallest: run by run where both studies audit
        one split (dataset, split and non-members alike), else Welch from each one's runs."""
        axis, points = {"epsilon": "epsilon", "train_size": "records"}[claim["over"]], []
        for study in self.standing_for(row, claim):
            cfg = self.studies[study]
            card = self.results / "studies" / cfg.get("models_from", study) / "models/target/0.json"
            dp = (cfg.get("training") or {}).get("dp")
            level = (dp["epsilon"] if dp else None) if claim["over"] == "epsilon" else (
                json.loads(card.read_text())["n_train"] if card.exists() else None)
            attack = next((name for name, a in cfg["attacks"].items()
                           if a.get("paper_attack") == claim["a"]["attack"] and (
                               (setting := a.get("paper_setting") or "") == claim["a"].get(
                                   "setting", "") or setting.startswith(f"{axis}="))), None)
            if level is not None and attack:
                points.append((float(level), study, attack))
        if len({level for level, _, _ in points}) < 2:  # the table found two ends: a mismatch
            return NO_STUDIES_FOUND
        ends = [max(points), min(points)]
        sides = [self.side(study, (attack,), claim["metric"]) for _, study, attack in ends]
        values = [side.values for side in sides[::1 if claim["kind"] == "increases" else -1]]
        audited = [tuple(self.studies[s].get(k) for k in ("dataset", "split", "nonmembers"))
                   for _, s, _ in ends]
        paired = (audited[0] == audited[1] and audited[0][1] is not None
                  and len(values[0]) == len(values[1]))
        return judge(claim, row["paper"], [values[0] - values[1]] if paired else values,
                     [1.0] if paired else [1.0, -1.0], all(s.resolvable for s in sides),
                     f"{ends[0][1]} vs {ends[1][1]}")

    def pooled(self, row: pd.Series, claim: dict[str, Any]) -> Recheck:
        """A claim the paper states on average over its settings: the mean over the studies
        that stand for the row's dataset and run its attacks of each one's paired quantity,
        Welch from each study's runs (studies trained apart)."""
        found = []
        for study in self.standing_for(row, claim):
            with contextlib.suppress(NotRechecked):  # a study without them: the row's "not run"
                found.append((study, self.instances(study, claim)))
        if not found:  # the table found some: a mismatch
            return NO_STUDIES_FOUND
        quantities = [self.quantity(study, claim, names) for study, names in found]
        ours = judge(claim, row["paper"], [q[0] for q in quantities], [1 / len(found)] * len(
            found), all(q[1] for q in quantities), ", ".join(study for study, _ in found))
        if all(vacuous(claim, row["paper"], ours, q[2], q[3]) for q in quantities):
            return ours._replace(verdict="no signal")  # in every study, as the package judges
        return ours


def vacuous(claim: dict[str, Any], paper: str, ours: Recheck, sides: list, metrics: list
            ) -> bool:
    """A parity an attack at chance would pass too: the reference side (b of ``not_below``,
    how far above chance; the farther of ``close``'s two) within the tolerance plus the
    interval's half-width of chance, chance being what an attack without signal averages at
    the side's audits (:func:`chance_at`) or the metric's nominal level."""
    kind = claim["kind"]
    if kind not in ("close", "not_below") or ours.verdict in ("fails", "not resolvable"):
        return False
    reaches = [s.values.mean() - level if kind == "not_below" else abs(s.values.mean() - level)
               for s, m in list(zip(sides, metrics, strict=True))[kind == "not_below":]
               if (level := nominal_chance(m) if s.chance is None else s.chance) is not None]
    return bool(reaches) and max(reaches) <= (claim["value"] / scale(claim, paper)
                                              + (ours.high - ours.low) / 2)


def out_of_scope(row: pd.Series, claim: dict[str, Any]) -> str | None:
    """Why a row is left to the package, or None where this rechecks it."""
    if row["verdict"] == "not run":
        return "not run in the table"
    if claim["metric"] in COSTS:
        return "cost metric (timing, not scores)"
    return None if claim["kind"] in (*KINDS, *RATIOS) else f"kind {claim['kind']}"


def report(run_dir: Path, repo: Path, config_path: Path) -> tuple[str, bool]:
    """The Markdown report, and whether every rechecked row agrees."""
    config = yaml.safe_load(config_path.read_text())
    claims = {(path.stem, entry["id"]): entry
              for path in sorted((repo / "miarepro/artifacts/claims").glob("*.yaml"))
              for entry in yaml.safe_load(path.read_text()) or []}
    table = pd.read_csv(run_dir / "results/artifacts/claims.csv")
    run, skipped, mismatches = Run(run_dir / "results", config), defaultdict(list), []
    rechecked = identical = agreeing = by_chance = 0
    for _, row in table.iterrows():
        claim = claims[row["paper"], row["claim"]]
        try:
            if reason := out_of_scope(row, claim):
                raise NotRechecked(reason)
            ours = run.recheck(row, claim)
        except NotRechecked as why:
            skipped[str(why)].append(row["claim"] + (f" ({row['study']})" if isinstance(
                row["study"], str) else ""))
            continue
        theirs = (row["quantity"], row["quantity_low"], row["quantity_high"], row["verdict"],
                  int(row["replicates"]))
        quantity_ok = all(math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)
                          or (math.isnan(a) and math.isnan(b))
                          for a, b in zip(ours[:3], theirs[:3], strict=True))
        # "no signal" by the chance test (not re-run) needs the interval to hold chance's 0 (1)
        chance = theirs[3] == "no signal" != ours.verdict and ours.chance
        rechecked, identical, by_chance = rechecked + 1, identical + quantity_ok, by_chance + chance
        agreeing += ours.verdict == theirs[3]
        if not (quantity_ok and ours.runs == theirs[4] and ours.study == row["study"]
                and (chance or ours.verdict == theirs[3])):
            mismatches.append((row["claim"], row["study"], theirs, ours))

    def shown(q: tuple) -> str:
        return f"{q[0]:.10g} [{q[1]:.10g}, {q[2]:.10g}], {q[4]} runs"

    lines = [f"# Claims recheck: {run_dir}", "",
             f"- rechecked from the score files: {rechecked} of {len(table)} rows",
             f"- quantity and interval identical (relative {REL_TOL:g}): {identical}",
             f"- verdicts agreeing: {agreeing} of {rechecked - by_chance}"
             + (f"; {by_chance} more \"no signal\" rest on the chance test (not re-run), their "
                "intervals holding 0 (a ratio's 1) as it requires" if by_chance else ""),
             f"- not rechecked: {sum(map(len, skipped.values()))}",
             *(f"  - {reason}: {len(rows)}: {'; '.join(rows)}"
               for reason, rows in sorted(skipped.items(), key=lambda kv: -len(kv[1]))),
             f"- mismatches: {len(mismatches)}", ""]
    if mismatches:
        lines += ["| claim | study | table quantity [low, high], runs | table verdict "
                  "| recomputed | recomputed verdict |", "|---|---|---|---|---|---|"]
        lines += [f"| {claim} | {study} | {shown(theirs)} | {theirs[3]} | {shown(ours)}"
                  + ("" if ours.study == study else f" on {ours.study}") + f" | {ours.verdict} |"
                  for claim, study, theirs, ours in mismatches] + [""]
    return "\n".join(lines), not mismatches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, required=True, help="a finished run's directory")
    parser.add_argument("--config", type=Path, default=Path("config/config.yaml"),
                        help="the run's config; a relative path is under --repo")
    parser.add_argument("--out", type=Path, help="also write the report here")
    parser.add_argument("--repo", type=Path, default=REPO, help="the repository root")
    args = parser.parse_args()
    text, agree = report(args.run, args.repo, args.repo / args.config)
    print(text)
    if args.out:  # whole or not at all (this script imports nothing of the package's io)
        partial = args.out.with_name(f".{args.out.name}.part")
        partial.write_text(text + "\n")
        os.replace(partial, args.out)
    sys.exit(0 if agree else 1)


if __name__ == "__main__":
    main()
