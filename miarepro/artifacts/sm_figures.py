"""Stolen Memories' figures that read more than scores: Figure 2 redrawn from the synthetic data,
and Figure 6, general-wb's validation against test accuracy over its (n_D, n_M) sweep."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from miarepro import io, splits
from miarepro.artifacts.figures import _save, error_bars, palette, pyplot, title
from miarepro.artifacts.results import RESULTS, studies_of
from miarepro.paths import model_home


def _study_files(results: str, settings: dict[str, Any], config: dict[str, Any]
                 ) -> tuple[str, dict[str, Any], str, str]:
    (study,) = studies_of(settings, config)
    study_config = config["studies"][study]
    home = f"{results}/studies/{model_home(study, study_config)}"
    return study, study_config, f"{results}/datasets/{study_config['dataset']}.npz", home


def two_gaussians_inputs(results: str, settings: dict[str, Any],
                         config: dict[str, Any]) -> list[str]:
    _, _, dataset, home = _study_files(results, settings, config)
    return [dataset, dataset.replace(".npz", ".json"), f"{home}/split.npz"]


def two_gaussians(name: str, settings: dict[str, Any], config: dict[str, Any],
                  prefix: str) -> None:
    """Figure 2: the population's density ``η*`` of one feature of one class and the target
    training set's ``η̂`` (Theorem 1's Gaussians with the shared variance), and the Bayes-optimal
    boundary at their crossing; drawn for the feature whose training mean moved most."""
    study, _, dataset, home = _study_files(RESULTS, settings, config)
    meta = io.read_json(dataset.replace(".npz", ".json"))["meta"]
    if "means" not in meta:
        raise ValueError(f"{name}: study {study!r} does not use generated Gaussian data")
    data, split = io.read_arrays(dataset), io.read_arrays(f"{home}/split.npz")
    x, y = data["X"].reshape(len(data["y"]), -1), data["y"]
    train = splits.training_indices(split, "target", 0)
    cls = 0
    mu_star = np.asarray(meta["means"])[cls]
    sigma = np.sqrt(np.asarray(meta["variances"]))
    mu_hat = x[train][y[train] == cls].mean(axis=0)
    j = int(np.argmax(np.abs(mu_hat - mu_star) / sigma))
    grid = np.linspace(min(mu_star[j], mu_hat[j]) - 3.5 * sigma[j],
                       max(mu_star[j], mu_hat[j]) + 3.5 * sigma[j], 400)
    from scipy.stats import norm

    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.4))
    population = norm.pdf(grid, mu_star[j], sigma[j])
    training = norm.pdf(grid, mu_hat[j], sigma[j])
    axis.plot(grid, population, label="η*: population N(μ*, σ²)")
    axis.plot(grid, training, label="η̂: training set N(μ̂, σ²)")
    boundary = (mu_star[j] + mu_hat[j]) / 2
    side = grid > boundary if mu_hat[j] > mu_star[j] else grid < boundary
    axis.fill_between(grid, 0, np.maximum(population, training), where=side, alpha=0.15,
                      color="C1", label="member side")
    axis.axvline(boundary, color="k", ls="--", lw=1, label="decision boundary")
    point = x[train][y[train] == cls][0, j]
    axis.plot([point], [0], "k^", markersize=8, clip_on=False, label="a training point x")
    axis.set(xlabel=f"feature {j} of class {cls}", ylabel="density")
    axis.legend(fontsize=7)
    title(figure, f"{settings.get('title', name)} [{study}, target 0: "
                  f"{int((y[train] == cls).sum())} training records]")
    _save(figure, prefix)


def _fit_files(results: str, settings: dict[str, Any], config: dict[str, Any]
               ) -> tuple[str, dict[str, Any], list[str]]:
    from miarepro.paths import fit_paths

    (study,) = studies_of(settings, config)
    study_config = config["studies"][study]
    (attack,) = settings["attacks"]
    return study, study_config, fit_paths(results, study, study_config,
                                          study_config["attacks"][attack])


def sweep_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    study, study_config, paths = _fit_files(results, settings, config)
    home = f"{results}/studies/{model_home(study, study_config)}"
    return [f"{home}/split.npz"] + [f"{p}{suffix}" for p in paths for suffix in (".npz", ".json")]


def displacement_sweep(name: str, settings: dict[str, Any], config: dict[str, Any],
                       prefix: str) -> None:
    """Figure 6: per (n_D, n_M), general-wb's accuracy on the validation shadow models (what
    the fit chose by) beside its accuracy on each target's audit (reported only), and the CSV
    of both. Accuracy of a balanced decision at the attack's own threshold."""
    from miarepro.metrics import decision_metrics

    study, study_config, paths = _fit_files(RESULTS, settings, config)
    split = io.read_arrays(f"{RESULTS}/studies/{model_home(study, study_config)}/split.npz")
    rows = []
    for target, path in enumerate(paths):
        fit, card = io.read_arrays(f"{path}.npz"), io.read_json(f"{path}.json")
        audit = splits.repetition(split, target)["audit"]
        member = splits.training_mask(split, "target", target)[audit]
        for point, logits in zip(card["info"]["sweep"], fit["general_wb"], strict=True):
            rows.append({"target": target, "setting": f"n_D={point['n_d']}, n_M={point['n_m']}",
                         "validation": 100 * point["validation_accuracy"],
                         "test": 100 * decision_metrics(member, logits[audit] > 0)["accuracy"]})
    table = pd.DataFrame(rows)
    io.write_table(prefix + ".csv", table)
    mean = table.groupby("setting", sort=False)[["validation", "test"]].mean()
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(max(5, 0.9 * len(mean) + 2), 3.6))
    ticks = np.arange(len(mean))
    for column, marker in (("validation", "o"), ("test", "s")):
        axis.plot(ticks, mean[column], marker=marker, label=f"{column} (mean over targets)")
        for _, group in table.groupby("target"):
            axis.plot(ticks, group[column].to_numpy(), marker=marker, alpha=0.25, lw=0.8,
                      color="C0" if column == "validation" else "C1")
    axis.set_xticks(ticks, list(mean.index), rotation=30, ha="right", fontsize=7)
    axis.set(ylabel="attack accuracy (%)")
    axis.legend(fontsize=7)
    same = mean["validation"].idxmax() == mean["test"].idxmax()
    title(figure, f"{settings.get('title', name)} [{study}]: best validation "
                  f"{mean['validation'].idxmax()}, best test {mean['test'].idxmax()} "
                  f"({'the same' if same else 'different'})")
    _save(figure, prefix)


