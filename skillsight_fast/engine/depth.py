"""A ranking that holds past the fused head: the head of one ranking, then rank fusion of two lists.

The fused score (Eq. 15) orders the candidate set well at the top, but deeper in the list a
document with a good dense rank and no lexical bonus falls behind documents that are mediocre on
both sides, so past the first positions the fused order can fall below reciprocal rank fusion
(RRF) of its own two inputs. :func:`head_then_rrf` keeps the first ``head`` positions of the fused
ranking and fills the rest with the other documents of the union of the dense and the lexical
lists, in the order of their RRF score ``Σ 1 / (rrf_k + rank)`` (rank 1 = best; a document absent
from a list gets nothing from it). The lists may be deeper than the candidate set, so the
continuation reaches documents the fused ranking never saw.

experiments/tool_depth_continuation.py declares and measures it (docs/TOOLS.md).
"""

from __future__ import annotations

import numpy as np

#: RRF's constant (Cormack, Clarke and Büttcher 2009), used by every RRF in this project.
RRF_K = 60.0
#: Positions kept from the fused ranking before the RRF continuation (the depth of the headline
#: metrics and of the first lists an agent reads; not fitted, experiments/tool_depth_continuation.py).
DEPTH_HEAD = 10


def rrf_order(lists: list[np.ndarray], rrf_k: float = RRF_K) -> tuple[np.ndarray, np.ndarray]:
    """Documents of the union of ranked ``lists`` (ids best first, ``-1`` padding) by RRF score.

    Ties go to the better rank in the first list, then in the next, then to the smaller id, so the
    order never depends on hashing or on the input's padding.

    Returns
    -------
    ids : int64 (m,)
        Every id that appears in a list, best first.
    scores : float64 (m,)
        Their RRF scores.
    """
    if rrf_k < 0:
        raise ValueError(f"rrf_k must be >= 0, got {rrf_k}")
    cols = [np.asarray(x, np.int64).ravel() for x in lists]
    ids = np.unique(np.concatenate([c[c >= 0] for c in cols]) if cols else np.zeros(0, np.int64))
    score = np.zeros(ids.size, np.float64)
    keys: list[np.ndarray] = []
    for c in cols:
        rank = np.full(ids.size, np.iinfo(np.int64).max, np.int64)
        valid = np.flatnonzero(c >= 0)
        first: dict[int, int] = {}
        for pos in valid.tolist():  # a repeated id counts at its best rank only
            first.setdefault(int(c[pos]), pos + 1)
        if first:
            at = np.searchsorted(ids, np.fromiter(first.keys(), np.int64, len(first)))
            rank[at] = np.fromiter(first.values(), np.int64, len(first))
        score += np.where(rank < np.iinfo(np.int64).max, 1.0 / (rrf_k + rank.astype(np.float64)), 0.0)
        keys.append(rank)
    order = np.lexsort((ids, *reversed(keys), -score)) if ids.size else np.zeros(0, np.int64)
    return ids[order], score[order]


def head_then_rrf(fused: np.ndarray, dense: np.ndarray, lexical: np.ndarray, k: int, head: int,
                  rrf_k: float = RRF_K) -> np.ndarray:
    """The first ``head`` ids of ``fused``, then the rest of ``dense`` ∪ ``lexical`` by RRF.

    Parameters
    ----------
    fused : int64 (n, a)
        The fused ranking of each task (ids best first, ``-1`` padding).
    dense, lexical : int64 (n, b), (n, c)
        The dense and the lexical ranking of each task (ids best first, ``-1`` padding); any depth.
    k : int
        Length of each output row.
    head : int
        Positions taken from ``fused`` (0 = RRF of the two lists alone; ``>= k`` = ``fused`` itself).
    rrf_k : float
        RRF's constant.

    Returns
    -------
    int64 (n, k)
        Ids best first; a row with fewer than ``k`` distinct ids is padded with ``-1``. Every id
        appears once per row. ``fused``'s head ids are kept even if neither list holds them.

    Examples
    --------
    >>> import numpy as np
    >>> head_then_rrf(np.array([[3, 1, 2]]), np.array([[1, 2, 3]]), np.array([[2, 4, 1]]), k=4, head=1)
    array([[3, 2, 1, 4]])
    """
    fused, dense, lexical = (np.atleast_2d(np.asarray(x, np.int64)) for x in (fused, dense, lexical))
    n = fused.shape[0]
    if dense.shape[0] != n or lexical.shape[0] != n:
        raise ValueError(f"rows differ: fused {n}, dense {dense.shape[0]}, lexical {lexical.shape[0]}")
    if k < 0 or head < 0:
        raise ValueError(f"k and head must be >= 0, got k={k}, head={head}")
    out = np.full((n, k), -1, np.int64)
    for i in range(n):
        kept: list[int] = []
        seen: set[int] = set()
        for j in fused[i].tolist():
            if len(kept) >= min(head, k):
                break
            if j >= 0 and j not in seen:
                kept.append(j)
                seen.add(j)
        if len(kept) < k:
            rest, _ = rrf_order([dense[i], lexical[i]], rrf_k)
            for j in rest.tolist():
                if len(kept) >= k:
                    break
                if j not in seen:
                    kept.append(j)
                    seen.add(j)
        out[i, : len(kept)] = kept
    return out


def continue_positions(fused_pos: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray, k: int,
                       head: int = DEPTH_HEAD, rrf_k: float = RRF_K) -> np.ndarray:
    """:func:`head_then_rrf` over one search's candidate set, in positions of its candidate rows.

    What a search has at its last stage: the fused order of the candidates, their s⊥ and their
    lexical scores. The dense list is the candidates by s⊥, the lexical list those with a lexical
    score above 0 by that score (ties: the earlier column first).

    Parameters
    ----------
    fused_pos : int64 (n, m)
        Columns of the candidate rows in fused order, best first (``-1`` padding), at least ``head`` deep.
    s_dense, s_lex : float32 (n, K)
        s⊥ (``-inf`` on padding) and the lexical score of each candidate column.
    k, head, rrf_k
        As :func:`head_then_rrf`.

    Returns
    -------
    int64 (n, k)
        Columns of the candidate rows, best first, ``-1`` padding.
    """
    s_dense = np.asarray(s_dense, np.float64)
    s_lex = np.asarray(s_lex, np.float64)
    valid = np.isfinite(s_dense)
    cols = np.broadcast_to(np.arange(s_dense.shape[1], dtype=np.int64), s_dense.shape)
    d_order = np.argsort(-np.where(valid, s_dense, -np.inf), axis=1, kind="stable")
    dense = np.where(np.take_along_axis(valid, d_order, axis=1), np.take_along_axis(cols, d_order, axis=1), -1)
    has_lex = valid & (s_lex > 0)
    l_order = np.argsort(-np.where(has_lex, s_lex, -np.inf), axis=1, kind="stable")
    lexical = np.where(np.take_along_axis(has_lex, l_order, axis=1), np.take_along_axis(cols, l_order, axis=1), -1)
    return head_then_rrf(fused_pos, dense, lexical, k, head, rrf_k)
