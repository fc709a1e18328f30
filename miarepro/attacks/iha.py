"""IHA of Suri et al., "Do Parameters Reveal More than Loss for Membership Inference?", and the
SIF baseline (self-influence, Cohen and Giryes 2024).

IHA scores a record ``z1`` by Eq. 8, with the target's own SGD recipe (learning rate ``lr``,
momentum ``mu``, weight decay ``alpha``) and ``n`` = its training-set size::

    c1 = 1 - lr*alpha/(1+mu),   c2 = 2 - lr*alpha/(1+mu)
    v1 = H^-1 grad l(w, z1),    v0 = H^-1 grad L0(w),    v11 = H^-1 v1
    I1 = c1/n |v1|^2            I2 = 2 c1 v0.v1
    I3 = alpha c2/(2n) v1.v11   I4 = alpha c2 v0.v11
    IHA(z1) = l(w, z1)/(1+mu) - (I1 + I2 + I3 + I4)/lr          (higher = member)

``H`` is the Hessian of the unregularised training loss at the trained weights and
``L0 = L1 - l(w, z1)/n`` the training loss without ``z1``: the attacker knows ``D \\ {z1}``
(IHA's leave-one-out threat model), so for a member ``grad L0 = grad L1 - g1/n`` and for a
non-member ``grad L0 = grad L1``. Since ``v0`` is linear in that, one solve of the full-data
gradient serves every record.

The fit (``fit_hessian``, one per target) holds what does not depend on the scored records:
the full-data gradient and, for ``solver="exact"``, the eigendecomposition of ``H``. Scoring
then re-weights eigenvalues (``conditioning``, ``eps``), so the damping sweep, the low-rank
variant, the term ablation and the gradient fraction rerun scoring only. ``solver="cg"``
forms no Hessian: conjugate gradients on Hessian-vector products, ``(H + eps I) x = b``.

Choices where the paper is silent (matrix §4.8), each also listed in a study's deviations:

- a subset of terms keeps every term's Eq. 8 sign and coefficient: ``terms=[I1, I2]`` scores
  ``-(I1 + I2)/lr``, ``[loss, I1]`` scores ``l/(1+mu) - I1/lr``;
- ``fraction < 1`` (Table 9) estimates ``grad L0`` from a seeded random ``fraction`` of the
  training set (one subset per target), rescaled by ``1/(fraction n)`` so that it estimates the
  same mean gradient; ``z1``'s own gradient is removed when it is in the subset;
- SIF scores ``-g^T (H + eps I)^-1 g``: a record the model has not fitted has a larger
  gradient, hence larger self-influence, so lower self-influence means member (the paper uses
  the raw value as its score and does not state the direction).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Annotated, Any, Literal

import numpy as np

from miarepro.attacks.base import AttackContext, StudyHandle, register
from miarepro.options import Range

log = logging.getLogger(__name__)

Term = Literal["loss", "I1", "I2", "I3", "I4"]
ALL_TERMS: tuple[str, ...] = ("loss", "I1", "I2", "I3", "I4")
Positive = Annotated[float, Range(0, low_open=True)]
_ROWS = 512  # audited records whose gradients are held at once


def fit_hessian(study: StudyHandle, group: int, solver: Literal["exact", "cg"] = "exact",
                chunk_size: Annotated[int, Range(1)] = 256
                ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Full-data gradient of target ``group`` and, for the exact solver, its Hessian's
    eigendecomposition (``chunk_size`` Hessian columns computed at a time) and the gradients
    of the audited records in its eigenbasis: projecting them is the ``N x P^2`` step of
    scoring, the same for every damping, term subset or fraction, so it is done once here."""
    from miarepro import hessian

    flat, train, _ = _target_loss(study, group)
    X, y = study.features()[train], study.labels()[train]
    start = time.perf_counter()
    arrays = {"gradient": hessian.mean_gradient(flat, X, y).cpu().numpy()}
    info: dict[str, Any] = {"solver": solver, "n_train": len(y), "n_parameters": flat.size,
                            "loss": flat.loss_name}
    if solver == "exact":
        matrix = hessian.hessian(flat, X, y, chunk_size, progress=_log_progress)
        info["hessian_seconds"] = round(time.perf_counter() - start, 3)
        start = time.perf_counter()
        spectrum = hessian.Spectrum.of(matrix)
        del matrix
        info["eigh_seconds"] = round(time.perf_counter() - start, 3)
        values = spectrum.values.cpu().numpy()
        arrays.update(eigenvalues=values, eigenvectors=spectrum.vectors.cpu().numpy())
        info.update(min_eigenvalue=float(values[0]), max_eigenvalue=float(values[-1]),
                    negative_eigenvalues=int((values < 0).sum()))
        start = time.perf_counter()
        audit = study.parts(group)["audit"]
        coordinates = np.empty((len(audit), flat.size), dtype=np.float32)
        losses = np.empty(len(audit))
        for rows, gradients, loss in _gradients(flat, study.features(), study.labels(), audit):
            coordinates[rows] = spectrum.project(gradients).cpu().numpy()
            losses[rows] = loss.cpu().numpy()
        arrays.update(audit=audit, audit_coordinates=coordinates, audit_losses=losses)
        info["projection_seconds"] = round(time.perf_counter() - start, 3)
    return arrays, info