def dp_utility(name: str, settings: dict[str, Any], config: dict[str, Any],
               prefix: str) -> None:
    """Figure 13: train and test accuracy of each study's targets against the epsilon its
    DP-SGD recipe spent (from the model cards; a study without DP is drawn at infinity)."""
    from miarepro.artifacts.results import target_card

    rows = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        for target in range(study_config["targets"]):
            card = io.read_json(target_card(RESULTS, model_home(study, study_config), target))
            rows.append({"study": study, "target": target,
                         "epsilon": card.get("dp_epsilon", np.inf),
                         "noise_multiplier": card.get("dp_noise_multiplier", 0.0),
                         "train": 100 * card["train_accuracy"],
                         "test": 100 * card["test_accuracy"]})
    table = pd.DataFrame(rows)
    io.write_table(prefix + ".csv", table)
    finite = table.loc[np.isfinite(table["epsilon"]), "epsilon"]
    at_infinity = 4 * finite.max() if len(finite) else 1.0
    where = table["epsilon"].replace(np.inf, at_infinity)
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(5.5, 3.6))
    for column, marker in (("train", "o"), ("test", "s")):
        mean = table.assign(x=where).groupby("x")[column].mean()
        axis.plot(mean.index, mean, marker=marker, label=f"{column} accuracy (mean)")
        axis.scatter(where, table[column], marker=marker, alpha=0.3, s=12)
    axis.set_xscale("log")
    ticks = sorted(set(where))
    axis.set_xticks(ticks, [f"{t:.3g}" if t != at_infinity else "no DP" for t in ticks])
    axis.set(xlabel="epsilon spent (RDP accountant)", ylabel="accuracy (%)")
    axis.legend(fontsize=7)
    title(figure, settings.get("title", name))
    _save(figure, prefix)


def size_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    from miarepro.artifacts.builders import score_inputs

    cards = {f"{results}/datasets/{config['studies'][s]['dataset']}.json"
             for s in studies_of(settings, config)}
    return score_inputs(results, settings, config) + sorted(cards)


