"""IHA and SIF against direct computations: explicit inverses of damped Hessians on a network
small enough to brute-force, leave-one-out gradients recomputed without the record, and an
overfit target whose members they must separate."""

from __future__ import annotations

import copy
import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.datasets import make_classification
from sklearn.metrics import roc_auc_score

from miarepro import hessian
from miarepro.attacks import AttackContext, get_attack, iha
from miarepro.attacks.iha import fit_hessian
from miarepro.models import build_model
from miarepro.training import per_sample_loss, train_model

RECIPE = {"optimizer": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 5e-3, "epochs": 60,
          "batch_size": 16, "loss": "cross_entropy"}


class _Study:
    """What white-box attacks load, from memory: one target trained on ``train``."""

    def __init__(self, X, y, train, model, recipe):
        self.X, self.y, self.train, self.model, self._recipe = X, y, train, model, recipe

    def features(self):
        return self.X

    def labels(self):
        return self.y

    def load_model(self, role, index):
        assert (role, index) == ("target", 0)
        return copy.deepcopy(self.model)

    def training_indices(self, role, index):
        return self.train

    def parts(self, group):
        return {"audit": np.arange(len(self.y))}

    def recipe(self):
        return dict(self._recipe)


def _case(n_samples, n_train, widths, epochs, seed=0, loss="cross_entropy"):
    X, y = make_classification(n_samples=n_samples, n_features=6, n_informative=4,
                               n_redundant=0, n_classes=3, flip_y=0.2, random_state=seed)
    X, y = X.astype(np.float32), y.astype(np.int64)
    train = np.arange(n_train)
    recipe = {**RECIPE, "epochs": epochs, "loss": loss}
    model = train_model(X, y, train, {"arch": "mlp", "widths": widths}, recipe, 3, seed).model
    study = _Study(X, y, train, model, recipe)
    mask = np.zeros(n_samples, dtype=bool)
    mask[train] = True
    empty = np.empty(0, dtype=np.int64)
    context = AttackContext(
        labels=y, audit=np.arange(n_samples), population=empty, validation=empty,
        target_logits=np.zeros((1, n_samples, 3), np.float32), target_mask=mask,
        reference_logits=np.zeros((0, 1, n_samples, 3), np.float32),
        reference_masks=np.zeros((0, n_samples), bool), reference_pool=empty, study=study)
    return context


def _with_fit(ctx, solver="exact"):
    return dataclasses.replace(ctx, fit=fit_hessian(ctx.study, 0, solver=solver,
                                                    chunk_size=7)[0])


@pytest.fixture(scope="module")
def tiny():
    """A 6-4-3 MLP (43 parameters) on 40 records, 20 of them its training set."""
    return _with_fit(_case(40, 20, [4], epochs=40))


SCORE_WITHOUT_TORCH = """
import json, sys
import numpy as np
from miarepro.attacks import AttackContext, get_attack

folder = sys.argv[1]
saved = dict(np.load(folder + "/case.npz"))
recipe = json.load(open(folder + "/recipe.json"))


class Study:  # what the exact solver asks of the study: no model
    def recipe(self):
        return dict(recipe)

    def training_indices(self, role, index):
        return saved["train"]


empty = np.empty(0, dtype=np.int64)
n = len(saved["labels"])
ctx = AttackContext(labels=saved["labels"], audit=np.arange(n), population=empty,
                    validation=empty, target_logits=np.zeros((1, n, 3), np.float32),
                    target_mask=saved["mask"], reference_logits=np.zeros((0, 1, n, 3)),
                    reference_masks=np.zeros((0, n), bool), reference_pool=empty,
                    fit={k[4:]: v for k, v in saved.items() if k.startswith("fit.")},
                    study=Study())
scores = {name: get_attack(name).fn(ctx) for name in ("iha", "sif")}
assert "torch" not in sys.modules, "exact scoring imported torch"
np.savez(folder + "/scores.npz", **scores)
"""


