"""Curvature of a model's training loss, for IHA and SIF (white-box influence attacks).

The model becomes a function of one flat parameter vector (:class:`FlatLoss`), so that
``torch.func`` gives, without a Python loop over samples:

- per-sample gradients: ``vmap(grad(loss of one sample))``;
- Hessian-vector products: reverse-over-reverse, the pullback of ``grad(L)`` recorded once
  per data batch and applied to many vectors by ``vmap``;
- the exact Hessian: those products on the basis vectors, a chunk of columns at a time, so
  peak memory is the ``P x P`` result plus one chunk (``torch.func.hessian`` would hold
  the whole ``P x P x batch`` intermediate);
- conjugate-gradient solves ``(H + eps I) x = b`` of many right-hand sides in one shared
  search space (block CG), the Hessian never formed (Koh and Liang 2017; IHA's "approximate"
  variant).

An exact Hessian is decomposed once (:class:`Spectrum`); damping ``1/(s + eps)`` and the
low-rank pseudo-inverse are then re-weightings of its eigenvalues
(:func:`miarepro.attacks.iha.inverse_weights`), so trying another ``eps`` costs no new
decomposition and never an inverse of an ill-conditioned matrix. The Hessian and its
decomposition run in float64: IHA subtracts terms of similar size, and its checks compare to
1e-5. Two steps may run in float32 where that rounding is far below what they resolve:
Hessian-vector products (``precision``, for CG at a loose tolerance) and the audited records'
gradients in the eigenbasis, as IHA's fit stores them (:mod:`miarepro.attacks.iha`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, grad, vjp, vmap

from miarepro.training import per_sample_loss


class FlatLoss:
    """The training loss of ``model`` as a function of a flat parameter vector ``theta``.

    ``loss(theta, X, y)`` is the mean per-sample loss (the unregularised ``L`` of IHA's
    Assumption 1; weight decay is the optimiser's, not the loss's). Buffers (batch-norm
    statistics) are held fixed at their trained values.
    """

    def __init__(self, model: nn.Module, loss: str = "cross_entropy",
                 dtype: torch.dtype = torch.float64) -> None:
        self.model = model.to(dtype).eval()
        self.loss_name, self.dtype = loss, dtype
        named = [(name, p) for name, p in model.named_parameters() if p.requires_grad]
        self.names = [name for name, _ in named]
        self.shapes = [p.shape for _, p in named]
        self.sizes = [p.numel() for _, p in named]
        self.theta = torch.cat([p.detach().reshape(-1) for _, p in named])
        self.buffers = dict(model.named_buffers())

    @property
    def size(self) -> int:
        return int(self.theta.numel())

    def _params(self, theta: torch.Tensor) -> dict[str, torch.Tensor]:
        pieces = torch.split(theta, self.sizes)
        return {name: piece.view(shape)
                for name, piece, shape in zip(self.names, pieces, self.shapes, strict=True)}

    def logits(self, theta: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        return functional_call(self.model, (self._params(theta), self.buffers), (X,))

    def loss(self, theta: torch.Tensor, X: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return per_sample_loss(self.loss_name, self.logits(theta, X), y).mean()

    def tensors(self, X: np.ndarray, y: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        return (torch.as_tensor(X).to(self.theta.device, self.dtype),
                torch.as_tensor(y).to(self.theta.device))


def _batches(n: int, size: int) -> Iterator[slice]:
    for start in range(0, n, size):
        yield slice(start, min(start + size, n))


def per_sample_gradients(flat: FlatLoss, X: np.ndarray, y: np.ndarray,
                         batch_size: int = 256) -> tuple[torch.Tensor, torch.Tensor]:
    """``(n, P)`` gradients of each sample's loss and its ``(n,)`` losses, by ``vmap``."""

    def one(theta: torch.Tensor, x: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        return flat.loss(theta, x[None], label[None])

    value_and_grad = vmap(torch.func.grad_and_value(one), in_dims=(None, 0, 0))
    inputs, labels = flat.tensors(X, y)
    grads, losses = [], []
    for rows in _batches(len(labels), batch_size):
        g, value = value_and_grad(flat.theta, inputs[rows], labels[rows])
        grads.append(g)
        losses.append(value)
    return torch.cat(grads), torch.cat(losses)


def mean_gradient(flat: FlatLoss, X: np.ndarray, y: np.ndarray,
                  batch_size: int = 2048) -> torch.Tensor:
    """``(P,)`` gradient of the mean loss over all of ``X``."""
    inputs, labels = flat.tensors(X, y)
    total = torch.zeros_like(flat.theta)
    for rows in _batches(len(labels), batch_size):
        total += grad(flat.loss)(flat.theta, inputs[rows], labels[rows]) * (
            rows.stop - rows.start)
    return total / len(labels)


#: Elements of the ``(records, vectors, width)`` tensors of one closed-form MLP product: the
#: vectors are taken in chunks that keep them about this size, which the cache holds (on one
#: core, 100 float32 products of the Purchase MLP-2 on 10,000 records: 2.0 s in chunks of 7
#: against 3.6 s at once; the float64 Hessian of the MNIST MLP, in chunks of 73: 6.6 s
#: against 8.3 s).
MLP_ELEMENTS = 1_500_000


def hvp_function(flat: FlatLoss, X: np.ndarray, y: np.ndarray, batch_size: int = 2048,
                 precision: torch.dtype | None = None) -> Callable[[torch.Tensor], torch.Tensor]:
    """``V (k, P) -> (H V^T)^T`` for the Hessian ``H`` of the mean loss over ``X``.

    ``precision`` computes the products in another float type than ``flat``'s, vectors
    converted in and out: conjugate gradients to a relative residual of 1e-4 need no more
    than float32, at about half the time of float64.

    A cross-entropy MLP with piecewise-linear activations (:func:`_mlp_layers`) gets its
    products in closed form (:func:`_mlp_products`): every vector's work is a few large matrix
    products (on one core, measured: the exact Hessian of the 784-6-10 MNIST MLP on 2,000
    records in a third of autograd's time; products of the 100-class Purchase MLP-2 on
    10,000 records in 0.6 of it, where the softmax's curvature dominates). Any other model gets
    reverse-over-reverse products: the gradient of each data batch is differentiated once
    (``vjp``) and its pullback is applied to the ``k`` vectors at once (``vmap``), weighted by
    the batch's size; ``H`` is never formed. Reusing the pullbacks is what makes repeated
    products cheap (conjugate gradients, the columns of :func:`hessian`): on a 100-class
    MLP it is four times faster than forward-over-reverse (measured).
    """
    if precision is not None and precision != flat.dtype:
        import copy

        products = hvp_function(FlatLoss(copy.deepcopy(flat.model), flat.loss_name, precision),
                                X, y, batch_size)
        return lambda vectors: products(vectors.to(precision)).to(vectors.dtype)
    inputs, labels = flat.tensors(X, y)
    n = len(labels)
    slopes = _mlp_slopes(flat.model) if flat.loss_name == "cross_entropy" else None
    if slopes is not None:
        batches = [(_LayerInput.of(inputs[rows].flatten(1)), labels[rows],
                    (rows.stop - rows.start) / n) for rows in _batches(n, batch_size)]
        widest = max(shape[0] for shape in flat.shapes[::2])  # the layers' output widths
        chunk = max(1, MLP_ELEMENTS // (min(n, batch_size) * widest))
        return lambda vectors: torch.cat([
            sum(_mlp_products(flat, slopes, rows, rows_labels, part) * weight
                for rows, rows_labels, weight in batches)
            for part in vectors.split(chunk)]) if len(vectors) else vectors.clone()
    pullbacks = []
    for rows in _batches(n, batch_size):
        gradient = grad(lambda t, rows=rows: flat.loss(t, inputs[rows], labels[rows]))
        pullbacks.append((vjp(gradient, flat.theta)[1], (rows.stop - rows.start) / n))

    def products(vectors: torch.Tensor) -> torch.Tensor:
        out = torch.zeros_like(vectors)
        for pullback, weight in pullbacks:
            out += vmap(lambda v, pullback=pullback: pullback(v)[0])(vectors) * weight
        return out

    return products


def _mlp_slopes(model: nn.Module) -> list[float | None] | None:
    """For a ``Sequential`` of ``Flatten``, ``Linear`` and ``ReLU`` / ``LeakyReLU`` modules, the
    slope below 0 of the activation after each linear layer (None after the last); None for
    any other model. Such activations have no curvature, so the Hessian has a closed form."""
    if not isinstance(model, nn.Sequential):
        return None
    slopes: list[float | None] = []
    for module in model:
        if isinstance(module, nn.Linear) and module.bias is not None:
            slopes.append(None)
        elif isinstance(module, nn.ReLU | nn.LeakyReLU) and slopes and slopes[-1] is None:
            slopes[-1] = module.negative_slope if isinstance(module, nn.LeakyReLU) else 0.0
        elif not (isinstance(module, nn.Flatten) and not slopes):
            return None
    return slopes if slopes and slopes[-1] is None else None


#: below this share of non-zero inputs, a CPU batch's products with its inputs go through
#: sparse matrices (Purchase's binary features: 7.7% non-zero; measured on one core, those two
#: products 2.7 times faster, the whole closed-form HVP of the MLP-4 1.3 times, as its
#: element-wise work stays; MNIST's pixels, 19% non-zero, stay dense)
SPARSE_INPUTS = 0.1


@dataclass(frozen=True)
class _LayerInput:
    """A batch of first-layer inputs and its transpose, for the closed-form HVP's two products
    with them (``X M`` and ``X^T M``): dense, or sparse rows (CSR) where mostly zero."""

    rows: torch.Tensor
    columns: torch.Tensor  # the transpose, as a matrix of its own (CSR products need rows)

    @classmethod
    def of(cls, inputs: torch.Tensor) -> _LayerInput:
        share = float(torch.count_nonzero(inputs)) / max(inputs.numel(), 1)
        if inputs.device.type != "cpu" or share > SPARSE_INPUTS:
            return cls(inputs, inputs.T)
        import warnings

        with warnings.catch_warnings():  # "sparse CSR support is in beta": products only
            warnings.simplefilter("ignore", UserWarning)
            return cls(inputs.to_sparse_csr(), inputs.T.contiguous().to_sparse_csr())


def _mlp_products(flat: FlatLoss, activation_slopes: list[float | None],
                  layer_input: _LayerInput, labels: torch.Tensor,
                  vectors: torch.Tensor) -> torch.Tensor:
    """Hessian-vector products of the mean cross-entropy of one data batch of an MLP
    (:func:`_mlp_slopes`) at ``flat.theta``, for ``k`` vectors at once (Pearlmutter's R
    operator: forward the directional derivative of every pre-activation, then backward the
    derivative of the gradient; the activations' second derivative is 0).

    Directional derivatives are held as ``(n, k, width)``, so that every product with a
    layer's inputs, for all ``k`` vectors, is one ``(n, d) x (d, k width)`` matrix product:
    no batched products of small matrices, no transposed copies of ``(n, k, .)`` tensors.
    ``layer_input``: the batch's inputs and their transpose (:class:`_LayerInput`)."""
    k, n, depth = len(vectors), len(labels), len(activation_slopes)
    shapes, params = flat.shapes, torch.split(flat.theta, flat.sizes)
    directions = torch.split(vectors, flat.sizes, dim=1)
    weights = [params[2 * i].view(shapes[2 * i]) for i in range(depth)]
    # each layer's direction as (in, k, out): a layer input times it is one matrix product
    d_weights = [directions[2 * i].reshape(k, *shapes[2 * i]).permute(2, 0, 1)
                 for i in range(depth)]
    d_biases = [directions[2 * i + 1] for i in range(depth)]
    # forward: each layer's input and its activation's derivative
    hidden, slopes = [layer_input.rows], []
    transposed = [layer_input.columns]  # each layer input's transpose
    for i, slope in enumerate(activation_slopes):
        z = hidden[-1] @ weights[i].T + params[2 * i + 1]
        if slope is not None:
            slopes.append(torch.where(z > 0, 1.0, z.new_tensor(slope))[:, None, :])
            hidden.append(z * slopes[-1][:, 0])
            transposed.append(hidden[-1].T)
    p = torch.softmax(z, dim=1)
    gradient = (p - torch.nn.functional.one_hot(labels, p.shape[1]).to(p.dtype)) / n
    # R forward: directional derivatives of every pre-activation and layer input, (n, k, .)
    r_inputs: list[torch.Tensor | None] = [None]
    for i in range(depth):
        d_in, _, d_out = d_weights[i].shape
        r_z = (hidden[i] @ d_weights[i].reshape(d_in, k * d_out)).view(n, k, d_out)
        r_z += d_biases[i]
        if r_inputs[i] is not None:
            r_z += r_inputs[i] @ weights[i].T
        if i < len(slopes):
            r_inputs.append(r_z * slopes[i])
    # R of the gradient at the logits: the softmax Jacobian times r_z, over n
    r_gradient = p[:, None, :] * (r_z - (p[:, None, :] * r_z).sum(-1, keepdim=True)) / n
    # R backward: the derivative of each layer's weight and bias gradients
    out: list[torch.Tensor] = []
    for i in reversed(range(depth)):
        d_in, _, d_out = d_weights[i].shape
        d_w = (transposed[i] @ r_gradient.reshape(n, k * d_out)).view(d_in, k, d_out).permute(
            1, 2, 0)
        if r_inputs[i] is not None:
            d_w = d_w + (gradient.T @ r_inputs[i].reshape(n, k * d_in)).view(
                d_out, k, d_in).permute(1, 0, 2)
        out[:0] = [d_w.reshape(k, -1), r_gradient.sum(0)]
        if i > 0:
            r_gradient = (r_gradient @ weights[i] + (gradient @ d_weights[i].permute(
                2, 1, 0).reshape(d_out, k * d_in)).view(n, k, d_in)) * slopes[i - 1]
            gradient = (gradient @ weights[i]) * slopes[i - 1][:, 0]
    return torch.cat(out, dim=1)


def hessian(flat: FlatLoss, X: np.ndarray, y: np.ndarray, chunk_size: int = 256,
            batch_size: int = 2048, progress: Callable[[int, int], None] | None = None
            ) -> torch.Tensor:
    """Exact ``(P, P)`` Hessian of the mean loss over ``X``, ``chunk_size`` columns at a time.

    ``progress(done, total)`` is called after each chunk (long Hessians log their progress).
    """
    products = hvp_function(flat, X, y, batch_size)
    size = flat.size
    out = torch.empty(size, size, dtype=flat.dtype, device=flat.theta.device)
    for columns in _batches(size, chunk_size):
        basis = torch.zeros(columns.stop - columns.start, size, dtype=flat.dtype,
                            device=flat.theta.device)
        basis[torch.arange(len(basis)), torch.arange(columns.start, columns.stop)] = 1.0
        out[columns] = products(basis)
        if progress is not None:
            progress(columns.stop, size)
    # symmetric up to rounding; not symmetrised, as ``eigh`` reads one triangle only and a
    # transposed copy of a 22,532-parameter Hessian would cost 8 GB and much of the time
    return out


@dataclass(frozen=True)
class Spectrum:
    """Eigendecomposition ``H = U diag(s) U^T`` of a symmetric Hessian."""

    values: torch.Tensor   # (P,) ascending
    vectors: torch.Tensor  # (P, P), columns are eigenvectors

    @classmethod
    def of(cls, matrix: torch.Tensor) -> Spectrum:
        """Decompose ``matrix``, reading its lower triangle, as ``torch.linalg.eigh`` does.

        On a CPU, SciPy's divide-and-conquer LAPACK runs in place of torch's: torch's CPU
        build calls MKL, whose ``syevd`` took 1.6 times as long on one core of an AMD EPYC
        (4,780 parameters: 30.5 s against 19.2 s), and it works in ``matrix``'s own memory,
        so the caller must not use ``matrix`` afterwards.
        """
        if matrix.device.type != "cpu":
            return cls(*torch.linalg.eigh(matrix))
        from scipy import linalg

        # the C-ordered matrix's transpose is Fortran-ordered, which LAPACK overwrites without
        # a copy; its upper triangle is the matrix's lower one
        values, vectors = linalg.eigh(matrix.numpy().T, lower=False, driver="evd",
                                      overwrite_a=True, check_finite=False)
        return cls(torch.from_numpy(values), torch.from_numpy(vectors))

    def project(self, vectors: torch.Tensor) -> torch.Tensor:
        """Coordinates ``(k, P)`` of ``vectors (k, P)`` in the eigenbasis."""
        return vectors @ self.vectors


@dataclass(frozen=True)
class SolveReport:
    iterations: int
    max_relative_residual: float


def conjugate_gradient(products: Callable[[torch.Tensor], torch.Tensor], rhs: torch.Tensor,
                       damping: float, iterations: int = 100, tolerance: float = 1e-6
                       ) -> tuple[torch.Tensor, SolveReport]:
    """Solve ``(H + damping I) x = b`` for each row ``b`` of ``rhs (k, P)``, to a relative
    residual of ``tolerance``, by block conjugate gradients (O'Leary 1980); ``products``
    computes ``H V`` row-wise.

    All rows share one search space: each iteration applies ``H`` to ``k`` orthonormal
    directions, as row-by-row CG applies it to ``k`` directions of its own, but every solution
    is the best in the span of all of them. A network's Hessian has a few outlying eigenvalues
    (about one per class) above a bulk; ``k`` directions together resolve those at once, where
    each row alone spends iterations on them. Measured on IHA's Purchase MLP-4 (24,644
    parameters, 100 records, damping 0.2): 6 iterations to 1e-4 against 20 row by row, a third
    of the time, the solutions equal to that tolerance. Directions are re-orthonormalised
    (QR) every iteration, as in Ji and Li's breakdown-free block CG (2017); where residuals
    become dependent or vanish, Householder QR completes the basis instead of dropping
    directions, so the small ``k x k`` systems stay well-posed and each step still minimises
    the error over the space its directions span. Iterations stop when every row is within
    ``tolerance * |b|`` or after ``iterations``.

    CG needs a positive-definite system. Where the damped Hessian is not positive definite on
    the block's directions, the rows are solved one by one instead, from the start
    (:func:`_rowwise_cg`), where a direction of negative curvature ends that row's iterations;
    the report then counts the block's iterations and theirs.
    """
    x = torch.zeros_like(rhs)
    residual = rhs.clone()
    norm_b = rhs.norm(dim=1).clamp_min(1e-300)
    directions = _orthonormal_rows(residual)
    iteration = 0
    while iteration < iterations and bool((residual.norm(dim=1) > tolerance * norm_b).any()):
        iteration += 1
        applied = products(directions) + damping * directions
        gram = directions @ applied.T
        factor, info = torch.linalg.cholesky_ex((gram + gram.T) / 2)
        if info.item() != 0:  # not positive definite on these directions
            x, report = _rowwise_cg(products, rhs, damping, iterations, tolerance)
            return x, SolveReport(iteration + report.iterations, report.max_relative_residual)
        step = torch.cholesky_solve(directions @ residual.T, factor)  # (m, k)
        x += step.T @ directions
        residual -= step.T @ applied
        conjugate = -torch.cholesky_solve(applied @ residual.T, factor)
        directions = _orthonormal_rows(residual + conjugate.T @ directions)
    relative = float((residual.norm(dim=1) / norm_b).max()) if len(rhs) else 0.0
    return x, SolveReport(iteration, relative)


def _orthonormal_rows(vectors: torch.Tensor) -> torch.Tensor:
    """Orthonormal rows spanning ``vectors (k, P)`` (and more where those are dependent:
    Householder QR completes the basis, so the block never shrinks to a singular system)."""
    return torch.linalg.qr(vectors.T).Q.T


def _rowwise_cg(products: Callable[[torch.Tensor], torch.Tensor], rhs: torch.Tensor,
                damping: float, iterations: int, tolerance: float
                ) -> tuple[torch.Tensor, SolveReport]:
    """Conjugate gradients row by row, all rows at once: a row stops updating once its
    residual is below ``tolerance * |b|``, and a direction of negative curvature
    (``p^T A p <= 0``) ends that row's iterations where it is, as Koh and Liang's damped
    solver does in effect."""
    x = torch.zeros_like(rhs)
    residual = rhs.clone()
    direction = residual.clone()
    norm_b = rhs.norm(dim=1).clamp_min(1e-300)
    squared = (residual * residual).sum(1)
    active = squared.sqrt() > tolerance * norm_b
    iteration = 0
    while iteration < iterations and bool(active.any()):
        iteration += 1
        applied = products(direction) + damping * direction
        curvature = (direction * applied).sum(1)
        active = active & (curvature > 0)
        step = torch.where(active, squared / curvature.clamp_min(1e-300), 0.0)
        x += step[:, None] * direction
        residual -= step[:, None] * applied
        new_squared = (residual * residual).sum(1)
        beta = torch.where(active, new_squared / squared.clamp_min(1e-300), 0.0)
        direction = residual + beta[:, None] * direction
        squared = new_squared
        active = active & (squared.sqrt() > tolerance * norm_b)
    relative = float((squared.sqrt() / norm_b).max()) if len(rhs) else 0.0
    return x, SolveReport(iteration, relative)
