"""The independent recheck of the claims table (benchmarks/recheck_claims.py): its own metric
and decision code agrees with the package's on generated audits with ties, and it fails on a
table that differs from the scores (no workflow runs)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from overfit import loo_context, overfit_context
from scipy import stats

from miarepro import metrics, uncertainty
from miarepro.artifacts import claims
from miarepro.attacks import get_attack

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.append(str(BENCHMARKS))
# benchmarks/recheck_*.py, found through the path above
import recheck_claims  # noqa: E402
import recheck_drawn  # noqa: E402
import recheck_iha  # noqa: E402
import recheck_inputs  # noqa: E402
import recheck_networks  # noqa: E402
import recheck_reference  # noqa: E402
import recheck_scores  # noqa: E402


@pytest.mark.parametrize("seed", range(4))
def test_its_metrics_are_the_packages_on_audits_with_ties(seed):
    rng = np.random.default_rng(seed)
    member = rng.random(600) < 0.5
    score = np.round(rng.normal(member * 0.4, 1.0), 1)  # rounded: many ties
    group = pd.DataFrame({"member": member, "score": score})
    assert recheck_claims.target_value(group, "auc") == pytest.approx(metrics.auc(member, score))
    for fpr in (0.001, 0.01, 0.1):
        percent = f"{fpr * 100:g}%"
        assert recheck_claims.target_value(group, f"tpr@{percent}") == pytest.approx(
            metrics.tpr_at_fpr(member, score, fpr))
        assert recheck_claims.target_value(group, f"precision@{percent}") == pytest.approx(
            metrics.precision_at_fpr(member, score, fpr))
        assert recheck_claims.exceedances(f"tpr@{percent}", 300, 300) == (
            uncertainty.exceedances(f"tpr@{percent}", 300, 300))
    # Stolen Memories' audits are balanced, where the package's advantage, 2 accuracy - 1,
    # is Yeom et al.'s TPR - FPR that the recheck computes
    balanced = group.assign(member=np.arange(600) % 2 == 0, decision=score > 0.2)
    expected = metrics.decision_metrics(balanced["member"], balanced["decision"])
    for name in ("accuracy", "advantage", "precision", "recall"):
        assert recheck_claims.target_value(balanced, name) == pytest.approx(expected[name])
    # IHA Table 5's member calls, the same on ties
    for fpr in (0.05, 0.3):
        assert np.array_equal(recheck_claims.calls_at(member, score, fpr),
                              metrics.decisions_at_fpr(member, score, fpr))


@pytest.mark.parametrize("n", [300, 1500])
def test_its_chance_at_an_audit_is_the_packages_null_mean(n):
    """What an attack without signal averages at an audit, the level a parity's reference is
    measured from: the recheck's closed form (TPR) and simulation (precision) against the
    package's null draws; AUC and a decision's metrics stay at their nominal level."""
    group = pd.DataFrame({"member": np.repeat([True, False], n), "score": 0.0})
    for metric in ("tpr@1%", "tpr@0.1%", "precision@1%", "precision@0.1%"):
        null = uncertainty.null_draws(metric, {"n_members": n, "n_nonmembers": n},
                                      np.random.default_rng(0))
        assert recheck_claims.chance_at(group, metric) == pytest.approx(null.mean(), rel=0.02)
    assert recheck_claims.chance_at(group, "tpr@0.1%") == pytest.approx(
        (np.floor(0.001 * n) + 1) / (n + 1))
    assert recheck_claims.chance_at(group, "auc") is None
    assert recheck_claims.chance_at(group, "advantage@cal90") is None


def test_its_verdicts_are_the_packages_on_hand_intervals():
    """Every kind it rechecks, on intervals either side of, across and on the claimed bound."""
    by_kind = {claim.kind: claim for paper in ("bmia", "iha", "qmia", "stolen-memories",
                                                 "subpop") for claim in claims.load_claims(paper)}
    checked = 0
    for kind in recheck_claims.KINDS:
        claim = by_kind[kind]
        scale = uncertainty.percent_scale(claim.metric, claim.paper)
        bound = (claim.value or 0.0) / scale
        for low, high in [(bound - 0.2, bound - 0.1), (bound - 0.1, bound + 0.1),
                          (bound + 0.1, bound + 0.2), (bound, bound), (-1e-4, 1e-4)]:
            ours = claims.decide(claim, uncertainty.Estimate(
                (low + high) / 2, np.linspace(low, high, 41), "bootstrap"))
            theirs = recheck_claims.decide(kind, low, high, bound,
                                           (claim.margin or 0.0) / scale)
            assert theirs == ours, (kind, low, high)
            checked += 1
    assert checked == 5 * len(recheck_claims.KINDS)


def test_a_table_that_differs_from_the_scores_fails_the_recheck(tmp_path):
    """A partition study of four targets, two attacks, one claim: the table the package would
    write passes; the same table with another verdict exits 1 and names the row."""
    rng, member, frames = np.random.default_rng(0), np.arange(400) % 2 == 0, {}
    folder = tmp_path / "run/results/studies/s/scores"
    folder.mkdir(parents=True)
    for attack, shift in (("lira", 1.0), ("loss", 0.3)):
        frames[attack] = pd.concat([pd.DataFrame({
            "target": t, "sample": np.arange(400), "member": member,
            "score": rng.normal(member * shift, 1.0)}) for t in range(4)])
        frames[attack].to_parquet(folder / f"{attack}.parquet")
    repo = tmp_path / "repo"
    (repo / "miarepro/artifacts/claims").mkdir(parents=True)
    (repo / "miarepro/artifacts/claims/iha.yaml").write_text(yaml.safe_dump([{
        "id": "X-C1", "artifact": "X-T1", "statement": "LiRA beats LOSS in AUC",
        "metric": "auc", "kind": "greater", "a": {"attack": "lira_online"},
        "b": {"attack": "loss"}, "datasets": ["d"]}]))
    (repo / "config.yaml").write_text(yaml.safe_dump({"artifacts": {}, "studies": {"s": {
        "split": {"scheme": "partition"}, "targets": 4,
        "attacks": {"lira": {"paper_attack": "lira_online"},
                    "loss": {"paper_attack": "loss"}}}}}))
    differences = [metrics.auc(g["member"], g["score"]) - metrics.auc(h["member"], h["score"])
                   for (_, g), (_, h) in zip(frames["lira"].groupby("target"),
                                             frames["loss"].groupby("target"), strict=True)]
    mean = float(np.mean(differences))
    half = uncertainty.student_half_width(float(np.std(differences, ddof=1)) / 2.0, 3)
    table = pd.DataFrame([{"claim": "X-C1", "paper": "iha", "study": "s", "verdict": "holds",
                           "replicates": 4, "quantity": mean, "quantity_low": mean - half,
                           "quantity_high": mean + half}])
    (tmp_path / "run/results/artifacts").mkdir(parents=True)

    def recheck(verdict: str) -> subprocess.CompletedProcess:
        table.assign(verdict=verdict).to_csv(tmp_path / "run/results/artifacts/claims.csv",
                                             index=False)
        return subprocess.run([sys.executable, str(BENCHMARKS / "recheck_claims.py"), "--run",
                               str(tmp_path / "run"), "--repo", str(repo), "--config",
                               "config.yaml"], capture_output=True, text=True, check=False)

    assert mean - half > 0  # LiRA's lead is resolved: the package would say "holds"
    passed = recheck("holds")
    assert passed.returncode == 0 and "rechecked from the score files: 1 of 1" in passed.stdout
    failed = recheck("inconclusive")
    assert failed.returncode == 1 and "| X-C1 | s |" in failed.stdout


def test_its_welch_interval_is_the_packages_across_studies():
    """Trends and rows pooled over studies trained apart: a difference and a mean of studies'
    replicate-level values, each with Welch-Satterthwaite's degrees of freedom."""
    rng = np.random.default_rng(1)
    parts = [rng.normal(0.6, 0.05, 5), rng.normal(0.5, 0.02, 3), rng.normal(0.55, 0.04, 10)]
    estimates = [uncertainty.Estimate(float(p.mean()), p, "replicates") for p in parts]
    for ours, theirs in (
            (recheck_claims.interval(parts[:2], [1.0, -1.0]),
             uncertainty.difference_across_studies(estimates[0], estimates[1])),
            (recheck_claims.interval(parts, [1 / 3] * 3),
             uncertainty.mean_across_studies(estimates))):
        assert ours == pytest.approx((theirs.value, *theirs.interval()), rel=1e-9)


