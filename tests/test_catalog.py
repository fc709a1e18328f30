"""The artifact checklist and the transcribed paper numbers.

These files are the yardstick every reproduced table is measured against, so the tests pin the
checklist's size and order, spot-check transcribed cells against the papers' tables, and check
that each table has one row per printed number (cells printed as "-" or left blank omitted).
"""

from __future__ import annotations

import math
import re

import pandas as pd
import pytest

from miarepro.artifacts import catalog as cat

ID_REGEX = re.compile(r"^(BMIA|SM|QMIA|IHA|SUB)-[TFX]\d+[a-z]?$")


@pytest.fixture(scope="module")
def values() -> pd.DataFrame:
    return cat.paper_values()


def cell(values: pd.DataFrame, artifact: str, metric: str, dataset: str = "", attack: str = "",
         setting: str = "", model: str = "") -> pd.Series:
    """The single row of one printed table cell."""
    rows = values[(values["artifact"] == artifact) & (values["dataset"] == dataset)
                  & (values["model"] == model) & (values["attack"] == attack)
                  & (values["setting"] == setting) & (values["metric"] == metric)]
    assert len(rows) == 1, (artifact, dataset, model, attack, setting, metric, len(rows))
    return rows.iloc[0]


# --- catalog --------------------------------------------------------------------------------

def test_catalog_has_the_66_checklist_ids_in_order_and_theorem_1() -> None:
    """The matrix's 66 checklist IDs, plus QMIA-X2: the paper's Theorem 1 (FPR = a on fresh
    non-members), a checkable statement of the text that no table prints."""
    ids = cat.ARTIFACT_IDS
    assert len(ids) == 67 and "QMIA-X2" in ids
    assert len(set(ids)) == 67
    assert all(ID_REGEX.match(artifact) for artifact in ids)
    assert ids[0] == "BMIA-T1" and ids[-1] == "SUB-F2"
    assert tuple(cat.load_catalog()) == ids
    # papers appear as contiguous blocks in the checklist's order
    prefixes = [artifact.split("-")[0] for artifact in ids]
    blocks = [p for i, p in enumerate(prefixes) if i == 0 or p != prefixes[i - 1]]
    assert blocks == ["BMIA", "SM", "QMIA", "IHA", "SUB"]
    assert [prefixes.count(p) for p in blocks] == [13, 16, 17, 16, 5]


def test_catalog_entries_are_well_formed() -> None:
    catalog = cat.load_catalog()
    assert {entry["class"] for entry in catalog.values()} == {"Q", "S", "P", "config"}
    assert {a for a, e in catalog.items() if e["class"] == "S"} == {
        "SM-F1a", "SM-F2", "SM-F3", "SUB-F1"}
    assert {a for a, e in catalog.items() if e["class"] == "config"} == {
        "QMIA-T4", "QMIA-T5", "IHA-T1"}
    for artifact, entry in catalog.items():
        assert set(entry) == set(cat.REQUIRED_KEYS), artifact
        if entry["class"] == "S":
            assert re.search(r"qualitative|not reproducible", entry["todo"]), artifact
    assert catalog["BMIA-T1"]["needs"] == [
        "cifar10", "cifar100", "texas100", "purchase100", "imagenet", "gpu"]
    assert catalog["SM-F5"]["needs"] == []  # generated data only


def test_load_catalog_returns_a_copy() -> None:
    cat.load_catalog()["BMIA-T1"]["needs"].append("mnist")
    assert "mnist" not in cat.load_catalog()["BMIA-T1"]["needs"]


GOOD_ENTRY = ("  paper: bmia\n  kind: table\n  class: Q\n  title: t\n  needs: [gpu]\n"
              "  todo: t\n")


