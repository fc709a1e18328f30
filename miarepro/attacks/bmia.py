"""BMIA of Liu et al., "Efficient Membership Inference Attacks by Bayesian Neural Network".

One reference model, trained like the target on data the attacker owns, becomes a Bayesian
network by a last-layer Laplace approximation (:mod:`miarepro.lastlayer`). For each audited
sample, ``N`` logit vectors are drawn from its posterior predictive, each gives a reference
hinge score ``s_i``, and the target's hinge ``s_0`` is tested against them: with
``d_i = s_0 - s_i``, the one-sided one-sample t statistic ``t = mean(d) / (sd(d) / sqrt(N))``
(Algorithm 1) is the membership score; its p-value under ``t(N - 1)`` is monotone in ``t``.

The fit (reference features, MAP head and posterior factors) is a ``fit`` job; scoring only
samples, so changing ``N`` or the predictive reruns scoring, never the Laplace fit. Choices
where the paper is silent or inconsistent (matrix §1.10), each also in the study's deviations:

- the prior is ``N(0, delta^-1 I)``: Eq. 12's ``gamma^2 I`` read as the precision term;
- ``delta`` *maximises* the marginal likelihood (App. C.3's "minimizing" read as a typo);
- the last layer's bias is part of the posterior (as laplace-torch's last-layer Laplace);
- validation tuning (``prior="validation"``) uses the reference pool outside the reference
  model's training set: data the attacker owns that the model did not see;
- ``predictive="mc"`` draws ``N`` last-layer weight samples shared by all queries; ``"glm"``
  draws each query's logits independently. For a *last-layer* Laplace the linearisation is
  exact, so both have the same per-query distribution.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np

from miarepro import lastlayer, signals
from miarepro.attacks.base import AttackContext, StudyHandle, register
from miarepro.options import Range

_ELEMENTS = 1 << 22  # sampled logits held at once (32 MB)


def fit_bmia(study: StudyHandle, group: int, hessian: lastlayer.Structure = "kron",
             prior: lastlayer.PriorMethod = "marglik") -> tuple[dict[str, np.ndarray],
                                                                dict[str, Any]]:
    """Laplace posterior of the first reference model of ``group``, and its features."""
    from miarepro.training import device, last_layer_features

    reference = study.reference_index(group, 0)
    model = study.load_model("reference", reference).to(device())
    features, weight, bias = last_layer_features(model, study.features())
    labels = study.labels()
    train = study.training_indices("reference", reference)
    held_out = np.setdiff1d(study.parts(group)["reference_pool"], train)
    posterior = lastlayer.fit(features[train], labels[train], weight, bias, hessian, prior,
                              validation=(features[held_out], labels[held_out]))
    info = {"reference_model": reference, "prior_precision": posterior.prior_precision,
            "hessian": hessian, "prior": prior, "n_fit": len(train),
            "n_validation": len(held_out), "feature_dim": features.shape[1]}
    return {"features": features, **posterior.to_arrays()}, info


@register("bmia", needs_references=True, fit=fit_bmia, fit_scope="references")
def bmia(ctx: AttackContext, n_samples: Annotated[int, Range(2)] = 100,
         predictive: Literal["glm", "mc"] = "glm") -> np.ndarray:
    """BMIA (Liu et al.): t-test of the target's hinge against Laplace-sampled reference ones.

    The target's hinge is on the plain input (query 0), where the reference model's features,
    and so its draws, are: a mean over augmented queries would shift ``s_0`` against them."""
    target = ctx.target_statistic("hinge")[0]
    return t_statistic(target[:, None] - reference_hinges(ctx, n_samples, predictive))


def reference_hinges(ctx: AttackContext, n_samples: int, predictive: str) -> np.ndarray:
    """``(len(audit), N)`` hinge scores of the audited samples under ``N`` posterior draws of
    the reference model: BMIA's estimate of each sample's non-member score distribution."""
    if ctx.fit is None:
        raise ValueError("BMIA needs its fit (the reference model's Laplace posterior)")
    posterior = lastlayer.LastLayerPosterior.from_arrays(ctx.fit)
    features = ctx.fit["features"][ctx.audit].astype(np.float64)
    labels = ctx.labels[ctx.audit]
    rng = np.random.default_rng([ctx.seed, ctx.target_index, 0xB1A])
    weights = posterior.sample_weights(n_samples, rng) if predictive == "mc" else None
    step = max(1, _ELEMENTS // (n_samples * posterior.n_classes))
    reference = np.empty((len(features), n_samples))
    for start in range(0, len(features), step):
        rows = slice(start, start + step)
        if weights is None:
            logits = posterior.sample_logits(features[rows], n_samples, rng, "glm")
        else:
            logits = lastlayer.apply_weights(features[rows], *weights)
        # the draws are this loop's own: their hinges are taken in place
        reference[rows] = signals.hinge(np.swapaxes(logits, 0, 1), labels[rows],
                                        overwrite=True).T
    return reference


def t_statistic(differences: np.ndarray) -> np.ndarray:
    """One-sided one-sample t statistic of each row (scipy), finite when a row is constant.

    A row without spread (no posterior variance) scores its mean difference scaled by 1e12:
    as ``N`` grows with zero variance, BMIA reduces to comparing the two hinge scores.
    """
    from scipy import stats  # here, not at import: scipy.stats costs every score job 1.4 s

    spread = differences.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = stats.ttest_1samp(differences, 0.0, axis=1, alternative="greater").statistic
    return np.where(spread > 0, t, differences.mean(axis=1) * 1e12)