def test_exact_scoring_needs_neither_torch_nor_the_eigenvectors(tiny, tmp_path):
    """The exact fit holds every projection scoring reads (the audited records' gradients and
    the full-data gradient in the eigenbasis): IHA and SIF score, in a process that never
    imports torch, from the fit without its eigenvectors, what they score from all of it."""
    fit = {f"fit.{key}": value for key, value in tiny.fit.items() if key != "eigenvectors"}
    np.savez(tmp_path / "case.npz", labels=tiny.labels, mask=tiny.target_mask,
             train=tiny.study.train, **fit)
    (tmp_path / "recipe.json").write_text(json.dumps(tiny.study.recipe()))
    subprocess.run([sys.executable, "-c", SCORE_WITHOUT_TORCH, str(tmp_path)], check=True)
    alone = np.load(tmp_path / "scores.npz")
    for name in ("iha", "sif"):
        np.testing.assert_array_equal(alone[name], get_attack(name).fn(tiny))


def _direct(ctx, eps):
    """Every IHA term by the book: autograd gradients, ``torch.func.hessian`` and an explicit
    inverse of the damped Hessian, ``grad L0`` recomputed from ``D \\ {z1}`` for each record."""
    study = ctx.study
    model = study.load_model("target", 0).double().cpu()  # trained on the GPU where there is one
    names = [n for n, _ in model.named_parameters()]
    shapes = [p.shape for _, p in model.named_parameters()]
    theta0 = torch.cat([p.detach().reshape(-1) for p in model.parameters()])

    def losses(theta, rows):
        pieces = torch.split(theta, [int(np.prod(s)) for s in shapes])
        params = {n: p.view(s) for n, p, s in zip(names, pieces, shapes, strict=True)}
        inputs = torch.as_tensor(study.X[rows]).double()
        logits = torch.func.functional_call(model, params, (inputs,))
        return per_sample_loss(study._recipe["loss"], logits, torch.as_tensor(study.y[rows]))

    train, n = study.train, len(study.train)
    H = torch.func.hessian(lambda t: losses(t, train).mean())(theta0)
    inverse = torch.linalg.inv(H + eps * torch.eye(len(theta0), dtype=H.dtype))
    lr, mu, alpha = RECIPE["lr"], RECIPE["momentum"], RECIPE["weight_decay"]
    c1, c2 = 1 - lr * alpha / (1 + mu), 2 - lr * alpha / (1 + mu)
    rows = []
    for z in ctx.audit:
        g1 = torch.func.grad(lambda t, z=z: losses(t, [z]).sum())(theta0)
        rest = train[train != z]
        gL0 = torch.func.grad(lambda t, rest=rest: losses(t, rest).sum() / n)(theta0)
        v1, v0 = inverse @ g1, inverse @ gL0
        v11 = inverse @ v1
        rows.append({"loss": float(losses(theta0, [z])[0]) / (1 + mu),
                     "I1": float(c1 / n * v1 @ v1), "I2": float(2 * c1 * v0 @ v1),
                     "I3": float(alpha * c2 / (2 * n) * v1 @ v11),
                     "I4": float(alpha * c2 * v0 @ v11), "sif": float(g1 @ inverse @ g1)})
    return {key: np.array([r[key] for r in rows]) for key in rows[0]}, lr


def _iha(ctx, **params):
    return get_attack("iha").fn(ctx, **params)


@pytest.mark.parametrize("terms", [["I1"], ["I2"], ["I3"], ["I4"], ["loss", "I1", "I2"],
                                   ["loss", "I1", "I2", "I3", "I4"]])
def test_iha_terms_match_explicit_inverse(tiny, terms):
    """Each Eq. 8 term with its sign, against an explicitly inverted damped Hessian, with
    grad L0 recomputed without the record (the leave-one-out trick checked at once)."""
    direct, lr = _direct(tiny, eps=0.2)
    expected = sum(direct[t] if t == "loss" else -direct[t] / lr for t in terms)
    np.testing.assert_allclose(_iha(tiny, terms=terms, eps=0.2), expected, rtol=1e-5, atol=1e-12)


def test_a_recipe_that_leaves_momentum_unset_is_read_as_training_filled_it(tiny):
    """Eq. 8's momentum is the one the target trained with: a recipe without the key trained
    at training's default (0.9), so IHA must read that, not 0."""
    from miarepro.training import DEFAULT_RECIPE

    assert RECIPE["momentum"] == DEFAULT_RECIPE["momentum"]
    study = tiny.study
    unset = {k: v for k, v in study._recipe.items() if k != "momentum"}
    quiet = dataclasses.replace(tiny, study=_Study(study.X, study.y, study.train, study.model,
                                                   unset))
    np.testing.assert_array_equal(_iha(quiet, eps=0.2), _iha(tiny, eps=0.2))


