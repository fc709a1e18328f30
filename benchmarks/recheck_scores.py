"""Recompute attack scores from a run's saved model outputs: an independent check of scoring.

    .venv/bin/python benchmarks/recheck_scores.py --run DIR [--config FILE] [--float32]
        [STUDY:ATTACK ...]

A score file (``studies/<study>/scores/<attack>.parquet``) is the package's attack code applied
to the logits each model saved (``models/<role>/<index>.npy``: queries x records x classes).
This rebuilds the attack's inputs without importing ``miarepro``: each target's audit and
population and every model's membership come again from ``split.npz`` (repetition ``t`` drawn
from ``default_rng([seed, t])``, complementary halves from
``default_rng([seed, role, i // 2])``) and must match the SHA-256 of the training indices in the
model's JSON card. The attacks follow their papers: Attack-P / LOSS / Marginal (the statistic),
LiRA (IN / OUT Gaussians, per-sample or pooled variance; offline ``sum log Phi``, online
log-likelihood ratio), RMIA (offline ``p(x) = ((1 + a) mean_OUT p + 1 - a) / 2``, online the
mean over all references, ``Pr_z[LR(x, z) >= gamma]``), Attack-R (the target's percentile among
its OUT losses, ML Privacy Meter's range [0, 1000] appended), Watson et al.'s and Sablayrolles
et al.'s calibrated losses (the OUT mean; the midpoint of the IN and OUT means), Yeom et al.'s
loss against the target's mean training loss, Shokri et al.'s shadow-model attack (per-class
classifiers refitted on the reference models' sorted top-k probabilities and confidence, with
the package's seeds: their rows and labels are what it checks), the L-attack and LiRA-L
(Attack-R's percentile and offline LiRA against each record's own leave-one-out models, their
training sets checked against their cards), Suri et al.'s IHA (Eq. 8, leave-one-out ``grad L0``
as their Appendix E, or from a known fraction of the training set as their Table 9, damped or
low-rank inverse, any subset of its terms) and SIF from an exact Hessian of the target's
training loss that this script forms from the saved weights with ``torch.func`` and
eigendecomposes in float64 (a few seconds for IHA's 4,780-parameter MNIST MLP), and QMIA's
Gaussian head, ``(s - mu(x)) / sigma(x)`` with the target's hinge ``s``, or its head of
quantiles (the level the hinge reaches among them, :func:`exceedance`), from the regressor's
predictions that its fit saved for every record (its training on public records only is the
tests' to check, its calibration the claims'), and BMIA (GLM or MC predictive, its own study's
references or another architecture's), Subpop (an MLP or LeNet victim; Eq. 3 with natural
subpopulations, a perfect inverse of ``h``, the white-box BiGAN generator or the black-box
BiGAN's encoder and generator) and MERLIN (the same victim, the noise scale its fit chose) drawn
anew: see below. RMIA's file holds the package's refinement of the step score,
``(d + f) / (|Z| + 1)``, recomputed here from that formula; beside it the published step score's
AUC and the share of rows with ``d = floor(score (|Z| + 1))`` (the refinement breaks ties and
reorders nothing).

Each target's rows are compared in the file's order. MATCH: every row within 1e-6 of
max(|score|, the scores' spread); CLOSE: ranks and AUC agree (Spearman > 0.9999, AUC within
1e-3); else MISMATCH, exit status 1. Everything here is float64; the package exponentiates in
float32 inside the log-sum-exp of its statistics (``miarepro/signals.py``), and ``--float32``
does the same, to tell a difference of precision from one of method. This check found RMIA's
mean of probabilities over models taken so too, where their spread is below float32's
resolution: it is float64 now, here and in the package. IHA's fit keeps the audited gradients'
eigenbasis coordinates in float32, which moves its scores by about 1e-8 of their spread.

BMIA, Subpop and MERLIN draw at random, so their scores are checked as a draw: :data:`REDRAWS`
draws of the same scores with a seed of this script's own, on each of BMIA's first
:data:`BMIA_TARGETS` targets. For BMIA it takes the reference model and its training records
from the fit's card (their hashes checked), its penultimate features and last layer from the
fit (checked against the logits the model saved) and forms Liu et al.'s last-layer Laplace
posterior itself (the GGN, KFAC, diagonal or full, and the prior precision that maximises the
evidence, a validation-tuned one read from the card; ``delta_rel``: its relative difference
from the fit's). For Subpop it rebuilds the target from its saved weights (an MLP, or LeNet by
torch's functional convolutions) and the BiGAN's generator, dense or convolutional, and the
black-box one's dense encoder from the fit (:func:`subpop`); its natural subpopulations are
deterministic, checked as above. MERLIN runs that victim on Gaussian perturbations of each
record at the scale its fit chose. On a LeNet victim the drawn attacks score
:data:`CONV_RECORDS` of each target's audited records. CONSISTENT (:func:`consistent`): the
file's AUC, TPR@1%, median and interquartile range of scores lie within :data:`WITHIN` standard
deviations of the redraws' (a t with 19 degrees of freedom: each beyond it once in 10,000), it
correlates with the redraws as they do with each other, and its rank among each record's
redraws is uniform; else INCONSISTENT, exit status 1. Controls (redraws under a wrong setting
against the file):

- bmia-mnist's KFAC instance: a posterior 2% too wide 4.9 standard deviations out, N = 95 for
  100 9.0, the diagonal posterior 103;
- bmia-mnist's MC predictive (weights shared by every record, so read whole like bayes-wb's
  draws): GLM redraws against the MC file 7.2, but MC redraws against the GLM file 1.3 and N =
  90 for 100 2.8 (MC draws vary much more from one to the next);
- subpop-mnist: beta 0.045 or 0.06 for 0.05, 6.8 and 13.7 (black-box: 5.8 and 7.6); MERLIN's
  scale 0.8 or 1.2 times its fit's, 11.3 and 9.7;
- subpop-mnist-lenet (500 records): beta 0.025 or 0.1, 29.5 and 17.8, but 0.045 or 0.06 only
  3.5 and 4.5; the generator's image cropped from its grid's corner, not its centre, 66,000;
  MERLIN's scale 0.8 or 1.2 times, 1.4 and 1.5 (MERLIN is at chance on this victim: its
  fractions hardly depend on the scale).

Stolen Memories' naive attack (the target's prediction right or wrong) and its omniscient one
(Theorem 1 from the synthetic generator's parameters in the dataset's card) are recomputed
exactly. Its bayes-wb at any layer of an MLP target is drawn anew like BMIA (:func:`bayes_wb`):
a redraw trains as many proxies as the fit, by the study's recipe, with code of this script's
own; as the proxies serve every record at once, the draw check reads each draw whole (``shared``
in :func:`consistent`). Below the top layer the test is the target's logit minus the proxies'
mean, by the efficiency of internal influence (:func:`bayes_wb`). Controls on sm-synthetic-100
(10 targets): proxies on twice or 0.8 times the target's training-set size 563 and 13.9 standard
deviations out, 5 or 20 proxies for 10 5.5 and 6.1, a learning rate of 0.05 for 0.1 15.1, weight
decay 1e-3 for 1e-4 19.5, but 50 epochs for 100 only 2.9 (on sm-bcw: 197, 2.0 for 5 proxies,
12.7 and 3.7). Its meta models, its attacks on LeNet and general-wb, which train shadow models
and displacements, are checked against hand computations in ``tests/``.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import re
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from recheck_claims import rank_auc, rates_at  # benchmarks/recheck_claims.py: this folder
from scipy import optimize, special, stats

DEFAULT = [f"bmia-purchase:{a}" for a in ("attack-p", "loss", "attack-r-n2", "attack-r-n8",
                                          "lira-n2", "lira-n8", "lira-global-n8", "rmia-n2",
                                          "rmia-n8")] \
    + [f"iha-mnist{r}:{a}" for r in ("", "-r1", "-r2") for a in ("loss", "lira-online")] \
    + [f"qmia-mnist-mlp1:{a}" for a in ("marginal", "lira-n2", "lira-n8", "lira-ref-mlp4")] \
    + [f"{study}:{a}" for study in ("iha-purchase", "subpop-mnist")
       for a in ("watson", "sablayrolles")] \
    + ["iha-purchase:rmia-online"] \
    + [f"iha-mnist:{a}" for a in ("iha", "iha-no-loo", "iha-damping-1e-1", "iha-low-rank-1e-1",
                                  "iha-i1-i2", "iha-loss-i1", "sif")] \
    + [f"iha-mnist:iha-fraction-{f}" for f in (20, 40, 60, 80, 90)] \
    + [f"iha-mnist-odd:{a}" for a in ("iha", "iha-low-rank-2e-1", "sif")] \
    + [f"qmia-mnist-mlp1:{a}" for a in ("qmia", "qmia-mlp")] \
    + [f"qmia-tabular:{a}" for a in ("qmia", "qmia-search")] \
    + [f"qmia-purchase:{a}" for a in ("qmia", "qmia-quantiles")] \
    + [f"subpop-mnist{r}:yeom" for r in ("", "-r1", "-r2")] \
    + [f"bmia-mnist:{a}" for a in ("bmia", "bmia-diag-n100", "bmia-full", "bmia-kron-n300",
                                   "bmia-validation", "bmia-mc", "bmia-ref-mlp", "bmia-ref-wide")] \
    + [f"bmia-mnist-{s}:bmia-ref-{r}" for s, r in (("mlp", "lenet"), ("mlp", "wide"),
                                                   ("wide", "lenet"), ("wide", "mlp"))] \
    + [f"bmia-mnist-ood:{a}" for a in ("bmia", "attack-p", "qmia", "rmia-n8")] \
    + [f"subpop-mnist{n}:{a}" for n in ("", "-lenet") for a in ("subpop-natural", "subpop",
                                                                "jayaraman")] \
    + [f"subpop-mnist:{a}" for a in ("subpop-inverse-5e-2", "subpop-blackbox")] \
    + [f"{study}:naive" for study in ("sm-bcw", "sm-digits", "sm-mnist-lenet")] \
    + [f"sm-synthetic-{n}:{a}" for n in (100, 200, 400) for a in ("omniscient", "bayes-wb")] \
    + [f"{study}:bayes-wb" for study in ("sm-bcw", "sm-german-like", "sm-adult-like-4000")] \
    + [f"sm-digits:bayes-wb-layer-{n}" for n in (1, 2, 3)] \
    + [f"{study}:shadow-bb" for study in ("sm-bcw", "sm-german-like", "sm-adult-like-4000",
                                          "sm-digits", "sm-mnist-lenet")] \
    + [f"subpop-mnist{n}:shokri" for n in ("", "-lenet")] \
    + [f"iha-mnist{r}:{a}" for r in ("", "-r1", "-r2") for a in ("l-attack", "lira-l")]
ROLE_IDS, STRIDE, TOLERANCE = {"target": 1, "reference": 2, "loo": 3}, 1000, 1e-6
MAX_PARAMETERS = 10_000  # an exact Hessian's eigendecomposition: seconds at 4,780
REPO = Path(__file__).resolve().parent.parent


class NotRechecked(Exception):
    """An attack instance, or a setting of one, that this script cannot recompute on its own
    (a failed check is a ``SystemExit``)."""


# --- splits: which records each model trained on -------------------------------------------
def partition(split: dict, t: int) -> dict:
    """Repetition ``t`` of a split: the stored one for 0 or a balanced split, else redrawn."""
    if str(split["scheme"]) == "balanced" or t == 0:
        return split
    n = int(split["n_samples"]) - len(split["ood"])
    order = np.random.default_rng([int(split["seed"]), t]).permutation(n)
    cuts = np.round(np.cumsum([0.0, *split["fraction_values"]]) * n).astype(int)
    part = {name: np.sort(order[cuts[k]:cuts[k + 1]])
            for k, name in enumerate(split["fraction_names"].tolist())}
    part.setdefault("population", np.empty(0, dtype=np.int64))
    part["audit"] = np.sort(np.concatenate([part["target_train"], part["target_test"]]))
    if "reference_parts" in split:
        part["reference_parts"] = split["reference_parts"]
    part["ood"], part["ood_aligned"] = split["ood"], split.get("ood_aligned", False)
    return part


def audited(part: dict, nonmembers: str) -> np.ndarray:
    """A repetition's audited records: its audit, or (``nonmembers: ood``) the target's members
    against the out-of-distribution records (for copies of the dataset's records, the copies
    of the target's test records)."""
    if nonmembers != "ood":
        return part["audit"]
    ood = part["ood"][part["target_test"]] if bool(part["ood_aligned"]) else part["ood"]
    return np.sort(np.concatenate([part["target_train"], ood]))


def loo_records(split: dict, count: int) -> np.ndarray:
    """IHA's leave-one-out records: members and non-members of target 0 alternating, each in
    an order drawn from ``default_rng([seed, 3])`` (the first ``count``)."""
    audit, member = split["audit"], np.isin(split["audit"], trained_on(split, "target", 0))
    rng = np.random.default_rng([int(split["seed"]), ROLE_IDS["loo"]])
    members, outsiders = rng.permutation(audit[member]), rng.permutation(audit[~member])
    records = np.empty(count, dtype=np.int64)
    records[0::2], records[1::2] = members[:(count + 1) // 2], outsiders[:count // 2]
    return records


def trained_on(split: dict, role: str, index: int) -> np.ndarray:
    """Models 2j and 2j+1 split their pool in complementary halves (a partition's target:
    its repetition's training part); leave-one-out model ``j STRIDE + k``, target 0's training
    set without the ``k``-th leave-one-out record."""
    seed, balanced = int(split["seed"]), str(split["scheme"]) == "balanced"
    if role == "loo":
        target = trained_on(split, "target", 0)
        return target[target != loo_records(split, index % STRIDE + 1)[-1]]
    if role == "target" and not balanced:
        return partition(split, index)["target_train"]
    part = partition(split, 0 if balanced else index // STRIDE)
    pool = part["reference_pool"] if role == "target" or "reference_parts" not in part \
        else np.sort(np.concatenate([part[p] for p in part["reference_parts"].tolist()]))
    order = np.random.default_rng([seed, ROLE_IDS[role], index // 2]).permutation(len(pool))
    return np.sort(pool[order[:len(pool) // 2] if index % 2 == 0 else order[len(pool) // 2:]])


def checked_mask(split: dict, models: Path, role: str, index: int) -> np.ndarray:
    """Membership of a model over the dataset, after checking it against the model's card."""
    indices = trained_on(split, role, index)
    card = json.loads((models / role / f"{index}.json").read_text())
    digest = hashlib.sha256(np.ascontiguousarray(indices, dtype=np.int64).tobytes()).hexdigest()
    if digest != card["train_indices_sha256"]:
        raise SystemExit(f"membership of {models}/{role}/{index} differs from its card")
    mask = np.zeros(int(split["n_samples"]), dtype=bool)
    mask[indices] = True
    return mask


# --- statistics, member-high, (queries, records) -------------------------------------------
def lse(values: np.ndarray, axis: int, f32: bool) -> np.ndarray:
    """log-sum-exp over ``axis``; ``f32``: as the package's, the maximum subtracted in the
    input's precision, the exponentials taken in float32 and summed in float64."""
    if not f32:
        return special.logsumexp(np.asarray(values, dtype=np.float64), axis=axis)
    top = np.max(values, axis=axis, keepdims=True)
    top[top == -np.inf] = 0.0
    shifted = np.exp((values - top).astype(np.float32))
    return np.log(shifted.sum(axis=axis, dtype=np.float64)) + np.squeeze(top, axis)


def statistics(logits: np.ndarray, labels: np.ndarray, f32: bool) -> dict[str, np.ndarray]:
    z = logits if f32 else np.asarray(logits, dtype=np.float64)
    true = np.take_along_axis(z, np.broadcast_to(labels[None, :, None], (*z.shape[:2], 1)),
                              axis=-1)[..., 0].astype(np.float64)
    others = np.where(np.arange(z.shape[-1]) == labels[:, None], -np.inf, z)
    margin = true - lse(others, -1, f32)  # log p_y - log(1 - p_y)
    return {"hinge": true - others.max(axis=-1), "loss": -np.logaddexp(0.0, -margin),
            "logit_confidence": margin}


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


# --- IHA (Suri et al.): an exact Hessian of the target's training loss -----------------------
@dataclass
class Curvature:
    """The target's Hessian eigenvalues (float64), the full-data gradient and every audited
    record's gradient in its eigenbasis, and the audited records' losses."""
    eigenvalues: np.ndarray
    gradient: np.ndarray
    coordinates: np.ndarray
    losses: np.ndarray
    n_train: int
    recipe: dict


#: a training recipe's values where the study's config leaves them out (README, "training")
RECIPE = {"lr": 0.1, "momentum": 0.9, "nesterov": False, "weight_decay": 0.0, "epochs": 10,
          "batch_size": 128, "milestones": [], "gamma": 0.1, "loss": "cross_entropy"}


def recipe_of(card: dict) -> dict:
    """A model's training recipe from its card, with the values the config leaves out."""
    return {**RECIPE, **card["recipe"]}


def per_record_loss(state: dict, card: dict):
    """The target's loss per record as a function of its flat parameters: the linear layers of
    its state dict in order, ReLU between them; cross-entropy, or for one logit the paper's
    MNIST-Odd loss ``(sigmoid(s) - y)^2`` where the recipe says ``mse``."""
    import torch

    names = [k[:-len(".weight")] for k in state if k.endswith(".weight")]
    shapes = [(tuple(state[f"{n}.weight"].shape), tuple(state[f"{n}.bias"].shape))
              for n in names]
    flat = torch.cat([state[f"{n}.{p}"].double().reshape(-1) for n in names
                      for p in ("weight", "bias")])
    if card["architecture"].get("activation", "relu") != "relu":
        raise NotRechecked(f"activation {card['architecture']['activation']!r}")
    loss_name = recipe_of(card)["loss"]
    mse = loss_name == "mse"
    if mse != (shapes[-1][1] == (1,)) or loss_name not in ("mse", "cross_entropy"):
        raise NotRechecked(f"loss {loss_name!r} of {shapes[-1]}")

    def loss(theta, x, y):
        start, h = 0, x.reshape(len(x), -1)
        for k, (weight, bias) in enumerate(shapes):
            w = theta[start:start + np.prod(weight)].reshape(weight)
            start += int(np.prod(weight))
            h = h @ w.T + theta[start:start + bias[0]]
            start += bias[0]
            h = torch.relu(h) if k < len(shapes) - 1 else h
        if mse:
            return (torch.sigmoid(h[:, 0]) - y.double()) ** 2
        return torch.logsumexp(h, -1) - h.gather(-1, y[:, None])[:, 0]
    return flat, loss


def curvature(state: dict, card: dict, X: np.ndarray, y: np.ndarray, train: np.ndarray,
              audit: np.ndarray) -> Curvature:
    """The exact Hessian of the mean loss over ``train``, column blocks of forward-over-reverse
    products, and its float64 eigendecomposition; gradients per record by ``vmap``."""
    import torch
    from torch.func import grad, jvp, vmap

    theta, loss = per_record_loss(state, card)
    if len(theta) > MAX_PARAMETERS:  # IHA-CG's Purchase MLP-2: 22,532, an hour of eigh
        raise NotRechecked(f"{len(theta):,} parameters: too many for an exact Hessian here")
    X, y = torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y)
    full = grad(lambda w: loss(w, X[train], y[train]).mean())
    basis = torch.eye(len(theta), dtype=torch.float64)
    hessian = torch.cat([vmap(lambda v: jvp(full, (theta,), (v,))[1])(basis[i:i + 256])
                         for i in range(0, len(theta), 256)]).numpy()
    eigenvalues, vectors = np.linalg.eigh((hessian + hessian.T) / 2)
    one = vmap(grad(lambda w, x, y: loss(w, x[None], y[None])[0]), in_dims=(None, 0, 0))
    gradients = np.concatenate([one(theta, X[audit[i:i + 512]], y[audit[i:i + 512]]).numpy()
                                for i in range(0, len(audit), 512)])
    return Curvature(eigenvalues, vectors.T @ full(theta).numpy(), gradients @ vectors,
                     loss(theta, X[audit], y[audit]).detach().numpy(), len(train),
                     recipe_of(card))


def target_curvature(home: Path, split: dict, data: dict, t: int) -> Curvature:
    """:func:`curvature` of a run's target ``t``, its training set checked against its card."""
    import torch

    card = json.loads((home / "models" / "target" / f"{t}.json").read_text())
    state = torch.load(home / "models" / "target" / f"{t}.pt", weights_only=True)
    train = np.flatnonzero(checked_mask(split, home / "models", "target", t))
    return curvature(state, card, data["X"], data["y"], train, partition(split, t)["audit"])


def known_records(member: np.ndarray, audit: np.ndarray, fraction: float, seed: list[int]
                  ) -> np.ndarray:
    """IHA's Table 9: which audited records are in the ``fraction`` of the target's training
    set (``member`` over the dataset) whose gradients the attacker knows, drawn as the
    package draws it from ``default_rng([split seed, target, 0x1A])``."""
    train = np.flatnonzero(member)
    subset = np.random.default_rng([*seed, 0x1A]).choice(
        train, max(1, round(fraction * len(train))), replace=False)
    known = np.isin(audit, subset)
    if known.sum() != len(subset):
        raise NotRechecked("IHA's known records reach outside the audit")
    return known


def iha(c: Curvature, member: np.ndarray, entry: dict, known: np.ndarray | None = None
        ) -> np.ndarray:
    """Eq. 8: ``l / (1 + mu) - (I1 + I2 + I3 + I4) / lr`` over the chosen terms, ``v = H^-1 g``
    by the damped (``1 / (s + eps)``) or low-rank (``1 / s`` where ``s > eps``) inverse; a
    member's ``grad L0`` lacks its own gradient (App. E) unless ``leave_one_out`` is false.
    ``known`` (Table 9's ``fraction``): the audited records whose gradients the attacker
    knows, a ``fraction`` of the training set, whose sum over ``fraction n`` stands in for the
    full-data gradient. SIF: ``-g^T (H + eps I)^-1 g``."""
    s, eps = c.eigenvalues, entry.get("eps", 0.2)
    low_rank = entry.get("conditioning", "damping") == "low_rank"
    with np.errstate(divide="ignore"):
        inverse = np.where(s > eps, 1 / s, 0.0) if low_rank else 1 / (s + eps)
    v1 = c.coordinates * inverse
    if entry["attack"] == "sif":
        return -(c.coordinates * v1).sum(axis=1)
    lr, mu, alpha = (c.recipe[k] for k in ("lr", "momentum", "weight_decay"))
    if known is None:
        rest, knows, size = c.gradient, member, c.n_train
    else:
        size = entry["fraction"] * c.n_train
        rest, knows = c.coordinates[known].sum(axis=0) / size, known
    knows = knows * entry.get("leave_one_out", True)
    v0 = (rest - knows[:, None] * c.coordinates / size) * inverse
    c1, c2 = 1 - lr * alpha / (1 + mu), 2 - lr * alpha / (1 + mu)
    terms = {"loss": c.losses / (1 + mu),
             "I1": -c1 / c.n_train * (v1 * v1).sum(axis=1) / lr,
             "I2": -2 * c1 * (v0 * v1).sum(axis=1) / lr,
             "I3": -alpha * c2 / (2 * c.n_train) * (v1 * v1 * inverse).sum(axis=1) / lr,
             "I4": -alpha * c2 * (v0 * v1 * inverse).sum(axis=1) / lr}
    return sum(terms[name] for name in entry.get("terms", list(terms)))


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


def fit_of(home: Path, kind: str, keys: tuple[str, ...], entry: dict, t: int,
           defaults: dict | None = None) -> tuple[dict, dict]:
    """Target ``t``'s fit of the attack ``entry`` configures, and its card: the one fit whose
    card records its settings of ``keys`` (``defaults`` where either leaves one out: instances
    that differ only in spelling a default share one fit)."""
    defaults = defaults or {}
    params = {**defaults, **{key: entry[key] for key in keys if key in entry}}
    found = [card for card in sorted(home.glob(f"fits/{kind}-*/{t}.json"))
             if {**defaults, **json.loads(card.read_text())["settings"]["params"]} == params]
    if len(found) != 1:
        raise SystemExit(f"{home.name}: {len(found)} {kind} fits of target {t} with {params}")
    return dict(np.load(found[0].with_suffix(".npz"))), json.loads(found[0].read_text())


# --- BMIA: the reference model's last-layer Laplace posterior, drawn anew -------------------
#: BMIA's check: redraws of each of its first targets, and how far from them (in standard
#: deviations, t with 19 degrees of freedom: 1e-4 beyond 5 each) a score file may lie
BMIA_FIT_KEYS, REDRAWS, BMIA_TARGETS, WITHIN = ("hessian", "prior"), 20, 3, 5.0
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
                 weights: Callable | None = None, phi: np.ndarray | None = None) -> np.ndarray:
    """:data:`REDRAWS` scores of Algorithm 1, each from ``n_samples`` reference logits of every
    record drawn anew (``mean`` + :func:`bmia_posterior`'s ``noise``, float32 normals: the
    check is statistical; or, with ``weights``, the MC predictive: ``n_samples`` draws of the
    last layer per redraw, shared by every record at features ``phi``): the one-sided t
    statistic of the target's hinge minus the reference hinges."""
    rng, c = np.random.default_rng(seed), mean.shape[1]
    step = max(1, (1 << 22) // (n_samples * c))
    draws = np.empty((REDRAWS, len(mean)))
    for k in range(REDRAWS):
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


def consistent(member: np.ndarray, score: np.ndarray, redraws: np.ndarray,
               shared: bool = False) -> float:
    """How far a score file is from being one more draw of the recheck's ``redraws``, in their
    standard deviations (a t with ``REDRAWS - 1`` degrees of freedom): the largest of the
    distances of its AUC, TPR@1% and the median and interquartile range of its scores (a t
    statistic's scale follows N and the posterior's variance, which a ranking does not show;
    its mean and standard deviation over records follow its heavy tails at small N) from the
    redraws', of how much less it correlates (Spearman) with each redraw than they do with
    each other, and of its ranks among each record's redraws from uniform. A spread is
    floored at what the statistic can resolve: one member for the TPR, one step between the
    scores' values for the median and range (MERLIN's fractions), a relative 1e-6 for the
    rest (redraws that all give one value).

    ``shared``: one random draw serves every record (Stolen Memories' proxies, BMIA's MC
    weights), so records' ranks are not independent and their histogram has no known spread;
    each draw's (the file's included) mean absolute distance from the others' mean, a summary
    per draw like the AUC, takes its place."""
    def distance(theirs: float, ours: np.ndarray, floor: float) -> float:
        spread = max(ours.std(ddof=1), floor, 1e-6 * abs(ours.mean()), 1e-12)
        return abs(theirs - ours.mean()) / (spread * np.sqrt(1 + 1 / len(ours)))

    def tpr(values: np.ndarray) -> float:
        return rates_at(member, values, 0.01)[0]

    def spread(values: np.ndarray) -> float:
        return float(np.subtract(*np.percentile(values, [75, 25])))

    gaps = np.diff(np.unique(redraws))  # MERLIN's fractions: 1 / T, less float rounding
    gaps = gaps[gaps > 1e-9 * np.abs(redraws).max()]
    step = gaps.min() if gaps.size else 0.0
    summaries = ((lambda v: rank_auc(member, v), 0.0), (tpr, 1 / member.sum()),
                 (np.median, step), (spread, step))
    among = np.array([stats.spearmanr(a, b).statistic
                      for i, a in enumerate(redraws) for b in redraws[i + 1:]])
    with_file = np.array([stats.spearmanr(score, r).statistic for r in redraws])
    # record by record, whatever the scores' distribution: the file's rank among each record's
    # K redraws is uniform on 0..K (exchangeable draws; ties broken at random, as MERLIN's
    # fractions tie), so its mean is K / 2, and the share at either end 2 / (K + 1) (fewer:
    # the file's spread is narrower than the redraws')
    k, n, ends = len(redraws), len(score), 2 / (len(redraws) + 1)
    if shared:
        draws = np.vstack([score[None], redraws])
        deviation = np.array([np.abs(d - np.delete(draws, j, 0).mean(0)).mean()
                              for j, d in enumerate(draws)])
        records = [distance(deviation[0], deviation[1:], 0.0)]
    else:
        rank = (redraws < score).sum(axis=0) + np.random.default_rng(SEED).integers(
            0, (redraws == score).sum(axis=0) + 1)
        records = [abs(rank.mean() - k / 2) / np.sqrt(((k + 1) ** 2 - 1) / 12 / n),
                   abs(np.isin(rank, (0, k)).mean() - ends) / np.sqrt(ends * (1 - ends) / n)]
    return max(*(distance(f(score), np.array([f(r) for r in redraws]), floor)
                 for f, floor in summaries),
               max(0.0, among.mean() - with_file.mean()) / max(among.std(ddof=1), 1e-6),
               *records)


def bmia(home: Path, models: Path, split: dict, labels: np.ndarray, entry: dict, t: int,
         audit: np.ndarray, rows: dict) -> np.ndarray:
    """BMIA's scores of target ``t`` drawn :data:`REDRAWS` times afresh: the reference model
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
    hinge = statistics(target, labels, False)["hinge"][:, audit].mean(axis=0)
    phi = features[audit]
    mc = entry.get("predictive", "glm") == "mc"
    return bmia_redraws(hinge, phi @ weight.T + bias, noise(phi), labels[audit],
                        entry.get("n_samples", 100), [SEED, t], weights if mc else None, phi)


# --- Subpop (Rezaei et al.): Eq. 3 against records like each audited one --------------------
MERLIN_FIT_KEYS = ("trials", "noise_samples", "sigma_range", "records")
SUBPOP_FIT_KEYS = ("networks", "generator_widths", "discriminator_widths", "epochs",
                   "gan_epochs", "batch_size", "lr", "cosine_weight", "attempts",
                   "min_class_kept", "latent")
#: a convolutional victim's drawn attacks score this many of each target's audited records
#: (evenly spaced): its crafted records take about 0.7 ms each, 30 per record, 20 redraws
REDRAWN_ON_A_SAMPLE, CONV_RECORDS = ("subpop", "subpop_blackbox", "subpop_inverse",
                                     "merlin"), 500
LEAKY_SLOPE = 0.01  # torch's default negative slope, the models' LeakyReLU


def dense_forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                  activation: str, dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """An MLP's ``(h, output)``: ``h`` the input of its last layer (Subpop's latent), the
    activation between layers (relu, leaky_relu, or a GAN's LeakyReLU of slope 0.2)."""
    slopes = {"relu": 0.0, "leaky_relu": LEAKY_SLOPE, "gan": 0.2}
    layers = [(weight.astype(dtype), bias.astype(dtype)) for weight, bias in layers]
    h = x.reshape(len(x), -1).astype(dtype)
    for weight, bias in layers[:-1]:
        h = h @ weight.T + bias
        h = np.where(h > 0, h, dtype(slopes[activation]) * h)
    return h, h @ layers[-1][0].T + layers[-1][1]


def lenet_forward(layers: list[tuple[np.ndarray, np.ndarray]], x: np.ndarray,
                  dtype: type = np.float64) -> tuple[np.ndarray, np.ndarray]:
    """Classic LeNet-5's ``(h, output)`` (Subpop's convolutional victim): each 4-d weight a
    convolution padded to keep the image's size, then ReLU and a 2x2 max-pool; then dense ReLU
    layers, ``h`` the input of the last. Torch's functional convolutions: numpy has none."""
    import torch
    from torch.nn import functional

    as_torch = {np.float64: torch.float64, np.float32: torch.float32}[dtype]
    weights = [(torch.as_tensor(w, dtype=as_torch), torch.as_tensor(b, dtype=as_torch))
               for w, b in layers]
    h = torch.as_tensor(x, dtype=as_torch)
    with torch.no_grad():
        for weight, bias in (layer for layer in weights if layer[0].ndim == 4):
            h = functional.max_pool2d(functional.relu(functional.conv2d(
                h, weight, bias, padding=weight.shape[-1] // 2)), 2)
        dense = [layer for layer in weights if layer[0].ndim == 2]
        h = h.flatten(1)
        for weight, bias in dense[:-1]:
            h = functional.relu(functional.linear(h, weight, bias))
        return h.numpy(), functional.linear(h, *dense[-1]).numpy()


def conv_generator(layers: list[tuple[np.ndarray, np.ndarray]], z: np.ndarray,
                   shape: list[int]) -> np.ndarray:
    """Subpop's convolutional BiGAN generator (Appendix A.1) on standardised latents, before
    its output function: a dense layer to a grid of cells (its channels are the first
    transposed convolution's inputs), then 2x2 stride-2 transposed convolutions (kernel 2)
    and 3x3 convolutions padded by 1 (kernel 3), LeakyReLU 0.2 after every layer but the last;
    the image cropped from the grid's centre. Float32: the check is statistical."""
    import torch
    from torch.nn import functional

    (first, first_bias), *blocks = [(torch.as_tensor(w, dtype=torch.float32),
                                     torch.as_tensor(b, dtype=torch.float32)) for w, b in layers]
    with torch.no_grad():
        h = functional.leaky_relu(functional.linear(torch.as_tensor(z, dtype=torch.float32),
                                                    first, first_bias), 0.2)
        channels = blocks[0][0].shape[0]
        cells = math.isqrt(h.shape[1] // channels)
        h = h.reshape(len(h), channels, cells, cells)
        for k, (weight, bias) in enumerate(blocks):
            h = (functional.conv_transpose2d(h, weight, bias, stride=2) if weight.shape[-1] == 2
                 else functional.conv2d(h, weight, bias, padding=1))
            h = functional.leaky_relu(h, 0.2) if k < len(blocks) - 1 else h
        top, left = (h.shape[-2] - shape[1]) // 2, (h.shape[-1] - shape[2]) // 2
        return h[..., top:top + shape[1], left:left + shape[2]].numpy()


def layers_of(state: dict, prefix: str = "") -> list[tuple[np.ndarray, np.ndarray]]:
    """The ``(weight, bias)`` of every layer under ``prefix`` (dense or convolutional), in the
    order saved, float64."""
    names = [k[:-len(".weight")] for k in state if k.startswith(prefix) and k.endswith(".weight")]
    return [(np.asarray(state[f"{n}.weight"], np.float64), np.asarray(state[f"{n}.bias"],
                                                                      np.float64))
            for n in names]


def victim(card: dict, state: dict) -> Callable[..., tuple[np.ndarray, np.ndarray]]:
    """The target rebuilt from its weights, ``(x, dtype) -> (h, logits)``: an MLP or LeNet."""
    layers, arch = layers_of(state), card["architecture"]
    if arch["arch"] == "mlp":
        activation = arch.get("activation", "relu")
        return lambda x, dtype=np.float64: dense_forward(layers, x, activation, dtype)
    if arch["arch"] == "lenet" and arch.get("variant", "classic") == "classic":
        return lambda x, dtype=np.float64: lenet_forward(layers, x, dtype)
    raise NotRechecked(f"a {arch} victim")


def saved_logits(home: Path, t: int, rebuilt: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Target ``t``'s first query's saved logits (float64), once ``rebuilt``, the logits of
    the target rebuilt here on ``rows``, are checked against them."""
    saved = np.load(home / "models" / "target" / f"{t}.npy")[0].astype(np.float64)
    if not np.allclose(rebuilt, saved[rows], rtol=1e-4, atol=1e-4 * np.abs(saved).max()):
        raise SystemExit(f"{home.name} target {t}: the rebuilt target's logits differ from "
                         "those it saved")
    return saved


def generator(fit: dict) -> Callable[[np.ndarray], np.ndarray]:
    """The white-box BiGAN's generator rebuilt from the fit, latents to records (float32):
    its standardisation, dense (LeakyReLU 0.2) or convolutional body, sigmoid output for data
    in [0, 1]."""
    spec = json.loads(str(fit["spec"]))
    body = layers_of(fit, "generator.body.")
    centre, scale = fit["generator.standardise.mean"], fit["generator.standardise.scale"]

    def decode(latents: np.ndarray) -> np.ndarray:
        z = (latents - centre) / scale
        pixels = (dense_forward(body, z, "gan", np.float32)[1] if spec["networks"] == "mlp"
                  else conv_generator(body, z, spec["shape"]))
        pixels = pixels.reshape(len(z), *spec["shape"])
        return special.expit(pixels) if spec["sigmoid"] else pixels

    return decode


def encoder(fit: dict) -> Callable[[np.ndarray], np.ndarray]:
    """The black-box BiGAN's own encoder rebuilt from the fit, records to latents: dense
    layers of LeakyReLU 0.2 (a convolutional one is not rechecked)."""
    if json.loads(str(fit["spec"]))["networks"] != "mlp":
        raise NotRechecked("a convolutional BiGAN encoder")
    layers = layers_of(fit, "encoder.")
    return lambda x: dense_forward(layers, x, "gan")[1]


def cross_entropy(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    return special.logsumexp(logits, -1) - np.take_along_axis(logits, labels[..., None], -1)[
        ..., 0]


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
    import torch

    card = json.loads((home / "models" / "target" / f"{t}.json").read_text())
    state = torch.load(home / "models" / "target" / f"{t}.pt", weights_only=True)
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


# --- Stolen Memories' bayes-wb at the top layer: its proxies trained anew ----------------------
SM_FIT_KEYS = ("layers", "proxies", "shadows", "steps", "displacement_widths", "meta_widths",
               "epochs", "lr", "shadow_records")


def train_proxies(features: np.ndarray, labels: np.ndarray, subsets: np.ndarray, recipe: dict,
                  sizes: list[int], seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``K = len(subsets)`` ReLU networks of layer ``sizes`` (inputs first, classes last; two
    sizes: softmax regression), each trained on its own rows of ``features`` by the recipe's
    SGD (torch's default initialisation of a linear layer; each epoch its own shuffle, the
    last batch short; mean cross-entropy, the learning rate times ``gamma`` at each
    milestone): per layer, ``(K, out, in)`` weights and ``(K, out)`` biases."""
    import torch

    recipe = {**RECIPE, **recipe}
    torch.manual_seed(seed)
    x, y = torch.as_tensor(features, dtype=torch.float32), torch.as_tensor(labels)
    k, n = subsets.shape
    layers = []
    for inputs, outputs in itertools.pairwise(sizes):
        bound = 1 / math.sqrt(inputs)
        layers += [torch.empty(k, outputs, inputs).uniform_(-bound, bound).requires_grad_(),
                   torch.empty(k, outputs).uniform_(-bound, bound).requires_grad_()]
    sgd = torch.optim.SGD(layers, lr=recipe["lr"], momentum=recipe["momentum"],
                          nesterov=recipe["nesterov"], weight_decay=recipe["weight_decay"])
    epochs = int(recipe["epochs"])
    schedule = torch.optim.lr_scheduler.MultiStepLR(
        sgd, sorted({round(f * epochs) for f in recipe["milestones"]}), recipe["gamma"])
    rows = torch.as_tensor(subsets)
    for _ in range(epochs):
        order = torch.gather(rows, 1, torch.rand(k, n).argsort(1))
        for batch in order.split(int(recipe["batch_size"]), dim=1):
            h = x[batch]
            for i in range(0, len(layers), 2):
                h = torch.baddbmm(layers[i + 1][:, None, :], h, layers[i].transpose(1, 2))
                h = torch.relu(h) if i < len(layers) - 2 else h
            loss = torch.nn.functional.cross_entropy(
                h.transpose(1, 2), y[batch], reduction="none").mean(1).sum()
            sgd.zero_grad()
            loss.backward()
            sgd.step()
        schedule.step()
    return [(layers[i].detach().double().numpy(), layers[i + 1].detach().double().numpy())
            for i in range(0, len(layers), 2)]


def bayes_wb(home: Path, data: dict, split: dict, study: dict, entry: dict, t: int,
             audit: np.ndarray) -> np.ndarray:
    """bayes-wb's scores of target ``t`` at its layer ``l``, :data:`REDRAWS` times. By the
    efficiency of internal influence (Eq. 8: ``chi(z)^T z = g(z) - g(0)``), Algorithm 4's local
    linear test ``(chi - mean chi_proxy)^T z + g(0) - mean g_proxy(0)`` is the target's logit of
    the record's class minus the mean of its proxies' at the target's features ``z = h(x)``
    below layer ``l``: exactly at the top layer, to the integral's midpoint rule below it.
    Each redraw trains as many proxies of the layers from ``l`` up as the fit (its card), on
    as many random hold-out records as the target's training set (:func:`train_proxies`, the
    study's recipe)."""
    import torch

    card = json.loads((home / "models" / "target" / f"{t}.json").read_text())
    state = torch.load(home / "models" / "target" / f"{t}.pt", weights_only=True)
    layers, arch = layers_of(state), card["architecture"]
    if (entry.get("meta") or "dp" in study["training"] or arch["arch"] != "mlp"
            or arch.get("activation", "relu") != "relu" or arch.get("dropout")):
        raise NotRechecked("bayes-wb's meta model, under DP-SGD, or a target other than a "
                           "ReLU MLP without dropout")
    x, y = data["X"], data["y"]
    logits = victim(card, state)(x)[1]
    saved_logits(home, t, logits, np.arange(len(x)))
    cut = entry.get("layer", -1) % len(layers)
    z = x.reshape(len(x), -1).astype(np.float64)
    for weight, bias in layers[:cut]:
        z = np.maximum(z @ weight.T + bias, 0.0)
    info = fit_of(home, "stolen_memories", SM_FIT_KEYS, entry, t)[1]["info"]
    proxies, size = int(info["proxies"]), int(info["proxy_size"])
    hold_out = partition(split, t)["reference_pool"]
    rng = np.random.default_rng([SEED, t, 0x5A])
    subsets = np.stack([rng.choice(hold_out, size, replace=False)
                        for _ in range(REDRAWS * proxies)])
    sizes = [z.shape[1]] + [len(bias) for _, bias in layers[cut:]]
    trained = train_proxies(z, y, subsets, study["training"], sizes, int(rng.integers(2**31)))
    h = np.broadcast_to(z[audit], (len(subsets), *z[audit].shape))
    for k, (weight, bias) in enumerate(trained):
        h = np.einsum("kod,knd->kno", weight, h) + bias[:, None, :]
        h = np.maximum(h, 0.0) if k < len(trained) - 1 else h
    proxy = h[:, np.arange(len(audit)), y[audit]]
    return logits[audit, y[audit]] - proxy.reshape(REDRAWS, proxies, len(audit)).mean(1)


# --- one (study, attack) --------------------------------------------------------------------
def recheck(run: Path, config: dict, study: str, name: str, f32: bool,
            curvatures: dict) -> dict:
    """One attack instance of one study, every target: ``curvatures`` keeps each IHA target's
    Hessian for the study's other IHA instances. A study whose models are another's
    (``models_from``) reads that one's split, models, fits and settings, its own scores."""
    base = re.sub(r"-r\d+$", "", study)  # a replicate's attacks are its study's
    entry = config["studies"][base]["attacks"][name]
    source = config["studies"][base].get("models_from", base)
    spec = config["studies"][source]
    scores = run / "results" / "studies" / study / "scores" / f"{name}.parquet"
    home = run / "results" / "studies" / (source + study[len(base):])
    models = home / "models"
    if "reference_study" in entry:  # the same replicate of the other study
        models = home.parent / (entry["reference_study"] + study[len(base):]) / "models"
    data = np.load(run / f"results/datasets/{spec['dataset']}.npz")
    labels = data["y"]
    split = dict(np.load(home / "split.npz"))
    kind, k = entry["attack"], entry.get("n_reference", 0)
    cache: dict = {}

    def stat(where: Path, index: int, key: str, idx: np.ndarray) -> np.ndarray:
        if (where, index) not in cache:
            cache[where, index] = statistics(np.load(where / f"{index}.npy"), labels, f32)
        return cache[where, index][key][:, idx]

    def inputs(key: str, idx: np.ndarray, t: int, refs: list[int], masks: np.ndarray) -> tuple:
        return (stat(home / "models" / "target", t, key, idx),
                np.stack([stat(models / "reference", i, key, idx) for i in refs]), masks[:, idx])

    rows = {key: [] for key in ("abs", "rel", "tol", "rho", "ours", "theirs", "step", "agree",
                                "z", "delta")}
    for t, theirs in pd.read_parquet(scores).groupby("target"):
        if kind == "bmia" and t >= BMIA_TARGETS:
            continue
        part, t = partition(split, int(t)), int(t)
        if kind in REDRAWN_ON_A_SAMPLE and spec["model"]["arch"] != "mlp":
            theirs = theirs.iloc[np.linspace(0, len(theirs) - 1, CONV_RECORDS).astype(int)]
        audit = audited(part, config["studies"][base].get("nonmembers", "test"))
        member = checked_mask(split, home / "models", "target", t)
        kept = np.searchsorted(audit, theirs["sample"])  # a subset where `records` is set
        if not (np.array_equal(audit[np.minimum(kept, len(audit) - 1)], theirs["sample"])
                and np.array_equal(theirs["member"], member[audit][kept])):
            raise SystemExit(f"{study}/{name} target {t}: audit or membership differs")
        refs = [(t * STRIDE if str(split["scheme"]) == "partition" else 0) + i for i in range(k)]
        masks = np.array([checked_mask(split, models, "reference", i) for i in refs],
                         dtype=bool).reshape(k, len(labels))
        on = {"t": t, "refs": refs, "masks": masks}
        if kind == "marginal":
            ours = stat(home / "models" / "target", t, entry["statistic"], audit).mean(axis=0)
        elif kind == "lira":
            ours = lira(*inputs(entry["statistic"], audit, **on), entry.get("mode", "online"),
                        entry.get("variance", "per_example"))
        elif kind in ("watson", "sablayrolles"):
            ours = calibrated(*inputs(entry.get("statistic", "loss"), audit, **on), kind)
        elif kind == "attack_r" and entry.get("statistic", "loss") == "loss":
            ours = attack_r(*inputs("loss", audit, **on))
        elif kind == "rmia":
            a, online = entry.get("a", 0.3), entry.get("mode", "offline") == "online"
            x = rmia_ratio(*inputs("loss", audit, **on), a, online)
            z = rmia_ratio(*inputs("loss", part["population"], **on), a, online)
            step, ours = continuous_step(z, x - np.log(entry.get("gamma", 1.0)))
            step = step[kept]
            rows["agree"].append(np.mean(np.floor(theirs["score"] * (len(z) + 1)) == step))
            rows["step"].append(rank_auc(member[audit[kept]], step / len(z)))
        elif kind in ("iha", "sif"):
            if (study, t) not in curvatures:
                curvatures[study, t] = target_curvature(home, split, data, t)
            known = (known_records(member, audit, entry["fraction"], [int(split["seed"]), t])
                     if "fraction" in entry else None)
            ours = iha(curvatures[study, t], member[audit], entry, known)
        elif kind == "naive":  # member iff the target's first query predicts the label
            ours = (np.load(home / "models" / "target" / f"{t}.npy")[0, audit].argmax(-1)
                    == labels[audit]).astype(np.float64)
        elif kind == "omniscient":
            dataset = run / "results" / "datasets" / spec["dataset"]
            ours = omniscient(data["X"], labels, np.flatnonzero(member), audit,
                              json.loads(dataset.with_suffix(".json").read_text())["meta"])
        elif kind == "yeom":
            ours = yeom(stat(home / "models" / "target", t, "loss", np.arange(len(labels))),
                        member, audit)
        elif kind == "qmia":
            fit, _ = fit_of(home, "qmia", QMIA_FIT_KEYS, entry, t)  # (s - mu(x)) / sigma(x)
            hinge = stat(home / "models" / "target", t, "hinge", audit)[0]
            ours = ((hinge - fit["mu"][audit]) / fit["sigma"][audit]
                    if entry.get("head", "gaussian") == "gaussian"
                    else exceedance(hinge, fit["quantiles"][audit]))
        elif kind in ("subpop", "subpop_blackbox", "subpop_inverse", "subpop_natural",
                      "merlin") and entry.get(
                "pool", "population") == "population":
            drawn = subpop(home, data, split, entry, t, audit[kept])  # (draws, records)
            ours = np.full((len(drawn), len(audit)), np.nan)
            ours[:, kept] = drawn
        elif kind in ("l_attack", "lira_l"):  # OUT: each record's own leave-one-out models
            records, key = loo_records(split, entry["loo_records"]), entry.get("statistic", "loss")
            if not np.array_equal(np.sort(records), np.sort(theirs["sample"])):
                raise SystemExit(f"{study}/{name}: its records are not the leave-one-out ones")
            models_of = list(itertools.product(range(entry["loo_models"]), range(len(records))))
            for j, k in models_of:  # each model's training set against its card
                checked_mask(split, home / "models", "loo", j * STRIDE + k)
            loo = np.array([stat(home / "models" / "loo", j * STRIDE + k, key, records[[k]])[:, 0]
                            for j, k in models_of]).reshape(
                entry["loo_models"], len(records), -1).transpose(0, 2, 1)  # (J, queries, R)
            inside = np.zeros(loo.shape[::2], dtype=bool)  # (models, records): all OUT
            target = stat(home / "models" / "target", t, key, records)
            drawn = (attack_r(target, loo, inside) if kind == "l_attack"
                     else lira(target, loo, inside, "offline", entry.get("variance",
                                                                         "per_example")))
            ours = np.full(len(audit), np.nan)
            ours[np.searchsorted(audit, records)] = drawn
        elif kind == "shadow":
            ours = shadow(np.load(home / "models" / "target" / f"{t}.npy"),
                          np.stack([np.load(models / "reference" / f"{i}.npy") for i in refs]),
                          masks, labels, part["reference_pool"], audit,
                          [int(split["seed"]), t], entry, f32)
        elif kind == "bayes_wb":
            ours = bayes_wb(home, data, split, spec, entry, t, audit)
        elif kind == "bmia":
            ours = bmia(home, models, split, labels, entry, t, audit, rows)
        else:
            raise NotRechecked(f"{kind} with " + ", ".join(
                f"{key}={value}" for key, value in entry.items()
                if key not in ("attack", "label", "paper_attack", "paper_setting")))
        if ours.ndim == 2:  # redrawn: the file must be one more draw where there are several
            if len(ours) > 1:  # shared: one draw serves every record (proxies, MC weights)
                shared = kind == "bayes_wb" or entry.get("predictive") == "mc"
                rows["z"].append(consistent(member[audit[kept]], theirs["score"].to_numpy(),
                                            ours[:, kept], shared))
            ours = ours[0]
        ours, audit = ours[kept], audit[kept]
        diff = np.abs(ours - (score := theirs["score"].to_numpy()))
        rows["abs"].append(diff.max())
        rows["rel"].append((diff / np.maximum(np.abs(score), 1e-300)).max())
        rows["tol"].append((diff / np.maximum(np.abs(score), score.std())).max() / TOLERANCE)
        rows["rho"].append(stats.spearmanr(ours, score).statistic)
        rows["ours"].append(rank_auc(member[audit], ours))
        rows["theirs"].append(rank_auc(member[audit], score))
    close = min(rows["rho"]) > 0.9999 and np.ptp([rows["ours"], rows["theirs"]], 0).max() < 1e-3
    mean = {key: np.mean(values) if values else np.nan for key, values in rows.items()}
    verdict = "MATCH" if max(rows["tol"]) <= 1 else "CLOSE" if close else "MISMATCH"
    if rows["z"]:  # drawn at random: the file must be one more draw of the recheck's
        verdict = "CONSISTENT" if max(rows["z"]) <= WITHIN else "INCONSISTENT"
    return {"study": study, "attack": name, "targets": len(rows["abs"]),
            "max_abs": max(rows["abs"]), "max_rel": max(rows["rel"]),
            "min_spearman": min(rows["rho"]), **{f"auc_{key}": mean[key] for key in
                                                 ("ours", "theirs", "step")},
            "step_agrees": mean["agree"], "max_z": max(rows["z"], default=np.nan),
            "delta_rel": max(rows["delta"], default=np.nan), "verdict": verdict}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml",
                        help="the run's config (default: the repository's)")
    parser.add_argument("--float32", action="store_true",
                        help="the statistics' exponentials in float32, as the package's")
    parser.add_argument("--all", action="store_true",
                        help="every attack instance of the run, each study and replicate; one "
                             "this script cannot recompute, or whose check fails, is a row")
    parser.add_argument("pairs", nargs="*", help="STUDY:ATTACK (default: a list of "
                                                 f"{len(DEFAULT)} covering every family)")
    args = parser.parse_args()
    if args.all and args.pairs:
        parser.error("give STUDY:ATTACK pairs or --all, not both")
    config = yaml.safe_load(args.config.read_text())
    pairs = every_pair(args.run, config) if args.all else args.pairs or DEFAULT
    curvatures: dict = {}
    rows, skipped = [], []
    for number, pair in enumerate(pairs, 1):
        study, attack = pair.split(":")
        start = time.perf_counter()
        try:
            rows.append(recheck(args.run, config, study, attack, args.float32, curvatures))
            verdict = rows[-1]["verdict"]
        except NotRechecked as reason:
            skipped.append(f"{pair}: {reason}")
            verdict = "not rechecked"
        except (SystemExit, Exception) as failure:  # one row each in a run over everything
            if not args.all:
                raise
            kind = "FAILED" if isinstance(failure, SystemExit) else type(failure).__name__
            rows.append({"study": study, "attack": attack, "verdict": f"{kind}: {failure}"})
            verdict = rows[-1]["verdict"]
        curvatures = {key: c for key, c in curvatures.items() if key[0] == study}
        print(f"[{number}/{len(pairs)}] {pair}: {verdict} ({time.perf_counter() - start:.0f} s)",
              file=sys.stderr, flush=True)
    table = pd.DataFrame(rows, columns=None if rows else ["study", "attack", "verdict"])
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\nAUCs: means over targets. RMIA: auc_step, the published step score d / |Z|; "
          "step_agrees, the share of rows with d = floor(score (|Z| + 1)).")
    if skipped:
        print(f"\nNot rechecked ({len(skipped)} of {len(pairs)}):", *skipped, sep="\n- ")
    return int(~table["verdict"].isin(["MATCH", "CLOSE", "CONSISTENT"]).all())


def every_pair(run: Path, config: dict) -> list[str]:
    """``STUDY:ATTACK`` for every score file of the run that the config names."""
    pairs = []
    for home in sorted((run / "results" / "studies").iterdir()):
        base = re.sub(r"-r\d+$", "", home.name)
        pairs += [f"{home.name}:{attack}" for attack in config["studies"].get(base, {}).get(
            "attacks", {}) if (home / "scores" / f"{attack}.parquet").exists()]
    return pairs


if __name__ == "__main__":
    sys.exit(main())
