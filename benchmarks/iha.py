"""IHA's costs against one model's training (the paper's Table 6, measured here).

    .venv/bin/python benchmarks/iha.py [--records 1000] [--scored 100] [--threads 2] [--out FILE]
        [--cases MLP-2] [--max-hessian N] [--max-eigh N]

For the paper's three architectures (logistic regression on MNIST-Odd: 1,570 parameters as a
2-class softmax; the 784-6-10 FashionMNIST MLP: 4,780; the Purchase MLP-2, 600-32-100:
22,532) this trains one model on ``--records`` records (30 epochs of the paper's SGD recipe),
then times the exact Hessian, its eigendecomposition (up to ``--max-eigh`` parameters: a
22,532-parameter one takes most of an hour on 2 cores) and the per-record scoring of
``--scored`` records with the exact solver and with conjugate gradients. Each architecture runs
in a child process so that its peak resident memory is its own. Inputs are generated (MNIST
subset digits for the image models, Purchase-like records for the MLP-2). Prints a Markdown
table (and writes it to ``--out``). On a GPU machine every step runs on the GPU; with
``--records 39465 --cases MLP-2 --max-hessian 0`` it times CG scoring at the paper's scale.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

CASES = {
    "logistic regression (MNIST-Odd)": ({"source": "mnist_subset", "relabel": "odd_even"}, [],
                                        "mse"),
    "MLP 784-6-10 (FashionMNIST)": ({"source": "mnist_subset"}, [6], "cross_entropy"),
    "MLP-2 600-32-100 (Purchase)": ({"source": "purchase_like", "n_samples": 5000}, [32],
                                    "cross_entropy"),
}
RECIPE = {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9, "weight_decay": 5e-4, "epochs": 30,
          "batch_size": 32}


def measure(case: str, records: int, scored: int, threads: int, max_eigh: int,
            max_hessian: int) -> dict[str, float]:
    """One architecture, in this process: seconds of each step and the peak memory."""
    import torch

    from miarepro import hessian
    from miarepro.attacks import AttackContext, get_attack
    from miarepro.data import load_dataset
    from miarepro.training import train_model

    torch.set_num_threads(threads)
    spec, widths, loss = CASES[case]
    data = load_dataset({**spec, "n_samples": max(spec.get("n_samples", 0), records + scored)}
                        if "n_samples" in spec else spec)
    order = np.random.default_rng(0).permutation(len(data.y))
    train, rest = np.sort(order[:records]), order[records:]
    recipe = {**RECIPE, "loss": loss}
    start = time.perf_counter()
    model = train_model(data.X, data.y, train, {"arch": "mlp", "widths": widths}, recipe,
                        data.n_classes, 0).model
    row = {"train_seconds": time.perf_counter() - start}

    class Study:  # what the fit and the attack load (miarepro.attacks.base.StudyHandle)
        def features(self) -> np.ndarray:
            return data.X

        def labels(self) -> np.ndarray:
            return data.y

        def load_model(self, role: str, index: int) -> torch.nn.Module:
            return copy.deepcopy(model)

        def training_indices(self, role: str, index: int) -> np.ndarray:
            return train

        def recipe(self) -> dict:
            return recipe

    flat = hessian.FlatLoss(copy.deepcopy(model), loss)
    X, y = data.X[train], data.y[train]
    row["parameters"] = flat.size
    fit = {"gradient": hessian.mean_gradient(flat, X, y).cpu().numpy()}
    if flat.size <= max_hessian:
        start = time.perf_counter()
        matrix = hessian.hessian(flat, X, y)
        row["hessian_seconds"] = time.perf_counter() - start
        if flat.size <= max_eigh:
            start = time.perf_counter()
            spectrum = hessian.Spectrum.of(matrix)
            row["eigh_seconds"] = time.perf_counter() - start
            fit.update(eigenvalues=spectrum.values.cpu().numpy(),
                       eigenvectors=spectrum.vectors.cpu().numpy())
        del matrix
    row["fit_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    audit = np.sort(np.concatenate([train[: scored // 2], rest[: scored - scored // 2]]))
    mask = np.zeros(len(data.y), dtype=bool)
    mask[train] = True
    empty = np.empty(0, dtype=np.int64)
    context = AttackContext(
        labels=data.y, audit=audit, population=empty, validation=empty,
        target_logits=np.zeros((1, len(data.y), data.n_classes), np.float32), target_mask=mask,
        reference_logits=np.zeros((0, 1, len(data.y), data.n_classes), np.float32),
        reference_masks=np.zeros((0, len(data.y)), bool), reference_pool=empty, study=Study())
    solvers = {"cg": {"gradient": fit["gradient"]}}
    if "eigenvectors" in fit:
        solvers["exact"] = fit
    for name, arrays in solvers.items():
        ctx = dataclasses.replace(context, fit=arrays)
        start = time.perf_counter()
        get_attack("iha").fn(ctx, cg_tolerance=1e-4)
        row[f"{name}_seconds_per_record"] = (time.perf_counter() - start) / scored
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1000, help="training records per model")
    parser.add_argument("--scored", type=int, default=100, help="records scored per solver")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--max-eigh", type=int, default=10000,
                        help="eigendecompose (and score exactly) only up to this many parameters")
    parser.add_argument("--max-hessian", type=int, default=100000,
                        help="compute the exact Hessian only up to this many parameters")
    parser.add_argument("--cases", default="", help="only the models whose name holds this")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--case", help=argparse.SUPPRESS)  # the child process's architecture
    args = parser.parse_args()
    if args.case:
        print(json.dumps(measure(args.case, args.records, args.scored, args.threads,
                                 args.max_eigh, args.max_hessian)))
        return
    lines = [f"IHA costs: one model on {args.records} records, {args.scored} records scored, "
             f"{args.threads} threads", "",
             "| model | parameters | train s | Hessian s | eigh s | fit peak MB | exact s/record "
             "| CG s/record |", "|---|---|---|---|---|---|---|---|"]
    for case in [case for case in CASES if args.cases in case]:
        child = subprocess.run(
            [sys.executable, __file__, "--case", case, "--records", str(args.records),
             "--scored", str(args.scored), "--threads", str(args.threads),
             "--max-eigh", str(args.max_eigh), "--max-hessian", str(args.max_hessian)],
            capture_output=True, text=True, check=False)
        if child.returncode:  # its traceback, not only its exit status
            sys.exit(f"{case} failed:\n{child.stderr}")
        r = json.loads(child.stdout.strip().splitlines()[-1])
        eigh, exact = r.get("eigh_seconds"), r.get("exact_seconds_per_record")
        matrix = r.get("hessian_seconds")
        lines.append(f"| {case} | {r['parameters']:,} | {r['train_seconds']:.1f} | "
                     + (f"{matrix:.1f}" if matrix is not None else "not run") + " | "
                     + (f"{eigh:.1f}" if eigh is not None else "not run") +
                     f" | {r['fit_peak_mb']:.0f} | "
                     + (f"{exact:.4f}" if exact is not None else "not run") +
                     f" | {r['cg_seconds_per_record']:.3f} |")
    emit(lines, args.out)


if __name__ == "__main__":
    main()
