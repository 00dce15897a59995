"""The layering of the package, checked: import-linter's contracts (pyproject.toml) and no import cycles.

The contracts: one exhaustive layers contract over the subpackages and root modules (a layer
imports only layers below it), the on-disk format does not import the index, and no cycles between
sibling modules or packages. The root holds entry points and leaf modules only.
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path

import grimp  # comes with import-linter (the dev extra)

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "skillsight_fast"


def _contracts() -> dict[str, dict]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return {c["id"]: c for c in config["contracts"]}


def _top_level() -> set[str]:
    """Every module and subpackage directly under skillsight_fast/ (found on disk, not imported)."""
    return {m.name for m in pkgutil.iter_modules([str(ROOT / PACKAGE)])}


def test_import_contracts_hold() -> None:
    """``lint-imports`` over this checkout: every contract of pyproject.toml is kept."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c",
                           "from importlinter.cli import lint_imports_command as c; c()", "--no-cache"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, f"import contracts broken:\n{proc.stdout}\n{proc.stderr}"
    assert "0 broken" in proc.stdout and "kept" in proc.stdout


#: What may sit at the package root besides the subpackages: entry points and leaf modules.
ROOT_MODULES = {"_startup", "_version", "config", "errors", "files", "limits", "metrics", "progress", "types"}


def test_root_holds_entry_points_and_leaves_only() -> None:
    """Every other module lives in a subpackage named by its role; the layers contract is exhaustive,
    so a new subpackage (or root module) that is not placed in a layer fails ``lint-imports``."""
    modules = {m.name: m.ispkg for m in pkgutil.iter_modules([str(ROOT / PACKAGE)])}
    stray = {name for name, is_pkg in modules.items() if not is_pkg} - ROOT_MODULES
    assert not stray, f"modules at the package root that belong in a subpackage: {sorted(stray)}"
    layers = _contracts()["layers"]
    assert layers["type"] == "layers" and layers["exhaustive"] is True
    placed = {name.strip() for layer in layers["layers"] for name in layer.replace(":", "|").split("|")}
    assert placed == set(modules), f"layers contract and package disagree: {sorted(placed ^ set(modules))}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            for w in children:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on_stack.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles_between_modules() -> None:
    """Every import statement counts (also inside functions and under TYPE_CHECKING), and a package's
    ``__init__`` is a module of its own: ``benchmark`` <-> ``benchmark.driver`` is a cycle too
    (import-linter's acyclic_siblings contract does not see parent-child cycles)."""
    sys.path.insert(0, str(ROOT))
    try:
        g = grimp.build_graph(PACKAGE, cache_dir=None)
    finally:
        sys.path.remove(str(ROOT))
    graph = {m: set(g.find_modules_directly_imported_by(m)) for m in g.modules}
    assert len(graph) > 50
    assert _cycles(graph) == [], "import cycles among skillsight_fast modules"
