"""What a search returns (:class:`SearchResult`), how its rows are filled from the fused candidates, and the
checks of a search's input (task texts and k), run once where a search enters the engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillsight_fast.errors import QueryError
from skillsight_fast.limits import clean_text

__all__ = ["MAX_K", "MAX_QUERY_CHARS", "SearchResult", "assemble_rows", "check_k", "check_queries", "continued_result", "fused_result",
           "hit_cosines", "hit_evidence", "hit_parts"]

#: Largest k a search accepts beyond the corpus size (results are padded up to k).
MAX_K = 10_000
#: Longest query text accepted (characters); the encoder sees only its first tokens anyway.
MAX_QUERY_CHARS = 100_000


@dataclass
class SearchResult:
    """Ranked hits for a batch of queries (faiss contract: 2-D, best first, padded).

    Attributes
    ----------
    ids : int64 (n_queries, k)
        Rows of the index, -1 on padding.
    scores : float32 (n_queries, k)
        Fused scores, -inf on padding.
    dense : float32 (n_queries, k)
        Calibrated dense score s⊥ of each hit (NaN on padding).
    lexical : float32 (n_queries, k)
        Lexical-side score of each hit (NaN on padding): BM25 (≥ 0), or LEC coverage in [0, 1].
    evidence : list of list of list of str
        For each query and hit, the query's evidence tokens that the skill contains.
    skill_ids : list of list of str or None
        The skills' string ids (None on padding).
    cosine : float32 (n_queries, k) or None
        Raw dense similarity qᵀd of each hit (NaN on padding): what a cosine abstention threshold
        reads. Filled by :meth:`SkillIndex.search_vectors`.
    partial : list of int
        A sharded index's shards that did not answer in time (the hits come from the others); empty
        when every row was searched (:class:`skillsight_fast.cluster.index.ShardedIndex`).
    """

    ids: np.ndarray
    scores: np.ndarray
    dense: np.ndarray
    lexical: np.ndarray
    evidence: list[list[list[str]]] = field(default_factory=list)
    skill_ids: list[list[str | None]] = field(default_factory=list)
    cosine: np.ndarray | None = None
    partial: list[int] = field(default_factory=list)

def assemble_rows(n: int, parts: Sequence[tuple[np.ndarray, SearchResult]]) -> SearchResult:
    """One result of ``n`` rows from partial results (their rows given); a later part's rows win."""
    first = parts[0][1]

    def rows_of(name: str) -> np.ndarray | None:
        if getattr(first, name) is None:
            return None
        out = np.empty((n, *getattr(first, name).shape[1:]), getattr(first, name).dtype)
        for rows, part in parts:
            out[rows] = getattr(part, name)
        return out

    result = SearchResult(ids=rows_of("ids"), scores=rows_of("scores"), dense=rows_of("dense"),
                          lexical=rows_of("lexical"), cosine=rows_of("cosine"))
    for name in ("evidence", "skill_ids"):
        if all(getattr(part, name) for _, part in parts):
            out: list[Any] = [None] * n
            for rows, part in parts:
                for at, row in zip(rows.tolist(), getattr(part, name)):
                    out[at] = row
            setattr(result, name, out)
    return result

