"""Time reference-attack scoring at full scale on random logits.

Default size: 64 reference models x 1 query x 50,000 samples x 100 classes (float32 logits,
1.3 GB), of which 30,000 are audited (IN for a random half of the models each) and 20,000 form
the population set Z. Prints seconds per attack and the process's peak resident memory.

    python benchmarks/attack_scoring.py [--models 64] [--samples 50000] [--classes 100]
"""

from __future__ import annotations

import argparse
import resource
import time

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
    args = parser.parse_args()
    start = time.perf_counter()
    ctx = random_context(args.models, args.samples, args.classes, args.population, args.queries)
    print(f"context: logits {ctx.reference_logits.shape} float32 "
          f"({ctx.reference_logits.nbytes / 2**30:.2f} GiB), audit {len(ctx.audit)}, "
          f"|Z| {len(ctx.population)}; built in {time.perf_counter() - start:.1f} s")
    for name in args.attacks:
        family, params = ATTACKS[name]
        start = time.perf_counter()
        scores = get_attack(family).fn(ctx, **params)
        elapsed = time.perf_counter() - start
        assert scores.shape == ctx.audit.shape and np.isfinite(scores).all()
        print(f"{name:14s} {elapsed:7.2f} s")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"peak resident memory: {peak:.2f} GiB")


if __name__ == "__main__":
    main()
