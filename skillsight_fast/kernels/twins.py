"""The NumPy twin of each kernel: the same signature, the same ids in the same order, no Numba import.

The query kernels (projection, exact dense top-k, LEC and BM25 scores, merge, fusion, evidence
tokens) and two build kernels (token directions, CSR transpose) have their twin here
(``twins.fuse_topk`` beside :func:`skillsight_fast.kernels.fuse_topk`, and so on): the formula written
a second time, in NumPy, in the same folder. The compressed scans (int8, binary) are checked against
their contracts in tests/support/reference.py instead. The twins serve two purposes:

- the reference the kernel tests check the kernels against (tests/kernels), and
- the query stages of a process that searches a few tasks once. A one-shot ``skillsight search`` pays
  Numba's import, its CPU-target start-up and the load of the cached kernels (together ~0.3–0.6 s)
  for ~1 ms of work; :class:`~skillsight_fast.engine.index.SkillIndex` runs these instead when its
  :attr:`~skillsight_fast.engine.index.SkillIndex.engine` is ``"numpy"``. Servers, ``eval`` and ``bench``
  keep the kernels, which are faster per query and run batches in parallel.

Results match the kernels': the same ids in the same order (ties by lower id, or by candidate position
in the fusion), and the same scores up to float32 rounding of the dense dot products (NumPy's
summation order is not the kernels'). Each query twin loops over the queries of a batch in Python, so
use them for a handful of queries (:data:`ONE_SHOT_MAX_QUERIES`), not for an evaluation. Dense scores
come from ``np.einsum``, which gives identical rows identical scores (BLAS ``gemv`` may not, in its
tail), so exact ties are ordered as the kernel orders them.
"""

from __future__ import annotations

import numpy as np

from skillsight_fast.config import BM25_B, BM25_K1
from skillsight_fast.kernels._checks import check_candidates as _check_candidates
from skillsight_fast.kernels._checks import check_fusion
from skillsight_fast.kernels._checks import check_queries as _check_queries

#: Most tasks a one-shot search runs on the NumPy stages; a larger batch starts the kernels.
ONE_SHOT_MAX_QUERIES = 16

__all__ = [
    "ONE_SHOT_MAX_QUERIES",
    "dense_topk",
    "fuse_topk",
    "matched_terms",
    "merge_candidates",
    "project_out_background",
    "score_bm25_candidates",
    "score_lexical_all",
    "score_lexical_candidates",
    "token_direction_sums",
    "token_directions",
    "transpose_csr",
]