@pytest.mark.parametrize("text,words", [
    ("BMIA-T1:\n" + GOOD_ENTRY.replace("kind: table", "kind: plot"), ["BMIA-T1", "kind"]),
    ("BMIA-T1:\n" + GOOD_ENTRY.replace("class: Q", "class: X"), ["BMIA-T1", "class"]),
    ("BMIA-T1:\n" + GOOD_ENTRY.replace("paper: bmia", "paper: qmia"), ["BMIA-T1", "paper"]),
    ("BMIA-T1:\n" + GOOD_ENTRY.replace("[gpu]", "[tpu]"), ["BMIA-T1", "needs"]),
    ("BMIA-T1:\n" + GOOD_ENTRY.replace("  todo: t\n", ""), ["BMIA-T1", "todo"]),
    ("BMIA-T1:\n" + GOOD_ENTRY + "  extra: 1\n", ["BMIA-T1", "extra"]),
    ("BMIA-F1:\n" + GOOD_ENTRY, ["BMIA-F1", "kind"]),
    ("BMIA-Table1:\n" + GOOD_ENTRY, ["BMIA-Table1"]),
])
def test_bad_catalog_entries_are_rejected_by_name(text: str, words: list[str]) -> None:
    with pytest.raises(ValueError) as error:
        cat.parse_catalog(text)
    assert all(word in str(error.value) for word in words)


def test_good_catalog_entry_parses() -> None:
    assert cat.parse_catalog("BMIA-T1:\n" + GOOD_ENTRY)["BMIA-T1"]["needs"] == ["gpu"]


# --- paper values ---------------------------------------------------------------------------

def test_paper_values_columns_and_artifacts(values: pd.DataFrame) -> None:
    assert tuple(values.columns) == cat.PAPER_VALUE_COLUMNS
    assert set(values["artifact"]) <= set(cat.ARTIFACT_IDS)
    assert values["value"].notna().all()
    assert values["dataset"].str.fullmatch(r"[a-z0-9_+]*").all()
    assert values["attack"].str.fullmatch(r"[a-z0-9_]*").all()
    assert values["metric"].str.fullmatch(r"[a-z_]+(@\d+(\.\d+)?%)?").all()
    # the paper-table builder reads the FPR out of every "@" metric
    for metric in values.loc[values["metric"].str.contains("@"), "metric"].unique():
        assert 0 < float(metric.split("@")[1].rstrip("%")) < 100
    # every text artifact of the checklist has its quoted numbers
    texts = {a for a, e in cat.load_catalog().items() if e["kind"] == "text"}
    assert texts == {"SM-X1", "QMIA-X1", "QMIA-X2", "IHA-X1", "IHA-X2"}
    assert texts <= set(values["artifact"])


# Rows per artifact = numeric cells of the paper's table (shape minus "-" or blank cells).
EXPECTED_ROWS = {
    "BMIA-T1": 12 * 5 * 3 - 5,  # Attack-P has no Time on any of the 5 datasets
    "BMIA-T2": 6 * 4,
    "QMIA-T1": 6 * 8,
    "QMIA-T2": 4 * 8,
    "QMIA-T3": 3 * 4 - 3,  # ImageNet has ResNet-50 only
    "QMIA-T6": 24 * 4,
    "QMIA-T7": 24 * 4,
    "QMIA-X1": 3 * 2,
    "QMIA-X2": 3,  # Theorem 1 at a = 1, 5 and 10%
    "IHA-T2": 4 * 3 * 3,
    "IHA-T3": 3 * 6,
    "IHA-T4": 8 * 3,
    "IHA-T5a": 5 * 5 - 5,  # empty diagonal
    "IHA-T5b": 5 * 5 - 5,
    "IHA-T6": 4 * 5 + 2,  # and the audit minutes of IHA and LiRA in §4.5.1's text
    "IHA-T7": 4 * 9 - 3,  # IHA (Ours) on MLP-4 is blank
    "IHA-T8": 2 * 6,
    "IHA-T9": 6 * 3,
    "IHA-X1": 6,
    "IHA-X2": 3,
    "SUB-T1": 7 * 2,
    "SUB-T2": 7 * 7 + 1,  # natural subpopulation: SVHN only
    "SUB-T3": 8 * 4,  # both blocks (all targets known, per new sample) of four rows
    "SM-X1": 31,
    "SM-F7": 1,
    "QMIA-F1": 1,
    "QMIA-F5a": 1,
    "QMIA-F5b": 1,
}


def test_row_counts_per_artifact(values: pd.DataFrame) -> None:
    counts = values.groupby("artifact").size().to_dict()
    assert counts == EXPECTED_ROWS
    assert len(cat.paper_values("BMIA-T1")) == EXPECTED_ROWS["BMIA-T1"]
    assert cat.paper_values("BMIA-F1").empty


