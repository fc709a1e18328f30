"""Subpop's costs and its generator, on a study of the default config (``subpop-mnist``).

    .venv/bin/python benchmarks/subpop.py [--study subpop-mnist] [--shadows 4] [--threads 2]
        [--new-samples 2] [--ablation] [--out FILE]

Builds the study in a temporary folder with the workflow's own functions (dataset, split,
victim and ``--shadows`` shadow models, the BiGAN fits), then reports:

- the BiGAN fit's seconds (white-box and black-box) against the paper's 30 shadow models
  (measured mean shadow training seconds x 30): Subpop's Table 3 claims the generator costs
  5-10x less;
- scoring seconds per audited record (30 crafted records each) for ``subpop``, ``yeom`` and
  ``sablayrolles`` (the latter two on saved logits);
- the share of crafted records the victim gives the target's predicted class, per noise scale;
- Sablayrolles et al. on ``--new-samples`` records no shadow model has seen: the paper's 15 new
  IN shadow models trained for each (on a random half of the shadow pool plus the record), their
  measured seconds per new sample (Table 3's "training time per new sample"), and the record's
  score from those IN shadows and the existing OUT ones;
- with ``--ablation``: the subpopulation attack's AUC under other generator budgets (epochs,
  learning rate, the cosine-similarity term), to show whether the miniature's result depends
  on how well the BiGAN is trained.

    .venv/bin/python benchmarks/subpop.py --run DIR [--out FILE]

reads instead the score files of every Subpop study (and replicate) of a finished workflow
directory ``DIR`` and asks whether the crafted records' loss says anything about membership
beyond the record's own loss. Ours is the crafted records' mean loss ``C`` minus the own loss
``L``, and Yeom et al.'s score a constant minus ``L``, so Ours minus Yeom's is ``C`` up to that
constant. The report gives ``C``'s AUC within tenths of the audit ranked by ``L`` (0.5: ``C``
tells nothing beyond ``L``), with a bootstrap interval over the records, and the rank
correlation of ``C`` with ``L`` (how closely the crafted records follow the record's own loss).
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from report import emit  # benchmarks/report.py (a script's folder is on sys.path)

ROOT = Path(__file__).resolve().parents[1]
BETAS = (0.01, 0.05, 0.1, 0.2, 0.5, 1.0)
NEW_IN_SHADOWS = 15  # Subpop §A.2: Sablayrolles et al. train 15 new IN shadows per new sample
ABLATION = ({"epochs": 10}, {"epochs": 60}, {"lr": 2e-4}, {"cosine_weight": 10.0})


def build_study(folder: Path, name: str, shadows: int, threads: int
                ) -> tuple[dict, object, list[float]]:
    """The default config's study ``name`` on disk; its config, files and shadow seconds."""
    from miarepro import io, pipeline

    config = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    study = config["studies"][name]
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


def new_sample_costs(files, shadows: int, records: int, in_shadows: int
                     ) -> list[tuple[int, bool, float, float]]:
    """Sablayrolles et al. per new sample: ``in_shadows`` shadow models trained with the record
    (each on a random half of the shadow pool without it, plus it) for ``records`` audited
    records, members and non-members in turn. Per record: its index, membership, the seconds
    of those trainings and its score (the midpoint of the new IN and the existing OUT shadows'
    mean losses minus the target's loss, as :func:`miarepro.attacks.calibrated.sablayrolles`)."""
    from miarepro import signals
    from miarepro.training import predict_logits, train_model

    rng = np.random.default_rng(0)
    X, y = files.features(), files.labels()
    trained = [set(files.training_indices("reference", i)) for i in range(shadows)]
    pool = np.array(sorted(set().union(*trained)))
    size = len(trained[0])
    members = set(files.training_indices("target", 0))
    audit = files.parts(0)["audit"]

    def loss(model, record: int) -> float:
        logits = predict_logits(model, X[[record]])[0].astype(np.float64)
        return float(signals.cross_entropy(logits, y[[record]])[0])

    out = []
    for k in range(records):
        is_member = k % 2 == 0
        record = int(rng.choice([r for r in audit if (r in members) == is_member]))
        start = time.perf_counter()
        in_models = [train_model(X, y, np.sort(np.append(rng.choice(
            pool[pool != record], size - 1, replace=False), record)), files.architecture,
            files.recipe(), files.card["n_classes"], int(rng.integers(2**31))).model
            for _ in range(in_shadows)]
        seconds = time.perf_counter() - start
        out_losses = [loss(files.load_model("reference", i), record)
                      for i in range(shadows) if record not in trained[i]]
        tau = 0.5 * (np.mean([loss(m, record) for m in in_models]) + np.mean(out_losses))
        out.append((record, is_member, seconds, tau - loss(files.load_model("target", 0), record)))
    return out


