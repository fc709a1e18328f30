"""What a score recheck starts from, rebuilt without importing ``miarepro``: each target's
audit and population and every model's training records from the run's ``split.npz``, checked
against the model's card, the statistics of the logits each model saved, a model's training
recipe, and the fit an attack instance read.

Repetition ``t`` of a partition split is drawn from ``default_rng([seed, t])``, complementary
halves of a balanced one from ``default_rng([seed, role, i // 2])``; a model's training indices
must match the SHA-256 in its JSON card (:func:`checked_mask`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
from scipy import special

ROLE_IDS, STRIDE = {"target": 1, "reference": 2, "loo": 3}, 1000


class NotRechecked(Exception):
    """An attack instance, or a setting of one, that this script cannot recompute on its own
    (a failed check is a ``SystemExit``)."""


# --- splits: which records each model trained on -------------------------------------------
def partition(split: dict, t: int) -> dict:
    """Repetition ``t`` of a split: the stored one for 0 or a balanced split, else redrawn."""
    if str(split["scheme"]) == "balanced" or t == 0:
        return split
    n = int(split["n_samples"]) - len(split["ood"])
    order = np.random.default_rng([int(split["seed"]), t]).permutation(n)
    cuts = np.round(np.cumsum([0.0, *split["fraction_values"]]) * n).astype(int)
    part = {name: np.sort(order[cuts[k]:cuts[k + 1]])
            for k, name in enumerate(split["fraction_names"].tolist())}
    part.setdefault("population", np.empty(0, dtype=np.int64))
    part["audit"] = np.sort(np.concatenate([part["target_train"], part["target_test"]]))
    if "reference_parts" in split:
        part["reference_parts"] = split["reference_parts"]
    part["ood"], part["ood_aligned"] = split["ood"], split.get("ood_aligned", False)
    return part


def audited(part: dict, nonmembers: str) -> np.ndarray:
    """A repetition's audited records: its audit, or (``nonmembers: ood``) the target's members
    against the out-of-distribution records (for copies of the dataset's records, the copies
    of the target's test records)."""
    if nonmembers != "ood":
        return part["audit"]
    ood = part["ood"][part["target_test"]] if bool(part["ood_aligned"]) else part["ood"]
    return np.sort(np.concatenate([part["target_train"], ood]))


def loo_records(split: dict, count: int) -> np.ndarray:
    """IHA's leave-one-out records: members and non-members of target 0 alternating, each in
    an order drawn from ``default_rng([seed, 3])`` (the first ``count``)."""
    audit, member = split["audit"], np.isin(split["audit"], trained_on(split, "target", 0))
    rng = np.random.default_rng([int(split["seed"]), ROLE_IDS["loo"]])
    members, outsiders = rng.permutation(audit[member]), rng.permutation(audit[~member])
    records = np.empty(count, dtype=np.int64)
    records[0::2], records[1::2] = members[:(count + 1) // 2], outsiders[:count // 2]
    return records


def trained_on(split: dict, role: str, index: int) -> np.ndarray:
    """Models 2j and 2j+1 split their pool in complementary halves (a partition's target:
    its repetition's training part); leave-one-out model ``j STRIDE + k``, target 0's training
    set without the ``k``-th leave-one-out record."""
    seed, balanced = int(split["seed"]), str(split["scheme"]) == "balanced"
    if role == "loo":
        target = trained_on(split, "target", 0)
        return target[target != loo_records(split, index % STRIDE + 1)[-1]]
    if role == "target" and not balanced:
        return partition(split, index)["target_train"]
    part = partition(split, 0 if balanced else index // STRIDE)
    pool = part["reference_pool"] if role == "target" or "reference_parts" not in part \
        else np.sort(np.concatenate([part[p] for p in part["reference_parts"].tolist()]))
    order = np.random.default_rng([seed, ROLE_IDS[role], index // 2]).permutation(len(pool))
    return np.sort(pool[order[:len(pool) // 2] if index % 2 == 0 else order[len(pool) // 2:]])


def checked_mask(split: dict, models: Path, role: str, index: int) -> np.ndarray:
    """Membership of a model over the dataset, after checking it against the model's card."""
    indices = trained_on(split, role, index)
    card = json.loads((models / role / f"{index}.json").read_text())
    digest = hashlib.sha256(np.ascontiguousarray(indices, dtype=np.int64).tobytes()).hexdigest()
    if digest != card["train_indices_sha256"]:
        raise SystemExit(f"membership of {models}/{role}/{index} differs from its card")
    mask = np.zeros(int(split["n_samples"]), dtype=bool)
    mask[indices] = True
    return mask


# --- statistics, member-high, (queries, records) -------------------------------------------
def lse(values: np.ndarray, axis: int, f32: bool) -> np.ndarray:
    """log-sum-exp over ``axis``; ``f32``: as the package's, the maximum subtracted in the
    input's precision, the exponentials taken in float32 and summed in float64."""
    if not f32:
        return special.logsumexp(np.asarray(values, dtype=np.float64), axis=axis)
    top = np.max(values, axis=axis, keepdims=True)
    top[top == -np.inf] = 0.0
    shifted = np.exp((values - top).astype(np.float32))
    return np.log(shifted.sum(axis=axis, dtype=np.float64)) + np.squeeze(top, axis)


def statistics(logits: np.ndarray, labels: np.ndarray, f32: bool) -> dict[str, np.ndarray]:
    z = logits if f32 else np.asarray(logits, dtype=np.float64)
    true = np.take_along_axis(z, np.broadcast_to(labels[None, :, None], (*z.shape[:2], 1)),
                              axis=-1)[..., 0].astype(np.float64)
    others = np.where(np.arange(z.shape[-1]) == labels[:, None], -np.inf, z)
    margin = true - lse(others, -1, f32)  # log p_y - log(1 - p_y)
    onehot = np.arange(z.shape[-1]) == labels[:, None]
    squared = (special.softmax(np.asarray(z, dtype=np.float64), axis=-1) - onehot) ** 2
    return {"hinge": true - others.max(axis=-1), "loss": -np.logaddexp(0.0, -margin),
            "logit_confidence": margin, "mse": -squared.mean(axis=-1)}


def fit_of(home: Path, kind: str, keys: tuple[str, ...], entry: dict, t: int,
           defaults: dict | None = None) -> tuple[dict, dict]:
    """Target ``t``'s fit of the attack ``entry`` configures, and its card: the one fit whose
    card records its settings of ``keys`` (``defaults`` where either leaves one out: instances
    that differ only in spelling a default share one fit)."""
    defaults = defaults or {}
    params = {**defaults, **{key: entry[key] for key in keys if key in entry}}
    found = [card for card in sorted(home.glob(f"fits/{kind}-*/{t}.json"))
             if {**defaults, **json.loads(card.read_text())["settings"]["params"]} == params]
    if len(found) != 1:
        raise SystemExit(f"{home.name}: {len(found)} {kind} fits of target {t} with {params}")
    return dict(np.load(found[0].with_suffix(".npz"))), json.loads(found[0].read_text())

#: a training recipe's values where the study's config leaves them out (README, "training")
RECIPE = {"lr": 0.1, "momentum": 0.9, "nesterov": False, "weight_decay": 0.0, "epochs": 10,
          "batch_size": 128, "milestones": [], "gamma": 0.1, "loss": "cross_entropy"}


def recipe_of(card: dict) -> dict:
    """A model's training recipe from its card, with the values the config leaves out."""
    return {**RECIPE, **card["recipe"]}