@pytest.mark.parametrize(("family", "params"), [
    ("lira", {"mode": "offline", "variance": "per_example", "statistic": "hinge"}),
    ("lira", {"mode": "online", "variance": "global", "statistic": "loss"}),
    ("rmia", {"mode": "offline", "a": 0.3}), ("rmia", {"mode": "online", "a": 0.3}),
    ("attack_r", {}), ("watson", {}),
    ("sablayrolles", {}), ("yeom", {}), ("shadow", {}), ("shadow", {"classifier": "gbdt"})])
def test_its_scores_from_the_logits_are_the_packages(family, params):
    """benchmarks/recheck_reference.py's own LiRA, RMIA (offline and online), Attack-R, calibrated
    losses, Yeom et al.'s loss and Shokri et al.'s shadow-model attack (its classifiers on 4,000
    of each class's 16,000 or so shadow rows), on an overfit target and 32 reference models, at
    the package's float32 statistics: the same scores."""

    ctx = overfit_context()
    audit, population = ctx.audit, ctx.population

    def inputs(key: str, where: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        target = recheck_inputs.statistics(ctx.target_logits, ctx.labels, True)[key]
        refs = np.stack([recheck_inputs.statistics(r, ctx.labels, True)[key]
                         for r in ctx.reference_logits])
        return target[:, where], refs[:, :, where], ctx.reference_masks[:, where]

    theirs = get_attack(family).fn(ctx, **params)
    if family == "lira":
        ours = recheck_reference.lira(*inputs(params["statistic"], audit), params["mode"],
                                      params["variance"])
    elif family == "rmia":
        ratio = [recheck_reference.rmia_ratio(*inputs("loss", where), params["a"],
                                              params["mode"] == "online")
                 for where in (audit, population)]
        ours = recheck_reference.continuous_step(ratio[1], ratio[0])[1]
    elif family == "attack_r":
        ours = recheck_reference.attack_r(*inputs("loss", audit))
    elif family == "shadow":
        ours = recheck_reference.shadow(ctx.target_logits, ctx.reference_logits,
                                        ctx.reference_masks, ctx.labels, ctx.reference_pool, audit,
                                        [ctx.seed, ctx.target_index], params, True)
    elif family == "yeom":
        ours = recheck_reference.yeom(recheck_inputs.statistics(
            ctx.target_logits, ctx.labels, True)["loss"], ctx.target_mask, audit)
    else:
        ours = recheck_reference.calibrated(*inputs("loss", audit), family)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9)


@pytest.fixture(scope="module")
def iha_case():
    """The package's Hessian fit of a 6-4-3 MLP on 20 of 40 records, and the recheck's own
    eigendecomposition of the same weights."""
    from test_iha import _case, _with_fit

    ctx = _with_fit(_case(40, 20, [4], epochs=40))
    study = ctx.study
    card = {"architecture": {"arch": "mlp", "widths": [4]}, "recipe": study.recipe()}
    return ctx, recheck_iha.curvature(study.model.state_dict(), card, study.X, study.y,
                                      study.train, ctx.audit)


@pytest.mark.parametrize("params", [{}, {"eps": 0.5}, {"eps": 0.5, "terms": ["loss", "I1", "I2"]},
                                    {"attack": "sif", "eps": 0.5}])
def test_its_iha_by_hessian_products_is_its_exact_one(iha_case, params):
    """Where the Hessian is too large to form (IHA's CG instances on Purchase's MLPs), the
    recheck solves by Hessian-vector products on a block Krylov space: on the small MLP, the
    scores of its exact eigendecomposition on the records it is given, and, where the damped
    Hessian is positive definite (this one's lowest eigenvalue is -0.26; CG needs it), the
    package's CG-solved scores."""
    ctx, curvature = iha_case
    study, params = ctx.study, dict(params)
    attack = params.pop("attack", "iha")
    card = {"architecture": {"arch": "mlp", "widths": [4]}, "recipe": study.recipe()}
    records = ctx.audit[::3]
    solved = recheck_iha.products(study.model.state_dict(), card, study.X, study.y,
                                  study.train, records)
    entry = {"attack": attack, **params}
    ours = recheck_iha.iha(solved, ctx.target_mask[records], entry)
    exact = recheck_iha.iha(curvature, ctx.target_mask[ctx.audit], entry)[::3]
    np.testing.assert_allclose(ours, exact, rtol=1e-7, atol=1e-10 * np.abs(exact).max())
    if curvature.eigenvalues.min() + params.get("eps", 0.2) > 0:
        cg = dataclasses.replace(ctx, audit=records, fit={"gradient": ctx.fit["gradient"]})
        theirs = get_attack(attack).fn(cg, cg_tolerance=1e-10, **params)
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9 * np.abs(theirs).max())


@pytest.mark.parametrize("lowest", [0.01, -1.0])  # the damped matrix definite, or not
def test_its_krylov_solve_is_a_direct_one(lowest):
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.normal(size=(30, 30)))[0]
    values = np.r_[lowest, rng.uniform(0.01, 1, 26), 40.0, 60.0, 90.0]  # bulk and outliers
    matrix = basis @ np.diag(values) @ basis.T
    rows = rng.normal(size=(3, 30))
    solved = recheck_iha.krylov_solve(lambda v: v @ matrix, rows, 0.2)
    np.testing.assert_allclose(solved, np.linalg.solve(matrix + 0.2 * np.eye(30), rows.T).T,
                               rtol=1e-7)
    with pytest.raises(recheck_inputs.NotRechecked, match="no Krylov solution"):
        recheck_iha.krylov_solve(lambda v: v @ matrix, rows, 0.2, blocks=2)


