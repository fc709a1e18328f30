"""Recompute attack scores from a run's saved model outputs: an independent check of scoring.

    .venv/bin/python benchmarks/recheck_scores.py --run DIR [--config FILE] [--float32]
        [--all [--exclude STUDY:ATTACK ...] | STUDY:ATTACK ...]

A score file (``studies/<study>/scores/<attack>.parquet``) is the package's attack code applied
to the logits each model saved (``models/<role>/<index>.npy``: queries x records x classes).
This rebuilds the attack's inputs without importing ``miarepro`` (:mod:`recheck_inputs`: every
model's training records from the split, checked against its card) and recomputes the attack
as its paper states it: the attacks on reference models' logits, Shokri et al.'s shadow-model
attack, the L-attack and LiRA-L (against each record's own leave-one-out models, their training
sets checked against their cards) and QMIA from the regressor's predictions its fit saved
(:mod:`recheck_reference`; QMIA's training on public records only is the tests' to check, its
calibration the claims'); IHA and SIF from an exact Hessian of the target's saved weights,
or by Hessian-vector products where it has too many parameters to form one
(:mod:`recheck_iha`); Stolen Memories' naive attack (the target's prediction right or wrong)
here; BMIA, Subpop, MERLIN, bayes-wb and general-wb drawn anew (:mod:`recheck_drawn`, on
networks rebuilt from their weights by :mod:`recheck_networks`).

Each target's rows are compared in the file's order. MATCH: every row within 1e-6 of
max(|score|, the scores' spread); CLOSE: ranks and AUC agree (Spearman > 0.9999, AUC within
1e-3); else MISMATCH, exit status 1. Everything here is float64; the package exponentiates in
float32 inside the log-sum-exp of its statistics (``miarepro/signals.py``), and ``--float32``
does the same, to tell a difference of precision from one of method. This check found RMIA's
mean of probabilities over models taken so too, where their spread is below float32's
resolution: it is float64 now, here and in the package. For RMIA the published step score's
AUC is reported beside, with the share of rows with ``d = floor(score (|Z| + 1))`` (the
package's refinement breaks ties and reorders nothing).

Attacks that draw at random are checked as a draw, CONSISTENT (:func:`recheck_drawn.consistent`):
the file's AUC, TPR@1%, median and interquartile range of scores lie within
:data:`recheck_drawn.WITHIN` standard deviations of the redraws' (a t with 19 degrees of
freedom: each beyond it once in 10,000), it correlates with the redraws as they do with each
other, and its rank among each record's redraws is uniform; where one draw serves every
record, as proxies and MC weights do, each of those summaries' rank among the redraws' is
uniform over the targets (:func:`recheck_drawn.summary_ranks`,
:func:`recheck_drawn.uniform_ranks`, with enough redraws to fail over 3 targets:
:func:`recheck_drawn.shared_redraws`); else INCONSISTENT, exit status 1.
bayes-wb's meta model is recomputed from the layer instances' score files and the network its
fit saved (MATCH: the meta step exact; its inputs checked where the layers are); general-wb
from proxies drawn anew and the displacements and meta model its fit saved (CONSISTENT). An
instance this script cannot recompute is listed as not rechecked, with the reason.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from recheck_claims import rank_auc  # benchmarks/recheck_claims.py: this folder
from recheck_drawn import (
    BMIA_TARGETS,
    CONV_RECORDS,
    REDRAWN_ON_A_SAMPLE,
    REDRAWS,
    SEED,
    SM_FIT_KEYS,
    WITHIN,
    bayes_wb,
    bayes_wb_meta,
    bmia,
    consistent,
    general_wb,
    shared_redraws,
    subpop,
    summary_ranks,
    uniform_ranks,
)
from recheck_iha import TooLarge, iha, known_records, products, target_curvature, target_model
from recheck_inputs import (
    STRIDE,
    NotRechecked,
    audited,
    checked_mask,
    fit_of,
    loo_records,
    partition,
    statistics,
)
from recheck_reference import (
    QMIA_FIT_KEYS,
    attack_r,
    calibrated,
    continuous_step,
    exceedance,
    lira,
    omniscient,
    rmia_ratio,
    shadow,
    yeom,
)
from scipy import stats

DEFAULT = [f"bmia-purchase:{a}" for a in ("attack-p", "loss", "attack-r-n2", "attack-r-n8",
                                          "lira-n2", "lira-n8", "lira-global-n8", "rmia-n2",
                                          "rmia-n8")] \
    + [f"iha-mnist{r}:{a}" for r in ("", "-r1", "-r2") for a in ("loss", "lira-online")] \
    + [f"qmia-mnist-mlp1:{a}" for a in ("marginal", "lira-n2", "lira-n8", "lira-ref-mlp4")] \
    + [f"{study}:{a}" for study in ("iha-purchase", "subpop-mnist")
       for a in ("watson", "sablayrolles")] \
    + ["iha-purchase:rmia-online"] \
    + [f"iha-mnist:{a}" for a in ("iha", "iha-no-loo", "iha-damping-1e-1", "iha-low-rank-1e-1",
                                  "iha-i1-i2", "iha-loss-i1", "sif")] \
    + [f"iha-mnist:iha-fraction-{f}" for f in (20, 40, 60, 80, 90)] \
    + [f"iha-mnist-odd:{a}" for a in ("iha", "iha-low-rank-2e-1", "sif", "loss", "lira-online")] \
    + ["iha-purchase:iha-cg"] \
    + [f"qmia-mnist-mlp1:{a}" for a in ("qmia", "qmia-mlp")] \
    + [f"qmia-tabular:{a}" for a in ("qmia", "qmia-search")] \
    + [f"qmia-purchase:{a}" for a in ("qmia", "qmia-quantiles")] \
    + [f"subpop-mnist{r}:yeom" for r in ("", "-r1", "-r2")] \
    + [f"bmia-mnist:{a}" for a in ("bmia", "bmia-diag-n100", "bmia-full", "bmia-kron-n300",
                                   "bmia-validation", "bmia-mc", "bmia-ref-mlp", "bmia-ref-wide")] \
    + [f"bmia-mnist-{s}:bmia-ref-{r}" for s, r in (("mlp", "lenet"), ("mlp", "wide"),
                                                   ("wide", "lenet"), ("wide", "mlp"))] \
    + [f"bmia-mnist-ood:{a}" for a in ("bmia", "attack-p", "qmia", "rmia-n8")] \
    + [f"subpop-mnist{n}:{a}" for n in ("", "-lenet") for a in ("subpop-natural", "subpop",
                                                                "jayaraman")] \
    + [f"subpop-mnist:{a}" for a in ("subpop-inverse-5e-2", "subpop-blackbox")] \
    + [f"{study}:naive" for study in ("sm-bcw", "sm-digits", "sm-mnist-lenet")] \
    + [f"sm-synthetic-{n}:{a}" for n in (100, 200, 400) for a in ("omniscient", "bayes-wb")] \
    + [f"{study}:bayes-wb" for study in ("sm-bcw", "sm-german-like", "sm-adult-like-4000")] \
    + [f"sm-digits:bayes-wb-layer-{n}" for n in (1, 2, 3)] + ["sm-digits:bayes-wb"] \
    + [f"sm-mnist-lenet:bayes-wb-layer-{n}" for n in (3, 4, 5)] \
    + [f"sm-synthetic-100:general-wb-{n}" for n in ("minimal", "16")] \
    + [f"{study}:general-wb" for study in ("sm-bcw", "sm-bcw-dropout", "sm-german-like",
                                           "sm-adult-like-4000", "sm-digits")] \
    + [f"{study}:shadow-bb" for study in ("sm-bcw", "sm-german-like", "sm-adult-like-4000",
                                          "sm-digits", "sm-mnist-lenet")] \
    + [f"subpop-mnist{n}:shokri" for n in ("", "-lenet")] \
    + [f"iha-mnist{r}:{a}" for r in ("", "-r1", "-r2") for a in ("l-attack", "lira-l")]
TOLERANCE = 1e-6
REPO = Path(__file__).resolve().parent.parent


# --- one (study, attack) --------------------------------------------------------------------
def recheck(run: Path, config: dict, study: str, name: str, f32: bool,
            curvatures: dict) -> dict:
    """One attack instance of one study, every target: ``curvatures`` keeps each IHA target's
    Hessian for the study's other IHA instances. A study whose models are another's
    (``models_from``) reads that one's split, models, fits and settings, its own scores."""
    base = re.sub(r"-r\d+$", "", study)  # a replicate's attacks are its study's
    entry = config["studies"][base]["attacks"][name]
    source = config["studies"][base].get("models_from", base)
    spec = config["studies"][source]
    scores = run / "results" / "studies" / study / "scores" / f"{name}.parquet"
    home = run / "results" / "studies" / (source + study[len(base):])
    models = home / "models"
    if "reference_study" in entry:  # the same replicate of the other study
        models = home.parent / (entry["reference_study"] + study[len(base):]) / "models"
    data = np.load(run / f"results/datasets/{spec['dataset']}.npz")
    labels = data["y"]
    split = dict(np.load(home / "split.npz"))
    kind, k = entry["attack"], entry.get("n_reference", 0)
    cache: dict = {}

    def stat(where: Path, index: int, key: str, idx: np.ndarray) -> np.ndarray:
        if (where, index) not in cache:
            cache[where, index] = statistics(np.load(where / f"{index}.npy"), labels, f32)
        return cache[where, index][key][:, idx]

    def inputs(key: str, idx: np.ndarray, t: int, refs: list[int], masks: np.ndarray) -> tuple:
        return (stat(home / "models" / "target", t, key, idx),
                np.stack([stat(models / "reference", i, key, idx) for i in refs]), masks[:, idx])

    rows = {key: [] for key in ("abs", "rel", "tol", "rho", "ours", "theirs", "step", "agree",
                                "z", "rank", "delta")}
    frame = pd.read_parquet(scores)
    if kind == "bmia":
        frame = frame[frame["target"] < BMIA_TARGETS]
    # shared: one draw serves every record (proxies, MC weights), read whole over the targets
    shared = (kind in ("bayes_wb", "general_wb") and not entry.get("meta")) or (
        kind == "bmia" and entry.get("predictive") == "mc")
    redraws = shared_redraws(frame["target"].nunique()) if shared else REDRAWS
    for t, theirs in frame.groupby("target"):
        part, t = partition(split, int(t)), int(t)
        if kind in REDRAWN_ON_A_SAMPLE and spec["model"]["arch"] != "mlp":
            theirs = theirs.iloc[np.linspace(0, len(theirs) - 1, CONV_RECORDS).astype(int)]
        audit = audited(part, config["studies"][base].get("nonmembers", "test"))
        member = checked_mask(split, home / "models", "target", t)
        kept = np.searchsorted(audit, theirs["sample"])  # a subset where `records` is set
        if not (np.array_equal(audit[np.minimum(kept, len(audit) - 1)], theirs["sample"])
                and np.array_equal(theirs["member"], member[audit][kept])):
            raise SystemExit(f"{study}/{name} target {t}: audit or membership differs")
        refs = [(t * STRIDE if str(split["scheme"]) == "partition" else 0) + i for i in range(k)]
        masks = np.array([checked_mask(split, models, "reference", i) for i in refs],
                         dtype=bool).reshape(k, len(labels))
        on = {"t": t, "refs": refs, "masks": masks}
        if kind == "marginal":
            ours = stat(home / "models" / "target", t, entry["statistic"], audit).mean(axis=0)
        elif kind == "lira":
            ours = lira(*inputs(entry["statistic"], audit, **on), entry.get("mode", "online"),
                        entry.get("variance", "per_example"))
        elif kind in ("watson", "sablayrolles"):
            ours = calibrated(*inputs(entry.get("statistic", "loss"), audit, **on), kind)
        elif kind == "attack_r" and entry.get("statistic", "loss") == "loss":
            ours = attack_r(*inputs("loss", audit, **on))
        elif kind == "rmia":
            a, online = entry.get("a", 0.3), entry.get("mode", "offline") == "online"
            x = rmia_ratio(*inputs("loss", audit, **on), a, online)
            z = rmia_ratio(*inputs("loss", part["population"], **on), a, online)
            step, ours = continuous_step(z, x - np.log(entry.get("gamma", 1.0)))
            step = step[kept]
            rows["agree"].append(np.mean(np.floor(theirs["score"] * (len(z) + 1)) == step))
            rows["step"].append(rank_auc(member[audit[kept]], step / len(z)))
        elif kind in ("iha", "sif"):
            known = (known_records(member, audit, entry["fraction"], [int(split["seed"]), t])
                     if "fraction" in entry else None)
            try:
                if (study, t) not in curvatures:
                    curvatures[study, t] = target_curvature(home, split, data, t)
                ours = iha(curvatures[study, t], member[audit], entry, known)
            except TooLarge:  # the scored records only, by Hessian-vector products
                if known is not None:
                    raise NotRechecked("a known fraction without the exact Hessian") from None
                ours = np.full(len(audit), np.nan)
                state, card, train = target_model(home, split, t)
                ours[kept] = iha(products(state, card, data["X"], data["y"], train, audit[kept]),
                                 member[audit[kept]], entry)
        elif kind == "naive":  # member iff the target's first query predicts the label
            ours = (np.load(home / "models" / "target" / f"{t}.npy")[0, audit].argmax(-1)
                    == labels[audit]).astype(np.float64)
        elif kind == "omniscient":
            dataset = run / "results" / "datasets" / spec["dataset"]
            ours = omniscient(data["X"], labels, np.flatnonzero(member), audit,
                              json.loads(dataset.with_suffix(".json").read_text())["meta"])
        elif kind == "yeom":
            ours = yeom(stat(home / "models" / "target", t, "loss", np.arange(len(labels))),
                        member, audit)
        elif kind == "qmia":
            fit, _ = fit_of(home, "qmia", QMIA_FIT_KEYS, entry, t)  # (s - mu(x)) / sigma(x)
            hinge = stat(home / "models" / "target", t, "hinge", audit)[0]
            ours = ((hinge - fit["mu"][audit]) / fit["sigma"][audit]
                    if entry.get("head", "gaussian") == "gaussian"
                    else exceedance(hinge, fit["quantiles"][audit]))
        elif kind in ("subpop", "subpop_blackbox", "subpop_inverse", "subpop_natural",
                      "merlin") and entry.get(
                "pool", "population") == "population":
            drawn = subpop(home, data, split, entry, t, audit[kept])  # (draws, records)
            ours = np.full((len(drawn), len(audit)), np.nan)
            ours[:, kept] = drawn
        elif kind in ("l_attack", "lira_l"):  # OUT: each record's own leave-one-out models
            records, key = loo_records(split, entry["loo_records"]), entry.get("statistic", "loss")
            if not np.array_equal(np.sort(records), np.sort(theirs["sample"])):
                raise SystemExit(f"{study}/{name}: its records are not the leave-one-out ones")
            models_of = list(itertools.product(range(entry["loo_models"]), range(len(records))))
            for j, k in models_of:  # each model's training set against its card
                checked_mask(split, home / "models", "loo", j * STRIDE + k)
            loo = np.array([stat(home / "models" / "loo", j * STRIDE + k, key, records[[k]])[:, 0]
                            for j, k in models_of]).reshape(
                entry["loo_models"], len(records), -1).transpose(0, 2, 1)  # (J, queries, R)
            inside = np.zeros(loo.shape[::2], dtype=bool)  # (models, records): all OUT
            target = stat(home / "models" / "target", t, key, records)
            drawn = (attack_r(target, loo, inside) if kind == "l_attack"
                     else lira(target, loo, inside, "offline", entry.get("variance",
                                                                         "per_example")))
            ours = np.full(len(audit), np.nan)
            ours[np.searchsorted(audit, records)] = drawn
        elif kind == "shadow":
            ours = shadow(np.load(home / "models" / "target" / f"{t}.npy"),
                          np.stack([np.load(models / "reference" / f"{i}.npy") for i in refs]),
                          masks, labels, part["reference_pool"], audit,
                          [int(split["seed"]), t], entry, f32)
        elif kind == "bayes_wb" and entry.get("meta"):
            ours = np.full(len(audit), np.nan)
            ours[kept] = bayes_wb_meta(home, entry, t, layer_scores(
                run / "results" / "studies" / study / "scores", config["studies"][base]["attacks"],
                entry, t, audit[kept]))
        elif kind in ("bayes_wb", "general_wb"):
            ours = (bayes_wb if kind == "bayes_wb" else general_wb)(home, data, split, spec,
                                                                    entry, t, audit, redraws)
        elif kind == "bmia":
            ours = bmia(home, models, split, labels, entry, t, audit, rows, redraws)
        else:
            raise NotRechecked(f"{kind} with " + ", ".join(
                f"{key}={value}" for key, value in entry.items()
                if key not in ("attack", "label", "paper_attack", "paper_setting")))
        if ours.ndim == 2:  # redrawn: the file must be one more draw where there are several
            if len(ours) > 1:
                drawn = member[audit[kept]], theirs["score"].to_numpy(), ours[:, kept]
                if shared:
                    rows["rank"].append(summary_ranks(*drawn, np.random.default_rng([SEED, t])))
                else:
                    rows["z"].append(consistent(*drawn))
            ours = ours[0]
        ours, audit = ours[kept], audit[kept]
        diff = np.abs(ours - (score := theirs["score"].to_numpy()))
        rows["abs"].append(diff.max())
        rows["rel"].append((diff / np.maximum(np.abs(score), 1e-300)).max())
        rows["tol"].append((diff / np.maximum(np.abs(score), score.std())).max() / TOLERANCE)
        rows["rho"].append(stats.spearmanr(ours, score).statistic)
        rows["ours"].append(rank_auc(member[audit], ours))
        rows["theirs"].append(rank_auc(member[audit], score))
    if rows["rank"]:  # shared draws: each summary's ranks over the targets
        rows["z"] += [uniform_ranks(ranks, redraws) for ranks in zip(*rows["rank"], strict=True)]
    # numpy's max and min, not Python's: a NaN (a target's 0/0) must fail a check wherever it
    # falls, where Python's max skips one that is not first
    close = (np.min(rows["rho"]) > 0.9999
             and np.ptp([rows["ours"], rows["theirs"]], 0).max() < 1e-3)
    mean = {key: np.mean(values) if values else np.nan for key, values in rows.items()}
    verdict = "MATCH" if np.max(rows["tol"]) <= 1 else "CLOSE" if close else "MISMATCH"
    if rows["z"]:  # drawn at random: the file must be one more draw of the recheck's
        verdict = "CONSISTENT" if np.max(rows["z"]) <= WITHIN else "INCONSISTENT"
    return {"study": study, "attack": name, "targets": len(rows["abs"]),
            "max_abs": np.max(rows["abs"]), "max_rel": np.max(rows["rel"]),
            "min_spearman": np.min(rows["rho"]), **{f"auc_{key}": mean[key] for key in
                                                    ("ours", "theirs", "step")},
            "step_agrees": mean["agree"], "max_z": np.max(rows["z"]) if rows["z"] else np.nan,
            "delta_rel": np.max(rows["delta"]) if rows["delta"] else np.nan,
            "verdict": verdict}


