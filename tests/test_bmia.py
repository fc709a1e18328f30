"""BMIA and its closed-form last-layer Laplace, checked against laplace-torch and by hand."""

import dataclasses

import numpy as np
import pytest
import torch
from overfit import N_POOL, overfit_context
from scipy import stats

from miarepro import lastlayer, metrics, signals
from miarepro.attacks import get_attack
from miarepro.attacks.bmia import fit_bmia, t_statistic
from miarepro.compat import ensure_torchvision

STRUCTURES = ("kron", "diag", "full")


@pytest.fixture(scope="module")
def head():
    """A small trained-looking head on random features: n = 60, d = 5, C = 4, float64."""
    generator = torch.Generator().manual_seed(0)
    features = torch.randn(60, 5, generator=generator, dtype=torch.float64)
    labels = torch.randint(0, 4, (60,), generator=generator)
    layer = torch.nn.Linear(5, 4).double()
    with torch.no_grad():
        layer.weight.copy_(3 * torch.randn(4, 5, generator=generator, dtype=torch.float64))
    return features, labels, layer


def laplace_torch(head, structure):
    ensure_torchvision()  # laplace-torch imports torchvision
    from laplace import Laplace
    from laplace.curvature import BackPackGGN

    features, labels, layer = head
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(features, labels),
                                         batch_size=16)
    la = Laplace(layer, "classification", subset_of_weights="all",
                 hessian_structure=structure, backend=BackPackGGN)
    la.fit(loader)
    return la


def ours(head, structure, prior="marglik", validation=None):
    features, labels, layer = head
    return lastlayer.fit(features.numpy(), labels.numpy(), layer.weight.detach().numpy(),
                         layer.bias.detach().numpy(), structure, prior, validation)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_glm_predictive_equals_laplace_torch(head, structure):
    la = laplace_torch(head, structure)
    posterior = ours(head, structure)
    la.prior_precision = posterior.prior_precision
    queries = torch.randn(7, 5, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    f_mu, f_var = la._glm_predictive_distribution(queries)
    np.testing.assert_allclose(posterior.mean(queries.numpy()), f_mu.numpy(), atol=1e-5)
    np.testing.assert_allclose(posterior.covariance(queries.numpy()), f_var.numpy(), atol=1e-5)
    np.testing.assert_allclose(posterior.variance(queries.numpy()),
                               np.diagonal(f_var.numpy(), axis1=1, axis2=2), atol=1e-5)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_marginal_likelihood_and_its_maximum_match_laplace_torch(head, structure):
    features, labels, layer = head
    weight, bias = layer.weight.detach().numpy(), layer.bias.detach().numpy()
    _, eigenvalues, loss = lastlayer.ggn(features.numpy(), labels.numpy(), weight, bias,
                                         structure)
    norm = float((weight**2).sum() + (bias**2).sum())
    la = laplace_torch(head, structure)
    for delta in (0.1, 1.0, 10.0):
        expected = la.log_marginal_likelihood(torch.tensor(delta, dtype=torch.float64))
        assert lastlayer.log_marginal_likelihood(delta, eigenvalues, loss, norm) == \
            pytest.approx(float(expected), rel=1e-10)
    la.optimize_prior_precision(method="marglik", n_steps=300)
    assert ours(head, structure).prior_precision == pytest.approx(float(la.prior_precision),
                                                                  rel=1e-2)


def test_validation_prior_picks_laplace_torchs_grid_point(head):
    features, labels, _ = head
    validation = (features[:30], labels[:30])
    la = laplace_torch(head, "kron")
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(*validation),
                                         batch_size=30)
    la.optimize_prior_precision(method="gridsearch", val_loader=loader, pred_type="glm",
                                link_approx="probit", progress_bar=False)  # its defaults
    posterior = ours(head, "kron", "validation",
                     (validation[0].numpy(), validation[1].numpy()))
    assert posterior.prior_precision == pytest.approx(float(la.prior_precision), rel=1e-6)