@pytest.mark.parametrize("params", [
    {}, {"leave_one_out": False}, {"eps": 0.05}, {"conditioning": "low_rank", "eps": 0.1},
    {"terms": ["I1", "I2"]}, {"terms": ["loss", "I1"]}, {"attack": "sif"}, {"fraction": 0.5}])
def test_its_iha_from_the_weights_is_the_packages(iha_case, params):
    """benchmarks/recheck_iha.py's IHA and SIF: its own Hessian of the target's weights
    (torch.func) and Eq. 8, against the package's fit and scores."""

    ctx, curvature = iha_case
    params = dict(params)
    attack = params.pop("attack", "iha")
    theirs = get_attack(attack).fn(ctx, **params)
    known = (recheck_iha.known_records(ctx.target_mask, ctx.audit, params["fraction"],
                                       [ctx.seed, ctx.target_index])
             if "fraction" in params else None)
    ours = recheck_iha.iha(curvature, ctx.target_mask[ctx.audit], {"attack": attack, **params},
                           known)
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-9 * np.abs(theirs).max())


def test_its_qmia_reads_the_fit_of_the_instances_own_settings(tmp_path):
    """benchmarks/recheck_inputs.py picks the one QMIA fit whose card records the instance's
    regressor settings, and its (s - mu) / sigma is the package's QMIA score."""
    import json


    rng = np.random.default_rng(0)
    for name, backbone in (("qmia-a", {"arch": "lenet"}), ("qmia-b", {"arch": "mlp"})):
        (tmp_path / "fits" / name).mkdir(parents=True)
        (tmp_path / "fits" / name / "0.json").write_text(json.dumps(
            {"settings": {"attack": "qmia", "params": {"backbone": backbone}}}))
        np.savez(tmp_path / "fits" / name / "0.npz", mu=rng.normal(size=30),
                 sigma=rng.uniform(0.5, 2, 30), taus=np.linspace(0, 1, 5))
    entry = {"attack": "qmia", "backbone": {"arch": "mlp"}, "label": "QMIA"}
    fit, _ = recheck_inputs.fit_of(tmp_path, "qmia", recheck_reference.QMIA_FIT_KEYS, entry, 0)
    np.testing.assert_array_equal(fit["mu"], np.load(tmp_path / "fits/qmia-b/0.npz")["mu"])
    with pytest.raises(SystemExit, match="0 qmia fits"):
        recheck_inputs.fit_of(tmp_path, "qmia", recheck_reference.QMIA_FIT_KEYS,
                              {**entry, "trials": 3}, 0)
    ctx = overfit_context()
    audit = ctx.audit[ctx.audit < 30]
    ctx = dataclasses.replace(ctx, audit=audit, fit={**fit, "mu": np.resize(fit["mu"], 3000),
                                                     "sigma": np.resize(fit["sigma"], 3000)})
    hinge = recheck_inputs.statistics(ctx.target_logits, ctx.labels, True)["hinge"][0, audit]
    np.testing.assert_allclose((hinge - fit["mu"][audit]) / fit["sigma"][audit],
                               get_attack("qmia").fn(ctx), rtol=1e-12)


@pytest.fixture(scope="module")
def bmia_case():
    """A last layer (any head will do: the formulas are the test) with its training features,
    and an audit whose members a target will lift above the reference's hinges."""
    rng = np.random.default_rng(0)
    features = rng.normal(size=(300, 6))
    labels = rng.integers(0, 4, 300)
    weight, bias = rng.normal(size=(4, 6)), rng.normal(size=4) * 0.1
    audit = rng.normal(size=(2000, 6))
    audit_labels = rng.integers(0, 4, 2000)
    member = np.arange(2000) < 1000
    return features, labels, weight, bias, audit, audit_labels, member


