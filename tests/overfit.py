"""A realistic membership-inference case for tests: small MLPs that overfit generated data.

Every model is a one-hidden-layer MLP trained full-batch with Adam until it fits its training
half of a pool of generated samples perfectly (test accuracy stays near 0.5: 15% label noise
and 12 clusters over 4 classes). Halves are complementary pairs, as in the ``balanced`` split,
so each pool sample is IN for exactly half of the models. All models train at once as one
batched network, in a few seconds on one CPU core.

The leave-one-out case is a separate, smaller target (leave-one-out models are trained per
record, so they are many): for a few of its records, models trained the same way on the
target's training set minus the record. For a non-member record that set is the target's
training set itself, so those records share one group of models.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from sklearn.datasets import make_classification

from miarepro.attacks import AttackContext

N_POOL = 2000
N_POPULATION = 1000
N_CLASSES = 4
N_MODELS = 33  # model 0 is the target, the 32 others are references
N_LOO_POOL = 600  # the leave-one-out case has its own, smaller target
N_LOO_RECORDS = 60  # half members of the target, half not
N_LOO_MODELS = 8
HIDDEN, STEPS, LR = 64, 100, 2e-2


def _data(n_samples: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = make_classification(
        n_samples=n_samples, n_features=50, n_informative=10, n_redundant=0,
        n_classes=N_CLASSES, n_clusters_per_class=3, flip_y=0.15, random_state=seed)
    return X.astype(np.float32), y.astype(np.int64)


def train_batched(X: np.ndarray, y: np.ndarray, train: np.ndarray, weight: np.ndarray,
                  seed: int) -> np.ndarray:
    """Train one MLP per row of ``train`` (E, n) indices; their logits on all of ``X``, (E, M, C).

    ``weight`` (E, n) weighs each training sample in that model's mean loss (0 drops it).
    """
    generator = torch.Generator().manual_seed(seed)
    n_models, d = len(train), X.shape[1]
    params = [
        torch.randn(n_models, d, HIDDEN, generator=generator) / d**0.5,
        torch.zeros(n_models, 1, HIDDEN),
        torch.randn(n_models, HIDDEN, N_CLASSES, generator=generator) / HIDDEN**0.5,
        torch.zeros(n_models, 1, N_CLASSES),
    ]
    for p in params:
        p.requires_grad_()
    w1, b1, w2, b2 = params

    def forward(inputs: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(b2, torch.relu(torch.baddbmm(b1, inputs, w1)), w2)

    inputs, labels = torch.from_numpy(X[train]), torch.from_numpy(y[train]).reshape(-1)
    weights = torch.from_numpy((weight / weight.sum(axis=1, keepdims=True)).astype(np.float32))
    optimizer = torch.optim.Adam(params, lr=LR)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # several times faster than 2 threads when other jobs share the CPU
    try:
        for _ in range(STEPS):
            optimizer.zero_grad()
            losses = torch.nn.functional.cross_entropy(
                forward(inputs).reshape(-1, N_CLASSES), labels, reduction="none")
            (losses.reshape(n_models, -1) * weights).sum().backward()
            optimizer.step()
        with torch.no_grad():
            return forward(torch.from_numpy(X).expand(n_models, *X.shape)).numpy()
    finally:
        torch.set_num_threads(threads)


def _halves(rng: np.random.Generator, n_models: int, n_pool: int) -> np.ndarray:
    """(n_models, n_pool // 2) sorted training indices, complementary in consecutive pairs."""
    halves = []
    for _ in range((n_models + 1) // 2):
        order = rng.permutation(n_pool)
        halves += [np.sort(order[: n_pool // 2]), np.sort(order[n_pool // 2 :])]
    return np.stack(halves[:n_models])


@functools.cache
def overfit_context(seed: int = 0) -> AttackContext:
    """Target = model 0, references = models 1..32 (balanced), audit = the pool of 2,000
    samples, population ``Z`` = 1,000 samples no model trained on."""
    X, y = _data(N_POOL + N_POPULATION, seed)
    train = _halves(np.random.default_rng(seed), N_MODELS, N_POOL)
    masks = np.zeros((N_MODELS, len(y)), dtype=bool)
    np.put_along_axis(masks, train, True, axis=1)
    logits = train_batched(X, y, train, np.ones(train.shape), seed)[:, None]  # (E, A=1, M, C)
    pool = np.arange(N_POOL)
    return AttackContext(
        labels=y, audit=pool, population=np.arange(N_POOL, len(y)),
        validation=np.empty(0, dtype=np.int64), target_logits=logits[0], target_mask=masks[0],
        reference_logits=logits[1:], reference_masks=masks[1:], reference_pool=pool, seed=seed)


@functools.cache
def loo_context(seed: int = 0) -> AttackContext:
    """A target trained on half of a pool of ``N_LOO_POOL`` samples, audited on
    ``N_LOO_RECORDS`` records (half of them members), with the logits ``(R, J, 1, C)`` of
    ``N_LOO_MODELS`` leave-one-out models per record. It has no reference models."""
    X, y = _data(N_LOO_POOL, seed + 1000)
    rng = np.random.default_rng(seed + 1000)
    members = _halves(rng, 1, N_LOO_POOL)[0]
    half = N_LOO_RECORDS // 2
    records = np.concatenate([rng.choice(members, half, replace=False), rng.choice(
        np.setdiff1d(np.arange(N_LOO_POOL), members), half, replace=False)])
    # Row 0: the target; then N_LOO_MODELS models per member record without it, then one
    # group trained on all members, shared by the non-member records (D minus x = D).
    dropped = np.concatenate([[-1], np.repeat(records[:half], N_LOO_MODELS),
                              np.full(N_LOO_MODELS, -1)])
    train = np.repeat(members[None], len(dropped), axis=0)
    logits = train_batched(X, y, train, (train != dropped[:, None]).astype(float), seed)
    group = np.minimum(np.arange(N_LOO_RECORDS), half)  # the model group of each record
    loo = logits[1:].reshape(half + 1, N_LOO_MODELS, len(y), N_CLASSES)[group, :, records]
    order = np.argsort(records)
    mask = np.zeros(len(y), dtype=bool)
    mask[members] = True
    none = np.zeros((0, 1, len(y), N_CLASSES), dtype=np.float32)
    return AttackContext(
        labels=y, audit=records[order], population=np.empty(0, dtype=np.int64),
        validation=np.empty(0, dtype=np.int64), target_logits=logits[0][None],
        target_mask=mask, reference_logits=none, reference_masks=np.zeros((0, len(y)), bool),
        reference_pool=np.empty(0, dtype=np.int64), loo_logits=loo[order][:, :, None],
        seed=seed)
