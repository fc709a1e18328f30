"""The steps of the workflow as plain functions of paths and config slices.

Each Snakemake rule's script calls exactly one of these, so every step can also be run and
tested without Snakemake. Outputs are written atomically. Heavy libraries are imported where a
step needs them, so a training job does not pay for pandas and a scoring job not for torch.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from miarepro import io, splits
from miarepro.paths import attack_params

if TYPE_CHECKING:
    from miarepro.attacks import AttackContext

log = logging.getLogger(__name__)


def make_dataset(spec: dict[str, Any], data_dir: str, output: str) -> None:
    """Load (or generate) a dataset once and store it as arrays plus a JSON description."""
    from miarepro.data import load_dataset

    dataset = load_dataset(dict(spec), root=Path(data_dir))
    io.write_arrays(output, X=dataset.X, y=dataset.y)
    io.write_json(Path(output).with_suffix(".json"), {
        "name": dataset.name, "task": dataset.task, "n_classes": dataset.n_classes,
        "input_shape": list(dataset.input_shape), "n_samples": len(dataset.y),
        "meta": dataset.meta,
    })


def make_split(dataset_path: str, spec: dict[str, Any], output: str) -> None:
    n_samples = len(io.read_arrays(dataset_path, ["y"])["y"])
    card = io.read_json(Path(dataset_path).with_suffix(".json"))
    io.write_arrays(output, **splits.make_split(
        n_samples, spec, ood_start=card["meta"].get("ood_start"),
        ood_aligned=card["meta"].get("ood_aligned", False)))


def peak_memory_mb() -> float:
    """This process's peak resident memory, or its peak GPU allocation where larger (MB).

    Training and fit jobs record it in their cards (with Snakemake's between-workflow cache
    they can have no benchmark file), score jobs in their metrics: the cost tables need it."""
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        peak = max(peak, torch.cuda.max_memory_allocated() / 2**20)
    return round(peak, 1)


def model_seed(base_seed: int, role: str, index: int) -> int:
    """Distinct, reproducible seed per model; independent of how many models exist."""
    sequence = np.random.SeedSequence([base_seed, splits.ROLE_IDS[role], index])
    return int(sequence.generate_state(1)[0])


def train(dataset_path: str, split_path: str, role: str, index: int, architecture: dict,
          recipe: dict, queries: list[str], model_path: str, signals_path: str,
          threads: int = 1) -> None:
    """Train model ``role/index`` and save its weights, a JSON card and its logits everywhere."""
    train_several(dataset_path, split_path, role, [(index, model_path, signals_path)],
                  architecture, recipe, queries, threads)


class _Plan(NamedTuple):
    """One model of a training job: where it goes, what it trains on, its seed."""

    index: int
    model_path: str
    signals_path: str
    indices: np.ndarray
    held_out: np.ndarray
    seed: int


def train_several(dataset_path: str, split_path: str, role: str,
                  models: list[tuple[int, str, str]], architecture: dict, recipe: dict,
                  queries: list[str], threads: int = 1, stacked: bool = False) -> None:
    """Train models ``role/index`` for each ``(index, model_path, signals_path)`` of
    ``models``, one after the other, on the dataset and split read once (a job of ten models
    would otherwise read a CIFAR-sized array ten times). Each model is saved as it finishes.
    ``stacked`` trains them all at once instead (:func:`miarepro.training.train_stacked`: the
    same weights, a fraction of the time for small MLPs), then saves them."""
    data = io.read_arrays(dataset_path)
    split = io.read_arrays(split_path)
    n_classes = io.read_json(Path(dataset_path).with_suffix(".json"))["n_classes"]
    recipe = dict(recipe)
    base_seed = int(recipe.pop("seed", 0))
    plans = [_Plan(index, model_path, signals_path, splits.training_indices(split, role, index),
                   splits.held_out_indices(split, role, index),
                   model_seed(base_seed, role, index))
             for index, model_path, signals_path in models]
    if stacked:
        trained = _train_torch_stacked(data, plans, architecture, recipe, queries, n_classes,
                                       threads)
    else:
        trained = (_train_catboost(data, plan.indices, plan.held_out, architecture, n_classes,
                                   plan.seed, threads) if architecture["arch"] == "catboost"
                   else _train_torch(data, plan.indices, plan.held_out, architecture, recipe,
                                     queries, n_classes, plan.seed, threads)
                   for plan in plans)  # a generator: each model is saved as it finishes
    for plan, (logits, info, save) in zip(plans, trained, strict=True):
        info = {**info, "role": role, "index": plan.index,
                "train_indices_sha256": _digest(plan.indices), "architecture": architecture,
                "recipe": recipe, "queries": list(queries), "peak_memory_mb": peak_memory_mb()}
        log.info("%s/%d: %s", role, plan.index, {k: info[k] for k in
                 ("train_accuracy", "test_accuracy", "train_seconds") if k in info})
        io.write_array(plan.signals_path, logits)
        with io.atomic_path(plan.model_path) as tmp:
            save(tmp)
        io.write_json(Path(plan.model_path).with_suffix(".json"), info)


def _train_torch(data: dict, indices: np.ndarray, held_out: np.ndarray, architecture: dict,
                 recipe: dict, queries: list[str], n_classes: int, seed: int,
                 threads: int) -> tuple[np.ndarray, dict[str, Any], Any]:
    import torch

    torch.set_num_threads(threads)  # parallel jobs would otherwise oversubscribe the cores

    from miarepro.training import train_model

    trained = train_model(data["X"], data["y"], indices, architecture, recipe, n_classes, seed,
                          eval_indices=held_out)
    return _signals(trained, data["X"], queries)


def _train_torch_stacked(data: dict, plans: list[_Plan], architecture: dict, recipe: dict,
                         queries: list[str], n_classes: int, threads: int
                         ) -> list[tuple[np.ndarray, dict[str, Any], Any]]:
    import torch

    torch.set_num_threads(threads)

    from miarepro.training import train_stacked

    trained: dict[int, Any] = {}
    for size in sorted({len(plan.indices) for plan in plans}):  # a stack per size: a
        group = [k for k, plan in enumerate(plans) if len(plan.indices) == size]  # LOO model
        models = train_stacked(  # of a member trains on one record fewer
            data["X"], data["y"], [plans[k].indices for k in group], architecture, recipe,
            n_classes, [plans[k].seed for k in group], [plans[k].held_out for k in group])
        trained.update(zip(group, models, strict=True))
    return [_signals(trained[k], data["X"], queries) for k in range(len(plans))]


def _signals(trained: Any, X: np.ndarray, queries: list[str]
             ) -> tuple[np.ndarray, dict[str, Any], Any]:
    """A trained torch model's logits on every record, its card and how to save it."""
    from miarepro.training import predict_logits

    start = time.perf_counter()
    logits = predict_logits(trained.model, X, queries)
    info = {**trained.info, "signal_seconds": round(time.perf_counter() - start, 3)}
    return logits, info, lambda path: io.save_checkpoint(path, trained.model.state_dict())