def project_out_background(vectors: np.ndarray, basis: np.ndarray, *,
                           renormalize: bool = False) -> np.ndarray:
    """``v − B Bᵀ v`` for each row, float32 (n, d): :func:`skillsight_fast.kernels.project_out_background`.

    Parameters
    ----------
    vectors : array (n, d) or (d,)
    basis : array (r, d), orthonormal rows; r may be 0.
    renormalize : bool
        Rescale each row to unit norm (a row with squared norm ≤ 1e-12 becomes zero).
    """
    v = np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
    b = np.ascontiguousarray(basis, dtype=np.float32).reshape(-1, v.shape[1]) if basis.size else (
        np.zeros((0, v.shape[1]), dtype=np.float32))
    if b.ndim != 2 or b.shape[1] != v.shape[1]:
        raise ValueError(f"basis has shape {basis.shape}, expected (r, {v.shape[1]})")
    out = v.copy()
    if v.shape[0] == 0:
        return out
    coef = np.einsum("id,rd->ir", v, b) if b.shape[0] else np.zeros((v.shape[0], 0), np.float32)
    for j in range(b.shape[0]):  # one basis row at a time, as the kernel subtracts them
        out -= coef[:, j, None] * b[j]
    if renormalize:
        norm = np.einsum("id,id->i", out, out)
        keep = norm > 1e-12
        out[keep] *= (np.float32(1.0) / np.sqrt(norm[keep]))[:, None]
        out[~keep] = 0.0
    return out


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Rows of the ``k`` best scores, best first, ties by lower row; NaN and -inf never chosen."""
    valid = scores > -np.inf  # False for NaN
    n_valid = int(valid.sum())
    if n_valid <= k:
        rows = np.flatnonzero(valid)
    else:
        s = np.where(valid, scores, -np.inf)
        part = np.argpartition(-s, k - 1)[:k]
        threshold = s[part].min()
        above = np.flatnonzero(s > threshold)
        rows = np.concatenate([above, np.flatnonzero(s == threshold)[: k - above.size]])
    return rows[np.lexsort((rows, -scores[rows]))]


def dense_topk(queries: np.ndarray, docs: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact inner-product top-k: :func:`skillsight_fast.kernels.dense_topk`.

    Returns
    -------
    ids : int64 (n, k), best first, -1 padding (ties: lower id first)
    scores : float32 (n, k), -inf padding
    """
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
    if docs.dtype != np.float32:
        docs = np.asarray(docs, dtype=np.float32)
    if docs.ndim != 2 or q.shape[1] != docs.shape[1]:
        raise ValueError(f"queries {q.shape} and docs {docs.shape} disagree on the dimension")
    ids = np.full((q.shape[0], k), -1, dtype=np.int64)
    scores = np.full((q.shape[0], k), -np.inf, dtype=np.float32)
    if docs.shape[0] == 0:
        return ids, scores
    for i in range(q.shape[0]):
        s = np.einsum("jd,d->j", docs, q[i])
        rows = _top(s, k)
        ids[i, : rows.size] = rows
        scores[i, : rows.size] = s[rows]
    return ids, scores


