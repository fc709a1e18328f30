"""Train many small networks of one architecture at once, each on its own subset of rows.

Stolen Memories' attacker trains tens of proxy and shadow models per target (10 proxies per
attacked layer, 10 shadow models and a proxy for each), all with the target's recipe. On a CPU
most of a tiny model's step is Python overhead, so they are trained together: their parameters
are stacked (:func:`torch.func.stack_module_state`) and one :func:`torch.func.vmap` call runs
every model on its own mini-batch (dense models as the batched products ``vmap`` would run:
:func:`_vmap_linear`; on a CPU, convolutional models one after another on the same
batches: :func:`_one_by_one`). The loss is the *sum* of the models' mean losses, so each
model's gradient is exactly its own; SGD (momentum, Nesterov, weight decay) and Adam update
every element independently, so training the stack is training each model separately, with
the same recipe semantics as :func:`miarepro.training.train_model` (optimizer, learning-rate
milestones, epochs, batch size, loss). Dropout draws different masks per model.

A recipe with a ``dp`` block trains every model by DP-SGD as :mod:`miarepro.privacy` trains a
target: Poisson-sampled batches at rate ``batch_size / n``, each sample's gradient clipped to
``max_grad_norm``, Gaussian noise of ``noise_multiplier * max_grad_norm`` added to the sum,
divided by the expected batch size, with the noise multiplier solved for the block's
``(epsilon, delta)`` at the models' training-set size. Opacus wraps one module at a time, so
the per-sample gradients of the stack come from :func:`torch.func.vmap` instead; no accountant
is attached (these are the attacker's models: they mimic the target's training, they
guarantee nothing to anyone).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from miarepro.recipes import DEFAULT_RECIPE
from miarepro.training import (
    make_optimizer,
    make_schedule,
    per_sample_loss,
    stacked_forward,
)


class Ensemble:
    """``K`` trained copies of one architecture: stacked parameters and one module to run them.

    Calling it maps inputs ``(K, n, *shape)`` (each model its own rows) or ``(n, *shape)``
    (the same rows for every model) to logits ``(K, n, C)``, in evaluation mode.
    """

    def __init__(self, base: nn.Module, params: dict[str, torch.Tensor],
                 buffers: dict[str, torch.Tensor]) -> None:
        self.base, self.params, self.buffers = base, params, buffers
        self.dp_plan: Any = None  # the DP-SGD plan it was trained with (miarepro.privacy)
        self.one_by_one = _one_by_one(base, next(iter(params.values())).device)
        self.batched = _batched_products(base)

    def __len__(self) -> int:
        return int(next(iter(self.params.values())).shape[0])

    def forward(self, inputs: torch.Tensor, shared: bool = False) -> torch.Tensor:
        """Logits of every model, with gradients and in the module's current mode."""

        def one(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
            return functional_call(self.base, (params, buffers), (x,))

        if self.batched:
            x = inputs.expand(len(self), *inputs.shape) if shared else inputs
            x = x.flatten(2) if isinstance(self.base[0], nn.Flatten) else x
            if x.dim() == 3:  # batched products, without vmap's tracing
                return stacked_forward(self.base, list(self.params.values()), x, _vmap_linear)
        if self.one_by_one:
            return torch.stack([one({n: p[k] for n, p in self.params.items()},
                                    {n: b[k] for n, b in self.buffers.items()},
                                    inputs if shared else inputs[k]) for k in range(len(self))])
        return vmap(one, in_dims=(0, 0, None if shared else 0), randomness="different")(
            self.params, self.buffers, inputs)

    @torch.no_grad()
    def __call__(self, inputs: torch.Tensor, shared: bool = True,
                 batch_size: int = 4096) -> torch.Tensor:
        self.base.eval()
        rows = inputs.shape[0 if shared else 1]
        return torch.cat([self.forward(inputs[start : start + batch_size] if shared else
                                       inputs[:, start : start + batch_size], shared)
                          for start in range(0, rows, batch_size)], dim=1)

    def module(self, k: int) -> nn.Module:
        """Model ``k`` as a plain module (a copy), in evaluation mode."""
        model = copy.deepcopy(self.base)
        model.load_state_dict({name: value[k] for name, value in
                               {**self.params, **self.buffers}.items()})
        return model.eval()


def _one_by_one(base: nn.Module, device: torch.device) -> bool:
    """Whether to run the stack's models one after another rather than under ``vmap``: on a
    CPU, ``vmap`` turns a convolution into a grouped one, with which a stack of two LeNets
    trained 1.7 times slower than run one by one; dense models gain from ``vmap``'s single
    call."""
    return device.type == "cpu" and any(isinstance(m, nn.Conv2d) for m in base.modules())


def _batched_products(base: nn.Module) -> bool:
    """Whether the stack can run as batched matrix products (:func:`_vmap_linear`): an
    ``nn.Sequential`` of ``Linear`` layers (weight and bias) and parameter-free element-wise
    activations, perhaps after a ``Flatten``. Dropout stays under ``vmap``, whose masks differ
    per model, and so does anything else, and so do inputs other than ``(K, n, d)``. On a CPU,
    ten 64-32 MLPs trained 30 epochs on 449 rows each in 0.6 to 0.8 of their time under
    ``vmap`` (one thread, alternating runs)."""
    if not isinstance(base, nn.Sequential):
        return False
    linears = [m for m in base if isinstance(m, nn.Linear)]
    return bool(linears) and all(m.bias is not None for m in linears) and all(
        isinstance(m, (nn.Linear, nn.ReLU, nn.LeakyReLU, nn.Tanh, nn.Identity))
        or (isinstance(m, nn.Flatten) and k == 0) for k, m in enumerate(base))


def _vmap_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """A stacked ``nn.Linear`` as ``vmap`` runs it: a batched product, then the bias. Its
    backward takes the same products too, so a stack trains as under ``vmap``, bit for bit
    (tested); ``baddbmm``, which fuses the bias, rounds otherwise at some widths."""
    return torch.matmul(x, weight.transpose(1, 2)) + bias.unsqueeze(1)


def train_ensemble(build: Callable[[], nn.Module], inputs: torch.Tensor, labels: torch.Tensor,
                   subsets: np.ndarray, recipe: dict[str, Any], seed: int) -> Ensemble:
    """Train ``K = len(subsets)`` fresh models from ``build`` with ``recipe``.

    ``inputs`` ``(N, *shape)`` with ``labels`` ``(N,)`` are shared by all models, or
    ``(K, N, *shape)`` with ``(K, N)`` give each model rows of its own (a shadow model's
    features); ``subsets`` ``(K, n)`` are the row indices each model trains on (equal sizes).
    Initialisation, data order and DP noise are seeded by ``seed``. Image augmentation, which
    no Stolen Memories recipe uses, is not applied: asking for it is an error rather than a
    silent change.
    """
    recipe = {**DEFAULT_RECIPE, **recipe}
    if recipe["augment"]:
        raise ValueError(f"ensembles train without augmentation; the recipe asks for "
                         f"{recipe['augment']}")
    inputs, labels = torch.as_tensor(inputs), torch.as_tensor(labels)
    subsets = torch.as_tensor(np.asarray(subsets), dtype=torch.long, device=inputs.device)
    n_models, n_rows = subsets.shape
    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    models = [build() for _ in range(n_models)]
    params, buffers = stack_module_state(models)
    ensemble = Ensemble(copy.deepcopy(models[0]), params, buffers)
    optimizer = make_optimizer(list(params.values()), recipe)
    schedule = make_schedule(optimizer, recipe)
    private = _PrivateSteps(ensemble, recipe, n_rows, seed) if recipe.get("dp") else None
    for _ in range(int(recipe["epochs"])):
        ensemble.base.train()
        if private is None:
            _epoch(ensemble, optimizer, inputs, labels, subsets, recipe, generator)
        else:
            private.epoch(optimizer, inputs, labels, subsets, generator)
        schedule.step()
    ensemble.dp_plan = private.plan if private is not None else None
    for value in params.values():
        value.requires_grad_(False)
    ensemble.base.eval()
    return ensemble


def _batch(inputs: torch.Tensor, labels: torch.Tensor, chosen: torch.Tensor
           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and labels of the ``(K, b)`` rows ``chosen``: from each model's own rows when
    ``labels`` is ``(K, N)``, from the shared ones when it is ``(N,)``."""
    if labels.dim() == 2:
        models = torch.arange(len(chosen), device=chosen.device)[:, None]
        return inputs[models, chosen], labels[models, chosen]
    return inputs[chosen], labels[chosen]


def _epoch(ensemble: Ensemble, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
           labels: torch.Tensor, subsets: torch.Tensor, recipe: dict[str, Any],
           generator: torch.Generator) -> None:
    """One epoch of shuffled mini-batches, each model on its own rows."""
    n_models, n_rows = subsets.shape
    rows = torch.arange(n_models, device=inputs.device)[:, None]
    order = torch.argsort(torch.rand(n_models, n_rows, generator=generator), dim=1).to(
        inputs.device)
    for batch in order.split(int(recipe["batch_size"]), dim=1):
        x, y = _batch(inputs, labels, subsets[rows, batch])
        logits = ensemble.forward(x)
        loss = per_sample_loss(recipe["loss"], logits.flatten(0, 1), y.flatten()).view(
            n_models, -1).mean(dim=1).sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


class _PrivateSteps:
    """DP-SGD epochs of a stack: per-sample gradients of every model by nested ``vmap``."""

    def __init__(self, ensemble: Ensemble, recipe: dict[str, Any], n_rows: int,
                 seed: int) -> None:
        from torch.func import grad

        from miarepro import privacy

        self.plan = privacy.plan(recipe["dp"], n_rows, int(recipe["batch_size"]),
                                 int(recipe["epochs"]))
        self.expected_batch = self.plan.sample_rate * n_rows
        device = next(iter(ensemble.params.values())).device
        self.noise = torch.Generator(device=device).manual_seed(privacy.noise_seed(seed))
        self.params = ensemble.params

        def sample_loss(params, buffers, x, y):
            logits = functional_call(ensemble.base, (params, buffers), (x[None],))
            return per_sample_loss(recipe["loss"], logits, y[None])[0]

        per_sample = vmap(grad(sample_loss), in_dims=(None, None, 0, 0), randomness="different")
        self.gradients = vmap(per_sample, in_dims=(0, 0, 0, 0), randomness="different")
        self.buffers = ensemble.buffers

    def epoch(self, optimizer: torch.optim.Optimizer, inputs: torch.Tensor,
              labels: torch.Tensor, subsets: torch.Tensor, generator: torch.Generator) -> None:
        n_models, n_rows = subsets.shape
        rows = torch.arange(n_models, device=subsets.device)[:, None]
        for _ in range(self.plan.steps_per_epoch):
            # Poisson sampling per model; padded to the largest batch, padding weighted 0
            taken = torch.rand(n_models, n_rows, generator=generator) < self.plan.sample_rate
            size = max(int(taken.sum(1).max()), 1)
            first = torch.argsort((~taken).to(torch.int8), dim=1, stable=True)[:, :size]
            weight = torch.gather(taken, 1, first).to(inputs.dtype).to(subsets.device)
            x, y = _batch(inputs, labels, subsets[rows, first.to(subsets.device)])
            per_sample = self.gradients(self.params, self.buffers, x, y)
            for name, total in private_sums(per_sample, weight, self.plan.max_grad_norm,
                                            self.plan.noise_multiplier, self.expected_batch,
                                            self.noise).items():
                self.params[name].grad = total
            optimizer.step()


def private_sums(per_sample: dict[str, torch.Tensor], weight: torch.Tensor, max_norm: float,
                 noise_multiplier: float, expected_batch: float,
                 generator: torch.Generator) -> dict[str, torch.Tensor]:
    """DP-SGD's gradient per model: ``(sum_b w_b clip(g_b) + N(0, (sigma C)^2)) / E[B]``.

    ``per_sample`` maps parameter names to ``(K, B, *shape)`` gradients and ``weight`` ``(K, B)``
    is 1 for a sampled record, 0 for padding. Clipping is opacus's: each sample's gradient
    over all parameters scaled by ``min(1, C / (|g| + 1e-6))``.
    """
    norms = torch.sqrt(sum(g.flatten(2).pow(2).sum(2) for g in per_sample.values()))
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0) * weight
    sums = {}
    for name, g in per_sample.items():
        total = torch.einsum("kb,kb...->k...", scale, g)
        noise = torch.normal(0.0, noise_multiplier * max_norm, size=total.shape,
                             generator=generator, device=total.device)
        sums[name] = (total + noise) / expected_batch
    return sums
