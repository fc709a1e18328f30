"""The attacks that read reference models' logits, recomputed as their papers state them.

Attack-P / LOSS / Marginal (the statistic), LiRA (IN / OUT Gaussians, per-sample or pooled
variance; offline ``sum log Phi``, online log-likelihood ratio), RMIA (offline ``p(x) = ((1 +
a) mean_OUT p + 1 - a) / 2``, online the mean over all references, ``Pr_z[LR(x, z) >=
gamma]``), Attack-R (the target's percentile among its OUT losses, ML Privacy Meter's range [0,
1000] appended), Watson et al.'s and Sablayrolles et al.'s calibrated losses (the OUT mean; the
midpoint of the IN and OUT means), Yeom et al.'s loss against the target's mean training loss,
Stolen Memories' omniscient attack (Theorem 1 from the synthetic generator's parameters),
QMIA's head of quantiles (:func:`exceedance`) and Shokri et al.'s shadow-model attack
(per-class classifiers refitted on the reference models' sorted top-k probabilities and
confidence, with the package's seeds: their rows and labels are what it checks).
RMIA's file holds the package's refinement of the step score, ``(d + f) / (|Z| + 1)``,
recomputed here from that formula (:func:`continuous_step`).
Shapes: target (queries, records), refs (models, queries, records), member (models, records).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
from recheck_inputs import NotRechecked, lse, statistics
from recheck_networks import dense_forward
from scipy import special, stats


# --- attacks: target (A, N), refs (K, A, N), member (K, N) ---------------------------------
def gaussian(values: np.ndarray, mask: np.ndarray, pooled: bool) -> tuple[np.ndarray, ...]:
    """Mean and unbiased variance over the masked models: per sample, or pooled within samples
    (also for a sample with fewer than two models), per query."""
    count = mask.sum(axis=0)
    masked = np.where(mask[:, None], values, np.nan)
    mean = np.nanmean(masked, axis=0)
    squares = np.nansum((masked - mean) ** 2, axis=0)
    pooled_var = squares.sum(axis=1, keepdims=True) / np.maximum(count - 1, 0).sum()
    var = np.where((count >= 2) & (not pooled), squares / np.maximum(count - 1, 1), pooled_var)
    return mean, np.where(var > 0, var, 1e-24)  # only an exact 0 is floored


def lira(target, refs, member, mode: str, variance: str) -> np.ndarray:
    mu_out, var_out = gaussian(refs, ~member, variance == "global")
    if mode == "offline":  # sum log Phi(z), as -log(-sum log Phi(z)): log Phi(z) rounds to 0
        z = (target - mu_out) / np.sqrt(var_out)  # beyond z = 38.5, where -log Phi(z) = Q(z)
        with np.errstate(divide="ignore"):
            tail = np.where(z > 30, stats.norm.logsf(z), np.log(-stats.norm.logcdf(z)))
        return -special.logsumexp(tail, axis=0)
    mu_in, var_in = gaussian(refs, member, variance == "global")
    return (stats.norm.logpdf(target, mu_in, np.sqrt(var_in))
            - stats.norm.logpdf(target, mu_out, np.sqrt(var_out))).sum(axis=0)


def rmia_ratio(target, refs, member, a: float, online: bool = False) -> np.ndarray:
    """log p(x | theta) - log p(x), p(x) the offline estimate from the OUT models (the means of
    probabilities near 1 in float64: their spread is below float32's resolution there), or
    ``online`` the mean over every reference model, IN and OUT."""
    log_ref = lse(refs, 1, False) - np.log(refs.shape[1])  # mean p over queries
    if online:
        return lse(target, 0, False) - np.log(len(target)) - (lse(log_ref, 0, False)
                                                               - np.log(len(log_ref)))
    out = np.where((~member).any(axis=0), ~member, True)  # no OUT model: all of them
    with np.errstate(divide="ignore"):
        log_out = lse(np.where(out, log_ref, -np.inf), 0, False) - np.log(out.sum(axis=0))
    log_prior = np.logaddexp(np.log1p(a) + log_out, np.log1p(-a)) - np.log(2)
    return lse(target, 0, False) - np.log(len(target)) - log_prior


def continuous_step(ratio_z: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """d = #{z <= v} (the step score times |Z|) and (d + f) / (|Z| + 1), f the position of v
    between its neighbours in Z (exp(v - z_min) below all, 1 - exp(z_max - v) above all)."""
    z = np.sort(ratio_z)
    d = np.searchsorted(z, v, side="right")
    lo, hi = z[np.clip(d - 1, 0, len(z) - 1)], z[np.clip(d, 0, len(z) - 1)]
    with np.errstate(divide="ignore", invalid="ignore"):
        f = np.where(d == 0, np.exp(v - z[0]),
                     np.where(d == len(z), -np.expm1(z[-1] - v), (v - lo) / (hi - lo)))
    return d, (d + f) / (len(z) + 1)


def attack_r(target, refs, member) -> np.ndarray:
    """Percentile of the target's -loss among its OUT models' with -1000 and 0 appended: the
    inverse of numpy's linear quantile, thresholded at 1 - alpha for each FPR alpha."""
    values, target = refs.mean(axis=1), np.clip(target.mean(axis=0), -1000.0, 0.0)
    out = np.empty(len(target))
    for n in range(len(target)):
        grid = np.sort(np.concatenate([values[~member[:, n], n], [-1000.0, 0.0]]))
        out[n] = np.interp(target[n], grid, np.linspace(0, 1, len(grid)))
    return out


def calibrated(target, refs, member, kind: str) -> np.ndarray:
    """Watson et al.'s loss calibrated by the OUT models' mean; Sablayrolles et al.'s by the
    midpoint of the IN and OUT means (every audited record here has both)."""
    values, target = refs.mean(axis=1), target.mean(axis=0)
    mean_out = np.nanmean(np.where(member, np.nan, values), axis=0)
    if kind == "watson":
        return target - mean_out
    if not (member.any(axis=0) & (~member).any(axis=0)).all():
        raise NotRechecked("a record without IN or OUT models")
    return target - 0.5 * (np.nanmean(np.where(member, values, np.nan), axis=0) + mean_out)


def omniscient(x: np.ndarray, labels: np.ndarray, train: np.ndarray, audit: np.ndarray,
               meta: dict) -> np.ndarray:
    """Stolen Memories' Theorem 1 on its synthetic data: the log-likelihood of each record
    under ``N(training mean of its class, sigma^2)`` minus under ``N(mu*_y, sigma^2)``, the
    generator's class mean (summed over features, as scipy's normal densities give it)."""
    x = x.reshape(len(x), -1).astype(np.float64)
    truth, sd = np.asarray(meta["means"], np.float64), np.sqrt(np.asarray(meta["variances"]))
    seen = np.array([x[train][labels[train] == c].mean(0) if (labels[train] == c).any()
                     else truth[c] for c in range(len(truth))])
    y = labels[audit]
    return (stats.norm.logpdf(x[audit], seen[y], sd).sum(1)
            - stats.norm.logpdf(x[audit], truth[y], sd).sum(1))


def yeom(target, member, audit) -> np.ndarray:
    """Yeom et al.: the target's mean loss over its training set minus the record's (first
    query; ``target`` holds minus the loss of every record)."""
    return target[0, audit] - target[0, member].mean()


# --- QMIA (Bertran et al.): the fit's predicted non-member distribution ---------------------
def exceedance(score: np.ndarray, quantiles: np.ndarray) -> np.ndarray:
    """QMIA's score with a head of ``L`` quantiles: the level at which the hinge first passes
    its record's predicted quantiles, linear between two of them; below the first and above
    the last, ``-log(1 + d / g)`` and ``L - 1 + log(1 + d / g)``, ``d`` the distance and ``g``
    the nearest gap between quantiles, so that records past every level still rank."""
    levels, rows = quantiles.shape[1], np.arange(len(score))
    passed = (quantiles <= score[:, None]).sum(axis=1)
    low = quantiles[rows, np.clip(passed - 1, 0, levels - 1)]
    high = quantiles[rows, np.clip(passed, 0, levels - 1)]
    inside = passed - 1 + (score - low) / np.where(high > low, high - low, 1.0)
    first = np.maximum(quantiles[:, 1] - quantiles[:, 0], 1e-12)
    last = np.maximum(quantiles[:, -1] - quantiles[:, -2], 1e-12)
    return np.select([passed == 0, passed == levels],
                     [-np.log1p(np.maximum(quantiles[:, 0] - score, 0) / first),
                      levels - 1 + np.log1p(np.maximum(score - quantiles[:, -1], 0) / last)],
                     inside)


#: the settings of a QMIA instance that its fit depends on (the rest are labels)
QMIA_FIT_KEYS = ("head", "backbone", "recipe", "trials", "space", "validation_fraction",
                 "levels")


# --- Shokri et al.'s shadow-model attack: its attack classifiers refitted ---------------------
def shadow_features(logits: np.ndarray, labels: np.ndarray, top_k: int, f32: bool
                    ) -> np.ndarray:
    """``(n, top_k + 1)`` from ``(n, queries, C)`` logits: the sorted top-k softmax
    probabilities (ML-Leaks) and the true label's logit-scaled confidence, each averaged over
    queries."""
    probs = special.softmax(np.asarray(logits, dtype=np.float64), axis=-1).mean(1)
    confidence = statistics(np.swapaxes(logits, 0, 1), labels, f32)["logit_confidence"].mean(0)
    return np.column_stack([-np.sort(-probs, axis=1)[:, :top_k], confidence])


def shadow(target: np.ndarray, refs: np.ndarray, masks: np.ndarray, labels: np.ndarray,
           pool: np.ndarray, audit: np.ndarray, seed: list[int], entry: dict, f32: bool
           ) -> np.ndarray:
    """Shokri et al.'s scores: per class, a classifier of IN against OUT (one hidden layer of
    64 units on standardised features, or gradient boosting) on the shadow (reference)
    models' features of the pool's records of that class, at most ``max_rows`` of them drawn
    after sorting the rows by content; a class whose rows are all IN or all OUT falls back to
    one classifier of every class's rows. The score is the classifier's log-odds of IN. The
    draws and the classifiers take the package's seeds (the split's seed and the target), so
    the scores must match; what this checks is which rows, features and labels go in."""
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.preprocessing import StandardScaler

    top_k, max_rows = min(entry.get("top_k", 3), target.shape[-1]), entry.get("max_rows", 4000)
    fit_seed = int(np.random.SeedSequence(seed).generate_state(1)[0])

    def drawn(x: np.ndarray, y: np.ndarray, key: list[int]) -> tuple[np.ndarray, np.ndarray]:
        if len(y) <= max_rows:
            return x, y
        keep = np.sort(np.random.default_rng([*seed, *key]).choice(len(y), max_rows,
                                                                    replace=False))
        return x[keep], y[keep]

    def log_odds(x: np.ndarray, y: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
        if y.min() == y.max():  # Laplace's rule of succession
            return lambda rows: np.full(len(rows), np.log(len(y) + 1) * (1 if y[0] else -1))
        if entry.get("classifier", "mlp") == "gbdt":
            return HistGradientBoostingClassifier(max_iter=100, random_state=fit_seed).fit(
                x, y).decision_function
        scaler = StandardScaler().fit(x)
        with warnings.catch_warnings():  # not converged in 200 epochs; batches above n rows
            warnings.simplefilter("ignore")
            mlp = MLPClassifier((64,), learning_rate_init=1e-2, batch_size=256, max_iter=200,
                                random_state=fit_seed).fit(scaler.transform(x), y)
        return lambda rows: dense_forward(
            [(w.T, b) for w, b in zip(mlp.coefs_, mlp.intercepts_, strict=True)],
            scaler.transform(rows), "relu")[1][:, 0]

    rows = {}
    for c in np.unique(labels[pool]):
        records = pool[labels[pool] == c]
        x = shadow_features(refs[:, :, records].transpose(0, 2, 1, 3).reshape(
            -1, refs.shape[1], refs.shape[-1]), np.tile(labels[records], len(refs)), top_k, f32)
        y = masks[:, records].ravel().astype(int)
        order = np.lexsort((y, *x.T[::-1]))
        rows[int(c)] = drawn(x[order], y[order], [1, int(c)])
    pooled = drawn(*(np.concatenate(part) for part in zip(*rows.values(), strict=True)), [0])
    features = shadow_features(np.swapaxes(target[:, audit], 0, 1), labels[audit], top_k, f32)
    scores, fallback = np.empty(len(audit)), None
    for c in np.unique(labels[audit]):
        where = labels[audit] == c
        x, y = rows.get(int(c), (None, np.zeros(1, dtype=int)))
        if x is None or y.min() == y.max():
            fallback = fallback or log_odds(*pooled)
            scores[where] = fallback(features[where])
        else:
            scores[where] = log_odds(x, y)(features[where])
    return scores
