"""The test side of the kernels' NumPy twins (skillsight_fast/kernels/twins.py), in the shapes tests build.

The formulas (projection, top-k, LEC coverage, BM25, fusion, token directions, CSR transpose) are
written twice, both in ``skillsight_fast/kernels/``: the Numba kernel and its NumPy twin. This module
adapts the twins to what the tests draw (lists of term ids, sets and dicts per document) and keeps
what is a test's own: the tie rule of a top-k (``topk_ref``, ``select_top``), the whole search
composed from the twins (``search_pipeline``), and the contracts of the compressed scans (int8,
binary). Never imported by the package.
"""

from __future__ import annotations

import numpy as np

from skillsight_fast.engine.lexicon import STOPWORDS
from skillsight_fast.kernels import twins


def project_out_background(vectors, basis, renormalize=False):
    v = np.atleast_2d(np.asarray(vectors, dtype=np.float32))
    return twins.project_out_background(v, np.asarray(basis, np.float32).reshape(-1, v.shape[1]),
                                        renormalize=renormalize)


def topk_ref(scores_row, k):
    """Top-k of one score row: (ids, scores) best first, ties by ascending id, NaN/-inf excluded."""
    s = np.asarray(scores_row, dtype=np.float64)
    valid = np.flatnonzero(np.isfinite(s) | (s == np.inf))
    order = valid[np.lexsort((valid, -s[valid]))][:k]
    ids = np.full(k, -1, dtype=np.int64)
    out = np.full(k, -np.inf)
    ids[: order.size] = order
    out[: order.size] = s[order]
    return ids, out


def dense_topk(queries, docs, k):
    q = np.atleast_2d(np.asarray(queries, dtype=np.float32))
    d = np.asarray(docs, dtype=np.float32).reshape(-1, q.shape[1])
    return twins.dense_topk(q, d, k)


def _queries_csr(queries):
    """Lists of term ids -> (flat int32, ptr int64)."""
    ptr = np.zeros(len(queries) + 1, np.int64)
    ptr[1:] = np.cumsum([len(q) for q in queries])
    flat = np.array([t for q in queries for t in q], np.int32)
    return flat, ptr


def _docs_csr(docs):
    """Sets of term ids (or dicts term id -> tf) -> (indptr int64, sorted terms int32, tf uint16 or None)."""
    rows = [sorted(d) for d in docs]
    ptr = np.zeros(len(rows) + 1, np.int64)
    ptr[1:] = np.cumsum([len(r) for r in rows])
    terms = np.array([t for r in rows for t in r], np.int32)
    tf = (np.array([d[t] for d, r in zip(docs, rows) for t in r], np.uint16)
          if docs and isinstance(docs[0], dict) else None)
    return ptr, terms, tf


def lexical_coverage(query_terms, doc_terms, weights):
    """Σ_{t∈Q'∩d} w(t) / Σ_{t∈Q'} w(t) for one query (list of unique ids) and one doc (set of ids)."""
    return float(score_lexical_candidates(np.zeros((1, 1), np.int64), [list(query_terms)], [set(doc_terms)],
                                          weights)[0, 0])


def score_lexical_candidates(candidates, queries, docs, weights):
    """queries: list of lists of term ids; docs: list of sets of term ids."""
    qt, qp = _queries_csr(queries)
    ptr, terms, _ = _docs_csr(docs)
    return twins.score_lexical_candidates(np.asarray(candidates, np.int64), qt, qp, ptr, terms,
                                          np.asarray(weights, np.float32))


def score_bm25_candidates(candidates, queries, docs_tf, doc_len, idf, k1=1.2, b=0.75, avgdl=None):
    """queries: list of lists of term ids; docs_tf: list of dicts term id -> tf; doc_len: lengths."""
    qt, qp = _queries_csr(queries)
    ptr, terms, tf = _docs_csr(list(docs_tf))
    if tf is None:
        tf = np.zeros(0, np.uint16)
    return twins.score_bm25_candidates(np.asarray(candidates, np.int64), qt, qp, ptr, terms, tf,
                                       np.asarray(doc_len, np.int32), np.asarray(idf, np.float32), k1=k1, b=b,
                                       avgdl=avgdl)


def score_lexical_all(queries, docs, weights):
    qt, qp = _queries_csr(queries)
    ptr, terms, _ = _docs_csr(docs)
    n_terms = max(len(weights), 1)
    post_ptr, post_docs = twins.transpose_csr(ptr, terms, n_terms)
    return twins.score_lexical_all(qt, qp, post_ptr, post_docs, np.asarray(weights, np.float32), len(docs))


def fuse_topk(candidates, s_dense, s_lex, k, **kw):
    return twins.fuse_topk(np.asarray(candidates, np.int64), np.asarray(s_dense, np.float32),
                           np.asarray(s_lex, np.float32), k, **kw)


