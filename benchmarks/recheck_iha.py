"""Suri et al.'s IHA (Eq. 8) and SIF from an exact Hessian of the target's training loss,
formed from its saved weights with ``torch.func`` and eigendecomposed in float64 (a few seconds
for IHA's 4,780-parameter MNIST MLP): leave-one-out ``grad L0`` as their Appendix E, or from a
known fraction of the training set as their Table 9 (:func:`known_records`), damped or
low-rank inverse, any subset of its terms. IHA's fit keeps the audited gradients' eigenbasis
coordinates in float32, which moves its scores by about 1e-8 of their spread.

A target of more than :data:`MAX_PARAMETERS` parameters (IHA's CG instances on Purchase's
MLP-2 and MLP-4, 22,532 and 24,644: an exact Hessian would take about an hour each here) is
solved on its scored records only, by Hessian-vector products in float64 (:class:`Products`)
on a block Krylov space grown until every relative residual is below 1e-8
(:func:`krylov_solve`; about 40 s for 100 records of a Purchase MLP-2 on 2 cores). The
package's CG stops at 1e-4, so those instances are CLOSE (ranks and AUC), not MATCH.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from recheck_inputs import NotRechecked, checked_mask, partition, recipe_of
from recheck_networks import saved_target

MAX_PARAMETERS = 10_000  # an exact Hessian's eigendecomposition: seconds at 4,780
KRYLOV_TOLERANCE = 1e-8  # IHA's CG instances solve to 1e-4


class TooLarge(NotRechecked):
    """A target whose exact Hessian would take too long here: :class:`Products` instead."""


# --- IHA (Suri et al.): an exact Hessian of the target's training loss -----------------------
@dataclass
class Gradients:
    """What Eq. 8 reads besides the inverse Hessian: the full-data gradient and each scored
    record's gradient (in the solver's coordinates), their losses, the training-set size and
    the target's recipe."""
    gradient: np.ndarray
    coordinates: np.ndarray
    losses: np.ndarray
    n_train: int
    recipe: dict


@dataclass
class Curvature(Gradients):
    """The target's Hessian eigenvalues (float64), with gradients in its eigenbasis (every
    audited record's)."""
    eigenvalues: np.ndarray

    def solve(self, rows: np.ndarray, eps: float, low_rank: bool) -> np.ndarray:
        """``H^-1`` of each row, damped (``1 / (s + eps)``) or low-rank (``1 / s`` where ``s >
        eps``): in the eigenbasis, a re-weighting."""
        s = self.eigenvalues
        with np.errstate(divide="ignore"):
            return rows * (np.where(s > eps, 1 / s, 0.0) if low_rank else 1 / (s + eps))


@dataclass
class Products(Gradients):
    """IHA's inputs where the Hessian is too large to form (its CG instances on Purchase's
    MLPs, 22,532 to 24,644 parameters): ``apply``, Hessian-vector products of the mean training
    loss in float64, with gradients in plain coordinates (the scored records' only)."""
    apply: Callable[[np.ndarray], np.ndarray]

    def solve(self, rows: np.ndarray, eps: float, low_rank: bool) -> np.ndarray:
        if low_rank:
            raise NotRechecked("low-rank conditioning needs the Hessian's eigendecomposition")
        return krylov_solve(self.apply, rows, eps)


def krylov_solve(apply: Callable[[np.ndarray], np.ndarray], rows: np.ndarray, eps: float,
                 tolerance: float = KRYLOV_TOLERANCE, blocks: int = 60) -> np.ndarray:
    """``(H + eps I) x = b`` for each row ``b``, to a relative residual of ``tolerance``: the
    Galerkin solution on the block Krylov space ``span(B, A B, A^2 B, ...)``, grown a block at
    a time (each new block the residuals, orthogonalised against the space by two passes of
    Gram-Schmidt and an SVD that drops directions already in it) and solved in it exactly by
    an eigendecomposition of the projected ``A``, which need not be positive definite (the
    package's CG then stops short, and its scores are not Eq. 8's: the check says so). The
    residual ``B - A X`` comes from the products already made. Far tighter than the package's
    CG tolerance (1e-4), so the difference left is the package's."""
    rows = np.asarray(rows, dtype=np.float64)
    norms = np.maximum(np.linalg.norm(rows, axis=1), 1e-300)
    basis = np.zeros((0, rows.shape[1]))
    applied = np.zeros((0, rows.shape[1]))
    residual = rows
    for _ in range(blocks):
        for _ in range(2):
            residual = residual - (residual @ basis.T) @ basis
        _, sigma, vt = np.linalg.svd(residual, full_matrices=False)
        block = vt[sigma > 1e-10 * sigma.max()]
        basis = np.vstack([basis, block])
        applied = np.vstack([applied, apply(block) + eps * block])
        projected = basis @ applied.T
        values, vectors = np.linalg.eigh((projected + projected.T) / 2)
        if np.abs(values).min() <= 1e-12 * np.abs(values).max():
            raise NotRechecked(f"the damped Hessian is singular on its Krylov space (eps {eps})")
        coefficients = vectors @ ((vectors.T @ (basis @ rows.T)) / values[:, None])
        residual = rows - coefficients.T @ applied
        if (np.linalg.norm(residual, axis=1) / norms).max() <= tolerance:
            return coefficients.T @ basis
    raise NotRechecked(f"no Krylov solution to {tolerance:g} in {len(basis)} directions")


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
        raise TooLarge(f"{len(theta):,} parameters: too many for an exact Hessian here")
    X, y = torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y)
    full = grad(lambda w: loss(w, X[train], y[train]).mean())
    basis = torch.eye(len(theta), dtype=torch.float64)
    hessian = torch.cat([vmap(lambda v: jvp(full, (theta,), (v,))[1])(basis[i:i + 256])
                         for i in range(0, len(theta), 256)]).numpy()
    eigenvalues, vectors = np.linalg.eigh((hessian + hessian.T) / 2)
    gradients, losses = record_gradients(theta, loss, X, y, audit)
    return Curvature(vectors.T @ full(theta).numpy(), gradients @ vectors, losses, len(train),
                     recipe_of(card), eigenvalues=eigenvalues)


