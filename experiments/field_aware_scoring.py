"""Does weighting a skill's name and description above its body help, lexically or densely?

    python experiments/field_aware_scoring.py                        # the five datasets in data/
    python experiments/field_aware_scoring.py skillsbench,bfcl

Question. The default indexes one text per skill (name, description, retrieval hints, body). The
name and description are the skill's own summary of what it is for; the body is instructions.
Does scoring them above the body help?

Declared variants (experiments/DECLARATIONS.md, fourth round, rule 3), each one swapped stage of
the default index (Rule 1 decides SBC on the default document vectors, BM25 over the evidence
tokens Q', w = 0.25, K = 300):

(a) ``bm25f`` replaces the lexical stage (``search_vectors(lexical_stage=)``) by Robertson's simple
    BM25F (Robertson, Zaragoza & Taylor 2004) with field weights name 2, description 2, body 1
    ("body" = everything of the indexed text that is not the name or description: hints and body):

        tf~(t, d) = sum_f w_f tf_f(t, d) = tf_text(t, d) + tf_name(t, d) + tf_desc(t, d)
        dl~(d)    = sum_f w_f len_f(d)   = len_text(d) + len_name(d) + len_desc(d)
        score(d)  = sum_{t in Q'} idf(t) tf~ (k1 + 1) / (tf~ + k1 (1 - b + b dl~ / mean dl~))

    (tf_text counts every field once, so adding the name and description counts once more gives
    them weight 2), idf = the index's Lucene BM25 idf ln(1 + (N - df + 0.5)/(df + 0.5)) over the
    whole text, k1 = 1.2, b = 0.75, one length normalisation over the weighted length. With the
    extra name/description counts set to zero this is exactly the index's BM25 stage (checked).
(b) ``namedesc-mean`` replaces the dense candidate stage (``search_vectors(dense_stage=)``): a
    second document vector e_nd = MiniLM(name + "\\n" + description) (encoded once, evaluation cache
    kind ``namedesc``, the same vectors as experiments/namedesc_document_vector.py), background
    removed like every document vector; the dense score is the mean of the two cosines,
    s = (q_perp . d_perp + q_perp . nd_perp) / 2, over the whole corpus, top K by s. The "body
    vector" is the default document vector (its first 256 tokens are mostly body). Rule 1 still
    reads the default document vectors, so the representation change cannot flip it (the flip
    that dropped the vector *mix* in round one).

Selection (declared): fit score (R@10 + nDCG@10)/2 on skillsbench, sra_theoremqa, bfcl; a variant
must be >= the default on all three and strictly higher on the mean; ties within 0.05 keep the
default. metatool and gorilla_hf are reported only.

Result (2026-12-03, about 4 min with the name + description vectors to encode, 1 min cached):

| variant | skillsbench | sra_theoremqa | bfcl | metatool | gorilla_hf | fit mean |
|---|---|---|---|---|---|---:|
| default | 80.5 / 76.8 (78.68) | 81.1 / 65.7 (73.40) | 90.0 / 76.6 (83.33) | 81.0 / 66.5 | 44.1 / 27.4 | 78.47 |
| (a) bm25f | 80.5 / 76.3 (78.40) | 81.0 / 65.7 (73.33) | 90.1 / 76.7 (83.41) | 81.1 / 66.6 | 44.1 / 27.3 | 78.38 |
| (b) namedesc-mean | 82.1 / 77.7 (79.89) | 80.9 / 66.6 (73.75) | 91.2 / 77.4 (84.31) | 81.9 / 67.0 | 44.1 / 28.3 | 79.32 |

(a) FAILS (skillsbench -0.28: nDCG -0.6 [-1.6, +0.0]). (b) PASSES: >= the default on all three fit
sets and +0.85 on the mean; skillsbench R@10 +1.6 [+0.2, +3.7], bfcl R@10 +1.2 [+0.5, +1.9] and
nDCG@10 +0.8 [+0.2, +1.3], sra_theoremqa nDCG@10 +1.0 [+0.1, +1.9] (its R@10 -0.3 [-1.6, +0.9]); on
the confirm sets metatool +0.9 [+0.3, +1.5] R@10 and gorilla_hf +0.9 [-0.1, +1.8] nDCG@10. It has the
highest mean among the passing variants of rules 2 to 4, so it is the default since (``IndexConfig.document_vector``,
``text+namedesc``); the script keeps judging against the single text vector (``BASELINE``).
"""

from __future__ import annotations

import sys
from collections import Counter

import numpy as np
import scipy.sparse as sp
from selection_rule import BASELINE, DEFAULT, Report, context, datasets, top_depth