def fuse(candidates, s_dense, s_lex, mode="eq15", weight=1.0, rrf_k=60.0):
    """Fused score per candidate (NaN on padding): the twin's top-k over every candidate, put back in
    place."""
    cand = np.asarray(candidates, np.int64)
    out = np.full(cand.shape, np.nan)
    if cand.shape[1] == 0:
        return out
    _, scores, pos = fuse_topk(cand, s_dense, s_lex, cand.shape[1], mode=mode, weight=weight, rrf_k=rrf_k)
    for i in range(cand.shape[0]):
        keep = pos[i] >= 0
        out[i, pos[i][keep]] = scores[i][keep]
    return out


def token_directions(terms, docs_of_term, docs):
    """docs_of_term: list of row lists per term id."""
    ptr = np.zeros(len(docs_of_term) + 1, np.int64)
    ptr[1:] = np.cumsum([len(r) for r in docs_of_term])
    rows = np.array([r for rs in docs_of_term for r in rs], np.int32)
    return twins.token_directions(np.asarray(terms, np.int64), ptr, rows, np.asarray(docs, np.float32))


def token_direction_sums(terms, docs_of_term, docs):
    """docs_of_term: list of row lists per term id."""
    ptr = np.zeros(len(docs_of_term) + 1, np.int64)
    ptr[1:] = np.cumsum([len(r) for r in docs_of_term])
    rows = np.array([r for rs in docs_of_term for r in rs], np.int32)
    return twins.token_direction_sums(np.asarray(terms, np.int64), ptr, rows, np.asarray(docs, np.float32))


def transpose_csr(indptr, indices, n_cols):
    return twins.transpose_csr(indptr, indices, n_cols)


def evidence_terms(texts, vocab, generic, min_len=2, max_len=40) -> list[list[int]]:
    """Evidence tokens Q' of each text: its known, non-generic terms, unique, in order of appearance."""
    from skillsight_fast.engine.analyzer import analyze

    term_id = {t: i for i, t in enumerate(vocab)}
    out = []
    for text in texts:
        ids = [term_id[t] for t in dict.fromkeys(analyze(text, min_len, max_len)) if t in term_id]
        out.append([t for t in ids if not generic[t]])
    return out


def search_pipeline(queries, texts, k, *, embeddings, basis, renormalize, vocab, doc_terms, doc_tf, doc_len,
                    generic, beta=1.0, side="bm25", candidates=300, lexical_candidates=0, fusion="eq15",
                    weight=1.0, rrf_k=60.0, k1=1.2, b=0.75, min_len=2, max_len=40, namedesc=None,
                    lexical_evidence="masked"):
    """The whole SkillSight search, slowly, from the stored raw arrays (METHOD.md step by step).

    doc_terms: list of sets of term ids; doc_tf: list of dicts term id -> tf; vocab: list of terms;
    generic: bool mask T_g; namedesc: the name + description vectors of the ``text+namedesc``
    document vector (a document's dense score is then the mean of its two background-removed
    cosines) or None. lexical_evidence: ``all`` = BM25 scores every known task token but the
    stop-words (generic ones too), ``masked`` = only Q' (LEC always scores Q'; Q' = known tokens,
    neither generic nor stop-words).
    Background removal, the statistics (idf, LEC weights, BM25 idf and mean
    length) and every stage are recomputed here; nothing of the package runs but the tokenizer.
    Returns (ids, scores) as a search does: int64 / float (n, k), -1 / -inf padding.
    """
    n = len(doc_terms)
    q = np.atleast_2d(np.asarray(queries, np.float64))
    d_perp = project_out_background(embeddings, basis, renormalize) if len(basis) or renormalize \
        else np.asarray(embeddings, np.float64)
    if namedesc is not None:
        nd_perp = project_out_background(namedesc, basis, renormalize) if len(basis) or renormalize \
            else np.asarray(namedesc, np.float64)
        d_perp = (d_perp + nd_perp) / 2
    q_perp = project_out_background(q, basis, renormalize) if len(basis) or renormalize else q
    df = np.zeros(len(vocab))
    for s in doc_terms:
        for t in s:
            df[t] += 1
    idf = np.log((n + 1) / (df + 1)) + 1
    lec_w = idf * (1 - df / n) ** beta if n else idf
    bm25_idf = np.log(1 + (n - df + 0.5) / (df + 0.5))
    avgdl = float(np.mean(doc_len)) if n else 1.0
    avgdl = avgdl if avgdl > 0 else 1.0
    # stop-words (the package's written list, data not logic) never count, in Q' or in "all"
    stop = np.array([t in STOPWORDS for t in vocab], bool)
    evidence = evidence_terms(texts, vocab, np.asarray(generic, bool) | stop, min_len, max_len)
    out_ids = np.full((len(texts), k), -1, np.int64)
    out_scores = np.full((len(texts), k), -np.inf)
    if n == 0:
        return out_ids, out_scores
    depth = min(n, max(candidates, k))
    cand, _ = dense_topk(q_perp, d_perp, depth)
    if lexical_candidates:
        lex_all = score_lexical_all(evidence, doc_terms, lec_w)
        merged = []
        for i in range(len(texts)):
            order = np.lexsort((np.arange(n), -lex_all[i]))[: min(n, lexical_candidates)]
            extra = [int(j) for j in order if lex_all[i, j] > 0 and j not in set(cand[i].tolist())]
            merged.append(cand[i].tolist() + extra)
        width = max(len(m) for m in merged)
        cand = np.array([m + [-1] * (width - len(m)) for m in merged], np.int64)
    s_dense = np.where(cand >= 0, np.einsum("id,ikd->ik", q_perp, d_perp[np.maximum(cand, 0)]), -np.inf)
    if side == "bm25":
        scored = (evidence_terms(texts, vocab, stop, min_len, max_len) if lexical_evidence == "all"
                  else evidence)
        s_lex = score_bm25_candidates(cand, scored, doc_tf, doc_len, bm25_idf, k1, b, avgdl)
    else:
        s_lex = score_lexical_candidates(cand, evidence, doc_terms, lec_w)
    ids, scores, _ = fuse_topk(cand, s_dense, s_lex, k, mode=fusion, weight=weight, rrf_k=rrf_k)
    return ids, scores


