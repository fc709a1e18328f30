"""``results/artifacts/index.md``: every checklist artifact with an honest status."""

from __future__ import annotations

from typing import Any

from miarepro import io
from miarepro.artifacts.builders import BUILDERS
from miarepro.artifacts.results import studies_of
from miarepro.paths import independent_runs


def status(artifact_id: str, entry: dict[str, Any], config: dict[str, Any]) -> str:
    """A few words: what the run makes of the artifact, links to the deviations of its
    studies (each listed once, in ``deviations.md``) and what the rest would need."""
    if artifact_id in config["artifacts"]:
        settings = config["artifacts"][artifact_id]
        studies = (studies_of(settings, config)
                   if BUILDERS[settings["builder"]].reads_studies else [])
        deviating = [s for s in studies if config["studies"][s]["deviations"]]
        deviating += [artifact_id] if settings.get("deviations") else []
        if not studies and not deviating:  # built from the code alone, whatever the scale
            return "reproduced (independent of scale)"
        covered = sorted({config["studies"][s].get("paper_dataset") or s for s in studies})
        if "paper_dataset" in settings:  # drawn on a stand-in: IHA Tables 4, 5 and 9 on
            # MNIST for Purchase-100(S), QMIA's ImageNet ROC on a Purchase-like MLP
            covered = [f"{settings['paper_dataset']} (on {', '.join(studies)})"]
        scope = f" for {', '.join(covered)}" if entry["needs"] and covered else ""
        rest = f"; the rest needs {', '.join(entry['needs'])}" if entry["needs"] else ""
        if config["scale"] == "paper" and not deviating:
            return f"reproduced{scope}{rest}"
        links = ", ".join(f"[{name}](deviations.md#{name.lower()})" for name in deviating)
        return f"scaled-down proxy{scope} (deviations: {links or 'miniature settings'}){rest}"
    if entry["todo"].startswith("not reproducible"):
        return entry["todo"]
    if entry["needs"]:
        return f"needs {', '.join(entry['needs'])}: {entry['todo']}"
    return f"not yet implemented: {entry['todo']}"


def deviation_lines(config: dict[str, Any]) -> list[str]:
    """``deviations.md``: each study's departures from its paper, once, under a heading the
    index links to; then artifacts that state their own (BMIA Figure 1's toy regression)."""
    lines = ["# Deviations from the papers", "",
             f"Configuration scale: **{config['scale']}**. Each study's departures from its "
             "paper, listed once; every table and the index link here.", ""]
    for name, study in config["studies"].items():
        if "replicate_of" in study:  # the same experiment under other seeds
            continue
        stands = study.get("paper_dataset")
        listed = [f"- {d}" for d in study["deviations"]] or ["- none"]
        count = independent_runs(name, config)
        runs = (f"; run as {count} replicates (claims' intervals are over them)"
                if count > 1 else "")
        lines += [f"## {name}", "", f"{study['paper']}" + (f", for {stands}" if stands else "")
                  + runs, "", *listed, ""]
    for name, settings in config["artifacts"].items():
        if settings.get("deviations"):
            lines += [f"## {name}", "", *[f"- {d}" for d in settings["deviations"]], ""]
    return lines


def write_index(config: dict[str, Any], path: str, deviations_path: str) -> None:
    """``index.md`` (every checklist artifact: a row with its status and files) and
    ``deviations.md`` (:func:`deviation_lines`)."""
    from miarepro.artifacts.catalog import load_catalog

    io.write_text(deviations_path, "\n".join(deviation_lines(config)))

    catalog = load_catalog()
    claims = [n for n, s in config["artifacts"].items() if s["builder"] == "claims"]
    lines = ["# Artifacts", "",
             f"Configuration scale: **{config['scale']}**. Every table shows the paper's value "
             "beside ours, with 95% intervals, the regime of each study and the deviations of "
             "the run; [deviations.md](deviations.md) lists each study's once.", "",
             *[f"Claims of the papers checked on this run: [{n}.md]({n}.md)." for n in claims],
             "",
             "| ID | paper | kind | title | status | files |", "|---|---|---|---|---|---|"]
    for artifact_id, entry in catalog.items():
        files = _links(artifact_id, config)
        lines.append(f"| {artifact_id} | {entry['paper']} | {entry['kind']} | {entry['title']} "
                     f"| {status(artifact_id, entry, config)} | {files} |")
    extra = [name for name in config["artifacts"] if name not in catalog]
    if extra:
        lines += ["", "## Cross-paper artifacts", "", "| name | builder | files |", "|---|---|---|"]
        lines += [f"| {name} | {config['artifacts'][name]['builder']} | {_links(name, config)} |"
                  for name in extra]
    io.write_text(path, "\n".join(lines) + "\n")


def _links(name: str, config: dict[str, Any]) -> str:
    if name not in config["artifacts"]:
        return ""
    builder = BUILDERS[config["artifacts"][name]["builder"]]
    paths = builder.outputs("", name, config)
    return " ".join(f"[{p.rsplit('.', 1)[1]}]({p.split('/')[-1]})" for p in paths)
