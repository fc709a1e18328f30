"""``results/artifacts/index.md``: every checklist artifact with an honest status."""

from __future__ import annotations

from typing import Any

from miarepro import io
from miarepro.artifacts.builders import BUILDERS
from miarepro.artifacts.results import studies_of


def status(artifact_id: str, entry: dict[str, Any], config: dict[str, Any]) -> str:
    if artifact_id in config["artifacts"]:
        settings = config["artifacts"][artifact_id]
        studies = (studies_of(settings, config)
                   if BUILDERS[settings["builder"]].reads_studies else [])
        deviations = sorted({d for s in studies for d in config["studies"][s]["deviations"]}
                            | set(settings.get("deviations", [])))
        if not studies and not deviations:  # built from the code alone, whatever the scale
            return "reproduced (independent of scale)"
        covered = sorted({config["studies"][s].get("paper_dataset") or s for s in studies})
        if "paper_dataset" in settings:  # run on a stand-in (IHA Tables 4, 5 and 9)
            covered = [f"{settings['paper_dataset']} (on the {', '.join(covered)} stand-in)"]
        scope = f" for {', '.join(covered)}" if entry["needs"] else ""
        rest = f"; the rest needs {', '.join(entry['needs'])}" if entry["needs"] else ""
        if config["scale"] == "paper" and not deviations:
            return f"reproduced{scope}{rest}"
        return (f"scaled-down proxy{scope} (" + ("; ".join(deviations) or "miniature settings")
                + f"){rest}")
    if entry["todo"].startswith("not reproducible"):
        return entry["todo"]
    if entry["needs"]:
        return f"needs {', '.join(entry['needs'])}: {entry['todo']}"
    return f"not yet implemented: {entry['todo']}"


def write_index(config: dict[str, Any], path: str) -> None:
    from miarepro.artifacts.catalog import load_catalog

    catalog = load_catalog()
    claims = [n for n, s in config["artifacts"].items() if s["builder"] == "claims"]
    lines = ["# Artifacts", "",
             f"Configuration scale: **{config['scale']}**. Every table shows the paper's value "
             "beside ours, with 95% intervals, the regime of each study and the deviations of "
             "the run.", "",
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