def _train_catboost(data: dict, indices: np.ndarray, held_out: np.ndarray, architecture: dict,
                    n_classes: int, seed: int, threads: int
                    ) -> tuple[np.ndarray, dict[str, Any], Any]:
    """A CatBoost target or reference model (QMIA's tabular setting); its checkpoint is
    CatBoost's own binary format, which only CatBoost reads (no pickle)."""
    from miarepro import boosting

    X, y = data["X"].reshape(len(data["y"]), -1), data["y"]
    start = time.perf_counter()
    model, info = boosting.train_target(X[indices], y[indices], n_classes, architecture, seed,
                                        threads)
    seconds = time.perf_counter() - start
    logits = boosting.logits(model, X)
    predicted = logits[0].argmax(-1)
    info.update(seed=seed, train_seconds=round(seconds, 3), n_train=len(indices), device="cpu",
                format="catboost-cbm",
                train_accuracy=float(np.mean(predicted[indices] == y[indices])))
    if len(held_out):
        info["test_accuracy"] = float(np.mean(predicted[held_out] == y[held_out]))
    return logits, info, lambda path: model.save_model(str(path), format="cbm")


def _digest(indices: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(indices, dtype=np.int64).tobytes()).hexdigest()


class StudyFiles:
    """Lazy access to a study's data, models and recipe, for white-box attacks.

    Checkpoints are loaded with ``weights_only=True``: only tensors are unpickled. Loading a
    model (torch's import included, the first time) counts as reading, ``read_seconds``,
    which an attack's timing leaves out as it does the fit's arrays.
    """

    def __init__(self, dataset_path: str, split_path: str, model_dir: str,
                 architecture: dict[str, Any], recipe: dict[str, Any]) -> None:
        self.dataset_path, self.model_dir = dataset_path, Path(model_dir)
        self.split = io.read_arrays(split_path)
        self.card = io.read_json(Path(dataset_path).with_suffix(".json"))
        self.architecture, self._recipe = architecture, recipe
        self._loaded: dict[tuple[str, int], Any] = {}  # models queried so far
        self.read_seconds = 0.0

    def features(self) -> np.ndarray:
        return io.read_arrays(self.dataset_path, ["X"])["X"]

    def labels(self) -> np.ndarray:
        return io.read_arrays(self.dataset_path, ["y"])["y"]

    def signals(self, role: str, index: int) -> np.ndarray:
        """The saved logits ``(A, M, C)`` of model ``role/index`` (a fit's input files)."""
        return io.read_array(self.model_dir / role / f"{index}.npy")

    def training_indices(self, role: str, index: int) -> np.ndarray:
        return splits.training_indices(self.split, role, index)

    def parts(self, group: int) -> dict[str, np.ndarray]:
        """The split seen by target / repetition ``group`` (:func:`splits.repetition`)."""
        return splits.repetition(self.split, group)

    def reference_index(self, group: int, i: int) -> int:
        """The index of the ``i``-th reference model of target / repetition ``group``."""
        return splits.reference_indices(str(self.split["scheme"]), group, i + 1)[i]

    def recipe(self) -> dict[str, Any]:
        return dict(self._recipe)

    def fit_seed(self, group: int) -> int:
        """The seed of an attack-side fit (a regressor, a generator, proxies) for target or
        repetition ``group``: the group, moved by the training seed, so that a replicate of the
        study (:func:`miarepro.paths.replicates_of`) fits anew while the first keeps its seeds."""
        return group + splits.STRIDE * int(self._recipe.get("seed", 0))

    def meta(self) -> dict[str, Any]:
        """The dataset card's ``meta`` (a generator's true parameters, the source, ...)."""
        return dict(self.card["meta"])

    def new_model(self) -> Any:
        """A fresh, untrained model of the study's architecture (attack-side copies)."""
        from miarepro.models import build_model

        return build_model(self.architecture, tuple(self.card["input_shape"]),
                           self.card["n_classes"])

    def load_model(self, role: str, index: int) -> Any:
        with io.reading(self):
            model = self.new_model()
            model.load_state_dict(io.load_checkpoint(self.model_dir / role / f"{index}.pt"))
            return model.eval()

    def query(self, role: str, index: int, inputs: np.ndarray) -> np.ndarray:
        """Logits ``(n, C)`` of model ``role/index`` on ``inputs`` (eval mode, no gradient)."""
        if (role, index) not in self._loaded:  # on the GPU where there is one: MERLIN's fit
            model = self.load_model(role, index)  # first: loading imports torch
            from miarepro.training import device

            self._loaded[(role, index)] = model.to(device())
        from miarepro.training import predict_logits

        logits = predict_logits(self._loaded[(role, index)], np.asarray(inputs, dtype=np.float32))
        return logits[0].astype(np.float64)