@pytest.mark.parametrize("structure", ["kron", "diag", "full"])
def test_its_bmia_posterior_is_the_packages(bmia_case, structure):
    """benchmarks/recheck_drawn.py's own last-layer posterior: the same evidence-maximising
    prior precision as the package's fit and the same predictive covariance of the logits (its
    noise applied to the unit vectors gives a square root of it)."""

    from miarepro import lastlayer

    features, labels, weight, bias, audit, *_ = bmia_case
    package = lastlayer.fit(features, labels, weight, bias, structure, "marglik")
    delta, noise, _ = recheck_drawn.bmia_posterior(features, labels, weight, bias, structure, None)
    assert delta == pytest.approx(package.prior_precision, rel=1e-5)
    _, noise, _ = recheck_drawn.bmia_posterior(features, labels, weight, bias, structure,
                                               package.prior_precision)
    units = np.broadcast_to(np.eye(4), (len(audit), 4, 4))
    root = noise(audit)(slice(None), units)  # rows: the images of the unit vectors
    np.testing.assert_allclose(np.swapaxes(root, 1, 2) @ root, package.covariance(audit),
                               rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("structure", ["kron", "diag"])
def test_its_bmia_weight_draws_give_the_packages_predictive(bmia_case, structure):
    """The MC predictive's draws of the last layer, shared by every record: at any record's
    features they give the package's predictive covariance of the logits (40,000 draws, to
    their sampling error)."""

    from miarepro import lastlayer

    features, labels, weight, bias, audit, *_ = bmia_case
    package = lastlayer.fit(features, labels, weight, bias, structure, "marglik")
    *_, weights = recheck_drawn.bmia_posterior(features, labels, weight, bias, structure,
                                               package.prior_precision)
    dw, db = weights(np.random.default_rng(2), 40_000)
    deviation = np.einsum("scd,rd->rsc", dw, audit[:3]) + db[None]
    empirical = np.einsum("rsc,rse->rce", deviation, deviation) / len(dw)
    expected = package.covariance(audit[:3])
    scale = np.sqrt(np.einsum("rcc->rc", expected))
    np.testing.assert_allclose(empirical / scale[:, :, None] / scale[:, None, :],
                               expected / scale[:, :, None] / scale[:, None, :], atol=0.03)


def test_its_bmia_redraws_tell_the_packages_draws_from_a_wrong_posterior(bmia_case):
    """The package's BMIA scores (its own sampler and t statistic) lie within the recheck's
    redraws; scores from a posterior whose spread is 10% too wide, or from N = 90 draws for
    100, do not."""

    from miarepro import lastlayer, signals
    from miarepro.attacks.bmia import t_statistic

    features, labels, weight, bias, audit, audit_labels, member = bmia_case
    posterior = lastlayer.fit(features, labels, weight, bias, "kron", "marglik")
    target = signals.hinge(posterior.mean(audit), audit_labels) + 0.3 * member
    _, noise, _ = recheck_drawn.bmia_posterior(features, labels, weight, bias, "kron",
                                               posterior.prior_precision)

    def package_scores(n_samples, spread=1.0, seed=5):
        draws = posterior.sample_logits(audit, n_samples, np.random.default_rng(seed))
        draws = posterior.mean(audit)[:, None, :] + spread * (draws - posterior.mean(audit)[
            :, None, :])
        hinges = signals.hinge(np.swapaxes(draws, 0, 1), audit_labels).T
        return t_statistic(target[:, None] - hinges)

    redraws = recheck_drawn.bmia_redraws(target, posterior.mean(audit), noise(audit),
                                         audit_labels, 100, [1])
    assert recheck_drawn.consistent(member, package_scores(100), redraws) <= (
        recheck_drawn.WITHIN)
    assert recheck_drawn.consistent(member, package_scores(100, 1.1), redraws) > (
        recheck_drawn.WITHIN)
    assert recheck_drawn.consistent(member, package_scores(90), redraws) > (
        recheck_drawn.WITHIN)


def test_its_subpop_networks_are_the_packages():
    """The score recheck's own forward passes for Subpop: a victim MLP's latent ``h`` (the
    input of its last layer) and logits, with LeakyReLU, the black-box BiGAN's own encoder,
    and the BiGAN generator's records from latents (its standardisation, dense layers and
    sigmoid), as the package's modules give them."""
    import torch

    from miarepro import bigan, models
    from miarepro.attacks.subpop import victim_latent

    torch.manual_seed(0)
    victim = models.mlp((1, 6, 6), 5, [16, 8], activation="leaky_relu").double().eval()
    x = torch.randn(40, 1, 6, 6, dtype=torch.float64)
    state = {k: v.numpy() for k, v in victim.state_dict().items()}
    h, logits = recheck_networks.dense_forward(recheck_networks.layers_of(state), x.numpy(),
                                               "leaky_relu")
    with torch.no_grad():
        np.testing.assert_allclose(h, victim_latent(victim)(x).numpy(), rtol=1e-12)
        np.testing.assert_allclose(logits, victim(x).numpy(), rtol=1e-12)
    spec = {"shape": [1, 6, 6], "latent": 8, "networks": "mlp", "generator_widths": [12, 10],
            "discriminator_widths": [10], "sigmoid": True, "own_encoder": True}
    generator, _, encoder = (module.double().eval() if module is not None else None
                             for module in bigan.build(spec))
    generator.standardise.fit(torch.randn(50, 8, dtype=torch.float64) * 3 + 1)
    fit = {"spec": np.array(json.dumps(spec)),
           **{f"{name}.{k}": v.numpy() for name, module in (("generator", generator),
                                                            ("encoder", encoder))
              for k, v in module.state_dict().items()}}
    with torch.no_grad():
        np.testing.assert_allclose(recheck_networks.encoder(fit)(x.numpy()), encoder(x).numpy(),
                                   rtol=1e-12)
    z = torch.randn(30, 8, dtype=torch.float64)
    pixels = recheck_networks.dense_forward(
        recheck_networks.layers_of(fit, "generator.body."),
        (z.numpy() - fit["generator.standardise.mean"]) / fit["generator.standardise.scale"],
        "gan")[1]
    with torch.no_grad():
        np.testing.assert_allclose(1 / (1 + np.exp(-pixels)),
                                   generator(z).reshape(30, -1).numpy(), rtol=1e-10)


def test_its_convolutional_subpop_networks_are_the_packages():
    """The same for the convolutional study: classic LeNet's latent (its 84-unit layer) and
    logits, and the convolutional generator's records, cropped from the centre of its grid
    (16x16 here, for 12x12 images), as the package's modules give them."""
    import torch

    from miarepro import bigan, models
    from miarepro.attacks.subpop import victim_latent

    torch.manual_seed(1)
    victim = models.lenet((1, 12, 12), 5).double().eval()
    x = torch.rand(20, 1, 12, 12, dtype=torch.float64)
    forward = recheck_networks.victim({"architecture": {"arch": "lenet"}},
                                      {k: v.numpy() for k, v in victim.state_dict().items()})
    h, logits = forward(x.numpy())
    with torch.no_grad():
        np.testing.assert_allclose(h, victim_latent(victim)(x).numpy(), rtol=1e-12)
        np.testing.assert_allclose(logits, victim(x).numpy(), rtol=1e-12)
    spec = {"shape": [1, 12, 12], "latent": 84, "networks": "conv",
            "generator_widths": [8, 6, 4, 4], "discriminator_widths": [4, 4, 4, 4],
            "sigmoid": True, "own_encoder": False}
    generator = bigan.build(spec)[0].eval()
    generator.standardise.fit(torch.rand(50, 84) * 3)
    fit = {"spec": np.array(json.dumps(spec)),
           **{f"generator.{k}": v.numpy() for k, v in generator.state_dict().items()}}
    z = np.random.default_rng(0).random((30, 84)) * 3
    with torch.no_grad():
        np.testing.assert_allclose(recheck_networks.generator(fit)(z), generator(
            torch.as_tensor(z, dtype=torch.float32)).numpy(), rtol=1e-5, atol=1e-6)


def test_its_omniscient_attack_is_the_packages():
    """Theorem 1 as the score recheck writes it, from scipy's normal log-densities, equals the
    package's closed form; a class the training set lacks keeps its true mean (score 0)."""

    from miarepro.attacks.stolen_memories import omniscient_logits

    rng = np.random.default_rng(0)
    means, variances = rng.uniform(0, 1, (3, 5)), rng.uniform(0.5, 1.5, 5)
    labels = rng.integers(0, 2, 80)  # class 2 never drawn
    x = means[labels] + rng.normal(size=(80, 5)) * np.sqrt(variances)
    train, audit = np.arange(40), np.arange(20, 80)
    seen = np.array([x[train][labels[train] == c].mean(0) if (labels[train] == c).any()
                     else means[c] for c in range(3)])
    np.testing.assert_allclose(
        recheck_reference.omniscient(x, labels, train, audit,
                                     {"means": means.tolist(), "variances": variances.tolist()}),
        omniscient_logits(x[audit], labels[audit], means, variances, seen), atol=1e-12)
    unseen = np.where(np.arange(80) < 40, labels, 2)  # the records after training: class 2
    assert recheck_reference.omniscient(x, unseen, train, np.arange(40, 80), {
        "means": means.tolist(), "variances": variances.tolist()}) == pytest.approx(0.0)


def test_its_draw_check_holds_for_tied_scores_and_tells_a_shift():
    """MERLIN's scores are fractions of 30 noise draws, so a file ties with its redraws: the
    check breaks ties at random, keeping each record's rank uniform, and floors the spread of
    the median and range at one step. A file drawn like the redraws passes; one whose
    per-record chance is 0.03 higher does not."""

    rng = np.random.default_rng(3)
    chance = rng.uniform(0.2, 0.8, 3000)
    member = np.arange(3000) < 1500
    draw = lambda shift: rng.binomial(30, np.clip(chance + shift, 0, 1)) / 30  # noqa: E731
    redraws = np.array([draw(0.0) for _ in range(recheck_drawn.REDRAWS)])
    assert recheck_drawn.consistent(member, draw(0.0), redraws) <= recheck_drawn.WITHIN
    assert recheck_drawn.consistent(member, draw(0.03), redraws) > recheck_drawn.WITHIN


def _shared_draws(rng: np.random.Generator, file_noise: float, targets: int,
                  far_off: float = 0.0, redraws: int = recheck_drawn.REDRAWS,
                  offset: float = 0.0) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(file, redraws)`` on each of ``targets`` targets, draws that shift every record
    together, as proxies do, by a normal shift, five times wider with chance ``far_off`` (a
    proxy far off); per-record noise 0.3, the file's ``file_noise``, and its shift off by
    ``offset`` (a setting that biases every draw)."""
    drawn = []
    for _ in range(targets):
        base = rng.normal(size=500)

        def draw(noise: float, base: np.ndarray = base) -> np.ndarray:
            shift = rng.normal() * (5 if rng.random() < far_off else 1)
            return base + shift + noise * rng.normal(size=500)

        drawn.append((draw(file_noise) + offset, np.array([draw(0.3) for _ in range(redraws)])))
    return drawn


def _rank_check(member: np.ndarray, drawn: list[tuple[np.ndarray, np.ndarray]]) -> float:
    """The largest of :func:`recheck_drawn.uniform_ranks` over the summaries' ranks."""
    ranks = [recheck_drawn.summary_ranks(member, *pair, np.random.default_rng(t))
             for t, pair in enumerate(drawn)]
    return max(recheck_drawn.uniform_ranks(column, len(drawn[0][1]))
               for column in zip(*ranks, strict=True))


def test_its_draw_check_of_shared_draws_reads_each_draw_whole():
    """Stolen Memories' proxies serve every record at once: a draw shifts all records
    together, so the records' ranks among the redraws are not independent and their
    histogram misfires even on a file drawn like the redraws. Such draws are read whole,
    each summary ranked among the redraws' over targets: a file drawn like them passes, one
    whose per-record noise is twice the redraws' on each of 5 targets does not."""
    rng = np.random.default_rng(4)
    member = np.arange(500) < 250
    [(file, redraws)] = _shared_draws(rng, 0.3, 1)
    assert recheck_drawn.consistent(member, file, redraws) > recheck_drawn.WITHIN
    for noise, passes in ((0.3, True), (0.6, False)):
        assert (_rank_check(member, _shared_draws(rng, noise, 5)) <= recheck_drawn.WITHIN
                ) == passes


def test_its_rank_of_shared_draws_keeps_its_rate_where_a_draw_is_now_and_then_far_off():
    """Trained proxies now and then land far off (heavy-tailed draws): a file drawn like the
    redraws then lies beyond 5 standard deviations of a target's 20 redraws far more often
    than a t's once in 10,000 (23 in 1,000 here), while each summary's ranks over targets
    stay uniform: their tail probability falls below 0.1 in about a tenth of 300 studies,
    and beyond the check's bound in none."""
    rng = np.random.default_rng(8)
    member = np.arange(500) < 250
    z = np.array([[recheck_drawn.uniform_ranks(column, recheck_drawn.REDRAWS)
                   for column in zip(*(recheck_drawn.summary_ranks(member, *pair, rng) for pair
                                       in _shared_draws(rng, 0.3, 10, 0.05)), strict=True)]
                  for _ in range(300)])
    rate = np.mean(z > stats.t.isf(0.05, recheck_drawn.REDRAWS - 1), axis=0)
    assert np.all((0.05 < rate) & (rate < 0.15)), rate
    assert z.max() <= recheck_drawn.WITHIN
    beyond = 0  # the same draws' distances on a t, target by target: what the ranks replace
    for file, redraws in _shared_draws(rng, 0.3, 1000, 0.05):
        draws = np.vstack([file[None], redraws])
        distance = np.array([np.abs(d - np.delete(draws, j, 0).mean(0)).mean()
                             for j, d in enumerate(draws)])
        beyond += (distance[0] - distance[1:].mean()) / distance[1:].std(ddof=1) > (
            recheck_drawn.WITHIN)
    assert beyond >= 10  # 23 of 1,000, where a t puts 1 in 10,000


def test_its_rank_test_of_shared_draws_can_fail_over_three_targets():
    """Over 3 targets, 20 redraws put even a file at the same end on every target at 4.6,
    within the bound: the rank test could not fail. :func:`shared_redraws` draws enough
    (60) that it reads 6.0: a file whose every draw is off by 6 times the draws' spread
    passes 20 redraws and fails 60, one drawn like them passes. Below 3 targets the check
    refuses rather than pass."""
    assert recheck_drawn.uniform_ranks([0] * 3, recheck_drawn.REDRAWS) < recheck_drawn.WITHIN
    redraws = recheck_drawn.shared_redraws(3)
    assert recheck_drawn.uniform_ranks([0] * 3, redraws) >= recheck_drawn.WITHIN + 1
    assert recheck_drawn.uniform_ranks([0] * 3, redraws - 1) < recheck_drawn.WITHIN + 1
    assert recheck_drawn.shared_redraws(10) == recheck_drawn.REDRAWS
    rng, member = np.random.default_rng(5), np.arange(500) < 250
    for count, offset, passes in ((recheck_drawn.REDRAWS, 6, True), (redraws, 6, False),
                                  (redraws, 0, True)):
        drawn = _shared_draws(rng, 0.3, 3, redraws=count, offset=offset)
        assert (_rank_check(member, drawn) <= recheck_drawn.WITHIN) == passes
    with pytest.raises(recheck_inputs.NotRechecked, match="2 target"):
        recheck_drawn.shared_redraws(2)


def test_its_rank_test_is_the_exact_law_of_a_sum_of_uniform_ranks():
    """Two targets, ranks uniform on 0..2: their sum is 0 with probability 1/9, so ranks
    (0, 0) lie at a two-sided tail of 2/9; (1, 1) sit at the centre."""
    t19 = stats.t(recheck_drawn.REDRAWS - 1)
    assert recheck_drawn.uniform_ranks([0, 0], 2) == pytest.approx(t19.isf(1 / 9))
    assert recheck_drawn.uniform_ranks([2, 2], 2) == pytest.approx(t19.isf(1 / 9))
    assert recheck_drawn.uniform_ranks([1, 1], 2) == pytest.approx(0.0, abs=1e-12)
    assert recheck_drawn.uniform_ranks([0] * 5, 20) > recheck_drawn.WITHIN


def test_its_bayes_wb_proxies_follow_the_recipe_and_its_test_is_the_packages():
    """The recheck's bayes-wb at a linear top layer: one epoch of full-batch SGD from the
    heads' initialisation is one step of each head's own mean cross-entropy gradient (two
    heads on different rows, trained together, do not mix). Algorithm 4's test through its
    own local linear models (:func:`recheck_drawn.path_logit`, gradients carried back by
    hand) is the package's through torch's, at the same midpoint steps: for a linear top,
    and for ReLU networks of one and two hidden layers below it, which a wrong mask, layer
    order or step would move."""
    import torch

    from miarepro.attacks.stolen_memories import _bayes_logit, _pairs

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(40, 6)), rng.integers(0, 3, 40)
    subsets = np.stack([np.arange(0, 20), np.arange(20, 40)])
    recipe = {"lr": 0.5, "momentum": 0.0, "epochs": 1, "batch_size": 20}
    [(w0, b0)] = recheck_drawn.train_proxies(x, y, subsets, {**recipe, "epochs": 0}, [(3, 6)], 7)
    [(w1, b1)] = recheck_drawn.train_proxies(x, y, subsets, recipe, [(3, 6)], 7)
    for k, rows in enumerate(subsets):
        logits = x[rows] @ w0[k].T + b0[k]
        error = (np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
                 - np.eye(3)[y[rows]]) / len(rows)
        np.testing.assert_allclose(w1[k], w0[k] - 0.5 * error.T @ x[rows], atol=1e-6)
        np.testing.assert_allclose(b1[k], b0[k] - 0.5 * error.sum(0), atol=1e-6)

    z, labels = torch.as_tensor(np.abs(x)), torch.as_tensor(y)  # features below a ReLU
    relu = torch.nn.ReLU
    for build, steps in ((lambda: torch.nn.Linear(6, 3), 8),
                         (lambda: torch.nn.Sequential(torch.nn.Linear(6, 5), relu(),
                                                      torch.nn.Linear(5, 3)), 4),
                         (lambda: torch.nn.Sequential(torch.nn.Linear(6, 5), relu(),
                                                      torch.nn.Linear(5, 4), relu(),
                                                      torch.nn.Linear(4, 3)), 3)):
        heads = [build().double() for _ in range(3)]
        package = _bayes_logit(_pairs(heads[0], heads[1:], z, labels, steps)).detach().numpy()
        linears = [[m for m in head.modules() if isinstance(m, torch.nn.Linear)]
                   for head in heads]
        stacked = [tuple(np.stack([getattr(layers[j], key).detach().numpy()
                                   for layers in linears]) for key in ("weight", "bias"))
                   for j in range(len(linears[0]))]
        own = recheck_drawn.path_logit(stacked, np.abs(x), y, steps)
        np.testing.assert_allclose(package, own[0] - own[1:].mean(0), rtol=1e-9, atol=1e-9)
        # the local linear models themselves, which general-wb's displacements read
        chi, chi_p, _, bias, bias_p = (p.detach().numpy() for p in _pairs(
            heads[0], heads[1:], z, labels, steps))
        own_chi, own_bias = recheck_drawn.path_influence(stacked, np.abs(x), y, steps)
        for theirs, ours in ((chi, own_chi[0]), (chi_p, own_chi[1:].mean(0)),
                             (bias, own_bias[0]), (bias_p, own_bias[1:].mean(0))):
            np.testing.assert_allclose(theirs, ours, rtol=1e-9, atol=1e-9)


