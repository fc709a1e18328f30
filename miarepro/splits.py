"""Split schemes: which samples each model trains on and which samples are audited.

A split is saved once per study (``split.npz``) and holds named index arrays into the study
dataset. Model training sets are *derived* from it by :func:`training_indices`, so adding
reference models, targets or repetitions never changes the split file and never retrains
existing models.

Two schemes cover the five papers:

- ``partition`` — disjoint parts by fraction: BMIA 20/20/40/20 (``target_train``,
  ``target_test``, ``reference_pool``, ``population``), QMIA 50/50, Stolen Memories ¼/¼/½,
  Subpop victim/attacker/test. The target trains on ``target_train``; the audit set is
  ``target_train ∪ target_test``; reference models train on halves of ``reference_pool`` and
  are therefore OUT for every audited sample (offline attacks only), or with
  ``references_train_on`` on halves of the union of the parts it names: QMIA's authors set
  LiRA up as Carlini et al. do, each shadow model on a random half of the target's training
  part and the attacker's public part together, the target's size, so that each target member
  is IN for half of them (offline attacks read the OUT ones). Target ``t`` is
  *repetition* ``t`` (Stolen Memories repeats each experiment over 10 random splits): it has
  its own partition, drawn from ``(seed, t)``, and its own reference models, numbered
  ``t * STRIDE + i``. The file stores repetition 0; :func:`repetition` derives the others.
- ``balanced`` — Carlini et al.'s LiRA/IHA setting: every model (targets and references alike)
  trains on a random half of one pool, so each pool sample is IN for half of the models and the
  audit set is the pool itself. An optional ``population`` fraction is kept out of every model.
  All targets share the pool and the reference models.

Halves come in complementary pairs: models ``2j`` and ``2j+1`` split the pool between them with a
permutation seeded by ``(seed, role, j)``. Hence every sample is IN for exactly half of any even
number of models (balanced masks), and model ``i`` does not depend on how many models exist.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PARTS = ("target_train", "target_test", "reference_pool", "population", "validation", "ood")
ROLES = ("target", "reference", "loo")
STRIDE = 1000  # model index = group * STRIDE + member: repetition and reference, or seed and
#                record (leave-one-out models)
ROLE_IDS = {"target": 1, "reference": 2, "loo": 3}  # seed streams of the model roles


def make_split(n_samples: int, spec: dict[str, Any], repetition: int = 0,
               ood_start: int | None = None, ood_aligned: bool = False) -> dict[str, np.ndarray]:
    """Build the split arrays of a study (of one repetition) from its ``split`` config.

    Records from ``ood_start`` on are out-of-distribution queries (a dataset's ``ood``): no
    part draws from them; they form the ``ood`` part, never trained on. ``ood_aligned``: they
    are copies of the records before them, in the same order (``ood_rotation``).
    """
    scheme = spec["scheme"]
    ood_start = n_samples if ood_start is None else ood_start
    order = np.random.default_rng([int(spec["seed"]), repetition]).permutation(ood_start)
    if scheme == "partition":
        parts = _partition(order, spec["fractions"])
        parts["audit"] = np.sort(np.concatenate([parts["target_train"], parts["target_test"]]))
    elif scheme == "balanced":
        # a fraction of the records the parts draw from: out-of-distribution ones are apart
        n_population = round(spec.get("population_fraction", 0.0) * len(order))
        parts = {
            "population": np.sort(order[:n_population]),
            "reference_pool": np.sort(order[n_population:]),
        }
        parts["audit"] = parts["reference_pool"]
    else:
        raise ValueError(f"unknown split scheme {scheme!r}; known: ['balanced', 'partition']")
    parts["ood"] = np.arange(ood_start, n_samples)
    parts["ood_aligned"] = np.array(bool(ood_aligned))
    for name in PARTS:
        parts.setdefault(name, np.empty(0, dtype=np.int64))
    parts = {key: np.asarray(value, dtype=np.int64) for key, value in parts.items()}
    fractions = spec.get("fractions", {})
    parts.update(
        scheme=np.array(scheme), seed=np.array(int(spec["seed"])), n_samples=np.array(n_samples),
        fraction_names=np.array(list(fractions), dtype=str),
        fraction_values=np.array(list(fractions.values()), dtype=np.float64),
    )
    if "references_train_on" in spec:  # absent by default: other split files stay as they were
        parts["reference_parts"] = np.array(spec["references_train_on"], dtype=str)
    return parts


def repetition(split: dict[str, np.ndarray], target: int) -> dict[str, np.ndarray]:
    """The split seen by target ``target``: its own partition, or the shared balanced pool."""
    if str(split["scheme"]) == "balanced" or target == 0:
        return split
    spec = {"scheme": "partition", "seed": int(split["seed"]),
            "fractions": dict(zip(split["fraction_names"].tolist(),
                                  split["fraction_values"].tolist(), strict=True))}
    if "reference_parts" in split:
        spec["references_train_on"] = split["reference_parts"].tolist()
    n_samples = int(split["n_samples"])
    ood_start = n_samples - len(split.get("ood", ()))
    return make_split(n_samples, spec, repetition=target, ood_start=ood_start,
                      ood_aligned=bool(split.get("ood_aligned", False)))


def audit(part: dict[str, np.ndarray], nonmembers: str = "test") -> np.ndarray:
    """The audited samples of one repetition: its usual audit, or (``nonmembers="ood"``) the
    target's training set against the out-of-distribution records: all of them, or for copies
    of the dataset's own records, the copies of the target's test records."""
    if nonmembers == "test":
        return part["audit"]
    ood = part["ood"][part["target_test"]] if part["ood_aligned"] else part["ood"]
    return np.sort(np.concatenate([part["target_train"], ood]))


def public(part: dict[str, np.ndarray]) -> np.ndarray:
    """The attacker's own records known not to be the target's members: the population, or
    where a split has none, the reference pool (QMIA's 50/50 split: its public half, on which
    the quantile regressor trains), unless that pool is audited (a balanced split's pool is
    its audit): public data never holds an audited record."""
    if len(part["population"]):
        return part["population"]
    pool = part["reference_pool"]
    return pool[:0] if np.isin(pool, part["audit"]).any() else pool


def has_public(split: dict[str, Any]) -> bool:
    """Whether a study's ``split`` config leaves the attacker public records (:func:`public`)."""
    if split["scheme"] == "balanced":
        return split.get("population_fraction", 0.0) > 0
    fractions = split.get("fractions", {})
    return fractions.get("population", 0) > 0 or fractions.get("reference_pool", 0) > 0


def reference_indices(scheme: str, target: int, count: int) -> list[int]:
    """Reference models of target ``target``: shared (balanced) or its repetition's own."""
    offset = target * STRIDE if scheme == "partition" else 0
    return [offset + i for i in range(count)]


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
    pair = np.random.default_rng([seed, ROLE_IDS[role], index // 2]).permutation(len(pool))
    half = len(pool) // 2
    return pool[np.sort(pair[:half] if index % 2 == 0 else pair[half:])]


def training_indices(split: dict[str, np.ndarray], role: str, index: int) -> np.ndarray:
    """Sorted dataset indices that model ``role/index`` trains on.

    Reference ``t * STRIDE + i`` of a partition study belongs to repetition ``t``. Leave-one-out
    model ``j * STRIDE + k`` trains on target 0's training set without record
    ``loo_records(split, ...)[k]``; ``j`` numbers its seeds, so that ten consecutive models
    (a job of ``ten_per_job``) are one seed's models of ten records.
    """
    scheme, seed = str(split["scheme"]), int(split["seed"])
    if role == "target":
        if scheme == "partition":
            return repetition(split, index)["target_train"]
        return _half(split["reference_pool"], seed, "target", index)
    if role == "reference":
        group = index // STRIDE if scheme == "partition" else 0
        return _half(reference_training_pool(repetition(split, group)), seed, "reference", index)
    if role == "loo":
        base = training_indices(split, "target", 0)
        record = loo_records(split, index % STRIDE + 1)[index % STRIDE]
        return base[base != record]
    raise ValueError(f"unknown model role {role!r}; known: {list(ROLES)}")


def reference_training_pool(part: dict[str, np.ndarray]) -> np.ndarray:
    """The records whose halves a repetition's reference models train on: its reference pool,
    or the union of the parts its split's ``references_train_on`` names."""
    if "reference_parts" not in part:
        return part["reference_pool"]
    return np.sort(np.concatenate([part[name] for name in part["reference_parts"].tolist()]))


def held_out_indices(split: dict[str, np.ndarray], role: str, index: int) -> np.ndarray:
    """Samples of the model's own distribution it never saw, for its test accuracy.

    Partition: the test part of the model's repetition. Balanced: the pool minus the model's
    training half.
    """
    if str(split["scheme"]) == "partition":
        group = {"target": index, "reference": index // STRIDE, "loo": 0}[role]
        return repetition(split, group)["target_test"]
    pool = split["reference_pool"]
    return pool[~np.isin(pool, training_indices(split, role, index))]


def training_mask(split: dict[str, np.ndarray], role: str, index: int) -> np.ndarray:
    """Boolean membership of model ``role/index`` over all samples of the dataset."""
    mask = np.zeros(int(split["n_samples"]), dtype=bool)
    mask[training_indices(split, role, index)] = True
    return mask


def loo_records(split: dict[str, np.ndarray], count: int) -> np.ndarray:
    """The ``count`` audited records that get leave-one-out models (IHA's L-attack): the
    :func:`balanced_records` of target 0."""
    return balanced_records(split["audit"], training_mask(split, "target", 0),
                            int(split["seed"]), count)


def balanced_records(audit: np.ndarray, member: np.ndarray, seed: int, count: int) -> np.ndarray:
    """``count`` audited records, members and non-members alternating (``member``: the
    target's membership over the dataset), each drawn in an order seeded by ``seed``.

    Asking for more records keeps the first ones, and on target 0 an attack's ``records``
    subset and the leave-one-out records are the same: IHA compares attacks on one sample.
    """
    is_member = member[audit]
    rng = np.random.default_rng([seed, ROLE_IDS["loo"]])
    members, outsiders = rng.permutation(audit[is_member]), rng.permutation(audit[~is_member])
    if count > 2 * min(len(members), len(outsiders)):
        raise ValueError(f"cannot pick {count} balanced records from the audit set "
                         f"({len(members)} members, {len(outsiders)} non-members)")
    records = np.empty(count, dtype=np.int64)
    records[0::2] = members[: (count + 1) // 2]
    records[1::2] = outsiders[: count // 2]
    return records
