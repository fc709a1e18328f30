"""The claims files and the claim evaluator."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from miarepro import uncertainty
from miarepro.artifacts import catalog
from miarepro.artifacts import claims as cl
from miarepro.uncertainty import Estimate

ROOT = Path(__file__).resolve().parent.parent
PAPERS = ("bmia", "iha", "qmia", "stolen-memories", "subpop")


@pytest.mark.parametrize("paper", PAPERS)
def test_every_claim_holds_on_the_papers_own_numbers(paper):
    """Claims about a table hold on its printed numbers (for every target model of tables with
    a row per model); figure claims have none printed."""
    claims = cl.load_claims(paper)
    assert claims
    for claim in claims:
        if claim.kind in cl.TRENDS:  # figure curves: no number per point of the axis printed
            assert catalog.load_catalog()[claim.artifact]["kind"] == "figure", claim.id
            continue
        table = catalog.paper_values(claim.artifact)
        for dataset in claim.datasets:
            models = sorted(set(table.loc[table["dataset"] == dataset, "model"])) or [""]
            for model in models:
                values = [cl.claim_paper_value(claim, dataset, spec, model or None)
                          for spec in [claim.a] + ([claim.b] if claim.b else [])]
                where = (claim.id, dataset, model)
                if table.empty:
                    assert values == [None] * len(values), where
                    continue
                if None in values:  # a text passage prints a side at most (QMIA-X1: QMIA's
                    # GPU minutes with training, none for LiRA), and a pair that stands in for
                    # the paper's (IHA-C28: LiRA with LOSS for LiRA with LiRA-L) is not printed:
                    # no printed comparison to check (the statement quotes the paper's)
                    assert (catalog.load_catalog()[claim.artifact]["kind"] == "text"
                            or "versus" in claim.a), where
                    continue
                losses = [cl.claim_paper_value(replace(claim, metric=claim.predictor), dataset,
                                               spec, model or None)
                          for spec in (claim.a, claim.b)] if claim.kind == "predicted" else []
                assert claim.holds_on(values[0], values[1] if claim.b else None, *losses), where


def estimate(center: float, spread: float, resolvable: bool = True) -> Estimate:
    """Bootstrap-style draws uniformly spread over center +- spread (a negative spread: the
    same draws in the opposite order, moving against another estimate's)."""
    return Estimate(center, center + np.linspace(-spread, spread, 1001), "bootstrap", resolvable)


def claim(kind: str, value=None, metric: str = "tpr@1%", margin=None) -> cl.Claim:
    b = ({"attack": "attack_p"} if kind in ("greater", "close", "not_below", "ratio_at_least")
         else None)
    return cl.Claim("X-C1", "bmia", "BMIA-T1", "a claim", metric, kind,
                    {"attack": "lira_offline"}, b, value, ("purchase100",), margin=margin)


@pytest.mark.parametrize(("a", "b", "expected"), [
    (estimate(0.05, 0.01), estimate(0.02, 0.01), "holds"),
    (estimate(0.02, 0.01), estimate(0.05, 0.01), "fails"),
    (estimate(0.05, 0.04), estimate(0.04, 0.01), "inconclusive"),
    (estimate(0.05, 0.01, resolvable=False), estimate(0.02, 0.01), "not resolvable"),
])
def test_ordering_verdicts(a, b, expected):
    outcome, difference = cl.verdict(claim("greater"), a, b)
    assert outcome == expected
    assert difference.value == pytest.approx(a.value - b.value)


@pytest.mark.parametrize(("a", "b", "kind", "expected"), [
    # both TPRs@1% contain the chance level 1%, and their paired difference contains 0:
    # neither order nor parity can be tested
    (estimate(0.012, 0.004), estimate(0.010, -0.004), "greater", "no signal"),
    (estimate(0.012, 0.004), estimate(0.010, -0.004), "close", "no signal"),
    # one attack above chance: the claim is testable (here the difference straddles 0)
    (estimate(0.030, 0.015), Estimate(0.02, np.linspace(0.035, 0.005, 1001), "bootstrap"),
     "greater", "inconclusive"),
    # both at chance, but paired replicates tell them apart (SM-C12 on the digits: the
    # difference 10.4 [0.7, 20.2] while each side's t(2) interval contains 50%): decided
    (Estimate(0.60, 0.60 + np.linspace(-0.15, 0.15, 1001), "bootstrap"),
     Estimate(0.50, 0.50 + np.linspace(-0.14, 0.14, 1001), "bootstrap"), "greater", "holds"),
    (Estimate(0.50, 0.50 + np.linspace(-0.14, 0.14, 1001), "bootstrap"),
     Estimate(0.60, 0.60 + np.linspace(-0.15, 0.15, 1001), "bootstrap"), "greater", "fails"),
])
def test_no_signal_when_every_compared_attack_is_at_chance(a, b, kind, expected):
    assert cl.verdict(claim(kind, 1.0 if kind == "close" else None), a, b)[0] == expected


@pytest.mark.parametrize(("kind", "a", "b", "without", "expected"), [
    # BMIA-C20 on the MNIST stand-in: b at 2.1% TPR@1% is 1.1 points from chance, within the
    # 1-point tolerance plus the interval's half-width (0.76): an attack at chance, as precise,
    # would not fail it either, so its "holds" says nothing
    ("not_below", estimate(0.020, 0.004), estimate(0.021, -0.004), "holds", "no signal"),
    ("close", estimate(0.020, 0.004), estimate(0.021, -0.004), "holds", "no signal"),
    ("not_below", estimate(0.018, 0.008), estimate(0.021, -0.008), "inconclusive", "no signal"),
    # b 4 points from chance: a side at chance would fail it, so the verdict stands
    ("not_below", estimate(0.049, 0.004), estimate(0.050, -0.004), "holds", "holds"),
    ("close", estimate(0.049, 0.004), estimate(0.050, -0.004), "holds", "holds"),
    # close reads the farther side: a 2 points from chance makes it testable, though b alone
    # (1.2 points) would not
    ("close", estimate(0.030, 0.004), estimate(0.022, -0.004), "inconclusive", "inconclusive"),
    # not_below reads b alone: a far above b near chance passes, but so would a at chance
    ("not_below", estimate(0.050, 0.004), estimate(0.020, -0.004), "holds", "no signal"),
    # and a below b far from chance fails, whatever the rule
    ("not_below", estimate(0.020, 0.004), estimate(0.050, -0.004), "fails", "fails"),
])
def test_a_parity_that_a_side_at_chance_would_pass_too_is_no_signal(kind, a, b, without,
                                                                    expected, monkeypatch):
    """A parity claim is testable only if it could fail: were one side at chance, measured as
    precisely, the reference side's distance from chance must exceed the tolerance plus the
    half-width of the difference's interval."""
    parity = claim(kind, 1.0)
    assert cl.verdict(parity, a, b)[0] == expected
    monkeypatch.setattr(cl, "vacuous_parity", lambda *_: "")
    assert cl.verdict(parity, a, b)[0] == without


def test_a_parity_measures_its_reference_from_what_chance_averages_at_its_audit():
    """TPR@0.1% with 300 non-members: the conservative threshold is the highest of them, which
    an attack without signal's members pass a share Beta(1, 300) of the time, 1/301 = 0.33% on
    average, not the nominal 0.1%. b at 0.45% is then 0.11 points from what chance gives,
    within the 0.1-point tolerance plus the half-width (0.095): no signal. From the nominal
    level (0.35 points) it would have read as testable."""
    parity = claim("not_below", 0.1, metric="tpr@0.1%")
    rng = np.random.default_rng(0)
    null = uncertainty.null_draws("tpr@0.1%", {"n_members": 300, "n_nonmembers": 300}, rng)
    assert null.mean() == pytest.approx(1 / 301, rel=0.05)
    a = Estimate(0.0045, 0.0045 + np.linspace(-0.0005, 0.0005, 1001), "bootstrap")
    b = replace(a, draws=a.draws[::-1], chance=lambda: null)
    outcome, quantity = cl.verdict(parity, a, b)
    assert outcome == "no signal"
    assert "the reference attack is 0.11" in cl.vacuous_parity(parity, a, b, quantity)
    nominal = replace(b, chance=None)
    assert cl.verdict(parity, a, nominal)[0] == "holds"


@pytest.mark.parametrize(("paper", "tolerance"), [("subpop", 1.5), ("iha", 0.015)])
def test_a_parity_that_could_not_fail_reads_the_tolerance_in_the_papers_units(paper, tolerance):
    """Subpop prints AUC in percent, IHA as a fraction: the same 1.5-point tolerance either
    way. b at AUC 0.52, 2 points from chance, is within it plus the half-width (0.95): no
    signal, and the row says why in the paper's units; at 0.60 the parity holds."""
    def parity(b_value):
        c = cl.Claim("X-C1", paper, "X-T1", "on a par", "auc", "not_below", {"attack": "x"},
                     {"attack": "y"}, tolerance, ("mnist",))
        a, b = estimate(b_value, 0.005), estimate(b_value, -0.005)
        outcome, quantity = cl.verdict(c, a, b)
        return outcome, cl.vacuous_parity(c, a, b, quantity)

    outcome, why = parity(0.52)
    scale = 100 if paper == "subpop" else 1
    assert outcome == "no signal"
    assert why == (f"; it could not fail: the reference attack is {0.02 * scale:.3g} from "
                   f"chance, within the tolerance {tolerance:g} plus the interval's half-width "
                   f"{0.0095 * scale:.3g}")
    assert parity(0.60) == ("holds", "")
    # b below chance (0.40): an attack at chance is above it and passes too, however far
    outcome, why = parity(0.40)
    assert (outcome, why) == ("no signal", "; it could not fail: the reference attack is "
                                           f"{0.1 * scale:.3g} below chance")


def test_a_bound_on_one_attack_at_chance_is_still_checked():
    """'No signal' is for orderings and parities: an upper bound (SM-C14, DP bounds the
    attack) is decided by the interval, at chance or not."""
    assert cl.verdict(claim("at_most", 2.0), estimate(0.010, 0.004), None)[0] == "holds"


def test_paired_draws_decide_even_when_marginal_intervals_overlap():
    """Two attacks whose replicates move together: their difference is certain."""
    shared = np.linspace(-0.02, 0.02, 1001)
    a = Estimate(0.051, 0.051 + shared, "bootstrap")
    b = Estimate(0.050, 0.050 + shared, "bootstrap")
    assert cl.verdict(claim("greater"), a, b)[0] == "holds"


@pytest.mark.parametrize(("kind", "value", "expected"), [
    ("at_least", 4.0, "holds"),     # TPR 5% [4.5, 5.5] >= 4%
    ("at_least", 6.0, "fails"),
    ("at_least", 5.0, "inconclusive"),
    ("at_most", 6.0, "holds"),
    ("at_most", 4.0, "fails"),
])
def test_bound_verdicts_use_the_papers_units(kind, value, expected):
    assert cl.verdict(claim(kind, value), estimate(0.05, 0.005), None)[0] == expected


@pytest.mark.parametrize(("a", "b", "expected"), [
    (estimate(0.030, 0.002), estimate(0.031, 0.002), "holds"),  # within 1 point of TPR
    (estimate(0.050, 0.002), estimate(0.020, 0.002), "fails"),  # 3 points apart
    # 6% against 6.1%, -2.1 to +1.9 points (at 3% an attack at chance could not fail it)
    (estimate(0.060, 0.010), Estimate(0.061, np.linspace(0.071, 0.051, 1001), "bootstrap"),
     "inconclusive"),
])
def test_closeness_verdicts(a, b, expected):
    assert cl.verdict(claim("close", 1.0), a, b)[0] == expected


@pytest.mark.parametrize(("a", "b", "expected"), [
    (estimate(0.030, 0.002), estimate(0.035, 0.002), "holds"),  # 0.5 points below: within 1
    (estimate(0.060, 0.002), estimate(0.035, 0.002), "holds"),  # above: never a reversal
    (estimate(0.020, 0.002), estimate(0.035, 0.002), "fails"),  # 1.5 points below
    (estimate(0.060, 0.010), Estimate(0.061, np.linspace(0.071, 0.051, 1001), "bootstrap"),
     "inconclusive"),  # -2.1 to +1.9 points: may or may not be 1 point below
])
def test_not_below_verdicts_allow_the_papers_noise_one_sided(a, b, expected):
    assert cl.verdict(claim("not_below", 1.0), a, b)[0] == expected


@pytest.mark.parametrize(("flagged", "margin", "expected"), [
    (10, 1.0, "holds"),   # 1.0% [0.48, 1.83] of 1,000 non-members: within 1 point of a = 1%
    (10, 0.5, "inconclusive"),  # contains a, but reaches beyond half a point of it
    (2, 0.5, "inconclusive"),   # 0.2% [0.02, 0.72]: excludes a, but not beyond the margin
    (25, 0.5, "fails"),   # 2.5% [1.62, 3.67]: wholly beyond a + 0.5: over-flags
    (0, 0.5, "fails"),    # 0% [0, 0.37]: wholly below a - 0.5: flags nothing
])
def test_equals_verdict_is_an_equivalence_test_within_the_margin(flagged, margin, expected):
    """A theorem's value holds only where the interval lies within the margin of it (a wide
    interval that merely contains it is inconclusive) and fails where it lies wholly beyond."""
    fpr = Estimate(flagged / 1000, np.array([flagged, 1000.0]), "binomial")
    assert cl.verdict(claim("equals", 1.0, "fpr@1%", margin), fpr, None)[0] == expected


def test_an_equals_claim_reads_printed_numbers_with_its_margin():
    theorem = claim("equals", 1.0, "fpr@1%", 0.5)
    assert theorem.holds_on(1.4, None) and theorem.holds_on(0.6, None)
    assert not theorem.holds_on(1.6, None)


def test_ratio_verdict():
    a, b = estimate(0.06, 0.001), estimate(0.02, 0.001)
    assert cl.verdict(claim("ratio_at_least", 2.5), a, b)[0] == "holds"
    assert cl.verdict(claim("ratio_at_least", 3.5), a, b)[0] == "fails"


def test_a_ratio_of_attacks_at_chance_is_no_signal_unless_it_excludes_one():
    """Two attacks at chance give a ratio of 1 (not the 0 of a difference): a ratio whose
    interval holds 1 cannot be tested; paired draws that tell the two apart can."""
    at_chance = estimate(0.012, 0.004), estimate(0.010, -0.004)  # ratio 0.57 to 2.67
    assert cl.verdict(claim("ratio_at_least", 1.1), *at_chance)[0] == "no signal"
    apart = estimate(0.012, 0.004), estimate(0.010, 0.0034)  # ratio about 1.2, draw by draw
    assert cl.verdict(claim("ratio_at_least", 1.1), *apart)[0] == "holds"


@pytest.mark.parametrize(("text", "message"), [
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: better, a: {attack: x}, "
     "b: {attack: y}, datasets: [d]}", "kind 'better'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: x}, "
     "datasets: [d]}", "needs a, b"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: at_least, a: {attack: x}, "
     "datasets: [d]}", "needs a and value"),
    ("- {id: C, artifact: BMIA-T9, statement: s, metric: auc, kind: greater, a: {attack: x}, "
     "b: {attack: y}, datasets: [d]}", "not a checklist ID"),
    ("- {id: C, artifact: BMIA-T1, statment: s, metric: auc, kind: greater, a: {attack: x}, "
     "b: {attack: y}, datasets: [d]}", "unknown key"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: not_below, a: {attack: x}, "
     "b: {attack: y}, value: 1, datasets: [d]}", "needs a 'basis'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: x}, "
     "b: {attack: y}, basis: paper, datasets: [d]}", "no tolerance to give a basis"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: equals, a: {attack: x}, "
     "value: 1, basis: ours, datasets: [d]}", "needs a 'margin'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: at_least, a: {attack: x}, "
     "value: 1, margin: 1, datasets: [d]}", "takes no 'margin'"),
    # names the paper does not use would match no study: the claim would be "not run" forever
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: [purchase-100]}",
     "C: datasets: unknown dataset 'purchase-100' .did you mean 'purchase100'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: atack_p}, datasets: [purchase100]}",
     "C: b.attack: unknown attack 'atack_p' .did you mean 'attack_p'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, "
     "a: {attack: lira_offline, setting: n=9}, b: {attack: attack_p}, datasets: [purchase100]}",
     "C: a.setting: unknown setting 'n=9' of attack 'lira_offline'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: decreases, "
     "a: {attack: bmia}, datasets: [purchase100]}", "kind 'decreases' needs 'over'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: decreases, over: depth, "
     "a: {attack: bmia}, datasets: [purchase100]}", "over 'depth'; known"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, over: epsilon, "
     "a: {attack: bmia}, b: {attack: attack_p}, datasets: [purchase100]}", "is not a trend"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: [purchase100], architectures: [lenet5]}",
     "C: architectures: unknown architecture 'lenet5' .did you mean 'lenet'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: [purchase100], architectures: lenet}",
     "C: architectures: a list of architectures"),
    ("- {id: C, artifact: SM-F9, statement: s, metric: advantage, kind: greater, "
     "a: {attack: bayes_wb}, b: {attack: bayes_wb, setting: layer=1, sum_over: layer}, "
     "datasets: [mnist]}", "C: b: sum_over sums the attack over its settings"),
    ("- {id: C, artifact: QMIA-T6, statement: s, metric: precision@1%, kind: predicted, "
     "a: {attack: qmia}, b: {attack: marginal}, datasets: [cifar10]}", "needs a 'predictor'"),
    # what would otherwise crash the claims job at a run's end, or read "not run" forever
    ("- {id: C, artifact: BMIA-T1, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: [purchase100]}", r"C: missing key\(s\) \['statement'\]"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: at_least, a: {attack: bmia}, "
     "value: '0.75', datasets: [purchase100]}", "C: value: a number, got '0.75'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: aucc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: [purchase100]}", "C: metric 'aucc' is none"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: tpr@1 %, kind: greater, "
     "a: {attack: bmia}, b: {attack: attack_p}, datasets: [purchase100]}", "metric 'tpr@1 %'"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: purchase100}", "C: datasets: a list"),
    ("- {id: C, artifact: BMIA-T1, statement: s, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: [purchase100]}\n"
     "- {id: C, artifact: BMIA-T1, statement: t, metric: auc, kind: greater, a: {attack: bmia}, "
     "b: {attack: attack_p}, datasets: [purchase100]}", "C: a second claim with this id"),
    ("- {id: C, artifact: QMIA-T6, statement: s, metric: precision@1%, kind: greater, "
     "predictor: pinball@1%, a: {attack: qmia}, b: {attack: marginal}, datasets: [cifar10]}",
     "takes no 'predictor'"),
    ("- {id: C, artifact: QMIA-T6, statement: s, metric: precision@1%, kind: predicted, "
     "predictor: pinball@1%, a: {attack: qmia, metric: auc}, b: {attack: marginal}, "
     "datasets: [cifar10]}", "C: a: kind 'predicted' reads both sides"),
    # an agreement is a pair's: every side names its second attack, and only then
    ("- {id: C, artifact: IHA-T5b, statement: s, metric: agreement@30%, kind: greater, "
     "a: {attack: lira_online, versus: loss}, b: {attack: iha}, datasets: [purchase100_s]}",
     "C: b: an agreement side names its pair's second attack"),
    ("- {id: C, artifact: IHA-T5b, statement: s, metric: auc, kind: greater, "
     "a: {attack: lira_online, versus: loss}, b: {attack: iha}, datasets: [purchase100_s]}",
     "C: versus reads a pair's agreement"),
    ("- {id: C, artifact: IHA-T5b, statement: s, metric: agreement@30%, kind: ratio_at_most, "
     "a: {attack: lira_online, versus: loss}, b: {attack: lira_online, versus: iha}, "
     "value: 1, datasets: [purchase100_s]}", "an agreement is compared or bounded"),
])
def test_bad_claims_are_rejected_by_name(text, message):
    with pytest.raises(ValueError, match=message):
        cl.parse_claims("bmia", text)


