"""Stolen Memories' attack-side costs against one target's training (the issue's measure).

    .venv/bin/python benchmarks/stolen_memories.py [--cases bcw digits] [--threads 2]
        [--proxies 10] [--shadows 10] [--out FILE]

For each case this trains one target on a quarter of the data with the case's recipe, then
times the Stolen Memories fit against it (the proxies of every attacked layer, the shadow
models and their proxies, all trained together per role by :mod:`miarepro.ensemble`, then the
meta model and the displacement sweep) and reports the fit's seconds as a multiple of the
target's training. ``lenet`` (the paper's MNIST LeNet, every layer attacked, on the 1,797
digits in MNIST's 28 x 28 layout) is meant for a GPU. Prints a Markdown table (and writes it
to ``--out``).

    .venv/bin/python benchmarks/stolen_memories.py --run DIR [--studies S ...] [--arrays OUT]

times instead, in this process on ``--threads``, the fit of the first target of every
Stolen Memories study of a finished workflow directory ``DIR`` (its results, and its config:
``DIR/config.yaml``, ``DIR/config/config.yaml`` or else this repository's), with its
configured settings; ``--arrays`` saves each fit's arrays as ``OUT/STUDY.npz``, to compare
two checkouts' fits byte for byte (run each checkout's copy of this script, alternating).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

SGD = {"optimizer": "sgd", "lr": 0.1, "momentum": 0.9, "nesterov": True, "weight_decay": 1e-4,
       "batch_size": 32}
CASES = {  # dataset spec, architecture, recipe, attacked layers
    "synthetic-100": ({"source": "sm_synthetic", "n_samples": 400}, {"arch": "mlp", "widths": []},
                      {**SGD, "epochs": 100}, "last"),
    "bcw": ({"source": "breast_cancer"}, {"arch": "mlp", "widths": [60]},
            {**SGD, "epochs": 100}, "all"),
    "digits": ({"source": "digits"}, {"arch": "mlp", "widths": [64, 32]}, {**SGD, "epochs": 30},
               "all"),
    "lenet": ({"source": "digits", "layout": "mnist"},
              {"arch": "lenet", "variant": "stolen_memories"},
              {**SGD, "momentum": 0.0, "nesterov": False, "epochs": 30}, "all"),
}


def measure(case: str, proxies: int, shadows: int) -> dict[str, float]:
    from miarepro import splits
    from miarepro.attacks import get_attack
    from miarepro.data import load_dataset
    from miarepro.models import build_model
    from miarepro.training import train_model

    spec, architecture, recipe, layers = CASES[case]
    data = load_dataset(spec, root=Path("data"))
    split = splits.make_split(len(data.y), {"scheme": "partition", "seed": 0, "fractions": {
        "target_train": 0.25, "target_test": 0.25, "reference_pool": 0.5}})
    start = time.perf_counter()
    trained = train_model(data.X, data.y, split["target_train"], architecture, recipe,
                          data.n_classes, 0, eval_indices=split["target_test"])
    train_seconds = time.perf_counter() - start

    class Study:  # the white-box handle a fit job gets, on the trained target
        def features(self):
            return data.X

        def labels(self):
            return data.y

        def meta(self):
            return data.meta

        def new_model(self):
            from miarepro.training import device

            return build_model(architecture, data.input_shape, data.n_classes).to(device())

        def load_model(self, role, index):
            return trained.model.eval()

        def training_indices(self, role, index):
            return split["target_train"]

        def parts(self, group):
            return split

        def recipe(self):
            return dict(recipe)

        def fit_seed(self, group):
            return group

    start = time.perf_counter()
    _, info = get_attack("bayes_wb").fit(Study(), 0, layers=layers, proxies=proxies,
                                         shadows=shadows)
    fit_seconds = time.perf_counter() - start
    return {"records": len(data.y), "layers": len(info["layers"]),
            "train_accuracy": trained.info["train_accuracy"],
            "test_accuracy": trained.info["test_accuracy"], "train_seconds": train_seconds,
            "fit_seconds": fit_seconds, "ratio": fit_seconds / train_seconds}


def run_config(run: Path) -> Path:
    """A finished run's config: its own ``config.yaml`` (a benchmark's run keeps one beside
    its results), a checkout's ``config/config.yaml``, else this repository's."""
    candidates = [run / "config.yaml", run / "config" / "config.yaml",
                  Path(__file__).resolve().parent.parent / "config" / "config.yaml"]
    return next(path for path in candidates if path.is_file())


def measure_run(run: Path, studies: list[str] | None, arrays: Path | None) -> list[str]:
    """Seconds of the first target's Stolen Memories fit of each study of a finished run."""
    import json

    import yaml

    from miarepro import config, io, pipeline
    from miarepro.attacks import get_attack

    path = run_config(run)
    settings = config.validate(yaml.safe_load(path.read_text()))
    lines = [f"Settings from {path}.", "", "| study | fit s |", "|---|---|"]
    for card_path in sorted(run.glob("results/studies/*/fits/stolen_memories-*/0.json")):
        name = card_path.parts[-4]
        if studies and name not in studies:
            continue
        study, card = settings["studies"][name], json.loads(card_path.read_text())
        folder = run / "results" / "studies" / name
        handle = pipeline.StudyFiles(str(run / "results" / "datasets" / f"{study['dataset']}.npz"),
                                     str(folder / "split.npz"), str(folder / "models"),
                                     study["model"], study["training"])
        start = time.perf_counter()
        fitted, _ = get_attack(card["settings"]["attack"]).fit(handle, 0,
                                                               **card["settings"]["params"])
        lines.append(f"| {name} | {time.perf_counter() - start:.2f} |")
        print(lines[-1], flush=True)
        if arrays:
            arrays.mkdir(parents=True, exist_ok=True)
            io.write_arrays(arrays / f"{name}.npz", **fitted)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=["synthetic-100", "bcw", "digits"],
                        choices=list(CASES))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--proxies", type=int, default=10)
    parser.add_argument("--shadows", type=int, default=10)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--run", type=Path, help="a finished workflow directory")
    parser.add_argument("--studies", nargs="+", help="with --run: only these studies")
    parser.add_argument("--arrays", type=Path, help="with --run: save each fit's arrays here")
    args = parser.parse_args()
    if not args.run and (args.studies or args.arrays):
        parser.error("--studies and --arrays go with --run")
    import torch

    from miarepro import compat
    from miarepro.training import device

    torch.set_num_threads(args.threads)
    compat.eager_optimizers()  # as a fit job: no torch.compile import in the timings
    if args.run:
        emit(measure_run(args.run, args.studies, args.arrays), args.out)
        return
    lines = [f"Device: {device()}, {args.threads} threads; {args.proxies} proxies per layer, "
             f"{args.shadows} + {args.shadows} shadow models.", "",
             "| case | records | layers | target train / test acc. | target training s "
             "| fit s | fit / training |", "|---|---|---|---|---|---|---|"]
    for case in args.cases:
        row = measure(case, args.proxies, args.shadows)
        lines.append(f"| {case} | {row['records']} | {row['layers']} | "
                     f"{row['train_accuracy']:.3f} / {row['test_accuracy']:.3f} | "
                     f"{row['train_seconds']:.2f} | {row['fit_seconds']:.1f} | "
                     f"{row['ratio']:.0f}x |")
        print(lines[-1], flush=True)
    emit(lines, args.out)


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
