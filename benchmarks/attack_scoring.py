"""Time reference-attack scoring at full scale on random logits.

Default size: 64 reference models x 1 query x 50,000 samples x 100 classes (float32 logits,
1.3 GB), of which 30,000 are audited (IN for a random half of the models each) and 20,000 form
the population set Z. Prints seconds per attack and the process's peak resident memory.

    python benchmarks/attack_scoring.py [--models 64] [--samples 50000] [--classes 100]
        [--population 20000] [--queries 1] [--attacks lira-online ...] [--peer]

``--attacks`` picks the attacks timed (default: LiRA online and offline and RMIA).

``--peer`` also times the peers on the same logits and masks, and compares each attack's peak
traced memory (numpy's allocations, by ``tracemalloc``, in a second call) with the peer's:

- LiRA against Carlini et al.'s own scoring: their ``score.py`` (logit-scaled confidence of each
  model's logits, in float64) followed by ``generate_ours`` of their ``plot.py`` (per-sample
  medians and standard deviations of the IN and OUT scores, ``scipy.stats.norm.logpdf``),
  ported line for line with its array shapes;
- offline RMIA against LeakPro's ``AttackRMIA`` as its ``prepare_attack`` and ``_run_attack``
  compute it: every model's softmax (torch's, as theirs; numpy's in the traced call, with the
  same shapes and dtypes), the true label's probability, the OUT models' ``nanmean``, the
  offline marginal, and for each audited sample the share of ``Z`` whose ratio it exceeds by
  ``gamma``, one sample at a time.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import resource
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from miarepro.attacks import AttackContext, get_attack

ATTACKS = {
    "lira-online": ("lira", {"mode": "online"}),
    "lira-offline": ("lira", {"mode": "offline"}),
    "rmia-offline": ("rmia", {"mode": "offline"}),
    "rmia-online": ("rmia", {"mode": "online"}),
    "attack_r": ("attack_r", {}),
    "watson": ("watson", {}),
    "sablayrolles": ("sablayrolles", {}),
    "shadow": ("shadow", {}),
}


def random_context(models: int, samples: int, classes: int, population: int, queries: int,
                   seed: int = 0) -> AttackContext:
    rng = np.random.default_rng(seed)
    pool = np.arange(samples - population)
    masks = np.zeros((models, samples), dtype=bool)
    masks[:, pool] = rng.random((models, len(pool))) < 0.5
    logits = np.empty((models + 1, queries, samples, classes), dtype=np.float32)
    for k in range(models + 1):  # one model at a time keeps the peak at the array itself
        logits[k] = rng.standard_normal((queries, samples, classes), dtype=np.float32)
    labels = rng.integers(0, classes, samples)
    return AttackContext(
        labels=labels, audit=pool, population=np.arange(len(pool), samples),
        validation=np.empty(0, dtype=np.int64), target_logits=logits[0],
        target_mask=rng.random(samples) < 0.5, reference_logits=logits[1:],
        reference_masks=masks, reference_pool=pool, seed=seed)


def carlini_lira(logits: np.ndarray, labels: np.ndarray, keep: np.ndarray,
                 target_logits: np.ndarray, audit: np.ndarray) -> np.ndarray:
    """Online LiRA as Carlini et al.'s code computes it (research/mi_lira_2021): ``logits``
    ``(K, A, N, C)`` of the reference models, ``keep`` ``(K, N)`` their training masks."""
    import scipy.stats

    def score(opredictions: np.ndarray) -> np.ndarray:  # score.py, one model's file
        opredictions = opredictions[None]  # their files hold (N, 1, A, C); ours (A, N, C)
        opredictions = np.moveaxis(opredictions, 2, 1)
        opredictions = opredictions - np.max(opredictions, axis=3, keepdims=True)
        predictions = np.array(np.exp(opredictions), dtype=np.float64)
        predictions = predictions / np.sum(predictions, axis=3, keepdims=True)
        count = predictions.shape[1]
        y_true = predictions[0, np.arange(count), :, labels[:count]]
        predictions[0, np.arange(count), :, labels[:count]] = 0
        y_wrong = np.sum(predictions[0], axis=2)
        return np.log(y_true + 1e-45) - np.log(y_wrong + 1e-45)  # (N, A)

    scores = np.array([score(model) for model in logits])  # (K, N, A)
    scores, keep = scores[:, audit], keep[:, audit]
    check_scores = score(target_logits)[audit][None]
    dat_in = [scores[keep[:, j], j, :] for j in range(scores.shape[1])]  # generate_ours
    dat_out = [scores[~keep[:, j], j, :] for j in range(scores.shape[1])]
    in_size = min(map(len, dat_in))
    out_size = min(map(len, dat_out))
    dat_in = np.array([x[:in_size] for x in dat_in])
    dat_out = np.array([x[:out_size] for x in dat_out])
    mean_in, mean_out = np.median(dat_in, 1), np.median(dat_out, 1)
    std_in, std_out = np.std(dat_in, 1), np.std(dat_out, 1)
    prediction = []
    for sc in check_scores:
        pr_in = -scipy.stats.norm.logpdf(sc, mean_in, std_in + 1e-30)
        pr_out = -scipy.stats.norm.logpdf(sc, mean_out, std_out + 1e-30)
        prediction.extend((pr_in - pr_out).mean(1))
    return -np.array(prediction)  # their score is member-low


def torch_softmax(values: np.ndarray) -> np.ndarray:
    """LeakPro's ``softmax_logits`` (``leakpro/attacks/utils/utils.py``, temperature 1): torch."""
    import torch

    values = torch.from_numpy(values)
    values = (values - values.max(dim=-1, keepdim=True).values).exp()
    return (values / values.sum(dim=-1, keepdim=True)).numpy()


