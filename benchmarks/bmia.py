"""BMIA's cost against one reference model's training: Laplace fit and scoring seconds.

    .venv/bin/python benchmarks/bmia.py [--queries 10000] [--out FILE]

Trains BMIA's reference model (the 1024-512-256-128 MLP of BMIA's Purchase100 setting, on the
default config's 5,000 Purchase-like records, 60 epochs), then times the last-layer Laplace fit
(KFAC, diagonal; the full GGN of this 12,900-parameter head is refused, so it is timed on a
32-to-100 head: MLP-2) and BMIA scoring of ``--queries`` samples with N = 10, 100, 1000 and the
GLM and MC predictives. The goal of the BMIA issue: fit + scoring <= 10% of one reference
model's training. Prints a Markdown table (and writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from miarepro import lastlayer
from miarepro.attacks import AttackContext, get_attack
from miarepro.data import load_dataset
from miarepro.training import last_layer_features, train_model
from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

RECIPE = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "weight_decay": 1e-4, "epochs": 60,
          "batch_size": 128, "milestones": [0.4167, 0.8333]}


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=10000)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not 0 < args.queries <= 20000:  # 25,000 records, 5,000 of them the training set
        parser.error("--queries must be between 1 and 20,000")
    torch.set_num_threads(1)
    data = load_dataset({"source": "purchase_like", "n_samples": 25000, "taste_weight": 0.8})
    rng = np.random.default_rng(0)
    order = rng.permutation(len(data.y))
    train, queries = order[:5000], order[5000 : 5000 + args.queries]
    rows = []
    for widths, epochs in (([1024, 512, 256, 128], 60), ([32], 30)):
        recipe = {**RECIPE, "epochs": epochs}
        model, train_seconds = timed(train_model, data.X, data.y, train,
                                     {"arch": "mlp", "widths": widths}, recipe, 100, 0)
        rows.append((f"train reference MLP {widths} ({epochs} epochs)", train_seconds, ""))
        (features, weight, bias), feature_seconds = timed(last_layer_features, model.model,
                                                          data.X)
        rows.append(("features of every sample (one forward pass)", feature_seconds, ""))
        structures = ("kron", "diag") if widths[-1] > 32 else ("kron", "diag", "full")
        for structure in structures:
            posterior, fit_seconds = timed(lastlayer.fit, features[train], data.y[train],
                                           weight, bias, structure)
            share = (fit_seconds + feature_seconds) / train_seconds
            rows.append((f"Laplace fit, {structure}, marglik prior", fit_seconds,
                         f"fit + features = {100 * share:.1f}% of training"))
            arrays = {"features": features, **posterior.to_arrays()}
            for n_samples in (10, 100, 1000):
                for predictive in ("glm", "mc"):
                    if n_samples == 1000 and args.queries > 2000 and structure == "full":
                        continue
                    ctx = AttackContext(
                        labels=data.y, audit=queries, population=np.empty(0, int),
                        validation=np.empty(0, int), target_logits=(features @ weight.T
                                                                    + bias)[None],
                        target_mask=np.zeros(len(data.y), bool),
                        reference_logits=np.zeros((1, 1, len(data.y), 100), np.float32),
                        reference_masks=np.zeros((1, len(data.y)), bool),
                        reference_pool=train, fit=arrays)
                    _, seconds = timed(get_attack("bmia").fn, ctx, n_samples=n_samples,
                                       predictive=predictive)
                    rows.append((f"BMIA scoring, {structure}, {predictive}, N={n_samples}, "
                                 f"{args.queries} queries", seconds,
                                 f"{100 * seconds / train_seconds:.1f}% of training"))
    emit(["| step | seconds | note |", "|---|---|---|",
          *(f"| {name} | {seconds:.2f} | {note} |" for name, seconds, note in rows)], args.out)


if __name__ == "__main__":
    main()
