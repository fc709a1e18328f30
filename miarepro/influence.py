"""Layer slicing and internal influence, after Leino & Fredrikson, "Stolen Memories" (2020).

The white-box attack of Stolen Memories slices a network ``f = g ∘ h`` at a layer ℓ: ``h``
computes the *inputs* of layer ℓ (a ``Linear`` or ``Conv2d`` module), ``g`` maps them to the
logits. Around a point ``z = h(x)`` it explains ``g_y`` by a linear model whose weights are the
*internal influence* of every feature ``z_j`` on class ``y`` (Eq. 9),

    χ_j(z)_y = ∫_0^1 ∂g_y/∂z_j (t·z) dt,

the gradient averaged along the straight path from the baseline ``z0 = 0`` to ``z``. By the
fundamental theorem of calculus along that path, it satisfies efficiency (Eq. 8):

    Σ_j χ_j(z)_y · z_j = g_y(z) − g_y(0),

so ``g_y(z) = χ(z)_yᵀ z + g_y(0)`` exactly: a local linear model whose weights account for the
whole output, where the plain gradient at ``z`` would only describe an infinitesimal
neighbourhood (and is blind to ReLUs that switch on or off between 0 and ``z``). The baseline
is 0 because the features below a ReLU layer are non-negative and 0 is "no activation": the
paper's choice, and the one for which the bias ``g_y(0)`` of the local model is the same for
every sample. At the top layer ``g`` is one affine map and χ is exactly its weight row ``W_y``.

The integral is a midpoint rule over ``steps`` points, ``t_s = (s + 1/2) / steps``. For a
ReLU/max-pool network ``t ↦ ∇g(t·z)`` is piecewise constant, so every rule is first order in
the kinks; for a smooth ``g`` the midpoint rule is second order (error ∝ 1/steps²) where left
or right Riemann sums are first order, at the same cost. It also never evaluates the gradient
at the baseline itself, where a ReLU without bias sits exactly on its kink.

All ``steps × rows`` points of a chunk go through ``g`` in one forward and one backward pass:
in eval mode every layer of our Sequentials acts on each sample alone (no batch statistics,
no dropout), so the gradient of the summed selected logits w.r.t. the stacked points is the
stack of per-point gradients. ``chunk_size`` bounds the rows per pass, so memory is that of
``steps × chunk_size`` evaluations of ``g`` whatever the number of rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import torch
from torch import nn

LAYERS = (nn.Linear, nn.Conv2d)  # the layers a model can be sliced at


def layer_boundaries(model: nn.Sequential) -> list[int]:
    """Positions in ``model`` of its ``Linear`` and ``Conv2d`` modules, in order.

    These are the layers Stolen Memories can attack; the last one is the top (output) layer.
    """
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"layer slicing needs an nn.Sequential, got {type(model).__name__}")
    return [k for k, module in enumerate(model) if isinstance(module, LAYERS)]


def split_at(model: nn.Sequential, k: int) -> tuple[nn.Sequential, nn.Sequential]:
    """Slice ``model`` before its module ``k``: ``h = model[:k]``, ``g = model[k:]``, where
    dropout just below module ``k`` goes with ``g`` (with any ``Flatten`` between them, which
    commutes with it: LeNet's ``Dropout, Flatten, Linear``).

    Both share the model's modules and parameters (nothing is copied), so ``g(h(x)) ==
    model(x)``. They are returned in eval mode, which switches the shared modules, and hence
    ``model``, to eval mode too: influence is a property of the trained, deterministic network.
    Dropout on ``g``'s input is the identity there, but a fresh ``g`` trained on ``h``'s
    features (Stolen Memories' proxies, "trained using the same algorithm and hyperparameters"
    as the target's layers above the cut) then trains with the dropout those layers had.
    """
    if not isinstance(model, nn.Sequential):
        raise TypeError(f"layer slicing needs an nn.Sequential, got {type(model).__name__}")
    if not 0 <= k < len(model):
        raise ValueError(f"slice position {k} outside 0..{len(model) - 1}; "
                         f"layer boundaries: {layer_boundaries(model)}")
    start = k
    while start > 0 and isinstance(model[start - 1], (nn.Dropout, nn.Flatten)):
        start -= 1
    if not any(isinstance(module, nn.Dropout) for module in model[start:k]):
        start = k  # no dropout below: the cut stays where it is, a Flatten with h
    return model[:start].eval(), model[start:].eval()


@contextmanager
def _evaluating(module: nn.Module) -> Iterator[None]:
    """Eval mode inside the block, each submodule's own training flag restored after it."""
    flags = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, training in flags:
            m.train(training)


def _midpoints(steps: int, like: torch.Tensor) -> torch.Tensor:
    """The midpoint-rule nodes ``(s + 1/2) / steps`` on [0, 1], in ``like``'s dtype/device."""
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    return (torch.arange(steps, dtype=like.dtype, device=like.device) + 0.5) / steps


def _classes(classes: torch.Tensor | Sequence[int] | int, n: int,
             device: torch.device) -> torch.Tensor:
    """Per-row class indices as a long tensor of shape (n,); a single int applies to all."""
    classes = torch.as_tensor(classes, dtype=torch.long, device=device)
    if classes.ndim == 0:
        classes = classes.expand(n)
    if classes.shape != (n,):
        raise ValueError(f"classes: expected shape ({n},), got {tuple(classes.shape)}")
    return classes


def _mean_path_gradient(g: nn.Module, z: torch.Tensor, classes: torch.Tensor,
                        t: torch.Tensor) -> torch.Tensor:
    """Mean over the nodes ``t`` of ``∇ g(t·z)[class]``, for one chunk of rows, in one pass."""
    steps, rows, feature_shape = len(t), z.shape[0], z.shape[1:]
    scale = t.view(steps, 1, *([1] * len(feature_shape)))
    points = (scale * z.unsqueeze(0)).reshape(steps * rows, *feature_shape).requires_grad_()
    logits = g(points)
    if logits.ndim != 2:
        raise ValueError(f"g must output (batch, classes) logits, got shape "
                         f"{tuple(logits.shape)}")
    selected = logits.gather(1, classes.repeat(steps).unsqueeze(1))
    (gradients,) = torch.autograd.grad(selected.sum(), points)
    return gradients.view(steps, rows, *feature_shape).mean(0)


def internal_influence(g: nn.Module, z: torch.Tensor,
                       classes: torch.Tensor | Sequence[int] | int, steps: int = 32,
                       chunk_size: int = 64) -> torch.Tensor:
    """Internal influence χ(z)_y (Eq. 9) of every feature of ``z`` on each row's class.

    ``z``: features at the slice, shape (n, *feature_shape) (``(n, d)`` below a ``Linear``,
    ``(n, C, H, W)`` below a ``Conv2d``); ``classes``: shape (n,), or one int for all rows.
    Returns χ with the shape of ``z``: the gradient of ``g(t·z)[class]`` averaged over
    ``steps`` midpoint nodes on the path from the baseline 0 to ``z``. ``chunk_size`` rows
    (``steps × chunk_size`` evaluations of ``g``) go through one forward/backward pass.
    ``g`` runs in eval mode, its modules' flags restored afterwards; computations use ``z``'s
    dtype, which must match ``g``'s parameters (float64 where efficiency is checked tightly).
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1, got {chunk_size}")
    z = z.detach()
    classes = _classes(classes, z.shape[0], z.device)
    t = _midpoints(steps, z)
    with _evaluating(g), torch.enable_grad():
        chunks = [_mean_path_gradient(g, z[i:i + chunk_size], classes[i:i + chunk_size], t)
                  for i in range(0, z.shape[0], chunk_size)]
    return torch.cat(chunks) if chunks else torch.zeros_like(z)


def baseline_logits(g: nn.Module, z: torch.Tensor) -> torch.Tensor:
    """``g(0)``: the logits at the baseline, shape (classes,), for features shaped like ``z``."""
    with _evaluating(g), torch.no_grad():
        return g(torch.zeros_like(z[:1]))[0]


def local_linear(g: nn.Module, z: torch.Tensor, classes: torch.Tensor | Sequence[int] | int,
                 steps: int = 32, chunk_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """The local linear model ``g_y(z) = weightsᵀ z + bias`` of Stolen Memories (Eq. 8).

    ``weights``: χ(z)_y, shaped like ``z`` (:func:`internal_influence`); ``bias``: ``g_y(0)``,
    shape (n,), the baseline logit of each row's class.
    """
    weights = internal_influence(g, z, classes, steps, chunk_size)
    classes = _classes(classes, z.shape[0], z.device)
    return weights, baseline_logits(g, z)[classes]
