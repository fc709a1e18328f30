"""The papers' headline claims as checkable statements, evaluated on this run's results.

``claims/<paper>.yaml`` lists each claim: an ordering of two attacks at one metric
(``greater``), an equivalence within a stated margin (``close``: "no significant difference"),
an ordering the paper's own numbers cannot tell from a tie, so that only a reversal beyond its
noise contradicts it (``not_below``: "on a par or better", ``a >= b - value``),
a bound on one attack (``at_least`` / ``at_most``) or on the ratio of two (``ratio_at_least``,
``ratio_at_most``: with ``metric: gpu_minutes``, ``train_minutes`` or ``audit_minutes`` a
cost, the minutes an attack needs, or ``seconds``, its scoring time per target, with the run's
timing noise as its interval: :func:`_measure`; over replicates, on the log scale),
a value a theorem promises, within a ``margin`` (``equals``: QMIA's FPR = a), a trend of one
attack across studies (``increases`` / ``decreases`` ``over`` the DP ``epsilon`` or the target's
``train_size``: its metric where that value is largest against where it is smallest, two
studies trained apart, paired target by target where they share a split:
:func:`miarepro.uncertainty.difference_across_studies`),
or that an attack does best with reference models of the target's own architecture
(``matched_best``: it beats every one of the study's instances of the same attack that take
their references from another study: :func:`matched_best_verdict`), the artifact that shows it
and the paper datasets it is made for. A claim the paper states on average over its settings
(``pooled``) is decided once per paper dataset, on the mean over its studies of the quantity
it bounds (:func:`_pooled_rows`). A side may be a sum (``sum_over: layer``: the attack's
advantage on every layer alone, added replicate by replicate), or a pair's agreement
(``versus``: the share of members on which the side's attack and that one make the same call
at the FPR of ``agreement@30%``, IHA's Table 5: :func:`_agreement`; it has no chance level, as
two attacks without signal agree by their TPRs, so it never reads "no signal"). Attacks are
named as in the papers' tables
(``paper_attack`` and ``paper_setting`` of a study's attack instances), so one claims file
serves the miniature and the full-scale configurations alike.
The paper's own numbers come from ``paper_values.csv``; nothing is typed in twice.

A claim is evaluated on every study of its paper whose ``paper_dataset`` it lists. The compared
quantity (difference, value or ratio) gets the 95% interval of :mod:`miarepro.uncertainty`,
paired across the two attacks: over the study's replicates where it runs several (a Student-t
interval of replicate-level differences, which holds the variance of training: a partition
study's repetitions, a balanced study's generated copies), else over its audited records (one
trained realisation). ``claims.csv`` says how many replicates each row rests on. The verdicts
form a closed vocabulary (:data:`VERDICTS`):

- **holds**: the whole interval lies on the claimed side (an ``equals`` claim: within its
  ``margin`` of the promised value, so a wide interval that merely contains the value does
  not hold);
- **fails**: it lies wholly on the other side (``equals``: wholly beyond the margin);
- **inconclusive**: it straddles the claimed boundary;
- **not resolvable**: the audit cannot resolve the metric (too few non-members for a TPR at
  that FPR, or too few members or non-members), so there is no interval to read;
- **no signal**: an ordering or parity of attacks whose every side is indistinguishable from
  chance (its value lies within what the audit's records give an attack without signal, over
  every replicate's records at once: :meth:`miarepro.uncertainty.Estimate.consistent_with_chance`)
  and which the paired comparison
  cannot tell apart either (its interval contains no difference): such a claim cannot be
  tested, and a "holds" there would be vacuous. Sides at chance that the paired interval
  does tell apart (replicates move together) are tested like any others. So is a parity
  that an attack at chance would pass too (:func:`vacuous_parity`): it could not fail;
- **not run**: this run has no study for the claim's datasets, or the study lacks one of its
  attacks; the row says which. No claim of a paper the run covers is left out.

A holds, fails or inconclusive that rests on replicates also gets ``replication``: the chance
that a rerun of the experiment under new seeds gives the same verdict (:func:`replication`),
so that a reviewer can tell a verdict far from its boundary from one a rerun may well turn.
"""

from __future__ import annotations

import operator
import re
import string
import zlib
from dataclasses import dataclass, replace
from functools import cache, reduce
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from miarepro import io, uncertainty
from miarepro.artifacts import builders, catalog, regime
from miarepro.artifacts import results as res
from miarepro.artifacts.iha_tables import member_agreement, paper_agreement
from miarepro.artifacts.registry import AUDIT_MINUTES, COMPUTE, COSTS, SECONDS, TRAIN_MINUTES
from miarepro.paths import independent_runs, model_home, replicates_of
from miarepro.uncertainty import Estimate

CLAIMS_DIR = Path(__file__).resolve().parent / "claims"
KINDS = ("greater", "close", "not_below", "at_least", "at_most", "ratio_at_least",
         "ratio_at_most", "matched_best", "equals", "increases", "decreases", "predicted")
#: kinds comparing one attack across the studies of a paper dataset, along ``over``
TRENDS = ("increases", "decreases")
#: what a trend runs over: the target's DP epsilon (studies without DP are not on the axis)
#: or its training-set size (from the target's card); and the ``paper_setting`` key that names
#: a study's point on that axis where it is not the paper's default setting: Figure 12's DP
#: targets by their epsilon, Figure 7's Adult subsets by their records (the full-size Adult
#: target of Figures 10 and 11 has no setting, so those figures' claims read it alone)
OVER = {"epsilon": "epsilon", "train_size": "records"}
#: kinds whose ``value`` is a tolerance taken from the paper: ``basis`` says how
TOLERANCES = ("close", "not_below")
VERDICTS = ("holds", "fails", "inconclusive", "not resolvable", "no signal", "not run")
#: kinds that compare attacks (an ordering, a parity or a ratio), which chance cannot test
COMPARISONS = ("greater", "close", "not_below", "ratio_at_least", "ratio_at_most",
               "matched_best", "predicted", *TRENDS)
KEYS = {"id", "artifact", "statement", "metric", "kind", "a", "b", "value", "basis", "datasets",
        "over", "margin", "pooled", "architectures", "predictor"}
#: keys every claim has
REQUIRED_KEYS = ("id", "artifact", "statement", "metric", "kind", "a", "datasets")
#: the metrics a claim can read: a metrics table's columns (a rate at an FPR, a calibrated
#: decision's) and the costs; a misspelt one would read "not run: needs it measured"
METRIC = re.compile(r"(auc|(tpr|precision|fpr|pinball|agreement)@\d+(\.\d+)?%"
                    r"|(accuracy|advantage|precision|recall)(@cal\d+)?)")
#: an attack side names the paper's attack and setting, and may measure it by another metric
#: than the claim's (Stolen Memories: one attack's calibrated against uncalibrated precision);
#: ``sum_over: layer`` makes it the sum of the metric over every instance of the attack at a
#: setting of that key (``layer=1``, ``layer=2``, ...): Stolen Memories' "all the individual
#: layers combined"; ``versus`` makes it the agreement of the attack with another on members
#: (:data:`AGREEMENT`)
SIDE_KEYS = {"attack", "setting", "metric", "sum_over", "versus"}
#: a pair's decision agreement on members at an FPR (IHA Table 5): every side names a ``versus``
AGREEMENT = re.compile(r"agreement@(\d+(\.\d+)?)%")
#: the kinds an agreement can be read by: compared between two pairs, or bounded
AGREEMENT_KINDS = ("greater", "close", "not_below", "at_least", "at_most")


class Pair(NamedTuple):
    """A ``versus`` side's two attack instances in a study."""
    first: str
    second: str


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    artifact: str
    statement: str
    metric: str
    kind: str
    a: dict[str, str]
    b: dict[str, str] | None
    value: float | None
    datasets: tuple[str, ...]
    basis: str = ""  # how a tolerance (``close``, ``not_below``, ``margin``) is chosen
    over: str = ""  # a trend's axis (:data:`OVER`)
    margin: float | None = None  # ``equals``: how far from ``value`` still counts as it
    #: the paper states it on average over the settings its dataset's studies run
    #: (Stolen Memories' three training-set sizes): one row, on the mean of their quantities
    pooled: bool = False
    #: the target architectures the paper makes it for ("on all convolutional models"): a
    #: study whose target is another one (an MLP standing in for a LeNet) does not stand for it
    architectures: tuple[str, ...] = ()
    #: ``predicted``: the loss whose ordering of the two sides predicts the metric's (QMIA's
    #: pinball loss: the lower, the better attack)
    predictor: str = ""

    def holds_on(self, a: float, b: float | None, loss_a: float | None = None,
                 loss_b: float | None = None) -> bool:
        """The claim evaluated on point values (in the paper's units); for a trend, ``a`` is
        the metric where ``over`` is largest and ``b`` where it is smallest; ``predicted``
        also reads the two sides' losses at ``predictor``."""
        if self.kind == "equals":  # within the margin the verdict allows
            return abs(a - self.value) <= self.margin
        if self.kind == "predicted":  # the lower loss goes with the higher metric
            return (a - b) * (loss_b - loss_a) > 0
        return _compare(self.kind, a, b, self.value)

    def side_metrics(self, sides: int = 2) -> list[str]:
        """The metric each of ``sides`` sides is read at: a's, then b's (a's for the rivals
        of ``matched_best``, which has no b)."""
        first, other = (side.get("metric", self.metric) for side in (self.a, self.b or self.a))
        return [first] + [other] * (sides - 1)


