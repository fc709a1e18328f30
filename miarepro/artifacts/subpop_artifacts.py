"""Subpop's Table 3 (training cost: all targets known vs per new sample) and Figure 2 (target
records beside their crafted subpopulations)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from miarepro import io, splits
from miarepro.artifacts.builders import regime_inputs, write_table_page
from miarepro.artifacts.catalog import paper_value, paper_values
from miarepro.artifacts.figures import _save, pyplot, title
from miarepro.artifacts.registry import TRAIN_MINUTES
from miarepro.artifacts.results import RESULTS, studies_of
from miarepro.paths import attack_params, model_home, reference_home

#: the paper's Table 3 rows: (paper attack, our attack family); "ours without BiGAN" is read as
#: the natural subpopulation, which trains nothing (matrix §5.4 [D])
_ROWS = (("watson", "watson"), ("sablayrolles", "sablayrolles"), ("subpop", "subpop"),
         ("subpop_no_bigan", "subpop_natural"))
_PAPER_SHADOWS, _PAPER_NEW_SHADOWS = 30, 15  # Table 3: 30 shadow models, 15 more per new sample


def _instances(study_config: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Our attack family -> (instance name, entry), the first instance of each family."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for name, entry in study_config["attacks"].items():
        found.setdefault(entry["attack"], (name, entry))
    return found


def _shadow_cards(results: str, study: str, study_config: dict[str, Any],
                  entry: dict[str, Any]) -> list[str]:
    home = reference_home(study, study_config, entry)
    indices = splits.reference_indices(study_config["split"]["scheme"], 0,
                                       entry.get("n_reference", 0))
    return [f"{results}/studies/{home}/models/reference/{i}.json" for i in indices]


def _bigan_card(results: str, study: str, study_config: dict[str, Any],
                entry: dict[str, Any]) -> str:
    from miarepro.paths import fit_paths

    return f"{fit_paths(results, study, study_config, entry)[0]}.json"


def cost_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    files = [path for study in studies_of(settings, config)
             for _, entry in _instances(config["studies"][study]).values()
             for path in cost_files(results, study, config["studies"][study], entry)]
    return sorted(set(files + regime_inputs(results, settings, config)))


def cost_files(results: str, study: str, study_config: dict[str, Any],
               entry: dict[str, Any]) -> list[str]:
    """The cards one attack instance's training cost reads (:func:`_costs`)."""
    if entry["attack"] in ("watson", "sablayrolles"):
        return _shadow_cards(results, study, study_config, entry)
    if entry["attack"] == "subpop":
        return [_bigan_card(results, study, study_config, entry)]
    return []


def _costs(study: str, study_config: dict[str, Any], entry: dict[str, Any]
           ) -> tuple[dict[str, float], dict[str, float], dict[str, str]]:
    """An attack's training minutes per Table 3 setting: measured, at the paper's model counts,
    and what it trains."""
    family = entry["attack"]
    if family in ("watson", "sablayrolles"):
        seconds = [io.read_json(p)["train_seconds"]
                   for p in _shadow_cards(RESULTS, study, study_config, entry)]
        known, mean = sum(seconds) / 60, float(np.mean(seconds)) / 60
        # per new sample, Sablayrolles et al. train the IN half of their shadows anew
        new = len(seconds) // 2 if family == "sablayrolles" else 0
        at_paper = {"all_targets_known": mean * _PAPER_SHADOWS,
                    "per_new_sample": mean * _PAPER_NEW_SHADOWS if new else 0.0}
        measured = {"all_targets_known": known, "per_new_sample": mean * new}
        models = {"all_targets_known": f"{len(seconds)} shadow models",
                  "per_new_sample": f"{new} new IN shadow models" if new else "none"}
        return measured, at_paper, models
    fit = (io.read_json(_bigan_card(RESULTS, study, study_config, entry))["fit_seconds"] / 60
           if family == "subpop" else 0.0)
    trained = "BiGAN" if family == "subpop" else "none"
    measured = {"all_targets_known": fit, "per_new_sample": 0.0}
    return measured, measured, {"all_targets_known": trained, "per_new_sample": trained}


