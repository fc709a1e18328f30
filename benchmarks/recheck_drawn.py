"""The attacks that draw at random, drawn anew with this script's own seed and checked as a
draw: BMIA, Subpop, MERLIN and Stolen Memories' bayes-wb and general-wb.

:data:`REDRAWS` draws of the same scores (more where one draw serves every record and the
targets are few: :func:`shared_redraws`), on each of BMIA's first :data:`BMIA_TARGETS` targets.
For BMIA the reference model and its training records come from the fit's card (their hashes
checked), its penultimate features and last layer from the fit (checked against the logits the
model saved), and Liu et al.'s last-layer Laplace posterior is formed here (the GGN, KFAC,
diagonal or full, and the prior precision that maximises the evidence, a validation-tuned one
read from the card; ``delta_rel``: its relative difference from the fit's). For Subpop the
target is rebuilt from its saved weights (an MLP, or LeNet) with the BiGAN's generator, and
the black-box one's encoder, from the fit (:mod:`recheck_networks`); its natural
subpopulations are deterministic, checked exactly. MERLIN runs that victim on Gaussian
perturbations of each record at the scale its fit chose. On a LeNet victim the drawn attacks
score :data:`CONV_RECORDS` of each target's audited records. Stolen Memories' bayes-wb at any
layer of an MLP or LeNet target (:func:`bayes_wb`): a redraw trains as many proxies as the
fit, by the study's recipe (with its dropout or DP-SGD), with code of this script's own (a
LeNet's convolutions stacked as one grouped convolution); as the proxies serve every record at
once, the draw check reads each draw whole (:func:`summary_ranks`), as it does BMIA's MC
weights; records drawn one by one are checked by :func:`consistent`. general-wb
(:func:`general_wb`): at every layer its fit attacks, proxies redrawn as bayes-wb's, their
local linear models and the target's read by the displacements and meta model the fit saved.

Controls (redraws under a wrong setting against the file, in standard deviations):

- bmia-mnist's KFAC instance: a posterior 2% too wide 4.9, N = 95 for 100 9.0, the diagonal
  posterior 103;
- bmia-mnist's MC predictive (3 targets, 60 redraws): GLM redraws against the MC file 2.0
  and N = 90 for 100 1.7 (5.0 and 2.8 with a t per target and summary), MC redraws against
  the GLM file 2.3: MC draws vary so much from one to the next that the check tells little
  within them;
- subpop-mnist: beta 0.045 or 0.06 for 0.05, 6.8 and 13.7 (black-box: 5.8 and 7.6); MERLIN's
  scale 0.8 or 1.2 times its fit's, 11.3 and 9.7;
- subpop-mnist-lenet (500 records): beta 0.025 or 0.1, 29.5 and 17.8, but 0.045 or 0.06 only
  3.5 and 4.5; the generator's image cropped from its grid's corner, not its centre, 66,000;
  MERLIN's scale 0.8 or 1.2 times, 1.4 and 1.5 (MERLIN is at chance on this victim: its
  fractions hardly depend on the scale);
- bayes-wb on sm-synthetic-100 (10 targets): proxies on twice or 0.8 times the target's
  training-set size, 5 or 20 proxies for 10, a learning rate of 0.05 for 0.1 or weight decay
  1e-3 for 1e-4 all 16.3 to 18.6 (18.6: a summary at the same end of the redraws on all 10
  targets), but 50 epochs for 100 only 3.9; on sm-bcw 18.6, 3.8, 1.0, 3.4, 14.7, 11.1 and 3.5
  (with a t per target and summary, before they were ranked: 197, 3.4, 2.0, 5.4, 12.7, 13.3
  and 3.7, so 20 proxies for 10 there is no longer told);
- general-wb (minimal) on sm-synthetic-100: 18.6 for each but the epochs, 2.4, and the
  16-unit or minimal point's model read for the other's 11.8 and 18.6; on sm-bcw: 18.6, 4.2,
  4.5, 7.1, 16.3, 18.6 and 6.8; on sm-digits (20 targets) 5 proxies for 10, 20.4; on
  sm-bcw-dropout (3 targets, 60 redraws), proxies trained without the target's dropout 5.4;
  on sm-bcw-eps-16 and -0-25, without DP-SGD 6.0 and 6.0, the most 3 targets can read (with a
  t per target: 12.2, 112 and 215);
- bayes-wb at the LeNet's top layer (sm-mnist-lenet, 3 targets): 5 proxies for the fit's 2,
  or proxies on 0.8 times the size, only 1.6 and 2.4 (2.1 and 3.6 with a t per target).

Ranking every summary of shared draws removed the one instance that had failed the check
where the evidence said it was a tail draw: general-wb on sm-bcw-eps-16, 13.5 in target 0's
median score by a t over 20 redraws (the other two targets and every other summary within
3.4). Its meta model reads the layers near a ReLU kink, so a draw's median has a long left
tail: of 100 redraws of that target, one lies below the file's median (0.0249) and the rest
run 0.0346, 0.0351, ... to 0.0607 (median 0.0556). Its ranks over the 3 targets read 1.2.

bayes-wb's meta model is checked exactly on the layers' scores (:func:`bayes_wb_meta`). The
training of its meta model and of general-wb's displacements on shadow models is checked
against hand computations in ``tests/``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from recheck_claims import rank_auc, rates_at  # benchmarks/recheck_claims.py: this folder
from recheck_inputs import RECIPE, NotRechecked, checked_mask, fit_of, partition, statistics
from recheck_networks import (
    conv_features,
    cross_entropy,
    dense_forward,
    encoder,
    generator,
    layers_of,
    saved_logits,
    saved_target,
    victim,
)
from scipy import optimize, special, stats

# --- BMIA: the reference model's last-layer Laplace posterior, drawn anew -------------------
#: BMIA's check: redraws of each of its first targets, and how far from them (in standard
#: deviations, t with 19 degrees of freedom: 1e-4 beyond 5 each) a score file may lie
BMIA_FIT_KEYS, REDRAWS, BMIA_TARGETS, WITHIN = ("hessian", "prior"), 20, 3, 5.0
MAX_SHARED_REDRAWS = 100  # :func:`shared_redraws`
BMIA_FIT_DEFAULTS = {"hessian": "kron", "prior": "marglik"}  # Liu et al.'s, the package's
SEED = 20240917  # the recheck's own draws: unrelated to the workflow's seeds


def bmia_posterior(features: np.ndarray, labels: np.ndarray, weight: np.ndarray,
                   bias: np.ndarray, structure: str, prior: float | None
                   ) -> tuple[float, Callable[[np.ndarray], Callable], Callable]:
    """Liu et al.'s posterior over the last layer ``(W, b)`` of the reference model, from its
    training records' penultimate ``features``: precision = the cross-entropy's GGN (KFAC: G x
    A with G = the summed softmax covariances, A = the mean of phi phi^T, and G for the bias;
    diagonal; or full) + ``delta I``. ``delta`` maximises the Laplace evidence where ``prior``
    is None (App. C.3), else is ``prior``. Returns delta and ``noise(phi)``: for the records at
    ``phi``, ``(rows, z)`` -> standard normal ``z`` (rows, N, C) made those rows' predictive
    logits' deviations from their mean; and ``weights(rng, N)``: ``N`` draws of the deviation
    of ``(W, b)`` from the mode, shared by every record (the MC predictive; KFAC or
    diagonal)."""
    z = features @ weight.T + bias
    p = special.softmax(z, axis=1)
    n, d = features.shape
    c = len(bias)
    if structure == "kron":
        g, q_out = np.linalg.eigh(np.diag(p.sum(0)) - p.T @ p)
        a, q_in = np.linalg.eigh(features.T @ features / n)
        g, a = np.clip(g, 0, None), np.clip(a, 0, None)
        eigs = np.concatenate([np.outer(g, a).ravel(), g])
    elif structure == "diag":
        curvature = p * (1 - p)
        eigs = np.concatenate([(curvature.T @ features**2).ravel(), curvature.sum(0)])
    else:  # [vec(W) row-major, b]: sum_n Lambda_n x e e^T with e = [phi, 1], reordered
        e = np.hstack([features, np.ones((n, 1))])
        full = np.zeros((c, d + 1, c, d + 1))
        full[np.arange(c), :, np.arange(c), :] = np.einsum("nc,ni,nj->cij", p, e, e)
        pe = (p[:, :, None] * e[:, None, :]).reshape(n, -1)
        order = [k * (d + 1) + i for k in range(c) for i in range(d)] + [
            k * (d + 1) + d for k in range(c)]
        hessian = (full.reshape(c * (d + 1), -1) - pe.T @ pe)[np.ix_(order, order)]
        eigs = np.linalg.eigvalsh(hessian)
    if prior is None:  # minus the log evidence, less what does not depend on delta
        theta2 = float((weight**2).sum() + (bias**2).sum())

        def cost(log_delta: float) -> float:
            return -(0.5 * len(eigs) * log_delta - 0.5 * np.exp(log_delta) * theta2
                     - 0.5 * np.log(eigs + np.exp(log_delta)).sum())

        grid = np.linspace(np.log(1e-6), np.log(1e6), 2001)
        best = int(np.argmin([cost(x) for x in grid]))
        prior = float(np.exp(optimize.minimize_scalar(
            cost, bounds=(grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]),
            method="bounded", options={"xatol": 1e-10}).x))
    delta = prior
    if structure == "full":
        covariance = np.linalg.inv(hessian + delta * np.eye(len(hessian)))
        ww = covariance[: c * d, : c * d].reshape(c, d, c, d)
        wb = covariance[: c * d, c * d:].reshape(c, d, c)

    def noise(phi: np.ndarray) -> Callable[[slice, np.ndarray], np.ndarray]:
        if structure == "kron":  # along G's eigenvectors: W's share, then the bias's
            scale = np.sqrt((phi @ q_in) ** 2 @ (1 / (np.outer(g, a) + delta)).T
                            + 1 / (g + delta))
            return lambda rows, normal: (normal * scale[rows, None, :]) @ q_out.T
        if structure == "diag":  # independent classes
            var = 1 / (eigs + delta)
            sd = np.sqrt(phi**2 @ var[: c * d].reshape(c, d).T + var[c * d:])
            return lambda rows, normal: normal * sd[rows, None, :]
        cross = np.einsum("ni,cie->nce", phi, wb)
        cov = (np.einsum("ni,cidj,nj->ncd", phi, ww, phi, optimize=True) + cross
               + np.swapaxes(cross, 1, 2) + covariance[c * d:, c * d:][None])
        root = np.swapaxes(np.linalg.cholesky(cov), 1, 2)
        return lambda rows, normal: normal @ root[rows]

    def weights(rng: np.random.Generator, draws: int) -> tuple[np.ndarray, np.ndarray]:
        if structure == "kron":  # along the eigenvectors of G (classes) and A (features)
            w = rng.standard_normal((draws, c, d)) / np.sqrt(np.outer(g, a) + delta)
            b = rng.standard_normal((draws, c)) / np.sqrt(g + delta)
            return q_out @ w @ q_in.T, b @ q_out.T
        if structure == "diag":
            sd = 1 / np.sqrt(eigs + delta)
            return (rng.standard_normal((draws, c, d)) * sd[: c * d].reshape(c, d),
                    rng.standard_normal((draws, c)) * sd[c * d:])
        raise NotRechecked("BMIA's MC predictive with a full posterior")

    return delta, noise, weights


def bmia_redraws(target_hinge: np.ndarray, mean: np.ndarray, noise: Callable,
                 labels: np.ndarray, n_samples: int, seed: list[int],
                 weights: Callable | None = None, phi: np.ndarray | None = None,
                 redraws: int = REDRAWS) -> np.ndarray:
    """``redraws`` scores of Algorithm 1, each from ``n_samples`` reference logits of every
    record drawn anew (``mean`` + :func:`bmia_posterior`'s ``noise``, float32 normals: the
    check is statistical; or, with ``weights``, the MC predictive: ``n_samples`` draws of the
    last layer per redraw, shared by every record at features ``phi``): the one-sided t
    statistic of the target's hinge minus the reference hinges."""
    rng, c = np.random.default_rng(seed), mean.shape[1]
    step = max(1, (1 << 22) // (n_samples * c))
    draws = np.empty((redraws, len(mean)))
    for k in range(redraws):
        shared = weights(rng, n_samples) if weights is not None else None
        for start in range(0, len(mean), step):
            rows = slice(start, start + step)
            if shared is None:
                deviation = noise(rows, rng.standard_normal((len(mean[rows]), n_samples, c),
                                                            dtype=np.float32))
            else:
                deviation = np.einsum("scd,rd->rsc", shared[0], phi[rows]) + shared[1][None]
            logits = mean[rows, None, :] + deviation
            index = np.broadcast_to(labels[rows, None, None], (*logits.shape[:2], 1))
            true = np.take_along_axis(logits, index, -1)[..., 0]
            np.put_along_axis(logits, index, -np.inf, -1)
            gap = target_hinge[rows, None] - (true - logits.max(-1))
            draws[k, rows] = gap.mean(1) / (gap.std(1, ddof=1) / np.sqrt(n_samples))
    return draws


def consistent(member: np.ndarray, score: np.ndarray, redraws: np.ndarray) -> float:
    """How far a score file is from being one more draw of the recheck's ``redraws``, each
    record drawn on its own (BMIA's GLM predictive, Subpop, MERLIN), in their standard
    deviations (a t with ``REDRAWS - 1`` degrees of freedom): the largest of the distances
    of its summaries (:func:`summaries`) from the redraws', of how much less it correlates
    (Spearman) with each redraw than they do with each other, and of its ranks among each
    record's redraws from uniform. A spread is floored at what the statistic can resolve:
    one member for the TPR, one step between the scores' values for the median and range
    (MERLIN's fractions), a relative 1e-6 for the rest (redraws that all give one value).
    Draws that serve every record at once are checked by :func:`summary_ranks` instead."""
    def distance(theirs: float, ours: np.ndarray, floor: float) -> float:
        spread = max(ours.std(ddof=1), floor, 1e-6 * abs(ours.mean()), 1e-12)
        return abs(theirs - ours.mean()) / (spread * np.sqrt(1 + 1 / len(ours)))

    gaps = np.diff(np.unique(redraws))  # MERLIN's fractions: 1 / T, less float rounding
    gaps = gaps[gaps > 1e-9 * np.abs(redraws).max()]
    step = gaps.min() if gaps.size else 0.0
    floors = (0.0, 1 / member.sum(), step, step)
    among = np.array([stats.spearmanr(a, b).statistic
                      for i, a in enumerate(redraws) for b in redraws[i + 1:]])
    with_file = np.array([stats.spearmanr(score, r).statistic for r in redraws])
    # record by record, whatever the scores' distribution: the file's rank among each
    # record's K redraws is uniform on 0..K (exchangeable draws; ties broken at random, as
    # MERLIN's fractions tie), so its mean is K / 2, and the share at either end
    # 2 / (K + 1) (fewer: the file's spread is narrower than the redraws')
    k, n, ends = len(redraws), len(score), 2 / (len(redraws) + 1)
    rank = (redraws < score).sum(axis=0) + np.random.default_rng(SEED).integers(
        0, (redraws == score).sum(axis=0) + 1)
    return max(*(distance(f(score), np.array([f(r) for r in redraws]), floor)
                 for f, floor in zip(summaries(member), floors, strict=True)),
               max(0.0, among.mean() - with_file.mean()) / max(among.std(ddof=1), 1e-6),
               abs(rank.mean() - k / 2) / np.sqrt(((k + 1) ** 2 - 1) / 12 / n),
               abs(np.isin(rank, (0, k)).mean() - ends) / np.sqrt(ends * (1 - ends) / n))


def summaries(member: np.ndarray) -> tuple[Callable[[np.ndarray], float], ...]:
    """What the draw checks compare of a score file: its AUC, TPR@1%, and the median and
    interquartile range of its scores (a t statistic's scale follows N and the posterior's
    variance, which a ranking does not show; its mean and standard deviation over records
    follow its heavy tails at small N)."""
    return (lambda v: rank_auc(member, v), lambda v: rates_at(member, v, 0.01)[0], np.median,
            lambda v: float(np.subtract(*np.percentile(v, [75, 25]))))


def summary_ranks(member: np.ndarray, score: np.ndarray, redraws: np.ndarray,
                  rng: np.random.Generator) -> list[int]:
    """Where a file lies among draws that each serve every record at once (Stolen Memories'
    proxies, BMIA's MC weights), summary by summary: the rank, 0..K, of its :func:`summaries`
    among the redraws', and of its mean Spearman correlation with the other draws and its
    mean absolute distance from their mean among each redraw's own (ties, as TPRs tie,
    broken by ``rng``: each target's own, or the ranks' sum would not be the sum of
    independent uniforms).

    Records share the draw, so their ranks are not independent, and trained proxies' draws
    have heavy, skewed tails: on sm-digits' general-wb one redraw in 30 to 60 lay beyond 5
    standard deviations of 20 others, where a t puts one in 10,000, and on sm-bcw-eps-16 a
    median of one target in 100 lay 13.5 below the rest. A file drawn like the redraws is
    exchangeable with them, so each rank is uniform whatever that law; a wrong setting
    (proxies on fewer records, fewer of them, another recipe) puts it at one end on every
    target, which :func:`uniform_ranks` reads over the targets."""
    draws = np.vstack([score[None], redraws])
    ranked = stats.rankdata(draws, axis=1)
    correlation = np.corrcoef(ranked)
    values = [[f(d) for d in draws] for f in summaries(member)]
    values.append(list((correlation.sum(1) - 1) / (len(draws) - 1)))
    others_mean = (draws.sum(0) - draws) / (len(draws) - 1)  # each draw's, without it
    values.append(list(np.abs(draws - others_mean).mean(1)))
    ranks = []
    for file, *others in values:
        others = np.array(others)
        ranks.append(int((others < file).sum() + rng.integers(0, (others == file).sum() + 1)))
    return ranks


def uniform_ranks(ranks: list[int], k: int) -> float:
    """How far independent ranks, each uniform on 0..k (one per target: :func:`summary_ranks`),
    are from uniform: the two-sided tail probability of their sum under the exact
    distribution (a convolution), as the t with ``REDRAWS - 1`` degrees of freedom beyond
    which that share lies, so that it reads on :func:`consistent`'s scale."""
    pmf = np.ones(1)
    for _ in ranks:
        pmf = np.convolve(pmf, np.full(k + 1, 1 / (k + 1)))
    total = int(sum(ranks))
    tail = min(1.0, 2 * min(pmf[:total + 1].sum(), pmf[total:].sum()))
    return float(stats.t.isf(tail / 2, REDRAWS - 1))


def shared_redraws(targets: int) -> int:
    """How many redraws a check of draws that serve every record needs over ``targets``
    targets: at least :data:`REDRAWS`, and enough that a file at the same end of the redraws
    on every target reads one unit beyond :data:`WITHIN` (:func:`uniform_ranks`). Over 3
    targets 20 redraws could reach 4.6 at most, so that the rank test could never fail
    there; 60 reach 6.0, what 20 reach over 4 targets. Fewer than 3 targets would need
    hundreds: such a study is not rechecked."""
    redraws = REDRAWS
    while uniform_ranks([0] * targets, redraws) < WITHIN + 1:
        if redraws == MAX_SHARED_REDRAWS:
            raise NotRechecked(f"draws shared by every record over {targets} target(s): a "
                               f"test of their ranks would need more than {redraws} redraws")
        redraws += 1
    return redraws


def bmia(home: Path, models: Path, split: dict, labels: np.ndarray, entry: dict, t: int,
         audit: np.ndarray, rows: dict, redraws: int = REDRAWS) -> np.ndarray:
    """BMIA's scores of target ``t`` drawn ``redraws`` times afresh: the reference model
    (in ``models``, its own study's or a ``reference_study``'s, whose fit it is) and its
    training records from the fit's card (membership checked against the model's),
    its penultimate features and last layer from the fit (checked against the logits the model
    saved), the posterior and its prior precision computed here (``rows["delta"]``: the relative
    difference from the fit's; a validation-tuned one is taken from the card)."""
    fit, card = fit_of(models.parent, "bmia", BMIA_FIT_KEYS, entry, t,  # the references' study
                       BMIA_FIT_DEFAULTS)
    info, reference = card["info"], card["info"]["reference_model"]
    train = checked_mask(split, models, "reference", reference)
    features, weight, bias = (fit[key].astype(np.float64) for key in ("features", "weight", "bias"))
    saved = np.load(models / "reference" / f"{reference}.npy")[0]
    if np.abs(features @ weight.T + bias - saved).max() > 1e-4 * np.abs(saved).max():
        raise SystemExit(f"{home.name}: BMIA's features are not reference {reference}'s")
    delta, noise, weights = bmia_posterior(
        features[train], labels[train], weight, bias, info["hessian"],
        None if info["prior"] == "marglik" else info["prior_precision"])
    rows["delta"].append(abs(delta / info["prior_precision"] - 1))
    target = np.load(home / "models" / "target" / f"{t}.npy")
    hinge = statistics(target, labels, False)["hinge"][0, audit]  # the plain input
    phi = features[audit]
    mc = entry.get("predictive", "glm") == "mc"
    return bmia_redraws(hinge, phi @ weight.T + bias, noise(phi), labels[audit],
                        entry.get("n_samples", 100), [SEED, t], weights if mc else None, phi,
                        redraws)


# --- Subpop (Rezaei et al.): Eq. 3 against records like each audited one --------------------
MERLIN_FIT_KEYS = ("trials", "noise_samples", "sigma_range", "records")
SUBPOP_FIT_KEYS = ("networks", "generator_widths", "discriminator_widths", "epochs",
                   "gan_epochs", "batch_size", "lr", "cosine_weight", "attempts",
                   "min_class_kept", "latent")
#: a convolutional victim's drawn attacks score this many of each target's audited records
#: (evenly spaced): its crafted records take about 0.7 ms each, 30 per record, 20 redraws
REDRAWN_ON_A_SAMPLE, CONV_RECORDS = ("subpop", "subpop_blackbox", "subpop_inverse",
                                     "merlin"), 500


def subpop(home: Path, data: dict, split: dict, entry: dict, t: int, audit: np.ndarray
           ) -> np.ndarray:
    """Subpop's scores of target ``t`` (Eq. 3: the mean loss of ``K`` records like the
    audited one, all with its label, minus its own), recomputed from the target's saved
    weights (:func:`victim`, its logits checked against those it saved): ``subpop_natural``
    once (its ``K`` nearest records of its class among the attacker's, cosine of the latent
    ``h``; the losses from the logits the target saved); ``subpop_inverse`` and ``subpop``
    :data:`REDRAWS` times with noisy latents ``z (1 + beta eps)`` of the record's ``z = h(x)``,
    decoded by the victim's last layer itself or by the fit's generator (:func:`generator`),
    then run through the victim; ``subpop_blackbox`` the same from its BiGAN's own encoder's
    latents (:func:`encoder`). MERLIN on the same victim, as many times: the share of ``T``
    Gaussian perturbations of the record, at the scale its fit chose, that raise its loss."""
    card, state = saved_target(home, t)
    forward, last = victim(card, state), layers_of(state)[-1]
    x, y = data["X"], data["y"]
    z, logits = forward(x[audit])
    saved = saved_logits(home, t, logits, audit)
    own = cross_entropy(saved[audit], y[audit])
    samples, kind = entry.get("samples", 30), entry["attack"]
    beta, rng = entry.get("beta", 0.05), np.random.default_rng([SEED, t, 5])
    if kind == "merlin":  # the share of Gaussian perturbations of x that raise its loss
        fit, _ = fit_of(home, "merlin", MERLIN_FIT_KEYS, entry, t)
        sigma, samples = float(fit["sigma"]), int(fit["noise_samples"])
        clean = cross_entropy(logits, y[audit])
        redraws = np.zeros((REDRAWS, len(audit)))
        for k, _ in itertools.product(range(REDRAWS), range(samples)):
            noisy = x[audit] + sigma * rng.standard_normal(x[audit].shape)
            redraws[k] += cross_entropy(forward(noisy)[1], y[audit]) > clean
        return redraws / samples
    if kind == "subpop_natural":
        pool = split["population"]
        unit = lambda v: v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)  # noqa: E731
        latents = unit(forward(x[pool])[0])
        crafted = np.empty((len(audit), samples))
        for label in np.unique(y[audit]):
            rows, same = np.flatnonzero(y[audit] == label), np.flatnonzero(y[pool] == label)
            nearest = np.argsort(-(unit(z[rows]) @ latents[same].T), axis=1)[:, :samples]
            crafted[rows] = cross_entropy(saved[pool[same[nearest]]], np.full(
                nearest.shape, label))
        return (crafted.mean(1) - own)[None]
    if kind in ("subpop", "subpop_blackbox"):
        fit = fit_of(home, kind, SUBPOP_FIT_KEYS, entry, t)[0]
        decode = generator(fit)
        if kind == "subpop_blackbox":  # the BiGAN's own encoder in h's place
            z = encoder(fit)(x[audit])
    redraws, step = np.empty((REDRAWS, len(audit))), max(1, 8192 // samples)
    for k, start in itertools.product(range(REDRAWS), range(0, len(audit), step)):
        rows = slice(start, start + step)
        latents = z[rows, None, :] * (1 + beta * rng.standard_normal(
            (len(z[rows]), samples, z.shape[1])))
        flat = latents.reshape(-1, z.shape[1])
        outputs = (flat @ last[0].T + last[1] if kind == "subpop_inverse"
                   else forward(decode(flat), np.float32)[1])
        redraws[k, rows] = cross_entropy(outputs.astype(np.float64), np.repeat(
            y[audit[rows]], samples)).reshape(
            -1, samples).mean(1) - own[rows]
    return redraws


# --- Stolen Memories' bayes-wb at the top layer: its proxies trained anew ----------------------
SM_FIT_KEYS = ("layers", "proxies", "shadows", "steps", "displacement_widths", "meta_widths",
               "epochs", "lr", "shadow_records")


def train_proxies(features: np.ndarray, labels: np.ndarray, subsets: np.ndarray, recipe: dict,
                  shapes: list[tuple[int, ...]], seed: int, dropout: float = 0.0,
                  on_input: bool = False) -> list[tuple[np.ndarray, np.ndarray]]:
    """``K = len(subsets)`` ReLU networks of layers with weights of ``shapes`` (dense
    ``(out, in)``; a LeNet's convolutions ``(out, in, k, k)``, each followed by a 2x2
    max-pool: :func:`stacked_forward`), each trained on its own rows of ``features`` by the
    recipe's SGD (torch's default initialisation, uniform within 1 / sqrt(fan-in); each epoch
    its own shuffle, the last batch short; mean cross-entropy, the learning rate times
    ``gamma`` at each milestone): per layer, ``(K, *shape)`` weights and ``(K, out)`` biases.
    ``dropout``: in
    training, after each hidden ReLU and, ``on_input``, on the features (a cut just above a
    target's dropout keeps it with the layers above). A recipe with a ``dp`` block trains by
    DP-SGD instead (:func:`private_gradients`)."""
    import torch

    recipe = {**RECIPE, **recipe}
    torch.manual_seed(seed)
    x, y = torch.as_tensor(features, dtype=torch.float32), torch.as_tensor(labels)
    k, n = subsets.shape

    def drop(h: torch.Tensor) -> torch.Tensor:  # no draw at all without dropout
        return torch.nn.functional.dropout(h, dropout) if dropout else h

    layers = []
    for shape in shapes:
        bound = 1 / math.sqrt(math.prod(shape[1:]))
        layers += [torch.empty(k, *shape).uniform_(-bound, bound).requires_grad_(),
                   torch.empty(k, shape[0]).uniform_(-bound, bound).requires_grad_()]
    sgd = torch.optim.SGD(layers, lr=recipe["lr"], momentum=recipe["momentum"],
                          nesterov=recipe["nesterov"], weight_decay=recipe["weight_decay"])
    epochs = int(recipe["epochs"])
    schedule = torch.optim.lr_scheduler.MultiStepLR(
        sgd, sorted({max(1, round(f * epochs)) for f in recipe["milestones"]}), recipe["gamma"])
    rows = torch.as_tensor(subsets)
    private = private_gradients(recipe, n, layers) if recipe.get("dp") else None
    for _ in range(epochs):
        if private is not None:  # DP-SGD: Poisson batches of each network's own rows
            for _ in range(private.steps_per_epoch):
                sgd.zero_grad()
                private(x[rows], y[rows])
                sgd.step()
        else:
            order = torch.gather(rows, 1, torch.rand(k, n).argsort(1))
            for batch in order.split(int(recipe["batch_size"]), dim=1):
                h = stacked_forward(layers, drop(x[batch]) if on_input else x[batch], drop)
                loss = torch.nn.functional.cross_entropy(
                    h.transpose(1, 2), y[batch], reduction="none").mean(1).sum()
                sgd.zero_grad()
                loss.backward()
                sgd.step()
        schedule.step()
    return [(layers[i].detach().double().numpy(), layers[i + 1].detach().double().numpy())
            for i in range(0, len(layers), 2)]


def stacked_forward(layers: list, h: Any, drop: Callable = lambda h: h) -> Any:
    """K ReLU networks at once, each on its own rows ``h`` ``(K, B, ...)``, with their layers
    ``(K, ...)`` stacked: a dense layer by batched products, a convolution (padded to keep the
    size, then ReLU and a 2x2 max-pool, as a LeNet's) by one grouped convolution whose groups
    are the networks; ``drop`` after each hidden layer. The logits ``(K, B, classes)``."""
    import torch
    from torch.nn import functional

    for i in range(0, len(layers), 2):
        weight, bias = layers[i], layers[i + 1]
        if weight.dim() == 5:  # (K, out, in, k, k)
            k = len(weight)
            out = functional.conv2d(h.transpose(0, 1).flatten(1, 2), weight.flatten(0, 1),
                                    bias.flatten(), padding=weight.shape[-1] // 2, groups=k)
            h = drop(functional.max_pool2d(torch.relu(out), 2).unflatten(1, (k, -1))
                     .transpose(0, 1))
        else:
            h = torch.baddbmm(bias[:, None, :], h.flatten(2), weight.transpose(1, 2))
            h = drop(torch.relu(h)) if i < len(layers) - 2 else h
    return h


def private_gradients(recipe: dict, n: int, layers: list) -> Callable:
    """DP-SGD (Abadi et al.) for :func:`train_proxies`' stacked ReLU networks, as opacus runs
    it: each step draws each network's batch by Poisson sampling at rate ``q = batch / n``
    (``int(1 / q)`` steps an epoch), clips each record's gradient over all layers to ``C``,
    adds ``N(0, (sigma C)^2)`` to their sum and divides by ``q n``; ``sigma`` solved here by
    opacus's RDP accountant for the recipe's epsilon over those steps (delta 1 / (10 n) where
    the block leaves it out). Every record's gradient comes from one backward pass of the
    summed loss to each layer's pre-activation ``delta``: a dense layer's gradient of a record
    is ``delta a^T``, its squared norm ``|delta|^2 (|a|^2 + 1)`` with the bias. Returns the
    step, which sets the layers' ``.grad`` from the rows ``(K, n, ...)``, ``(K, n)``."""
    import torch
    from opacus.accountants.utils import get_noise_multiplier

    dp, batch = recipe["dp"], int(recipe["batch_size"])
    clip, rate = float(dp.get("max_grad_norm", 1.0)), min(1.0, batch / n)
    steps_per_epoch = int(1 / rate)
    sigma = get_noise_multiplier(
        target_epsilon=float(dp["epsilon"]), target_delta=float(dp.get("delta") or 1 / (10 * n)),
        sample_rate=rate, steps=steps_per_epoch * int(recipe["epochs"]), accountant="rdp")

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        taken = (torch.rand(y.shape) < rate).float()
        inputs, outputs, h = [], [], x
        for i in range(0, len(layers), 2):
            inputs.append(h.detach())
            out = torch.baddbmm(layers[i + 1][:, None, :], h, layers[i].transpose(1, 2))
            outputs.append(out)
            h = torch.relu(out) if i < len(layers) - 2 else out
        loss = torch.nn.functional.cross_entropy(h.transpose(1, 2), y, reduction="none")
        deltas = torch.autograd.grad(loss.sum(), outputs)
        norms = sum(d.pow(2).sum(-1) * (a.pow(2).sum(-1) + 1) for d, a in zip(
            deltas, inputs, strict=True)).sqrt()
        scale = (clip / (norms + 1e-6)).clamp(max=1.0) * taken  # (K, n)
        for i, (d, a) in enumerate(zip(deltas, inputs, strict=True)):
            weighted = d * scale[..., None]
            for param, total in ((layers[2 * i], weighted.transpose(1, 2) @ a),
                                 (layers[2 * i + 1], weighted.sum(1))):
                param.grad = (total + sigma * clip * torch.randn(total.shape)) / (rate * n)

    step.steps_per_epoch, step.sigma = steps_per_epoch, sigma
    return step


def path_gradients(layers: list[tuple[np.ndarray, np.ndarray]], z: np.ndarray, y: np.ndarray,
                   steps: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Algorithm 4's local linear model of ReLU dense ``layers`` (per layer ``(K, out, in)``
    weights, ``(K, out)`` biases: K networks) at each record's features ``z`` and class ``y``:
    ``(g, first, g(0)_y)``, with ``g`` the mean, over the midpoints ``(s + 1/2) / steps`` of
    the path from 0 to ``z``, of the gradient of the class's logit at the first layer's
    pre-activation, carried back by hand through the ReLU masks, and ``first = W_1 z``, both
    ``(K, records, out_1)``. The path's points are multiples of ``z``, so ``chi = g W_1`` and
    ``chi^T z = g . first``. One layer: ``g`` is the class's one-hot vector."""
    k = layers[0][0].shape[0]
    first = z @ layers[0][0].transpose(0, 2, 1)  # W_1 z, (K, n, out): batched products
    zero = np.zeros((k, 1, z.shape[1]))
    for weight, bias in layers[:-1]:
        zero = np.maximum(zero @ weight.transpose(0, 2, 1) + bias[:, None, :], 0.0)
    at_zero = (zero @ layers[-1][0].transpose(0, 2, 1) + layers[-1][1][:, None, :])[:, 0, y]
    if len(layers) == 1:
        return np.broadcast_to(np.eye(first.shape[-1])[y], first.shape), first, at_zero
    total = np.zeros_like(first)
    for t in (np.arange(steps) + 0.5) / steps:
        h, masks = t * first + layers[0][1][:, None, :], []
        for weight, bias in layers[1:]:
            masks.append(h > 0)
            h = np.maximum(h, 0.0) @ weight.transpose(0, 2, 1) + bias[:, None, :]
        grad = layers[-1][0][:, y, :]  # (K, n, in): d logit_y / d the last layer's input
        for (weight, _), mask in zip(reversed(layers[1:-1]), reversed(masks[1:]), strict=True):
            grad = (grad * mask) @ weight
        total += grad * masks[0]
    return total / steps, first, at_zero


def path_logit(layers: list[tuple[np.ndarray, np.ndarray]], z: np.ndarray, y: np.ndarray,
               steps: int) -> np.ndarray:
    """The local linear model's logit ``chi^T z + g(0)_y`` (:func:`path_gradients`),
    ``(K, records)``, never forming ``chi`` at the input's width. One layer: the logit
    ``g(z)_y`` exactly."""
    grad, first, at_zero = path_gradients(layers, z, y, steps)
    return (grad * first).sum(-1) + at_zero


def conv_path_influence(layers: list[tuple[np.ndarray, np.ndarray]], z: np.ndarray,
                        y: np.ndarray, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`path_influence` for layers that begin with a LeNet's convolutions (K networks,
    :func:`stacked_forward`; ``z`` feature maps), the gradient at each midpoint ``t z`` by
    torch's autograd, in float64: ``chi`` ``(K, records, *maps)`` and ``g(0)_y``."""
    import torch

    stack = [torch.as_tensor(a, dtype=torch.float64) for layer in layers for a in layer]
    maps, classes = torch.as_tensor(z, dtype=torch.float64), torch.as_tensor(y)
    k, chi = len(stack[0]), torch.zeros((len(stack[0]), *z.shape), dtype=torch.float64)
    with torch.enable_grad():
        for t in (np.arange(steps) + 0.5) / steps:
            point = (t * maps).expand(k, *maps.shape).clone().requires_grad_()
            logit = stacked_forward(stack, point)[:, torch.arange(len(z)), classes]
            chi += torch.autograd.grad(logit.sum(), point)[0] / steps
    with torch.no_grad():
        at_zero = stacked_forward(stack, torch.zeros((k, 1, *z.shape[1:]),
                                                     dtype=torch.float64))[:, 0]
    return chi.numpy(), at_zero[:, y].numpy()


def conv_path_logit(layers: list[tuple[np.ndarray, np.ndarray]], z: np.ndarray, y: np.ndarray,
                    steps: int, chunk: int = 100) -> np.ndarray:
    """:func:`path_logit` for layers that begin with convolutions: ``chi^T z + g(0)_y``,
    ``(K, records)``, by :func:`conv_path_influence` ``chunk`` records at a time."""
    total = np.zeros((len(layers[0][0]), len(z)))
    for rows in np.array_split(np.arange(len(z)), max(1, len(z) // chunk)):
        chi, at_zero = conv_path_influence(layers, z[rows], y[rows], steps)
        total[:, rows] = (chi * z[rows]).reshape(*chi.shape[:2], -1).sum(-1) + at_zero
    return total


def path_influence(layers: list[tuple[np.ndarray, np.ndarray]], z: np.ndarray, y: np.ndarray,
                   steps: int) -> tuple[np.ndarray, np.ndarray]:
    """The local linear model itself, ``(chi, g(0)_y)``: ``(K, records, in)`` and
    ``(K, records)`` (:func:`path_gradients`); general-wb's displacements read ``chi``
    element by element."""
    grad, _, at_zero = path_gradients(layers, z, y, steps)
    return grad @ layers[0][0], at_zero


def dense_target(home: Path, data: dict, study: dict, t: int, attack: str
                 ) -> tuple[list[tuple[np.ndarray, np.ndarray]], int, np.ndarray]:
    """Target ``t`` rebuilt for Stolen Memories' white-box attacks: its layers, how many of
    them are convolutions, and its dense part's input for every record (the convolutions run
    once), its rebuilt logits checked against those it saved. A ReLU MLP (with dropout after
    its hidden layers or trained by DP-SGD, or neither) or a classic LeNet trained plainly: the
    attacker's proxies copy the target's recipe."""
    card, state = saved_target(home, t)
    layers, arch = layers_of(state), card["architecture"]
    dp, dropout = "dp" in study["training"], bool(arch.get("dropout"))
    mlp = arch["arch"] == "mlp" and not (dp and dropout)
    plain_lenet = arch["arch"] == "lenet" and not (dp or dropout)
    if arch.get("activation", "relu") != "relu" or not (mlp or plain_lenet):
        raise NotRechecked(f"{attack} on a target other than a ReLU MLP (with dropout or DP-SGD, "
                           "not both) or a classic LeNet trained plainly")
    convolutions = sum(weight.ndim == 4 for weight, _ in layers)
    x = data["X"]
    z = conv_features(layers, x) if convolutions else x.reshape(len(x), -1).astype(np.float64)
    saved_logits(home, t, dense_forward(layers[convolutions:], z, "relu")[1], np.arange(len(x)))
    return layers, convolutions, z


def redrawn_proxies(home: Path, split: dict, study: dict, entry: dict, t: int, z: np.ndarray,
                    labels: np.ndarray, top: list[tuple[np.ndarray, np.ndarray]],
                    rng: np.random.Generator, hidden: bool, redraws: int
                    ) -> tuple[list, int, int]:
    """``redraws`` x the fit's count of proxies of the ``top`` layers (its card), each on
    as many random hold-out records as the target's training set, on the target's features
    ``z`` below them (:func:`train_proxies`, the study's recipe and the MLP's dropout, on
    ``z`` too where it is a ``hidden`` layer's output): the trained layers, the count per
    draw and the fit's midpoint steps."""
    info = fit_of(home, "stolen_memories", SM_FIT_KEYS, entry, t)[1]["info"]
    proxies, size, steps = int(info["proxies"]), int(info["proxy_size"]), int(info["steps"])
    hold_out = partition(split, t)["reference_pool"]
    subsets = np.stack([rng.choice(hold_out, size, replace=False)
                        for _ in range(redraws * proxies)])
    return (train_proxies(z, labels, subsets, study["training"], [w.shape for w, _ in top],
                          int(rng.integers(2**31)), study["model"].get("dropout", 0.0),
                          on_input=hidden), proxies, steps)


def bayes_wb(home: Path, data: dict, split: dict, study: dict, entry: dict, t: int,
             audit: np.ndarray, redraws: int = REDRAWS) -> np.ndarray:
    """bayes-wb's scores of target ``t`` at its layer ``l``, ``redraws`` times: Algorithm
    4's local linear test ``(chi - mean chi_proxy)^T z + g(0) - mean g_proxy(0)`` at the
    target's features ``z = h(x)`` below layer ``l`` and the record's class, each local
    linear model by :func:`path_logit` with the fit's midpoint steps (at the top layer, the
    logits themselves), the proxies drawn anew (:func:`redrawn_proxies`). An MLP target at
    any layer; a classic LeNet at its dense layers, and at its convolutions with the feature
    maps below as ``z``, convolutional proxies and local linear models by autograd
    (:func:`conv_path_logit`)."""
    layers, convolutions, z = dense_target(home, data, study, t, "bayes-wb")
    cut = entry.get("layer", -1) % len(layers)
    local_logit = path_logit
    if cut < convolutions:  # the feature maps below the cut; the proxies convolutional
        z = conv_features(layers[:cut], data["X"], flat=False)
        local_logit = conv_path_logit
    for weight, bias in layers[convolutions:cut]:
        z = np.maximum(z @ weight.T + bias, 0.0)
    y = data["y"]
    trained, proxies, steps = redrawn_proxies(home, split, study, entry, t, z, y, layers[cut:],
                                              np.random.default_rng([SEED, t, 0x5A]), cut > 0,
                                              redraws)
    target = local_logit([(w[None], b[None]) for w, b in layers[cut:]], z[audit], y[audit],
                         steps)
    proxy = local_logit(trained, z[audit], y[audit], steps)
    return target - proxy.reshape(redraws, proxies, len(audit)).mean(1)


def general_wb_logit(fit: dict, point: int, layers: list[tuple[np.ndarray, ...]]) -> np.ndarray:
    """general-wb's logit (Algorithm 2) from the network its fit saved at ``point`` of its
    sweep, float32 as trained: per attacked layer, from ``(chi, mean chi_proxy, z, g(0)_y,
    mean g_proxy(0)_y)`` (records first), the layer's displacement ``D`` (a ReLU network
    without biases at width 0) on each pair ``(chi_j, chi~_j)`` gives weights dotted with
    ``z``, plus ``D(g(0)_y, g~(0)_y)``; its meta model combines the layers' logits."""
    model = f"general_wb_model.{point}."
    logits = []
    for i, (chi, chi_proxy, z, bias, bias_proxy) in enumerate(layers):
        displacement = layers_of(fit, f"{model}displacements.{i}.")
        weights = dense_forward(displacement, np.stack([chi, chi_proxy], -1).reshape(-1, 2),
                                "relu", np.float32)[1].reshape(chi.shape)
        shift = dense_forward(displacement, np.stack([bias, bias_proxy], -1), "relu",
                              np.float32)[1][:, 0]
        logits.append((weights * z.astype(np.float32)).sum(1) + shift)
    return dense_forward(layers_of(fit, f"{model}meta."), np.stack(logits, 1), "relu",
                         np.float32)[1][:, 0]


def general_wb(home: Path, data: dict, split: dict, study: dict, entry: dict, t: int,
               audit: np.ndarray, redraws: int = REDRAWS) -> np.ndarray:
    """general-wb's scores of target ``t``, ``redraws`` times: at each layer the fit
    attacks, the target's local linear model and the mean of its redrawn proxies'
    (:func:`path_influence`, :func:`redrawn_proxies`), read by the displacements and meta
    model the fit saved at the instance's point of its sweep (:func:`general_wb_logit`): the
    influence pairs and their reading are this script's, the attack models' training on
    shadow models the tests'. An MLP target, or a LeNet's from its images up (its
    convolutional layers' by :func:`conv_path_influence`)."""
    layers, convolutions, z = dense_target(home, data, study, t, "general-wb")
    if convolutions:  # from the images up, through the feature maps
        z = data["X"].astype(np.float64)
    fit, card = fit_of(home, "stolen_memories", SM_FIT_KEYS, entry, t)
    grid = [tuple(int(v) for v in row) for row in fit["grid"]]
    point = (int(fit["chosen"]) if entry.get("n_d") is None
             else grid.index((entry["n_d"], entry["n_m"])))
    attacked = range(len(layers))[-len(card["info"]["layers"]):]  # every layer, or the top
    y, rng = data["y"], np.random.default_rng([SEED, t, 0x6B])
    pairs: list[list[tuple]] = [[] for _ in range(redraws)]
    for cut, (weight, bias) in enumerate(layers):
        z = z if weight.ndim == 4 else z.reshape(len(z), -1)  # dense layers read maps flat
        if cut in attacked:
            top = layers[cut:]
            influence = conv_path_influence if weight.ndim == 4 else path_influence
            trained, proxies, steps = redrawn_proxies(home, split, study, entry, t, z, y, top,
                                                      rng, cut > 0, redraws)
            chi, at_zero = influence([(w[None], b[None]) for w, b in top], z[audit], y[audit],
                                     steps)
            flat = z[audit].reshape(len(audit), -1)
            for r, draw in enumerate(pairs):
                chi_p, at_zero_p = influence(
                    [(w[r * proxies:(r + 1) * proxies], b[r * proxies:(r + 1) * proxies])
                     for w, b in trained], z[audit], y[audit], steps)
                draw.append((chi[0].reshape(flat.shape), chi_p.mean(0).reshape(flat.shape),
                             flat, at_zero[0], at_zero_p.mean(0)))
        z = (conv_features([(weight, bias)], z, flat=False) if weight.ndim == 4
             else np.maximum(z @ weight.T + bias, 0.0))
    return np.stack([general_wb_logit(fit, point, draw) for draw in pairs])


def bayes_wb_meta(home: Path, entry: dict, t: int, layers: np.ndarray) -> np.ndarray:
    """bayes-wb's meta model (§4.2) on target ``t``'s records: the fit's saved network (16
    ReLU units, float32 as trained) applied to ``layers`` (records, attacked layers), the
    scores of the study's bayes-wb instance of each layer, which share its fit. It checks
    the meta step exactly; its inputs are checked where the layers are (an MLP target's, by
    :func:`bayes_wb`), its training on shadow models by the tests."""
    fit, card = fit_of(home, "stolen_memories", SM_FIT_KEYS, entry, t)
    if layers.shape[1] != len(card["info"]["layers"]):
        raise NotRechecked(f"{layers.shape[1]} layer instances for a meta model over "
                           f"{len(card['info']['layers'])} layers")
    return dense_forward(layers_of(fit, "meta_model."), layers, "relu", np.float32)[1][:, 0]
