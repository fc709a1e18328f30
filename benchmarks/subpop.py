"""Subpop's costs and its generator, on the default config's ``subpop-mnist`` study.

    .venv/bin/python benchmarks/subpop.py [--shadows 4] [--threads 2] [--ablation] [--out FILE]

Builds the study in a temporary folder with the workflow's own functions (dataset, split,
victim and ``--shadows`` shadow models, the BiGAN fits), then reports:

- the BiGAN fit's seconds (white-box and black-box) against the paper's 30 shadow models
  (measured mean shadow training seconds x 30): Subpop's Table 3 claims the generator costs
  5-10x less;
- scoring seconds per audited record (30 crafted records each) for ``subpop``, ``yeom`` and
  ``sablayrolles`` (the latter two on saved logits);
- the share of crafted records the victim gives the target's predicted class, per noise scale;
- with ``--ablation``: the subpopulation attack's AUC under other generator budgets (epochs,
  learning rate, the cosine-similarity term), to show whether the miniature's result depends
  on how well the BiGAN is trained.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
BETAS = (0.01, 0.05, 0.1, 0.2, 0.5, 1.0)
ABLATION = ({"epochs": 10}, {"epochs": 60}, {"lr": 2e-4}, {"cosine_weight": 10.0})


def build_study(folder: Path, shadows: int, threads: int) -> tuple[dict, object, list[float]]:
    """The default config's subpop-mnist study on disk; its config, files and shadow seconds."""
    from miarepro import io, pipeline

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    study = config["studies"]["subpop-mnist"]
    dataset, split = str(folder / "data.npz"), str(folder / "split.npz")
    pipeline.make_dataset(config["datasets"][study["dataset"]], str(ROOT / "data"), dataset)
    pipeline.make_split(dataset, study["split"], split)
    seconds = []
    for role, index in [("target", 0)] + [("reference", i) for i in range(shadows)]:
        model = folder / "models" / role / f"{index}.pt"
        pipeline.train(dataset, split, role, index, study["model"], study["training"], [],
                       str(model), str(folder / "models" / role / f"{index}.npy"), threads)
        if role == "reference":
            seconds.append(io.read_json(model.with_suffix(".json"))["train_seconds"])
    files = pipeline.StudyFiles(dataset, split, str(folder / "models"), study["model"],
                                study["training"])
    return study, files, seconds


def context(folder: Path, files, attack: str, shadows: int, fit=None):
    from miarepro import pipeline

    references = {i: str(folder / "models" / "reference" / f"{i}.npy") for i in range(shadows)}
    ctx = pipeline.attack_context({"attack": attack, "n_reference": shadows}, files.labels(),
                                  files.split, 0, np.load(folder / "models" / "target" / "0.npy"),
                                  references, study=files)
    return dataclasses.replace(ctx, fit=fit)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def class_kept(files, fit, rng: np.random.Generator) -> list[float]:
    """Per β: the share of crafted records the victim assigns the target's predicted class."""
    import torch

    from miarepro.attacks.subpop import trained_networks, victim_latent
    from miarepro.bigan import noisy_latents

    generator = trained_networks(fit)[0]
    victim = files.load_model("target", 0)
    audit = files.parts(0)["audit"]
    x = torch.as_tensor(files.features()[rng.choice(audit, 500, replace=False)])
    with torch.no_grad():
        own, z = victim(x).argmax(1).numpy(), victim_latent(victim)(x).double().numpy()
        return [float(np.mean(victim(generator(torch.as_tensor(
            noisy_latents(z, beta, 10, rng).reshape(-1, z.shape[1]), dtype=torch.float32)))
            .argmax(1).numpy() == np.repeat(own, 10))) for beta in BETAS]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shadows", type=int, default=4, help="shadow models to time (>= 2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ablation", action="store_true")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    import torch

    from miarepro import metrics
    from miarepro.attacks import get_attack

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        study, files, shadow_seconds = build_study(folder, args.shadows, args.threads)
        entries = study["attacks"]
        spec = get_attack("subpop")
        fit_params = spec.split_params({k: v for k, v in entries["subpop"].items()
                                        if k not in ("attack", "label", "paper_attack")})[0]
        (fit, _), fit_seconds = timed(spec.fit, files, 0, **fit_params)
        _, blackbox_seconds = timed(get_attack("subpop_blackbox").fit, files, 0, **fit_params)
        thirty = 30 * float(np.mean(shadow_seconds))
        lines = ["| measure | value |", "|---|---|",
                 f"| shadow model training (mean of {len(shadow_seconds)}) | "
                 f"{np.mean(shadow_seconds):.2f} s |",
                 f"| 30 shadow models (the paper's count) | {thirty:.1f} s |",
                 f"| BiGAN fit, white-box (h frozen) | {fit_seconds:.1f} s "
                 f"({thirty / fit_seconds:.1f}x cheaper than 30 shadows) |",
                 f"| BiGAN fit, black-box (own encoder) | {blackbox_seconds:.1f} s "
                 f"({thirty / blackbox_seconds:.1f}x cheaper) |"]
        for attack in ("subpop", "yeom", "sablayrolles"):
            ctx = context(folder, files, attack, args.shadows, fit if attack == "subpop" else None)
            scores, seconds = timed(get_attack(attack).fn, ctx)
            auc = metrics.auc(ctx.target_mask[ctx.audit], scores)
            lines.append(f"| scoring {attack} | {1e3 * seconds / len(ctx.audit):.3f} ms per "
                         f"record ({len(ctx.audit)} records; AUC {auc:.3f}) |")
        kept = class_kept(files, fit, np.random.default_rng(0))
        lines.append("| crafted records keeping the victim's class, per β | "
                     + ", ".join(f"{b:g}: {100 * k:.0f}%" for b, k in zip(BETAS, kept,
                                                                           strict=True)) + " |")
        if args.ablation:
            ctx = context(folder, files, "subpop", 0)
            for change in ABLATION:
                (variant, _), seconds = timed(spec.fit, files, 0, **{**fit_params, **change})
                ctx = dataclasses.replace(ctx, fit=variant)
                auc = metrics.auc(ctx.target_mask[ctx.audit], get_attack("subpop").fn(ctx))
                lines.append(f"| subpop AUC with {change} | {auc:.3f} (fit {seconds:.0f} s) |")
    emit(["# Subpop: the BiGAN against the shadow models", "", *lines], args.out)


if __name__ == "__main__":
    main()