def dataset_size_trend(name: str, settings: dict[str, Any], config: dict[str, Any],
                       prefix: str) -> None:
    """Figure 8: each attack's accuracy on every study against the size of its dataset, with
    95% intervals (the paper: a downward trend with noise). Points, not lines: the studies are
    different datasets, and a line through them drew a trend within one that none of them
    shows; each study is named above the plot, clear of the points."""
    from miarepro import uncertainty
    from miarepro.artifacts import results as res

    rows = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        card = io.read_json(f"{RESULTS}/datasets/{study_config['dataset']}.json")
        for attack in settings["attacks"]:
            if attack not in study_config["attacks"]:
                continue
            (metric,) = settings["metrics"]
            row = res.estimate_columns(metric, res.attack_estimates(RESULTS, study,
                                                                    attack)[metric])
            scale = uncertainty.percent_scale(metric)
            rows.append({"study": study, "records": card["n_samples"],
                         "attack": study_config["attacks"][attack].get("label", attack),
                         metric: scale * row[metric], "low": scale * row[f"{metric}_low"],
                         "high": scale * row[f"{metric}_high"]})
    table = pd.DataFrame(rows)
    io.write_table(prefix + ".csv", table)
    plt = pyplot()
    figure, axis = plt.subplots(figsize=(6, 3.8))
    labels = list(dict.fromkeys(table["attack"]))
    colours = dict(zip(labels, palette(len(labels)), strict=True))
    for k, (label, group) in enumerate(table.groupby("attack", sort=False)):
        group = group.sort_values("records")
        x = group["records"] * (1 + 0.03 * (k - len(labels) / 2))  # side by side at one size
        axis.errorbar(x, group[metric], yerr=error_bars(group[metric], group["low"],
                                                        group["high"]),
                      marker="o", capsize=3, ls="none", color=colours[label], label=label)
    for _, row in table.drop_duplicates("study").iterrows():
        axis.annotate(row["study"], (row["records"], 1.0), xycoords=("data", "axes fraction"),
                      xytext=(0, 3), textcoords="offset points", fontsize=6, rotation=90,
                      va="bottom", ha="center", alpha=0.7)
    axis.set_xscale("log")
    axis.minorticks_off()  # the sizes themselves: a log axis' own labels ran together
    sizes = sorted(set(table["records"]))
    axis.set_xticks(sizes, [f"{size:,}" for size in sizes], fontsize=7, rotation=45)
    axis.set(xlabel="records in the dataset", ylabel=f"{metric} (%)")
    axis.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    title(figure, settings.get("title", name))
    _save(figure, prefix)


def explanation_inputs(results: str, settings: dict[str, Any],
                       config: dict[str, Any]) -> list[str]:
    _, _, dataset, home = _study_files(results, settings, config)
    return [dataset, dataset.replace(".npz", ".json"), f"{home}/split.npz",
            f"{home}/models/target/0.pt"]


def influence_explanations(name: str, settings: dict[str, Any], config: dict[str, Any],
                           prefix: str) -> None:
    """Figure 1, qualitative: (a) 12 training images of target 0; (b) the influence-directed
    explanation (input pixels' internal influence on the class logit times the pixels, Eq. 9
    at the input layer) of three test images of one class; (c) the same on the training image
    of that class the target is least sure of, the stand-in for the paper's pink-background
    photo. The images must be square."""
    import torch

    from miarepro.influence import internal_influence
    from miarepro.pipeline import StudyFiles

    study, study_config, dataset, home = _study_files(RESULTS, settings, config)
    files = StudyFiles(dataset, f"{home}/split.npz", f"{home}/models", study_config["model"],
                       study_config["training"])
    model = files.load_model("target", 0)
    x, y = files.features(), files.labels()
    side = round(np.sqrt(x[0].size))
    train = splits.training_indices(files.split, "target", 0)
    test = splits.repetition(files.split, 0)["target_test"]
    cls = 0  # one class, as the paper explains one person
    with torch.no_grad():
        confidence = torch.softmax(model(torch.as_tensor(x[train])), -1)[:, cls].numpy()
    own = train[y[train] == cls]
    atypical = int(own[np.argmin(confidence[y[train] == cls])])
    explained = [int(i) for i in test[y[test] == cls][:3]] + [atypical]
    inputs = torch.as_tensor(x[explained])
    chi = internal_influence(model, inputs, cls, steps=64)
    attribution = (chi * inputs).reshape(len(explained), side, side).numpy()
    plt = pyplot("white")
    figure, axes = plt.subplots(3, 8, figsize=(10, 4.2))
    for axis, index in zip(axes[:2, :6].ravel(), train[:12], strict=True):
        axis.imshow(x[index].reshape(side, side), cmap="gray")
        axis.set_title(f"train, label {y[index]}", fontsize=6)
    for k, index in enumerate(explained):
        scale = float(np.abs(attribution[k]).max()) or 1.0
        axes[2, 2 * k].imshow(x[index].reshape(side, side), cmap="gray")
        axes[2, 2 * k].set_title("atypical training" if index == atypical else "test",
                                 fontsize=6)
        axes[2, 2 * k + 1].imshow(attribution[k], cmap="RdBu_r", vmin=-scale, vmax=scale)
        axes[2, 2 * k + 1].set_title(f"influence x input ({cls})", fontsize=6)
    for axis in axes.ravel():
        axis.set_axis_off()
    title(figure, f"{settings.get('title', name)} [{study}, target 0; qualitative: red pixels "
                  f"raise the class-{cls} logit, blue lower it]", fontsize=8)
    _save(figure, prefix)
