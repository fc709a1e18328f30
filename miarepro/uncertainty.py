"""95% intervals for membership-inference metrics, and when a metric can be reported at all.

Two sources of uncertainty, as the issue of every paper's ± column:

- **Across targets.** A study whose targets are repetitions (a partition split: each target
  its own draw of the records, its own reference models and fits) with at least
  :data:`MIN_TARGETS` of them reports the mean over targets with a Student-t interval,
  ``mean ± t(0.975, T-1) · sd / sqrt(T)``: the spread the papers print (Stolen Memories' 10
  repetitions). The targets of a balanced split share their pool and reference models, so
  their spread leaves out what a new draw of those would move: however many, they are one
  realisation, and take the bootstrap below.
- **Over audited samples.** Otherwise, a seeded *stratified* bootstrap: members and
  non-members of each target are resampled with replacement separately, so every replicate keeps
  the audit's class balance, and the metric of each replicate is averaged over targets. The
  95% interval is the percentile interval of :data:`N_BOOTSTRAP` replicates.

The bootstrap weights depend only on the study seed, the target and the class sizes, never on
the attack, so two attacks of one study are resampled identically and their difference is a
*paired* estimate (:meth:`Estimate.__sub__`), as a claim "A beats B" needs.

- **Across studies.** A trend (an attack's leakage over the DP epsilon or the training-set
  size) compares two studies trained apart: :func:`difference_across_studies` subtracts
  their bootstrap draws, or their targets or replicates one by one where both studies share
  a split (a DP sweep), or takes Welch's interval over them.
- **Across replicates.** A study run as several replicates (``replicates`` in its config: the
  whole experiment under new seeds) gives the claims a Student-t interval over the replicates'
  values (:func:`over_replicates`), so the variance of training the target, its reference
  models and the attack's fits is counted; the two sources above see one trained realisation.

- **Against chance.** Whether an attack is distinguishable from chance at all (a claim about
  attacks that all are not cannot be tested: "no signal") is a test of one hypothesis, no
  signal in any realisation, whose distribution is known from the audit's size alone: members'
  and non-members' scores then come from one distribution (calls at one rate). Each target's
  metric is drawn from that distribution (:func:`null_draws`, a parametric bootstrap); their
  mean over targets and replicates is the null the observed mean is tested against
  (:meth:`Estimate.consistent_with_chance`). Under that hypothesis training noise adds no
  variance, so pooling the records of every replicate is valid, and far more powerful than a
  t(2) interval over three replicates' values, which left attacks clearly above chance
  "indistinguishable" from one seed to the next.

An empirical FPR (``fpr@1%``: the share of non-members that reach an attack's implied ``1 - a``
quantile, QMIA's Theorem 1) is a binomial proportion: with fewer than :data:`MIN_TARGETS`
targets its interval is the exact (Clopper-Pearson) one of the flagged non-members counted over
every target; with more, the Student-t interval over targets as for any metric, since each
repetition's quantile model delivers its own FPR (its training seed moves it more than the
binomial interval over one model's non-members shows).

A TPR at FPR ``a`` rests on the ``a · n`` non-members above the threshold. With fewer than
:data:`MIN_EXCEEDANCES` of them (``n < 10 / a``) the number is not reported
(:func:`resolvable`): at ``n = 2,000`` a TPR@0.1% would be decided by two samples (an
ordering of two attacks over independent runs may still pool them:
:func:`pooled_exceedances`). Any metric needs at least :data:`MIN_PER_CLASS` members and
non-members per target, below which a percentile bootstrap is not trustworthy. A decision
calibrated at level ``a`` (Algorithm 3) calls about ``(1 - a) n`` non-members, so its
precision takes the same rule at FPR ``1 - a``.

Replicates are computed on sorted scores with cumulative weights, vectorised over replicates,
with the same conventions as :mod:`miarepro.metrics` (conservative TPR@FPR, ties count half in
the AUC); the tests check them against it and against scikit-learn.
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from miarepro.metrics import metric_name

N_BOOTSTRAP = 1000
#: draws of a metric had the attack no signal: the chance test reads their 2.5% and 97.5%
#: quantiles, which 1,000 draws (25 in a tail) left off enough to reject 6.8% of attacks
#: without signal at precision@1% (5.5% at 10,000; a test beside it checks the level)
N_NULL = 10_000
LEVEL = 0.95
MIN_TARGETS = 3
MIN_EXCEEDANCES = 10
#: below this many a run, a threshold placed at ``a · n`` exceedances sits at an FPR of more
#: than half again ``a`` (about ``(a · n + 1) / n``): such runs are not pooled
MIN_RUN_EXCEEDANCES = 2
MIN_PER_CLASS = 20
_BLOCK = 100  # replicates per vectorised block: bounds memory at ~100 x audit size
_FPR_METRIC = re.compile(r"^(tpr|precision|fpr)@([0-9.]+)%$")
#: per-sample columns of a scores file whose non-member mean is a metric
NONMEMBER_COLUMNS = ("pinball@", "fpr@")


def metric_fpr(metric: str) -> float | None:
    """The FPR of ``tpr@1%`` / ``precision@0.1%`` / ``fpr@1%`` style names, None for ``auc``."""
    match = _FPR_METRIC.match(metric)
    return float(match.group(2)) / 100 if match else None


def exceedances(metric: str, n_members: int, n_nonmembers: int) -> float:
    """The non-members above the threshold ``metric`` rests on in one audit of this size:
    ``floor(n · a)`` at FPR ``a``, as the conservative threshold admits them (inf for a metric
    without an FPR), 0 where the audit has fewer than :data:`MIN_PER_CLASS` members or
    non-members. A calibrated decision's precision
    (``precision@cal99``) rests on its false positives as a precision at FPR ``1 - a`` does:
    Algorithm 3 calls about that share of the non-members."""
    if min(n_members, n_nonmembers) < MIN_PER_CLASS:
        return 0.0
    fpr = metric_fpr(metric)
    if metric.startswith("precision@cal"):
        fpr = 1 - float(metric.removeprefix("precision@cal")) / 100
    return np.inf if fpr is None else float(np.floor(n_nonmembers * fpr + 1e-9))


def resolvable(metric: str, n_members: int, n_nonmembers: int) -> bool:
    """Whether an audit of this size can report ``metric`` (see module docstring)."""
    return exceedances(metric, n_members, n_nonmembers) >= MIN_EXCEEDANCES


#: papers that print AUC in percent (Subpop's Table 2); the others print it as a fraction
AUC_IN_PERCENT = frozenset({"subpop"})


def percent_scale(metric: str, paper: str | None = None) -> float:
    """100 for metrics the papers print in percent (TPR, precision, Stolen Memories' accuracy,
    advantage and recall; AUC where ``paper`` prints it so), 1 for the others (AUC, pinball
    loss in score units, seconds)."""
    percent = (metric_fpr(metric) is not None or metric.split("@")[0] in DECISION_METRICS
               or (metric == "auc" and paper in AUC_IN_PERCENT))
    return 100.0 if percent else 1.0


#: what a decision (member calls, not a ranking) is measured by: Stolen Memories' metrics,
#: on its balanced evaluation (as many members as non-members) written with the rates,
#: accuracy = (1 + TPR - FPR) / 2, advantage = TPR - FPR, precision = TPR / (TPR + FPR) (1/2
#: when nothing is called a member), recall = TPR; so resampling cannot unbalance them
DECISION_METRICS = ("accuracy", "advantage", "precision", "recall")


def chance_level(metric: str) -> float | None:
    """What an attack that knows nothing scores on ``metric`` (AUC 1/2, TPR at FPR ``a`` equal
    to ``a``, precision and accuracy 1/2, advantage 0), or None where the metric has no such
    level (recall, pinball losses, FPRs, seconds)."""
    base = metric.split("@cal")[0]
    fpr = metric_fpr(base)
    if base == "auc" or (fpr is not None and base.startswith("precision")):
        return 0.5
    if fpr is not None and base.startswith("tpr"):
        return fpr
    return {"accuracy": 0.5, "advantage": 0.0, "precision": 0.5}.get(base)


def null_draws(metric: str, point: dict[str, float], rng: np.random.Generator,
               n_draws: int = N_NULL) -> np.ndarray | None:
    """``n_draws`` values of one target's ``metric`` had the attack no signal, at the audit's
    size (``point``: the target's row of a :func:`metric_table`), or None where the metric has
    no chance level (:func:`chance_level`).

    - AUC: the Mann-Whitney statistic's null, normal with variance
      ``(n_in + n_out + 1) / (12 n_in n_out)`` (ties only narrow it);
    - TPR at FPR ``a`` (and its precision): members pass the conservative threshold, the
      ``k + 1``-th highest non-member (``k = floor(a n_out)``), binomially, at the share of
      the common score distribution above it, ``Beta(k + 1, n_out - k)``;
    - a decision's accuracy, advantage and precision: members and non-members are called at
      one rate, the target's own share of calls over both.
    """
    n_in, n_out = int(point["n_members"]), int(point["n_nonmembers"])
    base, _, calibration = metric.partition("@cal")
    suffix = f"@cal{calibration}" if calibration else ""
    fpr = metric_fpr(base)
    if chance_level(metric) is None:
        return None
    if base == "auc":
        spread = np.sqrt((n_in + n_out + 1) / (12 * n_in * n_out))
        return 0.5 + spread * rng.standard_normal(n_draws)
    if fpr is not None:  # tpr@ or precision@ of a ranking
        # members above the (k+1)-th highest non-member (the conservative threshold), above
        # which a share Beta(k + 1, n_out - k) of the common distribution lies
        allowed = int(np.floor(fpr * n_out + 1e-9))
        passed = rng.binomial(n_in, rng.beta(allowed + 1, n_out - allowed, n_draws))
        if base.startswith("tpr"):
            return passed / n_in
        # the false positives are the k non-members above the lowest flagged member: of the
        # k above the threshold, those not below it (a share Beta(1, m) of m members' range)
        lowest = rng.beta(1, np.maximum(passed, 1))
        false_pos = allowed - rng.binomial(allowed, lowest)
        with np.errstate(invalid="ignore"):
            return np.where(passed > 0, passed / n_in / (passed / n_in + false_pos / n_out),
                            0.5)
    recall = float(point[f"recall{suffix}"])
    rate = (n_in * recall + n_out * (recall - float(point[f"advantage{suffix}"]))) / (n_in + n_out)
    rate = min(max(rate, 0.0), 1.0)
    called_in = rng.binomial(n_in, rate, n_draws) / n_in
    called_out = rng.binomial(n_out, rate, n_draws) / n_out
    return _decision_metrics(called_in, called_out, suffix)[metric]


def decision_name(level: float | None) -> str:
    """The scores column of an attack's member calls: at its own threshold (``decision``) or
    calibrated by Algorithm 3 at ``level`` (``decision@cal90`` for 0.9)."""
    return "decision" if level is None else f"decision@cal{level * 100:g}"


def decision_metric_names(levels: Iterable[float]) -> list[str]:
    """``accuracy``, ..., ``recall@cal90``, ...: the metrics of every decision column."""
    suffixes = [decision_name(level).removeprefix("decision") for level in (None, *levels)]
    return [f"{metric}{suffix}" for suffix in suffixes for metric in DECISION_METRICS]


def pinball_name(fpr: float) -> str:
    """``pinball@1%``: mean pinball loss on non-members of an attack's implied ``1 - fpr``
    quantile (QMIA Tables 6 and 7), for attacks that imply one."""
    return metric_name("pinball", fpr)


def exceedance_name(alpha: float) -> str:
    """``fpr@1%``: the share of non-members that reach an attack's implied ``1 - alpha``
    quantile, which QMIA's Theorem 1 promises to be ``alpha``."""
    return metric_name("fpr", alpha)


def metric_names(fprs: Iterable[float]) -> list[str]:
    return ["auc", *(metric_name(kind, fpr) for fpr in fprs for kind in ("tpr", "precision"))]


class _SortedScores:
    """One target's scores, sorted once, for weighted ROC metrics of many replicates."""

    def __init__(self, member: np.ndarray, score: np.ndarray,
                 nonmember_values: dict[str, np.ndarray] | None = None,
                 decisions: dict[str, np.ndarray] | None = None) -> None:
        """``nonmember_values``: per-sample values whose weighted non-member mean is a metric
        too (pinball losses); ``decisions``: member calls (:func:`decision_name` columns);
        both aligned with ``score``."""
        member = np.asarray(member, dtype=bool)
        score = np.asarray(score, dtype=np.float64)
        self.order_in, self.order_out = np.argsort(score[member]), np.argsort(score[~member])
        self.nonmember_values = {name: np.asarray(values, dtype=np.float64)[~member][
            self.order_out] for name, values in (nonmember_values or {}).items()}
        self.decisions = {name: (np.asarray(calls, dtype=np.float64)[member][self.order_in],
                                 np.asarray(calls, dtype=np.float64)[~member][self.order_out])
                          for name, calls in (decisions or {}).items()}
        self.members = score[member][self.order_in]
        self.nonmembers = score[~member][self.order_out]
        self.n_in, self.n_out = len(self.members), len(self.nonmembers)
        # non-members at or below each member's score (strictly below, and including ties)
        self.below = np.searchsorted(self.nonmembers, self.members, side="left")
        self.at_or_below = np.searchsorted(self.nonmembers, self.members, side="right")

    def metrics(self, w_in: np.ndarray, w_out: np.ndarray,
                fprs: Iterable[float]) -> dict[str, np.ndarray]:
        """Metrics of ``b`` weighted replicates: ``w_in`` ``(b, n_in)``, ``w_out`` ``(b, n_out)``.

        Weights are resampling counts in the original member / non-member order.
        """
        w_in = np.asarray(w_in, dtype=np.float64)[:, self.order_in]
        w_out = np.asarray(w_out, dtype=np.float64)[:, self.order_out]
        rows = np.arange(len(w_in))[:, None]
        cum_in = np.concatenate([np.zeros((len(w_in), 1)), w_in.cumsum(axis=1)], axis=1)
        cum_out = np.concatenate([np.zeros((len(w_out), 1)), w_out.cumsum(axis=1)], axis=1)
        total_in, total_out = cum_in[:, -1], cum_out[:, -1]
        # AUC = P(member > non-member) + P(tie) / 2, weighted (Mann-Whitney)
        beaten = 0.5 * (cum_out[:, self.below] + cum_out[:, self.at_or_below])
        result = {"auc": (w_in * beaten).sum(axis=1) / (total_in * total_out)}
        for name, values in self.nonmember_values.items():
            result[name] = w_out @ values / total_out
        for name, (calls_in, calls_out) in self.decisions.items():
            result.update(_decision_metrics(w_in @ calls_in / total_in,
                                            w_out @ calls_out / total_out,
                                            name.removeprefix("decision")))
        descending_cum = total_out[:, None] - cum_out[:, ::-1][:, 1:]  # weight of >= each value
        descending = self.nonmembers[::-1]
        for fpr in fprs:
            # Flag every member above the first non-member (from the top) whose inclusion would
            # exceed the allowed false positives; among thresholds with that TPR take the
            # highest, i.e. the lowest flagged member: the conservative rule of metrics.py.
            over = descending_cum > (fpr + 1e-12) * total_out[:, None]
            value = np.where(over.any(axis=1), descending[over.argmax(axis=1)], -np.inf)
            flagged = (w_in > 0) & (self.members > value[:, None])
            lowest = self.members[flagged.argmax(axis=1)]
            any_flagged = flagged.any(axis=1)
            true_pos = total_in - cum_in[rows[:, 0], np.searchsorted(self.members, value,
                                                                     side="right")]
            false_pos = np.where(any_flagged, total_out - cum_out[rows[:, 0], np.searchsorted(
                self.nonmembers, lowest, side="left")], 0.0)
            tpr, realised = true_pos / total_in, false_pos / total_out
            result[metric_name("tpr", fpr)] = tpr
            with np.errstate(invalid="ignore"):
                precision = np.where(tpr + realised > 0, tpr / (tpr + realised), 0.5)
            result[metric_name("precision", fpr)] = precision
        return result


def _decision_metrics(tpr: np.ndarray, fpr: np.ndarray, suffix: str) -> dict[str, np.ndarray]:
    with np.errstate(invalid="ignore"):
        precision = np.where(tpr + fpr > 0, tpr / (tpr + fpr), 0.5)
    values = ((1.0 + tpr - fpr) / 2, tpr - fpr, precision, tpr)
    return {f"{name}{suffix}": value for name, value in zip(DECISION_METRICS, values,
                                                            strict=True)}


def point_metrics(member: np.ndarray, score: np.ndarray, fprs: Iterable[float],
                  nonmember_values: dict[str, np.ndarray] | None = None,
                  decisions: dict[str, np.ndarray] | None = None) -> dict[str, float]:
    """AUC, TPR@FPR and precision@FPR of one target (equal to :func:`metrics.summary`), the
    non-member mean of each of ``nonmember_values`` and the metrics of each of ``decisions``
    (:data:`DECISION_METRICS`)."""
    sorted_scores = _SortedScores(member, score, nonmember_values, decisions)
    ones_in = np.ones((1, sorted_scores.n_in))
    ones_out = np.ones((1, sorted_scores.n_out))
    return {k: float(v[0]) for k, v in sorted_scores.metrics(ones_in, ones_out, fprs).items()}


def _resample_counts(n: int, size: int, rng: np.random.Generator) -> np.ndarray:
    """``(size, n)`` counts of ``n`` draws with replacement from ``n`` items, per replicate."""
    draws = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
    return np.bincount(draws.ravel(), minlength=size * n).reshape(size, n)


def bootstrap_metrics(member: np.ndarray, score: np.ndarray, fprs: Iterable[float],
                      seed: int | list[int], n_boot: int = N_BOOTSTRAP,
                      nonmember_values: dict[str, np.ndarray] | None = None,
                      decisions: dict[str, np.ndarray] | None = None
                      ) -> dict[str, np.ndarray]:
    """``n_boot`` stratified bootstrap replicates of every metric of one target.

    The generator is seeded by ``seed`` alone, so the same seed and class sizes give the same
    resampled records for every attack (paired replicates).
    """
    fprs = tuple(fprs)
    sorted_scores = _SortedScores(member, score, nonmember_values, decisions)
    rng = np.random.default_rng(seed)
    blocks: list[dict[str, np.ndarray]] = []
    for start in range(0, n_boot, _BLOCK):
        size = min(_BLOCK, n_boot - start)
        w_in = _resample_counts(sorted_scores.n_in, size, rng)
        w_out = _resample_counts(sorted_scores.n_out, size, rng)
        blocks.append(sorted_scores.metrics(w_in, w_out, fprs))
    return {key: np.concatenate([b[key] for b in blocks]) for key in blocks[0]}


@dataclass(frozen=True)
class Estimate:
    """A metric with what its interval is made of.

    ``draws`` are per-target values (``method="targets"``), bootstrap replicates of the mean
    over targets (``method="bootstrap"``), for a proportion (``method="binomial"``) its
    count and trials, or the values of independent replicates of the study
    (``method="replicates"``: :func:`over_replicates`); ``value`` is their mean. A difference
    of two independent studies' estimates may instead carry its standard error and degrees of
    freedom (``method="welch"``: :func:`difference_across_studies`). A cost over targets or
    replicates is read on the log scale (``log_scale``: :func:`geometric`).
    """

    value: float
    draws: np.ndarray
    method: str
    resolvable: bool = True
    #: makes the draws of the same mean had the attack no signal (:func:`null_draws`), where
    #: known: once, when a chance test asks for them (:attr:`null`), which few estimates meet
    chance: Callable[[], np.ndarray] | None = field(default=None, compare=False, repr=False)
    #: the non-members above the metric's threshold, summed over the independent runs the
    #: value is a mean of (targets that are repetitions, replicates), where each run has
    #: :data:`MIN_RUN_EXCEEDANCES` or more; 0 where one has fewer or it is unknown
    #: (:func:`pooled_exceedances`)
    exceedances: float = 0.0
    #: positive per-target or per-replicate values (times, a ratio of times) summarised on the
    #: log scale: ``value`` is their geometric mean, the interval the exponential of their
    #: logs' Student-t interval (:func:`geometric`)
    log_scale: bool = False

    @functools.cached_property
    def null(self) -> np.ndarray | None:
        """Draws of the same mean had the attack no signal, or None where unknown."""
        return None if self.chance is None else self.chance()

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """Student-t interval over targets or replicates (Welch's for a difference of two
        studies), the bootstrap percentile interval, or the exact binomial (Clopper-Pearson)
        interval."""
        if self.method == "binomial":
            from scipy.special import betaincinv

            count, trials = self.draws
            tail = (1 - level) / 2
            low = betaincinv(count, trials - count + 1, tail) if count > 0 else 0.0
            high = betaincinv(count + 1, trials - count, 1 - tail) if count < trials else 1.0
            return float(low), float(high)
        if self.method in ("targets", "replicates", "welch"):
            spread = student_half_width(*standard_error(self), level)
            if self.log_scale:
                return (float(self.value * np.exp(-spread)), float(self.value * np.exp(spread)))
            return float(self.value - spread), float(self.value + spread)
        low, high = np.quantile(self.draws, [0.5 - level / 2, 0.5 + level / 2])
        return float(low), float(high)

    def consistent_with_chance(self, chance: float, level: float = LEVEL) -> bool:
        """Whether the value cannot be told from ``chance``: it lies within the central
        ``level`` of the draws had the attack no signal, or without them, the interval
        contains ``chance``. The draws are the exact reference where known: at a small audit
        they centre off the nominal level (precision@1% of an attack without signal averages
        about 0.6 with 1,500 non-members, as the conservative threshold flags few of them)."""
        if self.null is None:
            low, high = self.interval(level)
            return low <= chance <= high
        low, high = np.quantile(self.null, [0.5 - level / 2, 0.5 + level / 2])
        return bool(low <= self.value <= high)

    def _paired(self, other: Estimate, combine) -> Estimate:
        if (self.method != other.method or self.draws.shape != other.draws.shape
                or self.method == "binomial"):
            raise ValueError("a paired comparison needs estimates of the same targets and "
                             f"resampling ({self.method} {self.draws.shape} vs "
                             f"{other.method} {other.draws.shape})")
        with np.errstate(divide="ignore", invalid="ignore"):
            return Estimate(float(combine(self.value, other.value)),
                            combine(self.draws, other.draws), self.method,
                            self.resolvable and other.resolvable,
                            exceedances=min(self.exceedances, other.exceedances))

    def __sub__(self, other: Estimate) -> Estimate:
        """Paired difference: both estimates must come from the same targets or replicates."""
        if self.log_scale or other.log_scale:
            raise ValueError("estimates on the log scale compare by their ratio alone")
        return self._paired(other, np.subtract)

    def ratio(self, other: Estimate) -> Estimate:
        """Paired ratio of the means ``R = mean(a) / mean(b)`` (inf or NaN where the
        denominator is 0).

        Bootstrap draws divide draw by draw: each is a ratio of means already. Over targets
        or replicates, the draws are the delta method's pseudo-values ``R + (a_i - R b_i) /
        mean(b)``: their mean is ``R`` and their spread gives the standard error of ``R``
        itself, where the spread of the per-replicate ratios ``a_i / b_i`` would be that of
        another quantity (their mean) and blows up when one ``b_i`` is near 0. Two costs on
        the log scale (:func:`geometric`) divide run by run: the ratio of their geometric means
        is the geometric mean of the per-run ratios, on the log scale too.
        """
        if self.log_scale and other.log_scale:
            return replace(self._paired(other, np.divide), log_scale=True)
        if self.log_scale or other.log_scale:  # against a cost with a 0: both on the raw scale
            return _arithmetic(self).ratio(_arithmetic(other))
        paired = self._paired(other, np.divide)
        if self.method not in ("targets", "replicates"):
            return paired
        with np.errstate(divide="ignore", invalid="ignore"):
            draws = paired.value + (self.draws - paired.value * other.draws) / other.value
        return Estimate(paired.value, draws, self.method, paired.resolvable,
                        exceedances=paired.exceedances)


def difference_across_studies(a: Estimate, b: Estimate, *, paired: bool = False) -> Estimate:
    """``a - b`` for estimates from two studies (a trend over the DP epsilon or the size).

    Two bootstraps subtract draw by draw. The weights depend on the seed, the target and the
    class sizes, not the study, so two studies of one split (a DP sweep) resample the same
    records together, a paired bootstrap; studies of different records resample independently
    either way. Targets or replicates of two studies ``paired`` by their split (each target
    or replicate of one audits the records of its counterpart in the other: a DP sweep)
    subtract one by one, a Student-t interval over the paired differences, as their values
    move together with the records drawn. Otherwise: Welch's t interval from each side's
    standard error, a bootstrap's being its draws' spread with unlimited degrees of freedom.
    """
    if "binomial" in (a.method, b.method) or "welch" in (a.method, b.method):
        raise ValueError(f"no difference of {a.method} and {b.method} estimates")
    if a.method == b.method and a.draws.shape == b.draws.shape and (
            a.method == "bootstrap" or paired):
        return a - b
    return _welch(a.value - b.value, [a, b], [1.0, -1.0])


def mean_across_studies(estimates: list[Estimate]) -> Estimate:
    """The mean of estimates from studies trained apart (a claim a paper states on average
    over its settings): Welch's t interval from each study's standard error, as
    :func:`difference_across_studies`; one study's estimate is its own mean."""
    if len(estimates) == 1:
        return estimates[0]
    if any(e.method in ("binomial", "welch") for e in estimates):
        raise ValueError(f"no mean of {[e.method for e in estimates]} estimates")
    weight = 1.0 / len(estimates)
    return _welch(float(np.mean([e.value for e in estimates])), estimates,
                  [weight] * len(estimates))


def _welch(value: float, estimates: list[Estimate], weights: list[float]) -> Estimate:
    """``value``, a weighted sum of independent estimates, with the standard error of that
    sum and its Welch-Satterthwaite degrees of freedom."""
    if any(e.log_scale for e in estimates):
        raise ValueError("no sum of estimates on the log scale")
    errors, dofs = zip(*(standard_error(e) for e in estimates), strict=True)
    scaled = [abs(w) * error for w, error in zip(weights, errors, strict=True)]
    variance = sum(error**2 for error in scaled)
    # estimates with finite degrees of freedom but no spread (three replicates' TPR of 0) add
    # nothing to the sum below: without any other, the degrees of freedom are infinite
    finite = sum(error**4 / dof for error, dof in zip(scaled, dofs, strict=True)
                 if np.isfinite(dof))
    dof = variance**2 / finite if variance > 0 and finite > 0 else np.inf
    return Estimate(value, np.array([np.sqrt(variance), dof]), "welch",
                    all(e.resolvable for e in estimates))


def standard_error(estimate: Estimate) -> tuple[float, float]:
    """An estimate's standard error and its degrees of freedom (inf for a bootstrap; a Welch
    difference carries both; on the log scale, the logs')."""
    if estimate.method == "welch":
        error, dof = estimate.draws
        return float(error), float(dof)
    if estimate.method == "bootstrap":
        return float(estimate.draws.std(ddof=1)), np.inf
    n = len(estimate.draws)
    values = np.log(estimate.draws) if estimate.log_scale else estimate.draws
    return float(values.std(ddof=1) / np.sqrt(n)), float(n - 1)


def student_half_width(error: float | np.ndarray, dof: float | np.ndarray,
                       level: float = LEVEL) -> float | np.ndarray:
    """Half-width of the Student-t interval at ``level`` for standard errors ``error`` with
    ``dof`` degrees of freedom (scalars or arrays; ``dof`` inf gives the normal's): the one
    rule that intervals over replicates, and the reruns the claims and the stability
    benchmark simulate, share."""
    from scipy.special import stdtrit  # Student-t quantile; scipy.stats costs 1 s

    return stdtrit(dof, 0.5 + level / 2) * error


def _arithmetic(estimate: Estimate) -> Estimate:
    """A cost on the log scale back on the raw one: its values' mean."""
    if not estimate.log_scale:
        return estimate
    return replace(estimate, value=float(estimate.draws.mean()), log_scale=False)


def geometric(estimate: Estimate) -> Estimate:
    """A positive quantity over targets or replicates (a time) on the log scale: its
    geometric mean, with the Student-t interval of the logs taken back, which is never
    negative and spreads a ratio of two costs alike either way, as one run's timing noise
    does (:func:`miarepro.artifacts.claims._measure`). On the raw scale, three replicates
    whose fit took 0.5, 0.5 and 1.0 minutes (one retried a collapsed generator) gave an
    interval from below 0. Other estimates (one run's bootstrap) are returned as they are,
    and so are values with a 0 among them (an attack that trains nothing), which no log
    holds."""
    if (estimate.method not in ("targets", "replicates") or estimate.log_scale
            or not (estimate.draws > 0).all()):
        return estimate
    return replace(estimate, value=float(np.exp(np.log(estimate.draws).mean())),
                   log_scale=True)


def over_replicates(estimates: Sequence[Estimate]) -> Estimate:
    """One metric over independent replicates of a study, each the whole experiment under new
    seeds: their mean, with a Student-t interval over their values. The variance of training
    (the target, its reference models, the attack's fits) is then inside the interval; a
    bootstrap over the records of one run cannot see it. Two attacks' estimates over the same
    replicates subtract into replicate-level paired differences."""
    if len(estimates) < 2:
        raise ValueError(f"an interval over replicates needs at least 2, got {len(estimates)}")
    values = np.array([estimate.value for estimate in estimates], dtype=float)
    known = all(estimate.chance is not None for estimate in estimates)
    return Estimate(float(values.mean()), values, "replicates",
                    all(estimate.resolvable for estimate in estimates),
                    functools.partial(_mean_of_nulls, estimates) if known else None,
                    pooled_exceedances([e.exceedances for e in estimates]))


def pooled_exceedances(runs: Sequence[float]) -> float:
    """The non-members above threshold of independent runs together, where each run has
    :data:`MIN_RUN_EXCEEDANCES` or more, else 0.

    An ordering of two attacks over such runs is judged on them pooled
    (:func:`miarepro.artifacts.claims.pooled_comparison`): the threshold each run places at
    ``a · n`` exceedances sits at an FPR of about ``(a · n + 1) / n``, above ``a`` when they
    are few, which raises both attacks' TPRs, so that the sign of their paired difference is
    decided about as reliably as with many. Simulated (two correlated Gaussian attacks at
    TPR@0.1%, 10 runs of 2 to 5 exceedances each): equal attacks told apart in 4 to 7% of
    studies at the 95% level, unequal ones never in the wrong order, the true difference
    inside the interval in 92 to 95%; one attack's own value is not (its interval covered
    its TPR@0.1% in 73% at 2 a run): the tables keep "n/r" for those."""
    return float(sum(runs)) if runs and min(runs) >= MIN_RUN_EXCEEDANCES else 0.0


def _mean_of_nulls(estimates: Sequence[Estimate]) -> np.ndarray:
    """The null of the replicates' mean: each replicate's null drawn apart (replicates of one
    size share a target index, hence a seed, so each is shuffled by its position first)."""
    return np.mean([np.random.default_rng(i).permutation(estimate.null)
                    for i, estimate in enumerate(estimates)], axis=0)


#: what a score job measures of itself beside the metrics (:func:`miarepro.pipeline.measure`)
COST_COLUMNS = ("score_seconds", "model_seconds", "fit_seconds", "peak_memory_mb")


def metric_table(scores: pd.DataFrame, fprs: Iterable[float], seed: int,
                 n_boot: int = N_BOOTSTRAP, costs: list[dict[str, float]] | None = None,
                 repetitions: bool = True) -> pd.DataFrame:
    """Every metric of one attack's scores: a point row per target, plus bootstrap replicates.

    ``scores`` has the columns of a scores file (``sample``, ``target``, ``member``, ``score``).
    Rows are ``(target, replicate)`` with ``replicate = -1`` for the point estimate; replicates
    ``0 .. n_boot - 1`` exist unless the targets are ``repetitions`` (independent draws of the
    whole experiment: a partition split), at least :data:`MIN_TARGETS` of them.
    Samples are taken in index order, so every attack of a study is resampled alike.
    ``costs``, per target the attack's seconds (:func:`miarepro.pipeline.score`), are kept as
    its columns.
    """
    fprs = tuple(fprs)
    targets = sorted(scores["target"].unique())
    extra = [c for c in scores.columns if c.startswith(NONMEMBER_COLUMNS)]
    calls = [c for c in scores.columns if c.startswith("decision")]
    rows = []
    for target in targets:
        group = scores[scores["target"] == target].sort_values("sample")
        member, score = group["member"].to_numpy(bool), group["score"].to_numpy(float)
        values = {name: group[name].to_numpy(float) for name in extra}
        decisions = {name: group[name].to_numpy(bool) for name in calls}
        counts = {"n_members": int(member.sum()), "n_nonmembers": int((~member).sum())}
        timing = costs[int(target)] if costs else {}
        rows.append(pd.DataFrame([{"target": target, "replicate": -1, **counts, **timing,
                                   **point_metrics(member, score, fprs, values, decisions)}]))
        if not repetitions or len(targets) < MIN_TARGETS:
            draws = pd.DataFrame(bootstrap_metrics(member, score, fprs, [seed, int(target)],
                                                   n_boot, values, decisions))
            rows.append(draws.assign(target=target, replicate=np.arange(n_boot), **counts))
    table = pd.concat(rows, ignore_index=True)
    timing = list(costs[0]) if costs else []
    decided = [f"{metric}{name.removeprefix('decision')}" for name in calls
               for metric in DECISION_METRICS]
    return table[["target", "replicate", "n_members", "n_nonmembers", *timing,
                  *metric_names(fprs), *extra, *decided]]


def estimates(table: pd.DataFrame) -> dict[str, Estimate]:
    """The :class:`Estimate` of every metric in a :func:`metric_table`."""
    points = table[table["replicate"] < 0].sort_values("target")
    names = [c for c in table.columns
             if c not in ("target", "replicate", "n_members", "n_nonmembers", *COST_COLUMNS)]
    n_in, n_out = int(points["n_members"].min()), int(points["n_nonmembers"].min())
    rows = points.to_dict("records")
    repetitions = not bool((table["replicate"] >= 0).any())  # see metric_table
    # each bootstrap replicate's mean over the targets, every metric at once (a pivot per
    # metric was most of the time of building an attack's estimates)
    boot = table[table["replicate"] >= 0].groupby("replicate")[names].mean()
    result = {}
    for name in names:
        value = float(points[name].mean())
        if repetitions and len(points) >= MIN_TARGETS:  # each its own value, fits and all
            draws, method = points[name].to_numpy(float), "targets"
        elif name.startswith("fpr@"):  # a proportion of the non-members, counted over targets
            count = float(np.round(points[name] * points["n_nonmembers"]).sum())
            draws, method = np.array([count, float(points["n_nonmembers"].sum())]), "binomial"
        else:
            draws, method = boot[name].to_numpy(float), "bootstrap"
        chance = (functools.partial(_mean_null, name, rows)
                  if chance_level(name) is not None else None)
        result[name] = Estimate(value, draws, method, resolvable(name, n_in, n_out), chance,
                                pooled_exceedances([exceedances(name, n_in, n_out)]
                                                   * len(points)))
    return result


def _mean_null(metric: str, points: list[dict[str, float]]) -> np.ndarray:
    """The null of a metric's mean over targets (``points``: their rows of a metric table),
    each target's draws seeded by its index and the metric. Drawn apart: a balanced split's
    twin targets, which audit complementary halves of one pool, move against each other
    without signal, so for them this null is wider than the truth (a level below 5%)."""
    return np.mean([null_draws(metric, point, np.random.default_rng(
        [int(point["target"]), zlib.crc32(metric.encode())])) for point in points], axis=0)
