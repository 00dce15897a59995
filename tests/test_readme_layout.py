"""README's layout table matches the tree: every path it names exists, every module is named."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOP = {"skillsight_fast", "bench", "docs", "data", "experiments", "tests", "scripts"}


def layout_paths() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Layout", 1)[1].split("\n## ", 1)[0]
    paths: list[str] = []
    for row in section.splitlines():
        if row.startswith("| `"):
            cell = row.split("|")[1]
            names = re.findall(r"`([^`]+)`", cell)
            base = str(Path(names[0].rstrip("/")).parent) if "/" in names[0] else ""
            for name in names:  # "a/b.py, c.py" names c.py in a/
                top = name.split("/", 1)[0]
                paths.append(name if not base or top in TOP or name == names[0] else f"{base}/{name}")
    return paths


def test_every_path_in_the_layout_table_exists():
    missing = [p for p in layout_paths() if not (ROOT / p).exists()]
    assert not missing, f"README's layout names paths that do not exist: {missing}"


def test_every_module_of_the_package_is_in_the_layout_table():
    named = set(layout_paths())
    pkg = ROOT / "skillsight_fast"
    modules = [p for p in pkg.iterdir() if (p.suffix == ".py" and not p.name.startswith("_"))
               or (p.is_dir() and (p / "__init__.py").exists())]
    def covered(p: Path) -> bool:
        rel = f"skillsight_fast/{p.name}" + ("/" if p.is_dir() else "")
        return rel in named or rel.rstrip("/") in named
    missing = sorted(p.name for p in modules if not covered(p))
    assert not missing, f"modules missing from README's layout table: {missing}"