def _lenet_head(channels: int = 2) -> object:
    import torch

    return torch.nn.Sequential(torch.nn.Conv2d(channels, 3, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(12, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))


def _stacked_layers(heads: list) -> list[tuple[np.ndarray, np.ndarray]]:
    import torch

    layers = [[m for m in head.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))]
              for head in heads]
    return [tuple(np.stack([getattr(net[j], key).detach().numpy() for net in layers])
                  for key in ("weight", "bias")) for j in range(len(layers[0]))]


def test_its_bayes_wb_at_a_convolution_is_the_packages():
    """bayes-wb and general-wb at a LeNet's convolutional layer: the recheck's stacked
    convolutions (one grouped convolution, a group a network) and its local linear models by
    autograd at the midpoints give the package's test and influence pairs, and a network of
    the stack the same as alone."""
    import torch

    from miarepro.attacks.stolen_memories import _bayes_logit, _pairs

    torch.manual_seed(3)
    heads = [_lenet_head().double() for _ in range(3)]
    z = np.abs(np.random.default_rng(3).normal(size=(30, 2, 4, 4)))
    y = np.random.default_rng(4).integers(0, 3, 30)
    pairs = [p.detach().numpy() for p in _pairs(heads[0], heads[1:], torch.as_tensor(z),
                                                torch.as_tensor(y), 4)]
    own = recheck_drawn.conv_path_logit(_stacked_layers(heads), z, y, 4, chunk=7)
    np.testing.assert_allclose(_bayes_logit(pairs), own[0] - own[1:].mean(0), rtol=1e-9,
                               atol=1e-9)
    chi, at_zero = recheck_drawn.conv_path_influence(_stacked_layers(heads), z, y, 4)
    for theirs, ours in zip(pairs[:2] + pairs[3:], (chi[0], chi[1:].mean(0), at_zero[0],
                                                    at_zero[1:].mean(0)), strict=True):
        np.testing.assert_allclose(theirs, ours.reshape(theirs.shape), rtol=1e-9, atol=1e-9)
    one = recheck_drawn.conv_path_logit(_stacked_layers(heads[1:2]), z, y, 4)
    np.testing.assert_allclose(one[0], own[1], rtol=1e-12)  # alone as in the stack


