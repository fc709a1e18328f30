"""Subpop (Subpopulation-based membership inference; matrix §5) and its two new baselines.

The paper's equations were lost in extraction; these are the reconstructions of matrix §5.1,
also listed in the studies' deviations:

- ``subpop`` (Eq. 3): ``m(x, y) = (1/K) Σ_k ℓ(f(x'_k), y) - ℓ(f(x), y)``: a member's loss is
  much lower than that of records like it. The ``K`` records ``x'_k = G(z̃_k)`` come from a BiGAN
  generator (:mod:`miarepro.bigan`) whose encoder is the victim's frozen last hidden layer
  ``h``, trained on the attacker's records only, at latents ``z̃ = z + ε``,
  ``ε_j ~ N(0, (β z_j)²)``, ``z = h(x)``; every crafted record takes the target's label ``y``.
- ``subpop_blackbox``: the same with a standard BiGAN's own encoder instead of ``h``; it only
  queries the victim.
- ``subpop_natural``: the ``K`` nearest records to ``x`` of its class by cosine similarity of
  ``h`` among the attacker's records (SVHN's extra split at paper scale), no generator.
- ``subpop_inverse`` (a diagnostic): Eq. 3 with a perfect inverse of ``h`` in place of the
  generator, the victim's last layer applied to the noisy latents themselves.
- ``yeom`` (Yeom et al. 2018): member iff the loss is below the target's average training
  loss, which the attacker is assumed to know.
- ``merlin`` (Jayaraman et al. 2021, MERLIN): the fraction of ``T`` Gaussian perturbations
  ``x + N(0, σ² I)`` that raise the victim's loss; members sit near a minimum of the loss. The
  noise scale comes from the paper's 10-trial random search, run here on a shadow model whose
  members the attacker knows: records of its pool scored by that model's membership, never the
  target's (in a balanced split that pool is the audited one).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np

from miarepro import io, signals
from miarepro.attacks.base import AttackContext, StudyHandle, register
from miarepro.options import Range

Positive = Annotated[float, Range(0, low_open=True)]
Count = Annotated[int, Range(1)]
Fraction = Annotated[float, Range(0, 1)]
Widths = list[Annotated[int, Range(1)]]
Networks = Literal["mlp", "conv"]
_CHUNK = 128  # audited records whose crafted records go through the victim at once


def subpopulation_scores(target_loss: np.ndarray, crafted_loss: np.ndarray) -> np.ndarray:
    """Eq. 3: mean loss of each record's ``K`` subpopulation records ``(n, K)`` minus its own."""
    return np.asarray(crafted_loss, dtype=np.float64).mean(axis=1) - target_loss


def victim_latent(model: Any) -> Callable[[Any], Any]:
    """``h``: the input of the model's last ``Linear`` layer (the paper's "last fully connected
    layer before the softmax", 100-d for its MLP and 84-d for LeNet), captured by a hook."""
    from torch import nn

    heads = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if not heads:
        raise ValueError(f"{type(model).__name__} has no linear last layer to take h from")

    def h(x):
        captured = []
        handle = heads[-1].register_forward_hook(lambda _m, inputs, _o: captured.append(inputs[0]))
        try:
            model(x)
        finally:
            handle.remove()
        return captured[0].flatten(1)

    return h


def _attacker_records(study: StudyHandle, group: int) -> np.ndarray:
    records = study.parts(group)["population"]
    if len(records) < 2:
        raise ValueError("Subpop's generator trains on the attacker's own records, the split's "
                         "'population' (kept out of every model); this study's split has none: "
                         "set split.population_fraction (balanced) or fractions.population")
    return records


def class_kept(query: Callable[[np.ndarray], np.ndarray], classes: np.ndarray,
               crafted: np.ndarray) -> float:
    """The share of records whose crafted record the victim gives the record's own predicted
    class, ``classes`` (``query``: the victim's logits): Subpop's premise that "crafted samples
    belong to the same subpopulation as the original images" (§3), measured on the attacker's
    records. A collapsed generator, one image for every latent, keeps about one class in ten."""
    return float(np.mean(query(crafted).argmax(1) == classes))


