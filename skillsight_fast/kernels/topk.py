"""Dense scan with top-K selection, and the fixed-size heap it and the fusion kernel share."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import JIT, PARALLEL_JIT
from skillsight_fast.kernels._launch import parallel_launch


@njit(inline="always", **JIT)
def _heap_replace_root(scores, ids, score, idx):  # pragma: no cover - jitted
    """Replace the minimum of a min-heap (``scores[0]``) and sift down. Ties: larger id is smaller."""
    k = scores.shape[0]
    pos = 0
    while True:
        left = 2 * pos + 1
        if left >= k:
            break
        right = left + 1
        child = left
        if right < k and (
            scores[right] < scores[left]
            or (scores[right] == scores[left] and ids[right] > ids[left])
        ):
            child = right
        if scores[child] < score or (scores[child] == score and ids[child] > idx):
            scores[pos] = scores[child]
            ids[pos] = ids[child]
            pos = child
        else:
            break
    scores[pos] = score
    ids[pos] = idx


@njit(**JIT)
def _heap_sort_desc(scores, ids):  # pragma: no cover - jitted
    """Sort a heap in place, best first (score descending, id ascending); padding stays last."""
    order = np.argsort(-scores, kind="mergesort")
    s = scores[order]
    d = ids[order]
    # equal scores: order by id ascending (padding -1 only ever has score -inf)
    start = 0
    k = s.shape[0]
    while start < k:
        stop = start + 1
        while stop < k and s[stop] == s[start]:
            stop += 1
        if stop - start > 1:
            sub = np.sort(d[start:stop])
            if sub[0] < 0:  # padding ids (-1) go last inside a tie of -inf
                n_pad = 0
                for x in sub:
                    if x < 0:
                        n_pad += 1
                sub = np.concatenate((sub[n_pad:], sub[:n_pad]))
            d[start:stop] = sub
        start = stop
    scores[:] = s
    ids[:] = d


#: Queries per tile of the batched scan (each document block is reused across a tile).
_QUERY_TILE = 8
#: Documents per block of the batched scan: 512 x 384 float32 = 768 KB, inside a 1 MB L2.
_DOC_BLOCK = 512


@njit(inline="always", **JIT)
def _dot(q, docs, j):  # pragma: no cover - jitted
    """q · docs[j] with one accumulator (vectorised under ``reassoc``)."""
    acc = np.float32(0.0)
    for t in range(q.shape[0]):
        acc += q[t] * docs[j, t]
    return acc


@njit(**PARALLEL_JIT)
def _dense_topk(queries, docs, tile, out_ids, out_scores):  # pragma: no cover - jitted
    """Inner-product scan of ``docs`` for each query, keeping the K best in a heap per row.

    Parameters
    ----------
    queries : float32 (n, d). docs : float32 (N, d), read only (may be a memory map).
    tile : int, queries per parallel tile (>= 1).
    out_ids : int64 (n, K), pre-filled with -1. out_scores : float32 (n, K), pre-filled with -inf.

    One query streams the matrix once, one document per step: the scan is memory bound, and a
    single accumulator keeps it at the streaming-read rate (multi-document unrolling measured
    slower). A tile of queries walks the documents in L2-sized blocks and scores each block for
    every query of the tile (4 documents per step share each query load), so a block is read from
    memory once per tile. Documents are visited in increasing order per query, so ties keep the
    lower id. Complexity O(n N d + n N log K) time; each parallel iteration writes only the rows
    of its own tile. Documents whose score is NaN never enter the heap.
    """
    n, d = queries.shape
    n_docs = docs.shape[0]
    n_tiles = (n + tile - 1) // tile
    for g in prange(n_tiles):
        q0 = g * tile
        q1 = min(n, q0 + tile)
        if q1 - q0 == 1:
            q = queries[q0]
            hs = out_scores[q0]
            hi = out_ids[q0]
            for j in range(n_docs):
                acc = _dot(q, docs, j)
                if acc > hs[0]:
                    _heap_replace_root(hs, hi, acc, j)
        else:
            for b0 in range(0, n_docs, _DOC_BLOCK):
                b1 = min(n_docs, b0 + _DOC_BLOCK)
                for i in range(q0, q1):
                    q = queries[i]
                    hs = out_scores[i]
                    hi = out_ids[i]
                    j = b0
                    while j + 4 <= b1:
                        a0 = np.float32(0.0)
                        a1 = np.float32(0.0)
                        a2 = np.float32(0.0)
                        a3 = np.float32(0.0)
                        for t in range(d):
                            qt = q[t]
                            a0 += qt * docs[j, t]
                            a1 += qt * docs[j + 1, t]
                            a2 += qt * docs[j + 2, t]
                            a3 += qt * docs[j + 3, t]
                        if a0 > hs[0]:
                            _heap_replace_root(hs, hi, a0, j)
                        if a1 > hs[0]:
                            _heap_replace_root(hs, hi, a1, j + 1)
                        if a2 > hs[0]:
                            _heap_replace_root(hs, hi, a2, j + 2)
                        if a3 > hs[0]:
                            _heap_replace_root(hs, hi, a3, j + 3)
                        j += 4
                    while j < b1:
                        acc = _dot(q, docs, j)
                        if acc > hs[0]:
                            _heap_replace_root(hs, hi, acc, j)
                        j += 1
        for i in range(q0, q1):
            _heap_sort_desc(out_scores[i], out_ids[i])


def _query_tile(n: int) -> int:
    """Queries per tile: up to 8, but enough tiles to keep every Numba thread busy."""
    import numba

    threads = max(1, numba.get_num_threads())
    return max(1, min(_QUERY_TILE, -(-n // threads)))


def dense_topk(queries: np.ndarray, docs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact maximum-inner-product search with top-K selection.

    Parameters
    ----------
    queries : array (n, d) or (d,)
        Query vectors, converted to C-contiguous float32.
    docs : array (N, d), float32
        Document matrix; a C-contiguous float32 array (or read-only memory map) is used without a copy.
    k : int
        Number of neighbours per query (k > N pads with -1 / -inf).

    Returns
    -------
    ids : int64 (n, k)
        Row indices of ``docs``, best first; -1 where fewer than k documents exist.
    scores : float32 (n, k)
        Inner products, descending; -inf on padding. Ties are ordered by ascending id.

    Examples
    --------
    >>> import numpy as np
    >>> ids, s = dense_topk(np.array([[1, 0]], np.float32), np.eye(2, dtype=np.float32), 3)
    >>> ids.tolist()
    [[0, 1, -1]]
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
    if docs.dtype != np.float32 or not docs.flags.c_contiguous:
        docs = np.ascontiguousarray(docs, dtype=np.float32)
    if docs.ndim != 2 or q.shape[1] != docs.shape[1]:
        raise ValueError(f"queries {q.shape} and docs {docs.shape} disagree on the dimension")
    ids = np.full((q.shape[0], k), -1, dtype=np.int64)
    scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
    if q.shape[0] == 0 or docs.shape[0] == 0:
        return ids, scores
    with parallel_launch():
        _dense_topk(q, docs, _query_tile(q.shape[0]), ids, scores)
    return ids, scores


@njit(**JIT)
def _merge_candidates(a, b, out):  # pragma: no cover - jitted
    """Per row, the ids of ``a`` followed by those of ``b`` not already written; padding -1 last.

    ``a`` is copied as is; an id of ``b`` is skipped when ``a`` or an earlier entry of ``b`` has it.
    """
    n = a.shape[0]
    for i in range(n):
        m = 0
        for j in range(a.shape[1]):
            if a[i, j] >= 0:
                out[i, m] = a[i, j]
                m += 1
        for j in range(b.shape[1]):
            x = b[i, j]
            if x < 0:
                continue
            seen = False
            for p in range(m):
                if out[i, p] == x:
                    seen = True
                    break
            if not seen:
                out[i, m] = x
                m += 1
    return out


def merge_candidates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Union of two candidate lists per row, order of ``a`` first, padded with -1.

    Parameters
    ----------
    a, b : int64 (n, Ka), (n, Kb)
        Candidate ids with -1 padding.

    Returns
    -------
    int64 (n, Ka + Kb)
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    out = np.full((a.shape[0], a.shape[1] + b.shape[1]), -1, dtype=np.int64)
    return _merge_candidates(a, b, out)
