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

- the membership-dependent ``grad L0`` is Appendix E's protocol, and in the miniature all of
  IHA's margin over LOSS comes from it (``leave_one_out=False`` scores without it; the IHA
  studies list both and say so in their deviations);
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
from miarepro.recipes import DEFAULT_RECIPE

log = logging.getLogger(__name__)

Term = Literal["loss", "I1", "I2", "I3", "I4"]
ALL_TERMS: tuple[str, ...] = ("loss", "I1", "I2", "I3", "I4")
Positive = Annotated[float, Range(0, low_open=True)]
_ROWS = 512  # audited records whose gradients are held at once
#: the tightest CG tolerance whose Hessian-vector products run in float32 (half the time of
#: float64): below about 5e-6 the residual CG updates is float32's rounding, not the true
#: one (measured), so a tighter tolerance computes them in float64
FLOAT32_TOLERANCE = 1e-5


def fit_hessian(study: StudyHandle, group: int, solver: Literal["exact", "cg"] = "exact",
                chunk_size: Annotated[int, Range(1)] = 256
                ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Full-data gradient of target ``group`` and, for the exact solver, its Hessian's
    eigendecomposition (``chunk_size`` Hessian columns computed at a time) and the gradients
    of the audited records and of the full-data gradient in its eigenbasis: projecting them
    is the ``N x P^2`` step of scoring, the same for every damping, term subset or fraction,
    so it is done once here, and scoring then needs neither torch, nor the model, nor the
    eigenvectors."""
    from miarepro import hessian

    flat = _flat_loss(study, group)
    train = study.training_indices("target", group)
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
        # the full-data gradient in the eigenbasis, as scoring projected it: scoring then
        # reads no eigenvectors (P x P: 183 MB of a 259-MB fit at 4,780 parameters)
        arrays["gradient_coordinates"] = (arrays["gradient"][None] @ arrays["eigenvectors"])[0]
        # below rounding: an exact zero's sign is LAPACK's choice (hundreds of them)
        rounding = len(values) * np.finfo(values.dtype).eps * np.abs(values).max()
        info.update(min_eigenvalue=float(values[0]), max_eigenvalue=float(values[-1]),
                    negative_eigenvalues=int((values < -rounding).sum()))
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
    """Per-sample gradients and losses of ``records`` (torch), ``_ROWS`` at a time."""
    from miarepro import hessian

    for start in range(0, len(records), _ROWS):
        rows = records[start : start + _ROWS]
        yield slice(start, start + len(rows)), *hessian.per_sample_gradients(flat, X[rows],
                                                                             y[rows])


def _log_progress(done: int, total: int) -> None:
    log.info("Hessian columns %d/%d", done, total)


def _flat_loss(study: StudyHandle | None, target: int) -> Any:
    """The target's training loss as a function of its weights. The model is loaded first:
    that imports torch, which the study counts as reading, not as the attack's time."""
    if study is None:
        raise ValueError("IHA and SIF are white-box attacks: they need the study's models")
    model = study.load_model("target", target)
    from miarepro import hessian
    from miarepro.training import device

    return hessian.FlatLoss(model.to(device()), study.recipe().get("loss", "cross_entropy"))


def inverse_weights(values: np.ndarray, eps: float,
                    conditioning: Literal["damping", "low_rank"] = "damping") -> np.ndarray:
    """Eigenvalue weights of the conditioned inverse (IHA Appendix E).

    ``damping``: ``1 / (s + eps)``, exactly the inverse of ``H + eps I`` (the Hessian is
    indefinite away from a perfect minimum; eigenvalues below ``-eps`` keep their sign, as a
    solve with ``H + eps I`` would). ``low_rank``: ``1 / s`` on the eigenpairs with ``s > eps``,
    0 elsewhere (pseudo-inverse of the well-conditioned subspace).
    """
    if conditioning == "damping":
        return 1.0 / (values + eps)
    if conditioning == "low_rank":
        keep = values > eps
        return np.where(keep, 1.0 / np.where(keep, values, 1.0), 0.0)
    raise ValueError(f"unknown conditioning {conditioning!r}; known: ['damping', 'low_rank']")


class _Solver:
    """Conditioned inverse-Hessian products of one target, in numpy float64.

    Exact: in the eigenbasis of the fit, where a solve is a re-weighting; the audited
    records' coordinates come from the fit, so scoring them loads neither torch nor the
    model. CG (and records the fit did not project): torch, on the target's loss.
    """

    def __init__(self, ctx: AttackContext, eps: float, conditioning: str,
                 cg_iterations: int, cg_tolerance: float) -> None:
        if ctx.fit is None:
            raise ValueError("IHA and SIF need their fit (the target's Hessian and gradient)")
        self.ctx, self.exact = ctx, "eigenvalues" in ctx.fit
        self._flat: Any = None
        self._products: Any = None
        if self.exact:
            self.weights = inverse_weights(ctx.fit["eigenvalues"], eps, conditioning)
        elif conditioning != "damping":
            raise ValueError("the conjugate-gradient solver only damps (conditioning: damping)")
        self.eps, self.iterations, self.tolerance = eps, cg_iterations, cg_tolerance
        self.worst_residual = 0.0

    @property
    def flat(self) -> Any:
        if self._flat is None:
            self._flat = _flat_loss(self.ctx.study, self.ctx.target_index)
        return self._flat

    def coordinates(self, vectors: np.ndarray) -> np.ndarray:
        """Coordinates in which inner products of solves are plain dot products."""
        return vectors @ self.ctx.fit["eigenvectors"] if self.exact else vectors

    def solve(self, coordinates: np.ndarray) -> np.ndarray:
        if self.exact:
            return coordinates * self.weights
        flat = self.flat  # loads the model, and torch with it, before anything imports torch
        import torch

        from miarepro import hessian

        if self._products is None:
            train = self.ctx.study.training_indices("target", self.ctx.target_index)
            single = self.tolerance >= FLOAT32_TOLERANCE
            self._products = hessian.hvp_function(flat, self.ctx.study.features()[train],
                                                  self.ctx.labels[train],
                                                  precision=torch.float32 if single else None)
        rhs = torch.as_tensor(coordinates, dtype=torch.float64, device=flat.theta.device)
        solution, report = hessian.conjugate_gradient(self._products, rhs, self.eps,
                                                      self.iterations, self.tolerance)
        self.worst_residual = max(self.worst_residual, report.max_relative_residual)
        return solution.cpu().numpy()

    def report(self) -> None:
        """Log how far conjugate gradients got; warn where a solve stopped short of its
        tolerance (out of iterations, or on negative curvature where ``eps`` does not lift
        the Hessian's most negative eigenvalue), since its scores are then not Eq. 8's."""
        if self.exact:
            return
        if self.worst_residual > self.tolerance:
            log.warning("CG stopped short: worst relative residual %.2e > tolerance %.0e "
                        "(eps %g, at most %d iterations); the damped Hessian may not be "
                        "positive definite: raise eps or cg_iterations",
                        self.worst_residual, self.tolerance, self.eps, self.iterations)
        else:
            log.info("CG: worst relative residual %.2e", self.worst_residual)

    def _stored_rows(self, records: np.ndarray) -> np.ndarray | None:
        """Rows of ``records`` in the fit's projected audit, or None unless it holds all."""
        stored = self.ctx.fit.get("audit") if self.exact else None
        if stored is None or not np.isin(records, stored).all():
            return None
        return np.searchsorted(stored, records)

    def gradients(self, records: np.ndarray) -> Iterator[tuple[slice, np.ndarray, np.ndarray]]:
        """Gradients of ``records`` in solver coordinates and their losses, in row blocks."""
        where = self._stored_rows(records)
        if where is not None:
            for start in range(0, len(where), _ROWS):
                rows = where[start : start + _ROWS]
                yield (slice(start, start + len(rows)),
                       self.ctx.fit["audit_coordinates"][rows].astype(np.float64),
                       self.ctx.fit["audit_losses"][rows])
            return
        for rows, gradients, losses in _gradients(self.flat, self.ctx.study.features(),
                                                  self.ctx.labels, records):
            yield rows, self.coordinates(gradients.cpu().numpy()), losses.cpu().numpy()

    def mean_gradient(self, records: np.ndarray) -> np.ndarray:
        """Gradient of the mean loss over ``records``, in solver coordinates."""
        where = self._stored_rows(records)
        if where is not None:  # the projection is linear: the mean of projected gradients
            return self.ctx.fit["audit_coordinates"][where].mean(axis=0, dtype=np.float64)
        flat = self.flat
        from miarepro import hessian

        total = hessian.mean_gradient(flat, self.ctx.study.features()[records],
                                      self.ctx.labels[records])
        return self.coordinates(total.cpu().numpy())


@register("iha", whitebox=True, fit=fit_hessian, fit_name="hessian", knows_training_set=True)
def iha(ctx: AttackContext, terms: list[Term] = ALL_TERMS, eps: Positive = 0.2,
        conditioning: Literal["damping", "low_rank"] = "damping",
        fraction: Annotated[float, Range(0, 1, low_open=True)] = 1.0,
        cg_iterations: Annotated[int, Range(1)] = 100,
        cg_tolerance: Positive = 1e-6, leave_one_out: bool = True) -> np.ndarray:
    """IHA (Suri et al.): Eq. 8 with inverse-Hessian terms and leave-one-out knowledge.

    ``leave_one_out=False`` measures what that knowledge is worth: ``grad L0 = grad L1`` for
    every record, members included, so no term depends on the record's membership."""
    if not terms:
        raise ValueError("iha: terms must name at least one of " + ", ".join(ALL_TERMS))
    if ctx.study is None:
        raise ValueError("IHA and SIF are white-box attacks: they need the study's models")
    # the step, momentum and weight decay the target trained with: unset keys as training
    # fills them (its momentum is 0.9, not 0)
    recipe = {**DEFAULT_RECIPE, **ctx.study.recipe()}
    lr, mu, alpha = (float(recipe[key]) for key in ("lr", "momentum", "weight_decay"))
    train = ctx.study.training_indices("target", ctx.target_index)
    n = len(train)
    solver = _Solver(ctx, eps, conditioning, cg_iterations, cg_tolerance)
    rest, scale, in_rest = _rest_gradient(ctx, solver, train, fraction)
    if not leave_one_out:
        in_rest = np.zeros_like(in_rest)
    rest_solution = solver.solve(rest[None])[0]
    c1 = 1.0 - lr * alpha / (1.0 + mu)
    c2 = 2.0 - lr * alpha / (1.0 + mu)
    scores = np.empty(len(ctx.audit))
    for rows, coordinates, losses in solver.gradients(ctx.audit):
        v1 = solver.solve(coordinates)
        v0 = rest_solution[None] - (in_rest[rows] * scale)[:, None] * v1
        parts = {"loss": losses / (1.0 + mu), "I1": c1 / n * (v1 * v1).sum(1),
                 "I2": 2.0 * c1 * (v0 * v1).sum(1)}
        if {"I3", "I4"} & set(terms):
            v11 = solver.solve(v1)
            parts["I3"] = alpha * c2 / (2.0 * n) * (v1 * v11).sum(1)
            parts["I4"] = alpha * c2 * (v0 * v11).sum(1)
        scores[rows] = sum(parts[t] if t == "loss" else -parts[t] / lr  # fixed order: same sums
                           for t in ALL_TERMS if t in terms)
    solver.report()
    return scores


def _rest_gradient(ctx: AttackContext, solver: _Solver, train: np.ndarray, fraction: float
                   ) -> tuple[np.ndarray, float, np.ndarray]:
    """``(grad, scale, in_rest)`` with ``grad L0(z1) = grad - in_rest[z1] * scale * g1``, in
    solver coordinates.

    ``fraction == 1``: the full-data gradient of the fit, ``1/n``, membership of the audit.
    ``fraction < 1``: the mean gradient of a seeded subset of the training set rescaled to
    estimate the full one, ``1/(fraction n)``, whether each record is in that subset.
    """
    n = len(train)
    if fraction == 1.0:
        gradient = ctx.fit["gradient_coordinates" if solver.exact else "gradient"]
        return gradient, 1.0 / n, ctx.target_mask[ctx.audit].astype(float)
    rng = np.random.default_rng([ctx.seed, ctx.target_index, 0x1A])
    subset = np.sort(rng.choice(train, size=max(1, round(fraction * n)), replace=False))
    size = fraction * n
    return (solver.mean_gradient(subset) * (len(subset) / size), 1.0 / size,
            np.isin(ctx.audit, subset).astype(float))


@register("sif", whitebox=True, fit=fit_hessian, fit_name="hessian")
def sif(ctx: AttackContext, eps: Positive = 0.2, cg_iterations: Annotated[int, Range(1)] = 100,
        cg_tolerance: Positive = 1e-6) -> np.ndarray:
    """SIF (Cohen and Giryes): minus the self-influence g^T (H + eps I)^-1 g, damped exactly."""
    solver = _Solver(ctx, eps, "damping", cg_iterations, cg_tolerance)
    scores = np.empty(len(ctx.audit))
    for rows, coordinates, _losses in solver.gradients(ctx.audit):
        scores[rows] = -(coordinates * solver.solve(coordinates)).sum(1)
    solver.report()
    return scores