def test_cells_are_unique(values: pd.DataFrame) -> None:
    key = ["artifact", "dataset", "model", "attack", "setting", "metric"]
    assert not values.duplicated(key).any()


@pytest.mark.parametrize("where,value,std", [
    (dict(artifact="BMIA-T1", dataset="purchase100", attack="lira_offline", setting="n=8",
          metric="tpr@1%"), 4.60, None),
    (dict(artifact="BMIA-T1", dataset="cifar10", attack="bmia", setting="n=1",
          metric="tpr@0.1%"), 2.28, None),
    (dict(artifact="BMIA-T1", dataset="cifar100", attack="attack_r", setting="n=4",
          metric="gpu_minutes"), 211.55, None),
    (dict(artifact="BMIA-T1", dataset="imagenet", attack="qmia", metric="gpu_minutes"),
     6041.97, None),
    (dict(artifact="BMIA-T2", dataset="cifar10_vs_cinic10", attack="rmia", setting="n=8",
          metric="tpr@5%"), 17.32, None),
    (dict(artifact="QMIA-T1", dataset="imagenet", model="resnet50", attack="qmia",
          metric="precision@0.1%"), 99.64, None),
    (dict(artifact="QMIA-T2", dataset="acs_ny_mobility", attack="qmia", metric="precision@0.5%"),
     85.27, None),
    (dict(artifact="QMIA-T2", dataset="openml_361057", attack="lira", setting="n=64",
          metric="precision@1%"), 82.73, None),
    (dict(artifact="QMIA-T3", dataset="imagenet", model="resnet50", metric="test_acc"),
     67.5, None),
    (dict(artifact="QMIA-T6", dataset="cifar10", model="resnet50", attack="marginal",
          metric="precision@1%"), 48.70, None),
    (dict(artifact="QMIA-T7", dataset="cifar100", model="resnet18", attack="qmia",
          metric="pinball@0.1%"), 0.0364, None),
    (dict(artifact="QMIA-X1", dataset="cinic10", attack="qmia", setting="training+hpo",
          metric="gpu_minutes"), 280, None),
    (dict(artifact="IHA-T2", dataset="purchase100", attack="iha", metric="auc"), 0.703, 0.004),
    (dict(artifact="IHA-T2", dataset="fashion_mnist", attack="lira_online", metric="auc"),
     0.578, 0.020),
    (dict(artifact="IHA-T3", dataset="fashion_mnist", attack="iha_cg", metric="tpr@0.1%"),
     0.86, None),
    (dict(artifact="IHA-T4", dataset="purchase100_s", attack="iha", setting="terms=loss+I1+I2",
          metric="tpr@1%"), 19.96, None),
    (dict(artifact="IHA-T5a", dataset="purchase100_s", attack="lira_l",
          setting="fpr=0.05;vs=iha", metric="agreement_members"), 0.768, None),
    (dict(artifact="IHA-T5b", dataset="purchase100_s", attack="ground_truth",
          setting="fpr=0.3;vs=lira_online", metric="agreement_nonmembers"), 0.702, None),
    (dict(artifact="IHA-T6", dataset="purchase100", attack="lira_online",
          metric="precompute_seconds"), 192 * 60, None),
    (dict(artifact="IHA-T7", dataset="purchase100_s", model="mlp4", attack="lira_online",
          metric="tpr@1%"), 25.17, None),
    (dict(artifact="IHA-T8", dataset="mnist_odd", attack="iha",
          setting="conditioning=low_rank;eps=0.2", metric="auc"), 0.500, None),
    (dict(artifact="IHA-T9", dataset="purchase100_s", attack="iha", setting="fraction=0.9",
          metric="auc"), 0.733, 0.010),
    (dict(artifact="IHA-X1", dataset="purchase100_s", attack="l_attack", metric="tpr@30%"),
     0.668, None),
    (dict(artifact="IHA-X2", dataset="purchase100_s", model="mlp4", attack="iha",
          setting="damping=0.5", metric="tpr@0.1%"), 12.12, None),
    (dict(artifact="SUB-T1", dataset="cifar100", model="lenet", metric="test_acc"),
     22.37, None),
    (dict(artifact="SUB-T2", dataset="cifar100", model="resnet20", attack="subpop",
          metric="auc"), 94.56, None),
    (dict(artifact="SUB-T2", dataset="svhn", model="lenet", attack="subpop_natural",
          metric="auc"), 61.61, None),
    (dict(artifact="SUB-T3", dataset="mnist+fashion_mnist", model="mlp", attack="sablayrolles",
          setting="per_new_sample", metric="train_minutes"), 23.185, None),
    (dict(artifact="SM-X1", dataset="mnist", attack="bayes_wb", setting="vs=naive",
          metric="advantage_ratio"), 12.5, None),
    (dict(artifact="SM-X1", dataset="lfw", attack="general_wb", setting="eps=0.25",
          metric="accuracy"), 53.5, None),
])
def test_spot_checked_cells(values: pd.DataFrame, where: dict[str, str], value: float,
                            std: float | None) -> None:
    row = cell(values, **where)
    assert row["value"] == pytest.approx(value)
    if std is None:
        assert math.isnan(row["std"])
    else:
        assert row["std"] == pytest.approx(std)