def test_without_leave_one_out_knowledge_grad_l0_is_grad_l1_for_every_record(tiny):
    """``leave_one_out=False``: Eq. 8 with ``v0 = H^-1 grad L1`` for members too. From the
    explicit terms: a member's ``v0`` gains back ``v1 / n``, so I2 gains ``2 c1 |v1|^2 / n``
    and I4 ``alpha c2 v1.v11 / n``; non-members are unchanged."""
    direct, lr = _direct(tiny, eps=0.2)
    alpha, mu = RECIPE["weight_decay"], RECIPE["momentum"]
    c1, c2 = 1 - lr * alpha / (1 + mu), 2 - lr * alpha / (1 + mu)
    share = tiny.target_mask[tiny.audit] / len(tiny.study.train)
    H = _hessian(tiny)
    inverse = np.linalg.inv(H + 0.2 * np.eye(len(H)))
    flat = hessian.FlatLoss(tiny.study.load_model("target", 0))
    v1 = hessian.per_sample_gradients(flat, tiny.study.X, tiny.study.y)[0].cpu().numpy() @ inverse
    i2 = direct["I2"] + 2 * c1 * share * (v1 * v1).sum(1)
    i4 = direct["I4"] + alpha * c2 * share * (v1 * (v1 @ inverse)).sum(1)
    expected = direct["loss"] - (direct["I1"] + i2 + direct["I3"] + i4) / lr
    np.testing.assert_allclose(_iha(tiny, eps=0.2, leave_one_out=False), expected, rtol=1e-5)


def test_leave_one_out_gradient_trick():
    """grad L1 - g1/n equals the gradient of (1/n) sum over D without z1, recomputed."""
    ctx = _case(30, 15, [3], epochs=5)
    flat = hessian.FlatLoss(ctx.study.load_model("target", 0))
    X, y, train = ctx.study.X, ctx.study.y, ctx.study.train
    full = hessian.mean_gradient(flat, X[train], y[train], batch_size=4)
    gradients, _ = hessian.per_sample_gradients(flat, X[train], y[train], batch_size=4)
    for k in (0, 7, 14):
        rest = np.delete(train, k)
        recomputed = hessian.mean_gradient(flat, X[rest], y[rest]) * len(rest) / len(train)
        torch.testing.assert_close(full - gradients[k] / len(train), recomputed, rtol=1e-10,
                                   atol=1e-12)


def test_sif_is_minus_damped_self_influence(tiny):
    direct, _ = _direct(tiny, eps=0.5)
    sif = get_attack("sif").fn(tiny, eps=0.5)
    np.testing.assert_allclose(sif, -direct["sif"], rtol=1e-5)


def test_projections_saved_by_the_fit_give_the_scores_computed_afresh(tiny):
    """Scoring reads the audited records' eigenbasis gradients from the fit (float32) and
    computes those of any other record; both give the same scores."""
    fresh = dataclasses.replace(tiny, fit={k: v for k, v in tiny.fit.items()
                                           if not k.startswith("audit")})
    for params in ({}, {"terms": ["I2"], "eps": 0.05}, {"conditioning": "low_rank"}):
        np.testing.assert_allclose(_iha(tiny, **params), _iha(fresh, **params), rtol=1e-5)
    np.testing.assert_allclose(get_attack("sif").fn(tiny), get_attack("sif").fn(fresh),
                               rtol=1e-5)


def test_conjugate_gradients_match_the_exact_solver(tiny):
    """CG needs H + eps I positive definite: the tiny MLP's Hessian has a negative eigenvalue
    (about -0.26), so both dampings compared lie above it."""
    cg = _with_fit(tiny, solver="cg")
    assert "eigenvectors" not in cg.fit
    lowest = np.linalg.eigvalsh(_hessian(tiny)).min()
    for eps in (0.5, 1.0):
        assert lowest + eps > 0, (lowest, eps)
        exact = _iha(tiny, eps=eps)
        approx = _iha(cg, eps=eps, cg_iterations=500, cg_tolerance=1e-12)
        _assert_float32_close(approx, exact)
    sif_exact = get_attack("sif").fn(tiny, eps=1.0)
    sif_cg = get_attack("sif").fn(cg, eps=1.0, cg_iterations=500, cg_tolerance=1e-12)
    _assert_float32_close(sif_cg, sif_exact)


