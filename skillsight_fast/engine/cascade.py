"""The lookup-first cascade (docs/ENCODERS.md), a query-time policy: a lookup tier (:data:`MAPPED_TIERS`)
answers a task first; a task whose best fused score is below ``fallback_below`` is encoded again by the
int8 transformer and searched again, and a task of fewer word pieces than ``lookup_min_pieces`` goes to the
transformer directly.

An index keeps its default :class:`Cascade` (``IndexState.cascade``: the manifest's ``cascade`` section; an
index saved before that section had the two values in its build config, read into this object); a search
may pass another one (``cascade=``) or :data:`NO_CASCADE`.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from skillsight_fast.config import FALLBACK_BELOW, LOOKUP_MIN_PIECES
from skillsight_fast.engine.result import SearchResult, assemble_rows

__all__ = ["DEFAULT_CASCADE", "NO_CASCADE", "Cascade", "answering_vectors", "cascade_search"]


@dataclass(frozen=True)
class Cascade:
    """When the lookup answers a task and when the transformer does.

    Attributes
    ----------
    fallback_below : float or None
        A task whose lookup search's best fused score (cosine units, eq. 15) is below this value is
        encoded again by the int8 transformer and searched again; that answer replaces the lookup's.
        None = no cascade: the index's query encoder answers every task.
    lookup_min_pieces : int
        A task of fewer word pieces than this ([CLS] and [SEP] counted) goes to the transformer
        directly, without a lookup pass; 0 = every task tries the lookup first.
    """

    fallback_below: float | None = None
    lookup_min_pieces: int = 0

    def __post_init__(self) -> None:
        tau = self.fallback_below
        if tau is not None and (isinstance(tau, bool) or not isinstance(tau, (int, float))
                                or not -10.0 <= tau <= 10.0):
            raise ValueError(f"fallback_below must be a number between -10 and 10, got {tau!r}")
        least = self.lookup_min_pieces
        if isinstance(least, bool) or not isinstance(least, int) or not 0 <= least <= 100_000:
            raise ValueError(f"lookup_min_pieces must be an integer >= 0, got {least!r}")
        if least and tau is None:
            raise ValueError("lookup_min_pieces is the cascade's length gate: set fallback_below too")

    @property
    def on(self) -> bool:
        """Whether this cascade ever sends a task to the transformer."""
        return self.fallback_below is not None

    def lookup_first(self, tokenize: Any, texts: Sequence[str]) -> np.ndarray:
        """Which tasks try the lookup first (bool per task): all but those of fewer word pieces than
        :attr:`lookup_min_pieces` (``tokenize``: the query encoder's tokenizer)."""
        if not self.lookup_min_pieces:
            return np.ones(len(texts), bool)
        # A word piece covers at least one character of the normalised (NFD) text, so a task with fewer
        # characters than the gate is short for certain: no tokenizer is loaded for it (a one-shot
        # search of a short task then never loads the lookup's encoder at all).
        maybe = [i for i, t in enumerate(texts) if len(unicodedata.normalize("NFD", t)) + 2 >= self.lookup_min_pieces]
        first = np.zeros(len(texts), bool)
        if maybe:
            pieces = tokenize([texts[i] for i in maybe])
            first[maybe] = [ids.size + 2 >= self.lookup_min_pieces for ids in pieces]
        return first

    def unsure(self, result: SearchResult) -> np.ndarray:
        """Rows of ``result`` (a lookup search) to send to the transformer: a finite best fused score
        below :attr:`fallback_below` (a task with no hit has nothing the transformer could reorder)."""
        if self.fallback_below is None or result.scores.shape[1] == 0:
            return np.zeros(0, np.int64)
        top = result.scores[:, 0]
        return np.flatnonzero(np.isfinite(top) & (top < self.fallback_below))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Cascade:
        """Inverse of :meth:`to_dict`; None or ``{}`` is no cascade."""
        data = dict(data or {})
        unknown = set(data) - {"fallback_below", "lookup_min_pieces"}
        if unknown:
            raise ValueError(f"unknown cascade fields: {sorted(unknown)}")
        return cls(data.get("fallback_below"), int(data.get("lookup_min_pieces") or 0))


#: No cascade: the index's query encoder answers every task.
NO_CASCADE = Cascade()
#: The default of a lookup tier built by ``auto`` (experiments/lookup_first_transformer_fallback.py).
DEFAULT_CASCADE = Cascade(FALLBACK_BELOW, LOOKUP_MIN_PIECES)


def cascade_search(searcher: Any, head: Any, texts: list[str], k: int, cascade: Cascade | None = None,
                   **knobs: Any) -> tuple[np.ndarray, SearchResult]:
    """Encode and search checked ``texts`` with ``cascade`` (default ``head``'s): ``searcher`` (an index or a
    sharded one) runs ``search_vectors``; ``head`` (a :class:`~skillsight_fast.engine.index.SkillIndex`)
    has the encoders. Returns the vectors that answered each task and the result."""
    cascade = head.cascade if cascade is None else cascade
    if not cascade.on or head.dense.query_map is None or not texts:  # only a lookup tier has something to fall back from
        vectors = head.encode(texts)
        return vectors, searcher.search_vectors(vectors, texts, k, **knobs)
    n = len(texts)
    first = np.flatnonzero(cascade.lookup_first(lambda t: head.encoders.query_encoder.tokenize(t), texts))
    send = np.setdiff1d(np.arange(n), first)
    parts: list[tuple[np.ndarray, np.ndarray, SearchResult]] = []  # (rows, their vectors, their result)
    if first.size:
        sub_texts = texts if first.size == n else [texts[i] for i in first.tolist()]
        sub_vectors = head.encode(sub_texts)
        parts.append((first, sub_vectors, searcher.search_vectors(sub_vectors, sub_texts, k, **knobs)))
        send = np.union1d(send, first[cascade.unsure(parts[-1][2])])
    if send.size:
        sub_texts = texts if send.size == n else [texts[i] for i in send.tolist()]
        sub_vectors = np.asarray(head.encoders.fallback_encoder.encode(sub_texts), np.float32)
        parts.append((send, sub_vectors, searcher.search_vectors(sub_vectors, sub_texts, k, **knobs)))
    if parts[-1][0].size == n:  # one path answered every task (a single task always): nothing to assemble
        return parts[-1][1], parts[-1][2]
    vectors = np.zeros((n, head.stats.dim), np.float32)
    for rows, sub_vectors, _ in parts:
        vectors[rows] = sub_vectors
    return vectors, assemble_rows(n, [(rows, result) for rows, _, result in parts])


def answering_vectors(index: Any, texts: list[str]) -> np.ndarray:
    """The vectors that answer checked ``texts``: ``index.encode``'s, or with a cascade the lookup's or the
    transformer's per task (which takes a search to decide)."""
    if not index.cascade.on or index.dense.query_map is None:
        return index.encode(texts)
    return cascade_search(index, index, texts, 1, explain=False)[0]
