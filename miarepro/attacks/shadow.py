"""The shadow-model attack of Shokri et al. (2017), "Membership Inference Attacks Against Machine
Learning Models" ("shadow-bb" in Stolen Memories, "Shokri et al." in Subpop).

The reference models serve as shadow models: on ``ctx.reference_pool`` each of them yields
labelled examples (its output on a sample, IN if it trained on it). One attack classifier per
class learns IN vs OUT from those outputs and scores the target's outputs on the audited
samples of that class. Following ML-Leaks (Salem et al. 2019) the output vector is sorted, and
only its ``top_k`` largest probabilities are kept, which makes the features comparable across
datasets; since sorting hides which entry belongs to the true label, the true label's
logit-scaled confidence ``log p_y - log sum_{y' != y} p_y'`` is added as one more feature (the
per-class classifiers of Shokri et al. see that entry in the unsorted vector). Probabilities and
confidences are averaged over queries.
"""

from __future__ import annotations

import warnings
from typing import Annotated, Any, Literal

import numpy as np
from scipy.special import softmax

from miarepro import signals
from miarepro.attacks.base import AttackContext, register
from miarepro.options import Range


def features(logits: np.ndarray, labels: np.ndarray, top_k: int) -> np.ndarray:
    """``(n, top_k + 1)``: sorted top-k softmax probabilities and the true label's confidence.

    ``logits`` is ``(n, A, C)`` for ``n`` (model, sample) rows with ``A`` queries each.
    """
    logits = np.asarray(logits, dtype=np.float64)
    probs = softmax(logits, axis=-1).mean(axis=1)
    top = -np.sort(-probs, axis=-1)[:, :top_k]
    confidence = signals.logit_confidence(np.swapaxes(logits, 0, 1), labels).mean(axis=0)
    return np.column_stack([top, confidence])


def _classifier(kind: str, seed: int) -> Any:
    # scikit-learn is imported here, not at module level: every scoring job imports all attacks
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if kind == "mlp":
        return make_pipeline(StandardScaler(), MLPClassifier(
            hidden_layer_sizes=(64,), learning_rate_init=1e-2, batch_size=256, max_iter=200,
            random_state=seed))
    return HistGradientBoostingClassifier(max_iter=100, random_state=seed)


def _fit(kind: str, seed: int, X: np.ndarray, y: np.ndarray) -> Any:
    """A fitted classifier, or, when ``y`` has one value only, the constant log-odds of the
    member rate by Laplace's rule of succession (finite, unlike the rate's own 0 or 1)."""
    if y.min() == y.max():
        return float(np.log(len(y) + 1)) * (1.0 if y[0] else -1.0)
    with warnings.catch_warnings():
        from sklearn.exceptions import ConvergenceWarning

        warnings.simplefilter("ignore", ConvergenceWarning)
        return _classifier(kind, seed).fit(X, y)


def _subsample(X: np.ndarray, y: np.ndarray, max_rows: int,
               rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    if len(y) <= max_rows:
        return X, y
    keep = np.sort(rng.choice(len(y), max_rows, replace=False))
    return X[keep], y[keep]


def log_odds(model: Any, X: np.ndarray) -> np.ndarray:
    """The classifier's log-odds of IN, before the logistic: its probability rounds to exactly
    1 once they pass about 37, which would tie the most member-like records."""
    if isinstance(model, float):
        return np.full(len(X), model)
    if hasattr(model, "decision_function"):  # gradient boosting: its raw log-odds
        return model.decision_function(X)
    scaler, mlp = model[:-1], model[-1]
    if mlp.activation != "relu" or mlp.out_activation_ != "logistic":
        raise ValueError(f"unexpected MLP activations {mlp.activation}, {mlp.out_activation_}")
    hidden = scaler.transform(X)
    for weights, bias in zip(mlp.coefs_[:-1], mlp.intercepts_[:-1], strict=True):
        hidden = np.maximum(hidden @ weights + bias, 0.0)
    return (hidden @ mlp.coefs_[-1] + mlp.intercepts_[-1])[:, 0]


@register("shadow", needs_references=True, threshold=0.0)
def shadow(ctx: AttackContext, top_k: Annotated[int, Range(1)] = 3,
           classifier: Literal["mlp", "gbdt"] = "mlp",
           max_rows: Annotated[int, Range(2)] = 4000) -> np.ndarray:
    """Shokri et al. (2017): per-class attack classifiers trained on shadow-model outputs.

    Score: the log-odds that the sample is a member, from the classifier of its label (its
    decision rule, probability above 1/2, is log-odds above 0).
    ``classifier`` is ``mlp`` (one hidden layer of 64 units on standardised features, Adam,
    stopped when the training loss stalls: the per-class MLP of matrix A12) or ``gbdt``
    (histogram gradient boosting, 100 trees). Each class's training set is at most
    ``max_rows`` (shadow model, sample) rows, drawn after sorting the rows by content, so the
    scores do not depend on the order of models or samples. The draws and the classifiers are
    seeded by the study's seed and the target: each repetition of a partition study is an
    independent run of the attack too. A class whose shadow rows are all IN or all OUT, or
    absent, is scored by one classifier trained on all classes together (or that constant if
    it too has one value).
    """
    n_models = ctx.n_references
    if n_models == 0 or len(ctx.reference_pool) == 0:
        raise ValueError("the shadow-model attack needs reference (shadow) models and their "
                         "pool of samples (ctx.reference_pool)")
    top_k = min(int(top_k), ctx.target_logits.shape[-1])
    pool = np.asarray(ctx.reference_pool)
    seed = [ctx.seed, ctx.target_index]
    fit_seed = int(np.random.SeedSequence(seed).generate_state(1)[0])
    rows: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for c in np.unique(ctx.labels[pool]):
        samples = pool[ctx.labels[pool] == c]
        model, sample = np.repeat(np.arange(n_models), len(samples)), np.tile(samples, n_models)
        X = features(ctx.reference_logits[model, :, sample], ctx.labels[sample], top_k)
        y = ctx.reference_masks[model, sample].astype(int)
        order = np.lexsort((y, *X.T[::-1]))  # content order: invariant to model/sample order
        rng = np.random.default_rng([*seed, 1, int(c)])
        rows[int(c)] = _subsample(X[order], y[order], max_rows, rng)
    everything = _subsample(np.concatenate([r[0] for r in rows.values()]),
                            np.concatenate([r[1] for r in rows.values()]),
                            max_rows, np.random.default_rng([*seed, 0]))
    pooled = None
    labels = ctx.labels[ctx.audit]
    target = features(np.swapaxes(ctx.target_logits[:, ctx.audit], 0, 1), labels, top_k)
    scores = np.empty(len(labels))
    for c in np.unique(labels):
        where = labels == c
        X, y = rows.get(int(c), (None, np.zeros(1, dtype=int)))
        if X is not None and y.min() != y.max():
            model = _fit(classifier, fit_seed, X, y)
        else:
            pooled = _fit(classifier, fit_seed, *everything) if pooled is None else pooled
            model = pooled
        scores[where] = log_odds(model, target[where])
    return scores
