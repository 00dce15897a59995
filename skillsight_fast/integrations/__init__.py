"""Thin adapters of the "find skills" use case for agent frameworks (optional extras).

* :mod:`~skillsight_fast.integrations.langchain_retriever`: a LangChain ``BaseRetriever``
  (extra ``langchain``);
* :mod:`~skillsight_fast.integrations.llamaindex_retriever`: a LlamaIndex ``BaseRetriever``
  (extra ``llamaindex``);
* :mod:`~skillsight_fast.integrations.bigtool`: the tool-retrieval function that
  ``langgraph_bigtool.create_agent`` takes, and the skills of a LangChain tool registry
  (extra ``bigtool``).

Each calls :func:`skillsight_fast.agents.find.find_skills` and only translates its hits; this module holds
the parts they share and imports no framework.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from skillsight_fast.agents.find import Hit, find_skills
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import SkillsightError, install_hint


def require(module: str, extra: str) -> Any:
    """Import an optional framework, or raise an error naming the extra that installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise SkillsightError(f"this adapter needs {module.split('.')[0].replace('_', '-')}: "
                              + install_hint(extra)) from None


def as_index(index: Any) -> Any:
    """A loaded :class:`~skillsight_fast.engine.index.SkillIndex`, or one loaded from a folder path."""
    from skillsight_fast.engine.index import SkillIndex

    if isinstance(index, (str, Path)):
        return SkillIndex.load(index)
    if not isinstance(index, SkillIndex):
        raise SkillsightError(f"expected a SkillIndex or an index folder, got {type(index).__name__}")
    return index


def hits(index: Any, query: str, k: int, abstention: Abstention | None,
         knobs: Mapping[str, Any]) -> list[Hit]:
    """The hits of one query through the one find use case (empty when it abstains)."""
    return find_skills(index, [query], k, abstention=abstention, **dict(knobs))[0].hits


def hit_text(index: Any, hit: Hit, include_body: bool) -> str:
    """What a framework document holds for a hit: name and description, plus the body if asked and stored."""
    text = f"{hit.name}\n{hit.description}".strip()
    bodies = index.state.bodies if include_body else None
    if bodies is not None:
        row_of = getattr(index, "_integration_rows", None)
        if row_of is None or len(row_of) != len(bodies):
            row_of = {sid: i for i, sid in enumerate(index.ids)}
            index._integration_rows = row_of
        body = bodies[row_of[hit.id]]
        if body:
            text += "\n\n" + body
    return text


def hit_metadata(hit: Hit, rank: int) -> dict[str, Any]:
    """Score, score parts and evidence of a hit, as framework metadata."""
    return {"id": hit.id, "name": hit.name, "path": hit.path, "rank": rank, "score": hit.score,
            "cosine": hit.cosine, "dense": hit.dense, "lexical": hit.lexical, "evidence": list(hit.evidence)}
