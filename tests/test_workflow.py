"""End-to-end: the whole workflow on a tiny config, then dry runs proving rerun scope."""

import copy
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import yaml
from workflow_runs import ROOT, SNAKEMAKE, TINY, planned_jobs, run

from miarepro.uncertainty import COST_COLUMNS

COSTS = list(COST_COLUMNS)  # measured, so they differ from run to run


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("workflow")
    (workdir / "first-run.log").write_text(run(workdir, TINY))
    return workdir


def test_every_artifact_reads_only_files_it_declares(workflow, monkeypatch, tmp_path):
    """An artifact job runs after its declared inputs only: a file it reads without declaring
    it may be missing or stale on a cluster. Every workflow file each artifact of the run
    reads through :mod:`miarepro.io` (caches emptied between artifacts) is among its inputs."""
    from miarepro import config as miarepro_config
    from miarepro import io
    from miarepro.artifacts import builders
    from miarepro.artifacts import results as res

    config = miarepro_config.validate(copy.deepcopy(TINY))
    monkeypatch.chdir(workflow)
    read = []

    def tracing(reader):
        def traced(path, *args, **kwargs):
            read.append(os.path.normpath(path))
            return reader(path, *args, **kwargs)
        return traced

    for name in ("read_json", "read_arrays", "read_array", "read_table", "_open_npz"):
        monkeypatch.setattr(io, name, tracing(getattr(io, name)))
    checked = 0
    for name, settings in config["artifacts"].items():
        declared = {os.path.normpath(p) for p in builders.inputs("results", settings, config)}
        res._metrics_table.cache_clear()
        res.attack_estimates.cache_clear()
        read.clear()
        builders.build(name, settings, config, str(tmp_path / name / "out.csv"))
        undeclared = {path for path in read if path.startswith("results")} - declared
        assert not undeclared, (name, sorted(undeclared)[:5])
        checked += bool(read)
    assert checked >= 15  # the tables and figures that read results, not only the package


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
    # an attack's compute is one target's: its reference model, its fit and scoring one target
    # (the score job's wall time scores both targets, and starting Python is not the attack's),
    # here the mean over the two repetitions, each with its own reference model and fit
    metrics = pd.read_parquet(results / "studies/part/metrics/bmia.parquet").query("replicate < 0")
    seconds = []
    for target in (0, 1):
        [fit_card] = [json.loads(p.read_text())
                      for p in (results / "studies/part/fits").glob(f"bmia-n1*/{target}.json")]
        reference = json.loads((results / "studies/part/models/reference"
                                / f"{fit_card['info']['reference_model']}.json").read_text())
        seconds.append(reference["train_seconds"] + fit_card["fit_seconds"]
                       + metrics.set_index("target").loc[target, "score_seconds"])
    bmia = board[(board["study"] == "part") & (board["attack"] == "bmia")]
    assert bmia["compute_seconds"].item() == pytest.approx(np.mean(seconds), abs=0.01)
    table = pd.read_csv(results / "artifacts/BMIA-T1.csv")
    attack_p = table[(table["paper_attack"] == "attack_p") & (table["metric"] == "tpr@1%")]
    assert attack_p["paper"].iloc[0] == pytest.approx(1.10)  # BMIA Table 1, Purchase100
    # 120 non-members per target cannot resolve TPR@1%; TPR@10% comes with an interval
    assert not attack_p["resolvable"].iloc[0] and pd.isna(attack_p["ours"].iloc[0])
    at_ten = table[(table["paper_attack"] == "attack_p") & (table["metric"] == "tpr@10%")]
    assert at_ten["ours_low"].iloc[0] <= at_ten["ours"].iloc[0] <= at_ten["ours_high"].iloc[0]
    markdown = (results / "artifacts/BMIA-T1.md").read_text()
    assert "n/r" in markdown and "## Regime" in markdown and "a tiny reference" in markdown
    # a table of costs or accuracies beside the paper's is read with the regime and the
    # deviations too, as a paper table is
    costs = (results / "artifacts/QMIA-X1.md").read_text()
    assert "## Regime" in costs and "a tiny reference" in costs
    assert "## Deviations" in costs and "tiny test config" in costs
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
    # the Stolen Memories study runs twice (two repetitions) and the BMIA study has two
    # targets, each a repetition: their claims rest on both; QMIA's study on one
    assert claims.loc[claims["claim"] == "SM-C1", "replicates"].tolist() == [2]
    assert claims.loc[claims["claim"] == "BMIA-C11", "replicates"].tolist() == [2]
    assert set(claims.loc[claims["study"] == "tab", "replicates"].dropna()) == {1}
    # a verdict over 3 or more replicates says how likely a rerun keeps it; these tiny
    # studies' intervals are over audited records (2 targets at most), which cannot
    assert claims["replication"].isna().all()
    assert "No verdict rests on replicates, so none says how likely a rerun" in (
        results / "artifacts/claims.md").read_text()
    first, second = (yaml.safe_load((results / f"studies/sm/models/target/{target}.json")
                                    .read_text()) for target in (0, 1))
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


