"""Last-layer Laplace approximation in closed form: GGN, prior precision, predictive, samples.

For a network whose last layer is linear, ``f(x) = W phi(x) + b``, with a softmax
cross-entropy likelihood, everything a last-layer Laplace approximation needs has a closed form
in the features ``phi``, so no backward pass through the network is needed:

- GGN of the last-layer parameters ``theta = [vec(W) (row-major), b]``:
  ``H = sum_n Lambda_n (x) phit_n phit_n^T`` with ``Lambda_n = diag(p_n) - p_n p_n^T`` and
  ``phit = [phi, 1]``. ``full`` keeps it whole, ``diag`` its diagonal, and ``kron`` takes
  laplace-torch's KFAC: weight block ``G (x) A`` with ``G = sum_n Lambda_n`` and
  ``A = sum_n phi_n phi_n^T / N``, bias block ``G``, no weight-bias coupling.
- Prior ``N(0, delta^-1 I)`` (delta = 1 / gamma^2 in BMIA's Eq. 12, whose printed gamma^2 we
  read as a typo for the precision). ``delta`` maximises the log marginal likelihood
  ``-loss - (sum_i log(lambda_i + delta) - P log delta + delta |theta|^2) / 2`` (the Laplace
  evidence laplace-torch optimises, here by a bounded 1-D search), or the validation
  log-likelihood of the probit-approximated predictive over laplace-torch's grid.
- Posterior ``N(theta_MAP, (H + delta I)^-1)``; the GLM predictive of the logits at ``phi`` is
  ``N(W phi + b, J Sigma J^T)`` with ``J = [I (x) phi^T, I]``. For KFAC it is diagonal in the
  eigenbasis ``Q_G`` of ``G``: ``Cov = Q_G diag(v) Q_G^T`` with
  ``v_l = sum_k (phi . q^A_k)^2 / (g_l a_k + delta) + 1 / (g_l + delta)``.

The tests check every piece against laplace-torch on a small model. All of it costs a few
matrix products, where laplace-torch's backends need one backward pass per class
(ENVIRONMENT.md: 11-22 s for a 128-to-100 head on 5,000 records, here milliseconds).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.special import log_softmax, softmax

Structure = Literal["kron", "diag", "full"]
PriorMethod = Literal["marglik", "validation"]
PROBIT_GRID = np.logspace(-4, 4, 100)  # laplace-torch 0.3's default validation grid: 100 points
FULL_LIMIT = 25000  # parameters: the full GGN is a dense P x P matrix (25,000: 5 GB)


@dataclass(frozen=True)
class LastLayerPosterior:
    """Gaussian posterior of ``[vec(W), b]``; ``factors`` depend on ``structure``.

    kron: ``q_out`` (C, C), ``g`` (C,) eigenpairs of G; ``q_in`` (d, d), ``a`` (d,) of A.
    diag: ``var_w`` (C, d) and ``var_b`` (C,) posterior variances.
    full: ``eigvecs`` (P, P) and ``eigvals`` (P,) of H, ``P = C d + C``.
    """

    weight: np.ndarray
    bias: np.ndarray
    structure: str
    prior_precision: float
    factors: dict[str, np.ndarray]

    def to_arrays(self) -> dict[str, np.ndarray]:
        return {"weight": self.weight, "bias": self.bias, "structure": np.array(self.structure),
                "prior_precision": np.array(self.prior_precision),
                **{f"factor_{k}": v for k, v in self.factors.items()}}

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> LastLayerPosterior:
        factors = {k.removeprefix("factor_"): v for k, v in arrays.items()
                   if k.startswith("factor_")}
        return cls(arrays["weight"], arrays["bias"], str(arrays["structure"]),
                   float(arrays["prior_precision"]), factors)

    @property
    def n_classes(self) -> int:
        return len(self.bias)

    def mean(self, features: np.ndarray) -> np.ndarray:
        return features @ self.weight.T + self.bias

    def covariance(self, features: np.ndarray) -> np.ndarray:
        """``(n, C, C)`` GLM predictive covariance of the logits at each feature row."""
        root = self._root(features)
        return root @ np.swapaxes(root, 1, 2)

    def variance(self, features: np.ndarray) -> np.ndarray:
        """``(n, C)`` diagonal of :meth:`covariance`, without forming it."""
        if self.structure == "diag":
            return (features**2) @ self.factors["var_w"].T + self.factors["var_b"]
        if self.structure == "kron":  # diag(Q D Q^T) = (Q * Q) diag(D): no (n, C, C) array
            return self._kron_scale(features) ** 2 @ (self.factors["q_out"] ** 2).T
        return (self._root(features) ** 2).sum(axis=2)

    def _kron_scale(self, features: np.ndarray) -> np.ndarray:
        """``(n, C)`` standard deviations of the logits in the eigenbasis ``q_out`` (KFAC)."""
        delta, f = self.prior_precision, self.factors
        projected = (features @ f["q_in"]) ** 2  # (n, d)
        weight = projected @ (1.0 / (np.outer(f["g"], f["a"]) + delta)).T  # (n, C)
        return np.sqrt(weight + 1.0 / (f["g"] + delta))

    def _root(self, features: np.ndarray) -> np.ndarray:
        """``R`` with ``R R^T`` = the predictive covariance, ``(n, C, r)``."""
        if self.structure == "kron":
            return self.factors["q_out"][None] * self._kron_scale(features)[:, None, :]
        if self.structure == "diag":
            return np.sqrt(self.variance(features))[:, :, None] * np.eye(self.n_classes)[None]
        basis = self._full_basis()  # (C, d + 1, P)
        c, width, p = basis.shape
        extended = np.concatenate([features, np.ones((len(features), 1))], axis=1)
        flat = np.moveaxis(basis, 1, 0).reshape(width, c * p)  # one matrix product (BLAS)
        return (extended @ flat).reshape(len(features), c, p)

    def _full_basis(self) -> np.ndarray:
        f, c = self.factors, self.n_classes
        d = self.weight.shape[1]
        scaled = f["eigvecs"] / np.sqrt(f["eigvals"] + self.prior_precision)  # V D^-1/2
        weights = scaled[: c * d].reshape(c, d, -1)
        return np.concatenate([weights, scaled[c * d:][:, None, :]], axis=1)

    def sample_logits(self, features: np.ndarray, n_samples: int, rng: np.random.Generator,
                      predictive: Literal["glm", "mc"] = "glm") -> np.ndarray:
        """``(n, N, C)`` logit samples: GLM (independent per row) or MC (shared weights)."""
        mean = self.mean(features)
        if predictive == "glm" and self.structure != "full":
            # float32 throughout (draws, scale, the product with q_out, the mean; returned as
            # float32): a third less time than float64 products and sums, and rounding of
            # 1e-7 of a logit, far below the spread being estimated
            noise = rng.standard_normal((len(features), n_samples, self.n_classes),
                                        dtype=np.float32)
            scale = (np.sqrt(self.variance(features)) if self.structure == "diag"
                     else self._kron_scale(features))
            noise *= scale.astype(np.float32)[:, None, :]
            if self.structure == "kron":  # one product with q_out
                noise = noise @ self.factors["q_out"].T.astype(np.float32)
            noise += mean.astype(np.float32)[:, None, :]
            return noise
        if predictive == "glm":  # full: a C x C Cholesky factor per row, in bounded chunks
            rows = max(1, (1 << 22) // (self.n_classes * len(self.factors["eigvals"])))
            samples = []
            for start in range(0, len(features), rows):
                root = self._root(features[start : start + rows])
                cov = root @ np.swapaxes(root, 1, 2)
                jitter = 1e-12 * np.trace(cov, axis1=1, axis2=2)[:, None, None]
                factor = np.linalg.cholesky(cov + jitter * np.eye(self.n_classes))
                noise = rng.standard_normal((len(root), n_samples, self.n_classes))
                samples.append(noise @ np.swapaxes(factor, 1, 2))
            return mean[:, None, :] + np.concatenate(samples)
        return apply_weights(features, *self.sample_weights(n_samples, rng))

    def sample_weights(self, n_samples: int, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
        """``N`` draws of ``(W, b)`` from the posterior: ``(N, C, d)`` and ``(N, C)``."""
        delta, f = self.prior_precision, self.factors
        c, d = self.weight.shape
        if self.structure == "kron":
            z = rng.standard_normal((n_samples, c, d)) / np.sqrt(np.outer(f["g"], f["a"]) + delta)
            noise_w = f["q_out"] @ z @ f["q_in"].T
            noise_b = (rng.standard_normal((n_samples, c)) / np.sqrt(f["g"] + delta)) @ f["q_out"].T
        elif self.structure == "diag":
            noise_w = rng.standard_normal((n_samples, c, d)) * np.sqrt(f["var_w"])
            noise_b = rng.standard_normal((n_samples, c)) * np.sqrt(f["var_b"])
        else:
            scaled = f["eigvecs"] / np.sqrt(f["eigvals"] + delta)
            noise = rng.standard_normal((n_samples, len(f["eigvals"]))) @ scaled.T
            noise_w, noise_b = noise[:, : c * d].reshape(n_samples, c, d), noise[:, c * d:]
        return self.weight + noise_w, self.bias + noise_b


def apply_weights(features: np.ndarray, weights: np.ndarray, biases: np.ndarray) -> np.ndarray:
    """``(n, N, C)`` logits of ``N`` sampled heads ``(N, C, d)``, ``(N, C)``: one matrix product."""
    n_samples, c, d = weights.shape
    logits = features @ weights.reshape(n_samples * c, d).T
    return logits.reshape(len(features), n_samples, c) + biases[None]


def ggn(features: np.ndarray, labels: np.ndarray, weight: np.ndarray, bias: np.ndarray,
        structure: Structure) -> tuple[dict[str, np.ndarray], np.ndarray, float]:
    """(curvature factors, eigenvalues of H, summed cross-entropy) of the last layer at MAP."""
    features = np.asarray(features, dtype=np.float64)
    logits = features @ weight.T + bias
    probs = softmax(logits, axis=1)
    loss = float(-log_softmax(logits, axis=1)[np.arange(len(labels)), labels].sum())
    c, d = weight.shape
    if structure == "kron":
        g = np.diag(probs.sum(axis=0)) - probs.T @ probs
        a = features.T @ features / len(features)
        g_vals, q_out = np.linalg.eigh(g)
        a_vals, q_in = np.linalg.eigh(a)
        g_vals, a_vals = np.clip(g_vals, 0, None), np.clip(a_vals, 0, None)
        eigenvalues = np.concatenate([np.outer(g_vals, a_vals).ravel(), g_vals])
        return {"q_out": q_out, "g": g_vals, "q_in": q_in, "a": a_vals}, eigenvalues, loss
    spread = probs * (1.0 - probs)  # diagonal of Lambda_n
    if structure == "diag":
        h_w, h_b = spread.T @ features**2, spread.sum(axis=0)
        return {"h_w": h_w, "h_b": h_b}, np.concatenate([h_w.ravel(), h_b]), loss
    if structure != "full":
        raise ValueError(f"unknown Hessian structure {structure!r}; known: kron, diag, full")
    size = c * d + c
    if size > FULL_LIMIT:
        raise ValueError(f"a full GGN of this last layer has {size} x {size} entries (limit "
                         f"{FULL_LIMIT} parameters); use 'kron' or 'diag', or a smaller head")
    extended = np.concatenate([features, np.ones((len(features), 1))], axis=1)  # (n, d + 1)
    blocks = np.einsum("nc,ni,nj->cij", probs, extended, extended)  # diag(p) part
    outer = (probs[:, :, None] * extended[:, None, :]).reshape(len(features), -1)
    h = -(outer.T @ outer).reshape(c, d + 1, c, d + 1)
    h[np.arange(c), :, np.arange(c), :] += blocks
    order = [ci * (d + 1) + i for ci in range(c) for i in range(d)] + \
            [ci * (d + 1) + d for ci in range(c)]  # [W row-major, b], laplace-torch's order
    h = h.reshape(size, size)[np.ix_(order, order)]
    eigvals, eigvecs = np.linalg.eigh(h)
    eigvals = np.clip(eigvals, 0, None)
    return {"eigvecs": eigvecs, "eigvals": eigvals}, eigvals, loss


def log_marginal_likelihood(delta: float, eigenvalues: np.ndarray, loss: float,
                            parameter_norm: float) -> float:
    """Laplace evidence of a scalar prior precision ``delta`` (laplace-torch's formula)."""
    return float(-loss - 0.5 * (np.log(eigenvalues + delta).sum()
                                - len(eigenvalues) * np.log(delta) + delta * parameter_norm))


def fit(features: np.ndarray, labels: np.ndarray, weight: np.ndarray, bias: np.ndarray,
        structure: Structure = "kron", prior: PriorMethod = "marglik",
        validation: tuple[np.ndarray, np.ndarray] | None = None) -> LastLayerPosterior:
    """Last-layer Laplace posterior of a trained model from its training-set features."""
    weight, bias = np.asarray(weight, np.float64), np.asarray(bias, np.float64)
    factors, eigenvalues, loss = ggn(features, labels, weight, bias, structure)
    norm = float((weight**2).sum() + (bias**2).sum())
    if prior == "marglik":
        from scipy import optimize  # fit jobs only: scoring does not pay for its import

        result = optimize.minimize_scalar(
            lambda log_delta: -log_marginal_likelihood(np.exp(log_delta), eigenvalues, loss,
                                                       norm),
            bounds=(np.log(1e-6), np.log(1e6)), method="bounded", options={"xatol": 1e-6})
        delta = float(np.exp(result.x))
    elif prior == "validation":
        if validation is None:
            raise ValueError("prior='validation' needs validation features and labels")
        delta = float(PROBIT_GRID[np.argmin([
            _probit_nll(_posterior(weight, bias, structure, d, factors), *validation)
            for d in PROBIT_GRID])])
    else:
        raise ValueError(f"unknown prior method {prior!r}; known: marglik, validation")
    return _posterior(weight, bias, structure, delta, factors)


def _posterior(weight: np.ndarray, bias: np.ndarray, structure: str, delta: float,
               factors: dict[str, np.ndarray]) -> LastLayerPosterior:
    if structure == "diag":
        factors = {"var_w": 1.0 / (factors["h_w"] + delta), "var_b": 1.0 / (factors["h_b"] + delta)}
    return LastLayerPosterior(weight, bias, structure, delta, factors)


def _probit_nll(posterior: LastLayerPosterior, features: np.ndarray, labels: np.ndarray) -> float:
    """Mean negative log-likelihood of the probit-approximated GLM predictive."""
    scale = 1.0 / np.sqrt(1.0 + np.pi / 8.0 * posterior.variance(features))
    log_probs = log_softmax(scale * posterior.mean(features), axis=1)
    return float(-log_probs[np.arange(len(labels)), labels].mean())