def _fit_bigan(study: StudyHandle, group: int, own_encoder: bool, networks: str,
               generator_widths: list[int] | None, discriminator_widths: list[int] | None,
               latent: int | None, epochs: int, gan_epochs: int, batch_size: int, lr: float,
               cosine_weight: float, attempts: int, min_class_kept: float,
               ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Train the BiGAN until it is good enough, as the paper trains until its generator's
    images are (its threshold is lost): a generator whose records crafted from the attacker's
    own records' codes keep the victim's class for at least ``min_class_kept`` of them
    (:func:`class_kept`). A GAN can collapse to one image under one seed and not under the
    next, so a failed attempt retrains under a new seed, up to ``attempts`` in all; the first
    attempt's seed is the fit's own. If none is good enough, the one keeping the most classes
    is kept and the card says so (``good_enough``): claims on its scores are then not run."""
    import torch

    from miarepro import bigan
    from miarepro.training import QUERY_BATCH, device

    dev = device()
    X = study.features()
    images = torch.as_tensor(X[_attacker_records(study, group)]).to(dev)
    paper_g, paper_d = bigan.PAPER_WIDTHS[networks]
    spec = {"networks": networks, "shape": list(X.shape[1:]),
            "generator_widths": list(generator_widths or paper_g),
            "discriminator_widths": list(discriminator_widths or paper_d),
            "sigmoid": bool(X.min() >= 0 and X.max() <= 1), "own_encoder": own_encoder}
    latents = measure = None
    if own_encoder:
        spec["latent"] = latent or (100 if networks == "mlp" else 84)
    else:
        victim = study.load_model("target", group).to(dev)
        victim.requires_grad_(False)  # no gradient may reach the victim
        h = victim_latent(victim)
        with torch.no_grad():
            latents = h(images)
        spec["latent"] = int(latents.shape[1])
        measure = h

    def query(x: np.ndarray) -> np.ndarray:
        return study.query("target", group, x)

    classes = query(images.cpu().numpy()).argmax(1)  # what the victim calls the records
    tried, best = [], None
    for attempt in range(attempts):
        entropy = [study.fit_seed(group), 0xB1] + ([attempt] if attempt else [])
        seed = int(np.random.default_rng(entropy).integers(2**31))
        generator, encoder, log = bigan.train(images, latents, spec, epochs, batch_size, lr,
                                              seed=seed, gan_epochs=gan_epochs, measure=measure,
                                              cosine_weight=cosine_weight)
        with torch.no_grad():  # in batches, as scoring crafts them: a generator's feature
            # maps for a whole attacker set would not fit a GPU at the paper's scale
            crafted = np.concatenate([
                generator(encoder(images[s:s + QUERY_BATCH]) if encoder is not None
                          else latents[s:s + QUERY_BATCH]).cpu().numpy()
                for s in range(0, len(images), QUERY_BATCH)])
        kept = class_kept(query, classes, crafted)
        tried.append({"seed": seed, "class_kept": round(kept, 4),
                      "final_cosine": round(log["cosine"][-1], 4),
                      "final_d_loss": round(log["d_loss"][-1], 4)})
        if best is None or kept > best[0]:
            best = (kept, generator, encoder, log)
        if kept >= min_class_kept:
            break
    kept, generator, encoder, log = best
    good_enough = kept >= min_class_kept
    arrays = {"spec": np.array(json.dumps(spec)), "good_enough": np.array(good_enough),
              **{f"log_{k}": np.asarray(v) for k, v in log.items()},
              **{f"generator.{k}": v.cpu().numpy() for k, v in generator.state_dict().items()}}
    if encoder is not None:
        arrays.update({f"encoder.{k}": v.cpu().numpy() for k, v in encoder.state_dict().items()})
    info = {"attacker_records": len(images), "latent": spec["latent"],
            "good_enough": good_enough, "class_kept": round(kept, 4),
            "min_class_kept": min_class_kept, "attempts": tried,
            "final_cosine": round(log["cosine"][-1], 4),
            "final_d_loss": round(log["d_loss"][-1], 4)}
    return arrays, info


def fit_subpop(study: StudyHandle, group: int, networks: Networks = "mlp",
               generator_widths: Widths | None = None, discriminator_widths: Widths | None = None,
               epochs: Count = 30, gan_epochs: Annotated[int, Range(0)] = 0,
               batch_size: Count = 64, lr: Positive = 2e-4,
               cosine_weight: Annotated[float, Range(0)] = 0.0, attempts: Count = 3,
               min_class_kept: Fraction = 0.5,
               ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """Subpop's BiGAN against target ``group``: the victim's ``h`` as the frozen encoder.
    ``networks`` ``mlp`` / ``conv`` picks Appendix A.1's networks (widths default to the
    paper's); ``gan_epochs`` of plain-GAN pre-training come first; ``attempts`` and
    ``min_class_kept``: when the generator is good enough (:func:`_fit_bigan`)."""
    return _fit_bigan(study, group, False, networks, generator_widths,
                      discriminator_widths, None, epochs, gan_epochs, batch_size, lr,
                      cosine_weight, attempts, min_class_kept)


def fit_subpop_blackbox(study: StudyHandle, group: int, networks: Networks = "mlp",
                        generator_widths: Widths | None = None,
                        discriminator_widths: Widths | None = None, latent: Count | None = None,
                        epochs: Count = 30, gan_epochs: Annotated[int, Range(0)] = 0,
                        batch_size: Count = 64, lr: Positive = 2e-4,
                        cosine_weight: Annotated[float, Range(0)] = 0.0,
                        attempts: Count = 3, min_class_kept: Fraction = 0.5,
                        ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The black-box variant's standard BiGAN: its own encoder to a ``latent``-d code (default
    the paper's 100 for MLP, 84 for convolutional networks); the victim is only queried, to check
    the generator. Its ``cosine_weight`` ties ``E(G(z))`` to ``z`` (the white-box fit ties
    ``h(G(z))``)."""
    return _fit_bigan(study, group, True, networks, generator_widths,
                      discriminator_widths, latent, epochs, gan_epochs, batch_size, lr,
                      cosine_weight, attempts, min_class_kept)


def trained_networks(fit: dict[str, np.ndarray]) -> tuple[Any, Any]:
    """The trained generator and (black-box; else None) encoder of a fit's arrays: rebuilding
    them, torch's import included, counts as reading the fit (not the attack's time)."""
    with io.reading(fit):
        import torch

        from miarepro import bigan

        spec = json.loads(str(fit["spec"]))
        generator, _, encoder = bigan.build(spec)
        for prefix, module in (("generator", generator), ("encoder", encoder)):
            if module is not None:
                module.load_state_dict({k[len(prefix) + 1:]: torch.as_tensor(v)
                                        for k, v in fit.items() if k.startswith(prefix + ".")})
                module.eval()
    return generator, encoder


def _subpopulation_attack(ctx: AttackContext, study: Any, encode: Callable[[Any], Any],
                          crafted_logits: Callable[[np.ndarray], np.ndarray], samples: int,
                          beta: float) -> np.ndarray:
    """Eq. 3 with ``samples`` records crafted from noisy copies of each record's latent
    ``encode(x)`` (``h``, or the black-box variant's encoder); ``crafted_logits`` maps the
    ``(n K, d)`` noisy latents to the victim's logits on the records crafted from them."""
    import torch

    from miarepro.bigan import noisy_latents

    x, y = study.features(), ctx.labels
    rng = np.random.default_rng([ctx.seed, ctx.target_index, 0x5B])
    losses = np.empty((len(ctx.audit), samples))
    for start in range(0, len(ctx.audit), _CHUNK):
        rows = ctx.audit[start : start + _CHUNK]
        with torch.no_grad():
            z = encode(torch.as_tensor(x[rows])).double().numpy()
        latents = noisy_latents(z, beta, samples, rng).reshape(len(rows) * samples, -1)
        losses[start : start + len(rows)] = signals.cross_entropy(
            crafted_logits(latents), np.repeat(y[rows], samples)).reshape(len(rows), samples)
    return subpopulation_scores(_target_loss(ctx), losses)


def _generated(study: Any, target: int, generator: Any) -> Callable[[np.ndarray], np.ndarray]:
    """The victim's logits on the records a generator crafts from latents (queries only)."""
    import torch

    from miarepro.training import QUERY_BATCH

    def logits(latents: np.ndarray) -> np.ndarray:
        with torch.no_grad():  # in batches whose feature maps stay in cache
            crafted = torch.cat([generator(part) for part in torch.as_tensor(
                latents, dtype=torch.float32).split(QUERY_BATCH)]).numpy()
        return study.query("target", target, crafted)

    return logits


def _target_loss(ctx: AttackContext) -> np.ndarray:
    return signals.cross_entropy(ctx.target_logits[0, ctx.audit].astype(np.float64),
                                 ctx.labels[ctx.audit])


def _require_study(ctx: AttackContext, what: str) -> StudyHandle:
    if ctx.study is None:
        raise ValueError(f"{what} runs the victim on records of its own: it needs ctx.study")
    return ctx.study


@register("subpop", whitebox=True, fit=fit_subpop, fit_name="subpop")
def subpop(ctx: AttackContext, samples: Count = 30, beta: Positive = 0.05) -> np.ndarray:
    """Subpop: the victim's loss on the target against ``samples`` BiGAN-crafted neighbours."""
    study = _require_study(ctx, "Subpop")
    h = victim_latent(study.load_model("target", ctx.target_index))
    generator = trained_networks(ctx.fit)[0]
    return _subpopulation_attack(ctx, study, h, _generated(study, ctx.target_index, generator),
                                 samples, beta)


@register("subpop_inverse", whitebox=True)
def subpop_inverse(ctx: AttackContext, samples: Count = 30, beta: Positive = 0.05
                   ) -> np.ndarray:
    """Subpop with a perfect inverse of ``h`` (a diagnostic, not the paper's attack): each
    crafted record is the one whose latent is exactly ``z~ = z + eps``, so its logits are the
    victim's last layer at ``z~``.

    This is the limit a generator approaches as ``h(G(z~))`` tends to ``z~``. It isolates the
    attack's mechanism from the generator's quality: if Eq. 3 is at chance here at every
    ``beta``, a generator that approaches the inverse approaches chance too, as the crafted
    records' loss then follows the target's own (both are the same function of ``z``). It
    says nothing of a generator that departs from the inverse in a way that helps."""
    study = _require_study(ctx, "Subpop (perfect inverse)")
    model = study.load_model("target", ctx.target_index)  # first: it imports torch
    from torch import nn

    head = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    weight = head.weight.detach().double().numpy()
    bias = head.bias.detach().double().numpy()
    return _subpopulation_attack(ctx, study, victim_latent(model),
                                 lambda latents: latents @ weight.T + bias, samples, beta)


@register("subpop_blackbox", queries=True, fit=fit_subpop_blackbox, fit_name="subpop_blackbox")
def subpop_blackbox(ctx: AttackContext, samples: Count = 30, beta: Positive = 0.05
                    ) -> np.ndarray:
    """Subpop (black-box): a standard BiGAN's own encoder instead of the victim's ``h``."""
    generator, encoder = trained_networks(ctx.fit)
    study = _require_study(ctx, "Subpop (black-box)")
    return _subpopulation_attack(ctx, study, encoder,
                                 _generated(study, ctx.target_index, generator), samples, beta)


@register("subpop_natural", whitebox=True)
def subpop_natural(ctx: AttackContext, samples: Count = 30,
                   pool: Literal["population", "ood"] = "population") -> np.ndarray:
    """Subpop with natural subpopulations: the nearest attacker records of the target's class
    in ``h`` (cosine).

    ``pool``: the attacker's records (the split's population), or a dataset's records that no
    model trains on (``ood``: SVHN's extra split with ``extra: true``, as in the paper). Only
    records of the audited record's own class are its neighbours: the paper's subpopulation
    shares the record's label (its crafted records take it), and a neighbour of another
    class, scored with that label, would look like a high-loss record and drag every score
    towards "member" for the records near a class boundary, non-members most (the reading
    of the paper; with neighbours of any class the attack fell below chance)."""
    study = _require_study(ctx, "Subpop (natural)")
    records = ctx.population if pool == "population" else study.parts(ctx.target_index)["ood"]
    h = victim_latent(study.load_model("target", ctx.target_index))  # first: it imports torch
    x = study.features()
    import torch

    def unit_latents(rows: np.ndarray) -> np.ndarray:  # a chunk of records at a time
        with torch.no_grad():
            z = np.concatenate([h(torch.as_tensor(x[rows[s : s + 4096]])).double().numpy()
                                for s in range(0, len(rows), 4096)])
        return z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)

    labels = ctx.labels[ctx.audit]
    neighbours = np.empty((len(ctx.audit), samples), dtype=np.int64)
    for label in np.unique(labels):
        same = records[ctx.labels[records] == label]
        if len(same) < samples:
            raise ValueError(f"natural subpopulations of {samples} records need at least as "
                             f"many records of each class in pool {pool!r}; class {label} "
                             f"has {len(same)}")
        pool_z, rows = unit_latents(same), np.flatnonzero(labels == label)
        for s in range(0, len(rows), _CHUNK):  # the K most similar, in no particular order
            chunk = rows[s : s + _CHUNK]
            nearest = np.argpartition(-unit_latents(ctx.audit[chunk]) @ pool_z.T, samples - 1,
                                      axis=1)[:, :samples]
            neighbours[chunk] = same[nearest]
    logits = ctx.target_logits[0, neighbours].astype(np.float64)  # (n, K, C)
    crafted_labels = np.repeat(labels, samples).reshape(len(ctx.audit), samples)
    return subpopulation_scores(_target_loss(ctx), signals.cross_entropy(logits, crafted_labels))


