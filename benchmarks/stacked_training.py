"""Ten small MLPs trained as one stack (``train_stacked``) against the same ten trained one by
one (``train_model``), on the device torch finds (a GPU where there is one).

    .venv/bin/python benchmarks/stacked_training.py [--models 10] [--records 2000]
                                                    [--widths 6] [--epochs 30] [--out FILE]

The models are those of a ``ten_per_job`` bundle with ``train_stacked``: MNIST-sized inputs
(784 features, 10 classes, generated), each model its own seed and its own half of the records,
SGD with momentum and weight decay as IHA's MLP (batch 64). Reports both times, their ratio and
the largest difference between a stacked model's weights and the same model's trained alone:
0 on a CPU with one thread (the tests check it bitwise); on a GPU the batched and the single
matrix products round apart, so the difference shows how far that goes after the training.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from miarepro.training import device, train_model, train_stacked
from report import emit  # benchmarks/report.py (a script's folder is on sys.path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=10)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--widths", type=int, nargs="*", default=[6])
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X = rng.random((2 * args.records, 784), dtype=np.float32)
    y = rng.integers(0, 10, 2 * args.records)
    rows = [np.sort(rng.choice(len(y), args.records, replace=False)) for _ in range(args.models)]
    seeds = list(range(args.models))
    arch = {"arch": "mlp", "widths": args.widths}
    recipe = {"epochs": args.epochs, "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4,
              "batch_size": 64}
    train_model(X, y, rows[0], arch, {**recipe, "epochs": 1}, 10, 0)  # warm-up (CUDA context)
    start = time.perf_counter()
    alone = [train_model(X, y, r, arch, recipe, 10, s) for r, s in zip(rows, seeds, strict=True)]
    alone_seconds = time.perf_counter() - start
    start = time.perf_counter()
    stacked = train_stacked(X, y, rows, arch, recipe, 10, seeds)
    stacked_seconds = time.perf_counter() - start
    difference = max(float((a - b).abs().max()) for one, two in zip(stacked, alone, strict=True)
                     for a, b in zip(one.model.state_dict().values(),
                                     two.model.state_dict().values(), strict=True))
    accuracy = max(abs(one.info["train_accuracy"] - two.info["train_accuracy"])
                   for one, two in zip(stacked, alone, strict=True))
    emit(["| measure | value |", "|---|---|",
          f"| device, threads | {device()}, {torch.get_num_threads()} |",
          f"| models x records, MLP 784-{'-'.join(map(str, args.widths))}-10, epochs | "
          f"{args.models} x {args.records}, {args.epochs} |",
          f"| one by one | {alone_seconds:.2f} s |",
          f"| as one stack | {stacked_seconds:.2f} s ({stacked_seconds / alone_seconds:.2f}) |",
          f"| largest weight difference, train-accuracy difference | {difference:.2e}, "
          f"{accuracy:.4f} |"], args.out)


if __name__ == "__main__":
    main()