def minutes_at_paper_counts(study: str, study_config: dict[str, Any], attack: str) -> float:
    """Table 3's cost of one attack instance with every target known, at the paper's model
    counts (the cost claims compare these: our studies train fewer shadow models)."""
    return _costs(study, study_config, study_config["attacks"][attack])[1]["all_targets_known"]


def training_costs(name: str, settings: dict[str, Any], config: dict[str, Any],
                   prefix: str) -> None:
    """Table 3: minutes of training each attack needs when all targets are known, and per new
    target. Shadow-model attacks: our shadows' measured training minutes, and the mean shadow
    scaled to the paper's 30 (15 new IN shadows per new sample for Sablayrolles et al.); ours:
    the BiGAN fit's minutes; the natural subpopulation and Watson et al. train nothing per new
    sample, and neither does ours (its generator serves every target)."""
    papers = paper_values(name)
    rows = []
    for study in studies_of(settings, config):
        study_config = config["studies"][study]
        found = _instances(study_config)
        for paper_attack, family in _ROWS:
            if family not in found:
                continue
            instance, entry = found[family]
            measured, at_paper, models = _costs(study, study_config, entry)
            for setting in ("all_targets_known", "per_new_sample"):
                paper = paper_value(papers, study_config.get("paper_dataset"), paper_attack,
                                    setting, TRAIN_MINUTES, study_config.get("paper_model"))
                rows.append({
                    "study": study, "attack": instance, "paper_attack": paper_attack,
                    "setting": setting, "trained": models[setting],
                    "ours_minutes": round(measured[setting], 3),
                    "ours_minutes_at_paper_counts": round(at_paper[setting], 3),
                    "paper_gpu_minutes": np.nan if paper is None else paper})
    write_table_page(prefix, pd.DataFrame(rows), f"{name}: training minutes", [
        "Minutes of training each attack needs before it can score (CPU of this run; the "
        "paper's are minutes on one RTX 2080 Ti). Shadow-model attacks: our shadows' measured "
        "minutes, and their mean scaled to the paper's 30 shadows (all targets known) and 15 "
        "new IN shadows (Sablayrolles et al., per new sample: ours train half their shadows "
        "anew, each record being IN for half of them; `benchmarks/subpop.py` trains those 15 "
        "for a few new records and times them). Ours: the BiGAN fit, once per victim. 'Ours "
        "without BiGAN' is read as the natural subpopulation, which trains nothing."],
        config, studies_of(settings, config))


# --- Figure 2 -------------------------------------------------------------------------------

def _figure_files(results: str, settings: dict[str, Any], config: dict[str, Any]
                  ) -> tuple[str, dict[str, Any], dict[str, Any], str, str]:
    (study,) = studies_of(settings, config)
    study_config = config["studies"][study]
    (attack,) = settings["attacks"]
    entry = study_config["attacks"][attack]
    home = f"{results}/studies/{model_home(study, study_config)}"
    return study, study_config, entry, home, f"{results}/datasets/{study_config['dataset']}.npz"


def example_inputs(results: str, settings: dict[str, Any], config: dict[str, Any]) -> list[str]:
    from miarepro.paths import fit_paths

    study, study_config, entry, home, dataset = _figure_files(results, settings, config)
    return [dataset, dataset.replace(".npz", ".json"), f"{home}/split.npz",
            f"{home}/models/target/0.pt",
            f"{fit_paths(results, study, study_config, entry)[0]}.npz"]