def numpy_softmax(values: np.ndarray) -> np.ndarray:
    """The same in numpy, whose allocations ``tracemalloc`` sees (torch's it does not)."""
    values = np.exp(values - values.max(axis=-1, keepdims=True))
    return values / values.sum(axis=-1, keepdims=True)


def leakpro_rmia(logits: np.ndarray, labels: np.ndarray, keep: np.ndarray,
                 target_logits: np.ndarray, audit: np.ndarray, population: np.ndarray,
                 softmax: Callable[[np.ndarray], np.ndarray] = torch_softmax,
                 a: float = 0.3, gamma: float = 1.0) -> np.ndarray:
    """Offline RMIA as LeakPro's ``AttackRMIA`` computes it (``prepare_attack`` then
    ``_run_attack``), with our ``a`` and ``gamma``; ``logits`` ``(K, 1, N, C)``. Like theirs it
    keeps every model's whole softmax, and reads ``Z``'s logits into float64 arrays."""
    z_labels, n_z = labels[population], len(population)

    def z_logits(model_logits: np.ndarray) -> np.ndarray:  # their _get_z_logits
        values = np.zeros((n_z, model_logits.shape[-1]))
        values[:] = model_logits[population]
        return values

    p_z_theta = softmax(z_logits(target_logits[0]))[np.arange(n_z), z_labels]
    softmaxes = [softmax(z_logits(model[0])) for model in logits]
    p_z_models = np.array([values[np.arange(n_z), z_labels] for values in softmaxes])
    p_z = 0.5 * ((a + 1) * p_z_models.mean(axis=0) + (1 - a))
    ratio_z = p_z_theta / (p_z + 1e-6)
    del softmaxes
    y, n = labels[audit], len(audit)
    p_x_theta = softmax(target_logits[0][audit])[np.arange(n), y]
    softmaxes = [softmax(model[0][audit]) for model in logits]
    p_x_models = np.array([values[np.arange(n), y] for values in softmaxes])
    p_x_out = np.nanmean(np.where(~keep[:, audit], p_x_models, np.nan), axis=0)
    ratio_x = p_x_theta / (0.5 * ((a + 1) * p_x_out + (1 - a)) + 1e-6)
    return np.array([np.mean(ratio_x[i] / ratio_z > gamma) for i in range(n)])