def record_gradients(theta, loss: Callable, X, y, rows: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Each record's loss gradient (by ``vmap``, 512 records at a time) and its loss."""
    from torch.func import grad, vmap

    one = vmap(grad(lambda w, x, y: loss(w, x[None], y[None])[0]), in_dims=(None, 0, 0))
    gradients = np.concatenate([one(theta, X[rows[i:i + 512]], y[rows[i:i + 512]]).numpy()
                                for i in range(0, len(rows), 512)])
    return gradients, loss(theta, X[rows], y[rows]).detach().numpy()


def target_curvature(home: Path, split: dict, data: dict, t: int) -> Curvature:
    """:func:`curvature` of a run's target ``t`` over its whole audit."""
    state, card, train = target_model(home, split, t)
    return curvature(state, card, data["X"], data["y"], train, partition(split, t)["audit"])


def products(state: dict, card: dict, X: np.ndarray, y: np.ndarray, train: np.ndarray,
             records: np.ndarray) -> Products:
    """:class:`Products` for ``records``: the Hessian's products as the pullback of the
    training loss's gradient (the Hessian is symmetric), formed once and applied to blocks of
    vectors; gradients per record by ``vmap``."""
    import torch
    from torch.func import grad, vjp, vmap

    theta, loss = per_record_loss(state, card)
    X, y = torch.as_tensor(X, dtype=torch.float64), torch.as_tensor(y)
    full, pullback = vjp(grad(lambda w: loss(w, X[train], y[train]).mean()), theta)

    def apply(rows: np.ndarray) -> np.ndarray:
        vectors = torch.as_tensor(rows, dtype=torch.float64)
        with torch.no_grad():
            return torch.cat([vmap(pullback)(vectors[i:i + 32])[0]
                              for i in range(0, len(vectors), 32)]).numpy()

    return Products(full.detach().numpy(), *record_gradients(theta, loss, X, y, records),
                    len(train), recipe_of(card), apply=apply)


def target_model(home: Path, split: dict, t: int) -> tuple[dict, dict, np.ndarray]:
    """A run's target ``t``: its weights, its card, and its training set checked against it."""
    card, state = saved_target(home, t)
    return state, card, np.flatnonzero(checked_mask(split, home / "models", "target", t))


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


def iha(c: Curvature | Products, member: np.ndarray, entry: dict,
        known: np.ndarray | None = None) -> np.ndarray:
    """Eq. 8: ``l / (1 + mu) - (I1 + I2 + I3 + I4) / lr`` over the chosen terms, ``v = H^-1 g``
    by the damped (``1 / (s + eps)``) or low-rank (``1 / s`` where ``s > eps``) inverse; a
    member's ``grad L0`` lacks its own gradient (App. E) unless ``leave_one_out`` is false.
    ``known`` (Table 9's ``fraction``): the audited records whose gradients the attacker
    knows, a ``fraction`` of the training set, whose sum over ``fraction n`` stands in for the
    full-data gradient. SIF: ``-g^T (H + eps I)^-1 g``."""
    eps, low_rank = entry.get("eps", 0.2), entry.get("conditioning", "damping") == "low_rank"
    if known is None:
        rest, knows, size = c.gradient, member, c.n_train
    else:
        size = entry["fraction"] * c.n_train
        rest, knows = c.coordinates[known].sum(axis=0) / size, known
    v1, rest_solved = np.split(c.solve(np.vstack([c.coordinates, rest]), eps, low_rank),
                               [len(c.coordinates)])  # one solve of every right-hand side
    if entry["attack"] == "sif":
        return -(c.coordinates * v1).sum(axis=1)
    lr, mu, alpha = (c.recipe[k] for k in ("lr", "momentum", "weight_decay"))
    knows = knows * entry.get("leave_one_out", True)
    v0 = rest_solved - knows[:, None] * v1 / size  # H^-1 is linear: v0 = H^-1 grad L0
    c1, c2 = 1 - lr * alpha / (1 + mu), 2 - lr * alpha / (1 + mu)
    chosen = entry.get("terms", ["loss", "I1", "I2", "I3", "I4"])
    v11 = c.solve(v1, eps, low_rank) if {"I3", "I4"} & set(chosen) else None
    terms = {"loss": lambda: c.losses / (1 + mu),
             "I1": lambda: -c1 / c.n_train * (v1 * v1).sum(axis=1) / lr,
             "I2": lambda: -2 * c1 * (v0 * v1).sum(axis=1) / lr,
             "I3": lambda: -alpha * c2 / (2 * c.n_train) * (v1 * v11).sum(axis=1) / lr,
             "I4": lambda: -alpha * c2 * (v0 * v11).sum(axis=1) / lr}
    return sum(terms[name]() for name in chosen)