def auc_given(scores: pd.DataFrame, given: str, score: str, bins: int = 10) -> float:
    """AUC of ``score`` within ``bins`` equal tenths (by default) of the records ranked by
    ``given``, pooled as one AUC over the pairs of a member and a non-member of the same bin
    (NaN where no bin holds both)."""
    from miarepro.metrics import auc

    strata = pd.qcut(scores[given].rank(method="first"), bins, labels=False)
    pooled = weights = 0.0
    for _, part in scores.groupby(strata):
        members = int(part["member"].sum())
        pairs = members * (len(part) - members)
        if pairs:
            pooled += pairs * auc(part["member"], part[score])
            weights += pairs
    return pooled / weights if weights else float("nan")


def conditional_report(run: Path, draws: int = 200) -> list[str]:
    """Per Subpop study of a finished run, over its targets' records: Yeom's and Ours's AUC,
    the crafted loss's AUC given the own loss (:func:`auc_given`) with a 95% bootstrap
    interval over ``draws`` resamples of the records, and its rank correlation with the own
    loss."""
    from scipy.stats import spearmanr

    from miarepro.metrics import auc

    lines = ["| study | records | AUC: Yeom | Ours | crafted loss within tenths of the own loss "
             "| rank correlation of crafted and own loss |", "|---|---|---|---|---|---|"]
    rng = np.random.default_rng(0)
    for scores in sorted((run / "results" / "studies").glob("*/scores")):
        if not ((scores / "subpop.parquet").exists() and (scores / "yeom.parquet").exists()):
            continue
        merged = pd.read_parquet(scores / "subpop.parquet").merge(
            pd.read_parquet(scores / "yeom.parquet"), on=["target", "sample", "member"],
            suffixes=("_ours", "_yeom"), validate="one_to_one")
        # per target: the crafted loss up to a constant, and the own loss's order
        merged = merged.assign(crafted=merged["score_ours"] - merged["score_yeom"],
                               own=-merged["score_yeom"])
        per_target = [part for _, part in merged.groupby("target")]
        point = np.mean([auc_given(part, "own", "crafted") for part in per_target])
        boot = [np.mean([auc_given(part.iloc[rng.integers(0, len(part), len(part))], "own",
                                   "crafted") for part in per_target]) for _ in range(draws)]
        low, high = np.quantile(boot, [0.025, 0.975])
        rho = np.mean([spearmanr(part["crafted"], part["own"])[0] for part in per_target])
        yeom, ours = (np.mean([auc(part["member"], part[column])
                               for part in per_target]) for column in ("score_yeom",
                                                                       "score_ours"))
        lines.append(f"| {scores.parent.name} | {len(merged)} | {yeom:.3f} | {ours:.3f} | "
                     f"{point:.3f} [{low:.3f}, {high:.3f}] | {rho:.2f} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default="subpop-mnist", help="a Subpop study of the default "
                        "config (subpop-mnist, subpop-mnist-lenet)")
    parser.add_argument("--shadows", type=int, default=4, help="shadow models to time (>= 2)")
    parser.add_argument("--new-samples", type=int, default=2,
                        help="records to train Sablayrolles's 15 new IN shadow models for")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ablation", action="store_true")
    parser.add_argument("--run", type=Path, help="a finished workflow directory: report what "
                        "the crafted records' loss tells beyond the own loss, from its score "
                        "files, and nothing else")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.shadows < 2:  # each record is IN for half of them: one would leave it no OUT
        parser.error("--shadows must be at least 2")
    if args.run:
        emit([f"# Subpop: does the subpopulation add to the own loss? ({args.run})", "",
              *conditional_report(args.run)], args.out)
        return

    import torch

    from miarepro import metrics
    from miarepro.attacks import get_attack

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        study, files, shadow_seconds = build_study(folder, args.study, args.shadows,
                                                   args.threads)
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
        for record, is_member, seconds, score in new_sample_costs(
                files, args.shadows, args.new_samples, NEW_IN_SHADOWS):
            kind = "member" if is_member else "non-member"
            ratio = seconds / (NEW_IN_SHADOWS * np.mean(shadow_seconds))
            lines.append(f"| Sablayrolles, new sample {record} ({kind}): {NEW_IN_SHADOWS} IN "
                         f"shadows | {seconds:.1f} s ({ratio:.2f}x {NEW_IN_SHADOWS} x the mean "
                         f"shadow; score {score:+.3f}) |")
        if args.ablation:
            ctx = context(folder, files, "subpop", 0)
            for change in ABLATION:
                (variant, _), seconds = timed(spec.fit, files, 0, **{**fit_params, **change})
                ctx = dataclasses.replace(ctx, fit=variant)
                auc = metrics.auc(ctx.target_mask[ctx.audit], get_attack("subpop").fn(ctx))
                lines.append(f"| subpop AUC with {change} | {auc:.3f} (fit {seconds:.0f} s) |")
    emit([f"# Subpop ({args.study}): the BiGAN against the shadow models", "", *lines], args.out)


if __name__ == "__main__":
    main()