@pytest.mark.parametrize("tolerance", [1e-4, 1e-10])
def test_a_cg_solve_reaches_its_tolerance_in_the_true_residual(tiny, tolerance):
    """The residual CG updates drifts from the true one by the products' rounding: float32
    products, half the time of float64, serve tolerances down to ``FLOAT32_TOLERANCE``, and
    a tighter one takes float64 products, so its solution is as close as it says."""
    cg = _with_fit(tiny, solver="cg")
    solver = iha._Solver(cg, 1.0, "damping", 500, tolerance)
    rhs = np.random.default_rng(0).normal(size=(5, len(cg.fit["gradient"])))
    x = solver.solve(rhs)
    damped = _hessian(tiny) + np.eye(rhs.shape[1])
    true = np.linalg.norm(x @ damped - rhs, axis=1) / np.linalg.norm(rhs, axis=1)
    assert solver.worst_residual <= tolerance and true.max() <= 2 * tolerance


def _assert_float32_close(approx, exact):
    """CG runs in float32, so its error is relative to the scores' scale, not to each score:
    a score near 0 among scores near 20 may differ by 1e-5 of itself (seen with AVX-512)."""
    np.testing.assert_allclose(approx, exact, rtol=1e-5, atol=1e-6 * np.abs(exact).max())


def _hessian(ctx):
    flat = hessian.FlatLoss(ctx.study.load_model("target", 0))
    train = ctx.study.train
    return hessian.hessian(flat, ctx.study.X[train], ctx.study.y[train]).cpu().numpy()


def test_conjugate_gradients_that_stop_short_say_so(tiny, caplog):
    """A solve cut off before its tolerance gives scores that are not Eq. 8's: a warning says
    so and what to raise; one that converges logs its residual quietly."""
    cg = _with_fit(tiny, solver="cg")
    with caplog.at_level("INFO", logger="miarepro.attacks.iha"):
        _iha(cg, eps=1.0, cg_iterations=1, cg_tolerance=1e-6)
        get_attack("sif").fn(cg, eps=1.0, cg_iterations=1, cg_tolerance=1e-6)
    short = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(short) == 2 and all("raise eps or cg_iterations" in r.getMessage() for r in short)
    caplog.clear()
    with caplog.at_level("INFO", logger="miarepro.attacks.iha"):
        _iha(cg, eps=1.0, cg_iterations=500, cg_tolerance=1e-4)
    assert [r.levelname for r in caplog.records] == ["INFO"]


def _spd_with_outliers(size, outliers, seed):
    """A network Hessian's shape: ``outliers`` eigenvalues in [50, 100] above a bulk in [0, 1]."""
    rng = np.random.default_rng(seed)
    basis, _ = np.linalg.qr(rng.normal(size=(size, size)))
    values = np.concatenate([rng.uniform(50, 100, outliers), rng.uniform(0, 1, size - outliers)])
    return torch.as_tensor(basis @ np.diag(values) @ basis.T)


@pytest.mark.parametrize("rows", [1, 12, 80])  # plain CG; a block; wider than the system
def test_block_conjugate_gradients_solve_every_row_to_the_tolerance(rows, monkeypatch):
    """Against a direct solve, with a zero, a repeated and a dependent right-hand side among
    the rows: the block's directions are completed rather than left singular, and a positive
    definite system never falls back to solving row by row."""
    monkeypatch.setattr(hessian, "_rowwise_cg", None)  # calling it would fail
    H, eps = _spd_with_outliers(60, 10, 0), 0.2
    rhs = torch.as_tensor(np.random.default_rng(1).normal(size=(rows, 60)))
    if rows > 6:
        rhs[1] = 0.0
        rhs[2] = rhs[3]
        rhs[4] = 2 * rhs[5] - rhs[6]
    x, report = hessian.conjugate_gradient(lambda v: v @ H, rhs, eps, 500, 1e-10)
    direct = torch.linalg.solve(H + eps * torch.eye(60, dtype=H.dtype), rhs.T).T
    assert report.max_relative_residual <= 1e-10
    torch.testing.assert_close(x, direct, rtol=1e-6, atol=1e-9)
    if rows >= 60:  # its first directions span the whole space: one step is the solve
        assert report.iterations == 1


