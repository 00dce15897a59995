"""A LangChain retriever over a skill/tool index (extra ``langchain``: ``langchain-core``).

Examples
--------
>>> from skillsight_fast.integrations.langchain_retriever import SkillsightRetriever
>>> retriever = SkillsightRetriever(index="my-index", k=3)          # doctest: +SKIP
>>> docs = retriever.invoke("merge two PDF files")                   # doctest: +SKIP
>>> docs[0].metadata["id"], docs[0].metadata["score"]               # doctest: +SKIP
('pdf', 0.41)
"""

from __future__ import annotations

from typing import Any

from skillsight_fast.integrations import as_index, hit_metadata, hit_text, hits, require

_retrievers = require("langchain_core.retrievers", "langchain")
_documents = require("langchain_core.documents", "langchain")


class SkillsightRetriever(_retrievers.BaseRetriever):  # type: ignore[misc, name-defined]
    """LangChain ``BaseRetriever``: the hits of :func:`skillsight_fast.agents.find.find_skills` as Documents.

    Each ``Document`` has ``id`` = the skill id, ``page_content`` = name and description (plus the
    stored body with ``include_body``), and ``metadata`` = id, name, path, rank, score, cosine,
    dense, lexical and evidence. A task the abstention rule rejects gets no documents.

    Parameters
    ----------
    index : SkillIndex or path
        The index (or its folder).
    k : int
        Documents per query.
    abstention : Abstention, optional
    include_body : bool
        Append the stored body (the SKILL.md text, or a tool's schema) to ``page_content``.
    knobs : dict
        Per-call search knobs passed to ``find_skills`` (``fusion``, ``lexical_weight``, ...).
    """

    index: Any
    k: int = 5
    abstention: Any = None
    include_body: bool = False
    knobs: dict[str, Any] = {}  # noqa: RUF012 - a pydantic field: each instance gets its own copy

    def __init__(self, **data: Any) -> None:
        if "index" in data:
            data["index"] = as_index(data["index"])
        super().__init__(**data)

    def _get_relevant_documents(self, query: str, *, run_manager: Any = None) -> list[Any]:
        return [
            _documents.Document(id=h.id, page_content=hit_text(self.index, h, self.include_body),
                                metadata=hit_metadata(h, rank))
            for rank, h in enumerate(hits(self.index, query, self.k, self.abstention, self.knobs), 1)
        ]