def hit_parts(pos: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The dense and lexical score of each hit, from the candidates' scores and the hits' positions.

    Parameters
    ----------
    pos : int64 (n, k)
        Position of each hit among its query's candidates (-1 on padding), as :meth:`SkillIndex.fuse` returns.
    s_dense, s_lex : float32 (n, K)
        The candidates' dense and lexical scores.

    Returns
    -------
    dense, lexical : float32 (n, k)
        NaN on padding.
    """
    rows = np.arange(pos.shape[0])[:, None]
    safe = np.maximum(pos, 0)
    dense = np.where(pos >= 0, s_dense[rows, safe], np.nan).astype(np.float32)
    lex = np.where(pos >= 0, s_lex[rows, safe], np.nan).astype(np.float32)
    return dense, lex


def hit_cosines(embeddings: np.ndarray, vectors: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The raw dense similarity qᵀd of every hit.

    Parameters
    ----------
    embeddings : float32 (N, d)
        The document vectors (may be a memory map: only the hits' rows are read).
    vectors : float32 (n, d)
        The query vectors.
    ids : int64 (n, k)
        Rows of the hits, -1 on padding.

    Returns
    -------
    float32 (n, k)
        NaN on padding.
    """
    q = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    out = np.full(ids.shape, np.nan, np.float32)
    for i in range(ids.shape[0]):
        valid = ids[i] >= 0
        if valid.any():
            out[i, valid] = np.asarray(embeddings[ids[i, valid]]) @ q[i]
    return out

def check_queries(queries: str | Sequence[str]) -> list[str]:
    """The queries as a list, validated (QueryError), lone surrogates replaced by U+FFFD."""
    if isinstance(queries, str):
        queries = [queries]
    if queries is None or not isinstance(queries, Sequence):
        raise QueryError(f"queries must be a string or a sequence of strings, got {type(queries).__name__}")
    out = list(queries)
    for i, q in enumerate(out):
        if not isinstance(q, str):
            raise QueryError(f"a query must be a string, got {type(q).__name__}")
        if len(q) > MAX_QUERY_CHARS:
            raise QueryError(f"query of {len(q):,} characters is over the {MAX_QUERY_CHARS:,} limit")
        if not any(c.isprintable() and not c.isspace() for c in q):
            raise QueryError("empty query (only whitespace or control characters): "
                             "give the task to find skills for")
        # lone surrogates (undecodable argv bytes, "\\ud800" in JSON) would crash the tokenizer
        out[i] = clean_text(q)
    return out


def check_k(k: int, n_docs: int, most: int | None = None) -> int:
    """``k`` as an int, validated (QueryError) for a library of ``n_docs``; ``most`` caps it lower than
    the index does (a server's per-request cap)."""
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise QueryError(f"k must be an integer, got {k!r}")
    if k <= 0:
        raise QueryError(f"k must be at least 1, got {k}")
    limit = max(MAX_K, n_docs) if most is None else most
    if k > limit:
        raise QueryError(f"k = {k} is too large (at most {limit})")
    return int(k)


def fused_result(index: Any, cand: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray, k: int, d: Any,
                 vectors: np.ndarray, embeddings: np.ndarray | None = None,
                 cand_cosine: np.ndarray | None = None) -> tuple[SearchResult, np.ndarray]:
    """The last stage of a search of ``index`` (a :class:`~skillsight_fast.engine.index.SkillIndex`): fuse the candidates' scores, keep the top ``k`` and fill the hits'
    parts, raw cosines (``embeddings``' rows, default the index's) and skill ids; also returns each
    hit's position in its candidate row (for evidence kept per candidate, as a sharded search does).
    ``cand_cosine``: the raw cosine of every candidate, when the caller has them (a sharded search: the
    shards computed them), so no row is read again."""
    ids, scores, pos = index.fuse(cand, s_dense, s_lex, k, fusion=d.fusion,
                                 lexical_weight=d.lexical_weight, rrf_k=d.rrf_k)
    return _hits(index, ids, scores, pos, s_dense, s_lex, vectors, embeddings, cand_cosine), pos


def _hits(index: Any, ids: np.ndarray, scores: np.ndarray, pos: np.ndarray, s_dense: np.ndarray,
          s_lex: np.ndarray, vectors: np.ndarray, embeddings: np.ndarray | None,
          cand_cosine: np.ndarray | None = None) -> SearchResult:
    """The result of hits ``ids`` (at columns ``pos`` of their candidate rows) with their fused ``scores``:
    their dense and lexical parts, raw cosines (``cand_cosine``'s at ``pos`` when given, else computed
    from the rows) and skill ids."""
    dense, lex = hit_parts(pos, s_dense, s_lex)
    if cand_cosine is not None:
        cosine = np.where(pos >= 0, np.take_along_axis(cand_cosine, np.maximum(pos, 0), axis=1),
                          np.float32(np.nan)).astype(np.float32)
    else:
        cosine = hit_cosines(index.dense.embeddings if embeddings is None else embeddings, vectors, ids)
    result = SearchResult(ids=ids, scores=scores, dense=dense, lexical=lex, cosine=cosine)
    metas = index.skills
    result.skill_ids = [[metas[j].id if j >= 0 else None for j in row] for row in ids.tolist()]
    return result


def continued_result(index: Any, cand: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray, k: int, d: Any,
                     vectors: np.ndarray, embeddings: np.ndarray | None = None,
                     cand_cosine: np.ndarray | None = None) -> tuple[SearchResult, np.ndarray]:
    """:func:`fused_result`, continued past the fused head as ``d.continuation`` says.

    ``fused``: the fused order to the end. ``rrf`` with ``k`` over :data:`~skillsight_fast.engine.depth.DEPTH_HEAD`:
    the first ``DEPTH_HEAD`` hits of the fused order, then the other candidates in the order of RRF of
    their s⊥ and lexical ranks (:func:`~skillsight_fast.engine.depth.continue_positions`); every hit keeps
    its own fused score, parts and cosine, so past the head the scores need not decrease. The positions
    returned are each hit's column in its candidate row, as :func:`fused_result`'s. Only the ``k`` hits
    get their parts, cosines and skill ids (the fusion scores every candidate, as it does anyway).
    """
    from skillsight_fast.engine.depth import DEPTH_HEAD, continue_positions

    if getattr(d, "continuation", "fused") != "rrf" or k <= DEPTH_HEAD:
        return fused_result(index, cand, s_dense, s_lex, k, d, vectors, embeddings, cand_cosine)
    _, fused, pos = index.fuse(cand, s_dense, s_lex, max(k, cand.shape[1]), fusion=d.fusion,
                               lexical_weight=d.lexical_weight, rrf_k=d.rrf_k)
    column_score = np.full(cand.shape, -np.inf, np.float32)  # each candidate column's fused score
    at = pos >= 0
    column_score[np.nonzero(at)[0], pos[at]] = fused[at]
    new_pos = continue_positions(pos, s_dense, s_lex, k, rrf_k=d.rrf_k)
    pad, safe = new_pos < 0, np.maximum(new_pos, 0)
    ids = np.where(pad, -1, np.take_along_axis(cand, safe, axis=1)).astype(np.int64)
    scores = np.where(pad, np.float32(-np.inf), np.take_along_axis(column_score, safe, axis=1)).astype(np.float32)
    return _hits(index, ids, scores, new_pos, s_dense, s_lex, vectors, embeddings, cand_cosine), new_pos


def hit_evidence(lexicon: Any, ops: Any, ids: np.ndarray, terms: np.ndarray, ptr: np.ndarray) -> list[list[list[str]]]:
    """Per query and hit, the query's evidence tokens (CSR ``terms``/``ptr``) the hit contains, in query order
    (``ops``: the kernels or their NumPy twins)."""
    vocab = lexicon.vocab
    n, k = ids.shape
    mptr, mterms = ops.matched_terms(ids, terms, ptr, lexicon.doc_indptr, lexicon.doc_terms)
    at, found = mptr.tolist(), mterms.tolist()
    return [[[vocab[t] for t in found[at[i * k + c] : at[i * k + c + 1]]] for c in range(k)] for i in range(n)]
