"""Code digests: which package modules each workflow step runs, and that an edit shows."""

import shutil

import pytest

from miarepro import provenance

TRAIN = ("miarepro.pipeline", "miarepro.training", "miarepro.boosting")
LIRA = ("miarepro.pipeline", "miarepro.attacks.lira", "miarepro.uncertainty", "miarepro.metrics")


def test_imports_split_module_level_from_function_level_and_skip_type_checking():
    top, inner = provenance.imports("miarepro.pipeline")
    assert {"miarepro.io", "miarepro.splits", "miarepro.paths"} <= top
    assert {"miarepro.training", "miarepro.attacks", "miarepro.uncertainty"} <= inner
    assert "miarepro.attacks" not in top  # only under `if TYPE_CHECKING:` at module level
    top, _ = provenance.imports("miarepro.attacks.lira")
    assert {"miarepro.attacks.base", "miarepro.attacks.reference", "miarepro.signals"} <= top


def test_a_step_runs_its_own_modules_and_not_its_neighbours():
    lira, train = provenance.modules(LIRA), provenance.modules(TRAIN)
    assert {"miarepro.attacks.lira", "miarepro.attacks.base", "miarepro.attacks"} <= lira
    # the attacks registry counts as text: the other families are not LiRA's code
    assert "miarepro.attacks.iha" not in lira and "miarepro.training" not in lira
    # the pipeline's lazy imports belong to the steps that make them: training never
    # depends on the metrics or on any attack
    assert {"miarepro.training", "miarepro.models", "miarepro.privacy"} <= train
    assert not {"miarepro.uncertainty", "miarepro.attacks.lira", "miarepro.data"} & train