@register("yeom", threshold=0.0)
def yeom(ctx: AttackContext) -> np.ndarray:
    """Yeom et al. (2018): the target's average training loss minus the record's loss."""
    members = np.flatnonzero(ctx.target_mask)
    average = signals.cross_entropy(ctx.target_logits[0, members].astype(np.float64),
                                    ctx.labels[members]).mean()
    return average - _target_loss(ctx)


def merlin_scores(query: Callable[[np.ndarray], np.ndarray], x: np.ndarray, y: np.ndarray,
                  sigma: float, samples: int, rng: np.random.Generator) -> np.ndarray:
    """MERLIN: the fraction of ``samples`` perturbations ``x + N(0, σ² I)`` with a higher loss."""
    clean = signals.cross_entropy(query(x), y)
    raised = np.zeros(len(x))
    for _ in range(samples):
        noisy = (x + sigma * rng.standard_normal(x.shape)).astype(x.dtype)
        raised += signals.cross_entropy(query(noisy), y) > clean
    return raised / samples


def fit_merlin(study: StudyHandle, group: int, trials: Count = 10, noise_samples: Count = 30,
               sigma_range: list[Positive] = (1e-3, 1.0), records: Count = 250,
               ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """MERLIN's noise scale by random search: ``trials`` scales log-uniform in ``sigma_range``,
    each scored by AUC on ``records`` members and as many non-members of the group's first
    reference (shadow) model, drawn from its own pool; the best one is kept."""
    from sklearn.metrics import roc_auc_score

    if len(sigma_range) != 2 or not sigma_range[0] < sigma_range[1]:
        raise ValueError(f"sigma_range must be [low, high] with low < high, got {sigma_range}")
    shadow = study.reference_index(group, 0)
    pool = study.parts(group)["reference_pool"]
    inside = np.isin(pool, study.training_indices("reference", shadow))
    rng = np.random.default_rng([study.fit_seed(group), 0x3E1])
    chosen = [rng.permutation(pool[inside == side])[:records] for side in (True, False)]
    rows, member = np.concatenate(chosen), np.repeat([1, 0], [len(c) for c in chosen])
    x, y = study.features()[rows], study.labels()[rows]
    sigmas = np.exp(rng.uniform(*np.log(sigma_range), size=trials))
    aucs = np.array([roc_auc_score(member, merlin_scores(
        lambda inputs: study.query("reference", shadow, inputs), x, y, s, noise_samples,
        np.random.default_rng([study.fit_seed(group), k]))) for k, s in enumerate(sigmas)])
    best = int(np.argmax(aucs))
    return ({"sigma": np.float64(sigmas[best]), "noise_samples": np.int64(noise_samples),
             "trial_sigma": sigmas, "trial_auc": aucs},
            {"sigma": float(sigmas[best]), "shadow_auc": float(aucs[best]),
             "trials": [{"sigma": float(s), "auc": float(a)} for s, a in zip(sigmas, aucs,
                                                                               strict=True)]})


@register("merlin", needs_references=True, queries=True, fit=fit_merlin, fit_scope="references")
def merlin(ctx: AttackContext) -> np.ndarray:
    """Jayaraman et al. (2021) MERLIN: how often input noise raises the victim's loss."""
    study = _require_study(ctx, "MERLIN")
    rng = np.random.default_rng([ctx.seed, ctx.target_index, 0x3E2])
    return merlin_scores(lambda inputs: study.query("target", ctx.target_index, inputs),
                         study.features()[ctx.audit], ctx.labels[ctx.audit],
                         float(ctx.fit["sigma"]), int(ctx.fit["noise_samples"]), rng)