def test_missing_cells_are_omitted(values: pd.DataFrame) -> None:
    attack_p = values[(values["artifact"] == "BMIA-T1") & (values["attack"] == "attack_p")]
    assert "gpu_minutes" not in set(attack_p["metric"])
    mlp4_iha = values[(values["artifact"] == "IHA-T7") & (values["model"] == "mlp4")
                      & (values["attack"] == "iha")]
    assert mlp4_iha.empty
    natural = values[values["attack"] == "subpop_natural"]
    assert set(natural["dataset"]) == {"svhn"}


def test_std_only_where_a_plus_minus_is_printed(values: pd.DataFrame) -> None:
    with_std = values[values["std"].notna()]
    assert set(with_std["artifact"]) == {"IHA-T2", "IHA-T3", "IHA-T4", "IHA-T7", "IHA-T9"}
    assert set(with_std["metric"]) == {"auc"}
    iha_aucs = values[values["artifact"].isin(set(with_std["artifact"]))
                      & (values["metric"] == "auc")]
    assert iha_aucs["std"].notna().all()


def test_contradictions_are_flagged(values: pd.DataFrame) -> None:
    texas = cell(values, "BMIA-T1", "tpr@1%", "texas100", "lira_offline", "n=4")
    assert "duplicated" in texas["note"]
    t1 = cell(values, "QMIA-T1", "precision@1%", "cifar10", "marginal", model="resnet50")
    assert t1["value"] == pytest.approx(48.56) and "48.70" in t1["note"]


PAPER_KEYS_SKELETON = "".join(f"{paper}: []\n" for paper in cat.PAPERS.values()
                              if paper != "bmia")


def test_unknown_artifact_is_rejected() -> None:
    with pytest.raises(ValueError, match="BMIA-T9"):
        cat.paper_values("BMIA-T9")


def test_bad_paper_values_are_rejected() -> None:
    raw = pd.read_csv(cat.PAPER_VALUES_PATH, dtype=str, keep_default_na=False)
    assert len(cat.check_paper_values(raw)) == len(raw)
    broken = raw.copy()
    broken.loc[0, "value"] = "0.05%"
    with pytest.raises(ValueError, match="not a number"):
        cat.check_paper_values(broken)
    broken = raw.copy()
    broken.loc[0, "artifact"] = "BMIA-T9"
    with pytest.raises(ValueError, match="BMIA-T9"):
        cat.check_paper_values(broken)
    with pytest.raises(ValueError, match="duplicate"):
        cat.check_paper_values(pd.concat([raw, raw.iloc[:1]], ignore_index=True))


