"""Slow, obviously correct NumPy versions of every kernel. Never imported by the package."""

from __future__ import annotations

import numpy as np

from skillsight_fast.engine.lexicon import STOPWORDS


def project_out_background(vectors, basis, renormalize=False):
    v = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    b = np.asarray(basis, dtype=np.float64).reshape(-1, v.shape[1])
    out = v - (v @ b.T) @ b
    if renormalize:
        n = np.linalg.norm(out, axis=1, keepdims=True)
        out = np.where(n > 1e-6, out / np.where(n > 1e-6, n, 1), 0)
    return out


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
    q = np.atleast_2d(np.asarray(queries, dtype=np.float64))
    s = q @ np.asarray(docs, dtype=np.float64).T if len(docs) else np.zeros((q.shape[0], 0))
    res = [topk_ref(row, k) for row in s]
    return np.array([r[0] for r in res]).reshape(q.shape[0], k), np.array([r[1] for r in res]).reshape(q.shape[0], k)


def lexical_coverage(query_terms, doc_terms, weights):
    """Σ_{t∈Q'∩d} w(t) / Σ_{t∈Q'} w(t) for one query (list of unique ids) and one doc (set of ids)."""
    total = sum(float(weights[t]) for t in query_terms)
    if total <= 0:
        return 0.0
    return sum(float(weights[t]) for t in query_terms if t in doc_terms) / total


def score_lexical_candidates(candidates, queries, docs, weights):
    """queries: list of lists of term ids; docs: list of sets of term ids."""
    out = np.zeros(candidates.shape)
    for i, row in enumerate(candidates):
        for c, d in enumerate(row):
            if d >= 0:
                out[i, c] = lexical_coverage(queries[i], docs[d], weights)
    return out


def bm25(query_terms, doc_tf, doc_len, idf, k1=1.2, b=0.75, avgdl=1.0):
    """Σ_{t∈Q∩d} idf(t)·tf·(k1 + 1) / (tf + k1·(1 − b + b·|d|/avgdl)); doc_tf: dict term -> tf."""
    norm = k1 * (1.0 - b + b * float(doc_len) / avgdl)
    out = 0.0
    for t in query_terms:
        tf = float(doc_tf.get(t, 0))
        if tf > 0:
            out += float(idf[t]) * tf * (k1 + 1.0) / (tf + norm)
    return out


def score_bm25_candidates(candidates, queries, docs_tf, doc_len, idf, k1=1.2, b=0.75, avgdl=None):
    """queries: list of lists of term ids; docs_tf: list of dicts term id -> tf; doc_len: lengths."""
    if avgdl is None:
        avgdl = float(np.mean(doc_len)) if len(doc_len) else 1.0
    avgdl = avgdl if avgdl > 0 else 1.0
    out = np.zeros(candidates.shape)
    for i, row in enumerate(candidates):
        for c, d in enumerate(row):
            if d >= 0:
                out[i, c] = bm25(queries[i], docs_tf[d], doc_len[d], idf, k1, b, avgdl)
    return out


def score_lexical_all(queries, docs, weights):
    return np.array([[lexical_coverage(q, d, weights) for d in docs] for q in queries]).reshape(len(queries), len(docs))


def fuse(candidates, s_dense, s_lex, mode="eq15", weight=1.0, rrf_k=60.0):
    """Fused score per candidate (NaN on padding), straight from METHOD.md."""
    out = np.full(candidates.shape, np.nan)
    for i in range(candidates.shape[0]):
        valid = candidates[i] >= 0
        if not valid.any():
            continue
        x = s_dense[i, valid].astype(np.float64)
        y = s_lex[i, valid].astype(np.float64)
        if mode == "eq15":
            if y.std() > 0:
                scale = x.std() if x.std() > 0 else 1.0
                f = x + weight * np.maximum((y - y.mean()) / y.std(), 0) * scale
            else:
                f = x
        elif mode == "convex":
            nd = (x - x.min()) / (x.max() - x.min()) if x.max() > x.min() else np.zeros_like(x)
            nl = (y - y.min()) / (y.max() - y.min()) if y.max() > y.min() else np.zeros_like(y)
            f = (1 - weight) * nd + weight * nl
        elif mode == "rrf":
            pos = np.arange(x.size)
            rd = np.empty(x.size)
            rd[np.lexsort((pos, -x))] = np.arange(x.size)
            rl = np.empty(y.size)
            rl[np.lexsort((pos, -y))] = np.arange(y.size)
            f = 1 / (rrf_k + 1 + rd) + 1 / (rrf_k + 1 + rl)
        elif mode == "dense":
            f = x
        else:
            f = y
        out[i, valid] = f
    return out


def fuse_topk(candidates, s_dense, s_lex, k, **kw):
    fused = fuse(candidates, s_dense, s_lex, **kw)
    pos = np.full((candidates.shape[0], k), -1, dtype=np.int64)
    sc = np.full((candidates.shape[0], k), -np.inf)
    for i in range(candidates.shape[0]):
        p, s = topk_ref(np.where(np.isnan(fused[i]), -np.inf, fused[i]), k)
        pos[i], sc[i] = p, s
    ids = np.where(pos >= 0, np.take_along_axis(candidates, np.maximum(pos, 0), 1), -1)
    return ids, sc, pos


def token_directions(terms, docs_of_term, docs):
    """docs_of_term: list of row lists per term id."""
    d = np.asarray(docs, dtype=np.float64)
    return np.array([d[docs_of_term[t]].mean(0) if len(docs_of_term[t]) else np.zeros(d.shape[1])
                     for t in terms]).reshape(len(terms), d.shape[1])


def transpose_csr(indptr, indices, n_cols):
    """Dense 0/1 matrix, transposed, read back row by row."""
    n_rows = len(indptr) - 1
    dense = np.zeros((n_rows, n_cols), bool)
    for j in range(n_rows):
        dense[j, indices[indptr[j]:indptr[j + 1]]] = True
    ptr = [0]
    rows = []
    for c in range(n_cols):
        rows.extend(np.flatnonzero(dense[:, c]).tolist())
        ptr.append(len(rows))
    return np.array(ptr, np.int64), np.array(rows, np.int32)


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
        scored = evidence_terms(texts, vocab, stop, min_len, max_len) if lexical_evidence == "all" else evidence
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