def test_a_misspelt_second_attack_of_a_pair_is_rejected_by_name():
    text = ("- {id: C, artifact: IHA-T5b, statement: s, metric: agreement@30%, kind: greater, "
            "a: {attack: lira_online, versus: los}, b: {attack: lira_online, versus: iha}, "
            "datasets: [purchase100_s]}")
    with pytest.raises(ValueError, match=r"C: a\.versus: unknown attack 'los' .did you mean"):
        cl.parse_claims("iha", text)


def test_attacks_are_found_by_paper_name_and_setting():
    study = {"attacks": {"p": {"attack": "marginal", "paper_attack": "attack_p"},
                         "l2": {"attack": "lira", "paper_attack": "lira_offline",
                                "paper_setting": "n=2"}}}
    assert cl.find_attack(study, {"attack": "attack_p"}) == "p"
    assert cl.find_attack(study, {"attack": "lira_offline", "setting": "n=2"}) == "l2"
    assert cl.find_attack(study, {"attack": "lira_offline", "setting": "n=8"}) is None


def test_a_claim_compares_its_attacks_on_the_records_both_score():
    """IHA-C24 sets IHA against the L-attack, which scores only its 40 leave-one-out records:
    IHA is read on those 40 (its instance with ``records: 40``), not on the whole audit; and a
    claim between two whole-audit attacks reads their whole-audit instances."""
    study = {"split": {"scheme": "balanced"}, "attacks": {
        "iha": {"attack": "iha", "paper_attack": "iha"},
        "iha-40": {"attack": "iha", "records": 40, "paper_attack": "iha"},
        "loss": {"attack": "marginal", "paper_attack": "loss"},
        "l-attack": {"attack": "l_attack", "loo_records": 40, "paper_attack": "l_attack"},
        "lira-l": {"attack": "lira_l", "loo_records": 40, "paper_attack": "lira_l"}}}
    config = {"studies": {"s": {**study, "paper": "iha", "paper_dataset": "purchase100_s"}},
              "artifacts": {}}
    specs = {"l": {"attack": "l_attack"}, "iha": {"attack": "iha"}, "loss": {"attack": "loss"},
             "lira_l": {"attack": "lira_l"}}
    claim = lambda a, b: cl.Claim("X", "iha", "IHA-X1", "", "auc", "greater", specs[a],  # noqa: E731
                                  specs[b], None, ("purchase100_s",))
    assert cl._sides(claim("iha", "l"), "s", config)[2] == ["iha-40", "l-attack"]
    assert cl._sides(claim("l", "lira_l"), "s", config)[2] == ["l-attack", "lira-l"]
    assert cl._sides(claim("iha", "loss"), "s", config)[2] == ["iha", "loss"]
    # a row compared on a subset says so: the study's tables read the whole audit
    assert cl._subset(study, ["iha-40", "l-attack"]) == (
        "; both on the 40 audited records per target that iha-40 scores")  # no label: its name
    assert cl._subset(study, ["iha", "loss"]) == ""


def test_a_bound_and_a_side_measured_by_another_metric_are_evaluated(monkeypatch):
    """SM-C14 bounds one attack (no ``b``); SM-C13 compares one attack's calibrated precision
    with its own uncalibrated one (a side's ``metric``)."""
    from miarepro.artifacts import results

    def estimates(_results, _study, attack):
        values = {"accuracy": 0.55, "precision": 0.50, "precision@cal99": 0.70}
        return {metric: Estimate(v, np.array([v - 0.01, v, v + 0.01]), "targets")
                for metric, v in values.items()}

    monkeypatch.setattr(results, "attack_estimates", estimates)
    config = {"artifacts": {}, "studies": {"bcw": {
        "paper": "stolen-memories", "paper_dataset": "breast_cancer", "attacks": {
            "general-wb": {"attack": "general_wb", "paper_attack": "general_wb"},
            "general-wb-dp": {"attack": "general_wb", "paper_attack": "general_wb",
                              "paper_setting": "epsilon=0.25"}}}}}
    rows = cl.evaluate(config, ["bcw"]).set_index("claim")
    assert rows.loc["SM-C14", "verdict"] == "holds"  # 55% <= 64.2%
    assert rows.loc["SM-C13", "verdict"] == "holds"  # 70% calibrated > 50% uncalibrated
    assert rows.loc["SM-C13", "quantity"] == pytest.approx(0.20)
    # one instance on both sides: each named with the metric it is read at
    assert rows.loc["SM-C13", "ours"].startswith("general-wb, precision@cal99: 70.00")
    assert "vs general-wb, precision: 50.00" in rows.loc["SM-C13", "ours"]