def _gradients(flat: Any, X: np.ndarray, y: np.ndarray, records: np.ndarray
               ) -> Iterator[tuple[slice, Any, Any]]:
    """Per-sample gradients and losses of ``records``, ``_ROWS`` at a time."""
    from miarepro import hessian

    for start in range(0, len(records), _ROWS):
        rows = records[start : start + _ROWS]
        yield slice(start, start + len(rows)), *hessian.per_sample_gradients(flat, X[rows],
                                                                             y[rows])


def _log_progress(done: int, total: int) -> None:
    log.info("Hessian columns %d/%d", done, total)


class _Solver:
    """Conditioned inverse-Hessian products of one target: exact (eigenbasis) or CG."""

    def __init__(self, ctx: AttackContext, flat: Any, train: np.ndarray, eps: float,
                 conditioning: str, cg_iterations: int, cg_tolerance: float) -> None:
        import torch

        from miarepro import hessian

        if ctx.fit is None:
            raise ValueError("IHA and SIF need their fit (the target's Hessian and gradient)")
        self.exact = "eigenvectors" in ctx.fit
        if self.exact:
            on = flat.theta.device
            self.spectrum = hessian.Spectrum(torch.as_tensor(ctx.fit["eigenvalues"], device=on),
                                             torch.as_tensor(ctx.fit["eigenvectors"], device=on))
            self.weights = self.spectrum.inverse_weights(eps, conditioning)
        elif conditioning != "damping":
            raise ValueError("the conjugate-gradient solver only damps (conditioning: damping)")
        else:
            self.products = hessian.hvp_function(flat, ctx.study.features()[train],
                                                 ctx.labels[train])
            self.eps, self.iterations, self.tolerance = eps, cg_iterations, cg_tolerance
            self.worst_residual = 0.0

    def coordinates(self, vectors: Any) -> Any:
        """Coordinates in which inner products of solves are plain dot products."""
        return self.spectrum.project(vectors) if self.exact else vectors

    def solve(self, coordinates: Any) -> Any:
        if self.exact:
            return coordinates * self.weights
        from miarepro import hessian

        solution, report = hessian.conjugate_gradient(self.products, coordinates, self.eps,
                                                      self.iterations, self.tolerance)
        self.worst_residual = max(self.worst_residual, report.max_relative_residual)
        return solution


def _target_loss(study: StudyHandle | None, target: int
                 ) -> tuple[Any, np.ndarray, dict[str, float]]:
    """The target's training loss as a function of its weights, its training indices and
    the SGD constants of its recipe (learning rate, momentum, weight decay)."""
    from miarepro import hessian
    from miarepro.training import device

    if study is None:
        raise ValueError("IHA and SIF are white-box attacks: they need the study's models")
    recipe = study.recipe()
    model = study.load_model("target", target).to(device())
    flat = hessian.FlatLoss(model, recipe.get("loss", "cross_entropy"))
    sgd = {"lr": float(recipe["lr"]), "momentum": float(recipe.get("momentum", 0.0)),
           "weight_decay": float(recipe.get("weight_decay", 0.0))}
    return flat, study.training_indices("target", target), sgd


def _audit_inputs(ctx: AttackContext, flat: Any, solver: _Solver
                  ) -> Iterator[tuple[slice, Any, Any]]:
    """The audited records' gradients in the solver's coordinates, and their losses: read
    from the exact fit where it projected them, computed otherwise (CG, other records)."""
    import torch

    stored = ctx.fit.get("audit") if solver.exact else None
    if stored is not None and np.isin(ctx.audit, stored).all():
        where = np.searchsorted(stored, ctx.audit)
        on = flat.theta.device
        for start in range(0, len(where), _ROWS):
            rows = where[start : start + _ROWS]
            yield (slice(start, start + len(rows)),
                   torch.as_tensor(ctx.fit["audit_coordinates"][rows], device=on).double(),
                   torch.as_tensor(ctx.fit["audit_losses"][rows], device=on))
        return
    for rows, gradients, losses in _gradients(flat, ctx.study.features(), ctx.labels,
                                              ctx.audit):
        yield rows, solver.coordinates(gradients), losses


