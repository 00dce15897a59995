"""What every searcher offers: the small surface :func:`~skillsight_fast.agents.find.find_skills`, the service
and the cascade use of an index, implemented by :class:`~skillsight_fast.engine.index.SkillIndex` and by the
sharded :class:`~skillsight_fast.cluster.index.ShardedIndex` (each explicitly; nothing forwards by name).

Task texts are checked once, where a search enters (:meth:`Searcher.search`, ``find_skills``, the CLI):
:meth:`Searcher.encode_search`, :meth:`Searcher.encode` and :meth:`Searcher.search_vectors` take checked
texts (:func:`skillsight_fast.engine.result.check_queries`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from skillsight_fast.engine.result import SearchResult

__all__ = ["Searcher"]


@runtime_checkable
class Searcher(Protocol):
    """A searchable index: its records and the search, stage by stage where a caller needs one."""

    def __len__(self) -> int: ...

    @property
    def state(self) -> Any:
        """The :class:`~skillsight_fast.engine.state.IndexState`: records (``flags``, ``roots``,
        ``abstention``, ``model``, ...), config, decisions, statistics, the default cascade."""

    @property
    def skills(self) -> Any:
        """The skill records (:class:`~skillsight_fast.engine.state.SkillMeta` per row)."""

    @property
    def pins(self) -> list[str]:
        """Ids of the skills every ``find_skills`` answer starts with."""

    @property
    def dense(self) -> Any:
        """``embeddings`` and ``embeddings_perp`` (rows read by index), ``basis``, ``query_map``."""

    def check_k(self, k: int, most: int | None = None) -> int:
        """``k`` validated against the library (QueryError)."""

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Stage 1: checked task texts → query vectors."""

    def remove_background(self, vectors: np.ndarray) -> np.ndarray:
        """Stage 2: q⊥."""

    def search(self, queries: str | Sequence[str], k: int = 10, **knobs: Any) -> SearchResult:
        """Check the texts and ``k`` and search (the entry point)."""

    def encode_search(self, texts: Sequence[str], k: int = 10, cascade: Any = None,
                      **knobs: Any) -> tuple[np.ndarray, SearchResult]:
        """Encode checked texts (through the cascade) and search; the answering vectors and the result."""

    def search_vectors(self, vectors: np.ndarray, texts: Sequence[str], k: int = 10,
                       **knobs: Any) -> SearchResult:
        """Search encoded tasks (``texts`` give the lexical evidence)."""

    def warmup(self) -> None:
        """Compile what a search runs."""
