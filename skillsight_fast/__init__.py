"""skillsight-fast: training-free skill retrieval that removes shared background, on a CPU."""

from __future__ import annotations

__version__ = "0.1.0"

from skillsight_fast.config import IndexConfig  # noqa: E402
from skillsight_fast.index import SearchResult, SkillIndex  # noqa: E402

__all__ = ["IndexConfig", "SearchResult", "SkillIndex", "__version__"]
