"""End-to-end: the whole workflow on a tiny config, then dry runs proving rerun scope."""

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SNAKEMAKE = [sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile")]

SM_FIT = {"proxies": 2, "shadows": 2, "displacement_widths": [0, 2], "meta_widths": [0],
          "epochs": 4}
TINY = {
    "scale": "miniature",
    "metrics": {"fprs": [0.01, 0.1], "bootstrap": 200},
    "datasets": {"tiny": {"source": "purchase_like", "n_samples": 600, "n_features": 60,
                          "n_classes": 10, "seed": 0,
                          "ood": {"source": "purchase_like", "n_samples": 150,
                                  "n_features": 60, "n_classes": 10, "seed": 5}},
                 "tiny-tab": {"source": "tabular_like", "n_samples": 400, "n_features": 8,
                              "n_informative": 4, "label_noise": 0.2},
                 "tiny-gauss": {"source": "sm_synthetic", "n_samples": 200, "n_features": 16,
                                "n_classes": 4}},
    "studies": {
        "part": {
            "paper": "bmia", "paper_dataset": "purchase100", "dataset": "tiny", "targets": 2,
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.2, "target_test": 0.2,
                                    "reference_pool": 0.4, "population": 0.2}},
            "model": {"arch": "mlp", "widths": [64]},
            "training": {"epochs": 8, "lr": 0.1, "batch_size": 32},
            "deviations": ["tiny test config"],
            "regime": {"reference": "a tiny reference", "test_accuracy": 0.8,
                       "baseline": "attack-p"},
            "attacks": {
                "attack-p": {"attack": "marginal", "statistic": "hinge",
                             "paper_attack": "attack_p"},
                "naive": {"attack": "naive"},
                "bmia": {"attack": "bmia", "n_reference": 1, "n_samples": 20,
                         "paper_attack": "bmia", "paper_setting": "n=1"},
                "bmia-ref-wide": {"attack": "bmia", "n_reference": 1, "n_samples": 20,
                                  "reference_study": "wide"},
                "qmia": {"attack": "qmia", "recipe": {"epochs": 2}, "paper_attack": "qmia"},
            },
        },
        "part-ood": {  # part's models, audited with out-of-distribution non-members
            "paper": "bmia", "models_from": "part", "nonmembers": "ood",
            "attacks": {"attack-p": {"attack": "marginal", "statistic": "hinge"},
                        "bmia": {"attack": "bmia", "n_reference": 1, "n_samples": 20}},
        },
        "wide": {  # another architecture on part's split (BMIA Figure 4)
            "paper": "bmia", "dataset": "tiny",
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.2, "target_test": 0.2,
                                    "reference_pool": 0.4, "population": 0.2}},
            "model": {"arch": "mlp", "widths": [128]},
            "training": {"epochs": 8, "lr": 0.1, "batch_size": 32},
            "attacks": {"bmia": {"attack": "bmia", "n_reference": 1, "n_samples": 20},
                        "bmia-ref-part": {"attack": "bmia", "n_reference": 1, "n_samples": 20,
                                          "reference_study": "part"}},
        },
        "tab": {  # QMIA's tabular setting: CatBoost models, each tuned by 2-fold CV
            "paper": "qmia", "paper_dataset": "openml_361057", "dataset": "tiny-tab",
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.4, "target_test": 0.2,
                                    "reference_pool": 0.4}},
            "model": {"arch": "catboost", "iterations": 30, "trials": 2, "folds": 2},
            "training": {},
            "attacks": {
                "marginal": {"attack": "marginal", "statistic": "hinge"},
                "lira-n2": {"attack": "lira", "mode": "offline", "variance": "global",
                            "statistic": "hinge", "n_reference": 2, "paper_attack": "lira",
                            "paper_setting": "n=2"},
                "qmia": {"attack": "qmia", "backbone": {"arch": "catboost"}, "trials": 3,
                         "space": {"depth": {"low": 1, "high": 4},
                                   "iterations": {"low": 10, "high": 50}},
                         "paper_attack": "qmia"},
            },
        },
        "bal": {
            "paper": "iha", "dataset": "tiny", "targets": 2,
            "split": {"scheme": "balanced", "seed": 1, "population_fraction": 0.2},
            "model": {"arch": "mlp", "widths": [8]},
            "training": {"epochs": 6, "lr": 0.1, "batch_size": 32, "momentum": 0.9,
                         "weight_decay": 5e-4},
            "attacks": {"loss": {"attack": "marginal", "statistic": "loss"},
                        # IHA and SIF share one Hessian fit per target; CG fits no Hessian
                        "iha": {"attack": "iha"},
                        "sif": {"attack": "sif", "eps": 0.5},
                        "iha-cg": {"attack": "iha", "solver": "cg", "records": 40}},
        },
        "sm": {  # Stolen Memories: white-box attacks sharing one fit, decisions calibrated
            "paper": "stolen-memories", "paper_dataset": "synthetic", "dataset": "tiny-gauss",
            "replicates": 2,  # the claims' intervals over two runs of the whole study
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.25, "target_test": 0.25,
                                    "reference_pool": 0.5}},
            "model": {"arch": "mlp", "widths": []},
            "training": {"epochs": 20, "lr": 0.1, "batch_size": 16},
            "attacks": {"omniscient": {"attack": "omniscient", "paper_attack": "omniscient"},
                        "bayes-wb": {"attack": "bayes_wb", **SM_FIT, "paper_attack": "bayes_wb"},
                        "general-wb": {"attack": "general_wb", **SM_FIT},
                        "naive": {"attack": "naive"}},
        },
        "sm-dp": {  # the same target trained by DP-SGD
            "paper": "stolen-memories", "dataset": "tiny-gauss",
            "split": {"scheme": "partition", "seed": 0,
                      "fractions": {"target_train": 0.25, "target_test": 0.25,
                                    "reference_pool": 0.5}},
            "model": {"arch": "mlp", "widths": []},
            "training": {"epochs": 20, "lr": 0.1, "batch_size": 16, "dp": {"epsilon": 4.0}},
            "attacks": {"naive": {"attack": "naive"}},
        },
    },
    "artifacts": {
        "leaderboard": {"builder": "leaderboard"},
        "BMIA-T1": {"builder": "paper_table", "studies": ["part"],
                    "metrics": ["tpr@1%", "tpr@10%"]},
        "claims": {"builder": "claims"},
        "BMIA-F3a": {"builder": "sweep", "studies": ["part"], "attacks": ["bmia"],
                     "x": "n_samples", "series": "hessian", "metrics": ["tpr@10%", "seconds"]},
        "ROC-part": {"builder": "roc", "studies": ["part"]},
        "BMIA-F2": {"builder": "density", "studies": ["part"], "attacks": ["attack-p", "bmia"]},
        "BMIA-F4": {"builder": "grid", "studies": ["part", "wide"], "metrics": ["tpr@10%"],
                    "attacks": ["bmia", "bmia-ref-wide", "bmia-ref-part"]},
        "QMIA-T3": {"builder": "accuracy_table", "studies": ["tab"]},
        "QMIA-T5": {"builder": "search_table", "studies": ["tab"], "attacks": ["qmia"]},
        "QMIA-T6": {"builder": "paper_table", "studies": ["tab"],
                    "metrics": ["pinball@1%", "precision@10%"]},
        "QMIA-X1": {"builder": "fit_costs", "studies": ["part", "tab"], "attacks": ["qmia"]},
        "IHA-T1": {"builder": "threat_models"},
        "SM-F2": {"builder": "two_gaussians", "studies": ["sm"]},
        "SM-F5": {"builder": "bars", "studies": ["sm"],
                  "attacks": ["omniscient", "bayes-wb", "general-wb"],
                  "metrics": ["advantage", "precision@cal90"]},
        "SM-F6": {"builder": "displacement_sweep", "studies": ["sm"], "attacks": ["general-wb"]},
        "SM-F1a": {"builder": "influence_explanations", "studies": ["sm"]},
        "SM-F8": {"builder": "dataset_size_trend", "studies": ["sm"],
                  "attacks": ["bayes-wb", "general-wb"], "metrics": ["accuracy"]},
        "SM-F13": {"builder": "dp_utility", "studies": ["sm", "sm-dp"]},
        "IHA-T5a": {"builder": "agreement", "studies": ["bal"], "attacks": ["loss", "iha"],
                    "fpr": 0.1},
        "IHA-T6": {"builder": "attack_costs", "studies": ["bal"],
                   "attacks": ["iha", "iha-cg", "loss"]},
    },
}