def layer_scores(scores: Path, attacks: dict, entry: dict, t: int, samples: np.ndarray
                 ) -> np.ndarray:
    """``(records, layers)``: target ``t``'s scores of ``samples`` in the score files of the
    study's bayes-wb instance of each attacked layer that shares ``entry``'s fit (bayes-wb's
    meta model reads them)."""
    fit = {key: entry.get(key) for key in SM_FIT_KEYS}
    layers = {e.get("layer", -1): name for name, e in attacks.items()
              if e["attack"] == "bayes_wb" and not e.get("meta")
              and {key: e.get(key) for key in SM_FIT_KEYS} == fit}
    if sorted(layers) != list(range(len(layers))):
        raise NotRechecked(f"bayes-wb's meta model without an instance of each layer: {layers}")
    columns = []
    for layer in range(len(layers)):
        frame = pd.read_parquet(scores / f"{layers[layer]}.parquet")
        rows = frame[frame["target"] == t]
        if not np.array_equal(rows["sample"], samples):
            raise SystemExit(f"{layers[layer]}: target {t}'s records differ from the meta's")
        columns.append(rows["score"].to_numpy())
    return np.column_stack(columns)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--config", type=Path, default=REPO / "config" / "config.yaml",
                        help="the run's config (default: the repository's)")
    parser.add_argument("--float32", action="store_true",
                        help="the statistics' exponentials in float32, as the package's")
    parser.add_argument("--all", action="store_true",
                        help="every attack instance of the run, each study and replicate; one "
                             "whose recheck fails with an error is a row, one this script "
                             "cannot recompute is listed below the table")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="STUDY:ATTACK",
                        help="with --all, pairs to leave out (the LeNet's convolutional "
                             "white-box instances take longest: 23 minutes to over an hour)")
    parser.add_argument("pairs", nargs="*", help="STUDY:ATTACK (default: a list of "
                                                 f"{len(DEFAULT)} covering every family)")
    args = parser.parse_args()
    if args.all and args.pairs:
        parser.error("give STUDY:ATTACK pairs or --all, not both")
    if args.exclude and not args.all:
        parser.error("--exclude goes with --all")
    config = yaml.safe_load(args.config.read_text())
    pairs = every_pair(args.run, config, args.exclude) if args.all else args.pairs or DEFAULT
    curvatures: dict = {}
    rows, skipped = [], []
    for number, pair in enumerate(pairs, 1):
        study, attack = pair.split(":")
        start = time.perf_counter()
        try:
            rows.append(recheck(args.run, config, study, attack, args.float32, curvatures))
            verdict = rows[-1]["verdict"]
        except NotRechecked as reason:
            skipped.append(f"{pair}: {reason}")
            verdict = "not rechecked"
        except (SystemExit, Exception) as failure:  # one row each in a run over everything
            if not args.all:
                raise
            kind = "FAILED" if isinstance(failure, SystemExit) else type(failure).__name__
            rows.append({"study": study, "attack": attack, "verdict": f"{kind}: {failure}"})
            verdict = rows[-1]["verdict"]
        curvatures = {key: c for key, c in curvatures.items() if key[0] == study}
        print(f"[{number}/{len(pairs)}] {pair}: {verdict} ({time.perf_counter() - start:.0f} s)",
              file=sys.stderr, flush=True)
    table = pd.DataFrame(rows, columns=None if rows else ["study", "attack", "verdict"])
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    print("\nAUCs: means over targets. RMIA: auc_step, the published step score d / |Z|; "
          "step_agrees, the share of rows with d = floor(score (|Z| + 1)).")
    if skipped:
        print(f"\nNot rechecked ({len(skipped)} of {len(pairs)}):", *skipped, sep="\n- ")
    if table.empty:
        print("\nNothing was rechecked: no score agrees for want of a check.")
    return int(table.empty or ~table["verdict"].isin(["MATCH", "CLOSE", "CONSISTENT"]).all())


def every_pair(run: Path, config: dict, exclude: Sequence[str] = ()) -> list[str]:
    """``STUDY:ATTACK`` for every score file of the run that the config names, less
    ``exclude`` (each of which must be one)."""
    pairs = []
    for home in sorted((run / "results" / "studies").iterdir()):
        base = re.sub(r"-r\d+$", "", home.name)
        pairs += [f"{home.name}:{attack}" for attack in config["studies"].get(base, {}).get(
            "attacks", {}) if (home / "scores" / f"{attack}.parquet").exists()]
    if unknown := set(exclude) - set(pairs):
        raise SystemExit(f"--exclude: no score file of {', '.join(sorted(unknown))} in {run}")
    return [pair for pair in pairs if pair not in exclude]


if __name__ == "__main__":
    sys.exit(main())