def test_a_block_needs_fewer_products_than_its_rows_one_by_one():
    """The reason for the block: its rows share the outlying eigenvalues' directions, where
    each row alone spends iterations on them. Both reach the tolerance, with equal solutions."""
    H = _spd_with_outliers(300, 20, 2)
    rhs = torch.as_tensor(np.random.default_rng(3).normal(size=(30, 300)))
    block, block_report = hessian.conjugate_gradient(lambda v: v @ H, rhs, 0.2, 500, 1e-8)
    rows, rows_report = hessian._rowwise_cg(lambda v: v @ H, rhs, 0.2, 500, 1e-8)
    assert max(block_report.max_relative_residual, rows_report.max_relative_residual) <= 1e-8
    assert block_report.iterations < rows_report.iterations / 2, (block_report, rows_report)
    # each within its residual tolerance times the condition number (100.2 / 0.2) of the truth
    assert float(((block - rows).norm(dim=1) / rows.norm(dim=1)).max()) < 1e-5


@pytest.mark.parametrize("found", ["at once", "later"])
def test_an_indefinite_system_is_solved_row_by_row(found):
    """Where the damped Hessian has negative curvature on the block's directions, the rows are
    solved as before the block existed: one by one from the start, each stopping at its
    negative curvature; the report counts the block's products too. The curvature is met at
    the first iteration where the right-hand sides reach the negative eigenvalue, and later
    where they barely do (the Krylov space grows towards it)."""
    values = torch.tensor([-3.0, *np.linspace(0.5, 8.0, 19)], dtype=torch.float64)
    basis = torch.as_tensor(np.linalg.qr(np.random.default_rng(5).normal(size=(20, 20)))[0])
    H = basis @ torch.diag(values) @ basis.T
    rhs = torch.as_tensor(np.random.default_rng(6).normal(size=(2, 20)))
    if found == "at once":
        rhs[0] = basis[:, 0]
    else:
        rhs -= 0.999 * (rhs @ basis[:, :1]) * basis[:, 0]
    calls = []
    x, report = hessian.conjugate_gradient(lambda v: calls.append(1) or v @ H, rhs, 0.2, 50,
                                           1e-8)
    expected, expected_report = hessian._rowwise_cg(lambda v: v @ H, rhs, 0.2, 50, 1e-8)
    assert torch.equal(x, expected)
    assert report.iterations == len(calls) > expected_report.iterations
    assert report.max_relative_residual == expected_report.max_relative_residual
    block_iterations = len(calls) - expected_report.iterations
    assert block_iterations == 1 if found == "at once" else block_iterations > 1


def test_block_and_row_by_row_solves_agree_on_a_networks_hessian():
    """On the closed-form products of an MLP (what IHA's CG scoring runs): both solvers give
    the same solutions to their tolerance, in float32 products as IHA runs them."""
    case = _case(200, 150, [8], epochs=30, seed=4)
    flat = hessian.FlatLoss(case.study.load_model("target", 0))
    products = hessian.hvp_function(flat, case.study.X[:150], case.study.y[:150],
                                    precision=torch.float32)
    gradients, _ = hessian.per_sample_gradients(flat, case.study.X[150:], case.study.y[150:])
    block, block_report = hessian.conjugate_gradient(products, gradients, 0.2, 200, 1e-4)
    rows, rows_report = hessian._rowwise_cg(products, gradients, 0.2, 200, 1e-4)
    assert max(block_report.max_relative_residual, rows_report.max_relative_residual) <= 1e-4
    assert block_report.iterations < rows_report.iterations
    error = (block - rows).norm(dim=1) / rows.norm(dim=1)
    assert float(error.max()) < 1e-3  # each within 1e-4 of the solution in the residual


def test_chunked_hessian_equals_torch_func_hessian():
    torch.manual_seed(0)
    model = build_model({"arch": "mlp", "widths": [5]}, (4,), 3)
    X = np.random.default_rng(0).normal(size=(37, 4)).astype(np.float32)
    y = np.arange(37) % 3
    for loss in ("cross_entropy", "mse"):
        flat = hessian.FlatLoss(model, loss)
        chunked = hessian.hessian(flat, X, y, chunk_size=6, batch_size=10)
        inputs, labels = flat.tensors(X, y)
        whole = torch.func.hessian(flat.loss)(flat.theta, inputs, labels)
        torch.testing.assert_close(chunked, whole, rtol=1e-10, atol=1e-12)