def fit(settings: dict[str, Any], study: StudyFiles, group: int, arrays_path: str,
        card_path: str, threads: int = 1) -> None:
    """Fit an attack's own model for one group and save its arrays and a JSON card.

    ``settings`` holds the attack family, its fit parameters and its reference count. The card
    records the seconds and peak memory of the fit, its settings and what it reports.
    """
    import torch

    from miarepro.attacks import get_attack
    from miarepro.training import device

    torch.set_num_threads(threads)
    spec = get_attack(settings["attack"])
    start = time.perf_counter()
    arrays, info = spec.fit(study, group, **settings["params"])
    seconds = time.perf_counter() - start
    io.write_arrays(arrays_path, **arrays)
    card = {"attack": spec.name, "group": group, "settings": settings, "info": info,
            "fit_seconds": round(seconds, 3), "peak_memory_mb": peak_memory_mb(),
            "device": str(device())}
    log.info("fit %s/%d: %s", spec.name, group, card)
    io.write_json(card_path, card)


def score(attack: dict[str, Any], dataset_path: str, split_path: str, target_signals: list[str],
          reference_signals: list[str], loo_signals: list[str], output: str,
          study: StudyFiles | None = None, fit_paths: list[str] = (),
          nonmembers: str = "test", fprs: list[float] = (),
          calibration: list[float] = (), alphas: list[float] = ()) -> list[dict[str, float]]:
    """Run one attack instance on every target of a study and write its scores table.

    ``reference_signals`` are the files ``.../reference/<index>.npy`` of every reference model
    any target uses (see :func:`miarepro.splits.reference_indices`). Leave-one-out attacks
    score target 0 only: the leave-one-out models are trained from its training set. Returns
    each target's costs: ``score_seconds``, what the attack itself took (inference time,
    without reading its fit or loading the study's models, torch's import included:
    :func:`io.reading`), and :func:`training_costs` of the models and fit it read. An
    attack entry's ``records`` restricts each target's audit to that many records, half
    members (:func:`miarepro.splits.balanced_records`): a white-box attack, whose cost is per
    record, scores only those; any other scores the whole audit and keeps their rows, so that
    what it estimates across records (LiRA's global variance) is what it is without
    ``records``, and its ``score_seconds`` is their share of the whole audit's time, so that
    a cost per scored row means the same either way.
    ``nonmembers="ood"`` audits each target's members against the dataset's out-of-distribution
    records instead of its test part. Attacks that imply a quantile threshold (see
    :mod:`miarepro.attacks.base`) also get a ``pinball@<fpr>`` column per FPR of ``fprs`` and
    an ``fpr@<a>`` column per level of ``alphas`` (:func:`_quantile_columns`).
    Attacks with a decision threshold also get their member calls (:func:`decision_columns`),
    calibrated on each target's :func:`calibration_records` at each level of ``calibration``.
    """
    import pandas as pd

    from miarepro.attacks import get_attack
    from miarepro.attacks.base import QueryAccess

    spec = get_attack(attack["attack"])
    params = spec.split_params(attack_params(attack))[1]  # the fit's own are in its file
    files = study  # what loading its models took is not the attack's time
    if study is not None and spec.queries and not spec.whitebox:
        study = QueryAccess(study)
    labels = io.read_arrays(dataset_path, ["y"])["y"]
    split = io.read_arrays(split_path)
    by_index = {int(Path(path).stem): path for path in reference_signals}
    if spec.needs_loo:
        target_signals = target_signals[:1]
        loo_records, loo_logits = _loo_inputs(split, attack, loo_signals)
    frames, costs = [], []
    for target, path in enumerate(target_signals):
        context = attack_context(attack, labels, split, target, io.read_array(path), by_index,
                                 fit_paths[target] if fit_paths else None, nonmembers, study)
        records = None
        if spec.needs_loo:
            context = dataclasses.replace(context, audit=loo_records, loo_logits=loo_logits)
        elif attack.get("records"):
            records = splits.balanced_records(context.audit, context.target_mask, context.seed,
                                              attack["records"])
            if spec.whitebox:
                context, records = dataclasses.replace(context, audit=records), None
        audit = context.audit
        held_out = calibration_records(context) if spec.threshold is not None else audit[:0]
        loaded = getattr(files, "read_seconds", 0.0)
        start = time.perf_counter()
        values = np.asarray(spec.fn(dataclasses.replace(
            context, audit=np.concatenate([audit, held_out])), **params), dtype=np.float64)
        # the fit's arrays and the study's models are read on use, which is not timed
        reading = getattr(context.fit, "read_seconds", 0.0) + getattr(
            files, "read_seconds", 0.0) - loaded
        seconds = time.perf_counter() - start - reading
        if records is not None:  # charged its records' share, as its rows are theirs alone
            seconds *= len(records) / len(audit)
        models = [by_index[i] for i in _reference_indices(split, attack, target)]
        costs.append({"score_seconds": seconds, **training_costs(
            models + list(loo_signals), fit_paths[target] if fit_paths else None)})
        if values.shape != (len(audit) + len(held_out),):
            raise RuntimeError(f"attack {spec.name!r} returned shape {values.shape}, "
                               f"expected {(len(audit) + len(held_out),)}")
        if not np.isfinite(values).all():  # the metrics would rank a NaN above every score
            bad = np.concatenate([audit, held_out])[~np.isfinite(values)]
            raise RuntimeError(f"attack {spec.name!r} returned {len(bad)} non-finite scores "
                               f"on target {target} (records {bad[:5].tolist()}, ...)")
        values, held_out_values = values[: len(audit)], values[len(audit):]
        frame = pd.DataFrame({"sample": audit, "target": target,
                              "member": context.target_mask[audit], "score": values})
        if spec.quantiles is not None and len(fprs) + len(alphas):
            frame = frame.assign(**_quantile_columns(spec, context, params, fprs, alphas))
        if spec.threshold is not None:
            frame = frame.assign(**decision_columns(
                values, labels[audit], spec.threshold, held_out_values, labels[held_out],
                calibration))
        if records is not None:  # the records' rows, in their order
            order = np.argsort(audit)
            frame = frame.iloc[order[np.searchsorted(audit[order], records)]].reset_index(
                drop=True)
        frames.append(frame)
    io.write_table(output, pd.concat(frames, ignore_index=True))
    return costs