def test_ggn_is_the_exact_hessian_and_kron_its_factorisation(head):
    """A linear head's GGN is its loss Hessian; diag is its diagonal; with one record KFAC is
    exact on the weights."""
    features, labels, layer = head
    weight, bias = layer.weight.detach().clone(), layer.bias.detach().clone()

    def loss(params):
        w, b = params[:20].reshape(4, 5), params[20:]
        return torch.nn.functional.cross_entropy(features @ w.T + b, labels, reduction="sum")

    exact = torch.autograd.functional.hessian(loss, torch.cat([weight.ravel(), bias])).numpy()
    w, b, x, y = weight.numpy(), bias.numpy(), features.numpy(), labels.numpy()
    full, _, _ = lastlayer.ggn(x, y, w, b, "full")
    np.testing.assert_allclose(full["eigvecs"] * full["eigvals"] @ full["eigvecs"].T, exact,
                               atol=1e-9)
    diag, _, _ = lastlayer.ggn(x, y, w, b, "diag")
    np.testing.assert_allclose(np.concatenate([diag["h_w"].ravel(), diag["h_b"]]),
                               np.diag(exact), atol=1e-9)
    one, _, _ = lastlayer.ggn(x[:1], y[:1], w, b, "kron")
    g = one["q_out"] * one["g"] @ one["q_out"].T
    a = one["q_in"] * one["a"] @ one["q_in"].T
    exact_one, _, _ = lastlayer.ggn(x[:1], y[:1], w, b, "full")
    h_one = exact_one["eigvecs"] * exact_one["eigvals"] @ exact_one["eigvecs"].T
    np.testing.assert_allclose(np.kron(g, a), h_one[:20, :20], atol=1e-9)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_mc_and_glm_samples_have_the_predictive_covariance(head, structure):
    posterior = ours(head, structure)
    query = head[0][:1].numpy()
    expected = posterior.covariance(query)[0]
    for predictive in ("glm", "mc"):
        samples = posterior.sample_logits(query, 100_000, np.random.default_rng(0), predictive)
        np.testing.assert_allclose(np.cov(samples[0].T), expected, atol=0.05 * expected.max())


@pytest.mark.parametrize("structure", ["kron", "diag"])
def test_float32_glm_draws_equal_float64_ones_to_rounding(head, structure):
    """The same standard-normal draws through the same predictive in float64: the float32
    path changes the logits by rounding only."""
    posterior = ours(head, structure)
    query = head[0][:5].numpy()
    draws = posterior.sample_logits(query, 50, np.random.default_rng(3), "glm")
    noise = np.random.default_rng(3).standard_normal(draws.shape, dtype=np.float32)
    if structure == "kron":
        spread = (noise * posterior._kron_scale(query)[:, None, :]) @ posterior.factors["q_out"].T
    else:
        spread = noise * np.sqrt(posterior.variance(query))[:, None, :]
    exact = posterior.mean(query)[:, None, :] + spread
    assert draws.dtype == np.float32
    np.testing.assert_allclose(draws, exact, rtol=0, atol=1e-6 * np.abs(exact).max())


def test_hinge_in_place_is_the_hinge():
    hand = np.array([[[1.0, 3.0, 2.0]], [[4.0, 0.0, 1.0]]])  # (draws, rows, classes)
    assert signals.hinge(hand, np.array([1]), overwrite=True).tolist() == [[1.0], [-4.0]]
    rng = np.random.default_rng(0)
    logits, labels = rng.standard_normal((6, 4, 5)).astype(np.float32), rng.integers(0, 5, 6)
    expected = signals.hinge(np.swapaxes(logits, 0, 1), labels)
    in_place = signals.hinge(np.swapaxes(logits.copy(), 0, 1), labels, overwrite=True)
    assert in_place.dtype == np.float64
    np.testing.assert_array_equal(in_place, expected)


def test_t_statistic_hand_case_and_zero_variance_limit():
    differences = np.array([[1.0, 2.0, 3.0, 6.0], [-1.0, 0.5, 0.0, -0.5]])
    mean, sd = differences.mean(axis=1), differences.std(axis=1, ddof=1)
    np.testing.assert_allclose(t_statistic(differences), mean / (sd / 2))
    expected = stats.ttest_1samp(differences, 0, axis=1, alternative="greater").statistic
    np.testing.assert_allclose(t_statistic(differences), expected)
    # no posterior variance: every draw equals the reference hinge, so BMIA compares hinges
    flat = np.array([[0.5] * 5, [-2.0] * 5, [1.5] * 5])
    assert np.all(np.isfinite(t_statistic(flat)))
    assert list(np.argsort(t_statistic(flat))) == [1, 0, 2]