def test_spectrum_equals_torchs_eigh_reading_the_same_triangle():
    """SciPy's LAPACK on a CPU gives torch's decomposition: the same eigenvalues, eigenvectors
    equal up to sign, both read from the lower triangle of a matrix that is symmetric only up
    to rounding (as a Hessian built column by column is)."""
    generator = torch.Generator().manual_seed(0)
    root = torch.randn(40, 40, generator=generator, dtype=torch.float64)
    matrix = root @ root.T - 30 * torch.eye(40, dtype=torch.float64)  # indefinite
    matrix += torch.triu(1e-3 * torch.randn(40, 40, generator=generator, dtype=torch.float64), 1)
    values, vectors = torch.linalg.eigh(matrix)
    spectrum = hessian.Spectrum.of(matrix.clone())
    torch.testing.assert_close(spectrum.values, values, rtol=0, atol=1e-12)
    signs = torch.sign((spectrum.vectors * vectors).sum(0))
    torch.testing.assert_close(spectrum.vectors * signs, vectors, rtol=0, atol=1e-10)
    assert int((spectrum.values < -1e-9).sum()) > 0  # the negative directions kept


@pytest.mark.parametrize("spec", [{"arch": "mlp", "widths": []},
                                  {"arch": "mlp", "widths": [6, 5], "activation": "leaky_relu"},
                                  {"arch": "mlp", "widths": [4, 4, 3]}])
