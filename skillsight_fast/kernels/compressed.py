"""Compressed dense scan: int8 documents with a per-row scale, exact float32 re-scoring of survivors.

For libraries too large for the float32 scan to stay fast (about a million skills), the document
matrix is stored as int8 codes ``c_j`` with one float32 scale ``s_j`` per row (``d_j ≈ s_j c_j``,
a quarter of the bytes). The query is quantised the same way (``q ≈ s_q c_q``), the scan ranks by
the cheap value ``s_q s_j (c_q · c_j)``, an integer dot product, and keeps ``oversample × k``
survivors; the exact float32 inner product is then computed for those survivors only.

A query is one serial pass (:func:`_int8_rescored_row`): quantise, integer dot products in blocks
(``vpdpbusd`` where the CPU has AVX-512 VNNI), a threshold selection of the survivors in place of
a heap, exact re-scoring, a stable sort of the k best. Batches run it in a ``prange`` over queries;
a single query calls the serial kernel directly (no parallel launch).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import JIT, PARALLEL_JIT
from skillsight_fast.kernels._launch import parallel_launch
from skillsight_fast.kernels._prefetch import prefetch_l2
from skillsight_fast.kernels._vnni import HAS_VNNI, dpbusd_dot
from skillsight_fast.kernels.topk import _dot


@njit(inline="always", **JIT)
def _quantize_row(x, codes):  # pragma: no cover - jitted
    """Symmetric int8 code of one row: scale = max|x| / 127, code = round(x / scale); returns the scale."""
    d = x.shape[0]
    m = np.float32(0.0)
    for t in range(d):
        m = max(m, abs(x[t]))
    s = m / np.float32(127.0)
    inv = np.float32(1.0) / s if s > 0 else np.float32(0.0)
    for t in range(d):
        codes[t] = np.int8(np.rint(x[t] * inv))
    return s


@njit(**PARALLEL_JIT)
def _quantize_int8(docs, codes, scales):  # pragma: no cover - jitted
    """:func:`_quantize_row` of every row of ``docs``. Writes codes, scales."""
    for j in prange(docs.shape[0]):
        scales[j] = _quantize_row(docs[j], codes[j])


#: Documents per block of the int8 scan: their int32 dot products (2 KB) stay in L1 for the heap pass.
_INT8_BLOCK = 512


@njit(**JIT)
def _int8_dots(qc, codes, a, b, out):  # pragma: no cover - jitted
    """out[j - a] = qc · codes[j] for j in [a, b), exact in int32 (d < 66,000).

    With AVX-512 VNNI (:data:`~skillsight_fast.kernels._vnni.HAS_VNNI`) and d a multiple of 64,
    one ``vpdpbusd`` per 64 bytes. Otherwise the portable loop: its int32 accumulator (each step
    cast back to int32) keeps it in 32-bit lanes, so it vectorises to ``vpmovsxbw`` + ``vpmaddwd``.
    Compiled on its own, not inlined into a ``prange`` body, where Numba's parallel lowering left
    the same loop scalar.
    """
    d = codes.shape[1]
    if HAS_VNNI and d % 64 == 0:
        qsum = np.int32(0)
        for t in range(d):
            qsum += np.int32(qc[t])
        shift = np.int32(128) * qsum  # (c + 128) · q - 128 Σq = c · q
        n64 = d // 64
        for j in range(a, b):
            out[j - a] = dpbusd_dot(codes[j], qc, n64) - shift
        return
    for j in range(a, b):
        acc = np.int32(0)
        for t in range(d):
            acc = np.int32(acc + np.int32(qc[t]) * np.int32(codes[j, t]))
        out[j - a] = acc


@njit(**JIT)
def _compact_top(bs, bi, m, k):  # pragma: no cover - jitted
    """Keep in place the k best of (bs[:m], bi[:m]) (ids ascending), in the same order; returns the
    k-th best score.

    Best: higher score, then lower id. The k-th largest value ``tau`` comes from a quickselect;
    the entries above it and the first ``k - #above`` equal to it (the lowest ids) are kept.
    Complexity O(m). Requires k < m.
    """
    tau = np.partition(bs[:m], m - k)[m - k]
    above = 0
    for r in range(m):
        if bs[r] > tau:
            above += 1
    ties = k - above
    w = 0
    for r in range(m):
        v = bs[r]
        if v > tau or (v == tau and ties > 0):
            if v == tau:
                ties -= 1
            bs[w] = v
            bi[w] = bi[r]
            w += 1
    return tau


#: The threshold sample takes every SAMPLE_STRIDE-th score, and at most about _SAMPLE_MAX of them.
_SAMPLE_STRIDE = 16
_SAMPLE_MAX = 8192


@njit(**JIT)
def _int8_scores(qc, qs, codes, scales, out, buf):  # pragma: no cover - jitted
    """out[j] = ``qs · scales[j] · (qc · codes[j])`` float32 (N,), in blocks of buf int32 (block,)."""
    n_docs = codes.shape[0]
    block = buf.shape[0]
    for a in range(0, n_docs, block):
        b = min(a + block, n_docs)
        _int8_dots(qc, codes, a, b, buf)
        for j in range(a, b):
            out[j] = np.float32(buf[j - a]) * (scales[j] * qs)


@njit(**JIT)
def _select_top(v, kk):  # pragma: no cover - jitted
    """The ``kk`` best of the scores v float32 (N,): (scores float32 (m,), ids int64 (m,)), ids ascending.

    Best: higher score, then lower id (what a heap fed in id order keeps); NaN never qualifies, so
    m = min(kk, #non-NaN). A strided sample of the scores gives a threshold ``tau`` a little below
    the expected kk-th best (3 standard deviations of the sample's rank); a vectorised count checks
    that at least kk scores reach it (else ``tau`` = -inf), and only those are gathered and cut to
    the kk best (:func:`_compact_top`). The result does not depend on the sample. Complexity O(N)
    with one quickselect of at most ~``_SAMPLE_MAX`` and one of ~kk + 3 sqrt(kk N / sample).
    """
    n = v.shape[0]
    tau = np.float32(-np.inf)
    stride = max(_SAMPLE_STRIDE, n // _SAMPLE_MAX)
    n_sample = n // stride
    rank = -(-kk // stride)
    rank = rank + int(3.0 * np.sqrt(rank)) + 2
    if n > kk and rank < n_sample:
        sample = np.empty(n_sample, np.float32)
        for r in range(n_sample):
            sample[r] = v[r * stride]
        tau = np.partition(sample, n_sample - rank)[n_sample - rank]
    count = 0
    for j in range(n):
        count += 1 if v[j] >= tau else 0
    if count < kk:
        tau = np.float32(-np.inf)
        count = 0
        for j in range(n):
            count += 1 if v[j] >= tau else 0
    bs = np.empty(count, np.float32)
    bi = np.empty(count, np.int64)
    g = 0
    for j in range(n):
        if v[j] >= tau:
            bs[g] = v[j]
            bi[g] = j
            g += 1
    if count > kk:
        _compact_top(bs, bi, count, kk)
        count = kk
    return bs[:count], bi[:count]


#: Survivors ahead whose float32 rows the re-scoring pass prefetches into L2.
_PREFETCH_AHEAD = 4


@njit(**JIT)
def _rescore_row(q, docs, cand, m, es):  # pragma: no cover - jitted
    """es[c] = exact ``q · docs[cand[c]]`` for c < m (cand ids >= 0), the same float32 loop as the
    exact scan's, so a document gets the same score from both scans.

    The survivors are random rows (in ascending order), cold after the int8 scan: every cache line
    of the row :data:`_PREFETCH_AHEAD` survivors ahead is prefetched into L2 (-25 % at 26k skills;
    L1-level hints, or only a row's first lines, measured no faster).
    """
    d = q.shape[0]
    flat = docs.reshape(-1)
    for c in range(m):
        if c + _PREFETCH_AHEAD < m:
            base = cand[c + _PREFETCH_AHEAD] * d
            for t in range(0, d, 16):  # 16 float32 per 64-byte line
                prefetch_l2(flat, base + t)
        es[c] = _dot(q, docs, cand[c])


@njit(**JIT)
def _best_sorted(bs, bi, m, out_ids, out_scores):  # pragma: no cover - jitted
    """The K = len(out_ids) best of (bs[:m], bi[:m]) (ids ascending) into the rows, best first
    (score descending, id ascending); the rows' -1 / -inf padding stays where m < K."""
    k = out_ids.shape[0]
    if m > k:
        _compact_top(bs, bi, m, k)
        m = k
    order = np.argsort(-bs[:m], kind="mergesort")  # stable: equal scores keep ascending ids
    for r in range(m):
        out_scores[r] = bs[order[r]]
        out_ids[r] = bi[order[r]]


@njit(**JIT)
def _int8_rescored_row(q, codes, scales, docs, kk, out_ids, out_scores):  # pragma: no cover - jitted
    """One query: int8 scan keeping ``kk`` survivors, their exact scores, the K best sorted into the
    pre-filled (-1 / -inf) rows ``out_ids`` int64 (K,), ``out_scores`` float32 (K,)."""
    qc = np.empty(q.shape[0], np.int8)
    qs = _quantize_row(q, qc)
    v = np.empty(codes.shape[0], np.float32)
    _int8_scores(qc, qs, codes, scales, v, np.empty(_INT8_BLOCK, np.int32))
    bs, bi = _select_top(v, kk)
    m = bi.shape[0]
    _rescore_row(q, docs, bi, m, bs)
    _best_sorted(bs, bi, m, out_ids, out_scores)


@njit(**PARALLEL_JIT)
def _int8_topk(queries, codes, scales, out_ids, out_scores):  # pragma: no cover - jitted
    """Approximate scan: score_j = qscale · scales[j] · (qcodes · codes[j]), the K best per query.

    queries : float32 (n, d), quantised per row as :func:`quantize_int8` does. codes : int8 (N, d).
    scales : float32 (N,). out_ids int64 (n, K) filled with -1, out_scores float32 (n, K) filled
    with -inf; row i is written only by iteration i. Complexity O(n N d), reading N d bytes per query.
    """
    n, d = queries.shape
    for i in prange(n):
        qc = np.empty(d, np.int8)
        qs = _quantize_row(queries[i], qc)
        v = np.empty(codes.shape[0], np.float32)
        _int8_scores(qc, qs, codes, scales, v, np.empty(_INT8_BLOCK, np.int32))
        bs, bi = _select_top(v, out_ids.shape[1])
        _best_sorted(bs, bi, bi.shape[0], out_ids[i], out_scores[i])


@njit(**PARALLEL_JIT)
def _int8_topk_rescored(queries, codes, scales, docs, kk, out_ids, out_scores):  # pragma: no cover - jitted
    """:func:`_int8_rescored_row` of each query; row i is written only by iteration i.

    Complexity O(n (N d + kk d)): N d int8 bytes streamed and kk random float32 rows per query.
    """
    for i in prange(queries.shape[0]):
        _int8_rescored_row(queries[i], codes, scales, docs, kk, out_ids[i], out_scores[i])


@njit(**JIT)
def _int8_topk_rescored_one(queries, codes, scales, docs, kk, out_ids,
                            out_scores):  # pragma: no cover - jitted
    """:func:`_int8_topk_rescored` for one query, without the parallel launch."""
    _int8_rescored_row(queries[0], codes, scales, docs, kk, out_ids[0], out_scores[0])


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
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    x = np.ascontiguousarray(docs, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"docs must be 2-D, got shape {x.shape}")
    codes = np.empty(x.shape, dtype=np.int8)
    scales = np.empty(x.shape[0], dtype=np.float32)
    if x.shape[0]:
        _quantize_int8(x, codes, scales)
    return codes, scales


@njit(**JIT)
def _rescore_many(q, docs, cand, out):  # pragma: no cover - jitted
    for c in range(cand.shape[0]):
        out[c] = _dot(q, docs, cand[c])


def rescore_rows(q: np.ndarray, docs: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Exact ``q · docs[r]`` float32 (m,) for ``rows`` int64 (m,), by the float32 loop of the int8
    scan's re-scoring and the exact scan (the same score a document gets from either scan; what a
    shard of :mod:`skillsight_fast.cluster` returns for its rows)."""
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    x = (docs if docs.dtype == np.float32 and docs.flags.c_contiguous
         else np.ascontiguousarray(docs, np.float32))
    r = np.ascontiguousarray(rows, np.int64)
    if r.size and (r.min() < 0 or r.max() >= x.shape[0]):
        raise ValueError("rows out of range")
    out = np.empty(r.shape[0], np.float32)
    if r.size:
        _rescore_many(np.ascontiguousarray(q, np.float32), x, r, out)
    return out


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
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if oversample < 1:
        raise ValueError("oversample must be >= 1")
    q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
    c = np.ascontiguousarray(codes, dtype=np.int8)
    s = np.ascontiguousarray(scales, dtype=np.float32)
    if c.ndim != 2 or q.shape[1] != c.shape[1] or s.shape != (c.shape[0],):
        raise ValueError(f"queries {q.shape}, codes {c.shape} and scales {s.shape} disagree")
    n, n_docs = q.shape[0], c.shape[0]
    if docs is None:
        ids = np.full((n, k), -1, dtype=np.int64)
        scores = np.full((n, k), -np.inf, dtype=np.float32)
        if n and n_docs:
            with parallel_launch():
                _int8_topk(q, c, s, ids, scores)
        return ids, scores
    x = (docs if docs.dtype == np.float32 and docs.flags.c_contiguous
         else np.ascontiguousarray(docs, np.float32))
    if x.shape != c.shape:
        raise ValueError(f"docs {x.shape} do not match codes {c.shape}")
    kk = min(max(k, oversample * k), max(n_docs, 1))
    out_ids = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.full((n, k), -np.inf, dtype=np.float32)
    if n == 1 and n_docs:
        _int8_topk_rescored_one(q, c, s, x, kk, out_ids, out_scores)
    elif n and n_docs:
        with parallel_launch():
            _int8_topk_rescored(q, c, s, x, kk, out_ids, out_scores)
    return out_ids, out_scores
