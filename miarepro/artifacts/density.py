"""BMIA Figure 2: how each attack models the non-member score distribution of one hard sample.

The paper takes a non-member whose hinge score under the target beats 95% of the non-members
and draws, per attack, the distribution of that score it expects from a non-member, with its
threshold at alpha = 5% (Eqs. 6 and 8). Attack-P uses one marginal distribution for every
sample (the target's hinges on population data); QMIA the Gaussian its regressor predicts for
the sample; offline LiRA a Gaussian fitted to the sample's hinges under the reference models;
BMIA the sample's hinges under posterior draws of its one reference model, summarised by their
Gaussian. A threshold below the target score accepts the
non-member: a false positive.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from miarepro import io
from miarepro.artifacts.results import RESULTS, studies_of
from miarepro.paths import attack_params, model_home, reference_home

ALPHA = 0.05  # the paper's alpha
QUANTILE = 0.95  # the chosen non-member's hinge beats this fraction of non-members


def inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    """The files the figure reads: data, split, target 0's signals, references and fits."""
    (study,) = studies_of(settings, config)
    study_config = config["studies"][study]
    files = list(_study_files(results, study, study_config))
    for name in settings["attacks"]:
        references, fit = _attack_files(results, study, study_config,
                                        study_config["attacks"][name])
        files += [*references.values(), *([fit] if fit else [])]
    return files


def _study_files(results: str, study: str, study_config: dict[str, Any]) -> tuple[str, ...]:
    """(dataset, split, target 0's signals) of a study."""
    home = f"{results}/studies/{model_home(study, study_config)}"
    return (f"{results}/datasets/{study_config['dataset']}.npz", f"{home}/split.npz",
            f"{home}/models/target/0.npy")


def _attack_files(results: str, study: str, study_config: dict[str, Any],
                  attack: dict[str, Any]) -> tuple[dict[int, str], str | None]:
    """Target 0's reference signal files of an attack, by model index, and its fit file."""
    from miarepro.paths import fit_paths
    from miarepro.splits import reference_indices

    where = f"{results}/studies/{reference_home(study, study_config, attack)}"
    references = reference_indices(study_config["split"]["scheme"], 0,
                                   attack.get("n_reference", 0))
    fits = fit_paths(results, study, study_config, attack)[:1]
    return ({i: f"{where}/models/reference/{i}.npy" for i in references},
            f"{fits[0]}.npz" if fits else None)


def conditional(family: str, ctx: Any, params: dict[str, Any]) -> tuple[np.ndarray, float, float]:
    """(samples or ``[]``, mean, std) of the non-member hinge an attack expects for the one
    audited sample of ``ctx``; Attack-P returns its marginal samples and their quantile."""
    from miarepro.attacks.bmia import reference_hinges
    from miarepro.attacks.reference import moments

    if family == "marginal":
        population = ctx.target_statistic("hinge", ctx.population).mean(axis=0)
        return population, float("nan"), float("nan")
    if family == "lira":
        fit = moments(ctx.reference_statistic("hinge"), ctx.reference_in(),
                      params.get("variance", "per_example"))
        return np.array([]), float(fit.mean_out[0, 0]), float(np.sqrt(fit.var_out[0, 0]))
    if family == "qmia":
        if "mu" not in ctx.fit:
            raise ValueError("the density figure draws QMIA's Gaussian head only")
        sample = ctx.audit[0]
        return np.array([]), float(ctx.fit["mu"][sample]), float(ctx.fit["sigma"][sample])
    if family == "bmia":
        draws = reference_hinges(ctx, params.get("n_samples", 100),
                                 params.get("predictive", "glm"))[0]
        return draws, float(draws.mean()), float(draws.std(ddof=1))
    raise ValueError(f"no conditional density for attack family {family!r} "
                     "(known: marginal, qmia, lira, bmia)")


def hard_nonmember(hinge: np.ndarray, member: np.ndarray) -> int:
    """Position of the non-member whose hinge is the smallest above the 95% quantile of all
    non-members' hinges."""
    outsiders = np.flatnonzero(~member)
    cut = np.quantile(hinge[outsiders], QUANTILE)
    above = outsiders[hinge[outsiders] > cut]
    return int(above[np.argmin(hinge[above])])


def density_figure(name: str, settings: dict[str, Any], config: dict[str, Any],
                   prefix: str) -> None:
    from scipy import stats  # here, not at the top: planning the DAG reads this module

    from miarepro.artifacts.figures import _save, palette, pyplot, title
    from miarepro.attacks import get_attack
    from miarepro.pipeline import attack_context

    plt = pyplot()
    (study,) = studies_of(settings, config)
    study_config = config["studies"][study]
    dataset, split_path, target = _study_files(RESULTS, study, study_config)
    labels = io.read_arrays(dataset, ["y"])["y"]
    split = io.read_arrays(split_path)
    target_logits = io.read_array(target)
    sample, target_score = None, None
    figure, axis = plt.subplots(figsize=(7.5, 4.0))
    colours = palette(len(settings["attacks"]))
    for colour, attack_name in zip(colours, settings["attacks"], strict=True):
        attack = study_config["attacks"][attack_name]
        family = attack["attack"]
        params = {**get_attack(family).defaults(), **attack_params(attack)}
        references, fit = _attack_files(RESULTS, study, study_config, attack)
        ctx = attack_context(attack, labels, split, 0, target_logits, references, fit,
                             study_config["nonmembers"])
        if sample is None:
            hinge = ctx.target_statistic("hinge").mean(axis=0)
            position = hard_nonmember(hinge, ctx.target_mask[ctx.audit])
            sample, target_score = int(ctx.audit[position]), float(hinge[position])
        one = dataclasses.replace(ctx, audit=np.array([sample]))
        draws, mean, std = conditional(family, one, params)
        if family == "marginal":
            threshold = float(np.quantile(draws, 1 - ALPHA))
            grid = np.linspace(draws.min(), draws.max(), 400)
            curve = stats.gaussian_kde(draws)(grid)
        else:
            threshold = mean + stats.norm.ppf(1 - ALPHA) * std
            grid = np.linspace(mean - 4 * std, mean + 4 * std, 400)
            curve = stats.norm.pdf(grid, mean, std)
        verdict = "accepts: false positive" if target_score > threshold else "rejects"
        label = attack.get("label", attack_name)
        axis.plot(grid, curve, color=colour, label=f"{label} ({verdict})")
        axis.axvline(threshold, color=colour, ls="--", lw=1)
        if family == "bmia" and len(draws):
            axis.hist(draws, bins=30, density=True, color=colour, alpha=0.25,
                      label=f"{label}: its posterior draws")
    axis.axvline(target_score, color="black", lw=1.5, label=f"target score {target_score:.2f}")
    axis.set(xlabel="hinge score of the sample", ylabel="density of non-member scores")
    axis.legend(fontsize=7)
    title(figure, f"{settings.get('title', name)} [{study}, target 0, sample {sample}; dashed: "
                  f"thresholds at alpha = {ALPHA:g}]")
    _save(figure, prefix)