def training_costs(model_signals: list[str], fit_path: str | None) -> dict[str, float]:
    """``model_seconds``, the training of the attack-side models whose signal files a target's
    attack read, and ``fit_seconds``, its fit's: from the cards their jobs wrote beside those
    files (``.json`` beside ``.npy`` and ``.npz``, outputs of the same job, so complete when the
    inputs are). The artifacts' compute columns read them here, from the metrics, rather than
    every artifact declaring every card: thousands of inputs that slowed each dry run."""
    def card(path: str) -> dict[str, Any]:
        return io.read_json(str(Path(path).with_suffix(".json")))

    return {"model_seconds": sum(card(path)["train_seconds"] for path in model_signals),
            "fit_seconds": card(fit_path)["fit_seconds"] if fit_path else 0.0}


def _reference_indices(split: dict[str, np.ndarray], attack: dict[str, Any],
                       target: int) -> list[int]:
    """The reference models target ``target``'s attack reads."""
    return splits.reference_indices(str(split["scheme"]), target, attack.get("n_reference", 0))


def calibration_records(context: AttackContext) -> np.ndarray:
    """Stolen Memories' Algorithm 3 calibrates on the attacker's hold-out records, which the
    target never saw: the repetition's reference pool, whole (the paper does not state the
    sample size). Empty where that pool is the audit itself (balanced splits)."""
    pool = np.asarray(context.reference_pool)
    return pool[:0] if np.isin(pool, context.audit).any() else pool