@register("iha", whitebox=True, fit=fit_hessian, fit_name="hessian", knows_training_set=True)
def iha(ctx: AttackContext, terms: list[Term] = ALL_TERMS, eps: Positive = 0.2,
        conditioning: Literal["damping", "low_rank"] = "damping",
        fraction: Annotated[float, Range(0, 1, low_open=True)] = 1.0,
        cg_iterations: Annotated[int, Range(1)] = 100,
        cg_tolerance: Positive = 1e-6) -> np.ndarray:
    """IHA (Suri et al.): Eq. 8 with inverse-Hessian terms and leave-one-out knowledge."""
    import torch

    if not terms:
        raise ValueError("iha: terms must name at least one of " + ", ".join(ALL_TERMS))
    flat, train, sgd = _target_loss(ctx.study, ctx.target_index)
    solver = _Solver(ctx, flat, train, eps, conditioning, cg_iterations, cg_tolerance)
    rest, scale, in_rest = _rest_gradient(ctx, flat, train, fraction)
    rest_solution = solver.solve(solver.coordinates(rest[None]))[0]
    lr, mu, alpha, n = sgd["lr"], sgd["momentum"], sgd["weight_decay"], len(train)
    c1 = 1.0 - lr * alpha / (1.0 + mu)
    c2 = 2.0 - lr * alpha / (1.0 + mu)
    scores = np.empty(len(ctx.audit))
    for rows, coordinates, losses in _audit_inputs(ctx, flat, solver):
        v1 = solver.solve(coordinates)
        own = torch.as_tensor(in_rest[rows], dtype=v1.dtype, device=v1.device)[:, None] * scale
        v0 = rest_solution[None] - own * v1
        parts = {"loss": losses / (1.0 + mu), "I1": c1 / n * (v1 * v1).sum(1),
                 "I2": 2.0 * c1 * (v0 * v1).sum(1)}
        if {"I3", "I4"} & set(terms):
            v11 = solver.solve(v1)
            parts["I3"] = alpha * c2 / (2.0 * n) * (v1 * v11).sum(1)
            parts["I4"] = alpha * c2 * (v0 * v11).sum(1)
        score = sum(parts[t] if t == "loss" else -parts[t] / lr  # fixed order: same sums
                    for t in ALL_TERMS if t in terms)
        scores[rows] = score.cpu().numpy()
    if not solver.exact:
        log.info("CG: worst relative residual %.2e", solver.worst_residual)
    return scores


def _rest_gradient(ctx: AttackContext, flat: Any, train: np.ndarray, fraction: float
                   ) -> tuple[Any, float, np.ndarray]:
    """``(grad, scale, in_rest)`` with ``grad L0(z1) = grad - in_rest[z1] * scale * g1``.

    ``fraction == 1``: the full-data gradient of the fit, ``1/n``, membership of the audit.
    ``fraction < 1``: the mean gradient of a seeded subset of the training set rescaled to
    estimate the full one, ``1/(fraction n)``, whether each record is in that subset.
    """
    import torch

    from miarepro import hessian

    n = len(train)
    if fraction == 1.0:
        return (torch.as_tensor(ctx.fit["gradient"], device=flat.theta.device), 1.0 / n,
                ctx.target_mask[ctx.audit].astype(float))
    rng = np.random.default_rng([ctx.seed, ctx.target_index, 0x1A])
    subset = np.sort(rng.choice(train, size=max(1, round(fraction * n)), replace=False))
    total = hessian.mean_gradient(flat, ctx.study.features()[subset], ctx.labels[subset])
    size = fraction * n
    return total * (len(subset) / size), 1.0 / size, np.isin(ctx.audit, subset).astype(float)


@register("sif", whitebox=True, fit=fit_hessian, fit_name="hessian")
def sif(ctx: AttackContext, eps: Positive = 0.2, cg_iterations: Annotated[int, Range(1)] = 100,
        cg_tolerance: Positive = 1e-6) -> np.ndarray:
    """SIF (Cohen and Giryes): minus the self-influence g^T (H + eps I)^-1 g, damped exactly."""
    flat, train, _ = _target_loss(ctx.study, ctx.target_index)
    solver = _Solver(ctx, flat, train, eps, "damping", cg_iterations, cg_tolerance)
    scores = np.empty(len(ctx.audit))
    for rows, coordinates, _losses in _audit_inputs(ctx, flat, solver):
        scores[rows] = -(coordinates * solver.solve(coordinates)).sum(1).cpu().numpy()
    return scores
