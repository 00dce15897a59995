"""Compressed dense scan: int8 documents with a per-row scale, exact float32 re-scoring of survivors.

For libraries too large for the float32 scan to stay fast (about a million skills), the document
matrix is stored as int8 codes ``c_j`` with one float32 scale ``s_j`` per row (``d_j ≈ s_j c_j``,
a quarter of the bytes). The query is quantised the same way (``q ≈ s_q c_q``), the scan ranks by
the cheap value ``s_q s_j (c_q · c_j)``, an integer dot product, and keeps a larger candidate heap;
the exact float32 inner product is then computed for those survivors only.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.kernels._flags import JIT, PARALLEL_JIT
from skillsight_fast.kernels.topk import _heap_better, _heap_replace_root, _heap_sort_desc


@njit(**PARALLEL_JIT)
def _quantize_int8(docs, codes, scales):  # pragma: no cover - jitted
    """Symmetric per-row int8: scale = max|x| / 127, code = round(x / scale). Writes codes, scales."""
    n, d = docs.shape
    for j in prange(n):
        m = np.float32(0.0)
        for t in range(d):
            m = max(m, abs(docs[j, t]))
        s = m / np.float32(127.0)
        scales[j] = s
        inv = np.float32(1.0) / s if s > 0 else np.float32(0.0)
        for t in range(d):
            codes[j, t] = np.int8(np.rint(docs[j, t] * inv))


#: Documents per block of the int8 scan: their int32 dot products (2 KB) stay in L1 for the heap pass.
_INT8_BLOCK = 512


@njit(inline="always", **JIT)
def _int8_dots(qc, codes, a, b, out):  # pragma: no cover - jitted
    """out[j - a] = qc · codes[j] for j in [a, b), exact in int32 (|sum| <= d 127², d < 133,000).

    Integer products widened to int32 vectorise to the CPU's multiply-add of int16 pairs
    (``vpmaddwd``), twice the lanes of a float32 FMA and no int-to-float conversion per element.
    """
    d = codes.shape[1]
    for j in range(a, b):
        acc = np.int32(0)
        for t in range(d):
            acc += np.int32(qc[t]) * np.int32(codes[j, t])
        out[j - a] = acc


@njit(**PARALLEL_JIT)
def _int8_topk(qcodes, qscales, codes, scales, out_ids, out_scores):  # pragma: no cover - jitted
    """Approximate scan: score_j = qscale · scales[j] · (qcodes · codes[j]), the K best per query.

    qcodes : int8 (n, d), qscales : float32 (n,) (the queries through :func:`quantize_int8`).
    codes : int8 (N, d). scales : float32 (N,). out_ids int64 (n, K) filled with -1, out_scores
    float32 (n, K) filled with -inf; row i is written only by iteration i. Documents are scored in
    blocks of :data:`_INT8_BLOCK` (integer dot products first, then the heap pass over the block).
    Complexity O(n N d), reading N d bytes per query.
    """
    n = qcodes.shape[0]
    n_docs = codes.shape[0]
    for i in prange(n):
        qc = qcodes[i]
        qs = qscales[i]
        hs = out_scores[i]
        hi = out_ids[i]
        buf = np.empty(_INT8_BLOCK, np.int32)
        for a in range(0, n_docs, _INT8_BLOCK):
            b = min(a + _INT8_BLOCK, n_docs)
            _int8_dots(qc, codes, a, b, buf)
            for j in range(a, b):
                v = np.float32(buf[j - a]) * (scales[j] * qs)
                if v > hs[0]:
                    _heap_replace_root(hs, hi, v, j)
        _heap_sort_desc(hs, hi)


@njit(**PARALLEL_JIT)
def _rescore_topk(queries, docs, candidates, out_ids, out_scores):  # pragma: no cover - jitted
    """Exact float32 inner products of each query with its candidate rows; keep the k best.

    candidates : int64 (n, R), -1 padding. Ties are ordered by ascending id. Row i written only by
    iteration i. Complexity O(n R d).
    """
    n, d = queries.shape
    for i in prange(n):
        hs = out_scores[i]
        hi = out_ids[i]
        for c in range(candidates.shape[1]):
            j = candidates[i, c]
            if j < 0:
                continue
            acc = np.float32(0.0)
            for t in range(d):
                acc += queries[i, t] * docs[j, t]
            if _heap_better(hs, hi, acc, j):
                _heap_replace_root(hs, hi, acc, j)
        _heap_sort_desc(hs, hi)


def quantize_int8(docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric int8 quantisation of a document matrix.

    Parameters
    ----------
    docs : array (N, d)
        Converted to C-contiguous float32 once.

    Returns
    -------
    codes : int8 (N, d)
    scales : float32 (N,)
        ``docs[j] ≈ scales[j] * codes[j]``; an all-zero row gets scale 0.
    """
    x = np.ascontiguousarray(docs, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"docs must be 2-D, got shape {x.shape}")
    codes = np.empty(x.shape, dtype=np.int8)
    scales = np.empty(x.shape[0], dtype=np.float32)
    if x.shape[0]:
        _quantize_int8(x, codes, scales)
    return codes, scales


def dense_topk_int8(
    queries: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    k: int,
    *,
    docs: np.ndarray | None = None,
    oversample: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k inner products over an int8 document matrix, optionally re-scored exactly.

    Parameters
    ----------
    queries : array (n, d) or (d,)
        float32 queries.
    codes, scales : int8 (N, d), float32 (N,)
        From :func:`quantize_int8`.
    k : int
        Hits per query (k > N pads with -1 / -inf).
    docs : float32 (N, d), optional
        The exact matrix. When given, the int8 scan keeps ``oversample * k`` survivors and their
        exact float32 scores decide the final top-k (returned scores are exact); otherwise the
        approximate scores are returned.
    oversample : int
        Survivors per hit kept for exact re-scoring (>= 1).

    Returns
    -------
    ids : int64 (n, k)
    scores : float32 (n, k)
        Best first, ties by ascending id, -1 / -inf padding.
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if oversample < 1:
        raise ValueError("oversample must be >= 1")
    q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
    c = np.ascontiguousarray(codes, dtype=np.int8)
    s = np.ascontiguousarray(scales, dtype=np.float32)
    if c.ndim != 2 or q.shape[1] != c.shape[1] or s.shape != (c.shape[0],):
        raise ValueError(f"queries {q.shape}, codes {c.shape} and scales {s.shape} disagree")
    n_docs = c.shape[0]
    kk = k if docs is None else min(max(k, oversample * k), max(n_docs, 1))
    ids = np.full((q.shape[0], kk), -1, dtype=np.int64)
    scores = np.full((q.shape[0], kk), -np.inf, dtype=np.float32)
    if q.shape[0] and n_docs:
        qc, qs = quantize_int8(q)
        _int8_topk(qc, qs, c, s, ids, scores)
    if docs is None:
        return ids, scores
    x = docs if docs.dtype == np.float32 and docs.flags.c_contiguous else np.ascontiguousarray(docs, np.float32)
    if x.shape != c.shape:
        raise ValueError(f"docs {x.shape} do not match codes {c.shape}")
    out_ids = np.full((q.shape[0], k), -1, dtype=np.int64)
    out_scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
    if q.shape[0] and n_docs:
        _rescore_topk(q, x, ids, out_ids, out_scores)
    return out_ids, out_scores