@pytest.mark.parametrize("elements", [10**9, 100])  # all vectors at once; one or two a chunk
def test_closed_form_mlp_products_equal_autograd(spec, elements, monkeypatch):
    """The closed-form products of cross-entropy MLPs (several batches, several vectors, taken
    at once or in chunks) equal the Hessian of torch.func; in float32 they agree to float32
    precision."""
    monkeypatch.setattr(hessian, "MLP_ELEMENTS", elements)
    torch.manual_seed(1)
    model = build_model(spec, (2, 3), 4)
    X = np.random.default_rng(1).normal(size=(53, 2, 3)).astype(np.float32)
    y = np.arange(53) % 4
    flat = hessian.FlatLoss(model)
    assert hessian._mlp_slopes(flat.model) is not None  # the closed form is what runs
    inputs, labels = flat.tensors(X, y)
    whole = torch.func.hessian(flat.loss)(flat.theta, inputs, labels)
    vectors = torch.randn(5, flat.size, dtype=torch.float64)
    products = hessian.hvp_function(flat, X, y, batch_size=20)
    torch.testing.assert_close(products(vectors), vectors @ whole.T, rtol=1e-9, atol=1e-12)
    single = hessian.hvp_function(flat, X, y, batch_size=20, precision=torch.float32)(vectors)
    assert single.dtype == torch.float64
    torch.testing.assert_close(single, vectors @ whole.T, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_mostly_zero_inputs_take_sparse_products_with_equal_results(dtype):
    """Purchase-like binary inputs (here 6% non-zero) go through sparse first-layer products;
    they equal the dense products and the Hessian of torch.func."""
    torch.manual_seed(2)
    model = build_model({"arch": "mlp", "widths": [7, 5]}, (40,), 6)
    X = (np.random.default_rng(2).random((90, 40)) < 0.06).astype(np.float32)
    y = np.arange(90) % 6
    flat = hessian.FlatLoss(model, dtype=dtype)
    inputs, labels = flat.tensors(X, y)
    assert hessian._LayerInput.of(inputs).rows.layout == torch.sparse_csr
    assert hessian._LayerInput.of(inputs + 1).rows.layout == torch.strided  # dense stays dense
    vectors = torch.randn(9, flat.size, dtype=dtype)
    dense = sum(hessian._mlp_products(flat, hessian._mlp_slopes(flat.model),
                                      hessian._LayerInput(inputs[rows], inputs[rows].T),
                                      labels[rows], vectors) * (rows.stop - rows.start) / 90
                for rows in (slice(0, 40), slice(40, 90)))
    sparse = hessian.hvp_function(flat, X, y, batch_size=40)(vectors)
    whole = torch.func.hessian(flat.loss)(flat.theta, inputs, labels)
    tolerance = {"rtol": 1e-9, "atol": 1e-12} if dtype == torch.float64 else {
        "rtol": 1e-4, "atol": 1e-6}
    torch.testing.assert_close(sparse, dense, **tolerance)
    torch.testing.assert_close(sparse, vectors @ whole.T, **tolerance)


def test_other_models_take_the_autograd_products():
    for spec in ({"arch": "mlp", "widths": [4], "dropout": 0.5}, {"arch": "logistic"},
                 {"arch": "mlp", "widths": [4], "activation": "tanh"}):
        model = build_model(spec, (3,), 2)
        assert hessian._mlp_slopes(model) is None, spec


def test_logistic_regression_has_one_logit_and_the_papers_mse():
    """IHA's MNIST-Odd model: 785 parameters on 28 x 28 inputs; its logits are ``[0, s]``,
    so the 2-class softmax is the sigmoid and the ``mse`` loss is ``(sigmoid(s) - y)^2``."""
    model = build_model({"arch": "logistic"}, (1, 28, 28), 2)
    assert sum(p.numel() for p in model.parameters()) == 785
    x = torch.randn(6, 1, 28, 28)
    y = torch.tensor([0, 1, 1, 0, 1, 0])
    logits = model(x)
    s = model.linear(x.flatten(1))[:, 0]
    torch.testing.assert_close(logits[:, 0], torch.zeros(6))
    torch.testing.assert_close(torch.softmax(logits, 1)[:, 1], torch.sigmoid(s))
    torch.testing.assert_close(per_sample_loss("mse", logits, y),
                               (torch.sigmoid(s) - y.float()) ** 2)
    with pytest.raises(ValueError, match="2 classes"):
        build_model({"arch": "logistic"}, (4,), 3)


def test_low_rank_keeps_only_eigenpairs_above_eps():
    values = np.array([-1.0, 0.05, 0.3, 2.0])
    np.testing.assert_allclose(iha.inverse_weights(values, 0.1, "low_rank"), [0, 0, 1 / 0.3, 0.5])
    np.testing.assert_allclose(iha.inverse_weights(values, 0.1, "damping"), 1 / (values + 0.1))


def test_fraction_one_is_the_full_gradient_and_smaller_fractions_differ(tiny):
    full = _iha(tiny)
    np.testing.assert_allclose(_iha(tiny, fraction=1.0), full)
    assert not np.allclose(_iha(tiny, fraction=0.5), full)


class _NoModel(_Study):
    def load_model(self, role, index):
        raise AssertionError("exact scoring of projected records must not load the model")


def _without_model(ctx):
    s = ctx.study
    return dataclasses.replace(ctx, study=_NoModel(s.X, s.y, s.train, s.model, s._recipe))


@pytest.mark.parametrize("fraction", [1.0, 0.5])
def test_exact_scoring_reads_the_fit_alone_and_equals_recomputed_gradients(tiny, fraction):
    """The fit's projected gradients serve the audit and the fraction subset (the projection
    is linear), without torch or the model; records it did not project are recomputed."""
    from_fit = _iha(_without_model(tiny), fraction=fraction)
    unprojected = {k: v for k, v in tiny.fit.items() if not k.startswith("audit")}
    recomputed = _iha(dataclasses.replace(tiny, fit=unprojected), fraction=fraction)
    np.testing.assert_allclose(from_fit, recomputed, rtol=1e-5, atol=1e-9)
    sif = get_attack("sif").fn
    np.testing.assert_allclose(sif(_without_model(tiny)),
                               sif(dataclasses.replace(tiny, fit=unprojected)), rtol=1e-5)


def test_mse_loss_model_is_scored_with_its_own_loss():
    ctx = _with_fit(_case(30, 15, [], epochs=10, loss="mse"))
    direct, lr = _direct(ctx, eps=0.2)
    expected = direct["loss"] - (direct["I1"] + direct["I2"] + direct["I3"] + direct["I4"]) / lr
    np.testing.assert_allclose(_iha(ctx), expected, rtol=1e-5)


def test_iha_separates_members_of_an_overfit_target():
    """A 6-32-3 MLP fitted to 100 noisy records (20% flipped labels) for long."""
    ctx = _with_fit(_case(400, 100, [32], epochs=150, seed=1))
    members = ctx.target_mask[ctx.audit]
    auc = roc_auc_score(members, _iha(ctx))
    loss_auc = roc_auc_score(members, -_direct_losses(ctx))
    assert auc > 0.75, auc
    assert auc > loss_auc - 0.05, (auc, loss_auc)
    assert roc_auc_score(members, get_attack("sif").fn(ctx)) > 0.6


def _direct_losses(ctx):
    flat = hessian.FlatLoss(ctx.study.load_model("target", 0))
    return hessian.per_sample_gradients(flat, ctx.study.X, ctx.study.y)[1].cpu().numpy()
