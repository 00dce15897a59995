"""Binary prefilter for the int8 scan: 1-bit sign codes ranked by Hamming distance.

The int8 scan (:mod:`skillsight_fast.kernels.compressed`) reads every document's d int8 codes per
query (384 MB at a million 384-dimensional skills): it runs at the speed of memory. This scan first
reads one bit per coordinate instead (the sign of the background-removed document vector, d / 8
bytes per skill, packed in uint64 words), ranks the documents by the Hamming distance between their
bits and the query's (XOR and popcount, ``llvm.ctpop``), and keeps the ``m`` nearest (and every
document tied with the m-th: the set depends on no order). Only those are scored the int8 scan's
way, ``s_q s_j (c_q · c_j)``; the ``kk`` best of them are re-scored exactly in float32 and the K
best returned, as the int8 scan does. When the m kept rows hold the int8 scan's ``kk`` survivors,
the answer is the int8 scan's, bit for bit.

The Hamming distances of one query are counted in a histogram while they are computed, so the
distance of the m-th nearest is known after one pass without sorting; a second pass over the
distances (2 bytes per skill) gathers the kept rows in ascending order.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, prange
from numba.core import cgutils, config, types
from numba.extending import intrinsic

from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import JIT, PARALLEL_JIT
from skillsight_fast.kernels._launch import parallel_launch
from skillsight_fast.kernels._prefetch import prefetch_l2
from skillsight_fast.kernels._vnni import HAS_VNNI, dpbusd_dot
from skillsight_fast.kernels.compressed import _best_sorted, _quantize_row, _rescore_row, _select_top


def _py_popcount(x) -> int:  # pragma: no cover - NUMBA_DISABLE_JIT only
    """Pure-Python stand-in for :func:`popcount64` under ``NUMBA_DISABLE_JIT``."""
    return int(x).bit_count()


@intrinsic
def _ctpop64(typingctx, x):  # pragma: no cover - compiled into the kernels
    """Number of set bits of a uint64 (``llvm.ctpop.i64``: one ``popcnt`` instruction)."""
    if not isinstance(x, types.Integer) or x.bitwidth != 64:
        return None
    sig = types.uint64(x)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(i64, [i64]), "llvm.ctpop.i64")
        return builder.call(fn, [args[0]])

    return sig, codegen


#: Set bits of a 64-bit word.
popcount64 = _py_popcount if config.DISABLE_JIT else _ctpop64

#: Survivors ahead whose int8 rows the prefilter's int8 pass prefetches into L2.
_PREFETCH_AHEAD = 8


@njit(inline="always", **JIT)
def _pack_row(x, out):  # pragma: no cover - jitted
    """out[w] bit b = (x[64 w + b] > 0) for the d coordinates of x; bits past d stay 0."""
    d = x.shape[0]
    for w in range(out.shape[0]):
        acc = np.uint64(0)
        for b in range(64):
            t = w * 64 + b
            if t < d and x[t] > 0:
                acc |= np.uint64(1) << np.uint64(b)
        out[w] = acc


@njit(**PARALLEL_JIT)
def _pack_signs(docs, bits):  # pragma: no cover - jitted
    """:func:`_pack_row` of every row of docs float32 (N, d) into bits uint64 (N, ceil(d / 64))."""
    for j in prange(docs.shape[0]):
        _pack_row(docs[j], bits[j])


@njit(**JIT)
def _hamming_counts(qb, bits, dist, hist):  # pragma: no cover - jitted
    """dist[j] = popcount(qb XOR bits[j]) (uint16) for every row; hist[h] += 1 per row at distance h."""
    n, w = bits.shape
    for j in range(n):
        acc = np.uint64(0)
        for t in range(w):
            acc += popcount64(qb[t] ^ bits[j, t])
        dist[j] = np.uint16(acc)
        hist[acc] += 1


@njit(**JIT)
def _nearest_rows(qb, bits, m):  # pragma: no cover - jitted
    """Rows (ascending) within the Hamming distance of the m-th nearest to qb (ties all kept)."""
    n, w = bits.shape
    dist = np.empty(n, np.uint16)
    hist = np.zeros(64 * w + 1, np.int64)
    _hamming_counts(qb, bits, dist, hist)
    thr = 0
    total = hist[0]
    while total < m and thr + 1 < hist.shape[0]:
        thr += 1
        total += hist[thr]
    rows = np.empty(total, np.int64)
    g = 0
    limit = np.uint16(thr)
    for j in range(n):
        if dist[j] <= limit:
            rows[g] = j
            g += 1
    return rows


@njit(inline="always", **JIT)
def _prefetch_ahead(flat, rows, c, d):  # pragma: no cover - jitted
    """Prefetch into L2 the int8 row (d codes of ``flat``) of the survivor :data:`_PREFETCH_AHEAD`
    places after survivor c, when there is one."""
    if c + _PREFETCH_AHEAD < rows.shape[0]:
        base = rows[c + _PREFETCH_AHEAD] * d
        for t in range(0, d, 64):
            prefetch_l2(flat, base + t)


@njit(**JIT)
def _int8_rows(qc, qs, codes, scales, rows, out):  # pragma: no cover - jitted
    """out[c] = ``qs · scales[r] · (qc · codes[r])`` for r = rows[c]: the int8 scan's score of each row,
    with the same arithmetic (the same float32 value as :func:`~.compressed._int8_scores`)."""
    d = codes.shape[1]
    flat = codes.reshape(-1)
    m = rows.shape[0]
    if HAS_VNNI and d % 64 == 0:
        qsum = np.int32(0)
        for t in range(d):
            qsum += np.int32(qc[t])
        shift = np.int32(128) * qsum  # (c + 128) · q - 128 Σq = c · q
        n64 = d // 64
        for c in range(m):
            _prefetch_ahead(flat, rows, c, d)
            r = rows[c]
            out[c] = np.float32(dpbusd_dot(codes[r], qc, n64) - shift) * (scales[r] * qs)
        return
    for c in range(m):
        _prefetch_ahead(flat, rows, c, d)
        r = rows[c]
        acc = np.int32(0)
        for t in range(d):
            acc = np.int32(acc + np.int32(qc[t]) * np.int32(codes[r, t]))
        out[c] = np.float32(acc) * (scales[r] * qs)


@njit(**JIT)
def _binary_rescored_row(q, bits, codes, scales, docs, m, kk, out_ids,
                         out_scores):  # pragma: no cover - jitted
    """One query: the m Hamming-nearest rows, their int8 scores, the kk best re-scored exactly, the K
    best sorted into the pre-filled (-1 / -inf) rows out_ids int64 (K,), out_scores float32 (K,)."""
    qb = np.empty(bits.shape[1], np.uint64)
    _pack_row(q, qb)
    rows = _nearest_rows(qb, bits, m)
    qc = np.empty(q.shape[0], np.int8)
    qs = _quantize_row(q, qc)
    v = np.empty(rows.shape[0], np.float32)
    _int8_rows(qc, qs, codes, scales, rows, v)
    bs, pos = _select_top(v, kk)
    n_keep = pos.shape[0]
    bi = np.empty(n_keep, np.int64)
    for c in range(n_keep):
        bi[c] = rows[pos[c]]  # positions ascending -> ids ascending
    _rescore_row(q, docs, bi, n_keep, bs)
    _best_sorted(bs, bi, n_keep, out_ids, out_scores)


@njit(**PARALLEL_JIT)
def _binary_topk(queries, bits, codes, scales, docs, m, kk, out_ids, out_scores):  # pragma: no cover - jitted
    """:func:`_binary_rescored_row` of each query; row i is written only by iteration i."""
    for i in prange(queries.shape[0]):
        _binary_rescored_row(queries[i], bits, codes, scales, docs, m, kk, out_ids[i], out_scores[i])


@njit(**JIT)
def _binary_topk_one(queries, bits, codes, scales, docs, m, kk, out_ids,
                     out_scores):  # pragma: no cover - jitted
    """:func:`_binary_topk` for one query, without the parallel launch."""
    _binary_rescored_row(queries[0], bits, codes, scales, docs, m, kk, out_ids[0], out_scores[0])


@njit(**JIT)
def _hamming_one(qb, bits, out):  # pragma: no cover - jitted
    hist = np.zeros(64 * bits.shape[1] + 1, np.int64)
    _hamming_counts(qb, bits, out, hist)


def pack_signs(x: np.ndarray) -> np.ndarray:
    """The sign bits of each row: uint64 (N, ceil(d / 64)), bit b of word w set when ``x[:, 64 w + b] > 0``.

    Parameters
    ----------
    x : array (N, d)
        Converted to C-contiguous float32 once.
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    a = np.ascontiguousarray(x, dtype=np.float32)
    if a.ndim != 2:
        raise ValueError(f"x must be 2-D, got shape {a.shape}")
    bits = np.zeros((a.shape[0], -(-a.shape[1] // 64)), np.uint64)
    if a.shape[0] and a.shape[1]:
        _pack_signs(a, bits)
    return bits


def hamming(qbits: np.ndarray, bits: np.ndarray) -> np.ndarray:
    """Hamming distance uint16 (N,) between the packed query ``qbits`` uint64 (W,) and each row of
    ``bits``."""
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    qb = np.ascontiguousarray(qbits, np.uint64).reshape(-1)
    b = np.ascontiguousarray(bits, np.uint64)
    if b.ndim != 2 or b.shape[1] != qb.shape[0]:
        raise ValueError(f"query bits {qb.shape} and bits {b.shape} disagree")
    out = np.empty(b.shape[0], np.uint16)
    if b.shape[0]:
        _hamming_one(qb, b, out)
    return out


def dense_topk_binary(
    queries: np.ndarray,
    bits: np.ndarray,
    codes: np.ndarray,
    scales: np.ndarray,
    docs: np.ndarray,
    k: int,
    *,
    rerank: int,
    oversample: int = 4,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k inner products: Hamming prefilter, int8 scoring of ``rerank`` rows, exact re-scoring.

    Parameters
    ----------
    queries : array (n, d) or (d,)
        float32 queries.
    bits : uint64 (N, ceil(d / 64))
        :func:`pack_signs` of the documents.
    codes, scales : int8 (N, d), float32 (N,)
        :func:`~skillsight_fast.kernels.compressed.quantize_int8` of the documents.
    docs : float32 (N, d)
        The exact matrix (only the survivors' rows are read).
    k : int
        Hits per query (k > N pads with -1 / -inf).
    rerank : int
        Hamming-nearest rows scored by the int8 codes (at least ``oversample * k``; ties at the
        last distance are all kept).
    oversample : int
        int8 survivors per hit re-scored exactly.

    Returns
    -------
    ids : int64 (n, k)
    scores : float32 (n, k)
        Exact scores, best first, ties by ascending id, -1 / -inf padding.
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if oversample < 1 or rerank < 1:
        raise ValueError("oversample and rerank must be >= 1")
    q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
    c = np.ascontiguousarray(codes, dtype=np.int8)
    s = np.ascontiguousarray(scales, dtype=np.float32)
    b = np.ascontiguousarray(bits, dtype=np.uint64)
    x = (docs if docs.dtype == np.float32 and docs.flags.c_contiguous
         else np.ascontiguousarray(docs, np.float32))
    n_docs, d = c.shape if c.ndim == 2 else (-1, -1)
    if (c.ndim != 2 or q.shape[1] != d or s.shape != (n_docs,) or x.shape != c.shape
            or b.shape != (n_docs, -(-d // 64))):
        raise ValueError(f"queries {q.shape}, bits {b.shape}, codes {c.shape}, scales {s.shape} and "
                         f"docs {x.shape} disagree")
    n = q.shape[0]
    kk = min(max(k, oversample * k), max(n_docs, 1))
    m = min(max(int(rerank), kk), max(n_docs, 1))
    out_ids = np.full((n, k), -1, dtype=np.int64)
    out_scores = np.full((n, k), -np.inf, dtype=np.float32)
    if n == 1 and n_docs:
        _binary_topk_one(q, b, c, s, x, m, kk, out_ids, out_scores)
    elif n and n_docs:
        with parallel_launch():
            _binary_topk(q, b, c, s, x, m, kk, out_ids, out_scores)
    return out_ids, out_scores