def test_its_convolutional_proxies_train_each_on_its_own_rows():
    """One epoch of full-batch SGD of two stacked LeNet heads on different rows is one step of
    each head's own mean cross-entropy gradient, as torch's autograd gives it on the head
    alone."""
    import torch

    rng = np.random.default_rng(5)
    x, y = rng.normal(size=(40, 2, 4, 4)), rng.integers(0, 3, 40)
    subsets = np.stack([np.arange(0, 20), np.arange(20, 40)])
    recipe = {"lr": 0.5, "momentum": 0.0, "epochs": 1, "batch_size": 20}
    shapes = [(3, 2, 3, 3), (4, 12), (3, 4)]
    before = recheck_drawn.train_proxies(x, y, subsets, {**recipe, "epochs": 0}, shapes, 7)
    after = recheck_drawn.train_proxies(x, y, subsets, recipe, shapes, 7)
    for k, rows in enumerate(subsets):
        head = _lenet_head().double()
        layers = [m for m in head.modules() if isinstance(m, (torch.nn.Linear, torch.nn.Conv2d))]
        with torch.no_grad():
            for layer, (weight, bias) in zip(layers, before, strict=True):
                layer.weight.copy_(torch.as_tensor(weight[k]))
                layer.bias.copy_(torch.as_tensor(bias[k]))
        torch.nn.functional.cross_entropy(head(torch.as_tensor(x[rows])),
                                          torch.as_tensor(y[rows])).backward()
        for layer, (weight, bias), (w0, b0) in zip(layers, after, before, strict=True):
            np.testing.assert_allclose(weight[k], w0[k] - 0.5 * layer.weight.grad.numpy(),
                                       atol=1e-6)
            np.testing.assert_allclose(bias[k], b0[k] - 0.5 * layer.bias.grad.numpy(), atol=1e-6)


