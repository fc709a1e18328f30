"""DP-SGD's cost against plain SGD on Stolen Memories' two target shapes.

    .venv/bin/python benchmarks/dp.py [--epochs 4] [--repeats 3] [--threads 2] [--epsilon 1]
                                      [--out FILE]

Stolen Memories' defense trains its targets by DP-SGD; opacus computes a gradient per record
(to clip it) instead of one per batch, which costs time. This trains, with the same recipe
(SGD, lr 0.1, no momentum, batch 32: the default config's ``sm-mnist``), (a) an MLP with one
hidden layer of 60 units on the 569 x 30 breast-cancer records and (b) the ``stolen_memories``
LeNet on 1,250 random 1 x 28 x 28 records (as many as ``sm-mnist``'s target), once plainly and
once with ``dp: {epsilon: --epsilon}``, and reports the seconds per epoch of each: the fastest
of ``--repeats`` runs of ``--epochs`` epochs less the fastest one-epoch run, over the epochs
between (once-per-model costs cancel). A DP epoch takes ``int(N / 32)`` Poisson
batches of 32 records in expectation, a plain one ``ceil(N / 32)`` batches. Solving the noise
multiplier (opacus's RDP accountant, once per model) is timed on its own. Prints a Markdown
table (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from miarepro import privacy
from miarepro.data import load_dataset
from miarepro.training import train_model
from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

RECIPE = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.0, "batch_size": 32}


def cases() -> dict[str, tuple[np.ndarray, np.ndarray, dict[str, Any], int]]:
    """Name -> (X, y, architecture, classes) of the two targets."""
    cancer = load_dataset({"source": "breast_cancer"})
    rng = np.random.default_rng(0)
    images = rng.random((1250, 1, 28, 28), dtype=np.float32)
    return {
        "MLP 30-60-2, 569 breast-cancer records": (
            cancer.X, cancer.y, {"arch": "mlp", "widths": [60]}, 2),
        "LeNet stolen_memories, 1,250 x 1x28x28 records": (
            images, rng.integers(0, 10, 1250), {"arch": "lenet", "variant": "stolen_memories"},
            10),
    }


def fastest(X: np.ndarray, y: np.ndarray, architecture: dict[str, Any], classes: int,
            recipe: dict[str, Any], repeats: int) -> float:
    """The fastest ``train_seconds`` of ``repeats`` runs (seeds 0, 1, ...)."""
    indices = np.arange(len(y))
    return min(train_model(X, y, indices, architecture, recipe, classes, seed).info[
        "train_seconds"] for seed in range(repeats))


def seconds_per_epoch(X: np.ndarray, y: np.ndarray, architecture: dict[str, Any],
                      classes: int, recipe: dict[str, Any], repeats: int) -> float:
    """What one more epoch costs: ``epochs`` against one epoch, so that the once-per-model
    costs (opacus's wrapping, the final accounting) cancel; after a warm-up run."""
    one = {**recipe, "epochs": 1}
    fastest(X, y, architecture, classes, one, 1)
    return ((fastest(X, y, architecture, classes, recipe, repeats)
             - fastest(X, y, architecture, classes, one, repeats)) / (recipe["epochs"] - 1))


def measure(epochs: int, repeats: int, epsilon: float) -> list[dict[str, Any]]:
    rows = []
    for name, (X, y, architecture, classes) in cases().items():
        recipe = {**RECIPE, "epochs": epochs}
        dp = {"epsilon": epsilon}
        start = time.perf_counter()  # solved once here, then cached for the timed runs
        plan = privacy.plan(dp, len(y), recipe["batch_size"], epochs)
        solve = time.perf_counter() - start
        privacy.plan(dp, len(y), recipe["batch_size"], 1)  # the one-epoch runs' noise
        plain = seconds_per_epoch(X, y, architecture, classes, recipe, repeats)
        private = seconds_per_epoch(X, y, architecture, classes, {**recipe, "dp": dp}, repeats)
        rows.append({"name": name, "plain": plain, "private": private, "solve": solve,
                     "sigma": plan.noise_multiplier, "rate": plan.sample_rate})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4, help="at least 2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.epochs < 2:  # an epoch costs an --epochs run less a run of one epoch
        parser.error("--epochs must be at least 2")
    torch.set_num_threads(args.threads)
    rows = measure(args.epochs, args.repeats, args.epsilon)
    lines = [f"DP-SGD vs SGD: batch 32, epsilon {args.epsilon:g}, "
             f"delta 1/(10 N), {args.threads} threads, fastest of {args.repeats} runs "
             f"({args.epochs} epochs less 1 epoch)", "",
             "| target | SGD s/epoch | DP-SGD s/epoch | slowdown | noise multiplier "
             "| sample rate | noise solve s |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['name']} | {r['plain']:.4f} | {r['private']:.4f} | "
              f"{r['private'] / r['plain']:.1f}x | {r['sigma']:.3f} | {r['rate']:.4f} | "
              f"{r['solve']:.2f} |" for r in rows]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
