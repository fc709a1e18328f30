"""Train many small networks of one architecture at once, each on its own subset of rows.

Stolen Memories' attacker trains tens of proxy and shadow models per target (10 proxies per
attacked layer, 10 shadow models and a proxy for each), all with the target's recipe. On a CPU
most of a tiny model's step is Python overhead, so they are trained together: their parameters
are stacked (:func:`torch.func.stack_module_state`) and one :func:`torch.func.vmap` call runs
every model on its own mini-batch. The loss is the *sum* of the models' mean losses, so each
model's gradient is exactly its own; SGD (momentum, Nesterov, weight decay) and Adam update
every element independently, so training the stack is training each model separately, with
the same recipe semantics as :func:`miarepro.training.train_model` (optimizer, learning-rate
milestones, epochs, batch size, loss). Dropout draws different masks per model.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from miarepro.training import DEFAULT_RECIPE, make_optimizer, per_sample_loss


class Ensemble:
    """``K`` trained copies of one architecture: stacked parameters and one module to run them.

    Calling it maps inputs ``(K, n, *shape)`` (each model its own rows) or ``(n, *shape)``
    (the same rows for every model) to logits ``(K, n, C)``, in evaluation mode.
    """

    def __init__(self, base: nn.Module, params: dict[str, torch.Tensor],
                 buffers: dict[str, torch.Tensor]) -> None:
        self.base, self.params, self.buffers = base, params, buffers

    def __len__(self) -> int:
        return int(next(iter(self.params.values())).shape[0])

    def forward(self, inputs: torch.Tensor, shared: bool = False) -> torch.Tensor:
        """Logits of every model, with gradients and in the module's current mode."""

        def one(params: dict, buffers: dict, x: torch.Tensor) -> torch.Tensor:
            return functional_call(self.base, (params, buffers), (x,))

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


def train_ensemble(build: Callable[[], nn.Module], inputs: torch.Tensor, labels: torch.Tensor,
                   subsets: np.ndarray, recipe: dict[str, Any], seed: int) -> Ensemble:
    """Train ``K = len(subsets)`` fresh models from ``build`` with ``recipe``.

    ``inputs`` ``(N, *shape)`` with ``labels`` ``(N,)`` are shared by all models, or
    ``(K, N, *shape)`` with ``(K, N)`` give each model rows of its own (a shadow model's
    features); ``subsets`` ``(K, n)`` are the row indices each model trains on (equal sizes).
    Initialisation and data order are seeded by ``seed``. A recipe's ``dp`` block is not
    applied (per-sample clipping does not stack), nor is image augmentation, which no Stolen
    Memories recipe uses: asking for it is an error rather than a silent change.
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
    per_model = labels.dim() == 2
    optimizer = make_optimizer(list(params.values()), recipe)
    milestones = sorted({round(f * int(recipe["epochs"])) for f in recipe["milestones"]})
    schedule = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones, recipe["gamma"])
    rows = torch.arange(n_models, device=inputs.device)[:, None]
    for _ in range(int(recipe["epochs"])):
        order = torch.argsort(torch.rand(n_models, n_rows, generator=generator), dim=1).to(
            inputs.device)
        for batch in order.split(int(recipe["batch_size"]), dim=1):
            chosen = subsets[rows, batch]  # (K, b) row indices
            x = inputs[rows, chosen] if per_model else inputs[chosen]
            y = labels[rows, chosen] if per_model else labels[chosen]
            ensemble.base.train()
            logits = ensemble.forward(x)
            loss = per_sample_loss(recipe["loss"], logits.flatten(0, 1), y.flatten()).view(
                n_models, -1).mean(dim=1).sum()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        schedule.step()
    for value in params.values():
        value.requires_grad_(False)
    ensemble.base.eval()
    return ensemble