def decision_columns(values: np.ndarray, labels: np.ndarray, threshold: float,
                     held_out_values: np.ndarray, held_out_labels: np.ndarray,
                     levels: list[float]) -> dict[str, np.ndarray]:
    """Member calls of an attack with a decision rule: ``decision`` (score above its own
    threshold) and, per calibration level ``a``, ``decision@cal<100a>`` (score above the
    class's Algorithm 3 threshold on the hold-out scores; none without hold-out records)."""
    from miarepro.metrics import class_thresholds
    from miarepro.uncertainty import decision_name

    columns = {decision_name(None): values > threshold}
    if len(held_out_values):
        n_classes = int(max(labels.max(), held_out_labels.max())) + 1
        for level in levels:
            tau = class_thresholds(held_out_values, held_out_labels, level, n_classes)
            columns[decision_name(level)] = values > tau[labels]
    return columns


def _quantile_columns(spec: Any, context: AttackContext, params: dict[str, Any],
                      fprs: list[float], alphas: list[float]) -> dict[str, np.ndarray]:
    """Per-sample columns of an attack that implies a non-member quantile (meaningful on the
    non-members, whose means they are): ``pinball@<fpr>``, the pinball loss of the implied
    ``1 - fpr`` quantile, and ``fpr@<a>``, whether the statistic reaches the ``1 - a``
    quantile (QMIA's Theorem 1: a non-member does with probability ``a``). None for an
    attack that cannot imply one here (the marginal baseline without public records)."""
    from miarepro.metrics import pinball_losses
    from miarepro.uncertainty import exceedance_name, pinball_name

    levels = [*fprs, *alphas]
    implied = spec.quantiles(context, 1.0 - np.asarray(levels, dtype=float), **params)
    if implied is None:
        return {}
    statistic, thresholds = implied
    columns = {pinball_name(fpr): pinball_losses(thresholds[:, j], statistic, fpr)
               for j, fpr in enumerate(fprs)}
    columns.update({exceedance_name(a): statistic >= thresholds[:, len(fprs) + j]
                    for j, a in enumerate(alphas)})
    return columns


