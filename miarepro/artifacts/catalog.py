"""The checklist of artifacts to reproduce and the numbers the papers report for them.

``catalog.yaml`` holds one entry per checklist artifact (every table, figure and quoted text
result of the five papers), so that the results index can report an honest status for each one,
including those no configuration builds yet. ``paper_values.csv`` holds every number the papers
print for those artifacts, in long format, so each built table can show the paper's value beside
ours.

Conventions of ``paper_values.csv`` (one row per printed number; cells printed as "-" or blank
are omitted):

- ``dataset``: lower-case snake name (``purchase100_s`` is IHA's 25K Purchase-100(S) pool,
  ``mnist_odd`` IHA's odd/even MNIST, ``cifar10_vs_cinic10`` BMIA's CIFAR-10 target queried with
  CINIC-10 non-members); ``a+b`` names a group of datasets reported together.
- ``model``: the architecture, only where the paper's table varies it.
- ``attack``: canonical name. Where the paper states the variant it is part of the name: BMIA's
  LiRA is ``lira_offline``, IHA's is ``lira_online``, QMIA's (unstated) is ``lira``. The paper's
  own row label is kept in ``note`` when the mapping is not obvious.
- ``setting``: row parameters as ``key=value`` pairs joined by ``;`` (e.g. ``n=4``).
- ``metric``: ``tpr@1%``, ``precision@0.1%``, ``pinball@1%``, ``auc``, ``gpu_minutes``, ... TPR,
  precision and accuracies are in percent and AUC a fraction, as printed; exceptions say so in
  ``note`` (Subpop's AUC is in percent). For text claims, a ``_lb`` / ``_ub`` suffix marks a
  lower / upper bound ("over 70%", "less than 2%"), ``_max`` an "as much as" figure and
  ``_approx`` a rough value.
- ``std``: the printed ± where there is one.
- ``note``: units that might surprise and ``[!]`` flags for cells the papers contradict.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pandas as pd

from miarepro import io

HERE = Path(__file__).resolve().parent
CATALOG_PATH = HERE / "catalog.yaml"
PAPER_VALUES_PATH = HERE / "paper_values.csv"
PAPER_KEYS_PATH = HERE / "paper_keys.yaml"

#: Checklist IDs: paper prefix, T(able) / F(igure) / X (text), a number and an optional panel.
ID_PATTERN = re.compile(r"^(BMIA|SM|QMIA|IHA|SUB)-([TFX])(\d+)([a-z]?)$")

PAPERS = {"BMIA": "bmia", "SM": "stolen-memories", "QMIA": "qmia", "IHA": "iha", "SUB": "subpop"}
KINDS = {"T": "table", "F": "figure", "X": "text"}
CLASSES = frozenset({"Q", "S", "P", "config"})
REQUIRED_KEYS = ("paper", "kind", "class", "title", "needs", "todo")

#: What an artifact may need that this setting cannot provide: data sets that have to be
#: downloaded, and an accelerator for the full-scale run.
NEEDS = frozenset({
    "cifar10", "cifar100", "cinic10", "imagenet", "purchase100", "texas100", "mnist",
    "fashion_mnist", "svhn", "lfw", "adult", "openml", "acs", "pima", "hepatitis",
    "german_credit", "gpu",
})

PAPER_VALUE_COLUMNS = ("artifact", "dataset", "model", "attack", "setting", "metric", "value",
                       "std", "note")
_TEXT_COLUMNS = ("artifact", "dataset", "model", "attack", "setting", "metric", "note")


def _check_entry(artifact_id: str, entry: Any) -> dict[str, Any]:
    """Reject a malformed entry early, so a typo cannot silently drop an artifact's status."""
    match = ID_PATTERN.match(str(artifact_id))
    if match is None:
        raise ValueError(f"catalog: artifact ID {artifact_id!r} does not match "
                         f"{ID_PATTERN.pattern}")
    if not isinstance(entry, dict):
        raise ValueError(f"catalog: {artifact_id}: entry must be a mapping")
    missing = [key for key in REQUIRED_KEYS if key not in entry]
    if missing:
        raise ValueError(f"catalog: {artifact_id}: missing key(s) {missing}")
    extra = sorted(set(entry) - set(REQUIRED_KEYS))
    if extra:
        raise ValueError(f"catalog: {artifact_id}: unknown key(s) {extra}")
    prefix, letter = match.group(1), match.group(2)
    if entry["paper"] != PAPERS[prefix]:
        raise ValueError(f"catalog: {artifact_id}: key 'paper' is {entry['paper']!r}, "
                         f"expected {PAPERS[prefix]!r}")
    if entry["kind"] != KINDS[letter]:
        raise ValueError(f"catalog: {artifact_id}: key 'kind' is {entry['kind']!r}, "
                         f"expected {KINDS[letter]!r}")
    if entry["class"] not in CLASSES:
        raise ValueError(f"catalog: {artifact_id}: key 'class' is {entry['class']!r}, "
                         f"expected one of {sorted(CLASSES)}")
    for key in ("title", "todo"):
        if not isinstance(entry[key], str) or not entry[key].strip():
            raise ValueError(f"catalog: {artifact_id}: key {key!r} must be a non-empty string")
    needs = entry["needs"]
    if not isinstance(needs, list) or not all(isinstance(n, str) for n in needs):
        raise ValueError(f"catalog: {artifact_id}: key 'needs' must be a list of names")
    unknown = sorted(set(needs) - NEEDS)
    if unknown:
        raise ValueError(f"catalog: {artifact_id}: key 'needs' has unknown name(s) {unknown}; "
                         f"known: {sorted(NEEDS)}")
    if len(set(needs)) != len(needs):
        raise ValueError(f"catalog: {artifact_id}: key 'needs' lists a name twice")
    return entry