def run(workdir: Path, config: dict, *args: str) -> str:
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(workdir), "--configfile", str(workdir / "config.yaml"),
         "--cores", "2", *args], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout + result.stderr


def planned_jobs(workdir: Path, config: dict) -> dict[str, int]:
    """Rule -> number of jobs a dry run would execute."""
    output = run(workdir, config, "--dry-run")
    table = output.split("Job stats:")[-1] if "Job stats:" in output else ""
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)
            if m.group(1) != "total"}


def planned_wildcards(workdir: Path, config: dict, rule: str) -> list[str]:
    output = run(workdir, config, "--dry-run")
    blocks = re.findall(rf"rule {rule}:.*?wildcards: ([^\n]+)", output, re.S)
    return blocks


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("workflow")
    (workdir / "first-run.log").write_text(run(workdir, TINY))
    return workdir


def test_outputs_exist_with_expected_content(workflow):
    results = workflow / "results"
    for name in ("leaderboard.csv", "leaderboard.md", "BMIA-T1.csv", "BMIA-T1.md",
                 "claims.csv", "claims.md", "ROC-part.png", "ROC-part.pdf", "BMIA-F3a.png",
                 "index.md"):
        assert (results / "artifacts" / name).stat().st_size > 0, name
    scores = pd.read_parquet(results / "studies/bal/scores/loss.parquet")
    # the marginal threshold is a quantile of public losses: its pinball loss and the share of
    # non-members above it (metrics.alphas) come along
    assert list(scores.columns) == ["sample", "target", "member", "score", "pinball@1%",
                                    "pinball@10%", "fpr@1%", "fpr@5%", "fpr@10%"]
    assert sorted(scores["target"].unique()) == [0, 1]
    assert 0.3 < scores["member"].mean() < 0.7
    board = pd.read_csv(results / "artifacts/leaderboard.csv")
    assert set(board["study"]) == set(TINY["studies"]) and board["auc"].between(0, 1).all()
    table = pd.read_csv(results / "artifacts/BMIA-T1.csv")
    attack_p = table[(table["paper_attack"] == "attack_p") & (table["metric"] == "tpr@1%")]
    assert attack_p["paper"].iloc[0] == pytest.approx(1.10)  # BMIA Table 1, Purchase100
    # 120 non-members per target cannot resolve TPR@1%; TPR@10% comes with an interval
    assert not attack_p["resolvable"].iloc[0] and pd.isna(attack_p["ours"].iloc[0])
    at_ten = table[(table["paper_attack"] == "attack_p") & (table["metric"] == "tpr@10%")]
    assert at_ten["ours_low"].iloc[0] <= at_ten["ours"].iloc[0] <= at_ten["ours_high"].iloc[0]
    markdown = (results / "artifacts/BMIA-T1.md").read_text()
    assert "n/r" in markdown and "## Regime" in markdown and "a tiny reference" in markdown
    # the paper's rows without an attack instance here are listed, not dropped
    assert "| part | lira_offline (n=8) | — |" in markdown and "not run in this study" in markdown
    claims = pd.read_csv(results / "artifacts/claims.csv")
    # the tiny study has BMIA, QMIA and Attack-P but no LiRA / RMIA / Attack-R: only BMIA
    # against Attack-P and against QMIA is checked; bayes-wb against the omniscient attack;
    # and QMIA's Theorem 1 (its FPR at a = 1, 5, 10%) on the tabular study
    checked = claims["claim"].isin(["BMIA-C11", "BMIA-C26", "SM-C1", "QMIA-C9", "QMIA-C10",
                                    "QMIA-C11"])
    assert set(claims.loc[~checked, "verdict"]) == {"not run"}
    assert "not run" not in set(claims.loc[checked, "verdict"]) and checked.sum() == 6
    # the Stolen Memories study runs twice: its claim rests on both replicates, the others on one
    assert claims.loc[claims["claim"] == "SM-C1", "replicates"].tolist() == [2]
    assert claims.loc[claims["claim"] == "BMIA-C11", "replicates"].tolist() == [1]
    first, second = (yaml.safe_load((results / f"studies/{study}/models/target/0.json")
                                    .read_text()) for study in ("sm", "sm-r1"))
    assert first["seed"] != second["seed"]
    assert first["train_indices_sha256"] != second["train_indices_sha256"]  # its own split
    assert "claims.md" in (results / "artifacts/index.md").read_text()
    index = (results / "artifacts/index.md").read_text()
    assert "| BMIA-T1 |" in index
    assert ("scaled-down proxy for purchase100 (deviations: [part](deviations.md#part)); "
            "the rest needs") in index
    # each study's deviations once, under the heading the index links to
    deviations = (results / "artifacts/deviations.md").read_text()
    assert deviations.count("tiny test config") == len(
        [s for s in TINY["studies"].values() if "tiny test config" in s.get("deviations", [])])
    assert "## part\n" in deviations
    assert len(re.findall(r"^\| [A-Z]+-[A-Z0-9]+[a-z]? \|", index, re.M)) == 67
    card = yaml.safe_load((results / "studies/part/models/target/0.json").read_text())
    assert {"train_indices_sha256", "seed", "train_accuracy", "test_accuracy",
            "train_seconds"} <= set(card)