def test_its_proxies_train_with_the_targets_dropout_where_it_has_one():
    """Dropout as the target's MLP has it, after each hidden ReLU and on the features of a
    cut just above one (the package's ``split_at``): without it a redraw is the same as
    before, bit for bit; on a linear proxy it acts only on the input, there with the inverse
    scaling that keeps each input's mean: at tiny inputs, where the softmax is flat, one step's
    update over 100 draws averages to the update without dropout."""
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(40, 6)) * 1e-3, rng.integers(0, 3, 40)
    subsets = np.arange(40)[None]
    step = {"lr": 100.0, "momentum": 0.0, "epochs": 1, "batch_size": 40}
    plain = recheck_drawn.train_proxies(x, y, subsets, step, [(3, 6)], 7)
    for shapes, on_input in (([(3, 6)], False), ([(5, 6), (3, 5)], False), ([(3, 6)], True)):
        same = [np.array_equal(a, b) for layer, other in zip(
            recheck_drawn.train_proxies(x, y, subsets, step, shapes, 7),
            recheck_drawn.train_proxies(x, y, subsets, step, shapes, 7, 0.5, on_input),
            strict=True) for a, b in zip(layer, other, strict=True)]
        assert all(same) == (len(shapes) == 1 and not on_input)
    # each seed's step with dropout less its step without (the same initialisation)
    linear = [(3, 6)]
    gaps = np.array([recheck_drawn.train_proxies(x, y, subsets, step, linear, seed, 0.5, True)[0][0]
                     - recheck_drawn.train_proxies(x, y, subsets, step, linear, seed)[0][0]
                     for seed in range(100)])
    init = recheck_drawn.train_proxies(x, y, subsets, {**step, "epochs": 0}, [(3, 6)], 7)[0][0]
    assert gaps.std(0).min() > 0.1 * np.abs(plain[0][0] - init).mean()
    np.testing.assert_allclose(gaps.mean(0), 0.0, atol=4 * gaps.std(0).max() / np.sqrt(100))


def test_its_dp_sgd_clips_each_records_gradient_and_solves_the_packages_noise(monkeypatch):
    """The recheck's DP-SGD step on two stacked ReLU networks, every record taken (a batch as
    large as the rows) and the noise set to 0: each record's gradient, clipped over all layers
    to C, summed and divided by the rows, as torch.func's per-record gradients give it by
    hand; its noise multiplier, solved by opacus's accountant, is the package's plan's."""
    import opacus.accountants.utils
    import torch
    from torch.func import functional_call, grad, vmap

    from miarepro import privacy

    dp, recipe = {"epsilon": 4.0, "max_grad_norm": 3.0}, {"batch_size": 40, "epochs": 3}
    sigma = recheck_drawn.private_gradients({**recipe, "dp": dp, "batch_size": 8}, 40, []).sigma
    assert sigma == pytest.approx(privacy.plan(dp, 40, 8, 3).noise_multiplier, rel=0.02)
    monkeypatch.setattr(opacus.accountants.utils, "get_noise_multiplier", lambda **_: 0.0)
    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU(), torch.nn.Linear(4, 3))
            for _ in range(2)]
    layers = [torch.stack([getattr(net[j], key) for net in nets]).detach().requires_grad_()
              for j in (0, 2) for key in ("weight", "bias")]
    x, y = torch.randn(2, 40, 5) * 3, torch.randint(0, 3, (2, 40))
    recheck_drawn.private_gradients({**recipe, "dp": dp}, 40, layers)(x, y)
    for k, net in enumerate(nets):
        params = dict(net.named_parameters())

        def loss(p, xi, yi, net=net):
            return torch.nn.functional.cross_entropy(functional_call(net, p, (xi[None],)), yi[None])

        per_record = vmap(grad(loss), in_dims=(None, 0, 0))(params, x[k], y[k])
        norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in per_record.values()))
        scale = (3.0 / (norms + 1e-6)).clamp(max=1.0)
        assert (scale < 1).any() and (scale == 1).any()  # some records clipped, some not
        for param, name in zip(layers, ("0.weight", "0.bias", "2.weight", "2.bias"),
                               strict=True):
            expected = torch.einsum("b,b...->...", scale, per_record[name]) / 40
            torch.testing.assert_close(param.grad[k], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("architecture", "dp", "rechecked"), [
    ({"arch": "mlp", "widths": [4]}, False, True),
    ({"arch": "mlp", "widths": [4], "dropout": 0.5}, False, True),
    ({"arch": "mlp", "widths": [4]}, True, True),
    ({"arch": "mlp", "widths": [4], "dropout": 0.5}, True, False),
    ({"arch": "mlp", "widths": [4], "activation": "tanh"}, False, False)])
def test_its_white_box_target_is_rebuilt_where_its_proxies_can_copy_the_recipe(
        tmp_path, architecture, dp, rechecked):
    """An MLP target, with dropout or DP-SGD (which the proxies copy) but not both, is rebuilt
    from its weights and checked against the logits it saved; another is not rechecked."""
    import torch

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = np.random.default_rng(0).normal(size=(6, 3))
    models = tmp_path / "models" / "target"
    models.mkdir(parents=True)
    torch.save(net.state_dict(), models / "0.pt")
    (models / "0.json").write_text(json.dumps({"architecture": architecture}))
    with torch.no_grad():
        np.save(models / "0.npy", net(torch.as_tensor(x, dtype=torch.float32)).numpy()[None])
    study = {"training": {"dp": {"epsilon": 1.0}} if dp else {}}
    if not rechecked:
        with pytest.raises(recheck_inputs.NotRechecked, match="ReLU MLP"):
            recheck_drawn.dense_target(tmp_path, {"X": x}, study, 0, "general-wb")
        return
    layers, convolutions, z = recheck_drawn.dense_target(tmp_path, {"X": x}, study, 0, "x")
    assert convolutions == 0 and len(layers) == 2 and np.array_equal(z, x)


@pytest.mark.parametrize(("n_d", "n_m"), [(0, 0), (16, 0), (0, 16), (4, 4)])
def test_its_general_wb_reading_is_the_packages(n_d, n_m):
    """general-wb's displacements and meta model, saved as the fit saves every point of its
    sweep, applied to two layers' influence pairs: the package's prediction (float32, as
    trained), and not with the layers swapped or another point's model."""
    import torch

    from miarepro.attacks.stolen_memories import _general_wb_model, _predict

    rng = np.random.default_rng(n_d + n_m)
    pairs = [tuple(rng.normal(size=shape) for shape in ((30, f), (30, f), (30, f), (30,), (30,)))
             for f in (6, 6)]
    fit = {}
    for point in (0, 1):
        torch.manual_seed(point)
        model = _general_wb_model(2, n_d, n_m)
        fit.update({f"general_wb_model.{point}.{k}": v.numpy()
                    for k, v in model.state_dict().items()})
    package = _predict(model, [tuple(torch.as_tensor(a) for a in layer) for layer in pairs])
    ours = recheck_drawn.general_wb_logit(fit, 1, pairs)
    np.testing.assert_allclose(ours, package, rtol=1e-5, atol=1e-5)
    for wrong in (recheck_drawn.general_wb_logit(fit, 1, pairs[::-1]),
                  recheck_drawn.general_wb_logit(fit, 0, pairs)):
        assert not np.allclose(wrong, package, rtol=1e-3, atol=1e-3)