def parse_catalog(text: str) -> dict[str, dict[str, Any]]:
    """Parse and validate catalog YAML; split from the file read so tests can feed bad entries."""
    data = io.read_yaml(text)
    if not isinstance(data, dict) or not data:
        raise ValueError("catalog: expected a non-empty mapping of artifact IDs")
    return {str(key): _check_entry(key, value) for key, value in data.items()}


@cache
def _catalog() -> dict[str, dict[str, Any]]:
    return parse_catalog(CATALOG_PATH.read_text(encoding="utf-8"))


def load_catalog() -> dict[str, dict[str, Any]]:
    """Every checklist artifact, in checklist order (a fresh copy: callers may mutate it)."""
    return {key: {**entry, "needs": list(entry["needs"])} for key, entry in _catalog().items()}


ARTIFACT_IDS: tuple[str, ...] = tuple(_catalog())


def check_paper_values(frame: pd.DataFrame) -> pd.DataFrame:
    """Validate the transcribed values; a bad row would otherwise show as a wrong paper number."""
    if tuple(frame.columns) != PAPER_VALUE_COLUMNS:
        raise ValueError(f"paper_values: columns {list(frame.columns)}, "
                         f"expected {list(PAPER_VALUE_COLUMNS)}")
    unknown = sorted(set(frame["artifact"]) - set(ARTIFACT_IDS))
    if unknown:
        raise ValueError(f"paper_values: artifact(s) {unknown} are not catalog IDs")
    frame = frame.copy()
    for column in ("value", "std"):
        raw = frame[column]
        numbers = pd.to_numeric(raw.where(raw != ""), errors="coerce")
        bad = numbers.isna() & ((raw != "") | (column == "value"))
        if bad.any():
            row = int(bad.idxmax())
            raise ValueError(f"paper_values: line {row + 2} ({frame.at[row, 'artifact']}): "
                             f"{column} {raw[row]!r} is not a number")
        frame[column] = numbers.astype(float)
    for column in ("artifact", "metric"):
        empty = frame.index[frame[column] == ""]
        if len(empty):
            raise ValueError(f"paper_values: line {int(empty[0]) + 2}: empty {column}")
    key = ["artifact", "dataset", "model", "attack", "setting", "metric"]
    duplicated = frame[frame.duplicated(key, keep=False)]
    if not duplicated.empty:
        first = duplicated.iloc[0]
        raise ValueError(f"paper_values: {first['artifact']}: duplicate cell "
                         f"{dict(first[key[1:]])}")
    return frame