def test_a_run_says_how_many_models_it_trains_before_its_first_job(workflow):
    log = (workflow / "first-run.log").read_text()
    trained = len(list((workflow / "results" / "studies").glob("*/models/*/*.pt")))
    announced = re.search(r"This run trains (\d+) models in \d+ jobs\.", log)
    assert announced and int(announced.group(1)) == trained
    assert announced.start() < re.search(r"^(local)?rule train", log, re.M).start()


def test_nothing_left_to_do_after_a_run(workflow):
    assert planned_jobs(workflow, TINY) == {}


def test_editing_one_attack_reruns_only_that_attack_and_its_artifacts(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["attack-p"]["statistic"] = "loss"
    jobs = planned_jobs(workflow, edited)
    # the leaderboard, Table 1 and the claims read its scores; the ROC and the density
    # figure (which draws attack-p's distribution) read its settings
    assert jobs == {"score": 1, "table": 3, "figure": 2, "index": 1, "all": 1}, jobs
    (wildcards,) = planned_wildcards(workflow, edited, "score")
    assert "study=part" in wildcards and "attack=attack-p" in wildcards


def test_editing_training_reruns_only_that_study(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["bal"]["training"]["epochs"] = 7
    jobs = planned_jobs(workflow, edited)
    # its two targets, the Hessian fits of each (exact and CG) and its four attacks
    assert jobs.get("train") == 2 and jobs.get("fit") == 4 and jobs.get("score") == 4, jobs
    assert "dataset" not in jobs and "split" not in jobs
    assert all("study=bal" in w for w in planned_wildcards(workflow, edited, "train"))


def test_adding_reference_models_keeps_existing_ones(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["naive"]["n_reference"] = 2
    jobs = planned_jobs(workflow, edited)
    # each repetition (target) had BMIA's one reference model: only the second is trained
    assert jobs.get("train") == 2, jobs


def test_editing_a_scoring_parameter_of_a_fitted_attack_reruns_scoring_only(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["bmia"]["n_samples"] = 30
    jobs = planned_jobs(workflow, edited)
    assert "fit" not in jobs and "train" not in jobs and jobs.get("score") == 1, jobs


def test_editing_a_fit_parameter_refits_without_retraining(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["bmia"]["hessian"] = "diag"
    jobs = planned_jobs(workflow, edited)
    # one fit per repetition (its own reference model), then the score; no training
    assert jobs.get("fit") == 2 and jobs.get("score") == 1 and "train" not in jobs, jobs


def test_editing_qmia_s_training_refits_its_regressors_only(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["qmia"]["recipe"] = {"epochs": 3}
    jobs = planned_jobs(workflow, edited)
    # one regressor per target, then QMIA's scores and the tables that read them
    assert jobs.get("fit") == 2 and jobs.get("score") == 1 and "train" not in jobs, jobs


def test_editing_a_search_space_refits_only_that_regressor(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["tab"]["attacks"]["qmia"]["space"]["depth"]["high"] = 5
    jobs = planned_jobs(workflow, edited)
    assert jobs.get("fit") == 1 and jobs.get("score") == 1 and "train" not in jobs, jobs


def test_editing_the_fpr_grid_reruns_scoring_only(workflow):
    edited = copy.deepcopy(TINY)
    edited["metrics"]["fprs"] = [0.01, 0.05, 0.1]
    jobs = planned_jobs(workflow, edited)
    n_attacks = sum(len(study["attacks"]) * study.get("replicates", 1)
                    for study in TINY["studies"].values())
    assert jobs.get("score") == n_attacks and "fit" not in jobs and "train" not in jobs, jobs


def test_fits_are_shared_by_attacks_with_the_same_fit_parameters(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["bmia-mc"] = {
        "attack": "bmia", "n_reference": 1, "n_samples": 20, "predictive": "mc"}
    jobs = planned_jobs(workflow, edited)
    assert "fit" not in jobs and jobs.get("score") == 1, jobs


def test_one_artifact_runs_only_the_jobs_it_needs(tmp_path):
    output = run(tmp_path, TINY, "--dry-run", "results/artifacts/BMIA-T1.md")
    table = output.split("Job stats:")[-1]
    jobs = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)
            if m.group(1) != "total"}
    # one dataset, the two targets of study "part" and BMIA's reference model of each, the
    # reference models of study "wide" that bmia-ref-wide uses (and their split), four
    # Laplace fits and QMIA's two (one per target), the five attacks of "part", the table
    assert jobs == {"dataset": 1, "split": 2, "train": 6, "fit": 6, "score": 5,
                    "table": 1}, jobs
    assert "study=bal" not in output


def test_iha_and_sif_share_the_hessian_fit_and_cg_scores_its_records(workflow):
    fits = workflow / "results/studies/bal/fits"
    assert sorted(str(p.relative_to(fits)) for p in fits.glob("*/*.npz")) == [
        f"hessian-chunk_size=256-solver={solver}/{target}.npz"
        for solver in ("cg", "exact") for target in (0, 1)]
    cg = pd.read_parquet(workflow / "results/studies/bal/scores/iha-cg.parquet")
    assert cg.groupby("target")["member"].agg(["size", "sum"]).values.tolist() == [[40, 20]] * 2
    exact = pd.read_parquet(workflow / "results/studies/bal/scores/iha.parquet")
    both = cg.merge(exact, on=["sample", "target"], suffixes=("_cg", "_exact"))
    assert len(both) == 80 and np.corrcoef(both["score_cg"], both["score_exact"])[0, 1] > 0.99


def test_iha_tables(workflow):
    artifacts = workflow / "results/artifacts"
    assert pd.read_csv(artifacts / "IHA-T1.csv")["matches_paper"].all()
    agreement = pd.read_csv(artifacts / "IHA-T5a.csv")
    scores = pd.read_parquet(workflow / "results/studies/bal/scores/iha.parquet").query(
        "target == 0")
    outsiders = np.sort(scores.loc[~scores["member"], "score"])
    threshold = outsiders[len(outsiders) - int(0.1 * len(outsiders)) - 1]
    tpr = (scores.loc[scores["member"], "score"] > threshold).mean()
    truth = agreement.query("attack == 'iha' and versus == 'ground_truth'")
    assert truth["population"].tolist() == ["members"]
    assert truth["agreement"].iloc[0] == pytest.approx(tpr, abs=1e-3)
    assert set(agreement["population"]) == {"members", "nonmembers"}
    costs = pd.read_csv(artifacts / "IHA-T6.csv").set_index("attack")
    assert costs.loc["iha", "precompute_seconds"] > 0 == costs.loc["loss", "precompute_seconds"]
    assert costs.loc["iha", "paper_seconds_per_sample"] == pytest.approx(0.16)


@pytest.mark.parametrize("edit", [{"eps": 0.1}, {"terms": ["I1", "I2"]}, {"fraction": 0.5},
                                  {"conditioning": "low_rank"}, {"records": 20}])
def test_editing_an_iha_scoring_option_rescores_without_refitting(workflow, edit):
    edited = copy.deepcopy(TINY)
    edited["studies"]["bal"]["attacks"]["iha"].update(edit)
    jobs = planned_jobs(workflow, edited)
    assert "fit" not in jobs and "train" not in jobs and jobs.get("score") == 1, jobs


def test_editing_the_hessian_fit_refits_both_attacks_that_share_it(workflow):
    edited = copy.deepcopy(TINY)
    for attack in ("iha", "sif"):
        edited["studies"]["bal"]["attacks"][attack]["chunk_size"] = 64
    jobs = planned_jobs(workflow, edited)
    assert jobs.get("fit") == 2 and jobs.get("score") == 2 and "train" not in jobs, jobs


def test_a_derived_study_audits_the_source_models_with_ood_nonmembers(workflow):
    results = workflow / "results" / "studies"
    assert not (results / "part-ood" / "models").exists()
    assert not (results / "part-ood" / "fits").exists()  # BMIA's fit is part's
    scores = pd.read_parquet(results / "part-ood" / "scores" / "bmia.parquet")
    own = pd.read_parquet(results / "part" / "scores" / "bmia.parquet")
    for target in (0, 1):
        ours, theirs = scores[scores.target == target], own[own.target == target]
        assert set(ours[ours.member]["sample"]) == set(theirs[theirs.member]["sample"])
        assert set(ours[~ours.member]["sample"]) == set(range(600, 750))  # the ood records
    table = (workflow / "results" / "artifacts" / "claims.md").read_text()
    assert "part-ood" in table


def test_references_of_another_architecture_are_fitted_where_they_live(workflow):
    results = workflow / "results" / "studies"
    fits = sorted(p.name for p in (results / "wide" / "fits").glob("*/*.npz"))
    assert fits == ["0.npz", "1.npz"], fits  # one per repetition of part (wide's own is 0)
    assert sorted((results / "wide" / "models" / "reference").glob("*.pt"))
    assert (workflow / "results" / "artifacts" / "BMIA-F4.png").stat().st_size > 0
    assert (workflow / "results" / "artifacts" / "BMIA-F2.png").stat().st_size > 0


def test_retraining_another_architecture_reruns_what_uses_its_references(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["wide"]["training"]["epochs"] = 9
    jobs = planned_jobs(workflow, edited)
    # wide's target and the reference models of both repetitions, their Laplace fits, and
    # the three BMIA instances that read them: wide's own two and part's bmia-ref-wide
    assert jobs.get("train") == 3 and jobs.get("fit") == 2 and jobs.get("score") == 3, jobs
    assert all("study=wide" in w for w in planned_wildcards(workflow, edited, "train"))


def test_stolen_memories_attacks_share_one_fit_and_calibrate_on_the_hold_out(workflow):
    results = workflow / "results"
    assert len(list((results / "studies/sm/fits").iterdir())) == 1  # bayes-wb and general-wb
    scores = pd.read_parquet(results / "studies/sm/scores/general-wb.parquet")
    assert {"decision", "decision@cal90", "decision@cal99"} <= set(scores.columns)
    assert np.array_equal(scores["decision"], scores["score"] > 0)
    table = pd.read_parquet(results / "studies/sm/metrics/general-wb.parquet")
    assert {"accuracy", "advantage", "precision@cal90", "recall@cal99"} <= set(table.columns)
    loss = pd.read_parquet(results / "studies/part/scores/attack-p.parquet")
    assert "decision" not in loss.columns  # a ranking only: no decision rule
    sweep = pd.read_csv(results / "artifacts/SM-F6.csv")
    assert sweep["setting"].tolist() == ["n_D=0, n_M=0", "n_D=2, n_M=0"]
    utility = pd.read_csv(results / "artifacts/SM-F13.csv").set_index("study")
    card = yaml.safe_load((results / "studies/sm-dp/models/target/0.json").read_text())
    assert utility.loc["sm-dp", "epsilon"] == pytest.approx(card["dp_epsilon"])
    assert 3.9 < card["dp_epsilon"] <= 4.0 and card["dp_noise_multiplier"] > 0
    assert np.isinf(utility.loc["sm", "epsilon"])
    for name in ("SM-F1a", "SM-F2", "SM-F5", "SM-F8"):
        assert (results / f"artifacts/{name}.png").stat().st_size > 0


def test_white_box_handle_rebuilds_the_saved_models(workflow):
    import numpy as np

    from miarepro.pipeline import StudyFiles
    from miarepro.training import predict_logits

    study = workflow / "results" / "studies" / "part"
    handle = StudyFiles(str(workflow / "results" / "datasets" / "tiny.npz"),
                        str(study / "split.npz"), str(study / "models"),
                        TINY["studies"]["part"]["model"], TINY["studies"]["part"]["training"])
    logits = predict_logits(handle.load_model("target", 1), handle.features())
    np.testing.assert_allclose(logits, np.load(study / "models" / "target" / "1.npy"),
                               rtol=1e-5, atol=1e-5)
    assert len(handle.training_indices("target", 1)) == 120  # 20% of 600, repetition 1


def test_same_config_gives_identical_scores(workflow, tmp_path):
    """Scores, metrics, fits and checkpoints are bit-identical; only the measured scoring time
    differs."""
    import numpy as np

    shutil.copytree(workflow / "results", tmp_path / "first")
    rerun = [f"studies/{study}/{kind}/{attack}.parquet" for kind in ("scores", "metrics")
             for study, attack in (("part", "bmia"), ("part", "bmia-ref-wide"),
                                   ("part", "qmia"), ("part-ood", "attack-p"))]
    # everything these need is recomputed: the dataset, splits, models of two studies, fits
    run(workflow, TINY, "--forceall", *[f"results/{path}" for path in rerun])
    for path in rerun:
        first, second = tmp_path / "first" / path, workflow / "results" / path
        pd.testing.assert_frame_equal(pd.read_parquet(first).drop(columns="score_seconds",
                                                                  errors="ignore"),
                                      pd.read_parquet(second).drop(columns="score_seconds",
                                                                   errors="ignore"))
    fits = sorted((tmp_path / "first" / "studies").rglob("fits/*/*.npz"))
    assert fits
    for first in fits:
        second = workflow / "results" / first.relative_to(tmp_path / "first")
        with np.load(first) as a, np.load(second) as b:
            assert all(np.array_equal(a[key], b[key]) for key in a.files), first
    checkpoints = sorted((tmp_path / "first" / "studies" / "part").rglob("models/*/*.pt"))
    assert checkpoints
    for first in checkpoints:  # retrained: written to another temporary name
        second = workflow / "results" / first.relative_to(tmp_path / "first")
        assert first.read_bytes() == second.read_bytes(), first


FAKE_SLURM = {  # just enough SLURM for the executor plugin: record submissions, report failure
    "sbatch": 'echo "$*" >> "$FAKE_SLURM/sbatch.log"\ncat > /dev/null\n'
              'id=$(( $(wc -l < "$FAKE_SLURM/sbatch.log") + 1000 ))\n'
              'echo "$id" >> "$FAKE_SLURM/ids"\necho "$id"\n',
    "sacct": '[ -f "$FAKE_SLURM/ids" ] && while read id; do echo "$id|FAILED"; done '
             '< "$FAKE_SLURM/ids"\nexit 0\n',
    "squeue": "exit 0\n",
    "sinfo": "exit 0\n",
    "scontrol": 'echo "MinJobAge = 300 sec"\n',
}


def test_slurm_jobs_get_the_configured_resources(workflow, tmp_path):
    """The sbatch lines of a training, a fit and a scoring job, through `--profile slurm`:
    the study's own memory and time where it sets them, the config's otherwise."""
    work = tmp_path / "work"
    shutil.copytree(workflow, work)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in FAKE_SLURM.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    config = copy.deepcopy(TINY)
    config["resources"] = {"train_gpus": 1, "train_threads": 8, "train_mem_mb": 32000,
                           "train_runtime_min": 720, "gpu_partition": "gpu-a100"}
    # a study with a larger model asks for more memory and time than the others
    config["studies"]["bal"]["resources"] = {"train_mem_mb": 64000, "train_runtime_min": 1440}
    (work / "cluster.yaml").write_text(yaml.safe_dump(config))
    targets = ["results/studies/bal/models/target/0.pt",
               "results/studies/part/fits/bmia-n1-hessian=kron-prior=marglik/1.npz",
               "results/studies/part/scores/naive.parquet"]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "FAKE_SLURM": str(tmp_path)}
    subprocess.run([*SNAKEMAKE, "--directory", str(work), "--configfile",
                    str(work / "cluster.yaml"), "--profile", str(ROOT / "slurm"),
                    "--sdm", "env-modules", "--retries", "0", "--latency-wait", "1",
                    "--slurm-init-seconds-before-status-checks", "1",
                    "--forcerun", *targets, "--until", *targets],
                   capture_output=True, text=True, env=env, timeout=300, check=False)
    lines = (tmp_path / "sbatch.log").read_text().splitlines()
    train = next(line for line in lines if "--comment rule_train_" in line)
    fit = next(line for line in lines if "--comment rule_fit_" in line)
    score = next(line for line in lines if "--comment rule_score_" in line)
    for flag in ("-p gpu-a100", "--cpus-per-task=8", "--gpus=1"):
        assert flag in train and flag in fit, (flag, train, fit)
    for flag in ("-t 1440", "--mem 64000"):
        assert flag in train, (flag, train)
    for flag in ("-t 720", "--mem 32000"):
        assert flag in fit, (flag, fit)
    for flag in ("-p cpu", "-t 30", "--mem 8000", "--cpus-per-task=1"):
        assert flag in score, (flag, score)
    assert "--gpus" not in score and "--gres" not in train + score


def test_conda_environment_names_no_local_paths():
    """Snakemake builds the environment from a copy elsewhere: pins inline, no -r / -e."""
    environment = yaml.safe_load((ROOT / "envs" / "miarepro.yaml").read_text())
    pip = next(d["pip"] for d in environment["dependencies"] if isinstance(d, dict))
    assert not [line for line in pip if line.startswith(("-", ".", "/"))]
    runtime = [line for line in (ROOT / "envs" / "requirements.txt").read_text().splitlines()
               if line and not line.startswith("#") and line not in ("pytest", "ruff")]
    assert pip == runtime


def test_after_kill_9_a_rerun_recomputes_only_the_interrupted_jobs(tmp_path):
    import signal
    import time

    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY))
    command = [*SNAKEMAKE, "--directory", str(tmp_path), "--configfile",
               str(tmp_path / "config.yaml"), "--cores", "1", "--rerun-incomplete"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    cards = tmp_path / "results" / "studies"

    def wait_for(condition):
        deadline = time.monotonic() + 240
        while not condition() and time.monotonic() < deadline:
            time.sleep(0.1)

    wait_for(lambda: list(cards.glob("*/models/*/*.json")))
    done = {str(p.relative_to(tmp_path)).removesuffix(".json")
            for p in cards.glob("*/models/*/*.json")}
    assert done, "no model finished before the kill"
    # once a job that was not running yet has written its log, Snakemake has recorded the
    # finished models as complete: kill everything then, mid-flight
    logs = set((tmp_path / "logs").rglob("*.log"))
    wait_for(lambda: set((tmp_path / "logs").rglob("*.log")) - logs)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    subprocess.run([*command, "--unlock"], capture_output=True, check=True)
    planned = subprocess.run([*command, "--dry-run"], capture_output=True, text=True,
                             check=True).stdout
    replanned = {f"results/studies/{s}/models/{r}/{i}" for s, r, i in re.findall(
        r"wildcards: study=(\w+), role=(\w+), index=(\d+)", planned)}
    assert replanned and not replanned & done, (replanned, done)
    subprocess.run([*command, "--cores", "2"], capture_output=True, check=True)
    leftovers = [p for p in (tmp_path / "results").rglob(".*") if p.is_file()]
    assert leftovers == [] and (tmp_path / "results/artifacts/index.md").exists()


def test_qmia_tables_on_catboost_targets(workflow):
    """CatBoost targets tuned by cross-validation, QMIA's CatBoost regressor with its search
    log, and the tables that read them: accuracies, search, pinball, fit costs."""
    results = workflow / "results"
    card = yaml.safe_load((results / "studies/tab/models/target/0.json").read_text())
    assert card["format"] == "catboost-cbm" and len(card["search"]["trials"]) == 2
    assert card["search"]["folds"] == 2 and card["settings"]["iterations"] >= 10
    signals = __import__("numpy").load(results / "studies/tab/models/target/0.npy")
    assert signals.shape == (1, 400, 2)
    search = pd.read_csv(results / "artifacts/QMIA-T5.csv")
    assert set(search["hyperparameter"]) == {"depth", "iterations"}
    depth = int(search.loc[search["hyperparameter"] == "depth", "chosen"].iloc[0])
    assert 1 <= depth <= 4
    costs = pd.read_csv(results / "artifacts/QMIA-X1.csv").set_index("study")
    assert costs.loc["tab", "search_trials"] == 3 and costs.loc["part", "search_trials"] == 0
    assert (costs["fit_seconds"] > 0).all() and (costs["reference_train_seconds"] > 0).all()
    assert costs["paper_gpu_minutes"].isna().all()  # QMIA prints no budget for these datasets
    accuracy = pd.read_csv(results / "artifacts/QMIA-T3.csv")
    assert 50 <= accuracy["test_acc"].iloc[0] <= accuracy["train_acc"].iloc[0] <= 100
    pinball = pd.read_csv(results / "artifacts/QMIA-T6.csv")
    ours = pinball[(pinball["metric"] == "pinball@1%") & pinball["ours"].notna()]
    # marginal has no paper_attack here: LiRA (n=2) and QMIA report the pinball loss
    assert set(ours["paper_attack"]) == {"lira", "qmia"} and (ours["ours"] > 0).all()
    scores = pd.read_parquet(results / "studies/tab/scores/qmia.parquet")
    assert {"pinball@1%", "pinball@10%"} <= set(scores.columns)


def test_editing_a_module_reruns_only_the_jobs_that_run_it(workflow, tmp_path):
    """Each rule's params carry a digest of the package modules its step runs
    (miarepro.provenance): in a copy of the workflow, editing attacks/lira.py reruns LiRA's
    scores and what reads them, and nothing upstream."""
    repo = tmp_path / "repo"
    repo.mkdir()
    for part in ("Snakefile", "rules", "scripts", "miarepro", "envs", "report", "config"):
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, repo / part, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, repo / part)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(TINY))
    command = [sys.executable, "-m", "snakemake", "--snakefile", str(repo / "Snakefile"),
               "--directory", str(workflow), "--configfile", str(tmp_path / "config.yaml"),
               "--cores", "1", "--dry-run"]

    def planned() -> dict[str, int]:
        result = subprocess.run(command, capture_output=True, text=True, check=True)
        table = result.stdout.split("Job stats:")[-1] if "Job stats:" in result.stdout else ""
        return {m.group(1): int(m.group(2)) for m in
                re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m.group(1) != "total"}

    before = planned()  # the copy runs the same code (earlier tests may have left edits)
    with open(repo / "miarepro" / "attacks" / "lira.py", "a") as handle:
        handle.write("\n# an edit\n")
    after = planned()
    assert after.get("score", 0) == before.get("score", 0) + 1, (before, after)
    for rule in ("dataset", "split", "train", "fit"):
        assert after.get(rule, 0) == before.get(rule, 0), (rule, before, after)


def run_with_cache(tmp_path: Path, checkouts: dict[str, dict]) -> dict[str, str]:
    """Run each config in its own directory (a checkout), in order, all sharing one
    between-workflow cache (`--cache`); return each run's output."""
    env = {**os.environ, "SNAKEMAKE_OUTPUT_CACHE": str(tmp_path / "cache")}
    (tmp_path / "cache").mkdir()
    outputs = {}
    for checkout, config in checkouts.items():
        (tmp_path / checkout).mkdir(exist_ok=True)
        (tmp_path / checkout / "config.yaml").write_text(yaml.safe_dump(config))
        result = subprocess.run(
            [*SNAKEMAKE, "--directory", str(tmp_path / checkout), "--configfile",
             str(tmp_path / checkout / "config.yaml"), "--cores", "2", "--cache"],
            capture_output=True, text=True, env=env, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        outputs[checkout] = result.stdout + result.stderr
    return outputs


def test_models_and_fits_come_from_the_between_workflow_cache(tmp_path):
    """Snakemake's own cache (`--cache`, `SNAKEMAKE_OUTPUT_CACHE`): a second checkout of the
    same config takes every model and fit from the first one's cache instead of retraining.
    The cache key covers params, code digests and inputs, so an edit misses it."""
    config = copy.deepcopy(TINY)
    part = config["studies"]["part"]
    part["attacks"] = {k: v for k, v in part["attacks"].items() if k in ("attack-p", "bmia")}
    config.update(studies={"part": part}, artifacts={"leaderboard": {"builder": "leaderboard"}},
                  datasets={"tiny": config["datasets"]["tiny"]})
    outputs = run_with_cache(tmp_path, {"first": config, "second": config})
    models = sorted((tmp_path / "first" / "results/studies/part/models").rglob("*.pt"))
    fits = sorted((tmp_path / "first" / "results/studies/part/fits").rglob("*.npz"))
    assert models and fits
    for path in models + fits:
        relative = path.relative_to(tmp_path / "first")
        assert f"{relative} from cache" in outputs["second"], relative
        assert (tmp_path / "second" / relative).read_bytes() == path.read_bytes()
    # every model is its own, not another model of the study with the same recipe and data
    for path in models:
        card = yaml.safe_load(path.with_suffix(".json").read_text())
        assert f"{card['role']}/{card['index']}" == f"{path.parent.name}/{path.stem}", path


def test_reference_models_ten_to_a_job_are_the_models_trained_alone(tmp_path):
    """``ten_per_job: [reference]``: one job makes references 10k to 10k+9, the same models
    (seeds, weights, signals) as a job each would, and Snakemake's cache keeps the bundle."""
    config = copy.deepcopy(TINY)
    part = {**config["studies"]["part"], "targets": 1,
            "attacks": {"lira": {"attack": "lira", "mode": "offline", "n_reference": 11}}}
    del part["regime"]  # its baseline attack is not here
    config.update(studies={"part": part}, artifacts={"leaderboard": {"builder": "leaderboard"}},
                  datasets={"tiny": config["datasets"]["tiny"]})
    bundled = {**config, "studies": {"part": {**part, "ten_per_job": ["reference"]}}}
    (tmp_path / "first").mkdir()
    jobs = planned_jobs(tmp_path / "first", bundled)
    assert jobs.get("train_tens") == 2 and jobs.get("train") == 1, jobs  # 20 models
    outputs = run_with_cache(tmp_path, {"first": bundled, "second": bundled, "alone": config})
    models = tmp_path / "first" / "results/studies/part/models/reference"
    assert sorted(int(p.stem) for p in models.glob("*.pt")) == list(range(20))
    for index in (0, 9, 10):  # the first and last of a bundle, the first of the next
        relative = f"results/studies/part/models/reference/{index}"
        assert f"{relative}.pt from cache" in outputs["second"], relative
        alone = np.load(tmp_path / "alone" / f"{relative}.npy")
        np.testing.assert_array_equal(np.load(models / f"{index}.npy"), alone)
        seed = yaml.safe_load((models / f"{index}.json").read_text())["seed"]
        assert seed == yaml.safe_load((tmp_path / "alone" / f"{relative}.json").read_text()
                                      )["seed"]
    assert not (tmp_path / "alone" / "results/studies/part/models/reference/11.pt").exists()


def test_report_groups_artifacts_by_paper_and_kind_with_captions(workflow):
    """`snakemake --report`: one category per paper (and one across papers), tables apart from
    figures, each entry labelled with its checklist title and captioned with the deviations."""
    import json

    run(workflow, TINY, "--report", str(workflow / "report.html"))
    html = (workflow / "report.html").read_text()

    def variable(name):
        start = html.index(f"var {name} = ") + len(f"var {name} = ")
        return json.JSONDecoder().raw_decode(html[start:])[0]

    categories = variable("categories")
    bmia = categories["BMIA: Efficient MIAs by Bayesian Neural Network (Liu et al.)"]
    assert "results/artifacts/BMIA-T1.csv" in bmia["Tables"]
    assert "results/artifacts/BMIA-F3a.png" in bmia["Figures"]
    iha = next(files for name, files in categories.items() if name.startswith("IHA"))
    assert "results/artifacts/IHA-T6.csv" in iha["Tables"]
    across = categories["All papers: leaderboard, claims, index"]
    assert {"results/artifacts/claims.csv", "results/artifacts/leaderboard.csv"} <= set(
        across["Tables"]) and across["Index"] == ["results/artifacts/index.md"]
    assert '"title": "Table 1: TPR@0.1%/1% FPR and GPU minutes' in html
    assert "<tt class=\\\"docutils literal\\\">part</tt>: tiny test config</li>" in html


def test_missing_datasets_are_reported_together_before_any_job(tmp_path):
    """Two real datasets absent (one downloadable): a dry run lists them and still plans; the
    run stops before its first job, naming both absent files and the study that needs each."""
    config = copy.deepcopy(TINY)
    config["data_dir"] = str(tmp_path / "data")
    config["datasets"]["tiny"] = {"source": "cifar10", "ood": {"source": "image_like"}}
    config["datasets"]["tiny-tab"] = {"source": "pima", "download": True}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    command = [*SNAKEMAKE, "--directory", str(tmp_path), "--configfile",
               str(tmp_path / "config.yaml"), "--cores", "1"]
    planned = subprocess.run([*command, "--dry-run"], capture_output=True, text=True,
                             check=False)
    assert planned.returncode == 0, planned.stderr[-2000:]
    listed = planned.stdout + planned.stderr  # a dry run logs to stdout
    assert "1 dataset(s) are not on disk" in listed
    assert "A run stops before its first job until then" in listed
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert "1 dataset(s) this run needs are absent (listed above)" in result.stderr
    assert "1 dataset(s) are not on disk" in result.stderr
    assert re.search(r"^- tiny \(source cifar10, for .*\bpart, part-ood, wide\): ",
                     result.stderr, re.M)
    assert f"{tmp_path}/data/cifar10/cifar-10-batches-py or " in result.stderr
    assert "1 dataset(s) will be downloaded" in result.stderr
    assert re.search(r"^- tiny-tab \(source pima, for ", result.stderr, re.M)
    assert not (tmp_path / "results").exists()


def _typo_in_a_paper_setting(config: dict) -> str:
    study = next(s for s in config["studies"].values() if "bmia" in s["attacks"])
    study["attacks"]["bmia"]["paper_setting"] = "n=11"
    return yaml.safe_dump(config)


def _a_key_twice(config: dict) -> str:
    return yaml.safe_dump(config) + "scale: paper\n"  # the second 'scale' would win silently


@pytest.mark.parametrize(("write", "message"), [
    (_typo_in_a_paper_setting, "attacks.bmia.paper_setting: unknown setting 'n=11'"),
    (_a_key_twice, "key 'scale' is given twice in one mapping"),
])
def test_a_bad_config_fails_the_dry_run_naming_the_key(tmp_path, write, message):
    (tmp_path / "config.yaml").write_text(write(copy.deepcopy(TINY)))
    result = subprocess.run(
        [*SNAKEMAKE, "--directory", str(tmp_path), "--configfile", str(tmp_path / "config.yaml"),
         "--cores", "1", "--dry-run"], capture_output=True, text=True, check=False)
    assert result.returncode != 0
    assert message in result.stdout + result.stderr, (result.stdout + result.stderr)[-2000:]


def test_replicates_run_for_the_claims_only(tmp_path):
    """A study run as 3 replicates adds its two copies' splits, models, fits and scores, read by
    the claims alone: tables and figures show the first replicate."""
    from miarepro import config as miarepro_config
    from miarepro.artifacts import builders

    config = copy.deepcopy(TINY)
    config["studies"]["tab"]["replicates"] = 3
    splits = planned_wildcards(tmp_path, config, "split")
    assert {"study=tab-r1", "study=tab-r2"} <= set(splits)
    validated = miarepro_config.validate(copy.deepcopy(config))
    read_by = {name: {path.split("/")[2] for path in builders.inputs("results", settings,
                                                                     validated)
                      if path.startswith("results/studies/")}
               for name, settings in validated["artifacts"].items()}
    assert {"tab", "tab-r1", "tab-r2"} <= read_by["claims"]
    assert not any({"tab-r1", "tab-r2"} & studies for name, studies in read_by.items()
                   if name != "claims")


def test_both_profiles_print_a_failed_jobs_log():
    """The README promises a failed job's traceback on screen, locally and on a cluster."""
    for profile in (ROOT / "profiles" / "local" / "config.yaml", ROOT / "slurm" / "profile.yaml"):
        assert yaml.safe_load(profile.read_text()).get("show-failed-logs") is True, profile


def test_the_advice_for_a_damaged_checkpoint_mends_the_workflow(workflow, tmp_path):
    """A reference model damaged after the run: the job that reads it fails naming the file and
    a command; that command remakes it, and the scores come out as before."""
    work = tmp_path / "work"
    shutil.copytree(workflow, work)
    target = "results/studies/part/scores/bmia.parquet"
    damaged = work / "results/studies/part/models/reference/0.pt"
    damaged.write_bytes(damaged.read_bytes()[:100])  # newer than the fit: the fit reruns
    command = [*SNAKEMAKE, "--directory", str(work), "--configfile", str(work / "config.yaml"),
               "--cores", "2", target]
    failed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert failed.returncode != 0
    advice = re.search(r"with `(--forcerun \S+)` added", failed.stdout + failed.stderr)
    assert advice, (failed.stdout + failed.stderr)[-3000:]
    mended = subprocess.run([*command, *advice.group(1).split()], capture_output=True,
                            text=True, check=False)
    assert mended.returncode == 0, (mended.stdout + mended.stderr)[-3000:]
    pd.testing.assert_frame_equal(
        pd.read_parquet(work / target).drop(columns="score_seconds", errors="ignore"),
        pd.read_parquet(workflow / target).drop(columns="score_seconds", errors="ignore"))