def test_no_figure_is_cut_off_at_its_edges(workflow):
    """Nothing is drawn on a figure's outermost pixels: a title wrapped to a fixed number of
    characters ran off both sides of single-panel figures (SM-F6's long title here)."""
    from matplotlib.image import imread

    figures = sorted((workflow / "results" / "artifacts").glob("*.png"))
    assert len(figures) >= 8
    for path in figures:
        pixels = imread(path)[..., :3].min(axis=2)  # the darkest channel, 1 = white
        edges = np.concatenate([pixels[:2].ravel(), pixels[-2:].ravel(),
                                pixels[:, :2].ravel(), pixels[:, -2:].ravel()])
        assert edges.min() > 0.95, path.name


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
    # the leaderboard, Table 1 and the claims read its scores, and QMIA-X1's regime section
    # its metrics (attack-p is the study's regime baseline); the ROC and the density figure
    # (which draws attack-p's distribution) read its settings
    assert jobs == {"score": 1, "table": 4, "figure": 2, "index": 1, "all": 1}, jobs
    (wildcards,) = jobs.wildcards("score")
    assert "study=part" in wildcards and "attack=attack-p" in wildcards


def test_relabelling_an_attack_or_moving_the_data_dir_retrains_and_rescores_nothing(workflow):
    """A label only names an attack in the tables, and the tiny config's datasets are all
    generated: they read nothing under data_dir. One dry run checks both."""
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["attack-p"]["label"] = "Attack-P, relabelled"
    edited["data_dir"] = "elsewhere"
    jobs = planned_jobs(workflow, edited)
    assert jobs and set(jobs) <= {"table", "figure", "figure_with_data", "index", "all"}, jobs