def test_a_side_summed_over_a_setting_adds_its_instances_replicate_by_replicate(monkeypatch):
    """SM-C32: the meta attack's advantage against the sum of the layer attacks' advantages,
    each replicate's layers added before the paired difference is taken, by hand."""
    from miarepro.artifacts import results

    advantage = {"meta": [0.10, 0.12, 0.08], "layer-1": [0.02, 0.03, 0.01],
                 "layer-2": [0.04, 0.02, 0.03]}
    replicate = {"mnist": 0, "mnist-r1": 1, "mnist-r2": 2}

    def estimates(_results, study, attack):
        v = advantage[attack][replicate[study]]
        return {"advantage": Estimate(v, np.array([v - 1e-3, v + 1e-3]), "targets")}

    monkeypatch.setattr(results, "attack_estimates", estimates)
    layer = lambda n: {"attack": "bayes_wb", "paper_attack": "bayes_wb",  # noqa: E731
                       "paper_setting": f"layer={n}"}
    study = {"paper": "stolen-memories", "paper_dataset": "mnist", "replicates": 3,
             "attacks": {"meta": {"attack": "bayes_wb", "paper_attack": "bayes_wb"},
                         "layer-1": layer(1), "layer-2": layer(2)}}
    config = {"artifacts": {}, "studies": {
        "mnist": study, **{f"mnist-r{r}": {**study, "replicate_of": "mnist"} for r in (1, 2)}}}
    claim = next(c for c in cl.load_claims("stolen-memories") if c.id == "SM-C32")
    assert cl._sides(claim, "mnist", config)[2] == ["meta", ("layer-1", "layer-2")]
    assert set(cl.attacks_read("mnist", config)) >= {"meta", "layer-1", "layer-2"}
    row = cl.evaluate(config, ["mnist"]).set_index("claim").loc["SM-C32"]
    differences = np.array([0.10 - 0.06, 0.12 - 0.05, 0.08 - 0.04])
    half = 4.302653 * differences.std(ddof=1) / np.sqrt(3)
    assert row["verdict"] == "holds" and row["replicates"] == 3
    assert (row["quantity"], row["quantity_low"], row["quantity_high"]) == pytest.approx(
        (differences.mean(), differences.mean() - half, differences.mean() + half), abs=1e-6)
    assert "sum of layer-1 + layer-2: 5.00" in row["ours"]
    assert pd.isna(row["paper_b"])  # the paper prints no sum


def test_member_agreement_by_hand():
    """Six non-members, FPR 0.2: at most one may pass, so each attack calls a member where it
    scores above its second-highest non-member (0.5 for both): a calls members 1, 2 and 4, b
    calls 2, 3 and 4, and they agree on two of the four."""
    from miarepro.artifacts.iha_tables import member_agreement

    member = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 0], dtype=bool)
    outside = [0.9, 0.5, 0.1, 0.2, 0.3, 0.0]
    a, b = np.array([1.0, 0.6, 0.4, 0.95, *outside]), np.array([0.45, 0.7, 0.8, 0.99, *outside])
    assert member_agreement(member, a, b, 0.2) == 0.5
    assert member_agreement(member, a, a, 0.2) == 1.0


def _calls(member: np.ndarray, score: np.ndarray, fpr: float) -> np.ndarray:
    """Members called at the conservative threshold, by hand: above the (k+1)-th highest
    non-member, k = floor(fpr n)."""
    outside = np.sort(score[~member])[::-1]
    return score > outside[int(np.floor(fpr * outside.size + 1e-9))]


def _agreement_study(tmp_path, monkeypatch, replicates: int) -> tuple[dict, dict]:
    """IHA-C28's three attacks on a study of ``replicates`` copies, one target each: LOSS
    follows LiRA's scores with noise, IHA scores independently of both. Returns the config
    and, per copy, each attack's scores."""
    from miarepro.artifacts import results

    monkeypatch.chdir(tmp_path)
    study = {"paper": "iha", "paper_dataset": "purchase100_s", "targets": 1,
             "split": {"scheme": "balanced"}, "replicates": replicates, "attacks": {
                 "lira": {"attack": "lira", "paper_attack": "lira_online"},
                 "loss": {"attack": "marginal", "paper_attack": "loss"},
                 "iha": {"attack": "iha", "paper_attack": "iha"}}}
    copies = ["s"] + [f"s-r{r}" for r in range(1, replicates)]
    config = {"artifacts": {}, "studies": {
        copy: {**study, **({"replicate_of": "s"} if copy != "s" else {})} for copy in copies}}
    member = np.repeat([True, False], 60)
    scores = {}
    for index, copy in enumerate(copies):
        rng = np.random.default_rng(index)
        lira = rng.normal(member * 1.0, 1.0)
        scores[copy] = {"lira": lira, "loss": lira + rng.normal(0.0, 0.5, member.size),
                        "iha": rng.normal(member * 1.0, 1.0)}
        for attack, score in scores[copy].items():
            path = tmp_path / results.score_path("results", copy, attack)
            path.parent.mkdir(parents=True, exist_ok=True)
            pd.DataFrame({"sample": np.arange(member.size), "target": 0, "member": member,
                          "score": score}).to_parquet(path)
    return config, scores


def test_an_agreement_claim_compares_two_pairs_over_replicates_by_hand(tmp_path, monkeypatch):
    """IHA-C28 on 3 replicates: each side is LiRA's share of members called alike with LOSS,
    or with IHA, at FPR 0.3; the interval is Student-t over the replicates' paired
    differences. Recomputed with a threshold rule of the test's own; LOSS, which follows
    LiRA, agrees with it more than IHA does. The claims job reads the pairs' scores."""
    config, scores = _agreement_study(tmp_path, monkeypatch, replicates=3)
    claim = next(c for c in cl.load_claims("iha") if c.id == "IHA-C28")
    sides = cl._sides(claim, "s", config)
    assert sides[2] == [cl.Pair("lira", "loss"), cl.Pair("lira", "iha")]
    row = cl._study_row(claim, "s", sides, config)
    member = np.repeat([True, False], 60)

    def agree(copy, other):
        calls = [_calls(member, scores[copy][name], 0.3) for name in ("lira", other)]
        return np.mean((calls[0] == calls[1])[member])

    differences = np.array([agree(c, "loss") - agree(c, "iha") for c in ("s", "s-r1", "s-r2")])
    half = 4.302653 * differences.std(ddof=1) / np.sqrt(3)
    assert row["replicates"] == 3 and row["verdict"] == "holds"
    assert (row["quantity"], row["quantity_low"], row["quantity_high"]) == pytest.approx(
        (differences.mean(), differences.mean() - half, differences.mean() + half), abs=1e-6)
    assert row["ours"].startswith("lira with loss: ")  # no labels in this config
    assert row["paper_b"] == 0.436 and pd.isna(row["paper_a"])  # the paper prints no LOSS
    assert cl._paper_text(claim, row["paper_a"], row["paper_b"]) == "— vs 0.436"
    assert cl._paper_text(claim, None, None) == "not printed in the artifact"
    read = cl.inputs("results", {"studies": ["s"]}, config)
    assert {f"results/studies/{copy}/scores/{name}.parquet" for copy in ("s", "s-r1", "s-r2")
            for name in ("lira", "loss", "iha")} <= set(read)


def test_an_agreement_of_one_run_is_bootstrapped_over_records_paired(tmp_path, monkeypatch):
    """One run: the interval is a bootstrap of the audited records, the same resampling for
    both pairs, so that a pair set against itself differs by exactly 0 in every draw."""
    config, _ = _agreement_study(tmp_path, monkeypatch, replicates=1)
    estimate = cl._agreement_over(["s"], cl.Pair("lira", "loss"), "agreement@30%", config)
    again = cl._agreement_over(["s"], cl.Pair("lira", "loss"), "agreement@30%", config)
    assert estimate.method == "bootstrap" and estimate.draws.size == uncertainty.N_BOOTSTRAP
    low, high = estimate.interval()
    assert low < estimate.value < high and high - low > 0.02
    assert np.array_equal((estimate - again).draws, np.zeros(uncertainty.N_BOOTSTRAP))
    other = cl._agreement_over(["s"], cl.Pair("lira", "iha"), "agreement@30%", config)
    assert np.corrcoef(estimate.draws, other.draws)[0, 1] > 0  # the same records drawn


def _premise() -> cl.Claim:
    return next(c for c in cl.load_claims("qmia") if c.id == "QMIA-C24")  # LiRA vs QMIA


@pytest.mark.parametrize(("precision", "pinball", "expected", "first"), [
    ((0.90, 0.60), (0.14, 0.16), "holds", True),  # LiRA's loss lower, its precision higher
    ((0.60, 0.90), (0.14, 0.16), "fails", True),  # precision reverses the predicted order
    ((0.60, 0.90), (0.16, 0.14), "holds", False),  # QMIA predicted better, and it is
    ((0.61, 0.60), (0.14, 0.16), "inconclusive", True),  # predicted, within the noise
    ((0.90, 0.60), (0.150, 0.151), "inconclusive", None),  # the losses predict no order
])
def test_a_predicted_order_is_judged_where_the_predictor_gives_one(precision, pinball,
                                                                   expected, first):
    """QMIA's premise: the pinball losses (lower, better) predict which attack is the better;
    precision is then judged as an ordering of the predicted better over the other."""
    # opposite spreads: draws that move against each other, so the paired differences spread
    a, b = estimate(precision[0], 0.02), estimate(precision[1], -0.02)
    loss_a, loss_b = estimate(pinball[0], 0.005), estimate(pinball[1], -0.005)
    outcome, quantity, order = cl.predicted_verdict(_premise(), a, b, loss_a, loss_b)
    assert (outcome, order) == (expected, first)
    if first is None:
        assert quantity is None
    else:  # the predicted better side's lead
        lead = precision[0] - precision[1] if first else precision[1] - precision[0]
        assert quantity.value == pytest.approx(lead)


def test_a_predicted_order_at_chance_or_unresolvable_says_so():
    premise = _premise()
    at_chance = estimate(0.5, 0.2)
    lower, higher = estimate(0.14, 0.005), estimate(0.16, 0.005)
    unordered = estimate(0.15, 0.005)
    assert cl.predicted_verdict(premise, at_chance, at_chance, unordered, unordered)[0] == (
        "no signal")
    # a prediction, but precision at chance on both sides: nothing to test it on
    assert cl.predicted_verdict(premise, at_chance, at_chance, lower, higher)[0] == "no signal"
    blind = Estimate(0.14, np.full(1001, np.nan), "bootstrap", resolvable=False)
    assert cl.predicted_verdict(premise, estimate(0.9, 0.01), estimate(0.6, 0.01), blind,
                                higher)[0] == "not resolvable"
    assert cl.predicted_verdict(premise, estimate(0.9, 0.01), estimate(0.6, 0.01), lower,
                                higher)[0] == "holds"
    # a loss missing in one replicate predicts nothing (it once predicted b the better side,
    # and precision 0.9 against 0.6 then read "fails")
    missing = Estimate(0.14, np.r_[np.full(1000, 0.14), np.nan], "bootstrap")
    assert cl.predicted_verdict(premise, estimate(0.9, 0.01), estimate(0.6, 0.01), missing,
                                higher)[0] == "not resolvable"