def parse_claims(paper: str, text: str) -> list[Claim]:
    """Parse and validate one paper's claims file; errors name the claim and the key."""
    from miarepro.artifacts.catalog import ARTIFACT_IDS
    from miarepro.models import ARCHITECTURES
    from miarepro.options import unknown

    claims: list[Claim] = []
    for entry in io.read_yaml(text) or []:
        where = f"claims/{paper}.yaml: {entry.get('id', '?')}"
        strange = sorted(set(entry) - KEYS)
        if strange:
            raise ValueError(f"{where}: unknown key(s) {strange}; known: {sorted(KEYS)}")
        missing = [key for key in REQUIRED_KEYS if key not in entry]
        if missing:
            raise ValueError(f"{where}: missing key(s) {missing}")
        if any(claim.id == entry["id"] for claim in claims):
            raise ValueError(f"{where}: a second claim with this id")
        if not isinstance(entry["datasets"], list):
            raise ValueError(f"{where}: datasets: a list of the paper's datasets, such as "
                             "[purchase100]")
        for key in ("value", "margin"):
            if key in entry and (isinstance(entry[key], bool)
                                 or not isinstance(entry[key], int | float)):
                raise ValueError(f"{where}: {key}: a number, got {entry[key]!r}")
        for metric in [entry["metric"], entry.get("predictor")] + [
                (entry.get(side) or {}).get("metric") for side in ("a", "b")]:
            if metric is not None and metric not in COSTS and not METRIC.fullmatch(
                    str(metric)):
                raise ValueError(f"{where}: metric {metric!r} is none a metrics table has "
                                 "(auc, tpr@1%, precision@0.1%, fpr@1%, pinball@1%, accuracy, "
                                 f"advantage@cal99, ...) nor a cost {list(COSTS)}")
        kind = entry.get("kind")
        if kind not in KINDS:
            raise ValueError(f"{where}: kind {kind!r}; known: {list(KINDS)}")
        needs_b = kind in ("greater", "close", "not_below", "ratio_at_least", "ratio_at_most",
                           "predicted")
        needs_value = kind not in ("greater", "matched_best", "predicted", *TRENDS)
        if (kind == "predicted") != ("predictor" in entry):
            raise ValueError(f"{where}: " + ("kind 'predicted' needs a 'predictor' (the loss "
                                             "whose ordering predicts the metric's)"
                                             if kind == "predicted"
                                             else f"kind {kind!r} takes no 'predictor'"))
        over = entry.get("over")
        if kind in TRENDS and over is None:
            raise ValueError(f"{where}: kind {kind!r} needs 'over' (one of {list(OVER)})")
        if kind in TRENDS and over not in OVER:
            raise ValueError(f"{where}: over {over!r}; known: {list(OVER)}")
        if kind not in TRENDS and over is not None:
            raise ValueError(f"{where}: kind {kind!r} is not a trend: 'over' is for "
                             f"{list(TRENDS)}")
        if needs_b != ("b" in entry) or needs_value != ("value" in entry):
            raise ValueError(f"{where}: kind {kind!r} needs "
                             + ("a, b" if needs_b else "a") + (" and value" if needs_value else ""))
        if entry.get("pooled") and kind in (*TRENDS, "matched_best", "predicted"):
            raise ValueError(f"{where}: kind {kind!r} cannot be pooled over studies")
        if (kind == "equals") != ("margin" in entry):
            raise ValueError(f"{where}: " + ("kind 'equals' needs a 'margin' (how far from the "
                                             "value still counts as it)" if kind == "equals"
                                             else f"kind {kind!r} takes no 'margin'"))
        tolerant = kind in TOLERANCES or kind == "equals"
        if tolerant != bool(entry.get("basis")):
            raise ValueError(f"{where}: " + (f"kind {kind!r} needs a 'basis': how its tolerance "
                                             "follows from the paper's gaps or spread"
                                             if tolerant else
                                             f"kind {kind!r} has no tolerance to give a basis"))
        for side in ("a", "b"):
            extra = sorted(set(entry.get(side) or {}) - SIDE_KEYS)
            if extra:
                raise ValueError(f"{where}: {side}: unknown key(s) {extra}; known: "
                                 f"{sorted(SIDE_KEYS)}")
            if kind == "predicted" and "metric" in (entry.get(side) or {}):
                raise ValueError(f"{where}: {side}: kind 'predicted' reads both sides at its "
                                 "metric and its predictor: no side metric")
            spec = entry.get(side) or {}
            if "sum_over" in spec and (
                    "setting" in spec or kind not in ("greater", "close", "not_below")
                    or uncertainty.chance_level(spec.get("metric", entry.get("metric"))) != 0):
                raise ValueError(f"{where}: {side}: sum_over sums the attack over its settings: "
                                 "it takes no 'setting', compares two sides (greater, close, "
                                 "not_below) and sums a metric whose chance level is 0 "
                                 "(advantage), which a sum keeps")
        _check_agreement(where, entry)
        architectures = entry.get("architectures", [])
        if not isinstance(architectures, list):
            raise ValueError(f"{where}: architectures: a list of architectures, such as [lenet]")
        for architecture in architectures:
            if architecture not in ARCHITECTURES:
                raise ValueError(f"{where}: architectures: "
                                 + unknown("architecture", architecture, ARCHITECTURES))
        if entry.get("artifact") not in ARTIFACT_IDS:
            raise ValueError(f"{where}: artifact {entry.get('artifact')!r} is not a checklist ID")
        _check_paper_names(where, paper, entry)
        claims.append(Claim(
            id=entry["id"], paper=paper, artifact=entry["artifact"],
            statement=entry["statement"], metric=entry["metric"], kind=kind, a=entry["a"],
            b=entry.get("b"), value=entry.get("value"), datasets=tuple(entry["datasets"]),
            basis=entry.get("basis", ""), over=over or "", margin=entry.get("margin"),
            pooled=bool(entry.get("pooled", False)),
            architectures=tuple(architectures), predictor=entry.get("predictor", "")))
    return claims


def _check_agreement(where: str, entry: dict[str, Any]) -> None:
    """An agreement is a pair's: its claim names a ``versus`` on every side, at the claim's
    metric, and nothing else does."""
    sides = [entry.get(side) or {} for side in ("a", "b") if entry.get(side)]
    agreement = AGREEMENT.fullmatch(str(entry["metric"])) is not None
    if not agreement:
        if any("versus" in spec for spec in sides):
            raise ValueError(f"{where}: versus reads a pair's agreement: the claim's metric "
                             "must be one (agreement@30%)")
        return
    if entry["kind"] not in AGREEMENT_KINDS:
        raise ValueError(f"{where}: an agreement is compared or bounded "
                         f"({list(AGREEMENT_KINDS)}), not {entry['kind']!r}")
    for side, spec in zip("ab", sides, strict=False):
        if "versus" not in spec or spec.keys() & {"metric", "sum_over"}:
            raise ValueError(f"{where}: {side}: an agreement side names its pair's second "
                             "attack (versus) and no metric or sum_over of its own")


def _check_paper_names(where: str, paper: str, entry: dict[str, Any]) -> None:
    """A claim names datasets, attacks and settings as the paper does (``paper_values.csv`` or
    ``paper_keys.yaml``): a misspelt one would match no study and leave the claim "not run"."""
    from miarepro.options import unknown

    keys = catalog.paper_keys(paper)
    for dataset in entry.get("datasets") or []:
        if dataset not in keys.datasets:
            raise ValueError(f"{where}: datasets: {unknown('dataset', dataset, keys.datasets)}")
    for side in ("a", "b"):
        spec = entry.get(side) or {}
        if not spec:
            continue
        for key in ("attack", "versus") if "versus" in spec else ("attack",):
            if spec.get(key) not in keys.settings:
                raise ValueError(f"{where}: {side}.{key}: "
                                 + unknown("attack", spec.get(key), keys.settings))
        if "setting" in spec and spec["setting"] not in keys.settings[spec["attack"]]:
            raise ValueError(f"{where}: {side}.setting: " + unknown(
                "setting", spec["setting"], keys.settings[spec["attack"]],
                f"attack {spec['attack']!r}"))


@cache
def load_claims(paper: str) -> tuple[Claim, ...]:
    path = CLAIMS_DIR / f"{paper}.yaml"
    return tuple(parse_claims(paper, path.read_text())) if path.exists() else ()


def _compare(kind: str, a: float, b: float | None, value: float | None) -> bool:
    if kind in ("greater", "matched_best", "increases"):
        return a > b
    if kind == "decreases":
        return a < b
    if kind == "close":
        return abs(a - b) <= value
    if kind == "not_below":
        return a - b >= -value
    if kind == "at_least":
        return a >= value
    if kind == "at_most":
        return a <= value
    if kind == "ratio_at_most":
        return a / b <= value
    return a / b >= value


def verdict(claim: Claim, a: Estimate, b: Estimate | None = None, *, paired: bool = False
            ) -> tuple[str, Estimate]:
    """(one of :data:`VERDICTS` but "not run", the compared quantity) from paired estimates,
    or for a trend from the estimates of two studies trained apart (``paired``: on one
    split)."""
    quantity = compared(claim, a, b, paired=paired)
    at_chance = quantity.resolvable and claim.kind in COMPARISONS and _at_chance(claim, a, b)
    outcome = judge(claim, quantity, at_chance)
    if outcome in ("holds", "inconclusive") and vacuous_parity(claim, a, b, quantity):
        outcome = "no signal"
    return outcome, quantity