@cache
def _paper_values() -> pd.DataFrame:
    frame = pd.read_csv(PAPER_VALUES_PATH, dtype=str, keep_default_na=False, encoding="utf-8")
    return check_paper_values(frame)


#: Paper attack names (``paper_values.csv``) that an attack family of another name implements;
#: every other paper attack is implemented by the family of its own name, if registered.
FAMILY_OF = {"attack_p": "marginal", "loss": "marginal", "yeom": "marginal", "marginal":
             "marginal", "lira_offline": "lira", "lira_online": "lira", "shadow_bb": "shadow",
             "iha_cg": "iha"}


def implemented(paper_attack: str) -> bool:
    """Whether some registered attack family reproduces this paper attack."""
    from miarepro.attacks import REGISTRY

    return FAMILY_OF.get(paper_attack, paper_attack) in REGISTRY


def paper_values(artifact: str | None = None) -> pd.DataFrame:
    """The papers' numbers, all or one artifact's (empty for an artifact with none).

    Text columns hold ``""`` where a field does not apply; ``value`` and ``std`` are floats
    (``std`` is NaN where no ± is printed). An ID outside the catalog raises ValueError, so a
    misspelt artifact cannot pass for one without paper values.
    """
    frame = _paper_values()
    if artifact is not None:
        if artifact not in ARTIFACT_IDS:
            raise ValueError(f"paper_values: unknown artifact {artifact!r}")
        frame = frame[frame["artifact"] == artifact]
    return frame.reset_index(drop=True).copy()


@dataclass(frozen=True)
class PaperKeys:
    """The names a config or claims file may use for one paper: its datasets, each attack's
    settings ("" for the attack without one) and the target models its tables have rows
    for."""

    datasets: frozenset[str]
    settings: dict[str, frozenset[str]]
    models: frozenset[str] = frozenset()


def parse_paper_keys(text: str) -> dict[str, list[dict[str, Any]]]:
    """Parse and validate ``paper_keys.yaml``: every entry says which figures plot its series,
    or that it is a variant of the workflow's own, and why."""
    data = io.read_yaml(text)
    if not isinstance(data, dict) or sorted(data) != sorted(PAPERS.values()):
        raise ValueError(f"paper_keys: expected one entry per paper {sorted(PAPERS.values())}")
    allowed = {"artifacts", "variant", "why", "datasets", "attacks"}
    for paper, entries in data.items():
        for number, entry in enumerate(entries or [], 1):
            where = f"paper_keys: {paper}, entry {number}"
            extra = sorted(set(entry) - allowed)
            if extra:
                raise ValueError(f"{where}: unknown key(s) {extra}; known: {sorted(allowed)}")
            if ("artifacts" in entry) == bool(entry.get("variant")) or not entry.get("why"):
                raise ValueError(f"{where}: needs 'why' and either 'artifacts' or 'variant: true'")
            unknown = sorted(set(entry.get("artifacts", ())) - set(ARTIFACT_IDS))
            if unknown:
                raise ValueError(f"{where}: artifact(s) {unknown} are not catalog IDs")
    return {paper: list(entries or []) for paper, entries in data.items()}


def _values_of(papers: list[str]) -> pd.DataFrame:
    """The rows of ``paper_values.csv`` whose artifact belongs to one of ``papers``."""
    values = paper_values()
    prefixes = tuple(f"{prefix}-" for prefix, name in PAPERS.items() if name in papers)
    return values[values["artifact"].str.startswith(prefixes)]


@cache
def _paper_series() -> dict[str, list[dict[str, Any]]]:
    return parse_paper_keys(PAPER_KEYS_PATH.read_text(encoding="utf-8"))