def test_a_predicted_row_shows_the_predicted_better_side_first(monkeypatch):
    """The row of a reversed prediction shows QMIA first with its lead, and a row without a
    prediction shows a - b with no interval columns (nothing a rerun could be decided on)."""
    from miarepro.artifacts import results

    values = {"qmia": {"precision@1%": 0.90, "pinball@1%": 0.14},
              "lira": {"precision@1%": 0.60, "pinball@1%": 0.16}}

    def estimates(_results, _study, attack):
        return {metric: estimate(v, 0.005) for metric, v in values[attack].items()}

    monkeypatch.setattr(results, "attack_estimates", estimates)
    config = {"artifacts": {}, "studies": {"s": {
        "paper": "qmia", "paper_dataset": "cifar10", "attacks": {
            "lira": {"attack": "lira", "paper_attack": "lira", "paper_setting": "n=8"},
            "qmia": {"attack": "qmia", "paper_attack": "qmia"}}}}}
    premise = _premise()

    def row() -> dict:
        return cl._study_row(premise, "s", cl._sides(premise, "s", config), config)

    assert row()["verdict"] == "holds" and row()["quantity"] == pytest.approx(0.30)
    assert row()["ours"].startswith("qmia: 90.00")
    assert "pinball@1% predicts qmia the better (its loss lower by 0.0200" in row()["ours"]
    values["qmia"]["pinball@1%"] = 0.16
    assert row()["verdict"] == "inconclusive" and "quantity" not in row()
    assert row()["ours"].startswith("lira: 60.00") and "does not order them" in row()["ours"]


def _pooled_study(rng, shift_b: float, runs: int = 10) -> tuple[Estimate, Estimate]:
    """Two attacks' TPR@0.1% over ``runs`` repetitions of 500 members and 2,000 non-members
    (2 above the threshold a run), their scores correlated as two attacks' on one model are."""
    member = np.repeat([True, False], [500, 2000])
    frames = {"a": [], "b": []}
    for target in range(runs):
        shared = rng.normal(size=member.size)
        for name, shift in (("a", 1.5), ("b", shift_b)):
            score = 0.7 * shared + 0.71 * rng.normal(size=member.size) + shift * member
            frames[name].append(pd.DataFrame({"sample": np.arange(member.size),
                                              "target": target, "member": member,
                                              "score": score}))
    return tuple(uncertainty.estimates(uncertainty.metric_table(
        pd.concat(frames[name]), (0.001,), seed=0))["tpr@0.1%"] for name in "ab")


def test_an_ordering_pooled_over_runs_decides_the_sign_at_its_level():
    """An ordering at TPR@0.1% whose runs each hold 2 non-members above the threshold is
    judged pooled over 10 runs: two equal attacks are told apart in about 5% of studies, the
    interval's level, and two unequal ones never in the wrong order (the small-audit bias
    raises both TPRs alike). A bound on one attack stays not resolvable."""
    rng = np.random.default_rng(0)
    ordering = claim("greater", metric="tpr@0.1%")
    equal = [cl.verdict(ordering, *_pooled_study(rng, 1.5))[0] for _ in range(100)]
    assert "not resolvable" not in equal
    assert 0.0 < np.mean([word != "inconclusive" for word in equal]) < 0.11
    apart = [cl.verdict(ordering, *_pooled_study(rng, 1.0))[0] for _ in range(20)]
    assert "fails" not in apart and apart.count("holds") > 15
    ten = _pooled_study(rng, 1.0)
    assert not any(side.resolvable for side in ten)  # each attack's own value stays n/r
    assert cl.verdict(ordering, *_pooled_study(rng, 1.0, runs=3))[0] == "not resolvable"  # 6
    bound = claim("at_least", value=1.0, metric="tpr@0.1%")
    assert cl.verdict(bound, ten[0])[0] == "not resolvable"  # a bound is not pooled


@pytest.mark.parametrize(("kind", "metric", "method", "pooled"), [
    ("greater", "tpr@0.1%", "targets", True),
    ("greater", "precision@0.1%", "replicates", True),
    ("greater", "tpr@0.1%", "bootstrap", False),  # one realisation's records: no runs
    ("greater", "precision@cal99", "targets", False),  # its threshold is not set on the audit
    ("not_below", "tpr@0.1%", "targets", False),  # a tolerance the bias could cross
])
def test_only_orderings_at_an_fpr_over_runs_are_pooled(kind, metric, method, pooled):
    draws = np.linspace(0.01, 0.03, 10)
    side = Estimate(0.02, draws, method, resolvable=False, exceedances=20.0)
    other = Estimate(0.01, draws - 0.01, method, resolvable=False, exceedances=30.0)
    value = 1.0 if kind == "not_below" else None
    judged = claim(kind, value=value, metric=metric)
    assert cl.pooled_comparison(judged, side - other).resolvable is pooled
    assert cl.pooled_comparison(judged, replace(side - other, exceedances=9.0)).resolvable is (
        False)


def test_a_pooled_row_shows_each_side_unresolved_and_says_why(monkeypatch):
    from miarepro.artifacts import results

    rng = np.random.default_rng(1)
    sides = dict(zip(("bmia", "attack-p"), _pooled_study(rng, 0.5), strict=True))
    monkeypatch.setattr(results, "attack_estimates",
                        lambda _results, _study, attack: {"tpr@0.1%": sides[attack]})
    config = {"artifacts": {}, "studies": {"p": {
        "paper": "bmia", "paper_dataset": "purchase100", "targets": 10, "attacks": {
            "bmia": {"attack": "bmia", "paper_attack": "bmia", "paper_setting": "n=1"},
            "attack-p": {"attack": "marginal", "paper_attack": "attack_p"}}}}}
    c32 = next(c for c in cl.load_claims("bmia") if c.id == "BMIA-C32")
    row = cl._study_row(c32, "p", cl._sides(c32, "p", config), config)
    assert row["verdict"] == "holds"
    assert row["ours"].startswith("bmia: n/r vs attack-p: n/r; difference ")
    assert row["ours"].endswith("ordered over the runs pooled: 20 non-members above the "
                                "threshold together, fewer than 10 in each run")


def test_regime_says_within_2x_only_where_both_values_exist():
    """A study without a baseline attack (NaN in the frame, as pandas fills it) shows dashes,
    never "yes"; one with both values says yes or no per metric, and for its generalisation
    gap where the paper gives one (a study without a baseline too)."""
    import math

    import pandas as pd

    from miarepro.artifacts import regime

    assert regime._within_2x(0.055, 0.011) is False  # Stolen Memories' MNIST LeNet: 5x
    assert regime._within_2x(0.02, 0.011) is True and regime._within_2x(0.0, 0.0) is True
    assert regime._within_2x(math.nan, 0.1) is None and regime._within_2x(0.1, None) is None
    # an AUC's leakage is its distance above chance: IHA's Purchase LOSS at 0.583 leaks 2.7
    # times the paper's 0.531, though every AUC from 0.25 to 1 is within 2x of 0.5; Subpop's
    # in percent alike; a TPR at FPR a is its ratio TPR / a as it stands
    leak = regime._leakage
    assert (leak("auc", 0.583, 1), leak("auc", 57.89, 100)) == pytest.approx((0.083, 7.89))
    assert regime._within_2x(leak("auc", 0.583, 1), leak("auc", 0.531, 1)) is False
    assert leak("tpr@1%", 1.93, 100) == 1.93 and leak("auc", None, 1) is None
    rows = pd.DataFrame([
        {"study": "with", "paper": "iha", "train_accuracy": 1.0, "test_accuracy": 0.9,
         "paper_test_accuracy": 0.9, "gap": 0.1, "paper_gap": 0.08, "within_2x_gap": True,
         "baseline": "loss", "reference": "r", "baseline_auc": 0.6, "baseline_auc_low": 0.55,
         "baseline_auc_high": 0.65, "baseline_auc_resolvable": True,
         "paper_baseline_auc": 0.55, "within_2x_auc": True, "baseline_tpr@1%": 0.1,
         "baseline_tpr@1%_low": 0.05, "baseline_tpr@1%_high": 0.15,
         "baseline_tpr@1%_resolvable": True, "paper_baseline_tpr@1%": 1.0,
         "within_2x_tpr@1%": False},
        {"study": "without", "paper": "iha", "train_accuracy": 1.0, "test_accuracy": 0.9,
         "paper_test_accuracy": None, "gap": 0.1, "paper_gap": None, "within_2x_gap": None,
         "reference": math.nan},
        {"study": "gap only", "paper": "stolen-memories", "train_accuracy": 0.99,
         "lowest_train_accuracy": 0.21, "test_accuracy": 0.935, "paper_test_accuracy": None,
         "gap": 0.055, "paper_gap": 0.011, "within_2x_gap": False, "reference": "r"}])
    lines = regime.regime_markdown(rows)
    row = {name: next(line for line in lines if line.startswith(f"| {name} |"))
           for name in ("with", "without", "gap only")}
    assert row["with"].endswith("| gap: yes, AUC: yes, TPR@1%: no |")
    assert "yes" not in row["without"] and "nan" not in row["without"]
    assert row["without"].endswith("| — | — | — |")
    assert row["gap only"].endswith("| — | — | gap: no |")
    assert row["gap only"].startswith("| gap only | 99.0 (lowest 21.0) |")  # a failed target
    assert row["with"].startswith("| with | 100.0 |")
    assert "- gap only: r" in lines and not any("nan" in line for line in lines)  # no source


def test_a_claim_made_for_some_architectures_skips_studies_of_others():
    """Stolen Memories' SM-C27 is made "on all convolutional models": its MNIST row is the
    LeNet study's, not that of the MLP on 8x8 digits that stands in for MNIST elsewhere; with
    no LeNet study for its datasets it is "not run", saying which target it needs."""
    attacks = {"g": {"attack": "general_wb", "paper_attack": "general_wb"}}
    studies = {name: {"paper": "stolen-memories", "paper_dataset": "mnist", "model": model,
                      "attacks": attacks}
               for name, model in (("mlp", {"arch": "mlp", "widths": [64, 32]}),
                                   ("lenet", {"arch": "lenet"}))}
    claim = next(c for c in cl.load_claims("stolen-memories") if c.id == "SM-C27")
    assert claim.architectures == ("lenet",)
    config = {"studies": studies, "artifacts": {}}
    assert cl._sides(claim, "mlp", config) is None
    assert cl._sides(claim, "lenet", config)[2] == ["g"]
    assert cl._not_run_anywhere(claim)["ours"].startswith(
        "no study of this run stands in for mnist, cifar10, cifar100, lfw with a lenet target")


def test_theorem_1_on_imagenet_reads_the_multi_quantile_head_the_paper_runs_there():
    """QMIA runs a multi-quantile head on ImageNet (§4.1): the Gaussian head's calibration
    claims (C9 to C11) have no row there, the quantile head's (C20 to C22) read the same
    regressor as the tables' QMIA, under one fit."""
    from miarepro.attacks import get_attack
    from miarepro.config import validate
    from miarepro.io import read_config_yaml
    from miarepro.paths import attack_params

    config = validate(read_config_yaml(ROOT / "config" / "papers" / "qmia.yaml"))
    claims = {c.id: c for c in cl.load_claims("qmia")}
    assert all(cl._sides(claims[f"QMIA-C{n}"], "qmia-imagenet", config) is None
               for n in (9, 10, 11))
    assert all(cl._sides(claims[f"QMIA-C{n}"], "qmia-imagenet", config)[2] == ["qmia-quantiles"]
               for n in (20, 21, 22))
    assert cl._sides(claims["QMIA-C1"], "qmia-imagenet", config)[2] == ["qmia", "marginal"]
    attacks, spec = config["studies"]["qmia-imagenet"]["attacks"], get_attack("qmia")
    keys = {spec.fit_key(spec.split_params(attack_params(attacks[name]))[0], 0)
            for name in ("qmia", "qmia-quantiles")}
    assert len(keys) == 1


def test_a_claim_reads_the_papers_number_for_its_studys_target_model():
    """QMIA's Table 1 prints ResNet-50's numbers only: a study standing for ResNet-10 reads
    Table 6's ResNet-10 row for the same cell, a ResNet-50 study Table 1's."""
    claim = next(c for c in cl.load_claims("qmia") if c.id == "QMIA-C1")
    assert claim.artifact == "QMIA-T1"
    assert [cl.claim_paper_value(claim, "cifar10", side, "resnet50")
            for side in (claim.a, claim.b)] == [62.95, 48.56]
    assert [cl.claim_paper_value(claim, "cifar10", side, "resnet10")
            for side in (claim.a, claim.b)] == [62.69, 47.84]
    assert cl.claim_paper_value(claim, "cifar10", claim.a, "resnet152") is None


