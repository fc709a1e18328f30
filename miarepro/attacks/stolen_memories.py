"""Stolen Memories (Leino & Fredrikson 2020): white-box attacks read from the target's weights.

A linear softmax model fitted to Gaussian class-conditional data carries its training set's
class means in its weights (Eq. 6), so the difference between the target's weights and those
of a *proxy* trained the same way on the attacker's own data approximates the Bayes-optimal
membership test of Theorem 1 (Observation 1). Every attack here returns that test's logit:
``s̄(logit) > 1/2``, i.e. ``logit > 0``, is the paper's "member" decision (``threshold=0``).

- ``omniscient`` (Theorem 1) plugs in the true generating parameters and the training set's
  empirical class means: the Bayes-optimal attack on the synthetic data.
- ``bayes_wb`` (Algorithms 1 and 4): at an attacked layer ℓ, ``f = g ∘ h``; the proxies are
  copies of the top part ``g`` trained on the target's own features ``h(x)`` of hold-out records
  (at the top layer of a linear model: whole linear models on ``x``). With the local linear
  models of internal influence (:mod:`miarepro.influence`), the score is
  ``(χ_target - mean χ_proxy)ᵀ h(x) + g_target(0)_y - mean g_proxy(0)_y``. ``meta=True`` combines
  the layers by the meta model of §4.2.
- ``general_wb`` (Algorithm 2): per layer a learned displacement ``D_ℓ`` replaces the
  subtraction, element-wise on (target, proxy) influence pairs, and a meta model ``M`` combines
  the layers; they are trained jointly on shadow models of the hold-out data, and the widths
  ``(n_D, n_M)`` are chosen on validation shadow models, never on the evaluation records.

One fit per target (:func:`fit_stolen_memories`) trains every attack-side model: the proxies,
the shadow models and one proxy per shadow model, all with the target's recipe
(:func:`miarepro.ensemble.train_ensemble` trains them together), then the meta models and
displacements, and stores each attack's logit for every record. Choices where the paper is
silent (matrix §2.9), also in the studies' deviations:

- a proxy trains on a random half of the hold-out records (the target's training-set size);
- a shadow model trains on a random half ``S1`` of the hold-out records and its proxy on the
  other half ``S0`` (Algorithm 2); its records are ``S1`` labelled member, ``S0`` non-member;
- the meta model and the displacements: Adam, ``epochs`` (32) over the shadow rows, binary
  cross-entropy (the paper's "0-1 loss" cannot be trained with Adam), batch 128;
- ``n = 0`` hidden units means no hidden layer: a displacement ``a x + b y`` (the paper's
  "minimal capacity", which can represent subtraction) and a linear meta model;
- proxies and shadows of a DP-trained target are trained by DP-SGD with the target's block
  (epsilon, delta, clipping norm; the noise solved for their own training-set size), as the
  attacker copies the target's training procedure (:mod:`miarepro.ensemble`).

As Algorithm 2 prescribes, a shadow model's non-members ``S0`` train its proxy, so on shadow
rows they look less like members than a target's test records do: the sweep's validation
accuracy runs well above the target's (measured on the synthetic data: 0.93-0.96 against
0.74-0.78).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Annotated, Any, Literal

import numpy as np

from miarepro.attacks.base import AttackContext, StudyHandle, register
from miarepro.options import Range

Width = Annotated[int, Range(0)]
_ADAM_BATCH = 128
_META_HIDDEN = 16  # §4.2: the meta model over bayes-wb's layers is an MLP of 16 hidden units
#: the meta models' and displacements' dtype: general-wb runs its displacement on every
#: feature of every row (2,564 per row on a LeNet), so float32 halves its memory traffic;
#: float64 gave the same predictions to 1e-4 (tests) and took twice as long on a LeNet
_MODEL_DTYPE = "float32"


def omniscient_logits(x: np.ndarray, labels: np.ndarray, true_means: np.ndarray,
                      variances: np.ndarray, sample_means: np.ndarray) -> np.ndarray:
    """Theorem 1: ``w_y = (μ̂_y - μ*_y) / σ²``, ``b_y = Σ_j (μ*_yj² - μ̂_yj²) / (2 σ_j²)``; the
    log-likelihood ratio of the training distribution ``N(μ̂_y, σ²)`` against the population's
    ``N(μ*_y, σ²)`` at ``x``, with the prior ``Pr[member] = 1/2``."""
    mu_hat, mu_star = sample_means[labels], true_means[labels]
    weights = (mu_hat - mu_star) / variances
    bias = ((mu_star**2 - mu_hat**2) / (2 * variances)).sum(axis=1)
    return (weights * x).sum(axis=1) + bias


@register("omniscient", whitebox=True, knows_training_set=True, threshold=0.0)
def omniscient(ctx: AttackContext) -> np.ndarray:
    """Stolen Memories' omniscient attack: Theorem 1 with the generator's true parameters."""
    if ctx.study is None:
        raise ValueError("the omniscient attack reads the dataset and the target's training set")
    meta = ctx.study.meta()
    if "means" not in meta or "variances" not in meta:
        raise ValueError("the omniscient attack needs a dataset with known Gaussian class "
                         "means and variances (source: sm_synthetic)")
    x = ctx.study.features().reshape(len(ctx.labels), -1).astype(np.float64)
    means = np.asarray(meta["means"], dtype=np.float64)
    train = ctx.study.training_indices("target", ctx.target_index)
    sample_means = np.array([x[train][ctx.labels[train] == c].mean(axis=0)
                             if np.any(ctx.labels[train] == c) else means[c]
                             for c in range(len(means))])
    return omniscient_logits(x[ctx.audit], ctx.labels[ctx.audit], means,
                             np.asarray(meta["variances"], dtype=np.float64), sample_means)


def fit_stolen_memories(
    study: StudyHandle, group: int, layers: Literal["last", "all"] = "all",
    proxies: Annotated[int, Range(1)] = 10, shadows: Annotated[int, Range(1)] = 10,
    steps: Annotated[int, Range(1)] = 32, displacement_widths: list[Width] = (0, 4, 16),
    meta_widths: list[Width] = (0, 16), epochs: Annotated[int, Range(1)] = 32,
    lr: Annotated[float, Range(0, low_open=True)] = 1e-2,
    shadow_records: Annotated[int, Range(4)] | None = None,
) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Every attack-side model of bayes-wb and general-wb against target ``group``.

    ``layers``: every ``Linear`` / ``Conv2d`` layer, as the paper's general-wb attacks every
    target ("a displacement function, D_l, for each layer, l, of the network, [combined] with
    a meta attack model", §5; its Figure 6 sweeps that meta model's width on an MLP), while
    bayes-wb reads the top layer (Algorithm 1, the paper's MLP targets) unless told another or
    its meta model (the LeNet targets); ``"last"`` fits the top layer alone, for less work.
    ``proxies`` are averaged per layer; ``shadows`` shadow models train the meta models and as
    many more validate the ``(n_D, n_M)`` sweep over ``displacement_widths`` x
    ``meta_widths``; ``steps`` Riemann steps integrate the influence.
    ``shadow_records`` caps the hold-out records the shadow experiment splits into halves (all
    by default, so that a shadow trains on as many records as the target; capped, on half the
    cap): each shadow model holds their influence pairs at every layer, which for a LeNet on
    35,000 MNIST records would be tens of GB.
    """
    import torch

    from miarepro.ensemble import train_ensemble
    from miarepro.influence import layer_boundaries, split_at
    from miarepro.training import device

    dev = device()
    X = torch.as_tensor(study.features()).to(dev)
    y = torch.as_tensor(study.labels()).to(dev)
    hold_out = study.parts(group)["reference_pool"]
    size = len(study.training_indices("target", group))
    if len(hold_out) < size or len(hold_out) < 2:
        raise ValueError(f"Stolen Memories' attacker trains proxies of the target's size ({size} "
                         f"records) on its hold-out records, but there are {len(hold_out)}")
    target = study.load_model("target", group).to(dev)
    cuts = layer_boundaries(target)
    cuts = cuts[-1:] if layers == "last" else cuts
    recipe = study.recipe()
    rng = np.random.default_rng([study.fit_seed(group), 0x5AFE])
    seeds = iter(rng.integers(0, 2**31, size=1000))

    def top_part(k: int):  # a fresh, untrained copy of the layers above cut k
        return lambda: split_at(study.new_model().to(dev), k)[1]

    # the target's layer pairs: its own and its proxies' local linear models, every record
    target_pairs = []
    for k in cuts:
        h, g = split_at(target, k)
        with torch.no_grad():
            features = h(X)
        subsets = np.stack([rng.choice(hold_out, size, replace=False) for _ in range(proxies)])
        proxy = train_ensemble(top_part(k), features, y, subsets, recipe, int(next(seeds)))
        target_pairs.append(_pairs(g, [proxy.module(i) for i in range(proxies)], features, y,
                                   steps))
    dp_plans = {"proxies": proxy.dp_plan}

    # shadow models on halves S1 of the hold-out records, their proxies on the other halves S0
    pool = (hold_out if shadow_records is None or shadow_records >= len(hold_out)
            else np.sort(rng.choice(hold_out, shadow_records, replace=False)))
    halves = np.stack([rng.permutation(len(pool)) for _ in range(2 * shadows)])
    n_in = len(pool) // 2
    shadow = train_ensemble(lambda: study.new_model().to(dev), X, y, pool[halves[:, :n_in]],
                            recipe, int(next(seeds)))
    dp_plans["shadows"] = shadow.dp_plan
    member = np.zeros((2 * shadows, len(pool)), dtype=bool)
    np.put_along_axis(member, halves[:, :n_in], True, axis=1)
    rows_y = y[pool]
    shadow_pairs = []  # per layer, per shadow model: pairs on the hold-out records
    for k in cuts:
        models = [shadow.module(i) for i in range(2 * shadows)]
        with torch.no_grad():
            features = torch.stack([split_at(m, k)[0](X[pool]) for m in models])
        proxy = train_ensemble(top_part(k), features, rows_y.expand(len(models), -1),
                               halves[:, n_in:], recipe, int(next(seeds)))
        shadow_pairs.append([_pairs(split_at(models[i], k)[1], [proxy.module(i)], features[i],
                                    rows_y, steps) for i in range(len(models))])
    dp_plans["shadow_proxies"] = proxy.dp_plan

    def stacked(pairs_by_layer: list, which: slice) -> list[tuple[torch.Tensor, ...]]:
        return [tuple(torch.cat([p[i] for p in layer[which]]) for i in range(5))
                for layer in pairs_by_layer]

    train_rows, valid_rows = stacked(shadow_pairs, slice(shadows)), stacked(
        shadow_pairs, slice(shadows, None))
    train_y = torch.as_tensor(member[:shadows].ravel(), dtype=torch.float32, device=dev)
    valid_y = member[shadows:].ravel()
    arrays: dict[str, np.ndarray] = {
        "bayes_wb": np.stack([_bayes_logit(p).cpu().numpy() for p in target_pairs])}
    bayes_train = torch.stack([_bayes_logit(p) for p in train_rows], dim=1)
    meta = _train(partial(_general_wb_model, len(cuts), None, _META_HIDDEN), [bayes_train],
                  train_y, epochs, lr, int(next(seeds)))
    arrays["bayes_wb_meta"] = _predict(meta, [torch.stack(
        [_bayes_logit(p) for p in target_pairs], dim=1)])
    grid = [(d, m) for d in displacement_widths for m in meta_widths]
    logits, accuracy, states = [], [], []
    for n_d, n_m in grid:
        model = _train(partial(_general_wb_model, len(cuts), n_d, n_m), train_rows, train_y,
                       epochs, lr, int(next(seeds)))
        accuracy.append(float(np.mean((_predict(model, valid_rows) > 0) == valid_y)))
        logits.append(_predict(model, target_pairs))
        states.append(model.state_dict())
    chosen = int(np.argmax(accuracy))
    # the trained attack models themselves: bayes-wb's meta model and general-wb's at every
    # point of the sweep (``general_wb_model.<index in grid>.``), so that each can be rechecked
    arrays.update({f"{prefix}.{key}": value.cpu().numpy() for prefix, state in
                   [("meta_model", meta.state_dict())]
                   + [(f"general_wb_model.{i}", state) for i, state in enumerate(states)]
                   for key, value in state.items()})
    arrays.update(general_wb=np.stack(logits), grid=np.array(grid, dtype=np.int64),
                  validation_accuracy=np.array(accuracy), chosen=np.array(chosen),
                  layer_positions=np.array(cuts))
    info = {"layers": [int(k) for k in cuts], "proxies": proxies, "shadows": shadows,
            "proxy_size": size, "hold_out": len(hold_out), "shadow_pool": len(pool),
            "steps": steps,
            # the attacker's DP-SGD noise where the target's recipe has a dp block
            "dp_noise_multipliers": {role: plan.noise_multiplier for role, plan in
                                     dp_plans.items() if plan is not None},
            "sweep": [{"n_d": d, "n_m": m, "validation_accuracy": a}
                      for (d, m), a in zip(grid, accuracy, strict=True)],
            "chosen": {"n_d": grid[chosen][0], "n_m": grid[chosen][1]}}
    return arrays, info


