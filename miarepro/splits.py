"""Split schemes: which samples each model trains on and which samples are audited.

A split is saved once per study (``split.npz``) and holds named index arrays into the study
dataset. Model training sets are *derived* from it by :func:`training_mask`, so that adding
reference models or targets never changes the split file and never retrains existing models.

Two schemes cover the five papers:

- ``partition`` — disjoint parts by fraction: BMIA 20/20/40/20 (``target_train``,
  ``target_test``, ``reference_pool``, ``population``), QMIA 50/50, Stolen Memories ¼/¼/½,
  Subpop victim/attacker/test. The target trains on ``target_train``; the audit set is
  ``target_train ∪ target_test``; reference models train on halves of ``reference_pool`` and
  are therefore OUT for every audited sample (offline attacks only).
- ``balanced`` — Carlini et al.'s LiRA/IHA setting: every model (targets and references alike)
  trains on a random half of one pool, so each pool sample is IN for half of the models and the
  audit set is the pool itself. An optional ``population`` fraction is kept out of every model.

Halves come in complementary pairs: models ``2j`` and ``2j+1`` split the pool between them with a
permutation seeded by ``(seed, role, j)``. Hence every sample is IN for exactly half of any even
number of models (balanced masks), and model ``i`` does not depend on how many models exist.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PARTS = ("target_train", "target_test", "reference_pool", "population", "validation")
ROLES = ("target", "reference")
_ROLE_STREAM = {"target": 1, "reference": 2, "loo": 3}


def make_split(n_samples: int, spec: dict[str, Any]) -> dict[str, np.ndarray]:
    """Build the split arrays of a study from its ``split`` config section."""
    scheme = spec["scheme"]
    order = np.random.default_rng([int(spec["seed"]), 0]).permutation(n_samples)
    if scheme == "partition":
        parts = _partition(order, spec["fractions"])
        parts["audit"] = np.sort(np.concatenate([parts["target_train"], parts["target_test"]]))
    elif scheme == "balanced":
        n_population = round(spec.get("population_fraction", 0.0) * n_samples)
        parts = {
            "population": np.sort(order[:n_population]),
            "reference_pool": np.sort(order[n_population:]),
        }
        parts["audit"] = parts["reference_pool"]
    else:
        raise ValueError(f"unknown split scheme {scheme!r}; known: ['balanced', 'partition']")
    for name in PARTS:
        parts.setdefault(name, np.empty(0, dtype=np.int64))
    parts = {key: np.asarray(value, dtype=np.int64) for key, value in parts.items()}
    parts["scheme"] = np.array(scheme)
    parts["seed"] = np.array(int(spec["seed"]))
    parts["n_samples"] = np.array(n_samples)
    return parts


def _partition(order: np.ndarray, fractions: dict[str, float]) -> dict[str, np.ndarray]:
    unknown = sorted(set(fractions) - set(PARTS))
    if unknown:
        raise ValueError(f"split.fractions: unknown part(s) {unknown}; known: {list(PARTS)}")
    total = sum(fractions.values())
    if total > 1.0 + 1e-9:
        raise ValueError(f"split.fractions sum to {total:g} > 1")
    cuts = np.round(np.cumsum([0.0, *fractions.values()]) * len(order)).astype(int)
    return {name: np.sort(order[cuts[k] : cuts[k + 1]]) for k, name in enumerate(fractions)}


def _half(pool: np.ndarray, seed: int, role: str, index: int) -> np.ndarray:
    pair = np.random.default_rng([seed, _ROLE_STREAM[role], index // 2]).permutation(len(pool))
    half = len(pool) // 2
    return pool[np.sort(pair[:half] if index % 2 == 0 else pair[half:])]


def training_indices(split: dict[str, np.ndarray], role: str, index: int) -> np.ndarray:
    """Sorted dataset indices that model ``role/index`` trains on.

    Leave-one-out model ``loo/index`` trains on target 0's training set without
    ``loo_records(split, ...)[index // LOO_STRIDE]``; ``index % LOO_STRIDE`` is its seed number.
    """
    scheme, seed = str(split["scheme"]), int(split["seed"])
    if role == "target":
        if scheme == "partition":
            return split["target_train"]
        return _half(split["reference_pool"], seed, "target", index)
    if role == "reference":
        return _half(split["reference_pool"], seed, "reference", index)
    if role == "loo":
        base = training_indices(split, "target", 0)
        record = loo_records(split, index // LOO_STRIDE + 1)[index // LOO_STRIDE]
        return base[base != record]
    raise ValueError(f"unknown model role {role!r}; known: {[*ROLES, 'loo']}")


def training_mask(split: dict[str, np.ndarray], role: str, index: int) -> np.ndarray:
    """Boolean membership of model ``role/index`` over all samples of the dataset."""
    mask = np.zeros(int(split["n_samples"]), dtype=bool)
    mask[training_indices(split, role, index)] = True
    return mask


LOO_STRIDE = 1000


def loo_records(split: dict[str, np.ndarray], count: int) -> np.ndarray:
    """The ``count`` audited records that get leave-one-out models (IHA's L-attack).

    Members and non-members of target 0 alternate, each drawn in a seeded order, so asking for
    more records keeps the first ones (and their already-trained models).
    """
    audit = split["audit"]
    member = training_mask(split, "target", 0)[audit]
    rng = np.random.default_rng([int(split["seed"]), _ROLE_STREAM["loo"]])
    members, outsiders = rng.permutation(audit[member]), rng.permutation(audit[~member])
    if count > 2 * min(len(members), len(outsiders)):
        raise ValueError(f"cannot pick {count} balanced leave-one-out records from the audit set")
    records = np.empty(count, dtype=np.int64)
    records[0::2] = members[: (count + 1) // 2]
    records[1::2] = outsiders[: count // 2]
    return records


def load_split(path: str) -> dict[str, np.ndarray]:
    from miarepro.io import read_arrays

    return read_arrays(path)