def test_no_claim_of_a_covered_paper_is_dropped():
    """A study of QMIA standing in for CIFAR-10 with none of the claims' attacks: every QMIA
    claim gets a row, "not run", saying what is missing (an attack of this study, or a study
    for the claim's datasets and what the paper's artifact needs)."""
    config = {"studies": {"q": {"paper": "qmia", "paper_dataset": "cifar10",
                                "attacks": {"x": {"attack": "marginal"}}}},
              "artifacts": {}}
    table = cl.evaluate(config, ["q"]).set_index("claim")
    assert set(table.index) == {c.id for c in cl.load_claims("qmia")}
    assert set(table["verdict"]) == {"not run"}
    assert table.loc["QMIA-C1", "ours"] == "needs qmia and marginal in this study"
    assert table.loc["QMIA-C3", "study"] == ""
    assert table.loc["QMIA-C3", "ours"].startswith(
        "no study of this run stands in for cinic10, imagenet (the paper's QMIA-T1 needs")
    assert set(cl.VERDICTS) == {"holds", "fails", "inconclusive", "not resolvable",
                                "no signal", "not run"}


@pytest.mark.parametrize(("calibrated", "expected"), [
    ({"bcw": 0.70, "bcw-r1": 0.66, "bcw-r2": 0.62}, "holds"),  # differences .15 .11 .07
    ({"bcw": 0.70, "bcw-r1": 0.66, "bcw-r2": 0.50}, "inconclusive"),  # one replicate reverses
])
def test_a_study_with_replicates_is_judged_over_them(monkeypatch, calibrated, expected):
    """SM-C13 (calibrated beats uncalibrated precision) on a study run as 3 replicates: the
    interval is Student-t over the replicates' paired differences, however narrow each run's."""
    from miarepro.artifacts import results

    def estimates(_results, study, _attack):
        values = {"accuracy": 0.55, "precision": 0.55, "precision@cal99": calibrated[study]}
        return {metric: Estimate(v, np.array([v - 1e-3, v, v + 1e-3]), "targets")
                for metric, v in values.items()}

    monkeypatch.setattr(results, "attack_estimates", estimates)
    study = {"paper": "stolen-memories", "paper_dataset": "breast_cancer", "replicates": 3,
             "attacks": {"general-wb": {"attack": "general_wb", "paper_attack": "general_wb"}}}
    config = {"artifacts": {}, "studies": {
        "bcw": study, **{f"bcw-r{r}": {**study, "replicate_of": "bcw"} for r in (1, 2)}}}
    row = cl.evaluate(config, ["bcw"]).set_index("claim").loc["SM-C13"]
    differences = np.array([calibrated[s] for s in ("bcw", "bcw-r1", "bcw-r2")]) - 0.55
    half = 4.302653 * differences.std(ddof=1) / np.sqrt(3)
    assert row["replicates"] == 3 and row["verdict"] == expected
    assert row["quantity"] == pytest.approx(differences.mean())
    assert (row["quantity_low"], row["quantity_high"]) == pytest.approx(
        (differences.mean() - half, differences.mean() + half), abs=1e-6)


def test_a_partition_study_is_judged_over_its_repetitions(monkeypatch):
    """SM-C13 on a partition study of 3 targets, each a repetition with its own partition,
    reference models and fits: the interval is Student-t over the repetitions' paired
    differences, read from the metric tables as the score jobs write them, and the row says
    it rests on 3 replicates."""
    from miarepro.artifacts import results

    rng = np.random.default_rng(0)
    member = np.repeat([True, False], 100)
    frames = []
    for target, shift in enumerate([0.8, 0.3, 1.2]):  # each repetition calibrates its own way
        score = rng.normal(member * 0.5, 1.0)
        frames.append(pd.DataFrame({
            "sample": np.arange(200), "target": target, "member": member, "score": score,
            "decision": score > 0.25, "decision@cal99": score > 0.25 + shift}))
    table = uncertainty.metric_table(pd.concat(frames), [0.01], seed=0, n_boot=200)
    monkeypatch.setattr(results, "attack_estimates",
                        lambda _results, _study, _attack: uncertainty.estimates(table))
    study = {"paper": "stolen-memories", "paper_dataset": "breast_cancer", "targets": 3,
             "split": {"scheme": "partition"},
             "attacks": {"general-wb": {"attack": "general_wb", "paper_attack": "general_wb"}}}
    row = cl.evaluate({"artifacts": {}, "studies": {"bcw": study}}, ["bcw"]
                      ).set_index("claim").loc["SM-C13"]
    points = table.query("replicate < 0").sort_values("target")
    differences = (points["precision@cal99"] - points["precision"]).to_numpy()
    half = 4.302653 * differences.std(ddof=1) / np.sqrt(3)
    assert row["replicates"] == 3
    assert (row["quantity_low"], row["quantity_high"]) == pytest.approx(
        (differences.mean() - half, differences.mean() + half), abs=1e-6)


def _trend_config(tmp_path, monkeypatch, accuracy: dict[str, float]) -> dict:
    """Stolen Memories on Adult at three training-set sizes (the targets' cards say which) and
    on breast cancer without DP and at two epsilons; ``accuracy`` per study, bootstrap-like."""
    from miarepro.artifacts import results

    sizes = {"adult-250": 250, "adult-500": 500, "adult-1000": 1000, "bcw": 142,
             "bcw-eps-16": 142, "bcw-eps-0-25": 142}
    for study, size in sizes.items():
        card = tmp_path / results.target_card("results", study, 0)
        card.parent.mkdir(parents=True)
        card.write_text(f'{{"n_train": {size}}}')
    monkeypatch.chdir(tmp_path)
    def estimates(_results, study, _attack):  # draws of a study's own: no pairing by design
        noise = np.random.default_rng(len(study)).normal(0.0, 0.01, 1000)
        return {"accuracy": Estimate(accuracy[study], accuracy[study] + noise, "bootstrap")}

    monkeypatch.setattr(results, "attack_estimates", estimates)
    attacks = {"general-wb": {"attack": "general_wb", "paper_attack": "general_wb"}}
    adult = {"paper": "stolen-memories", "paper_dataset": "adult", "targets": 1,
             "attacks": attacks}
    subsets = {name: {**adult, "attacks": {"general-wb": {  # Figure 7's points, named by size
        **attacks["general-wb"], "paper_setting": f"records={records}"}}}
        for name, records in (("adult-250", 1000), ("adult-500", 2000))}
    bcw = {**adult, "paper_dataset": "breast_cancer", "training": {}}
    dp = {name: {**bcw, "training": {"dp": {"epsilon": epsilon}}, "attacks": {"general-wb": {
        **attacks["general-wb"], "paper_setting": f"epsilon={epsilon:g}"}}}
        for name, epsilon in (("bcw-eps-16", 16.0), ("bcw-eps-0-25", 0.25))}
    return {"artifacts": {}, "studies": {**subsets, "adult-1000": adult, "bcw": bcw, **dp}}


@pytest.mark.parametrize(("accuracy", "expected"), [
    ({"adult-250": 0.66, "adult-500": 0.60, "adult-1000": 0.56}, "holds"),
    ({"adult-250": 0.56, "adult-500": 0.60, "adult-1000": 0.66}, "fails"),
    ({"adult-250": 0.57, "adult-500": 0.60, "adult-1000": 0.56}, "inconclusive"),
    ({"adult-250": 0.50, "adult-500": 0.60, "adult-1000": 0.505}, "no signal"),
])
def test_a_trend_compares_the_ends_of_its_axis(tmp_path, monkeypatch, accuracy, expected):
    """SM-C17 (general-wb's accuracy falls as the training set grows): the smallest training
    set (250 records, from the target's card) against the largest (1,000); the middle study
    does not enter, and the interval of two bootstraps is their draw-by-draw difference."""
    accuracy = {**accuracy, "bcw": 0.54, "bcw-eps-16": 0.53, "bcw-eps-0-25": 0.50}
    config = _trend_config(tmp_path, monkeypatch, accuracy)
    rows = cl.evaluate(config, list(config["studies"])).set_index("claim")
    row = rows.loc["SM-C17"]
    assert row["verdict"] == expected
    assert row["study"] == "adult-1000 vs adult-250"
    assert row["quantity"] == pytest.approx(accuracy["adult-250"] - accuracy["adult-1000"])
    assert row["ours"].startswith("train_size 1000 vs 250: ")


def test_a_trend_over_epsilon_leaves_studies_without_dp_off_its_axis(tmp_path, monkeypatch):
    """SM-C18 (general-wb's accuracy rises with epsilon): epsilon 16 against 0.25; the study
    trained without DP is not a point of the axis (its 0.90 would reverse the verdict). A
    dataset with studies at fewer than two epsilons gets a "not run" row saying so."""
    accuracy = {"adult-250": 0.6, "adult-500": 0.6, "adult-1000": 0.6, "bcw": 0.90,
                "bcw-eps-16": 0.58, "bcw-eps-0-25": 0.51}
    config = _trend_config(tmp_path, monkeypatch, accuracy)
    rows = cl.evaluate(config, list(config["studies"]))
    row = rows[rows["claim"] == "SM-C18"].set_index("paper_dataset").loc["breast_cancer"]
    assert (row["verdict"], row["study"]) == ("holds", "bcw-eps-16 vs bcw-eps-0-25")
    assert row["quantity"] == pytest.approx(0.07)
    del config["studies"]["bcw-eps-0-25"]
    rows = cl.evaluate(config, list(config["studies"]))
    row = rows[rows["claim"] == "SM-C18"].set_index("paper_dataset").loc["breast_cancer"]
    assert row["verdict"] == "not run"
    assert row["ours"] == ("needs general_wb in studies of breast_cancer at two or more "
                           "epsilon values")


def test_a_trend_pairs_the_targets_of_studies_on_one_split(tmp_path, monkeypatch):
    """SM-C18's two epsilons train on one split (the same dataset and split: each target
    audits the same records at both), so the trend is the paired difference over targets;
    another split (its seed) leaves them unpaired, Welch's."""
    from miarepro.artifacts import results

    config = _trend_config(tmp_path, monkeypatch, {study: 0.5 for study in (
        "adult-250", "adult-500", "adult-1000", "bcw", "bcw-eps-16", "bcw-eps-0-25")})
    split = {"scheme": "partition", "seed": 0}
    for study in ("bcw-eps-16", "bcw-eps-0-25"):
        config["studies"][study].update(dataset="bcw", split=dict(split), targets=3)
    values = {"bcw-eps-16": np.array([0.60, 0.70, 0.65]),
              "bcw-eps-0-25": np.array([0.52, 0.61, 0.58])}
    monkeypatch.setattr(results, "attack_estimates", lambda _r, study, _a: {
        "accuracy": Estimate(float(values.get(study, np.full(3, 0.5)).mean()),
                             values.get(study, np.full(3, 0.5)), "targets")})

    def row() -> pd.Series:
        rows = cl.evaluate(config, list(config["studies"]))
        return rows[rows["claim"] == "SM-C18"].set_index("paper_dataset").loc["breast_cancer"]

    differences = values["bcw-eps-16"] - values["bcw-eps-0-25"]
    half = 4.302653 * differences.std(ddof=1) / np.sqrt(3)
    paired = row()
    assert (paired["quantity_low"], paired["quantity_high"]) == pytest.approx(
        (differences.mean() - half, differences.mean() + half), abs=1e-6)
    assert paired["verdict"] == "holds"
    config["studies"]["bcw-eps-0-25"]["split"]["seed"] = 1
    unpaired = row()
    assert unpaired["quantity_high"] - unpaired["quantity_low"] > 4 * half
    config["studies"]["bcw-eps-0-25"].update(split=dict(split), nonmembers="ood")
    other = row()  # out-of-distribution non-members: other records audited
    assert other["quantity_high"] - other["quantity_low"] > 4 * half


