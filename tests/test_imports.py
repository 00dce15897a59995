"""Every ``from skillsight_fast... import name`` in the package, bench/ and experiments/ resolves.

Most such imports sit inside functions (kept lazy for start-up time), so a moved name only fails
when that code path runs; ``skillsight bench`` once failed that way after a refactor.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports():
    files = [*(ROOT / "skillsight_fast").rglob("*.py"), *(ROOT / "bench").glob("*.py"),
             *(ROOT / "experiments").glob("*.py")]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ImportFrom) and node.level == 0
                    and (node.module or "").startswith("skillsight_fast")):
                yield path.relative_to(ROOT), node


def test_every_internal_import_names_something_that_exists():
    missing = []
    for path, node in _imports():
        module = importlib.import_module(node.module)
        for alias in node.names:
            if alias.name == "*" or hasattr(module, alias.name):
                continue
            try:
                importlib.import_module(f"{node.module}.{alias.name}")
            except ImportError:
                missing.append(f"{path}:{node.lineno}: {node.module}.{alias.name}")
    assert not missing, "\n".join(missing)