from skillsight_fast.config import BM25_B, BM25_K1
from skillsight_fast.engine.analyzer import analyze
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import DEPTH


def field_counts(idx, ctx: EvalContext) -> tuple[sp.csc_matrix, np.ndarray]:
    """Extra term counts of the name and description fields (N, V) CSC, and their lengths (N,)."""
    ids = idx.lexical.lexicon.term_ids
    cfg = idx.config
    rows, cols, vals = [], [], []
    lens = np.zeros(len(ctx.dataset.docs), np.float64)
    for i, d in enumerate(ctx.dataset.docs):
        toks = analyze(d.name, cfg.analyzer.min_token_len, cfg.analyzer.max_token_len) + analyze(
            d.description, cfg.analyzer.min_token_len, cfg.analyzer.max_token_len)
        lens[i] = len(toks)
        for t, c in Counter(toks).items():
            j = ids.get(t)
            if j is not None:
                rows.append(i)
                cols.append(j)
                vals.append(c)
    m = sp.csr_matrix((np.asarray(vals, np.float64), (rows, cols)), shape=(len(idx), len(idx.lexical.lexicon.vocab)))
    return m.tocsc(), lens


def bm25f_stage(idx, extra: sp.csc_matrix, extra_len: np.ndarray):
    """Lexical stage (candidates, Q' terms, offsets) -> float32 (n, K): the BM25F above."""
    lex = idx.lexical.lexicon
    rows = np.repeat(np.arange(len(idx)), np.diff(lex.doc_indptr))
    tf = sp.csr_matrix((lex.doc_tf.astype(np.float64), (rows, lex.doc_terms)),
                       shape=extra.shape).tocsc() + extra
    dl = lex.doc_len.astype(np.float64) + extra_len
    idf = idx.lexical.bm25[0].astype(np.float64)
    norm = BM25_K1 * (1 - BM25_B + BM25_B * dl / dl.mean())

    def stage(cand: np.ndarray, terms: np.ndarray, ptr: np.ndarray) -> np.ndarray:
        out = np.zeros(cand.shape, np.float32)
        for i in range(cand.shape[0]):
            toks = terms[ptr[i] : ptr[i + 1]]
            keep = cand[i] >= 0
            c = cand[i][keep]
            if toks.size == 0 or c.size == 0:
                continue
            m = tf[:, toks][c].toarray()
            out[i, keep] = ((m * (BM25_K1 + 1) / (m + norm[c][:, None])) * idf[toks]).sum(1)
        return out

    return stage


def mean_cosine_stage(idx, nd: np.ndarray):
    """Dense stage (q_perp, depth) -> (ids, s): top depth by the mean of the two cosines."""
    d_perp = idx.dense.embeddings_perp
    nd_perp = idx.remove_background(nd)  # the same projection as every vector of the index

    def stage(q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        s = 0.5 * (q_perp @ d_perp.T + q_perp @ nd_perp.T)
        return top_depth(s, depth)

    return stage


def main() -> None:
    report = Report()
    for name in datasets(sys.argv):
        ctx = context(name)
        ds = ctx.dataset
        idx = ctx.index(BASELINE)
        report.add(name, DEFAULT, ctx.search(idx), ds.gold)
        extra, extra_len = field_counts(idx, ctx)
        # reference check: with no extra counts the BM25F stage is the index's BM25 stage
        cand, _ = idx.dense_candidates(idx.remove_background(ctx.query_emb[:50]), 300)
        t, p = idx.evidence_tokens(ds.query_texts[:50])
        zero = bm25f_stage(idx, sp.csc_matrix(extra.shape), np.zeros(len(idx)))(cand, t, p)
        np.testing.assert_allclose(zero, idx.lexical_scores(cand, t, p), rtol=2e-4, atol=1e-4)
        ids = idx.search_vectors(ctx.query_emb, ds.query_texts, DEPTH,
                                 lexical_stage=bm25f_stage(idx, extra, extra_len), explain=False).ids
        report.add(name, "(a) bm25f name/desc 2, body 1", ids, ds.gold)
        nd = ctx.embeddings("namedesc", [f"{d.name}\n{d.description}" for d in ds.docs])
        ids = idx.search_vectors(ctx.query_emb, ds.query_texts, DEPTH,
                                 dense_stage=mean_cosine_stage(idx, nd), explain=False).ids
        report.add(name, "(b) mean cosine body + name/desc", ids, ds.gold)
    print()
    print(report.table())


if __name__ == "__main__":
    main()