def test_editing_training_reruns_only_that_study(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["bal"]["training"]["epochs"] = 7
    jobs = planned_jobs(workflow, edited)
    # its two targets, the Hessian fits of each (exact and CG) and its four attacks
    assert jobs.get("train") == 2 and jobs.get("fit") == 4 and jobs.get("score") == 4, jobs
    assert "dataset" not in jobs and "split" not in jobs
    assert all("study=bal" in w for w in jobs.wildcards("train"))


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
    n_attacks = sum(len(study["attacks"]) for study in TINY["studies"].values())  # the
    # partition study's replicates are repetitions: one score job scores them all
    assert jobs.get("score") == n_attacks and "fit" not in jobs and "train" not in jobs, jobs


def test_fits_are_shared_by_attacks_with_the_same_fit_parameters(workflow):
    edited = copy.deepcopy(TINY)
    edited["studies"]["part"]["attacks"]["bmia-mc"] = {
        "attack": "bmia", "n_reference": 1, "n_samples": 20, "predictive": "mc"}
    jobs = planned_jobs(workflow, edited)
    assert "fit" not in jobs and jobs.get("score") == 1, jobs


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
    # IHA's precompute is its first fit (the Hessian) but for the audit's projections, which
    # count per record; LOSS has none
    fits = [json.loads(card.read_text())
            for card in (workflow / "results/studies/bal/fits").glob("hessian-*/0.json")]
    (fit,) = [f for f in fits if f["settings"]["params"].get("solver", "exact") == "exact"]
    assert costs.loc["iha", "precompute_seconds"] == pytest.approx(
        fit["fit_seconds"] - fit["info"].get("projection_seconds", 0.0), abs=0.01)
    assert costs.loc["loss", "precompute_seconds"] == 0
    # runtime memory: the score job's own peak, recorded in its metrics (a warm worker's child
    # is not the process Snakemake's benchmark file measures)
    loss = pd.read_parquet(workflow / "results/studies/bal/metrics/loss.parquet")
    assert costs.loc["loss", "runtime_memory_mb"] == pytest.approx(
        loss["peak_memory_mb"].max(), rel=0.01) and loss["peak_memory_mb"].gt(0).all()
    assert costs.loc["iha", "paper_seconds_per_sample"] == pytest.approx(0.16)
    iha = costs.loc["iha"]  # a thousand-record audit: precompute + 1,000 records
    assert iha.audit_minutes == pytest.approx(
        (iha.precompute_seconds + 1000 * iha.seconds_per_sample) / 60, rel=0.01, abs=0.01)
    assert iha.paper_audit_minutes == 60


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
    assert all("study=wide" in w for w in jobs.wildcards("train"))


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
    assert [list(group) for _, group in sweep.groupby("target")["setting"]] == [
        ["n_D=0, n_M=0", "n_D=2, n_M=0"]] * 2  # two repetitions
    utility = pd.read_csv(results / "artifacts/SM-F13.csv").set_index("study")
    card = yaml.safe_load((results / "studies/sm-dp/models/target/0.json").read_text())
    assert utility.loc["sm-dp", "epsilon"] == pytest.approx(card["dp_epsilon"])
    assert 3.9 < card["dp_epsilon"] <= 4.0 and card["dp_noise_multiplier"] > 0
    assert np.isinf(utility.loc[["sm"], "epsilon"]).all()  # a row per repetition
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
    """Scores, metrics, fits, checkpoints and figures are bit-identical; only the measured
    scoring time and memory differ. The first run's jobs ran in warm workers (miarepro.warm),
    the rerun's each in a process of its own: the workers change no result."""
    import numpy as np

    assert all("listening" in (workflow / f"logs/warm-{kind}.log").read_text()
               for kind in ("torch", "scores", "artifacts"))
    shutil.copytree(workflow / "results", tmp_path / "first")
    rerun = [f"studies/{study}/{kind}/{attack}.parquet" for kind in ("scores", "metrics")
             for study, attack in (("part", "bmia"), ("part", "bmia-ref-wide"),
                                   ("part", "qmia"), ("part-ood", "attack-p"))]
    drawn = ["artifacts/ROC-part.png", "artifacts/BMIA-F2.png"]  # from scores alone, no timing
    # everything these need is recomputed: the dataset, splits, models of two studies, fits
    alone = {**TINY, "resources": {"warm_worker": False}}
    run(workflow, alone, "--forceall", *[f"results/{path}" for path in rerun + drawn])
    for path in drawn:  # a figure drawn in the artifact worker is the one drawn alone
        assert (tmp_path / "first" / path).read_bytes() == (workflow / "results" / path
                                                           ).read_bytes(), path
    for path in rerun:
        first, second = tmp_path / "first" / path, workflow / "results" / path
        pd.testing.assert_frame_equal(pd.read_parquet(first).drop(columns=COSTS, errors="ignore"),
                                      pd.read_parquet(second).drop(columns=COSTS, errors="ignore"))
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
    # the executor submits from two threads: an ID counted from the log could repeat, so
    # each submission's ID is its own process's
    "sbatch": 'echo "$*" >> "$FAKE_SLURM/sbatch.log"\ncat > /dev/null\n'
              'echo "$$" >> "$FAKE_SLURM/ids"\necho "$$"\n',
    "sacct": '[ -f "$FAKE_SLURM/ids" ] && while read id; do echo "$id|FAILED"; done '
             '< "$FAKE_SLURM/ids"\nexit 0\n',
    "squeue": "exit 0\n",
    "sinfo": "exit 0\n",
    "scontrol": 'echo "MinJobAge = 300 sec"\n',
}