def test_a_trend_point_with_a_setting_stays_out_of_the_default_settings_claims(
        tmp_path, monkeypatch):
    """Figure 7's Adult subsets (``records=1000``, ``records=2000``) are points of SM-C17's
    trend over the training-set size, but SM-C13 (calibration raises general-wb's precision,
    Figure 11) is made for the full-size Adult target alone, as the paper draws it, and for
    the undefended BCW target, not the DP ones (whose rows said "not run: needs general_wb and
    general_wb in this study"); before the subsets named their size, each had a row too."""
    accuracy = {"adult-250": 0.66, "adult-500": 0.60, "adult-1000": 0.56, "bcw": 0.54,
                "bcw-eps-16": 0.53, "bcw-eps-0-25": 0.50}
    config = _trend_config(tmp_path, monkeypatch, accuracy)
    assert set(cl.attacks_read("adult-250", config)) == {"general-wb"}
    rows = cl.evaluate(config, list(config["studies"]))
    assert sorted(rows[rows["claim"] == "SM-C13"]["study"]) == ["adult-1000", "bcw"]
    trend = rows[rows["claim"] == "SM-C17"].set_index("paper_dataset").loc["adult"]
    assert (trend["study"], trend["verdict"]) == ("adult-1000 vs adult-250", "holds")


def test_a_claim_stated_on_average_is_one_row_on_the_mean_over_its_studies(tmp_path,
                                                                            monkeypatch):
    """SM-C1 (bayes-wb recovers "on average 84%" of the omniscient attack's advantage over
    three training-set sizes): one row over the studies of the synthetic data, on the mean of
    each study's paired ratio over its ten repetitions (a Welch interval: studies trained
    apart). Where a study lacks an attack, the row is "not run" and says which."""
    from miarepro.artifacts import results

    rng = np.random.default_rng(3)
    values = {}
    for study, ratio in (("syn-100", 0.80), ("syn-200", 0.85), ("syn-400", 0.90)):
        omniscient = rng.normal(0.5, 0.02, 10)
        values[study] = {"omniscient": omniscient,
                         "bayes-wb": omniscient * ratio + rng.normal(0.0, 0.01, 10)}

    def estimates(_results, study, attack):
        draws = values[study][attack]  # the same draws for the other claims' metrics
        return dict.fromkeys(("advantage", "accuracy"), Estimate(draws.mean(), draws, "targets"))

    monkeypatch.setattr(results, "attack_estimates", estimates)
    monkeypatch.chdir(tmp_path)
    for study in values:  # the size trend on the same studies reads their targets' cards
        card = tmp_path / results.target_card("results", study, 0)
        card.parent.mkdir(parents=True)
        card.write_text(f'{{"n_train": {study[4:]}}}')
    config = {"artifacts": {}, "studies": {study: {
        "paper": "stolen-memories", "paper_dataset": "synthetic", "targets": 10,
        "split": {"scheme": "partition"},
        "attacks": {name: {"attack": name.replace("-", "_"), "paper_attack": name.replace(
            "-", "_")} for name in ("bayes-wb", "omniscient")}} for study in values}}
    [row] = cl.evaluate(config, list(values)).query("claim == 'SM-C1'").to_dict("records")
    ratios = [estimates(None, study, "bayes-wb")["advantage"].ratio(
        estimates(None, study, "omniscient")["advantage"]) for study in values]
    mean = uncertainty.mean_across_studies(ratios)
    assert row["study"] == "syn-100, syn-200, syn-400"
    assert row["quantity"] == pytest.approx(np.mean([r.value for r in ratios]))
    assert (row["quantity_low"], row["quantity_high"]) == pytest.approx(mean.interval())
    assert mean.interval()[0] >= 0.75 and row["verdict"] == "holds"
    assert row["replicates"] == 10
    assert row["ours"].startswith(f"mean over 3 studies: ratio {mean.value:.2f} [")
    assert "syn-400 0.9" in row["ours"]
    del config["studies"]["syn-400"]["attacks"]["bayes-wb"]
    [row] = cl.evaluate(config, list(values)).query("claim == 'SM-C1'").to_dict("records")
    assert row["verdict"] == "not run"
    assert row["ours"] == "syn-400: needs bayes_wb in this study"


def test_only_a_comparison_or_a_bound_can_be_pooled_over_studies():
    text = """
- id: X-C1
  artifact: SM-F7
  statement: s
  metric: accuracy
  kind: increases
  over: train_size
  a: {attack: general_wb}
  datasets: [adult]
  pooled: true
"""
    with pytest.raises(ValueError, match="X-C1: kind 'increases' cannot be pooled"):
        cl.parse_claims("stolen-memories", text)


@pytest.mark.parametrize(("a", "expected"), [(0.10, "holds"), (0.20, "fails"),
                                             (0.13, "inconclusive")])
def test_ratio_at_most_verdict(a, expected):
    """BMIA-C36's form: a/b at most 0.13; b = 1 with a spread of its own (draws apart)."""
    noise = np.random.default_rng(1).normal(0.0, 0.01, 1001)
    b = Estimate(1.0, 1.0 + noise, "bootstrap")
    quantity = cl.verdict(claim("ratio_at_most", 0.13), estimate(a, 0.005), b)
    assert quantity[0] == expected
    assert quantity[1].value == pytest.approx(a)


def test_a_cost_over_repetitions_is_timed_in_each(monkeypatch):
    """In a partition study of 3 repetitions, gpu_minutes is timed in each (its own reference
    models, fit and scoring: builders.target_compute_seconds) and its interval is over them,
    on the log scale, paired by repetition across a claim's two attacks, not the timing-noise
    model of a cost timed once (BMIA-C36 read target 0 alone, and flipped between seeds)."""
    from miarepro.artifacts import builders

    seconds = {"bmia": [60.0, 120.0, 90.0], "lira": [600.0, 900.0, 750.0]}
    monkeypatch.setattr(builders, "target_compute_seconds",
                        lambda _results, _study, attack, _config: seconds[attack])
    config = {"studies": {"s": {"split": {"scheme": "partition"}, "targets": 3,
                                "attacks": {}}}}
    assert cl._measure("s", "bmia", "gpu_minutes", config).method == "targets"
    monkeypatch.setattr(cl, "_failed_fits", lambda *_: "")
    cost, other = cl._side_estimates(claim("ratio_at_most", 0.13, metric="gpu_minutes"), "s",
                                     [{}, {}], ["bmia", "lira"], config)
    logs = np.log([1.0, 2.0, 1.5])
    half = 4.302653 * np.std(logs, ddof=1) / np.sqrt(3)
    assert cost.log_scale and cost.value == pytest.approx(np.exp(logs.mean()))
    assert cost.interval() == pytest.approx(np.exp([logs.mean() - half, logs.mean() + half]))
    ratio = cost.ratio(other)
    per_repetition = np.array([60.0 / 600.0, 120.0 / 900.0, 90.0 / 750.0])
    np.testing.assert_allclose(ratio.draws, per_repetition)
    assert ratio.value == pytest.approx(np.exp(np.log(per_repetition).mean()))


def test_scoring_seconds_over_repetitions_are_each_targets_own(monkeypatch):
    """BMIA Figure 3c's cost, ``seconds``: each repetition's own scoring time, its interval
    over them and a ratio paired by repetition, as for ``gpu_minutes``."""
    import pandas as pd

    from miarepro.artifacts import results as res

    seconds = {"n300": [3.9, 4.0, 4.1], "n10": [1.0, 1.0, 1.0]}
    monkeypatch.setattr(res, "target_seconds", lambda _results, _study, attack: pd.DataFrame(
        {"score_seconds": seconds[attack], "model_seconds": 100.0, "fit_seconds": 100.0}))
    config = {"studies": {"s": {"split": {"scheme": "partition"}, "targets": 3,
                                "attacks": {}}}}
    monkeypatch.setattr(cl, "_failed_fits", lambda *_: "")
    cost, other = cl._side_estimates(claim("ratio_at_most", 2.0, metric="seconds"), "s",
                                     [{}, {}], ["n300", "n10"], config)
    logs = np.log([3.9, 4.0, 4.1])
    assert cost.method == "targets" and cost.value == pytest.approx(np.exp(logs.mean()))
    half = 4.302653 * np.std(logs, ddof=1) / np.sqrt(3)
    assert cost.interval() == pytest.approx(np.exp([logs.mean() - half, logs.mean() + half]))
    ratio = cost.ratio(other)
    assert ratio.value == pytest.approx(np.exp(logs.mean()))
    assert cl.decide(claim("ratio_at_most", 2.0), ratio) == "fails"


@pytest.mark.parametrize("metric", ["gpu_minutes", "train_minutes", "audit_minutes", "seconds"])
def test_a_cost_is_spread_by_the_runs_timing_noise(tmp_path, monkeypatch, metric):
    """A cost is the attack's measured minutes (BMIA Table 1's compute, Subpop Table 3's
    training and IHA's thousand-record audit at the paper's counts) or its scoring seconds
    (BMIA Figure 3c); its interval is the
    spread of the log of the training seconds of the reference models its claims read (here
    Watson et al.'s three shadow models, SUB-C6's: 0.100), a factor of exp(1.96 x 0.100)
    either way."""
    from miarepro.artifacts import builders, iha_tables, subpop_artifacts
    from miarepro.artifacts import results as res

    models = tmp_path / "results/studies/s/models/reference"
    models.mkdir(parents=True)
    for index, seconds in enumerate((9.0, 10.0, 11.0)):
        (models / f"{index}.json").write_text(f'{{"train_seconds": {seconds}}}')
    monkeypatch.chdir(tmp_path)
    # each source its own value: the cost read is the metric's own
    monkeypatch.setattr(builders, "compute_seconds", lambda *_: 120.0)  # gpu_minutes: 2
    monkeypatch.setattr(subpop_artifacts, "minutes_at_paper_counts", lambda *_: 3.0)
    monkeypatch.setattr(iha_tables, "audit_minutes", lambda *_: 4.0)
    monkeypatch.setattr(res, "score_seconds", lambda *_: 5.0)
    value = {"gpu_minutes": 2.0, "train_minutes": 3.0, "audit_minutes": 4.0, "seconds": 5.0}[
        metric]
    (models / "3.json").write_text('{"train_seconds": 100.0}')  # no claim reads it
    config = {"artifacts": {}, "studies": {"s": {
        "paper": "subpop", "paper_dataset": "mnist", "targets": 1,
        "split": {"scheme": "balanced"},
        "attacks": {"lira": {"attack": "watson", "n_reference": 3, "paper_attack": "watson"}}}}}
    assert cl._timing_cards("results", "s", config) == [
        f"results/studies/s/models/reference/{index}.json" for index in range(3)]
    cost = cl._measure("s", "lira", metric, config)
    assert cost.value == value
    low, high = cost.interval()
    spread = np.exp(1.96 * np.std(np.log([9.0, 10.0, 11.0]), ddof=1))
    assert (low, high) == pytest.approx((value / spread, value * spread), rel=0.05)
    assert cost.draws.min() > 0
    again = cl._measure("s", "lira", metric, config)
    np.testing.assert_array_equal(cost.draws, again.draws)  # seeded: the same verdict twice
    # one timed model gives no timing noise: the cost is not resolvable, never a certain
    # verdict on a zero-width interval
    config["studies"]["s"]["attacks"]["lira"]["n_reference"] = 1
    alone = cl._measure("s", "lira", metric, config)
    assert alone.value == value and not alone.resolvable
    assert cl.judge(claim("ratio_at_most", 0.5), alone.ratio(cost), False) == "not resolvable"