def vacuous_parity(claim: Claim, a: Estimate, b: Estimate | None, quantity: Estimate) -> str:
    """Why a parity (``close``, ``not_below``) could not fail, or "" where it could: an
    attack at chance in a side's place, measured as precisely, would pass it too, since the
    reference side (b of ``not_below``, the farther of ``close``'s two) is no farther from
    chance than the tolerance plus the half-width of the difference's interval. A tolerance
    taken at the paper's scale can be that wide on a miniature whose attacks sit nearer
    chance (a point of TPR@1% where BMIA reaches 2%, not 9%); its "holds" says nothing.
    Chance is what an attack without signal averages at the side's audit, where its draws
    are known: above the nominal level at a small audit (TPR@0.1% at 1,500 non-members
    passes the second-highest of them, 2 / 1,501; precision@1% averages about 0.6)."""
    if claim.kind not in TOLERANCES or b is None:
        return ""
    sides = list(zip((a, b), claim.side_metrics(), strict=True))
    below = claim.kind == "not_below"  # a must not fall below b: b is the reference
    if below:  # how far b is above chance: one below it lets an attack at chance pass
        sides = sides[1:]
    reaches = [side.value - chance if below else abs(side.value - chance)
               for side, metric in sides if (chance := _chance_at(side, metric)) is not None]
    if not reaches:
        return ""
    low, high = quantity.interval()
    scale = uncertainty.percent_scale(claim.metric, claim.paper)
    tolerance, half = claim.value / scale, (high - low) / 2
    if max(reaches) > tolerance + half:
        return ""
    if max(reaches) < 0.0:
        return (f"; it could not fail: the reference attack is {-scale * max(reaches):.3g} "
                "below chance")
    return (f"; it could not fail: the reference attack is {scale * max(reaches):.3g} from "
            f"chance, within the tolerance {claim.value:g} plus the interval's half-width "
            f"{scale * half:.3g}")


def _chance_at(side: Estimate, metric: str) -> float | None:
    """What an attack without signal averages on ``metric`` measured as ``side`` is: its null
    draws' mean where known, else the metric's nominal level (None: it has none)."""
    level = uncertainty.chance_level(metric)
    return level if level is None or side.null is None else float(np.mean(side.null))


def compared(claim: Claim, a: Estimate, b: Estimate | None = None, *, paired: bool = False
             ) -> Estimate:
    """The quantity a claim bounds: ``a - b``, ``a / b`` or ``a`` (paired), or for a trend the
    difference of two studies trained apart (``paired``: on one split)."""
    if claim.kind in TRENDS:  # a: where `over` is largest, b: smallest; two studies apart
        high, low = (a, b) if claim.kind == "increases" else (b, a)
        return uncertainty.difference_across_studies(high, low, paired=paired)
    if claim.kind in ("greater", "matched_best", "close", "not_below"):
        return pooled_comparison(claim, a - b)
    if claim.kind.startswith("ratio"):
        return a.ratio(b)
    return a


def judge(claim: Claim, quantity: Estimate, at_chance: bool) -> str:
    """The verdict on the compared quantity; ``at_chance``: every side compared is
    indistinguishable from chance."""
    if not quantity.resolvable:
        return "not resolvable"
    if at_chance:
        # sides at chance whose paired comparison still tells them apart are testable: the
        # difference (ratio) excludes what two attacks at chance would give, 0 (1)
        null = 1.0 if claim.kind.startswith("ratio") else 0.0
        low, high = quantity.interval()
        if low <= null <= high:
            return "no signal"
    return decide(claim, quantity)


def decide(claim: Claim, quantity: Estimate) -> str:
    """holds, fails or inconclusive: where the compared quantity's interval lies against the
    claimed boundary (:func:`verdict` computes the quantity; :func:`replication` and the
    stability benchmark draw it anew)."""
    low, high = quantity.interval()
    return str(decide_bounds(claim, np.array([low]), np.array([high]))[0])


