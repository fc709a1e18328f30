"""Digests of the code each workflow step runs, so that editing a module reruns what it changes.

Snakemake reruns a job when its params or its script change, but not when a module the script
imports does. Every rule therefore carries a ``code`` param: a digest of the package's source
files its step runs, found by reading import statements (module level and inside functions)
from the step's entry modules on, transitively. Two kinds of module are read differently:

- registries (``miarepro.attacks``, ``miarepro.data``): importing one imports every attack
  family or dataset loader to register it, but a LiRA score job runs ``attacks/lira.py``, not
  ``attacks/iha.py``, and a generated dataset runs none of the loaders of real ones; their
  text counts, their imports do not (a rule names the family or loader its job runs);
- drivers (``miarepro.pipeline``, ``miarepro.config``, ``miarepro.paths``): they hold every
  step's code, each step importing what it needs inside its function; their text and their
  module-level imports count, the imports inside their functions belong to the step that makes
  them, which names them as entries. So editing ``miarepro/metrics.py`` rescores, but never
  retrains. An entry ``module:name,name`` counts of ``module``'s text only what the named
  functions or classes reach (the definitions their bodies name, transitively) and its
  statements outside any definition: a rule names the driver functions its script calls, so
  editing ``pipeline.score`` rescores without retraining either. Of another module named so
  (the scoring part of ``miarepro.uncertainty``), the statements outside definitions count
  only where they bind a name the reached code uses (an import, a constant), its docstring
  never: editing the claims' side of it, constants included, rescores nothing. A module that
  an entry counted whole imports counts whole.

A package's ``__init__`` counts (as text) for every module in it, and the data files a module
reads (:data:`DATA`) count with it: editing a claims file rebuilds the claims, editing a paper
number every artifact that prints paper numbers. Imports of anything outside the package are
not followed: the environment is pinned separately.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from collections.abc import Iterable
from pathlib import Path

PACKAGE = "miarepro"
ROOT = Path(__file__).resolve().parent
REGISTRIES = frozenset({"miarepro.attacks", "miarepro.data"})
DRIVERS = frozenset({"miarepro.pipeline", "miarepro.config", "miarepro.paths"})
#: the package's data files each module reads, as patterns relative to the module's folder
DATA = {"miarepro.artifacts.catalog": ("catalog.yaml", "paper_keys.yaml", "paper_values.csv"),
        "miarepro.artifacts.claims": ("claims/*.yaml",)}


def source_file(module: str) -> Path | None:
    """The file of a package module (``miarepro.x.y``), or None if there is none."""
    parts = module.split(".")[1:]
    path = ROOT.joinpath(*parts)
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def imports(module: str) -> tuple[frozenset[str], frozenset[str]]:
    """Package modules ``module`` imports: ``(at module level, inside functions)``.

    Imports under ``if TYPE_CHECKING:`` never run and are left out.
    """
    path = source_file(module)
    tree = ast.parse(path.read_text(), str(path))
    top: set[str] = set()
    inner: set[str] = set()
    # import statements sit in statement lists only, so only those are walked
    todo = [(statement, False) for statement in tree.body]
    while todo:
        node, nested = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            (inner if nested else top).update(_targets(node, module, path.name == "__init__.py"))
            continue
        nested = nested or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            todo += [(child, nested) for child in getattr(node, field, ())
                     if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case))]
    return frozenset(top), frozenset(inner - top)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> set[str]:
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:  # relative: resolved against the importing module's package
            anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
            base = ".".join(anchor + ([base] if base else []))
        names = [f"{base}.{alias.name}" for alias in node.names] + [base]
    found = set()
    for name in names:
        if name.split(".")[0] != PACKAGE:
            continue
        while source_file(name) is None and "." in name:  # an attribute, not a module
            name = name.rsplit(".", 1)[0]
        found.add(name)
    return found


def modules(entries: Iterable[str]) -> frozenset[str]:
    """Every package module the entries run, by the rules of the module docstring."""
    seen: set[str] = set()
    todo = [entry.partition(":")[0] for entry in entries]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        parts = module.split(".")
        seen.update(".".join(parts[:k]) for k in range(1, len(parts)))  # package inits: text
        if module in REGISTRIES:
            continue
        top, inner = imports(module)
        todo += top if module in DRIVERS else top | inner
    return frozenset(m for m in seen if source_file(m) is not None)


@functools.cache
def digest(entries: tuple[str, ...]) -> str:
    """A short hex digest of the source of every module the entries run, and of the data files
    those modules read (:data:`DATA`)."""
    parts: dict[str, set[str]] = {}  # module -> the definitions counted, for ``module:names``
    for entry in entries:
        module, _, names = entry.partition(":")
        if names:
            parts.setdefault(module, set()).update(names.split(","))
    whole = modules(tuple(entry for entry in entries if ":" not in entry))
    hasher = hashlib.sha256()
    for module in sorted(modules(entries)):
        source = source_file(module)
        text = (reached_source(module, frozenset(parts[module]))
                if module in parts and module not in whole else source.read_text())
        hasher.update(module.encode() + b"\0" + text.encode() + b"\0")
        for pattern in DATA.get(module, ()):
            for path in sorted(source.parent.glob(pattern)):
                hasher.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return hasher.hexdigest()[:16]


def reached_source(module: str, names: frozenset[str]) -> str:
    """The text of ``module`` that its top-level functions or classes ``names`` run: their
    definitions, those their bodies name (transitively), and the statements outside a
    definition with the definitions they name; the rest left out. Of a driver every such
    statement counts; of another module only those that bind a name the reached code uses
    (imports, constants) and those that bind none (an ``if`` block), its docstring never."""
    text = source_file(module).read_text()
    tree = ast.parse(text)
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    definitions = {node.name: [node] for node in tree.body if isinstance(node, kinds)}
    missing = sorted(names - definitions.keys())
    if missing:
        raise ValueError(f"{module} defines no {', '.join(missing)}")
    statements = [node for node in tree.body if not isinstance(node, kinds)]
    if ast.get_docstring(tree) is not None and module not in DRIVERS:
        statements = statements[1:]
    bound = {node: _bound(node) for node in statements} if module not in DRIVERS else {}
    for node, binds in bound.items():
        for name in binds:
            definitions.setdefault(name, []).append(node)

    def named(node: ast.AST) -> list[str]:  # decorators, defaults and annotations included
        return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id in definitions]

    kept = {node for node in statements if not bound.get(node)}
    reached: set[str] = set()
    todo = [*names, *(name for node in kept for name in named(node))]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            for node in definitions[name]:
                kept.add(node)
                todo += named(node)
    lines = text.splitlines(keepends=True)
    return "".join("".join(lines[_first_line(node) - 1 : node.end_lineno]) for node in tree.body
                   if node in kept)


def _bound(node: ast.stmt) -> set[str]:
    """The module-level names an import or an assignment binds (none for other statements)."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    return set()


def _first_line(node: ast.stmt) -> int:
    """A statement's first line, its decorators' included."""
    return min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