def select_top(scores, k):
    """Ids of the k best scores (higher first, ties by ascending id, NaN never), in ascending id order."""
    s = np.asarray(scores, dtype=np.float64)
    valid = np.flatnonzero(~np.isnan(s))
    return np.sort(valid[np.lexsort((valid, -s[valid]))][:k])


def int8_topk_rescored(queries, codes, scales, qcodes, qscales, docs, k, oversample):
    """The int8 scan's contract: the ``oversample * k`` best documents by s_q s_j (c_q · c_j) (ties by
    ascending id) survive, and their exact inner products decide the top k (ties by ascending id)."""
    q = np.atleast_2d(np.asarray(queries, dtype=np.float64))
    n_docs = codes.shape[0]
    kk = min(max(k, oversample * k), max(n_docs, 1))
    ids = np.full((q.shape[0], k), -1, np.int64)
    out = np.full((q.shape[0], k), -np.inf)
    for i in range(q.shape[0]):
        dots = codes.astype(np.int64) @ qcodes[i].astype(np.int64)
        approx = dots * (np.asarray(scales, np.float64) * float(qscales[i]))
        surv = select_top(approx, kk)
        exact = np.asarray(docs, np.float64)[surv] @ q[i]
        top = np.lexsort((surv, -exact))[:k]
        ids[i, : top.size] = surv[top]
        out[i, : top.size] = exact[top]
    return ids, out


def sign_bits(x):
    """Sign bits of each row packed little-endian into uint64 words: bit b of word w is x[:, 64 w + b] > 0."""
    x = np.atleast_2d(np.asarray(x))
    d = x.shape[1]
    w = -(-d // 64)
    padded = np.zeros((x.shape[0], 64 * w), bool)
    padded[:, :d] = x > 0
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64).reshape(x.shape[0], w)


def hamming(qbits, bits):
    """Hamming distance of each row of ``bits`` to ``qbits`` (uint64 words), by unpacking the bytes."""
    x = np.bitwise_xor(np.asarray(bits, np.uint64), np.asarray(qbits, np.uint64)[None, :])
    return np.unpackbits(np.ascontiguousarray(x).view(np.uint8), axis=1).sum(axis=1).astype(np.int64)


def binary_topk_rescored(queries, bits, codes, scales, qcodes, qscales, docs, k, oversample, rerank):
    """The binary scan's contract: the rows within the Hamming distance of the ``rerank``-th nearest
    to the query's sign bits (all ties kept) are the int8 scan's rows; among them the
    ``oversample * k`` best by s_q s_j (c_q · c_j) (ties by ascending id) survive, and their exact inner
    products decide the top k (ties by ascending id)."""
    q = np.atleast_2d(np.asarray(queries, dtype=np.float64))
    n_docs = codes.shape[0]
    kk = min(max(k, oversample * k), max(n_docs, 1))
    m = min(max(rerank, kk), max(n_docs, 1))
    ids = np.full((q.shape[0], k), -1, np.int64)
    out = np.full((q.shape[0], k), -np.inf)
    for i in range(q.shape[0]):
        h = hamming(sign_bits(np.asarray(queries, np.float32)[i : i + 1])[0], bits)
        kept = np.flatnonzero(h <= np.sort(h)[m - 1])
        dots = codes[kept].astype(np.int64) @ qcodes[i].astype(np.int64)
        approx = dots * (np.asarray(scales, np.float64)[kept] * float(qscales[i]))
        surv = kept[select_top(approx, kk)]
        exact = np.asarray(docs, np.float64)[surv] @ q[i]
        top = np.lexsort((surv, -exact))[:k]
        ids[i, : top.size] = surv[top]
        out[i, : top.size] = exact[top]
    return ids, out