def subpopulation_examples(name: str, settings: dict[str, Any], config: dict[str, Any],
                           prefix: str) -> None:
    """Figure 2: audited records of target 0 (members and non-members) and crafted records of
    their subpopulations at the attack's β, and the share of crafted records the victim gives
    the target's predicted class, over a sweep of β (at the studies' β most should keep it)."""
    import torch

    from miarepro.attacks.subpop import trained_networks, victim_latent
    from miarepro.bigan import noisy_latents
    from miarepro.paths import fit_paths
    from miarepro.pipeline import StudyFiles

    study, study_config, entry, home, dataset = _figure_files(RESULTS, settings, config)
    files = StudyFiles(dataset, f"{home}/split.npz", f"{home}/models", study_config["model"],
                       study_config["training"])
    generator = trained_networks(io.read_arrays(
        f"{fit_paths(RESULTS, study, study_config, entry)[0]}.npz"))[0]
    victim = files.load_model("target", 0)
    h = victim_latent(victim)
    beta = float(attack_params(entry).get("beta", 0.05))
    betas = sorted({*settings.get("betas", [0.01, 0.05, 0.1, 0.2, 0.5, 1.0]), beta})
    rng = np.random.default_rng(0)
    audit = rng.permutation(files.parts(0)["audit"])  # records of several classes
    member = splits.training_mask(files.split, "target", 0)[audit]
    shown = np.concatenate([audit[member][:3], audit[~member][:3]])
    x = files.features()
    columns = 8
    with torch.no_grad():
        z = h(torch.as_tensor(x[shown])).double().numpy()
        crafted = generator(torch.as_tensor(noisy_latents(z, beta, columns, rng).reshape(
            len(shown) * columns, -1), dtype=torch.float32)).numpy()
        sample = audit[rng.permutation(len(audit))[:300]]
        own = victim(torch.as_tensor(x[sample])).argmax(1).numpy()
        z_sample = h(torch.as_tensor(x[sample])).double().numpy()
        kept = []
        for b in betas:
            latents = noisy_latents(z_sample, b, 10, rng).reshape(len(sample) * 10, -1)
            predicted = victim(generator(torch.as_tensor(latents, dtype=torch.float32)))
            kept.append(float(np.mean(predicted.argmax(1).numpy() == np.repeat(own, 10))))
    plt = pyplot("white")
    figure = plt.figure(figsize=(11, 5))
    grid = figure.add_gridspec(len(shown), columns + 4)
    for row, index in enumerate(shown):
        images = [x[index], *crafted[row * columns : (row + 1) * columns]]
        for column, image in enumerate(images):
            axis = figure.add_subplot(grid[row, column])
            axis.imshow(_displayable(image), cmap="gray", vmin=0, vmax=1)
            axis.set_axis_off()
            if column == 0:
                axis.set_title("member" if member[np.flatnonzero(audit == index)[0]]
                               else "non-member", fontsize=6)
    axis = figure.add_subplot(grid[:, columns + 1 :])
    axis.plot(betas, np.multiply(kept, 100), marker="o")
    axis.axvline(beta, ls=":", color="grey", label=f"the attack's β = {beta:g}")
    axis.set(xscale="log", xlabel="noise scale β", ylim=(0, 100),
             ylabel="crafted records of the target's class (%)",
             title=f"class kept, {len(sample)} audited records x 10")
    axis.legend(fontsize=7, loc="lower left")
    title(figure, f"{settings.get('title', name)} [{study}: first column the audited record, "
                  f"then {columns} of its crafted records at β = {beta:g}; right: how many "
                  "crafted records the victim puts in the audited record's class]", fontsize=8)
    _save(figure, prefix)


def _displayable(image: np.ndarray) -> np.ndarray:
    """``(C, H, W)`` or flat square records as an image in [0, 1]."""
    image = np.asarray(image, dtype=np.float64)
    if image.ndim == 1:
        side = round(np.sqrt(image.size))
        image = image.reshape(1, side, side)
    image = image[0] if image.shape[0] == 1 else np.moveaxis(image, 0, -1)
    low, high = image.min(), image.max()
    return image if low >= 0 and high <= 1 else (image - low) / max(high - low, 1e-12)