def test_an_audit_costs_its_precompute_and_a_thousand_records(tmp_path, monkeypatch):
    """IHA §4.5.1's cost by hand. LiRA: 4 references of 2 s each scaled to the paper's 127
    (254 s), plus 1,000 records at 0.5 s of scoring per 100 records: 259 s. IHA: a fit of
    30 s of which 6 s project the 200 audited gradients, so 24 s of precompute and
    (2 s / 100 + 6 s / 200) per record: 24 + 50 = 74 s."""
    from miarepro import io
    from miarepro.artifacts import iha_tables
    from miarepro.artifacts import results as res

    monkeypatch.chdir(tmp_path)
    config = {"split": {"scheme": "balanced"}, "targets": 1, "attacks": {
        "iha": {"attack": "iha"},
        "lira": {"attack": "lira", "mode": "online", "n_reference": 4}}}
    for index in range(4):
        io.write_json(f"results/studies/s/models/reference/{index}.json",
                      {"role": "reference", "train_seconds": 2.0, "peak_memory_mb": 1.0})
    fit = iha_tables._fit_cards(res.RESULTS, "s", config, "iha")[0].removesuffix(".json")
    io.write_json(fit + ".json", {"fit_seconds": 30.0, "peak_memory_mb": 1.0,
                                  "info": {"projection_seconds": 6.0}})
    io.write_arrays(fit + ".npz", audit=np.arange(200))
    monkeypatch.setattr(res, "audit_size", lambda *_: (50, 50))
    monkeypatch.setattr(res, "score_seconds", lambda _r, _s, attack: 2.0 if attack == "iha"
                        else 0.5)
    monkeypatch.setattr(res, "score_memory_mb", lambda *_: 0.0)
    assert iha_tables.audit_minutes("s", config, "lira") * 60 == pytest.approx(254 + 5)
    assert iha_tables.audit_minutes("s", config, "iha") * 60 == pytest.approx(24 + 50)
    costs = iha_tables._costs("s", config, "iha")
    assert (costs["precompute_seconds"], costs["seconds_per_sample"]) == pytest.approx(
        (24.0, 0.05))


def _replicates(values) -> Estimate:
    values = np.asarray(values, dtype=float)
    return Estimate(float(values.mean()), values, "replicates")


def test_decide_bounds_decides_each_interval_as_decide_does():
    greater = claim("greater")
    low, high = np.array([0.01, -0.03, -0.01]), np.array([0.03, -0.01, 0.01])
    assert list(cl.decide_bounds(greater, low, high)) == ["holds", "fails", "inconclusive"]
    for lo, hi in zip(low, high, strict=True):
        spread = Estimate((lo + hi) / 2, np.linspace(lo, hi, 1001), "bootstrap")
        assert cl.decide(greater, spread) == cl.decide_bounds(greater, np.array([lo]),
                                                              np.array([hi]))[0]


def test_replication_is_high_far_from_the_boundary_and_a_coin_toss_on_it():
    greater = claim("greater")
    far = _replicates([0.05, 0.051, 0.049, 0.05, 0.052])
    assert cl.replication(greater, "s", cl.decide(greater, far), far) > 0.99
    # five replicates whose t interval ends exactly on 0: a rerun holds about half the time
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    error = values.std(ddof=1) / np.sqrt(5)
    edge = _replicates(values + 2.776 * error)  # t(4) quantile: the lower end on 0
    chance = cl.replication(greater, "s", "holds", edge)
    assert 0.4 < chance < 0.6
    assert cl.replication(greater, "s", "inconclusive", edge) == pytest.approx(1 - chance,
                                                                               abs=0.02)


def test_replication_of_matched_best_fails_at_the_level_that_decided_it():
    """A matched_best row over two rivals fails at 97.5% (Bonferroni): where that interval's
    top lies exactly on 0, a rerun fails about half the time. Redrawn at 95%, as a claim
    of one comparison, it would fail more often than the row's own rule lets it."""
    from scipy.special import stdtrit

    matched = claim("matched_best")
    values = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    error = values.std(ddof=1) / np.sqrt(5)
    edge = _replicates(values - stdtrit(4, 0.9875) * error)  # the 97.5% top on 0
    assert cl.bonferroni_level(2) == pytest.approx(0.975)
    over_two = cl.replication(matched, "s", "fails", edge, rivals=2)
    assert 0.4 < over_two < 0.6
    assert cl.replication(matched, "s", "fails", edge, rivals=1) > over_two + 0.1


def test_replication_is_only_given_for_a_testable_verdict_over_replicates():
    greater = claim("greater")
    values = _replicates([0.05, 0.06, 0.04])
    assert np.isnan(cl.replication(greater, "s", "not resolvable", values))
    assert np.isnan(cl.replication(greater, "s", "holds", estimate(0.05, 0.01)))  # a bootstrap
    # two studies' bootstraps of other sizes, through Welch: one realisation each still
    trend = uncertainty.difference_across_studies(estimate(0.05, 0.01), Estimate(
        0.02, np.linspace(0.01, 0.03, 500), "bootstrap"))
    assert trend.method == "welch" and np.isnan(cl.replication(greater, "s", "holds", trend))
    # over two studies' replicates, Welch's standard error and degrees of freedom (4 here) are
    # redrawn as those of replicates would be: 5 replicates of the same mean and error agree
    over_targets = uncertainty.difference_across_studies(values, _replicates([0.01, 0.02, 0.0]))
    error, dof = uncertainty.standard_error(over_targets)
    assert dof == pytest.approx(4.0)
    spread = np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    alike = _replicates(over_targets.value + spread / spread.std(ddof=1) * error * np.sqrt(5))
    assert uncertainty.standard_error(alike) == pytest.approx((error, dof))
    chance = cl.replication(greater, "s", "holds", over_targets)
    assert chance == pytest.approx(cl.replication(greater, "s", "holds", alike))
    assert 0.7 < chance < 0.9  # its lower end 0.017 above 0: more often kept than not


def test_replication_equals_a_rerun_drawn_replicate_by_replicate_from_the_posterior():
    """Three replicates whose interval just clears 0: the chance that a rerun holds too, by an
    independent simulation that draws the spread (Jeffreys), the true mean, then three
    replicate values and their t interval. With the spread held at the run's it would be 0.72."""
    from scipy import stats

    values = np.array([0.052, 0.030, 0.061])
    quantity = Estimate(values.mean(), values, "replicates")
    n, rng, draws = len(values), np.random.default_rng(0), 200_000
    sigma = values.std(ddof=1) * np.sqrt((n - 1) / rng.chisquare(n - 1, draws))
    rerun = rng.normal(rng.normal(values.mean(), sigma / np.sqrt(n))[:, None], sigma[:, None],
                       (draws, n))
    low = rerun.mean(1) - stats.t.ppf(0.975, n - 1) * rerun.std(1, ddof=1) / np.sqrt(n)
    expected = float(np.mean(low > 0))  # 0.58
    assert cl.replication(claim("greater"), "s", "holds", quantity) == pytest.approx(
        expected, abs=0.025)


def test_replication_predicts_how_often_a_second_run_agrees():
    """Generated claims whose true differences spread around the boundary, each run twice with
    5 replicates: the mean replication of the first run's verdicts is the share of second runs
    that agree, within sampling error."""
    greater = claim("greater")
    rng = np.random.default_rng(7)
    predicted, agreed = [], []
    for truth in rng.normal(0.0, 0.02, 400):
        first, second = (_replicates(truth + 0.02 * rng.standard_normal(5)) for _ in range(2))
        outcome = cl.decide(greater, first)
        predicted.append(cl.replication(greater, "s", outcome, first))
        agreed.append(cl.decide(greater, second) == outcome)
    assert np.mean(predicted) == pytest.approx(np.mean(agreed), abs=0.04)


def test_replication_of_a_cost_is_drawn_on_its_logs():
    """Cost ratios whose truth spreads around a claimed "at most 0.1" (BMIA-C36's form),
    each run twice with 3 replicates of log-normal timings (a factor of about 1.05 each): the
    mean replication of the first run's verdicts is the share of second runs that agree.
    Redrawn with the logs' spread on the raw scale, every rerun would be inconclusive."""
    at_most = claim("ratio_at_most", 0.1, metric="gpu_minutes")
    rng = np.random.default_rng(11)

    def run(truth: float) -> Estimate:
        a, b = (uncertainty.geometric(_replicates(scale * np.exp(0.05 * rng.standard_normal(3))))
                for scale in (truth, 1.0))
        return a.ratio(b)

    predicted, agreed = [], []
    for truth in 0.1 * np.exp(rng.normal(0.0, 0.3, 400)):
        first, second = run(truth), run(truth)
        assert first.log_scale and first.interval()[0] > 0
        outcome = cl.decide(at_most, first)
        predicted.append(cl.replication(at_most, "s", outcome, first))
        agreed.append(cl.decide(at_most, second) == outcome)
    assert np.mean(predicted) == pytest.approx(np.mean(agreed), abs=0.05)


def test_the_claims_page_counts_the_verdicts_a_rerun_would_keep():
    note = cl._replication_note(pd.DataFrame({"replication": [0.98, 0.5, np.nan]}))
    assert "0.95 or more for 1 of the 2" in note and "0.74 on average" in note