def attack_context(attack: dict[str, Any], labels: np.ndarray, split: dict[str, np.ndarray],
                   target: int, target_logits: np.ndarray, reference_signals: dict[int, str],
                   fit_path: str | None = None, nonmembers: str = "test",
                   study: StudyFiles | None = None) -> AttackContext:
    """The :class:`~miarepro.attacks.AttackContext` of one attack instance on target ``target``;
    ``reference_signals`` maps reference model indices to their signal files."""
    from miarepro.attacks import AttackContext

    part = splits.repetition(split, target)
    indices = _reference_indices(split, attack, target)
    return AttackContext(
        labels=labels, audit=splits.audit(part, nonmembers), population=part["population"],
        validation=part["validation"], target_logits=target_logits,
        target_mask=splits.training_mask(split, "target", target),
        reference_logits=_stack([reference_signals[i] for i in indices],
                                empty_like=target_logits),
        reference_masks=np.array([splits.training_mask(split, "reference", i)
                                  for i in indices]).reshape(len(indices), len(labels)),
        reference_pool=part["reference_pool"],
        fit=io.LazyArrays(fit_path) if fit_path else None,
        target_index=target, seed=int(split["seed"]), study=study)


def measure(scores_path: str, settings: dict[str, Any], split_path: str, output: str,
            costs: list[dict[str, float]] | None = None) -> None:
    """Every metric of one attack, with what its interval needs (:mod:`miarepro.uncertainty`).

    Bootstrap replicates are seeded by the study's split seed, so all attacks of a study are
    resampled alike and can be compared pairwise. Only a partition split's targets are
    repetitions, whose spread is an interval of its own; a balanced split's share their pool.
    """

    from miarepro import uncertainty

    split = io.read_arrays(split_path, ["seed", "scheme"])
    table = uncertainty.metric_table(io.read_table(scores_path), settings["fprs"],
                                     int(split["seed"]), settings["bootstrap"], costs,
                                     repetitions=str(split["scheme"]) == "partition")
    # the job's peak memory, by itself: Snakemake's benchmark file measures the job's process,
    # which is not the one scoring when a warm worker runs the job (miarepro.warm)
    table.insert(table.columns.get_loc("n_nonmembers") + 1, "peak_memory_mb", peak_memory_mb())
    io.write_table(output, table)


def _stack(paths: list[str], empty_like: np.ndarray) -> np.ndarray:
    if not paths:
        return np.zeros((0, *empty_like.shape), dtype=np.float32)
    return np.stack([io.read_array(path, mmap=True) for path in paths])


def _loo_inputs(split: dict, attack: dict, loo_signals: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Audit = the leave-one-out records; logits ``(R, J, A, C)`` of their LOO models."""
    records = splits.loo_records(split, attack["loo_records"])
    models = attack["loo_models"]
    by_record = []
    for k, record in enumerate(records):
        paths = loo_signals[k * models : (k + 1) * models]
        by_record.append(np.stack([io.read_array(p, mmap=True)[:, record] for p in paths]))
    return records, np.stack(by_record)