class _Study:
    """A study handle over the overfit case: the reference trains on half the population."""

    def __init__(self, X, y, population, model, train):
        self.X, self.y, self.population, self.model, self.train = X, y, population, model, train

    def features(self):
        return self.X

    def labels(self):
        return self.y

    def load_model(self, role, index):
        return self.model

    def training_indices(self, role, index):
        return self.train

    def parts(self, group):
        return {"reference_pool": self.population}

    def reference_index(self, group, i):
        return i


@pytest.fixture(scope="module")
def fitted():
    """An overfit target with BMIA's fit of one reference model trained on half the pool."""
    from overfit import _data

    from miarepro.training import train_model

    ctx = overfit_context()
    X, y = _data(len(ctx.labels), 0)
    train = ctx.population[: len(ctx.population) // 2]
    trained = train_model(X, y, train, {"arch": "mlp", "widths": [64]},
                          {"optimizer": "adam", "lr": 0.01, "epochs": 60, "batch_size": 128},
                          n_classes=int(y.max()) + 1, seed=0)
    arrays, info = fit_bmia(_Study(X, y, ctx.population, trained.model, train), 0)
    assert info["n_fit"] == len(train) and arrays["features"].shape == (len(y), 64)
    return dataclasses.replace(ctx, reference_logits=ctx.reference_logits[:1],
                               reference_masks=ctx.reference_masks[:1], fit=arrays)


def test_bmia_separates_members_of_an_overfit_target(fitted):
    member = fitted.target_mask[fitted.audit]
    scores = get_attack("bmia").fn(fitted, n_samples=50)
    assert scores.shape == (N_POOL,)
    assert metrics.auc(member, scores) > 0.7
    mc = get_attack("bmia").fn(fitted, n_samples=50, predictive="mc")
    assert metrics.auc(member, mc) == pytest.approx(metrics.auc(member, scores), abs=0.03)


def test_bmia_score_is_the_t_test_of_its_reference_hinges(fitted):
    from miarepro.attacks.bmia import reference_hinges

    few = dataclasses.replace(fitted, audit=fitted.audit[:7])
    draws = reference_hinges(few, 40, "glm")
    target = few.target_statistic("hinge")[0]
    expected = stats.ttest_1samp(target[:, None] - draws, 0.0, axis=1).statistic
    np.testing.assert_allclose(get_attack("bmia").fn(few, n_samples=40), expected)


def test_bmia_reads_the_plain_query_where_its_reference_draws_are(fitted):
    """An augmented query (here the plain logits with their classes rolled) leaves BMIA's
    score as it is: the reference model's draws are on the plain input alone."""
    plain = fitted.target_logits[:1]
    augmented = dataclasses.replace(
        fitted, target_logits=np.concatenate([plain, np.roll(plain, 1, axis=-1)]))
    scores = get_attack("bmia").fn(augmented, n_samples=40)
    np.testing.assert_array_equal(scores, get_attack("bmia").fn(fitted, n_samples=40))
    # the test can fail: a mean over both queries moves the target's hinge
    assert not np.allclose(augmented.target_statistic("hinge").mean(axis=0),
                           augmented.target_statistic("hinge")[0])


def test_density_picks_the_hard_nonmember_and_the_attacks_conditionals(fitted):
    from miarepro.artifacts import density
    from miarepro.attacks.reference import moments

    hinge = np.array([5.0, 0.1, 0.2, 0.3, 9.0, 0.4, 3.0, 0.5])
    member = np.array([True, False, False, False, True, False, False, False])
    # non-member hinges 0.1..0.5 and 3.0: only 3.0 lies above their 95% quantile
    assert density.hard_nonmember(hinge, member) == 6
    one = dataclasses.replace(fitted, audit=fitted.audit[3:4])
    draws, mean, std = density.conditional("bmia", one, {"n_samples": 30})
    assert draws.shape == (30,) and mean == pytest.approx(draws.mean())
    lira_ctx = dataclasses.replace(overfit_context(), audit=fitted.audit[3:4])
    _, mean, std = density.conditional("lira", lira_ctx, {"variance": "per_example"})
    fit = moments(lira_ctx.reference_statistic("hinge"), lira_ctx.reference_in())
    assert (mean, std ** 2) == pytest.approx((fit.mean_out[0, 0], fit.var_out[0, 0]))
    population, _, _ = density.conditional("marginal", fitted, {})
    assert population.shape == fitted.population.shape
    with pytest.raises(ValueError, match="no conditional density"):
        density.conditional("rmia", fitted, {})
