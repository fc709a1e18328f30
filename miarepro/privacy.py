"""DP-SGD for the ``training.dp`` option (Stolen Memories' differentially private targets).

A recipe with ``dp: {epsilon, delta, max_grad_norm}`` trains with opacus: per-sample gradients
clipped to ``max_grad_norm``, Gaussian noise of ``noise_multiplier * max_grad_norm`` added to
their sum, batches drawn by Poisson sampling at rate ``batch_size / N``. The noise multiplier is
solved by opacus's RDP accountant so that the planned steps spend exactly the target
``(epsilon, delta)``; the accountant attached to the optimizer then records what the steps
actually taken spent, for the model card.

The checks here are plain Python (no torch, no opacus) so that config validation can call them
at start-up; opacus is imported only by the functions that train.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from miarepro.options import unknown

if TYPE_CHECKING:
    import torch
    from opacus.accountants import RDPAccountant
    from opacus.optimizers import DPOptimizer
    from torch import nn

#: The keys of a ``dp`` block and their defaults (``delta``'s depends on N, see resolve_delta).
DP_DEFAULTS: dict[str, float | None] = {"epsilon": None, "delta": None, "max_grad_norm": 1.0}
#: The accountant's epsilon for the solved noise may fall short of the target by this share.
RELATIVE_TOLERANCE = 1e-3
#: Stream of the model seed that draws the noise (the sampling uses the training generator).
NOISE_STREAM = 1


@dataclass(frozen=True)
class DPPlan:
    """What one DP-SGD run does: its budget, its sampling and the noise that meets the budget."""

    epsilon: float
    delta: float
    max_grad_norm: float
    sample_rate: float
    steps_per_epoch: int
    steps: int
    noise_multiplier: float


def check_dp(dp: Any, n_train: int | None, where: str = "training.dp") -> None:
    """Reject a ``dp`` block that would not give the guarantee it states, naming the key.

    ``n_train`` (the largest training set that will use it; None if unknown) bounds
    ``delta``: a delta of 1/N or more allows releasing a whole record in the clear.
    """
    if not isinstance(dp, Mapping):
        raise ValueError(f"{where}: expected a mapping of {list(DP_DEFAULTS)}, got {dp!r}")
    for key in dp:
        if key not in DP_DEFAULTS:
            raise ValueError(f"{where}.{key}: " + unknown("key", key, DP_DEFAULTS))
    if "epsilon" not in dp:
        raise ValueError(f"{where}.epsilon: required (the privacy budget)")
    for key in ("epsilon", "delta", "max_grad_norm"):
        value = dp.get(key, DP_DEFAULTS[key])
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise ValueError(f"{where}.{key}: must be a number > 0, got {value!r}")
    delta = dp.get("delta")
    if delta is not None and n_train and delta >= 1 / n_train:
        raise ValueError(f"{where}.delta: {delta:g} is not below 1/N = {1 / n_train:g} "
                         f"(N = {n_train} training records); the default is 1/(10 N)")


def resolve_delta(dp: Mapping[str, Any], n_train: int) -> float:
    """The block's ``delta``, or 1/(10 N): comfortably below the 1/N the guarantee needs."""
    delta = dp.get("delta")
    return float(delta) if delta is not None else 1 / (10 * n_train)


def plan(dp: Mapping[str, Any], n_train: int, batch_size: int, epochs: int,
         where: str = "training.dp") -> DPPlan:
    """Validate ``dp`` and solve the noise multiplier that spends it over the recipe's steps.

    Each step's Poisson batch has the recipe's batch size in expectation (sample rate
    ``B / N``), and an epoch is ``int(N / B)`` steps: ``floor(N / B) B`` records in
    expectation, where opacus's loader takes ``ceil(N / B)`` steps of a smaller batch, ``N``
    records (on BCW's 142 training records at batch 32: 4 steps of 32 against 5 of 28.4). The
    accountant is asked for exactly the steps that run.
    """
    check_dp(dp, n_train, where)
    epsilon = float(dp["epsilon"])
    delta = resolve_delta(dp, n_train)
    sample_rate = min(1.0, batch_size / n_train)
    steps_per_epoch = int(1 / sample_rate)
    steps = steps_per_epoch * epochs
    try:
        sigma = noise_multiplier(epsilon, delta, sample_rate, steps)
    except ValueError as error:  # opacus: "The privacy budget is too low."
        raise ValueError(f"{where}.epsilon: {epsilon:g} cannot be met over {steps} steps at "
                         f"sample rate {sample_rate:.4g} ({error})") from None
    return DPPlan(epsilon, delta, float(dp.get("max_grad_norm", DP_DEFAULTS["max_grad_norm"])),
                  sample_rate, steps_per_epoch, steps, sigma)


