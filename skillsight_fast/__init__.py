"""skillsight-fast: training-free skill retrieval that removes shared background, on a CPU."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillsight_fast._version import __version__

__all__ = ["Cascade", "IndexConfig", "SearchResult", "SkillIndex", "__version__", "load_skills"]

if TYPE_CHECKING:
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.engine.cascade import Cascade
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.engine.result import SearchResult
    from skillsight_fast.library.skills import load_skills

#: Public names and the modules that define them, imported on first use (PEP 562), so that light
#: entry points (the prompt hook, ``skillsight --help``) do not pay for numpy and Numba.
_LAZY = {"Cascade": "skillsight_fast.engine.cascade", "IndexConfig": "skillsight_fast.config",
         "SearchResult": "skillsight_fast.engine.result",
         "SkillIndex": "skillsight_fast.engine.index", "load_skills": "skillsight_fast.library.skills"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'skillsight_fast' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