@pytest.fixture
def package_copy(tmp_path, monkeypatch):
    copy = tmp_path / "miarepro"
    shutil.copytree(provenance.ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(provenance, "ROOT", copy)
    provenance.imports.cache_clear()
    provenance.digest.cache_clear()
    yield copy
    provenance.imports.cache_clear()
    provenance.digest.cache_clear()


def test_an_edit_changes_the_digests_of_the_steps_that_run_it_only(package_copy):
    before = {name: provenance.digest(entries) for name, entries in
              (("lira", LIRA), ("train", TRAIN))}
    with open(package_copy / "attacks" / "lira.py", "a") as handle:
        handle.write("\n# an edit\n")
    provenance.digest.cache_clear()
    assert provenance.digest(LIRA) != before["lira"]
    assert provenance.digest(TRAIN) == before["train"]
    with open(package_copy / "training.py", "a") as handle:
        handle.write("\n# an edit\n")
    provenance.digest.cache_clear()
    assert provenance.digest(TRAIN) != before["train"]


#: a dataset job's code as the dataset rule names it, for a dataset of scikit-learn's digits
DIGITS = ("miarepro.pipeline:make_dataset", "miarepro.data", "miarepro.data.dataset",
          "miarepro.options", "miarepro.data.embedded")
#: the same for a dataset read from files (CIFAR-10 by torchvision)
CIFAR = (*DIGITS[:-1], "miarepro.data.torchvision_sets")


def test_a_dataset_counts_its_own_loader_and_not_the_others(package_copy):
    """The data package registers every loader; a generated or shipped dataset's job counts
    the registry's text and its own loader, so editing ImageNet's loader rebuilds no MNIST
    subset, nor anything trained on it; the downloads count for the loaders that read files."""
    assert "miarepro.data.imagenet" not in provenance.modules(DIGITS)
    before = {entries: provenance.digest(entries) for entries in (DIGITS, CIFAR)}
    for name, changes in (("imagenet.py", (False, False)), ("download.py", (False, True)),
                          ("embedded.py", (True, False)), ("__init__.py", (True, True))):
        with open(package_copy / "data" / name, "a") as handle:
            handle.write("\n# an edit\n")
        provenance.digest.cache_clear()
        after = {entries: provenance.digest(entries) for entries in (DIGITS, CIFAR)}
        assert (after[DIGITS] != before[DIGITS], after[CIFAR] != before[CIFAR]) == changes, name
        before = after


def test_an_edit_of_one_step_of_the_driver_reruns_that_step_only(package_copy):
    """A rule names the driver functions its script calls (``module:names``): editing
    ``pipeline.score`` rescores without retraining, editing a helper both steps reach
    (``peak_memory_mb``) changes both, and a misspelt step fails, naming it."""
    train = ("miarepro.pipeline:train_several", "miarepro.training", "miarepro.boosting")
    score = ("miarepro.pipeline:StudyFiles,score,measure", "miarepro.attacks.lira")
    data = ("miarepro.pipeline:make_dataset", "miarepro.data")

    def edited(function: str) -> dict[tuple[str, ...], str]:
        path = package_copy / "pipeline.py"
        path.write_text(path.read_text().replace(f"def {function}(", f"def {function}(  # edit\n",
                                                 1))
        provenance.digest.cache_clear()
        return {entries: provenance.digest(entries) for entries in (train, score, data)}

    before = {entries: provenance.digest(entries) for entries in (train, score, data)}
    after = edited("_quantile_columns")  # a helper of score's, reached through it
    assert after[score] != before[score]
    assert after[train] == before[train] and after[data] == before[data]
    again = edited("_train_torch")
    assert again[train] != after[train] and again[score] == after[score]
    last = edited("peak_memory_mb")
    assert last[train] != again[train] and last[score] != again[score]
    assert last[data] == before[data]
    with pytest.raises(ValueError, match=r"miarepro\.pipeline defines no scor"):
        provenance.digest(("miarepro.pipeline:scor",))


def test_a_step_counts_what_its_definitions_and_the_module_level_statements_name(package_copy):
    """A step's text is its definitions, what their bodies, decorators and defaults name, and
    the module-level statements with what they name (a table of handlers); nothing else."""
    (package_copy / "probe.py").write_text(
        "import functools\n\n\ndef _handler():\n    return 1\n\n\n"
        "HANDLERS = {'a': _handler}\n\n\ndef _default():\n    return 2\n\n\n"
        "@functools.cache\ndef step(value=_default):\n    return HANDLERS['a']()\n\n\n"
        "def other():\n    return 3\n")
    text = provenance.reached_source("miarepro.probe", frozenset({"step"}))
    assert all(f"def {name}" in text for name in ("_handler", "_default", "step"))
    assert "HANDLERS =" in text and "@functools.cache" in text and "def other" not in text


def test_an_edit_of_a_data_file_changes_the_digests_of_the_artifacts_that_read_it(package_copy):
    """Claims files rebuild the claims only; paper numbers every artifact that prints them."""
    claims = ("miarepro.artifacts.builders", "miarepro.artifacts.claims")
    table = ("miarepro.artifacts.builders",)
    before = {entries: provenance.digest(entries) for entries in (claims, table, TRAIN)}
    with open(package_copy / "artifacts" / "claims" / "qmia.yaml", "a") as handle:
        handle.write("\n# an edit\n")
    provenance.digest.cache_clear()
    assert provenance.digest(claims) != before[claims]
    assert provenance.digest(table) == before[table]
    with open(package_copy / "artifacts" / "paper_values.csv", "a") as handle:
        handle.write("QMIA-T1,cifar10,,qmia,,precision@1%,1.0,,\n")
    provenance.digest.cache_clear()
    assert provenance.digest(table) != before[table]
    assert provenance.digest(TRAIN) == before[TRAIN]


def test_every_data_file_of_the_package_counts_in_some_digest():
    """A data file no module declares in ``provenance.DATA`` would change nothing on an edit."""
    counted = {path for module, patterns in provenance.DATA.items() for pattern in patterns
               for path in provenance.source_file(module).parent.glob(pattern)}
    data = {path for path in provenance.ROOT.rglob("*") if path.is_file()
            and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts}
    assert data and data <= counted, sorted(map(str, data - counted))


def test_the_package_import_graph_has_no_cycle():
    """Imports at module level and inside functions: no module imports one that imports it
    back, and loading a config never reaches the artifact builders (``from p import m`` points
    at module ``p.m`` where there is one, else at ``p``)."""
    import ast

    from miarepro.provenance import ROOT, source_file

    graph = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                edges |= {f"{node.module}.{alias.name}"
                          if source_file(f"{node.module}.{alias.name}") else node.module
                          for alias in node.names}
        graph[module] = {edge for edge in edges
                         if edge.startswith("miarepro") and source_file(edge)} - {module}
    finished, chain = set(), []

    def visit(module: str) -> None:
        if module in chain:
            raise AssertionError("import cycle: " + " -> ".join(
                [*chain[chain.index(module):], module]))
        if module not in finished:
            chain.append(module)
            for imported in sorted(graph.get(module, ())):
                visit(imported)
            chain.pop()
            finished.add(module)

    for module in sorted(graph):
        visit(module)
    reached, todo = set(), ["miarepro.config"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo += graph.get(module, ())
    assert "miarepro.artifacts.builders" not in reached


def test_scoring_counts_every_name_it_takes_from_the_uncertainty_module():
    """A score job's digest counts only the scoring part of :mod:`miarepro.uncertainty`
    (``SCORING_UNCERTAINTY`` in rules/common.smk), so that editing the claims' intervals does
    not rescore: every name the scoring step's driver functions take from that module must be
    among those it counts, and the claims' side must not be."""
    import ast
    import re

    rules = (provenance.ROOT.parent / "rules" / "common.smk").read_text()
    counted = set(re.search(r'"miarepro\.uncertainty:"\s*"([\w,]+)"', rules).group(1).split(","))
    step = provenance.reached_source("miarepro.pipeline",
                                     frozenset({"StudyFiles", "score", "measure"}))
    taken = set()
    for node in ast.walk(ast.parse(step)):
        if isinstance(node, ast.ImportFrom) and node.module == "miarepro.uncertainty":
            taken |= {alias.name for alias in node.names}
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "uncertainty"):
            taken.add(node.attr)
    assert taken and taken <= counted, sorted(taken - counted)
    text = provenance.reached_source("miarepro.uncertainty", frozenset(counted))
    assert "def metric_table" in text and "class Estimate" not in text
    assert "def over_replicates" not in text


def test_a_named_part_of_a_module_counts_the_constants_it_uses_and_no_others(package_copy):
    """The score jobs' digest counts the scoring part of uncertainty.py: the claims' constants
    (N_NULL), the module docstring and the claims' classes change nothing; a constant the
    scoring reads (N_BOOTSTRAP) does. A module an entry counts whole imports counts whole."""
    score = ("miarepro.pipeline:StudyFiles,score,measure",
             "miarepro.uncertainty:metric_table,decision_name,exceedance_name,pinball_name")
    path = package_copy / "uncertainty.py"

    def digest_after(old: str, new: str, entries: tuple[str, ...] = score) -> str:
        path.write_text(path.read_text().replace(old, new, 1))
        provenance.digest.cache_clear()
        return provenance.digest(entries)

    before = provenance.digest(score)
    assert digest_after("N_NULL = 10_000", "N_NULL = 20_000") == before
    assert digest_after('"""95% intervals', '"""Edited: 95% intervals') == before
    assert digest_after("class Estimate:", "class Estimate:  # an edit") == before
    assert digest_after("N_BOOTSTRAP = 1000", "N_BOOTSTRAP = 2000") != before
    (package_copy / "probe.py").write_text("from miarepro import uncertainty\n")
    provenance.imports.cache_clear()
    provenance.digest.cache_clear()
    with_probe = (*score, "miarepro.probe")
    first = provenance.digest(with_probe)
    assert digest_after("N_NULL = 20_000", "N_NULL = 30_000", with_probe) != first