def _matches(docs: np.ndarray, qt: np.ndarray, doc_indptr: np.ndarray, doc_terms: np.ndarray,
             n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the query's terms occur in the documents' sorted term lists.

    Returns (document index into ``docs``, query-term index into ``qt``, position in ``doc_terms``)
    of every match; each (document, term) pair at most once, since a document's terms are distinct.
    """
    starts = doc_indptr[docs]
    lens = doc_indptr[docs + 1] - starts
    total = int(lens.sum())
    if total == 0:
        empty = np.zeros(0, np.int64)
        return empty, empty, empty
    offsets = np.zeros(lens.size, np.int64)
    np.cumsum(lens[:-1], out=offsets[1:])
    pos = np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lens)
    where = np.full(n_terms, -1, np.int64)
    where[qt] = np.arange(qt.size)
    hit = where[doc_terms[pos]]
    found = hit >= 0
    owner = np.repeat(np.arange(docs.size), lens)
    return owner[found], hit[found], pos[found]


def _sum_columns(values: np.ndarray) -> np.ndarray:
    """Sum of the columns of (m, t) ``values`` taken one column after the other (the kernels' order)."""
    acc = np.zeros(values.shape[0], values.dtype)
    for p in range(values.shape[1]):
        acc += values[:, p]
    return acc


def score_lexical_candidates(candidates: np.ndarray, q_terms: np.ndarray, q_ptr: np.ndarray,
                             doc_indptr: np.ndarray, doc_terms: np.ndarray,
                             weights: np.ndarray) -> np.ndarray:
    """LEC coverage of each candidate: :func:`skillsight_fast.kernels.score_lexical_candidates`.

    Returns float32 (n, K) in [0, 1]; 0 on padding and for a query without evidence tokens.
    """
    w = np.ascontiguousarray(weights, dtype=np.float32)
    qt, qp = _check_queries(q_terms, q_ptr, w.shape[0])
    cand = _check_candidates(candidates, qp)
    out = np.zeros(cand.shape, dtype=np.float32)
    indptr = np.asarray(doc_indptr, dtype=np.int64)
    for i in range(cand.shape[0]):
        terms = qt[qp[i]: qp[i + 1]]
        total = np.cumsum(w[terms], dtype=np.float32)[-1] if terms.size else np.float32(0.0)
        if total <= 0.0:
            continue
        cols = np.flatnonzero(cand[i] >= 0)
        owner, hit, _ = _matches(cand[i, cols], terms, indptr, doc_terms, w.shape[0])
        matched = np.zeros((cols.size, terms.size), np.float32)
        matched[owner, hit] = w[terms[hit]]
        out[i, cols] = _sum_columns(matched) / total
    return out


def score_bm25_candidates(candidates: np.ndarray, q_terms: np.ndarray, q_ptr: np.ndarray,
                          doc_indptr: np.ndarray, doc_terms: np.ndarray, doc_tf: np.ndarray,
                          doc_len: np.ndarray, idf: np.ndarray, *, k1: float = BM25_K1, b: float = BM25_B,
                          avgdl: float | None = None) -> np.ndarray:
    """BM25 of each candidate: :func:`skillsight_fast.kernels.score_bm25_candidates` (sum in float64).

    Returns float32 (n, K); 0 on padding and for a query without evidence tokens.
    """
    w = np.ascontiguousarray(idf, dtype=np.float32)
    qt, qp = _check_queries(q_terms, q_ptr, w.shape[0])
    cand = _check_candidates(candidates, qp)
    indptr = np.asarray(doc_indptr, dtype=np.int64)
    lengths = np.asarray(doc_len, dtype=np.int32)
    if doc_tf.shape != doc_terms.shape:
        raise ValueError(f"doc_tf {doc_tf.shape} does not match doc_terms {doc_terms.shape}")
    if lengths.shape != (indptr.shape[0] - 1,):
        raise ValueError(f"doc_len {lengths.shape} does not match {indptr.shape[0] - 1} documents")
    if not (k1 >= 0 and 0 <= b <= 1):
        raise ValueError(f"need k1 >= 0 and 0 <= b <= 1, got k1 = {k1}, b = {b}")
    if avgdl is None:
        avgdl = float(lengths.mean()) if lengths.size else 1.0
    avg = float(avgdl) if avgdl > 0 else 1.0
    k1, b = float(k1), float(b)
    out = np.zeros(cand.shape, dtype=np.float32)
    if cand.size == 0:
        return out
    if cand.max() >= lengths.shape[0]:
        raise ValueError(f"candidate rows must lie in [-1, {lengths.shape[0]})")
    for i in range(cand.shape[0]):
        terms = qt[qp[i]: qp[i + 1]]
        if terms.size == 0:
            continue
        cols = np.flatnonzero(cand[i] >= 0)
        docs = cand[i, cols]
        owner, hit, pos = _matches(docs, terms, indptr, doc_terms, w.shape[0])
        norm = k1 * (1.0 - b + b * lengths[docs].astype(np.float64) / avg)
        tf = doc_tf[pos].astype(np.float64)
        matched = np.zeros((cols.size, terms.size), np.float64)
        matched[owner, hit] = w[terms[hit]].astype(np.float64) * (tf * (k1 + 1.0)) / (tf + norm[owner])
        out[i, cols] = _sum_columns(matched)
    return out


def score_lexical_all(q_terms: np.ndarray, q_ptr: np.ndarray, post_indptr: np.ndarray, post_docs: np.ndarray,
                      weights: np.ndarray, n_docs: int) -> np.ndarray:
    """LEC coverage of every document: :func:`skillsight_fast.kernels.score_lexical_all`, float32 (n, N)."""
    w = np.ascontiguousarray(weights, dtype=np.float32)
    qt, qp = _check_queries(q_terms, q_ptr, w.shape[0])
    out = np.zeros((qp.shape[0] - 1, n_docs), dtype=np.float32)
    for i in range(out.shape[0]):
        terms = qt[qp[i]: qp[i + 1]]
        total = np.cumsum(w[terms], dtype=np.float32)[-1] if terms.size else np.float32(0.0)
        if total <= 0.0:
            continue
        for t in terms.tolist():  # a term's postings hold each document once
            out[i, post_docs[post_indptr[t]: post_indptr[t + 1]]] += w[t] / total
    return out


def merge_candidates(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row, the ids of ``a``, then those of ``b`` not yet listed; -1 padding last, int64 (n, Ka + Kb)."""
    a = np.ascontiguousarray(a, dtype=np.int64)
    b = np.ascontiguousarray(b, dtype=np.int64)
    out = np.full((a.shape[0], a.shape[1] + b.shape[1]), -1, dtype=np.int64)
    for i in range(a.shape[0]):
        head = a[i][a[i] >= 0].tolist()  # a is copied as is, its own repeats included
        seen, rest = set(head), []
        for x in b[i].tolist():
            if x >= 0 and x not in seen:
                seen.add(x)
                rest.append(x)
        out[i, : len(head) + len(rest)] = head + rest
    return out


def _ranks(values: np.ndarray) -> np.ndarray:
    """0-based rank of each value, highest first, ties by position (a stable sort)."""
    ranks = np.empty(values.size, np.int64)
    ranks[np.argsort(-values, kind="stable")] = np.arange(values.size)
    return ranks


def fuse_topk(candidates: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray, k: int, *, mode: str = "eq15",
              weight: float = 1.0, rrf_k: float = 60.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fusion and final top-k: :func:`skillsight_fast.kernels.fuse_topk` (statistics in float64).

    Returns
    -------
    ids : int64 (n, k), -1 padding
    scores : float32 (n, k), -inf padding; ties ordered by candidate position
    positions : int64 (n, k), -1 padding
    """
    cand, sd, sl = check_fusion(candidates, s_dense, s_lex, k, mode)
    pos = np.full((cand.shape[0], k), -1, dtype=np.int64)
    scores = np.full((cand.shape[0], k), -np.inf, dtype=np.float32)
    weight, rrf_k = float(weight), float(rrf_k)
    for i in range(cand.shape[0]):
        cols = np.flatnonzero(cand[i] >= 0)
        if cols.size == 0:
            continue
        x = sd[i, cols].astype(np.float64)
        y = sl[i, cols].astype(np.float64)
        if mode == "eq15":
            mean_l = y.sum() / y.size
            std_l = np.sqrt(((y - mean_l) ** 2).sum() / y.size)
            if std_l > 0.0:
                mean_d = x.sum() / x.size
                std_d = np.sqrt(((x - mean_d) ** 2).sum() / x.size)
                z = np.maximum((y - mean_l) / std_l, 0.0)
                f = x + weight * z * (std_d if std_d > 0.0 else 1.0)
            else:
                f = x
        elif mode == "convex":
            nd = (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)
            nl = (y - y.min()) / (y.max() - y.min()) if y.max() > y.min() else np.zeros_like(y)
            f = (1.0 - weight) * nd + weight * nl
        elif mode == "rrf":
            f = 1.0 / (rrf_k + 1.0 + _ranks(sd[i, cols])) + 1.0 / (rrf_k + 1.0 + _ranks(sl[i, cols]))
        elif mode == "dense":
            f = x
        else:
            f = y
        fused = np.full(cand.shape[1], np.nan, np.float32)
        fused[cols] = f.astype(np.float32)
        best = _top(fused, k)
        pos[i, : best.size] = best
        scores[i, : best.size] = fused[best]
    rows = np.arange(cand.shape[0])[:, None]
    ids = np.where(pos >= 0, cand[rows, np.maximum(pos, 0)], -1)
    return ids, scores, pos


def matched_terms(hits: np.ndarray, q_terms: np.ndarray, q_ptr: np.ndarray, doc_indptr: np.ndarray,
                  doc_terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The query's evidence tokens each hit contains, in the query's order (CSR over the n k hits):
    :func:`skillsight_fast.kernels.matched_terms`."""
    cand = np.ascontiguousarray(hits, dtype=np.int64)
    qt, qp = _check_queries(q_terms, q_ptr, np.iinfo(np.int32).max)
    if cand.ndim != 2 or cand.shape[0] != qp.shape[0] - 1:
        raise ValueError(f"hits {cand.shape} do not match {qp.shape[0] - 1} queries")
    indptr = np.asarray(doc_indptr, dtype=np.int64)
    if cand.size and cand.max() >= indptr.shape[0] - 1:
        raise ValueError(f"hit rows must lie in [-1, {indptr.shape[0] - 1})")
    parts, ptr = [], [0]
    for i in range(cand.shape[0]):
        query = qt[qp[i]:qp[i + 1]]
        for j in cand[i].tolist():
            found = query[np.isin(query, doc_terms[indptr[j]:indptr[j + 1]])] if j >= 0 else query[:0]
            parts.append(found)
            ptr.append(ptr[-1] + found.size)
    terms = np.concatenate(parts).astype(np.int32) if parts else np.zeros(0, np.int32)
    return np.asarray(ptr, np.int64), terms


def token_directions(terms: np.ndarray, post_indptr: np.ndarray, post_docs: np.ndarray,
                     docs: np.ndarray) -> np.ndarray:
    """Mean embedding of the documents containing each term: :func:`skillsight_fast.kernels.token_directions`.

    Returns float32 (m, d), a zero row for a term no document contains (sums in float64).
    """
    t = np.asarray(terms, dtype=np.int64)
    x = np.asarray(docs, dtype=np.float32)
    out = np.zeros((t.shape[0], x.shape[1]), dtype=np.float32)
    ptr = np.asarray(post_indptr, dtype=np.int64)
    for j, term in enumerate(t.tolist()):
        rows = post_docs[ptr[term]: ptr[term + 1]]
        if rows.size:
            out[j] = x[rows].astype(np.float64).sum(axis=0) / rows.size
    return out


def token_direction_sums(terms: np.ndarray, post_indptr: np.ndarray, post_docs: np.ndarray,
                         docs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum of the embeddings of the documents containing each term, and their number:
    :func:`skillsight_fast.kernels.token_direction_sums`.

    Returns (float64 (m, d), int64 (m,)).
    """
    t = np.asarray(terms, dtype=np.int64)
    x = np.asarray(docs, dtype=np.float32)
    out = np.zeros((t.shape[0], x.shape[1]), dtype=np.float64)
    ptr = np.asarray(post_indptr, dtype=np.int64)
    counts = np.zeros(t.shape[0], dtype=np.int64)
    for j, term in enumerate(t.tolist()):
        rows = post_docs[ptr[term]: ptr[term + 1]]
        counts[j] = rows.size
        out[j] = x[rows].astype(np.float64).sum(axis=0)
    return out, counts


def transpose_csr(indptr: np.ndarray, indices: np.ndarray, n_cols: int) -> tuple[np.ndarray, np.ndarray]:
    """Columns→rows of a binary CSR matrix, rows ascending: :func:`skillsight_fast.kernels.transpose_csr`.

    Returns (out_ptr int64 (n_cols + 1,), out_rows int32 (nnz,)).
    """
    ptr = np.asarray(indptr, dtype=np.int64)
    cols = np.asarray(indices, dtype=np.int64)
    rows = np.repeat(np.arange(ptr.shape[0] - 1, dtype=np.int64), np.diff(ptr))
    order = np.lexsort((rows, cols))  # by column, then row
    out_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    counts = np.bincount(cols, minlength=n_cols) if cols.size else np.zeros(n_cols, np.int64)
    np.cumsum(counts, out=out_ptr[1:])
    return out_ptr, rows[order].astype(np.int32)