def test_the_claims_table_asks_for_exactly_the_attacks_its_claims_read(monkeypatch):
    """The claims job asks for the attacks its claims compare, in every replicate (and each
    first replicate's regime baseline), so a replicate copy's diagnostics and sweeps are never
    run for it: on the default config, evaluating every claim reads no attack outside them,
    and they name no attack it does not read."""
    import yaml

    from miarepro.artifacts import results
    from miarepro.config import validate
    from miarepro.paths import replicates_of

    config = validate(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    read = set()

    class EveryMetric(dict):  # an attack measured at every metric a claim asks for
        def __contains__(self, _metric):
            return True

        def __missing__(self, _metric):
            return Estimate(0.5, np.full(3, 0.5), "targets")

    def estimates(_results, study, attack):
        read.add((study, attack))
        return EveryMetric()

    def measure(study, attack, metric, _config):
        return estimates(None, study, attack)[metric]

    def agreement(study, pair, _fpr, bootstrap=False):  # a pair reads both attacks' scores
        read.update((study, attack) for attack in pair)
        return Estimate(0.5, np.full(3, 0.5), "targets")

    monkeypatch.setattr(results, "attack_estimates", estimates)
    monkeypatch.setattr(cl, "_measure", measure)
    monkeypatch.setattr(cl, "_agreement", agreement)
    monkeypatch.setattr(cl, "_level", lambda _over, study, _config: float(len(study)))
    monkeypatch.setattr(cl, "_failed_fits", lambda _sides, _config: "")
    firsts = results.studies_of({}, config)
    table = cl.evaluate(config, firsts)
    assert (table["verdict"] != "not run").sum() > 100  # the claims were evaluated
    asked = {(Path(path).parts[-3], Path(path).stem)
             for path in cl.inputs("results", config["artifacts"]["claims"], config)
             if Path(path).parent.name == "metrics"}
    # beyond what this evaluation read: first replicates' regime baselines, and the studies
    # inside a trend's axis (the run's target cards decide which studies are its ends)
    baselines = {(study, config["studies"][study]["regime"]["baseline"]) for study in firsts
                 if config["studies"][study].get("regime", {}).get("baseline")}
    trends = {(study, cl._trend_attack(config["studies"][study], claim)) for study in firsts
              for claim in cl.load_claims(config["studies"][study]["paper"])
              if claim.kind in cl.TRENDS}
    assert read <= asked and asked - read <= baselines | trends
    copies = {copy for study in firsts for copy in replicates_of(study, config)[1:]}
    assert copies and {study for study, _ in asked - read} <= set(firsts)
    assert ("subpop-mnist-r1", "subpop") in read  # the claims' attack, in every copy
    scored = {(Path(path).parts[-3], Path(path).stem)
              for path in cl.inputs("results", config["artifacts"]["claims"], config)
              if Path(path).parent.name == "scores"}  # IHA-C28's pairs: scores, not metrics
    assert scored == {(copy, attack) for copy in ("iha-mnist", "iha-mnist-r1", "iha-mnist-r2")
                      for attack in ("lira-online", "loss", "iha")}
    assert ("subpop-mnist-r1", "subpop-beta-2e-1") not in asked  # a sweep: the first's figure


def _over_replicates(values) -> Estimate:
    values = np.asarray(values, dtype=float)
    return Estimate(float(values.mean()), values, "replicates")


def test_matched_best_beats_every_rival_and_fails_only_at_a_bonferroni_level():
    """BMIA-C25's form (BMIA with references of the target's architecture beats every other
    architecture's), on 5 replicates, t(4) = 2.776 (3.495 at 97.5%): it holds only where the
    paired difference from every rival lies above 0, whichever rival scores highest, and it
    fails only where one rival is above it at 1 - 0.05 / k for k rivals."""
    z = np.arange(-2.0, 3.0) / np.std(np.arange(-2.0, 3.0), ddof=1)  # mean 0, spread 1
    a = 0.06 + 0.002 * z
    tight = a - (0.010 + 0.001 * z)  # the highest-scoring rival (0.050), clearly below a
    wide = a - (0.015 + 0.020 * z)  # lower on average (0.045), its difference straddles 0
    matched = claim("matched_best")
    A, rivals = _over_replicates(a), [_over_replicates(tight), _over_replicates(wide)]
    assert cl.verdict(matched, A, rivals[0])[0] == "holds"  # against the highest alone
    outcome, quantity, index = cl.matched_best_verdict(matched, A, rivals)
    assert (outcome, index) == ("inconclusive", 1)
    assert quantity.value == pytest.approx(0.015)
    assert cl.matched_best_verdict(matched, A, rivals[:1])[:3:2] == ("holds", 0)
    # a rival above a by 0.03 with a standard error of 0.01: the 95% interval's top is
    # -0.0022, the 97.5% one's +0.0050; alone it fails, beside another rival it does not
    above = _over_replicates(a - (-0.03 + 0.01 * np.sqrt(5.0) * z))
    assert cl.matched_best_verdict(matched, A, [above])[0] == "fails"
    assert cl.matched_best_verdict(matched, A, [rivals[0], above])[:3:2] == ("inconclusive", 1)
    further = _over_replicates(a - (-0.04 + 0.01 * np.sqrt(5.0) * z))  # top: -0.0050 at 97.5%
    outcome, quantity, index = cl.matched_best_verdict(matched, A, [rivals[0], further])
    assert (outcome, index) == ("fails", 1) and quantity.value == pytest.approx(-0.04)
    # a rival whose values are missing (NaN) neither fails the claim nor hides one that does
    unknown = _over_replicates(np.full(5, np.nan))
    outcome, _, index = cl.matched_best_verdict(matched, A, [unknown, further])
    assert (outcome, index) == ("fails", 1)
    assert cl.matched_best_verdict(matched, A, [unknown, rivals[0]])[:3:2] == ("inconclusive", 0)


def test_a_claim_row_shows_our_numbers_in_the_papers_units():
    """Subpop prints AUC in percent: our side of its row does too, beside the paper's 62.88;
    a paper that prints AUC as a fraction (IHA) keeps ours as one."""
    claim = next(c for c in cl.load_claims("subpop") if c.id == "SUB-C1")
    ours, theirs = (Estimate(v, np.array([v - 0.01, v, v + 0.01]), "targets")
                    for v in (0.49, 0.50))
    difference = Estimate(-0.01, np.array([-0.02, -0.01, 0.0]), "targets")
    low, high = (100 * bound for bound in ours.interval())
    text = cl._describe(claim, [ours, theirs], difference)
    assert text.startswith(f"49.00 [{low:.2f}, {high:.2f}] vs 50.00 [")
    assert "; difference -1.00 [" in text
    iha = next(c for c in cl.load_claims("iha") if c.metric == "auc")
    assert cl._describe(iha, [ours], ours) == f"0.490 [{low / 100:.3f}, {high / 100:.3f}]"


def test_a_row_links_the_artifact_that_shows_its_study():
    """A claim made on BMIA's CIFAR-10 figure reads, on the Purchase study, the figure that
    shows Purchase (BMIA-F3b); on QMIA's Table 1 (ResNet-50's), the ResNet-10 stand-in's
    numbers are in Table 6, the paper table that lists it; with no such artifact, the claim's
    own. A trend's decrease is named as one, from the smallest level to the largest."""
    config = {"artifacts": {
        "BMIA-F3a": {"builder": "sweep", "studies": ["cifar"]},
        "BMIA-F3b": {"builder": "sweep", "studies": ["purchase"]},
        "BMIA-F4": {"builder": "grid", "studies": ["purchase"]},
        "QMIA-T1": {"builder": "paper_table", "studies": ["mlp4"]},
        "QMIA-T3": {"builder": "accuracy_table", "studies": ["mlp1", "mlp4"]},
        "QMIA-T6": {"builder": "paper_table", "studies": ["mlp1", "mlp4"]},
        "QMIA-X1": {"builder": "fit_costs", "studies": ["mlp4"]}}}

    def claim(paper, artifact, kind="greater"):
        return cl.Claim("X", paper, artifact, "", "auc", kind, {"attack": "a"},
                        {"attack": "b"}, None, ("d",))

    assert cl.showing_artifact(claim("bmia", "BMIA-F3a"), ["purchase"], config) == "BMIA-F3b"
    assert cl.showing_artifact(claim("bmia", "BMIA-F3a"), ["cifar"], config) == "BMIA-F3a"
    assert cl.showing_artifact(claim("qmia", "QMIA-T1"), ["mlp1"], config) == "QMIA-T6"
    assert cl.showing_artifact(claim("qmia", "QMIA-X1"), ["mlp1"], config) == "QMIA-X1"
    assert cl.showing_artifact(claim("bmia", "BMIA-F3a"), ["purchase", "cifar"],
                               config) == "BMIA-F3a"  # no one artifact shows both
    falls = Estimate(0.1, np.array([0.08, 0.1, 0.12]), "replicates")
    assert cl._quantity_text(claim("sm", "SM-F7", "decreases"), falls).startswith("decrease ")
    assert cl._quantity_text(claim("sm", "SM-F7"), falls).startswith("difference ")


def test_the_claims_job_reads_every_artifact_setting_its_links_depend_on():
    """The claims job gets only the artifact settings it reads (its params): on them each row
    links the same artifact as on the whole config. With the studies of the artifacts left
    out, BMIA's Purchase rows linked CIFAR-10's figures in the workflow though not here."""
    import yaml

    from miarepro import config as miarepro_config

    config = miarepro_config.validate(yaml.safe_load(
        (Path(__file__).resolve().parent.parent / "config" / "config.yaml").read_text()))
    read = {**config, "artifacts": cl.artifacts_read(config)}
    moved = 0
    for study, study_config in config["studies"].items():
        for claim in cl.load_claims(study_config["paper"]):
            shown = cl.showing_artifact(claim, [study], config)
            assert cl.showing_artifact(claim, [study], read) == shown, (claim.id, study)
            moved += shown != claim.artifact
    assert moved  # some rows do link another artifact than their claim's (BMIA-F3b)


def test_a_claim_on_a_generator_that_collapsed_in_a_replicate_is_not_run(tmp_path, monkeypatch):
    """Subpop's fit checks its generator (the share of crafted records keeping their class);
    where it stayed below the bar in every attempt in one replicate, a claim on that attack
    is not run, naming the replicate and the measure, rather than decided on a collapsed
    generator's scores. Other attacks' claims on the study are unaffected."""
    import yaml

    from miarepro.artifacts import builders, results
    from miarepro.config import validate
    from miarepro.paths import fit_paths, replicates_of

    config = validate(yaml.safe_load((ROOT / "config" / "config.yaml").read_text()))
    monkeypatch.setattr(results, "RESULTS", str(tmp_path))
    study = "subpop-mnist-lenet"
    for copy in replicates_of(study, config):
        for path in fit_paths(str(tmp_path), copy, config["studies"][copy],
                              config["studies"][copy]["attacks"]["subpop"]):
            good = not copy.endswith("-r2")
            Path(f"{path}.json").parent.mkdir(parents=True, exist_ok=True)
            Path(f"{path}.json").write_text(json.dumps({"info": {
                "good_enough": good, "class_kept": 0.9 if good else 0.11,
                "min_class_kept": 0.5, "attempts": [{}] * (1 if good else 3)}}))
    expected = (f"needs a generator good enough: the fit fell short, subpop's in {study}-r2 "
                "(11% of the attacker's records kept their class in the best of 3 attempts, "
                "against 50%)")
    assert cl._failed_fits([(study, "subpop")], config) == expected
    assert cl._failed_fits([(study, "yeom")], config) == ""  # no fit that checks itself

    class EveryMetric(dict):
        def __contains__(self, _metric):
            return True

    monkeypatch.setattr(results, "attack_estimates", lambda *_: EveryMetric())
    (claim,) = [c for c in cl.load_claims("subpop") if c.id == "SUB-C4"]
    why = cl._side_estimates(claim, study, [claim.a, claim.b], ["subpop", "yeom"], config)
    assert why == expected
    failed = f"{study}-r2"
    card = fit_paths(str(tmp_path), failed, config["studies"][failed],
                     config["studies"][failed]["attacks"]["subpop"])[0] + ".json"
    assert card in cl.inputs(str(tmp_path), config["artifacts"]["claims"], config)
    # the tables showing the attack read the cards too, and mark a generator that fell short
    first = fit_paths(str(tmp_path), study, config["studies"][study],
                      config["studies"][study]["attacks"]["subpop"])[0] + ".json"
    assert first in builders.study_inputs(str(tmp_path), study, config["studies"][study])
    assert results.failed_fit(str(tmp_path), study, config["studies"][study], "subpop") is None
    assert results.failed_fit(str(tmp_path), failed, config["studies"][failed], "subpop") == (
        "11% of the attacker's records kept their class in the best of 3 attempts, "
        "against 50%")


def test_a_parity_on_average_that_could_not_fail_reads_no_signal(tmp_path, monkeypatch):
    """A pooled parity (on a par over its studies) is vacuous as one on a study is: where an
    attack at chance would pass it in every study, its "holds" reads "no signal"."""
    from miarepro.artifacts import results

    parity = cl.parse_claims("stolen-memories", """
- id: X-C1
  artifact: SM-F5
  statement: "on a par on average"
  metric: accuracy
  kind: not_below
  value: 3.0
  basis: "a test's"
  a: {attack: general_wb}
  b: {attack: bayes_wb}
  datasets: [synthetic]
  pooled: true
""")
    monkeypatch.setattr(cl, "load_claims", lambda paper: tuple(parity))
    rng = np.random.default_rng(5)

    def verdict_at(level: float) -> str:
        values = {study: {"bayes-wb": rng.normal(level, 0.01, 10)} for study in ("s1", "s2")}
        for draws in values.values():
            draws["general-wb"] = draws["bayes-wb"] + rng.normal(0.0, 0.002, 10)
        monkeypatch.setattr(results, "attack_estimates", lambda _r, study, attack: {
            "accuracy": Estimate(values[study][attack].mean(), values[study][attack],
                                 "targets")})
        config = {"artifacts": {}, "studies": {study: {
            "paper": "stolen-memories", "paper_dataset": "synthetic", "targets": 10,
            "split": {"scheme": "partition"},
            "attacks": {name: {"attack": name.replace("-", "_"),
                               "paper_attack": name.replace("-", "_")}
                        for name in ("bayes-wb", "general-wb")}} for study in values}}
        [row] = cl.evaluate(config, list(values)).to_dict("records")
        return row["verdict"]

    assert verdict_at(0.70) == "holds"  # bayes-wb 20 points above chance: it could fail
    assert verdict_at(0.51) == "no signal"  # 1 point above chance, within the 3-point tolerance


def test_a_row_whose_artifact_the_run_does_not_build_links_nothing():
    """SM-C29 (Adult's advantage) belongs to SM-X1, which no config builds yet: its row names
    the artifact without a link or a command that would fail."""
    import pandas as pd

    row = cl._shown_in({"claim": "SM-C29", "paper": "stolen-memories", "statement": "s",
                        "study": "sm-adult-like-4000", "paper_dataset": "adult", "paper_a": None,
                        "paper_b": None, "ours": "o", "verdict": "holds"}, "SM-X1",
                       {"artifacts": {"SM-F10": {}}})
    assert row["command"] == ""
    [line] = cl._claim_rows(pd.DataFrame([row]))[2:]
    assert "| SM-X1, which this configuration does not build |" in line and "](" not in line
    built = cl._shown_in(row, "SM-F10", {"artifacts": {"SM-F10": {}}})
    [line] = cl._claim_rows(pd.DataFrame([built]))[2:]
    assert "[SM-F10](SM-F10.png): `snakemake --profile profiles/local " in line
