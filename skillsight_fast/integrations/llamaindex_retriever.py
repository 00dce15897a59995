"""A LlamaIndex retriever over a skill/tool index (extra ``llamaindex``: ``llama-index-core``).

Examples
--------
>>> from skillsight_fast.integrations.llamaindex_retriever import SkillsightRetriever
>>> retriever = SkillsightRetriever("my-index", k=3)                 # doctest: +SKIP
>>> nodes = retriever.retrieve("merge two PDF files")                # doctest: +SKIP
>>> nodes[0].node.id_, nodes[0].score                                # doctest: +SKIP
('pdf', 0.41)
"""

from __future__ import annotations

from typing import Any

from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.integrations import as_index, hit_metadata, hit_text, hits, require

_base = require("llama_index.core.retrievers", "llamaindex")
_schema = require("llama_index.core.schema", "llamaindex")


class SkillsightRetriever(_base.BaseRetriever):  # type: ignore[misc, name-defined]
    """LlamaIndex ``BaseRetriever``: the hits of :func:`skillsight_fast.agents.find.find_skills` as nodes.

    Each ``NodeWithScore`` holds a ``TextNode`` with ``id_`` = the skill id, ``text`` = name and
    description (plus the stored body with ``include_body``) and ``metadata`` = id, name, path,
    rank, score, cosine, dense, lexical and evidence; its ``score`` is the fused score. A task the
    abstention rule rejects gets no nodes.

    Parameters
    ----------
    index : SkillIndex or path
    k : int
    abstention : Abstention, optional
    include_body : bool
    **knobs
        Per-call search knobs passed to ``find_skills``.
    """

    def __init__(self, index: Any, k: int = 5, *, abstention: Abstention | None = None,
                 include_body: bool = False, callback_manager: Any = None, **knobs: Any) -> None:
        self.index = as_index(index)
        self.k, self.abstention, self.include_body, self.knobs = k, abstention, include_body, knobs
        super().__init__(callback_manager=callback_manager)

    def _retrieve(self, query_bundle: Any) -> list[Any]:
        out = []
        found = hits(self.index, query_bundle.query_str, self.k, self.abstention, self.knobs)
        for rank, h in enumerate(found, 1):
            # the evidence list stays out of the text the LLM sees, in metadata only
            meta = hit_metadata(h, rank)
            node = _schema.TextNode(id_=h.id, text=hit_text(self.index, h, self.include_body), metadata=meta,
                                    excluded_llm_metadata_keys=list(meta),
                                    excluded_embed_metadata_keys=list(meta))
            out.append(_schema.NodeWithScore(node=node, score=h.score))
        return out