def _pairs(g: Any, proxies: list[Any], features: Any, labels: Any, steps: int) -> tuple:
    """``(χ_target, mean χ_proxy, z, b_target, mean b_proxy)`` per record, flattened."""
    import torch

    from miarepro.influence import local_linear

    chi, bias = local_linear(g, features, labels, steps)
    proxy = [local_linear(p, features, labels, steps) for p in proxies]
    chi_p = torch.stack([c for c, _ in proxy]).mean(0)
    bias_p = torch.stack([b for _, b in proxy]).mean(0)
    return (chi.flatten(1), chi_p.flatten(1), features.flatten(1), bias, bias_p)


def _bayes_logit(pairs: tuple) -> Any:
    """bayes-wb's local linear test: ``(χ - χ̃)ᵀ z + b - b̃`` (Algorithm 4)."""
    chi, chi_p, z, bias, bias_p = pairs
    return ((chi - chi_p) * z).sum(1) + bias - bias_p


def _small_mlp(inputs: int, hidden: int, bias: bool = True) -> Any:
    """At most one hidden layer; without one, a weighted sum (plus ``bias``)."""
    from torch import nn

    if hidden == 0:
        return nn.Linear(inputs, 1, bias=bias)
    return nn.Sequential(nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def _general_wb_model(n_layers: int, n_d: int | None, n_m: int) -> Any:
    """general-wb's model: a displacement per layer (``n_d`` hidden units; ``None`` = the
    layer's bayes-wb logit is the input) and the meta model over the layers' logits."""
    import torch
    from torch import nn

    class GeneralWB(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.displacements = nn.ModuleList(
                [] if n_d is None else [_small_mlp(2, n_d, bias=False) for _ in range(n_layers)])
            self.meta = _small_mlp(n_layers, n_m)

        def forward(self, layers: list) -> torch.Tensor:
            if n_d is None:
                return self.meta(layers[0]).squeeze(-1)
            logits = []
            for d, (weight_pairs, z, bias_pairs) in zip(self.displacements, layers, strict=True):
                weights = d(weight_pairs).squeeze(-1)
                logits.append((weights * z).sum(1) + d(bias_pairs)[:, 0])
            return self.meta(torch.stack(logits, 1)).squeeze(-1)

    return GeneralWB()


def _model_inputs(inputs: list) -> list:
    """The attack models' inputs in their dtype, built once per training or prediction: a
    layer's pairs ``(χ, χ̃, z, b, b̃)`` as ``([χ, χ̃] (n, F, 2), z, [b, b̃] (n, 2))``, the
    displacement's input stacked once rather than at every step; a plain tensor as it is."""
    import torch

    dtype = getattr(torch, _MODEL_DTYPE)
    return [(torch.stack(item[:2], -1).to(dtype), item[2].to(dtype),
             torch.stack(item[3:], -1).to(dtype)) if isinstance(item, tuple)
            else item.to(dtype) for item in inputs]


def _rows(inputs: list, index: Any) -> list:
    return [tuple(part[index] for part in item) if isinstance(item, tuple) else item[index]
            for item in inputs]


def _train(build: Callable[[], Any], inputs: list, labels: Any, epochs: int, lr: float,
           seed: int) -> Any:
    """Adam on binary cross-entropy over the shadow rows; ``inputs`` are row-aligned. The
    model is built after seeding, so its initial weights are its seed's alone, whatever drew
    from torch's global generator before. Each epoch gathers its shuffled rows once and takes
    its batches as slices of them: the same batches as gathered one by one."""
    import torch

    torch.manual_seed(seed)
    generator = torch.Generator().manual_seed(seed)
    dtype = getattr(torch, _MODEL_DTYPE)
    model = build().to(dtype).to(labels.device)
    inputs, labels = _model_inputs(inputs), labels.to(dtype)
    # foreach: one call per step for all parameters, not a Python loop over them; the same
    # updates bit for bit (measured), at 0.90 of the time on a 16-unit general-wb model
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, foreach=True)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=generator).to(labels.device)
        shuffled, shuffled_labels = _rows(inputs, order), labels[order]
        for start in range(0, len(labels), _ADAM_BATCH):
            batch = slice(start, start + _ADAM_BATCH)
            optimizer.zero_grad(set_to_none=True)
            loss_fn(model(_rows(shuffled, batch)), shuffled_labels[batch]).backward()
            optimizer.step()
    return model.eval()