def fresh(attack: Callable[..., np.ndarray], ctx: AttackContext,
          params: dict) -> Callable[[], np.ndarray]:
    """The attack on a copy of ``ctx`` each call: the context keeps the audit's statistics."""
    return lambda: attack(dataclasses.replace(ctx), **params)


def measure(score: Callable[[], np.ndarray], traced: Callable[[], np.ndarray] | None = None
            ) -> tuple[np.ndarray, float, float]:
    """``(scores, seconds, peak traced MiB)``: ``score`` timed in one call, memory traced in a
    call of ``traced`` (default ``score``: tracing slows allocation)."""
    start = time.perf_counter()
    scores = score()
    seconds = time.perf_counter() - start
    tracemalloc.start()
    (traced or score)()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return scores, seconds, peak


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=64)
    parser.add_argument("--samples", type=int, default=50_000)
    parser.add_argument("--classes", type=int, default=100)
    parser.add_argument("--population", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=1)
    parser.add_argument("--attacks", nargs="+", default=["lira-online", "lira-offline",
                                                         "rmia-offline"],
                        choices=sorted(ATTACKS))
    parser.add_argument("--peer", action="store_true",
                        help="also time Carlini et al.'s LiRA and LeakPro's RMIA on the same "
                             "arrays")
    args = parser.parse_args()
    if args.peer:
        torch_softmax(np.zeros((1, 2)))  # imports torch before anything is timed
    start = time.perf_counter()
    ctx = random_context(args.models, args.samples, args.classes, args.population, args.queries)
    print(f"context: logits {ctx.reference_logits.shape} float32 "
          f"({ctx.reference_logits.nbytes / 2**30:.2f} GiB), audit {len(ctx.audit)}, "
          f"|Z| {len(ctx.population)}; built in {time.perf_counter() - start:.1f} s")
    arrays = (ctx.reference_logits, ctx.labels, ctx.reference_masks, ctx.target_logits,
              ctx.audit)
    rmia_peer = functools.partial(leakpro_rmia, *arrays, ctx.population)
    peers = {"lira-online": ("Carlini et al.", functools.partial(carlini_lira, *arrays), None),
             "rmia-offline": ("LeakPro", rmia_peer,
                              functools.partial(rmia_peer, softmax=numpy_softmax))}
    for name in args.attacks:
        family, params = ATTACKS[name]
        ours = fresh(get_attack(family).fn, ctx, params)
        if not (args.peer and name in peers):
            start = time.perf_counter()
            scores = ours()
            print(f"{name:14s} {time.perf_counter() - start:7.2f} s")
            assert scores.shape == ctx.audit.shape and np.isfinite(scores).all()
            continue
        scores, seconds, memory = measure(ours)
        assert scores.shape == ctx.audit.shape and np.isfinite(scores).all()
        print(f"{name:14s} {seconds:7.2f} s, peak traced {memory:7.0f} MiB")
        peer, run_peer, traced_peer = peers[name]
        theirs, peer_seconds, peer_memory = measure(run_peer, traced_peer)
        rho = np.corrcoef(np.argsort(np.argsort(theirs)), np.argsort(np.argsort(scores)))[0, 1]
        print(f"  {peer:12s} {peer_seconds:7.2f} s, peak traced {peer_memory:7.0f} MiB (ours / "
              f"theirs: {seconds / peer_seconds:.2f} in time, {memory / peer_memory:.2f} in "
              f"memory; rank correlation of the scores {rho:.3f})")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak resident memory: {peak:.2f} GiB")


if __name__ == "__main__":
    main()