@cache
def paper_keys(paper: str) -> PaperKeys:
    """What ``paper_dataset``, ``paper_attack``, ``paper_setting`` and ``paper_model`` may name
    for ``paper``: the cells of ``paper_values.csv`` and the series of ``paper_keys.yaml``
    (those of every paper for a ``cross-paper`` study)."""
    papers = [paper] if paper in PAPERS.values() else list(PAPERS.values())
    values = _values_of(papers)
    datasets = {name for group in values["dataset"] for name in group.split("+") if name}
    settings: dict[str, set[str]] = {}
    for attack, setting in zip(values["attack"], values["setting"], strict=True):
        if attack:
            settings.setdefault(attack, set()).add(setting)
    for entry in (entry for name in papers for entry in _paper_series()[name]):
        datasets.update(entry.get("datasets", ()))
        for attack, names in entry.get("attacks", {}).items():
            settings.setdefault(attack, set()).update(names)
    return PaperKeys(frozenset(datasets), {a: frozenset(s) for a, s in settings.items()},
                     frozenset(model for model in values["model"] if model))


def contradictions(artifact: str) -> list[str]:
    """Markdown bullets for the artifact's printed cells flagged ``[!]`` in ``note``: numbers
    the paper contradicts elsewhere (another table, a duplicated cell, a total that does not
    add up), so that a reader of the table sees the doubt beside the number it shows."""
    values = paper_values(artifact)
    flagged = values[values["note"].str.contains("[!]", regex=False)]
    cell = ("dataset", "model", "attack", "setting")
    return [f"- {' '.join(row[key] for key in cell if row[key])}, {row['metric']} = "
            f"{row['value']:g}: {row['note']}" for row in flagged.to_dict("records")]


def stated_not_measured(artifact: str) -> list[str]:
    """Markdown bullets for the artifact's paper values that the paper states rather than
    measures (QMIA-X2: Theorem 1's FPR = a), so that its page does not show them as
    measurements (their ``note`` says "not a printed measurement")."""
    values = paper_values(artifact)
    notes = values.loc[values["note"].str.contains("not a printed measurement", regex=False),
                       "note"]
    return [f"- {note}" for note in dict.fromkeys(notes)]


def paper_number(paper: str, dataset, attack, setting, metric: str, model: str | None = None,
                 *, model_rows_only: bool = False) -> float | None:
    """The paper's first printed number for one (dataset, attack, setting, metric) cell, for
    the paper's ``model`` where a table has a row per target model. ``model_rows_only``: from
    a row printed for ``model`` itself (QMIA's Tables 6 and 7), None where no table has one."""
    values = _values_of([paper])
    if model_rows_only:
        values = values[values["model"] == model]
    return paper_value(values, dataset, attack, setting, metric, model)


def for_model(papers: pd.DataFrame, model: str | None) -> pd.DataFrame:
    """The rows of ``model`` where a table has a row per target model (QMIA Tables 6 and 7);
    rows without a model apply to every model."""
    if _missing(model):
        return papers
    return papers[papers["model"].isin(["", model])]


def paper_value(papers: pd.DataFrame, dataset, attack, setting, metric: str,
                model: str | None = None, column: str = "value") -> float | None:
    """The paper's number for one cell; missing keys (None or NaN) match empty settings, and a
    dataset matches a group ``a+b`` that holds it (one number printed for both). ``column``
    ``std``: the ± the paper prints beside it (its seed noise), None where it prints none."""
    if _missing(dataset) or _missing(attack):
        return None
    papers = for_model(papers, model)
    in_group = papers["dataset"].str.split("+").apply(lambda group: dataset in group)
    rows = papers[in_group & (papers["attack"] == attack) & (papers["metric"] == metric)]
    rows = rows[rows["setting"].fillna("") == ("" if _missing(setting) else setting)]
    return None if rows.empty or pd.isna(rows[column].iloc[0]) else float(rows[column].iloc[0])


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and pd.isna(value))


__all__ = ["ARTIFACT_IDS", "FAMILY_OF", "ID_PATTERN", "PaperKeys", "for_model", "implemented",
           "load_catalog", "paper_keys", "paper_number", "paper_value", "paper_values",
           "parse_catalog", "parse_paper_keys"]
