"""QMIA's cost against one shadow model's training, and CatBoost targets' training seconds.

    .venv/bin/python benchmarks/qmia.py [--trials 6] [--out FILE]

The paper's claim: one quantile regressor costs about as much as one shadow model (30 GPU
minutes on CIFAR, 4 hours with the search). On the default config's image setting (5,000 MNIST
digits, MLP-4 target on 2,000, QMIA on the 2,000 public digits, a shadow model on 2,000: a
random half of the target's and the public digits, LiRA's setup as the authors ran it) this
times one shadow model's training, the regressor's fit without a search (LeNet-5 and MLP
backbones) and with a ``--trials`` search over Table 4; on the tabular setting (generated data,
CatBoost targets) one CatBoost target with fixed settings and with a 5-fold CV search, and the
CatBoost regressor without and with a Table 5 search. One thread. Prints a Markdown table (and
writes it to ``--out``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from miarepro import boosting, quantile, signals
from miarepro.data import load_dataset
from miarepro.training import predict_logits, train_model
from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

RECIPE = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-4, "epochs": 30,
          "batch_size": 64, "milestones": [0.5, 0.75]}
SPACE = {**quantile.TABLE4_SPACE, "epochs": {"low": 5, "high": 20, "step": 5}}


def timed(function, *args, **kwargs):
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def shadow_half(target: np.ndarray, public: np.ndarray) -> np.ndarray:
    """A shadow model's records as the workflow's QMIA studies draw them
    (``split.references_train_on``): a random half of the target's and the public records."""
    pool = np.concatenate([target, public])
    return np.sort(np.random.default_rng(1).permutation(pool)[: len(pool) // 2])


def image_rows(trials: int) -> list[tuple[str, float, str]]:
    data = load_dataset({"source": "mnist_subset"})
    order = np.random.default_rng(0).permutation(len(data.y))
    target, public = order[:2000], order[3000:]
    architecture = {"arch": "mlp", "widths": [256] * 4}
    trained = train_model(data.X, data.y, target, architecture, RECIPE, 10, 0)
    hinge = signals.hinge(predict_logits(trained.model, data.X)[0], data.y)
    _, shadow = timed(train_model, data.X, data.y, shadow_half(target, public), architecture,
                      RECIPE, 10, 1)
    rows = [("shadow model: MLP-4 on 2,000 digits, 30 epochs", shadow, "1.00 shadow models")]
    taus = quantile.levels()
    for name, backbone in (("LeNet-5", {"arch": "lenet"}), ("MLP-1", {"arch": "mlp",
                                                                     "widths": [256]})):
        _, seconds = timed(quantile.fit, data.X[public], hinge[public], backbone, "gaussian",
                           taus, {}, 0)
        rows.append((f"QMIA fit, {name} backbone, no search", seconds,
                     f"{seconds / shadow:.2f} shadow models"))
    _, seconds = timed(quantile.search_and_fit, data.X[public], hinge[public],
                       {"arch": "lenet"}, "gaussian", taus, {}, SPACE, trials, 0)
    rows.append((f"QMIA fit, LeNet-5 backbone, {trials}-trial search", seconds,
                 f"{seconds / shadow:.2f} shadow models"))
    return rows


def tabular_rows() -> list[tuple[str, float, str]]:
    data = load_dataset({"source": "tabular_like", "n_classes": 4, "class_sep": 0.7,
                         "label_noise": 0.02})
    order = np.random.default_rng(0).permutation(len(data.y))
    target, public = order[:2000], order[3000:]
    spec = {"arch": "catboost", "iterations": 200, "depth": 6, "learning_rate": 0.1}
    half = shadow_half(target, public)
    (model, _), shadow = timed(boosting.train_target, data.X[half], data.y[half], 4, spec, 1, 1)
    rows = [("CatBoost shadow model on 2,000 records, fixed settings", shadow,
             "1.00 shadow models")]
    (model, _), seconds = timed(boosting.train_target, data.X[target], data.y[target], 4, spec,
                                0, 1)
    rows.append(("CatBoost target on 2,000 records, fixed settings", seconds, ""))
    _, searched = timed(boosting.train_target, data.X[target], data.y[target], 4,
                        {**spec, "trials": 5, "folds": 5}, 0, 1)
    rows.append(("CatBoost target, 5-trial 5-fold CV search", searched, ""))
    hinge = signals.hinge(boosting.logits(model, data.X)[0], data.y)
    taus = quantile.levels()
    _, seconds = timed(quantile.fit, data.X[public], hinge[public], {"arch": "catboost"},
                       "gaussian", taus, {}, 0)
    rows.append(("QMIA CatBoost regressor, no search", seconds,
                 f"{seconds / shadow:.2f} shadow models"))
    _, seconds = timed(quantile.search_and_fit, data.X[public], hinge[public],
                       {"arch": "catboost"}, "gaussian", taus, {}, quantile.TABLE5_SPACE, 40, 0)
    rows.append(("QMIA CatBoost regressor, 40-trial Table 5 search", seconds,
                 f"{seconds / shadow:.2f} shadow models"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=6)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = image_rows(args.trials) + tabular_rows()
    lines = ["| step | seconds | cost |", "|---|---|---|"]
    lines += [f"| {name} | {seconds:.2f} | {note} |" for name, seconds, note in rows]
    emit(lines, args.out)


if __name__ == "__main__":
    main()
