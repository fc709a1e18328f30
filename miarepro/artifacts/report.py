"""Where each artifact sits in Snakemake's HTML report (``snakemake --report``).

A reviewer opens the report to check one paper at a time, so its categories are the papers
(and one for what spans them: the leaderboard, the claims, the index) and its subcategories the
kind of artifact. Each entry is labelled with its checklist ID and the title of the paper's
table or figure it reproduces.
"""

from __future__ import annotations

from typing import Any

from miarepro.artifacts.builders import BUILDERS
from miarepro.artifacts.catalog import load_catalog
from miarepro.artifacts.results import studies_of

#: Report category of each paper, in the checklist's order.
PAPERS = {
    "bmia": "BMIA: Efficient MIAs by Bayesian Neural Network (Liu et al.)",
    "stolen-memories": "Stolen Memories: calibrated white-box MI (Leino & Fredrikson)",
    "qmia": "QMIA: Scalable MIAs via Quantile Regression (Bertran et al.)",
    "iha": "IHA: Do Parameters Reveal More than Loss? (Suri, Zhang & Evans)",
    "subpop": "Subpop: Efficient Subpopulation-based MIA",
}
ACROSS_PAPERS = "All papers: leaderboard, claims, index"
KINDS = {"table": "Tables", "figure": "Figures"}


def paper_of(name: str, config: dict[str, Any]) -> str | None:
    """The paper an artifact belongs to: its checklist entry's, else the one paper all its
    studies reproduce, else None (an artifact across papers)."""
    catalog = load_catalog()
    if name in catalog:
        return catalog[name]["paper"]
    settings = config["artifacts"][name]
    studies = studies_of(settings, config) if BUILDERS[settings["builder"]].reads_studies else []
    papers = {config["studies"][study]["paper"] for study in studies}
    return papers.pop() if len(papers) == 1 and papers <= set(PAPERS) else None


def category(name: str, config: dict[str, Any]) -> str:
    return PAPERS.get(paper_of(name, config), ACROSS_PAPERS)


def subcategory(name: str, config: dict[str, Any]) -> str:
    return KINDS[BUILDERS[config["artifacts"][name]["builder"]].kind]


def title(name: str, config: dict[str, Any]) -> str:
    """The checklist title of a paper artifact; its own title or what its builder makes for
    the others."""
    entry = load_catalog().get(name)
    if entry is not None:
        return entry["title"]
    settings = config["artifacts"][name]
    if "title" in settings:
        return settings["title"]
    studies = settings.get("studies")
    scope = f" ({', '.join(studies)})" if studies else ""
    return BUILDERS[settings["builder"]].description + scope