def test_its_bayes_wb_meta_model_is_the_packages_on_the_layers_scores(tmp_path):
    """bayes-wb's meta model, as the fit saves it, applied to each layer's scores: the
    package's prediction (float32, as trained), not with the layers in another order."""
    import torch

    from miarepro.attacks.stolen_memories import _META_HIDDEN, _general_wb_model, _predict

    torch.manual_seed(0)
    meta = _general_wb_model(3, None, _META_HIDDEN)
    layers = np.random.default_rng(0).normal(size=(50, 3)) * 4
    package = _predict(meta, [torch.as_tensor(layers)])
    fits = tmp_path / "fits" / "stolen_memories-x"
    fits.mkdir(parents=True)
    np.savez(fits / "0.npz", **{f"meta_model.{k}": v.numpy()
                                for k, v in meta.state_dict().items()})
    entry = {"attack": "bayes_wb", "layers": "all", "meta": True}
    (fits / "0.json").write_text(json.dumps({"settings": {"params": {"layers": "all"}},
                                             "info": {"layers": [0, 3, 5]}}))
    ours = recheck_drawn.bayes_wb_meta(tmp_path, entry, 0, layers)
    np.testing.assert_allclose(ours, package, rtol=1e-6, atol=1e-6)
    assert not np.allclose(recheck_drawn.bayes_wb_meta(tmp_path, entry, 0, layers[:, ::-1]),
                           package, rtol=1e-3)
    with pytest.raises(recheck_inputs.NotRechecked, match="layer instances"):
        recheck_drawn.bayes_wb_meta(tmp_path, entry, 0, layers[:, :2])


def test_the_meta_model_reads_the_layer_instances_that_share_its_fit(tmp_path):
    shared = {"attack": "bayes_wb", "layers": "all", "proxies": 2}
    attacks = {"l1": {**shared, "layer": 0}, "l2": {**shared, "layer": 1},
               "other-fit": {**shared, "layer": 0, "proxies": 5},
               "meta": {**shared, "meta": True, "layer": -1}}
    for name, score in (("l1", 1.0), ("l2", 2.0), ("other-fit", 3.0)):
        pd.DataFrame({"sample": [4, 7, 4, 7], "target": [0, 0, 1, 1],
                      "score": [score, -score, 10 * score, -10 * score]}).to_parquet(
            tmp_path / f"{name}.parquet")
    np.testing.assert_array_equal(
        recheck_scores.layer_scores(tmp_path, attacks, attacks["meta"], 1, np.array([4, 7])),
        [[10.0, 20.0], [-10.0, -20.0]])
    del attacks["l1"]
    with pytest.raises(recheck_inputs.NotRechecked, match="each layer"):
        recheck_scores.layer_scores(tmp_path, attacks, attacks["meta"], 1, np.array([4, 7]))


@pytest.mark.parametrize("spec", [
    {"scheme": "balanced", "seed": 3, "population_fraction": 0.2},
    {"scheme": "partition", "seed": 4, "fractions": {"target_train": 0.25, "target_test": 0.25,
                                                      "reference_pool": 0.5}}])
def test_its_leave_one_out_models_are_the_packages(spec):
    """The recheck's leave-one-out records (target 0's members and non-members alternating)
    and each leave-one-out model's training set, rebuilt from the split alone, are the
    package's."""

    from miarepro import splits

    split = splits.make_split(600, spec)
    np.testing.assert_array_equal(recheck_inputs.loo_records(split, 12),
                                  splits.loo_records(split, 12))
    for index in (0, 5, 11, 2 * splits.STRIDE + 7):
        np.testing.assert_array_equal(recheck_inputs.trained_on(split, "loo", index),
                                      splits.training_indices(split, "loo", index))


@pytest.mark.parametrize(("family", "params"), [("l_attack", {}),
                                                ("lira_l", {"variance": "global"}),
                                                ("lira_l", {"variance": "per_example"})])
def test_its_leave_one_out_attacks_are_the_packages(family, params):
    """The L-attack and LiRA-L from each audited record's own leave-one-out models (the
    recheck's Attack-R and offline LiRA with every model OUT), on an overfit target."""

    ctx = loo_context()
    target = recheck_inputs.statistics(ctx.target_logits, ctx.labels, True)["loss"][:, ctx.audit]
    models = ctx.loo_logits.shape[1]  # (records, models, queries, classes)
    loo = np.stack([recheck_inputs.statistics(np.swapaxes(ctx.loo_logits[r], 0, 1),
                                              np.repeat(ctx.labels[record], models), True)["loss"]
                    for r, record in enumerate(ctx.audit)], axis=-1).transpose(1, 0, 2)
    inside = np.zeros((loo.shape[0], loo.shape[-1]), dtype=bool)
    ours = (recheck_reference.attack_r(target, loo, inside) if family == "l_attack" else
            recheck_reference.lira(target, loo, inside, "offline", params["variance"]))
    np.testing.assert_allclose(ours, get_attack(family).fn(ctx, **params), rtol=1e-6, atol=1e-9)


def test_its_quantile_head_score_is_the_packages():
    """QMIA with a head of quantiles: the level the hinge reaches among its record's sorted
    quantiles, interpolated, with logarithmic tails below the first and above the last, and
    tied quantiles, as the package scores it."""

    from miarepro import quantile

    rng = np.random.default_rng(6)
    quantiles = np.sort(rng.normal(size=(500, 9)), axis=1)
    quantiles[:50, 3] = quantiles[:50, 4]  # ties between levels
    score = rng.normal(scale=2.0, size=500)
    score[50:60] = quantiles[50:60, 5]  # exactly on a level
    np.testing.assert_allclose(recheck_reference.exceedance(score, quantiles),
                               quantile.exceedance_score(score, quantiles), rtol=1e-12)


def test_all_lists_every_score_file_the_config_names(tmp_path):
    """``--all``: every score file of a run whose study (or replicate of one) and attack the
    config names, and nothing else; ``--exclude`` leaves pairs out, and stops on one that is
    not there (a typo would otherwise run the hour it meant to skip)."""

    for path in ("s/scores/a.parquet", "s/scores/stale.parquet", "s-r1/scores/a.parquet",
                 "s-r1/scores/b.parquet", "other/scores/a.parquet"):
        (tmp_path / "results" / "studies" / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / "studies" / path).touch()
    config = {"studies": {"s": {"attacks": {"a": {}, "b": {}}}}}
    assert recheck_scores.every_pair(tmp_path, config) == ["s:a", "s-r1:a", "s-r1:b"]
    assert recheck_scores.every_pair(tmp_path, config, ["s-r1:b"]) == ["s:a", "s-r1:a"]
    with pytest.raises(SystemExit, match="s:b"):
        recheck_scores.every_pair(tmp_path, config, ["s:b"])