def test_slurm_jobs_get_the_configured_resources(workflow, tmp_path):
    """The sbatch lines of a training, a fit and two scoring jobs, through `--profile slurm`:
    the study's own memory and time where it sets them, the config's otherwise; scoring on
    saved signals is a small CPU job, scoring that runs the models (Stolen Memories'
    white-box attacks) a GPU job like a fit."""
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
               "results/studies/part/scores/naive.parquet",
               "results/studies/sm/scores/bayes-wb.parquet"]
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "FAKE_SLURM": str(tmp_path)}
    done = subprocess.run([*SNAKEMAKE, "--directory", str(work), "--configfile",
                           str(work / "cluster.yaml"), "--profile", str(ROOT / "slurm"),
                           "--sdm", "env-modules", "--retries", "0", "--latency-wait", "1",
                           # every job submitted even once the fake sacct fails one
                           "--keep-going", "--slurm-init-seconds-before-status-checks", "1",
                           "--forcerun", *targets, "--until", *targets],
                          capture_output=True, text=True, env=env, timeout=300, check=False)
    lines = (tmp_path / "sbatch.log").read_text().splitlines()

    def submitted(rule: str) -> str:
        found = [line for line in lines if f"--comment rule_{rule}" in line]
        # the failed jobs' reports fill the end of the log: show why submission stopped too
        why = [line for line in done.stderr.splitlines()
               if re.search(r"warn|exception|error in rule|fail.*(solve|submi)", line, re.I)]
        assert found, (f"no {rule} job submitted; Snakemake said:\n" + "\n".join(why[:40])
                       + "\n...\n" + done.stderr[-2000:])
        return found[0]

    train, fit = submitted("train_"), submitted("fit_")
    score, on_models = submitted("score_wildcards_"), submitted("score_models_")
    for flag in ("-p gpu-a100", "--cpus-per-task=8", "--gpus=1"):
        assert flag in train and flag in fit, (flag, train, fit)
    for flag in ("-t 1440", "--mem 64000"):
        assert flag in train, (flag, train)
    for flag in ("-t 720", "--mem 32000"):
        assert flag in fit, (flag, fit)
    for flag in ("-p cpu", "-t 30", "--mem 8000", "--cpus-per-task=1"):
        assert flag in score, (flag, score)
    assert "--gpus" not in score and "--gres" not in train + score + on_models
    for flag in ("-p gpu-a100", "--gpus=1", "-t 720", "--mem 32000"):
        assert flag in on_models, (flag, on_models)


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
    paper = search.set_index("hyperparameter")["paper"]  # as Table 5 prints it
    assert paper["depth"] == "uniform(1, 10)" and paper["iterations"] == "loguniform(1, 1000)"
    costs = pd.read_csv(results / "artifacts/QMIA-X1.csv").set_index("study")
    assert costs.loc["tab", "search_trials"] == 3 and costs.loc["part", "search_trials"] == 0
    assert costs["paper_gpu_minutes"].isna().all()  # QMIA prints no budget for these datasets
    # a card says where its job ran, a fit's (on the GPU where there is one) as a model's
    fit_card = yaml.safe_load(next((results / "studies/part/fits").glob("qmia-*/0.json")
                                   ).read_text())
    model_card = yaml.safe_load((results / "studies/part/models/target/0.json").read_text())
    # the ratio is of the two columns (another test retrains part's models and fit, so their
    # cards may now hold a rerun's seconds, not the table's)
    np.testing.assert_allclose(costs["fit_per_reference_model"],
                               costs["fit_seconds"] / costs["reference_train_seconds"], atol=0.005)
    assert (costs[["fit_seconds", "reference_train_seconds"]] > 0).all(axis=None)
    assert fit_card["device"] == model_card["device"] in ("cpu", "cuda")
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
    scores and what reads them, and nothing upstream; editing the claims' intervals in
    uncertainty.py rescores nothing; editing the driver's scoring step
    (pipeline.measure) reruns every score job, and still nothing upstream."""
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
    intervals = repo / "miarepro" / "uncertainty.py"  # the claims' side of it: no rescoring
    intervals.write_text(intervals.read_text().replace("def over_replicates(",
                                                       "def over_replicates(  # an edit\n"))
    claims = planned()
    assert claims.get("score", 0) == after.get("score", 0), (after, claims)
    assert claims.get("table", 0) > 0, claims
    driver = repo / "miarepro" / "pipeline.py"
    driver.write_text(driver.read_text().replace("def measure(", "def measure(  # an edit\n"))
    scoring = planned()
    assert scoring.get("score", 0) > after.get("score", 0), (after, scoring)
    for rule in ("dataset", "split", "train", "fit"):
        assert scoring.get(rule, 0) == before.get(rule, 0), (rule, before, scoring)


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
        pd.read_parquet(work / target).drop(columns=COSTS, errors="ignore"),
        pd.read_parquet(workflow / target).drop(columns=COSTS, errors="ignore"))