def test_paper_keys_are_the_printed_cells_and_the_documented_series() -> None:
    bmia = cat.paper_keys("bmia")
    assert {"purchase100", "cifar10", "cifar10_architectures"} <= bmia.datasets  # printed, plotted
    assert "cifar10_vs_cinic10" in bmia.datasets and "cinic10" not in bmia.datasets
    assert {"n=2", "n=4", "n=8"} <= bmia.settings["lira_offline"]
    assert "n=1;hessian=full" in bmia.settings["bmia"]  # Figure 5 plots it, no table prints it
    assert "omniscient" not in bmia.settings and "omniscient" in cat.paper_keys(
        "stolen-memories").settings
    every = cat.paper_keys("cross-paper")  # a cross-paper study may name any paper's keys
    assert every.datasets >= bmia.datasets | cat.paper_keys("iha").datasets


@pytest.mark.parametrize(("text", "words"), [
    ("bmia: []", "one entry per paper"),
    (PAPER_KEYS_SKELETON + "bmia: [{artifacts: [BMIA-F5], attacks: {bmia: [x]}}]",
     "needs 'why'"),
    (PAPER_KEYS_SKELETON + "bmia: [{why: w, attacks: {bmia: [x]}}]",
     "either 'artifacts' or 'variant: true'"),
    (PAPER_KEYS_SKELETON + "bmia: [{artifacts: [BMIA-F99], why: w}]", "BMIA-F99"),
    (PAPER_KEYS_SKELETON + "bmia: [{variant: true, why: w, setting: x}]", "unknown key"),
])
def test_bad_paper_keys_are_rejected_by_entry(text: str, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        cat.parse_paper_keys(text)


def test_paper_rows_without_an_attack_instance_are_shown_as_not_run():
    import pandas as pd

    from miarepro.artifacts.builders import _rows_not_run
    from miarepro.artifacts.catalog import implemented

    assert implemented("attack_p") and implemented("lira_offline") and implemented("bmia")
    assert not implemented("no_such_attack")
    papers = pd.DataFrame({
        "dataset": ["purchase100"] * 4 + ["cifar10"],
        "attack": ["attack_p", "no_such_attack", "lira_offline", "lira_offline", "qmia"],
        "setting": ["", "", "n=2", "n=8", ""], "metric": ["tpr@1%"] * 5,
        "value": [1.1, 1.08, 1.87, 4.6, 1.23]})
    study = {"paper_dataset": "purchase100", "attacks": {
        "p": {"paper_attack": "attack_p"}, "l8": {"paper_attack": "lira_offline",
                                                  "paper_setting": "n=8"}}}
    rows = _rows_not_run("BMIA-T1", papers, "s", study, {"metrics": ["tpr@1%"]})
    shown = {(r["attack"], r["paper"], r["ours_text"]) for r in rows}
    assert shown == {("no_such_attack", 1.08, "not implemented yet"),
                     ("lira_offline (n=2)", 1.87, "not run in this study")}
    # named as another study's instance of the row names it, where one exists
    rows = _rows_not_run("BMIA-T1", papers, "s", study, {"metrics": ["tpr@1%"]},
                         labels={("lira_offline", "n=2"): "LiRA offline (n=2)"})
    assert {r["attack"] for r in rows} == {"no_such_attack", "LiRA offline (n=2)"}
    rows = _rows_not_run("BMIA-T1", papers, "s", study, {"metrics": ["tpr@1%"]},
                         labels={("lira_offline", "*"): "LiRA offline"})  # another setting's
    assert {r["attack"] for r in rows} == {"no_such_attack", "LiRA offline (n=2)"}
    assert {r["paper_attack"] for r in rows} == {"no_such_attack", "lira_offline"}


def test_a_dataset_finds_the_number_printed_for_its_group_and_its_model() -> None:
    from miarepro.artifacts.catalog import paper_value, paper_values

    table3 = paper_values("SUB-T3")  # one column for CIFAR-10 and -100, one per architecture
    for dataset in ("cifar10", "cifar100"):
        assert paper_value(table3, dataset, "watson", "all_targets_known", "train_minutes",
                           "resnet20") == 281.60
        assert paper_value(table3, dataset, "sablayrolles", "per_new_sample", "train_minutes",
                           "lenet") == 28.21
    assert paper_value(table3, "cifar", "watson", "all_targets_known", "train_minutes") is None
    assert paper_value(paper_values("QMIA-X1"), "cifar100", "qmia", "training+hpo",
                       "gpu_minutes") == 240


def test_paper_seed_noise_beside_the_spread_over_our_targets(monkeypatch):
    """IHA prints AUC ± std over its target models; tables show ours, the standard deviation
    over the study's targets, beside it."""
    from miarepro.artifacts import builders
    from miarepro.artifacts import results as res

    papers = cat.paper_values("IHA-T2")
    assert cat.paper_value(papers, "purchase100", "lira_online", "", "auc") == 0.644
    assert cat.paper_value(papers, "purchase100", "lira_online", "", "auc",
                           column="std") == 0.004
    assert cat.paper_value(papers, "purchase100", "loss", "", "tpr@1%", column="std") is None
    table = pd.DataFrame({"replicate": [-1, 0, -1, 0, -1], "auc": [0.60, 0.9, 0.62, 0.9, 0.64]})
    monkeypatch.setattr(res, "_metrics_table", lambda *args: table)
    spread, targets = res.target_spread("results", "study", "attack", "auc")
    assert targets == 3 and spread == pytest.approx(0.02)  # the replicate rows left out
    assert builders._seed_noise({"ours_sd": spread, "targets": 3, "paper_sd": 0.004}) == (
        "0.02 (3 targets) / 0.004")
    assert builders._seed_noise({"ours_sd": float("nan"), "targets": 1, "paper_sd": None}) == (
        "— (1 target) / —")
    assert builders._seed_noise({"targets": float("nan")}) == "—"  # a row not run


def test_a_table_lists_the_cells_its_paper_contradicts() -> None:
    """QMIA's Table 1 and Table 6 print two ResNet-50 CIFAR-10 cells differently: the page of
    each shows the doubt beside the number it copies; a table with no flagged cell lists none."""
    doubts = cat.contradictions("QMIA-T1")
    assert doubts == [
        "- cifar10 resnet50 marginal, precision@1% = 48.56: [!] QMIA-T6 ResNet-50 gives 48.70 "
        "(A15)",
        "- cifar10 resnet50 qmia, precision@0.1% = 64.48: [!] QMIA-T6 ResNet-50 gives 59.68 "
        "(A15)"]
    assert cat.contradictions("SUB-T2") == []
    assert cat.contradictions("SM-F5") == []  # a figure the paper prints no number for


def test_a_table_says_which_paper_values_are_stated_not_measured() -> None:
    """QMIA-X2's paper column is Theorem 1's FPR = a, not a measurement: its page says so;
    a table of printed measurements says nothing."""
    assert cat.stated_not_measured("QMIA-X2") == [
        "- Theorem 1: FPR = a for the pinball-loss minimiser over a class closed under shifts; "
        "not a printed measurement"]
    assert cat.stated_not_measured("BMIA-T1") == []


def test_a_page_of_several_studies_says_each_deviation_once():
    """Deviations several studies share go under all of them, first; each study then lists
    its own, or points above where it has none of its own."""
    from miarepro.artifacts.builders import deviation_notes

    config = {"scale": "miniature", "studies": {
        "a": {"paper_dataset": "purchase100", "deviations": ["30 epochs", "3 replicates", "a's"]},
        "b": {"paper_dataset": "mnist", "deviations": ["30 epochs", "3 replicates"]},
        "c": {"paper_dataset": "cifar10", "deviations": ["30 epochs", "c's"]}}}
    lines = deviation_notes(config, ["a", "b", "c"])
    assert lines == [
        "- **a** (purchase100), **b** (mnist), **c** (cifar10): scaled-down proxy: 30 epochs",
        "- **a** (purchase100), **b** (mnist): scaled-down proxy: 3 replicates",
        "- **a** (purchase100): scaled-down proxy: a's",
        "- **b** (mnist): scaled-down proxy: as above",
        "- **c** (cifar10): scaled-down proxy: c's"]
    alone = deviation_notes({**config, "scale": "paper"}, ["a", "a"])  # listed twice: once
    assert alone == ["- **a** (purchase100): scaled-down proxy: 30 epochs; 3 replicates; a's"]
    exact = {"scale": "paper", "studies": {"d": {"paper_dataset": "svhn", "deviations": []}}}
    assert deviation_notes(exact, ["d"]) == ["- **d** (svhn): paper settings"]