@functools.lru_cache(maxsize=64)
def noise_multiplier(epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """The smallest noise (to ``RELATIVE_TOLERANCE``) whose RDP epsilon after ``steps`` is at
    most ``epsilon``. Cached: the bisection takes up to a few seconds, and every model of a
    study in one process (tests, benchmarks) asks the same question."""
    from opacus.accountants.utils import get_noise_multiplier

    return float(get_noise_multiplier(
        target_epsilon=epsilon, target_delta=delta, sample_rate=sample_rate, steps=steps,
        accountant="rdp", epsilon_tolerance=RELATIVE_TOLERANCE * epsilon))


def check_module(model: nn.Module, architecture: Mapping[str, Any],
                 where: str = "training.dp") -> None:
    """Refuse layers that mix samples (batch norm): their per-sample gradients do not exist,
    so clipping them would not bound any one record's influence."""
    from opacus.validators import ModuleValidator

    errors = ModuleValidator.validate(model, strict=False)
    if errors:
        raise ValueError(f"{where}: architecture {architecture.get('arch')!r} cannot be "
                         f"trained with DP-SGD: {errors[0]}")


def noise_seed(seed: int) -> int:
    """A seed for the noise generator, independent of the stream that samples the batches."""
    return int(np.random.SeedSequence([seed, NOISE_STREAM]).generate_state(1)[0])


def make_private(model: nn.Module, optimizer: torch.optim.Optimizer, dp_plan: DPPlan,
                 seed: int, batch_size: int
                 ) -> tuple[nn.Module, DPOptimizer, RDPAccountant]:
    """Wrap ``model`` for per-sample gradients and ``optimizer`` for clipping and noise.

    The noise generator lives on the model's device (``torch.normal`` needs that) and is
    seeded from the model seed, so the same seed gives the same model. Returns the wrapped
    module, the DP optimizer and an RDP accountant that counts every step it takes.
    """
    import torch
    from opacus import GradSampleModule
    from opacus.accountants import RDPAccountant
    from opacus.optimizers import DPOptimizer

    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(noise_seed(seed))
    wrapped = GradSampleModule(model, loss_reduction="mean")
    private = DPOptimizer(optimizer, noise_multiplier=dp_plan.noise_multiplier,
                          max_grad_norm=dp_plan.max_grad_norm, expected_batch_size=batch_size,
                          loss_reduction="mean", generator=generator)
    accountant = RDPAccountant()
    private.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=dp_plan.sample_rate))
    return wrapped, private, accountant


def poisson_batches(n: int, sample_rate: float, steps: int,
                    generator: torch.Generator) -> Iterator[torch.Tensor]:
    """One epoch's batches: each record joins each batch independently with ``sample_rate``
    (opacus's sampler, the sampling its accountant assumes); batches may be empty."""
    import torch
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    sampler = UniformWithReplacementSampler(num_samples=n, sample_rate=sample_rate,
                                            generator=generator, steps=steps)
    for indices in sampler:
        yield torch.as_tensor(indices, dtype=torch.long)


def card(dp_plan: DPPlan, accountant: RDPAccountant) -> dict[str, Any]:
    """The model card's privacy fields; ``dp_epsilon`` is what the steps taken spent."""
    return {"dp_noise_multiplier": dp_plan.noise_multiplier,
            "dp_epsilon": float(accountant.get_epsilon(dp_plan.delta)),
            "dp_target_epsilon": dp_plan.epsilon, "dp_delta": dp_plan.delta,
            "dp_max_grad_norm": dp_plan.max_grad_norm, "dp_sample_rate": dp_plan.sample_rate,
            "dp_steps": dp_plan.steps, "dp_accountant": "rdp"}