def _predict(model: Any, inputs: list) -> np.ndarray:
    import torch

    inputs = _model_inputs(inputs)
    with torch.no_grad():
        return model(inputs).cpu().numpy()


def _fit_arrays(ctx: AttackContext) -> dict[str, np.ndarray]:
    if ctx.fit is None:
        raise ValueError("this attack needs its fit (the proxies, shadows and meta models)")
    return ctx.fit


@register("bayes_wb", whitebox=True, fit=fit_stolen_memories, fit_name="stolen_memories",
          threshold=0.0)
def bayes_wb(ctx: AttackContext, layer: int = -1, meta: bool = False) -> np.ndarray:
    """Stolen Memories' bayes-wb: target minus averaged proxy weights (or influences).

    ``layer`` indexes the attacked layers (-1: the top one); ``meta`` combines all of them
    with the meta model trained on shadow models.
    """
    fit = _fit_arrays(ctx)
    if meta:
        return fit["bayes_wb_meta"][ctx.audit]
    per_layer = fit["bayes_wb"]
    if not -len(per_layer) <= layer < len(per_layer):
        raise ValueError(f"layer {layer} is not attacked; the fit attacks {len(per_layer)} "
                         f"layer(s) (set layers: all in the fit to attack every layer)")
    return per_layer[layer][ctx.audit]


@register("general_wb", whitebox=True, fit=fit_stolen_memories, fit_name="stolen_memories",
          threshold=0.0)
def general_wb(ctx: AttackContext, n_d: Annotated[int, Range(0)] | None = None,
               n_m: Annotated[int, Range(0)] | None = None) -> np.ndarray:
    """Stolen Memories' general-wb: learned displacements and meta model, trained on shadows.

    By default the ``(n_D, n_M)`` the fit chose on validation shadow models; ``n_d`` with
    ``n_m`` picks another point of the fit's sweep (Figure 5's minimal and 16-unit variants).
    """
    fit = _fit_arrays(ctx)
    if (n_d is None) != (n_m is None):
        raise ValueError("general_wb: give both n_d and n_m, or neither (the chosen pair)")
    grid = [tuple(int(v) for v in row) for row in fit["grid"]]
    if n_d is None:
        return fit["general_wb"][int(fit["chosen"])][ctx.audit]
    if (n_d, n_m) not in grid:
        raise ValueError(f"general_wb: (n_d={n_d}, n_m={n_m}) is not in the fit's sweep {grid} "
                         "(displacement_widths x meta_widths)")
    return fit["general_wb"][grid.index((n_d, n_m))][ctx.audit]