def decide_bounds(claim: Claim, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """:func:`decide` for arrays of interval bounds, element by element."""
    scale = uncertainty.percent_scale(claim.metric, claim.paper)  # claims: the paper's units
    kind = "greater" if claim.kind in ("matched_best", "predicted", *TRENDS) else claim.kind
    threshold = (0.0 if kind == "greater" else claim.value if kind.startswith("ratio")
                 else claim.value / scale)
    if kind == "greater":
        holds, fails = low > threshold, high < threshold
    elif kind == "not_below":  # not reversed beyond the tolerance, or reversed beyond it
        holds, fails = low >= -threshold, high < -threshold
    elif kind in ("close", "equals"):  # wholly within the margin of a centre, or beyond it
        centre, margin = (0.0, threshold) if kind == "close" else (threshold,
                                                                    claim.margin / scale)
        holds = (centre - margin <= low) & (high <= centre + margin)
        fails = (low > centre + margin) | (high < centre - margin)
    elif kind in ("at_most", "ratio_at_most"):
        holds, fails = high <= threshold, low > threshold
    else:
        holds, fails = low >= threshold, high < threshold
    return np.where(holds, "holds", np.where(fails, "fails", "inconclusive"))


#: how many reruns :func:`replication` draws per row
RERUNS = 4000


def replication(claim: Claim, study: str, outcome: str, quantity: Estimate,
                rivals: int = 1) -> float:
    """The chance that a rerun of the experiment under other seeds gives the same verdict:
    how fragile a holds, fails or inconclusive is. NaN for the other verdicts, and where the
    interval is not over replicates, targets or two studies' (Welch): a bootstrap over one
    trained realisation's records, or one run's timing noise, cannot see a rerun's training.

    The replicate-level quantity (a cost's log, where it is read so) is modelled as normal, and
    a rerun drawn from its posterior predictive given this run's ``n`` values (Jeffreys prior):
    a spread ``sigma`` drawn from ``s^2 (n - 1) / chi^2_(n-1)``, a true mean from ``N(mean,
    sigma^2 / n)``, then the rerun's mean from ``N(true mean, sigma^2 / n)`` and its spread from
    ``sigma^2 chi^2_(n-1) / (n - 1)``; the rerun is decided by the claim's own rule: for
    ``matched_best`` over ``rivals`` rivals, it fails at their Bonferroni level, as
    :func:`matched_best_verdict` decides (``quantity`` is the difference from the rival the row
    is decided against). A verdict whose interval ends near the claimed boundary gets about one
    half, whatever the replicate count. Only the interval is redrawn: whether a rerun's attacks
    stay distinguishable from chance ("no signal") is not modelled, nor, for a predicted order,
    whether a rerun's losses predict the same order. The stability benchmark compares this
    column with the agreement a second run shows."""
    if (outcome not in ("holds", "fails", "inconclusive")
            or quantity.method not in ("replicates", "targets", "welch")):
        return float("nan")
    if quantity.method != "welch" and not np.isfinite(quantity.draws).all():
        return float("nan")  # a replicate or target that cannot resolve the metric
    error, dof = uncertainty.standard_error(quantity)
    if not np.isfinite(dof):  # Welch of bootstraps alone (one realisation each) or no spread
        return float("nan")
    rng = np.random.default_rng(list(f"{claim.id}/{study}".encode()))
    sigma = error * np.sqrt(dof / rng.chisquare(dof, RERUNS))
    centre = np.log(quantity.value) if quantity.log_scale else quantity.value
    means = centre + np.sqrt(2.0) * sigma * rng.standard_normal(RERUNS)
    errors = sigma * np.sqrt(rng.chisquare(dof, RERUNS) / dof)
    half = uncertainty.student_half_width(errors, dof)
    # the upper bound decides "fails" of a greater-than claim: at the rivals' Bonferroni level
    upper = half if claim.kind != "matched_best" else uncertainty.student_half_width(
        errors, dof, bonferroni_level(rivals))
    low, high = means - half, means + upper
    if quantity.log_scale:  # a cost's, drawn on the log scale as its interval is
        low, high = np.exp(low), np.exp(high)
    return float(np.mean(decide_bounds(claim, low, high) == outcome))


def _at_chance(claim: Claim, a: Estimate, b: Estimate) -> bool:
    """Whether no side can be told from its metric's chance level (False where the metric has
    none): each is tested against its draws had the attack no signal
    (:meth:`~miarepro.uncertainty.Estimate.consistent_with_chance`)."""
    for estimate, metric in zip((a, b), claim.side_metrics(), strict=True):
        level = uncertainty.chance_level(metric)
        if level is None or not estimate.consistent_with_chance(level):
            return False
    return True


def claim_paper_value(claim: Claim, dataset: str, spec: dict[str, str],
                      model: str | None = None) -> float | None:
    """The number the claim's artifact prints for one side of the claim (None for figures),
    for the paper's ``model`` where the artifact has a row per target model. Where the
    artifact prints other target models only (QMIA's Table 1 is ResNet-50's), the number is
    the one the paper prints for ``model`` elsewhere (Table 6's ResNet-10)."""
    if "sum_over" in spec:  # a sum the paper's tables do not print
        return None
    values = catalog.paper_values(claim.artifact)
    if "versus" in spec:
        return paper_agreement(values, dataset, spec["attack"], spec["versus"],
                               agreement_fpr(claim.metric), model=model)
    cell = (dataset, spec["attack"], spec.get("setting"), claim.metric, model)
    value = catalog.paper_value(values, *cell)
    if value is None and model and not values.empty and not values["model"].isin(
            ["", model]).any():
        value = catalog.paper_number(claim.paper, *cell, model_rows_only=True)
    return value


def find_attack(study_config: dict[str, Any], spec: dict[str, str],
                records: int | None = None, default: str = "") -> str | None:
    """The study's attack instance reproducing ``{attack, setting}`` of the paper, if any;
    instances without a ``paper_setting`` stand for ``default`` (the artifact's
    ``default_setting``).

    Among several, the one that scores ``records`` records (None: the whole audit) comes
    first, so that a claim compares two attacks on the same records (IHA's exact vs CG).
    """
    matches = [name for name, attack in study_config["attacks"].items()
               if attack.get("paper_attack") == spec["attack"]
               and (attack.get("paper_setting") or default) == spec.get("setting", "")]
    same = [name for name in matches
            if _scored_records(study_config["attacks"][name]) == records]
    return (same or matches or [None])[0]


def summed_attacks(study_config: dict[str, Any], spec: dict[str, str]) -> tuple[str, ...] | None:
    """A ``sum_over`` side's instances in the study: every instance of its attack at a setting
    of that key (``layer=1``, ``layer=2``, ...), in the config's order; None where it has none."""
    prefix = f"{spec['sum_over']}="
    found = tuple(name for name, attack in study_config["attacks"].items()
                  if attack.get("paper_attack") == spec["attack"]
                  and (attack.get("paper_setting") or "").startswith(prefix))
    return found or None


def paired_attacks(study_config: dict[str, Any], spec: dict[str, str],
                   records: int | None = None, default: str = "") -> Pair | None:
    """A ``versus`` side's two instances in the study; None where it lacks either."""
    first = find_attack(study_config, spec, records, default)
    second = find_attack(study_config, {"attack": spec["versus"]}, records, default)
    return Pair(first, second) if first and second else None


def agreement_fpr(metric: str) -> float:
    """The FPR of ``agreement@30%``: 0.3."""
    return float(AGREEMENT.fullmatch(metric).group(1)) / 100


def _instances(names: list[Any]) -> list[str]:
    """The attack instances behind a claim's sides, a ``sum_over`` side's or a pair's each
    (None dropped)."""
    return [one for name in names if name is not None
            for one in (name if isinstance(name, tuple) else (name,))]


def _scored_records(attack: dict[str, Any]) -> int | None:
    """How many records an instance scores: its ``records``, or a leave-one-out attack's
    ``loo_records`` (the records that get leave-one-out models); None for the whole audit."""
    return attack.get("records") or attack.get("loo_records")


def _shared_records(study_config: dict[str, Any], specs: list[dict[str, str]],
                    default: str) -> int | None:
    """The record count a claim's attacks are compared on: that of the first side whose
    instance scores a subset (IHA's CG on 200 records, the L-attack on its 40 leave-one-out
    records), so the other side is taken on the same records where the study has it; None
    (the whole audit) otherwise."""
    for spec in specs:
        if "sum_over" in spec:
            continue
        name = find_attack(study_config, spec, default=default)
        if name is not None and (records := _scored_records(study_config["attacks"][name])):
            return records
    return None


def _rivals(study_config: dict[str, Any], claim: Claim) -> list[str]:
    """The study's instances of the claim's attack with reference models of another study."""
    return [name for name, attack in study_config["attacks"].items()
            if attack.get("reference_study") and attack.get("paper_attack") == claim.a["attack"]]


def bonferroni_level(rivals: int) -> float:
    """The level at which one of ``rivals`` comparisons may fail a claim that all must hold."""
    return 1.0 - (1.0 - uncertainty.LEVEL) / rivals


def matched_best_verdict(claim: Claim, a: Estimate, rivals: list[Estimate]
                         ) -> tuple[str, Estimate, int]:
    """``matched_best``: ``a`` beats every rival (an intersection-union test). It holds where
    every paired difference's interval lies above 0, each at the usual level (all must, so no
    correction is due), and fails where one lies below 0 at a Bonferroni level over the
    rivals (any one may: taking the worst of k at 95% would fail a true claim more often than
    its 2.5%). Else "no signal" where no comparison tells the sides apart from chance, and
    inconclusive. Returns the verdict, the difference from the rival it is decided against
    (the failing one, else the one with the lowest lower bound: the rival the claim is
    closest to losing to) and that rival's index."""
    outcomes = [verdict(claim, a, rival) for rival in rivals]
    words = [word for word, _ in outcomes]
    if "not resolvable" in words:
        index = words.index("not resolvable")
        return "not resolvable", outcomes[index][1], index
    # a rival's bound may be NaN (a missing value): it neither fails the claim nor hides the
    # rival that does, and as the least known it is the one the claim is closest to losing to
    highs = np.array([quantity.interval(bonferroni_level(len(rivals)))[1]
                      for _, quantity in outcomes])
    lows = np.nan_to_num([quantity.interval()[0] for _, quantity in outcomes], nan=-np.inf)
    if (highs < 0.0).any():
        index = int(np.argmin(np.where(highs < 0.0, highs, np.inf)))
        return "fails", outcomes[index][1], index
    index = int(np.argmin(lows))
    if all(word == "holds" for word in words):
        return "holds", outcomes[index][1], index
    word = "no signal" if all(word == "no signal" for word in words) else "inconclusive"
    return word, outcomes[index][1], index


def predicted_verdict(claim: Claim, a: Estimate, b: Estimate, loss_a: Estimate,
                      loss_b: Estimate) -> tuple[str, Estimate | None, bool | None]:
    """``predicted``: the two sides' metric is ordered as their losses at ``predictor``
    predict, the lower loss the better attack (QMIA: "the attack with the smallest pinball
    loss on public data is the better membership inference attack").

    The losses predict an order where their paired difference's interval excludes 0; the
    metric is then judged as ``greater`` of the side predicted better over the other, so it
    fails where the metric reverses the predicted order beyond noise. Where the losses cannot
    tell the sides apart there is no prediction to test: inconclusive (or what the metric's
    own comparison says where it cannot be tested: no signal, not resolvable). Returns the
    verdict, the metric's difference of the side predicted better from the other (None
    without a prediction) and whether ``a`` is that side (None without one)."""
    as_ordering = replace(claim, kind="greater")
    gap = loss_b - loss_a  # above 0: a's loss is the lower, a is predicted better
    low, high = gap.interval()
    known = gap.resolvable and not np.isnan([low, high]).any()  # NaN: a loss is missing
    if not known or low <= 0.0 <= high:
        outcome, _ = verdict(as_ordering, a, b)
        untestable = ("no signal", "not resolvable")
        return (outcome if outcome in untestable
                else "not resolvable" if not known else "inconclusive"), None, None
    first = bool(low > 0.0)
    outcome, quantity = verdict(as_ordering, *((a, b) if first else (b, a)))
    return outcome, quantity, first


#: kinds that order two attacks by a paired difference: its sign is what they decide
ORDERINGS = ("greater", "matched_best", "predicted")


def pooled_comparison(claim: Claim, difference: Estimate) -> Estimate:
    """The paired difference of an ordering at a low FPR that one run's audit cannot resolve
    (TPR@0.1% on 5,000 non-members: 5 above the threshold, where a value needs 10), made
    resolvable where both sides are means over independent runs (targets that are
    repetitions, replicates) with :data:`~miarepro.uncertainty.MIN_RUN_EXCEEDANCES`
    non-members or more above the threshold in each and
    :data:`~miarepro.uncertainty.MIN_EXCEEDANCES` pooled over them
    (:func:`miarepro.uncertainty.pooled_exceedances` says why its sign is then decided
    reliably); each side's own value stays n/r. Parities and bounds, whose tolerance the
    small-audit bias could cross, and calibrated decisions, whose threshold is not set on the
    audit, stay as they are."""
    if (claim.kind not in ORDERINGS or difference.resolvable
            or difference.method not in ("targets", "replicates")
            or difference.exceedances < uncertainty.MIN_EXCEEDANCES
            or not all(metric.startswith(("tpr@", "precision@"))
                       and uncertainty.metric_fpr(metric) is not None
                       for metric in claim.side_metrics())):
        return difference
    return replace(difference, resolvable=True)


def _pooled_note(quantity: Estimate | None, sides: list[Estimate]) -> str:
    """Where a row's difference is resolved only pooled over its runs
    (:func:`pooled_comparison`), says so."""
    if quantity is None or not quantity.resolvable or all(side.resolvable for side in sides):
        return ""
    return (f"; ordered over the runs pooled: {quantity.exceedances:.0f} non-members above "
            f"the threshold together, fewer than {uncertainty.MIN_EXCEEDANCES} in each run")


#: what the claims read of each artifact's settings: the paper dataset and default setting a
#: table maps its studies to (:func:`stands_for`, :func:`find_attack`), and its builder and
#: studies, which decide the artifact a row links (:func:`showing_artifact`)
ARTIFACT_KEYS = ("builder", "studies", "paper_dataset", "default_setting")


def artifacts_read(config: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The part of the config's ``artifacts`` the claims read: their job's params, so that an
    edit of it rebuilds the claims and an edit of anything else does not."""
    return {name: {key: settings[key] for key in ARTIFACT_KEYS if key in settings}
            for name, settings in config["artifacts"].items()}


def stands_for(claim: Claim, study: str, config: dict[str, Any]) -> str | None:
    """The paper dataset ``study`` stands for in the claim's artifact: the artifact's own
    ``paper_dataset`` where the miniature runs that table on a stand-in (IHA Tables 4 and 9
    on MNIST for Purchase-100(S)), else the study's; None where the claim is made for other
    architectures than the study's target."""
    settings = config["artifacts"].get(claim.artifact, {})
    study_config = config["studies"][study]
    architecture = study_config.get("model", {}).get("arch")
    if claim.architectures and architecture not in claim.architectures:
        return None
    if study in settings.get("studies", ()):
        study_config = builders.with_paper_dataset(study_config, settings)
    return study_config.get("paper_dataset")


def _sides(claim: Claim, study: str, config: dict[str, Any]
           ) -> tuple[str, list[dict[str, str]], list[Any]] | None:
    """A claim other than a trend on ``study``: the paper dataset the study stands for, the
    claim's sides and the study's instance of each (a tuple of them for a ``sum_over`` side;
    None where it has none); None where the claim is not made for that dataset, or not for
    the study's setting: a study all of whose instances name a paper setting, none of them
    one of the claim's sides, runs another setting of the paper (a DP or dropout target, one
    of Figure 7's Adult subsets), where the claim's "not run" row would only say that its
    attacks run at another setting there."""
    study_config = config["studies"][study]
    dataset = stands_for(claim, study, config)
    if dataset not in claim.datasets:
        return None
    default = config["artifacts"].get(claim.artifact, {}).get("default_setting", "")
    specs = [claim.a] + ([claim.b] if claim.b is not None else [])
    records = _shared_records(study_config, specs, default)
    names = [summed_attacks(study_config, spec) if "sum_over" in spec
             else paired_attacks(study_config, spec, records, default) if "versus" in spec
             else find_attack(study_config, spec, records, default) for spec in specs]
    if not any(names) and all(attack.get("paper_setting")
                              for attack in study_config["attacks"].values()):
        return None
    return dataset, specs, names


def attacks_read(study: str, config: dict[str, Any]) -> list[str]:
    """The attack instances of ``study`` (a first replicate) that its paper's claims read
    (:func:`evaluate`): the sides of each claim made for the dataset it stands for, every rival
    of a ``matched_best`` claim, and a trend's instance."""
    study_config = config["studies"][study]
    names: list[str | None] = []
    for claim in load_claims(study_config["paper"]):
        if claim.kind in TRENDS:
            if stands_for(claim, study, config) in claim.datasets:
                names.append(_trend_attack(study_config, claim))
        elif (sides := _sides(claim, study, config)) is not None:
            names += _instances(sides[2]) + (_rivals(study_config, claim)
                                             if claim.kind == "matched_best" else [])
    return [name for name in dict.fromkeys(names) if name is not None]


def inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """What the claims table reads: in every replicate of its studies, the attacks that their
    claims compare (:func:`attacks_read`, on the first replicate: :func:`evaluate` takes its
    instances and reads them in every replicate); in the first, also the regime's baseline.

    A replicate's other attacks (diagnostics and sweeps that the tables and figures show for
    the first replicate) are therefore never run in the copies, nor are the copies of a study
    none of whose attacks a claim compares: no claim reads them."""
    files = []
    for study in res.studies_of(settings, config):
        study_config = config["studies"][study]
        if not load_claims(study_config["paper"]):
            continue
        read, paired = attacks_read(study, config), _paired_read(study, config)
        for copy in replicates_of(study, config) if read else [study]:
            names = read + ([study_config.get("regime", {}).get("baseline")]
                            if copy == study else [])
            copy_config = config["studies"][copy]
            files += builders.study_inputs(results, copy, {**copy_config, "attacks": {
                name: copy_config["attacks"][name] for name in dict.fromkeys(names) if name}})
            files += _cost_inputs(results, copy, config)
            files += [str(res.score_path(results, copy, name)) for name in paired]
    return sorted(set(files), key=files.index)


def _paired_read(study: str, config: dict[str, Any]) -> list[str]:
    """The instances of ``study`` whose agreement a claim reads (``versus`` sides): their
    scores, not only their metrics (:func:`_agreement`)."""
    names = []
    for claim in load_claims(config["studies"][study]["paper"]):
        sides = None if claim.kind in TRENDS else _sides(claim, study, config)
        names += [one for name in (sides[2] if sides else ()) if isinstance(name, Pair)
                  for one in name]
    return list(dict.fromkeys(names))


def _failed_fits(sides: list[tuple[str, str]], config: dict[str, Any]) -> str:
    """Why a claim on these ``(study, attack)`` sides is not run where an attack's fit failed
    its own check in a replicate of its study, naming each such replicate with what the
    check measured (:func:`miarepro.artifacts.results.failed_fit`); "" where none did."""
    found = [f"{attack}'s in {copy} ({why})" for study, attack in sides
             for copy in replicates_of(study, config)
             if (why := res.failed_fit(res.RESULTS, copy, config["studies"][copy], attack))]
    return f"needs a generator good enough: the fit fell short, {'; '.join(found)}" if found else ""


def _cost_inputs(results: str, study: str, config: dict[str, Any]) -> list[str]:
    """What the cost claims on ``study`` read beyond the metrics (:func:`_measure`): the
    cards of IHA's and Subpop's cost tables and of the timing noise's reference models."""
    from miarepro.artifacts import iha_tables, subpop_artifacts

    study_config = config["studies"][study]
    files, noisy = [], False
    for claim in load_claims(study_config["paper"]):
        sides = None if claim.kind in TRENDS else _sides(claim, study, config)
        for spec, name in zip(*sides[1:], strict=True) if sides else ():
            metric = spec.get("metric", claim.metric)
            if name is None or metric not in COSTS:
                continue
            if metric == AUDIT_MINUTES:
                files += iha_tables.cost_files(results, study, study_config, name)
            elif metric == TRAIN_MINUTES:
                files += subpop_artifacts.cost_files(results, study, study_config,
                                                     study_config["attacks"][name])
            noisy = noisy or not _timed_by_repetition(metric, study_config)
    return files + (_timing_cards(results, study, config) if noisy else [])


def _timed_by_repetition(metric: str, study_config: dict[str, Any]) -> bool:
    """Whether a cost's interval is over the study's repetitions, each timed apart, rather
    than spread by the run's timing noise (:func:`_measure`)."""
    return (metric in (COMPUTE, SECONDS) and builders.has_repetitions(study_config)
            and study_config["targets"] >= uncertainty.MIN_TARGETS)


def _timing_cards(results: str, study: str, config: dict[str, Any]) -> list[str]:
    """The cards of the reference models that the claims on ``study`` read, every target's:
    their training seconds, the same work timed apart, give a cost's timing noise."""
    study_config = config["studies"][study]
    cards = {card for attack in attacks_read(study, config)
             for target in range(study_config["targets"])
             for card in builders._model_cards(results, study, study_config, attack, target)
             if "/models/reference/" in card}
    return sorted(cards)


def evaluate(config: dict[str, Any], studies: list[str]) -> pd.DataFrame:
    """One row per (claim, study) the configuration can evaluate; a trend or a ``pooled`` claim
    gets one row per paper dataset, over its studies."""
    rows = []
    for study in studies:
        for claim in load_claims(config["studies"][study]["paper"]):
            if claim.kind in TRENDS or claim.pooled:
                continue  # across studies: below
            sides = _sides(claim, study, config)
            if sides is not None:
                rows.append(_study_row(claim, study, sides, config))
    papers = dict.fromkeys(config["studies"][study]["paper"] for study in studies)
    claims = [claim for paper in papers for claim in load_claims(paper)]
    rows += [row for claim in claims if claim.kind in TRENDS
             for row in _trend_rows(claim, config, studies)]
    rows += [row for claim in claims if claim.pooled
             for row in _pooled_rows(claim, config, studies)]
    evaluated = {row["claim"] for row in rows}
    rows += [_not_run_anywhere(claim) for claim in claims if claim.id not in evaluated]
    return pd.DataFrame(rows)


def _study_row(claim: Claim, study: str, sides: tuple, config: dict[str, Any]
               ) -> dict[str, Any]:
    """A claim's row on one study (:func:`_sides`)."""
    study_config = config["studies"][study]
    dataset, specs, names = sides
    if claim.kind == "matched_best":
        names = names + (_rivals(study_config, claim) or [None])
    row = _row(claim, study, dataset, *_paper_numbers(claim, dataset, specs, study_config))
    estimates = _side_estimates(claim, study, specs, names, config)
    if isinstance(estimates, str):  # it names what it needs: the claim's own artifact
        return {**row, "verdict": "not run", "ours": estimates}
    row = _shown_in(row, showing_artifact(claim, [study], config), config)
    note, rivals, shown = "", 1, names
    if claim.kind == "matched_best":
        rivals = len(names) - 1
        outcome, quantity, index = matched_best_verdict(claim, estimates[0], estimates[1:])
        estimates, shown = [estimates[0], estimates[1 + index]], [names[0], names[1 + index]]
        note = (f"; the second is the closest of {rivals} rivals (the rule: it would fail "
                "at a Bonferroni level over them)")
    elif claim.kind == "predicted":
        losses = _side_estimates(replace(claim, metric=claim.predictor), study, specs, names,
                                 config)
        if isinstance(losses, str):
            return {**row, "verdict": "not run", "ours": losses}
        outcome, quantity, first = predicted_verdict(claim, *estimates, *losses)
        note = _prediction_note(claim, losses, first, [
            _side_label(study_config, name) for name in names])
        if first is False:  # the difference shown is the side predicted better's
            estimates, shown = estimates[::-1], shown[::-1]
            row = {**row, "paper_a": row["paper_b"], "paper_b": row["paper_a"]}
    else:
        outcome, quantity = verdict(claim, *estimates)
        if outcome == "no signal":
            note = vacuous_parity(claim, *estimates, quantity)
    metrics = claim.side_metrics(len(shown))
    labels = [_side_label(study_config, name, metric if len(set(metrics)) > 1 else None)
              for name, metric in zip(shown, metrics, strict=True)]
    # without a predicted order (quantity None) the row shows a - b, and has no interval to
    # decide a rerun on
    return {**row, "verdict": outcome, "replicates": independent_runs(study, config),
            "ours": _describe(claim, estimates, estimates[0] - estimates[1]
                              if quantity is None else quantity, labels) + note
                    + _subset(study_config, names) + _pooled_note(quantity, estimates),
            **({} if quantity is None else
               _quantity_columns(claim, study, outcome, quantity, rivals))}


def _prediction_note(claim: Claim, losses: list[Estimate], first: bool | None,
                     labels: list[str]) -> str:
    """What the predictor said: which side it predicts better, by how much lower its loss."""
    def text(gap: Estimate) -> str:
        return res.format_estimate(res.estimate_columns(claim.predictor, gap, clip=False),
                                   claim.predictor, claim.paper)

    if first is None:
        return (f"; {claim.predictor} does not order them ({labels[0]}'s loss minus "
                f"{labels[1]}'s: {text(losses[0] - losses[1])})")
    better, worse = (0, 1) if first else (1, 0)
    return (f"; {claim.predictor} predicts {labels[better]} the better (its loss lower by "
            f"{text(losses[worse] - losses[better])})")


def _side_label(study_config: dict[str, Any], name: str | tuple[str, ...],
                metric: str | None = None) -> str:
    """A side as the study's tables name its attack instance (its label), with the metric it
    is read at where the two sides differ in it (calibrated against uncalibrated precision);
    a ``sum_over`` side as the sum of its instances, a ``versus`` side as its pair."""
    if isinstance(name, Pair):
        label = " with ".join(_side_label(study_config, one) for one in name)
    elif isinstance(name, tuple):
        label = "sum of " + " + ".join(_side_label(study_config, one) for one in name)
    else:
        label = study_config["attacks"][name].get("label", name)
    return f"{label}, {metric}" if metric else label


def _subset(study_config: dict[str, Any], names: list[str | None]) -> str:
    """Where the sides are compared on a subset of the audit (IHA by conjugate gradients on
    100 records), say so: the study's tables and its other rows read the whole audit."""
    for name in _instances(names):
        if records := _scored_records(study_config["attacks"][name]):
            return (f"; both on the {records} audited records per target that "
                    f"{_side_label(study_config, name)} scores")
    return ""


def _paper_numbers(claim: Claim, dataset: str, specs: list[dict[str, str]],
                   study_config: dict[str, Any]) -> tuple[float | None, float | None]:
    paper = [claim_paper_value(claim, dataset, spec, study_config.get("paper_model"))
             for spec in specs]
    return paper[0], paper[1] if len(paper) > 1 else None


def _side_estimates(claim: Claim, study: str, specs: list[dict[str, str]],
                    names: list[str | None], config: dict[str, Any]) -> list[Estimate] | str:
    """Each side's estimate over the study's replicates, or why the study cannot give it."""
    if None in names:
        absent = [_spec_text(spec) for spec, name in zip(specs, names, strict=False)
                  if name is None] or ["a rival with another study's references"]
        return f"needs {' and '.join(absent)} in this study"
    metrics = claim.side_metrics(len(names))
    unmeasured = sorted({metric for name, metric in zip(names, metrics, strict=True)
                         for one in _instances([name]) if metric not in COSTS
                         and not isinstance(name, Pair)
                         and metric not in res.attack_estimates(res.RESULTS, study, one)})
    if unmeasured:  # e.g. a TPR at an FPR outside the config's metrics.fprs
        return f"needs {', '.join(unmeasured)} measured (the config's metrics)"
    if failed := _failed_fits([(study, name) for name in _instances(names)], config):
        return failed
    replicates = replicates_of(study, config)
    sides = [_agreement_over(replicates, name, metric, config) if isinstance(name, Pair)
             else _paired_sum([_over_replicates(replicates, one, metric, config)
                               for one in _instances([name])])
             for name, metric in zip(names, metrics, strict=True)]
    # a cost over several runs on the log scale (:func:`miarepro.uncertainty.geometric`)
    return [uncertainty.geometric(side) if metric in COSTS else side
            for side, metric in zip(sides, metrics, strict=True)]


def _paired_sum(estimates: list[Estimate]) -> Estimate:
    """A ``sum_over`` side: the sum of its instances' estimates replicate by replicate (or
    target by target, or draw by draw), as a paired difference subtracts them; one alone as
    it is."""
    if len(estimates) == 1:
        return estimates[0]
    # a - (-b) is the paired a + b, with the pairing checks of a difference
    negated = [Estimate(-e.value, -e.draws, e.method, e.resolvable) for e in estimates[1:]]
    return reduce(operator.sub, negated, estimates[0])


def _pooled_rows(claim: Claim, config: dict[str, Any], studies: list[str]
                 ) -> list[dict[str, Any]]:
    """A claim the paper states on average over its settings (``pooled``): on each paper
    dataset, the mean over the studies that stand for it of the quantity the claim bounds, each
    study's paired over its own replicates, their mean with a Welch interval (studies trained
    apart: :func:`miarepro.uncertainty.mean_across_studies`)."""
    of_dataset: dict[str, list[tuple[str, tuple]]] = {}
    for study in studies:
        if config["studies"][study]["paper"] == claim.paper:
            sides = _sides(claim, study, config)
            if sides is not None:
                of_dataset.setdefault(sides[0], []).append((study, sides))
    rows = []
    for dataset, found in of_dataset.items():
        studies_there = [study for study, _ in found]
        row = _row(claim, ", ".join(studies_there), dataset, *_paper_numbers(
            claim, dataset, found[0][1][1], config["studies"][found[0][0]]))
        estimates = [_side_estimates(claim, study, specs, names, config)
                     for study, (_, specs, names) in found]
        missing = [f"{study}: {why}" for (study, _), why in zip(found, estimates, strict=True)
                   if isinstance(why, str)]
        if missing:
            rows.append({**row, "verdict": "not run", "ours": "; ".join(missing)})
            continue
        quantities = [compared(claim, *sides) for sides in estimates]
        mean = uncertainty.mean_across_studies(quantities)
        at_chance = mean.resolvable and claim.kind in COMPARISONS and all(
            _at_chance(claim, *sides) for sides in estimates)
        outcome = judge(claim, mean, at_chance)
        if outcome in ("holds", "inconclusive") and all(
                vacuous_parity(claim, *sides, mean) for sides in estimates):
            outcome = "no signal"  # a parity an attack at chance would pass in every study
        each = ", ".join(f"{study} {_in_paper_units(claim, quantity)}"
                         for (study, _), quantity in zip(found, quantities, strict=True))
        rows.append({**_shown_in(row, showing_artifact(claim, studies_there, config), config),
                     "verdict": outcome, "replicates": min(
                         independent_runs(study, config) for study, _ in found),
                     "ours": f"mean over {len(found)} studies: {_quantity_text(claim, mean)} "
                             f"({each})",
                     **_quantity_columns(claim, row["study"], outcome, mean)})
    return rows


def _trend_rows(claim: Claim, config: dict[str, Any], studies: list[str]
                ) -> list[dict[str, Any]]:
    """A trend claim on each paper dataset the studies stand for: its attack's metric in the
    study where ``claim.over`` is largest against the one where it is smallest."""
    of_dataset: dict[str, list[str]] = {}
    axes: dict[str, list[tuple[float, str, str]]] = {}
    for study in studies:
        study_config = config["studies"][study]
        dataset = stands_for(claim, study, config)
        if study_config["paper"] != claim.paper or dataset not in claim.datasets:
            continue
        of_dataset.setdefault(dataset, []).append(study)
        attack = _trend_attack(study_config, claim)
        level = _level(claim.over, study, study_config)
        if attack is not None and level is not None:
            axes.setdefault(dataset, []).append((level, study, attack))
    rows = []
    for dataset, studies_there in of_dataset.items():
        axis = axes.get(dataset, [])
        row = _row(claim, ", ".join(studies_there), dataset)
        if len({level for level, _, _ in axis}) < 2:
            rows.append({**row, "verdict": "not run", "ours": (
                f"needs {_spec_text(claim.a)} in studies of {dataset} at two or more "
                f"{claim.over} values")})
            continue
        ends = [max(axis), min(axis)]  # (level, study, attack): largest, smallest
        if failed := _failed_fits([(study, attack) for _, study, attack in ends], config):
            rows.append({**row, "verdict": "not run", "ours": failed})
            continue
        replicates = [replicates_of(study, config) for _, study, _ in ends]
        estimates = [_over_replicates(found, attack, claim.metric, config)
                     for found, (_, _, attack) in zip(replicates, ends, strict=True)]
        outcome, quantity = verdict(claim, *estimates, paired=_one_split(*replicates,
                                                                          config=config))
        pair = " vs ".join(study for _, study, _ in ends)
        shown = showing_artifact(claim, [study for _, study, _ in ends], config)
        rows.append({**_shown_in(row, shown, config), "study": pair, "verdict": outcome,
                     "replicates": min(
                         independent_runs(study, config) for _, study, _ in ends),
                     "ours": f"{claim.over} {ends[0][0]:g} vs {ends[1][0]:g}: "
                             + _describe(claim, estimates, quantity, [
                                 _side_label(config["studies"][study], attack)
                                 for _, study, attack in ends]),
                     **_quantity_columns(claim, pair, outcome, quantity)})
    return rows


def _one_split(first: list[str], second: list[str], config: dict[str, Any]) -> bool:
    """Whether two studies' replicates audit the same records one by one (their dataset,
    split and non-members the same: a DP sweep), so that a trend pairs them."""
    def audited(study: str) -> tuple[Any, ...]:
        found = config["studies"][study]
        return found.get("dataset"), found.get("split"), found.get("nonmembers")

    return len(first) == len(second) and all(  # a study without a split pairs with none
        audited(a) == audited(b) and audited(a)[1] is not None
        for a, b in zip(first, second, strict=True))


def _row(claim: Claim, study: str, dataset: str, paper_a: float | None = None,
         paper_b: float | None = None) -> dict[str, Any]:
    """What every row of ``claims.csv`` on a study opens with: the claim, where it is
    evaluated, the paper's numbers and the claim's artifact with the command that rebuilds it
    (an evaluated row then links the artifact that shows its study: :func:`_shown_in`)."""
    return _shown_in({"claim": claim.id, "paper": claim.paper, "statement": claim.statement,
                      "artifact": claim.artifact, "study": study, "paper_dataset": dataset,
                      "metric": claim.metric, "paper_a": paper_a, "paper_b": paper_b},
                     claim.artifact)


def _shown_in(row: dict[str, Any], artifact: str, config: dict[str, Any] | None = None
              ) -> dict[str, Any]:
    """The row linked to ``artifact`` and the command that rebuilds it; no command where
    ``config`` makes no such artifact (a claim whose own artifact no config builds yet)."""
    built = config is None or artifact in config["artifacts"]
    return {**row, "artifact": artifact, "command": "snakemake --profile profiles/local "
            f"results/artifacts/{artifact_file(artifact)}" if built else ""}


def showing_artifact(claim: Claim, studies: list[str], config: dict[str, Any]) -> str:
    """The artifact that shows an evaluated row's studies: the claim's own where it does, else the
    paper's artifact of the same number (BMIA's Figure 3 on Purchase is BMIA-F3b beside
    CIFAR-10's F3a) or, failing one, of the same builder (QMIA's ResNet-10 stand-in is in
    Table 6, not ResNet-50's Table 1), that does; the claim's own where none does."""
    artifacts = config["artifacts"]

    def shows(name: str) -> bool:  # an artifact this run does not make shows nothing
        if name not in artifacts:
            return False
        listed = artifacts[name].get("studies")
        return listed is None or all(study in listed for study in studies)

    if shows(claim.artifact):
        return claim.artifact
    number = claim.artifact.rstrip(string.ascii_lowercase)
    builder = artifacts.get(claim.artifact, {}).get("builder")
    of_paper = [name for name in artifacts if name.split("-")[0] == number.split("-")[0]
                and name != claim.artifact and name in catalog.ARTIFACT_IDS and shows(name)]
    same = ([name for name in of_paper if name.rstrip(string.ascii_lowercase) == number]
            or [name for name in of_paper if artifacts[name].get("builder") == builder])
    return same[0] if same else claim.artifact


def _quantity_columns(claim: Claim, study: str, outcome: str, quantity: Estimate,
                      rivals: int = 1) -> dict[str, float]:
    low, high = quantity.interval()
    return {"quantity": quantity.value, "quantity_low": low, "quantity_high": high,
            "replication": round(replication(claim, study, outcome, quantity, rivals), 2)}


def _trend_attack(study_config: dict[str, Any], claim: Claim) -> str | None:
    """The study's instance of a trend's attack: the paper's default setting or a point of the
    trend's axis (``epsilon=16``, ``records=1000``)."""
    axis = OVER[claim.over]
    for name, attack in study_config["attacks"].items():
        setting = attack.get("paper_setting") or ""
        if attack.get("paper_attack") == claim.a["attack"] and (
                setting == claim.a.get("setting", "") or setting.startswith(f"{axis}=")):
            return name
    return None


def _level(over: str, study: str, study_config: dict[str, Any]) -> float | None:
    """Where a study sits on a trend's axis: its DP epsilon (None without DP), or its first
    target's training-set size."""
    if over == "epsilon":
        dp = (study_config.get("training") or {}).get("dp")
        return float(dp["epsilon"]) if dp else None
    card = res.target_card(res.RESULTS, model_home(study, study_config), 0)
    return float(io.read_json(card)["n_train"])


def _over_replicates(replicates: list[str], attack: str, metric: str,
                     config: dict[str, Any]) -> Estimate:
    """An attack's metric in a study: over its replicates where it has several (the interval
    then holds training's variance), else from its one run (targets or audited records)."""
    found = [_measure(study, attack, metric, config) for study in replicates]
    return found[0] if len(found) == 1 else uncertainty.over_replicates(found)


def _agreement_over(replicates: list[str], pair: Pair, metric: str,
                    config: dict[str, Any]) -> Estimate:
    """A pair's agreement in a study (:func:`_agreement`): over its replicates where it has
    several, a Student-t interval of their values; else over its targets where they are
    repetitions (:data:`~miarepro.uncertainty.MIN_TARGETS` or more), else a bootstrap of its
    audited records."""
    fpr = agreement_fpr(metric)
    if len(replicates) > 1:
        return uncertainty.over_replicates([_agreement(study, pair, fpr)
                                            for study in replicates])
    study_config = config["studies"][replicates[0]]
    repetitions = (builders.has_repetitions(study_config)
                   and study_config["targets"] >= uncertainty.MIN_TARGETS)
    return _agreement(replicates[0], pair, fpr, bootstrap=not repetitions)


def _agreement(study: str, pair: Pair, fpr: float, bootstrap: bool = False) -> Estimate:
    """The share of members on which the pair's attacks make the same call at ``fpr``
    (:func:`~miarepro.artifacts.iha_tables.member_agreement`), on the records both scored: the
    mean over the study's targets, with the targets' values as draws, or with ``bootstrap``
    the means of :data:`~miarepro.uncertainty.N_BOOTSTRAP` resamplings of each target's
    records, members and non-members apart, each setting both thresholds anew. A resampling
    depends on the study, the target and the audit's size only, so two pairs of one study
    draw the same records and their difference is paired. Resolvable where each target's
    audit puts :data:`~miarepro.uncertainty.MIN_EXCEEDANCES` non-members above the
    thresholds."""
    first, second = (io.read_table(res.score_path(res.RESULTS, study, attack))
                     .set_index(["target", "sample"])[["member", "score"]] for attack in pair)
    common = first.index.intersection(second.index).sort_values()
    points, draws, resolvable = [], [], True
    for target in common.get_level_values("target").unique():
        rows = common[common.get_level_values("target") == target]
        member = first.loc[rows, "member"].to_numpy(dtype=bool)
        scores = [side.loc[rows, "score"].to_numpy(dtype=float) for side in (first, second)]
        points.append(member_agreement(member, *scores, fpr))
        resolvable &= bool(uncertainty.resolvable(f"tpr@{100 * fpr:g}%", int(member.sum()),
                                                  int((~member).sum())))
        if bootstrap:
            rng = np.random.default_rng([zlib.crc32(study.encode()), int(target), member.size])
            inside, outside = np.flatnonzero(member), np.flatnonzero(~member)
            drawn = (np.concatenate([rng.choice(inside, inside.size),
                                     rng.choice(outside, outside.size)])
                     for _ in range(uncertainty.N_BOOTSTRAP))
            draws.append([member_agreement(member[d], *(s[d] for s in scores), fpr)
                          for d in drawn])
    value = float(np.mean(points))
    if bootstrap:
        return Estimate(value, np.mean(draws, axis=0), "bootstrap", resolvable)
    return Estimate(value, np.array(points), "targets", resolvable)


def _measure(study: str, attack: str, metric: str, config: dict[str, Any]) -> Estimate:
    """An attack's metric in one study, or its cost: ``gpu_minutes``, the models, fit and
    scoring it needs, as the paper tables' compute rows count them; ``train_minutes``, Subpop
    Table 3's training with every target known, at the paper's model counts; ``audit_minutes``,
    IHA's audit of a thousand records, at the paper's reference count; ``seconds``, the
    attack's own scoring of one target.

    In a partition study of several repetitions, ``gpu_minutes`` (a repetition's own reference
    models, fit and scoring) and ``seconds`` are timed in each, and their interval is over them,
    paired across the two attacks of a claim by repetition, as any other metric's. Otherwise a
    cost is timed once; its draws spread it by the run's timing noise, the spread of the log of
    the training seconds of the reference models its claims read (:func:`_timing_cards`), drawn
    apart for each attack, so that a cost claim is only decided beyond that noise. The spread is
    a factor, log-normal: a time is never negative, and a ratio of two costs then spreads alike
    either way (on a raw scale, a spread of a third put 0.3% of the draws of a denominator
    within a tenth of zero and the ratio's upper limit at 3.2 times its value).
    """
    if metric not in COSTS:
        return res.attack_estimates(res.RESULTS, study, attack)[metric]
    study_config = config["studies"][study]
    if _timed_by_repetition(metric, study_config):
        per_target = (res.target_seconds(res.RESULTS, study, attack)["score_seconds"].to_numpy()
                      if metric == SECONDS else np.array(builders.target_compute_seconds(
                          res.RESULTS, study, attack, study_config)) / 60)
        return Estimate(float(per_target.mean()), per_target, "targets")
    if metric == SECONDS:
        cost = res.score_seconds(res.RESULTS, study, attack)
    elif metric == COMPUTE:
        cost = builders.compute_seconds(res.RESULTS, study, attack, study_config) / 60
    elif metric == AUDIT_MINUTES:
        from miarepro.artifacts import iha_tables

        cost = iha_tables.audit_minutes(study, study_config, attack)
    else:
        from miarepro.artifacts import subpop_artifacts

        cost = subpop_artifacts.minutes_at_paper_counts(study, study_config, attack)
    seconds = [io.read_json(card)["train_seconds"]
               for card in _timing_cards(res.RESULTS, study, config)]
    if len(seconds) < 2:  # no timing noise to decide beyond: a point is not an interval
        return Estimate(cost, np.full(uncertainty.N_BOOTSTRAP, cost), "bootstrap",
                        resolvable=False)
    noise = np.std(np.log(seconds), ddof=1)
    rng = np.random.default_rng(list(f"{study}/{attack}".encode()))
    draws = cost * np.exp(noise * rng.standard_normal(uncertainty.N_BOOTSTRAP))
    return Estimate(cost, draws, "bootstrap")


def _spec_text(spec: dict[str, str]) -> str:
    return (spec["attack"] + (f" ({spec['setting']})" if spec.get("setting") else "")
            + (f" with {spec['versus']}" if spec.get("versus") else ""))


def _not_run_anywhere(claim: Claim) -> dict[str, Any]:
    """The row of a claim no study of the run stands for: what it would need."""
    needs = catalog.load_catalog()[claim.artifact]["needs"]
    return {"claim": claim.id, "paper": claim.paper, "statement": claim.statement,
            "artifact": claim.artifact, "study": "", "paper_dataset": "", "metric": claim.metric,
            "verdict": "not run",
            "ours": (f"no study of this run stands in for {', '.join(claim.datasets)}"
                     + (f" with a {' or '.join(claim.architectures)} target"
                        if claim.architectures else "")
                     + (f" (the paper's {claim.artifact} needs {', '.join(needs)})"
                        if needs else ""))}


def _describe(claim: Claim, estimates: list[Estimate], quantity: Estimate,
              names: list[str] | None = None) -> str:
    """``7.06 [5.1, 9.0] vs 2.16 [1.4, 3.0]; difference 4.90 [2.9, 6.8]`` in paper units, each
    side preceded by its name in the study's tables where ``names`` are given, so a reviewer
    finds it there with its settings (LiRA with 8 references standing for the paper's 16)."""
    shown = [("" if names is None else f"{name}: ") + res.format_estimate(
        res.estimate_columns(claim.metric, e), claim.metric, claim.paper)
        for e, name in zip(estimates, names or [None] * len(estimates), strict=True)]
    text = " vs ".join(shown)
    if len(estimates) > 1 and quantity.resolvable:
        text += "; " + _quantity_text(claim, quantity)
    return text


def _quantity_text(claim: Claim, quantity: Estimate) -> str:
    """``ratio 0.93 [0.80, 1.06]``, ``difference 4.90 [2.9, 6.8]`` (a trend's ``decrease`` or
    ``increase`` from the smallest level to the largest) or the value, in paper units."""
    if claim.kind.startswith("ratio"):
        low, high = quantity.interval()
        return f"ratio {quantity.value:.2f} [{low:.2f}, {high:.2f}]"
    word = {"increases": "increase ", "decreases": "decrease "}.get(  # largest - smallest
        claim.kind, "difference " if claim.kind in COMPARISONS else "")
    return word + res.format_estimate(
        res.estimate_columns(claim.metric, quantity, clip=False), claim.metric, claim.paper)


def _in_paper_units(claim: Claim, quantity: Estimate) -> str:
    """A compared quantity's value alone: a ratio, or in the paper's units."""
    if claim.kind.startswith("ratio"):
        return f"{quantity.value:.2f}"
    return f"{quantity.value * uncertainty.percent_scale(claim.metric, claim.paper):.2f}"


def artifact_file(artifact: str) -> str:
    """The file that shows an artifact: a table's Markdown or a figure's PNG."""
    return artifact + (".png" if catalog.load_catalog()[artifact]["kind"] == "figure" else ".md")


def _paper_text(claim: Claim, a: float | None, b: float | None) -> str:
    """The numbers the claim's artifact prints for its sides, "—" for a side it does not print
    (a pair standing in for the paper's: IHA-C28); where it prints none (a figure, or a number
    quoted in the text, which the statement then gives), says so."""
    sides = [a] + ([b] if claim.b is not None else [])
    if all(pd.isna(side) for side in sides):
        return "not printed in the artifact"
    return " vs ".join("—" if pd.isna(side) else f"{side:g}" for side in sides)


VERDICT_TEXT = (
    "**holds**: the 95% interval of the compared quantity (paired across the two attacks; "
    "over the study's replicates where it has several) "
    "lies wholly on the claimed side; **fails**: wholly on the other side; **inconclusive**: it "
    "straddles (or, for an order a loss predicts, the losses give none); **not resolvable**: "
    "the audit cannot resolve the metric (n/r); **no signal**: "
    "every attack the claim compares is indistinguishable from chance (its value lies within "
    "what an attack without signal gets on the same audited records, pooled over replicates) "
    "and the paired "
    "interval does not tell them apart either, so an ordering or a parity cannot be tested, "
    "or a parity that an attack at chance, measured as precisely, would pass too (the "
    "reference attack no farther from chance than the tolerance plus the interval's "
    "half-width), so that it could not fail; "
    "**not run**: the run has no study or attack for it (the row "
    "says which). An `equals` claim (a theorem's value) holds when the interval lies within "
    "its margin of the value and fails when it lies wholly beyond it. A cost (minutes, "
    "seconds) over replicates is their geometric mean, its interval that of their logs "
    "taken back (but where a replicate costs 0); timed once, it is spread by the run's timing "
    "noise.")


def build(name: str, settings: dict[str, Any], config: dict[str, Any], prefix: str) -> None:
    """``claims.csv`` and ``claims.md``: every claim of the papers this configuration covers.

    The page opens with the verdicts per paper and the failing claims with their figures,
    then each paper's claims, failures first, and what the rest would need.
    """
    studies = [s for s in res.studies_of(settings, config)
               if load_claims(config["studies"][s]["paper"])]
    table = evaluate(config, studies)
    io.write_table(prefix + ".csv", table)
    table["order"] = table["verdict"].map(VERDICTS.index)
    summary = pd.crosstab(table["paper"], table["verdict"]).reindex(columns=list(VERDICTS),
                                                                     fill_value=0)
    lines = ["# Claims", "",
             "Each headline claim of the papers as a checkable statement, evaluated on this run. "
             + VERDICT_TEXT + " TPR in %. Each row's command rebuilds its artifact with the "
             "default config; for a run of another, add its `--configfile` (and `--directory`).",
             "", builders.interval_note(config), "",
             "| paper | " + " | ".join(VERDICTS) + " |", "|---" * (len(VERDICTS) + 1) + "|",
             *[f"| {paper} | " + " | ".join(str(v) for v in counts) + " |"
               for paper, counts in summary.iterrows()], "", _replication_note(table), "",
             "## Failing claims", "", *_claim_rows(table[table["verdict"] == "fails"]), "",
             "## Regime", "", *regime.regime_markdown(regime.regime_rows(config, studies)), ""]
    for paper, group in table.groupby("paper", sort=False):
        evaluated = group[group["verdict"] != "not run"].sort_values("order", kind="stable")
        lines += [f"## {paper}", "", *_claim_rows(evaluated), ""]
        for study, missing in group[group["verdict"] == "not run"].groupby("study", sort=False):
            reasons = "; ".join(f"{row['claim']}: {row['ours']}"
                                for row in missing.to_dict("records"))
            lines.append(f"Not run on {study}: {reasons}." if study else f"Not run: {reasons}.")
        lines.append("")
    io.write_text(prefix + ".md", "\n".join(lines))


def _replication_note(table: pd.DataFrame) -> str:
    """How many verdicts a rerun under new seeds would likely keep (:func:`replication`)."""
    chances = table["replication"].dropna() if "replication" in table else pd.Series()
    if chances.empty:
        return ("No verdict rests on replicates, so none says how likely a rerun under new "
                "seeds is to keep it.")
    return (f"The chance that a rerun under new seeds gives the same verdict (in brackets after "
            f"each verdict; column `replication` of claims.csv) is 0.95 or more for "
            f"{(chances >= 0.95).sum()} of the {len(chances)} holds, fails and inconclusive "
            f"verdicts that rest on replicates, and {chances.mean():.2f} on average: the "
            f"share of them a second run is expected to repeat.")


def _claim_rows(rows: pd.DataFrame) -> list[str]:
    """A Markdown table of evaluated claims: statement, study, artifact with its command, the
    paper's numbers, ours with intervals, the verdict and the chance a rerun keeps it."""
    lines = ["| claim | statement | study (stands in for) | artifact and command | paper | ours | "
             "verdict (a rerun keeps it) |", "|---|---|---|---|---|---|---|"]
    for row in rows.to_dict("records"):
        claim = {c.id: c for c in load_claims(row["paper"])}[row["claim"]]
        lines.append(
            f"| {row['claim']} | {row['statement']}"
            + (f" (tolerance: {claim.basis})" if claim.basis else "")
            + f" | {row['study']} ({row['paper_dataset']})"
            + (f", {row['replicates']:.0f} replicates " if row.get("replicates", 1) > 1 else " ")
            + (f"| [{row['artifact']}]({artifact_file(row['artifact'])}): `{row['command']}` | "
               if row["command"] else f"| {row['artifact']}, which this configuration does not "
               "build | ")
            + f"{_paper_text(claim, row['paper_a'], row['paper_b'])} | {row['ours']} | "
            f"**{row['verdict']}**"
            + (f" ({row['replication']:.2f})" if pd.notna(row.get("replication")) else "")
            + " |")
    return lines if len(rows) else ["None."]
