"""Long inputs: lexical scoring of long queries (many binary searches, prefetching past the
end of short candidate lists) and the batched dense tiles (partial tiles and blocks)."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.kernels import dense_topk, n_threads, score_lexical_candidates, single_thread


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


@pytest.mark.parametrize("q_len", [12, 40, 150])
def test_lexical_candidates_long_queries_match_reference(rng, q_len):
    vocab = 300
    sets = [set(rng.choice(vocab, size=rng.integers(0, 120), replace=False).tolist()) for _ in range(60)]
    lex = Lexicon.from_token_sets([{f"t{t}" for t in s} for s in sets])
    doc_ids = [{lex.term_ids[f"t{t}"] for t in s} for s in sets]
    v = len(lex.vocab)
    w = rng.random(v).astype(np.float32)
    queries = [rng.choice(v, size=min(q_len, v), replace=False).tolist() for _ in range(5)]
    queries[2] = []
    ptr = np.zeros(6, np.int64)
    ptr[1:] = np.cumsum([len(q) for q in queries])
    flat = np.array([t for q in queries for t in q], np.int32)
    cand = np.stack([rng.permutation(np.arange(-5, 60))[:50] for _ in range(5)])
    cand = np.where(cand < 0, -1, cand).astype(np.int64)
    out = score_lexical_candidates(cand, flat, ptr, lex.doc_indptr, lex.doc_terms, w)
    np.testing.assert_allclose(out, ref.score_lexical_candidates(cand, queries, doc_ids, w), atol=1e-5)


@pytest.mark.parametrize("n_queries,n_docs", [(1, 1100), (3, 1030), (9, 517), (17, 1200)])
@pytest.mark.parametrize("threads", [1, 2])
def test_dense_topk_tiles_match_reference(rng, n_queries, n_docs, threads):
    q = rng.standard_normal((n_queries, 16)).astype(np.float32)
    docs = rng.standard_normal((n_docs, 16)).astype(np.float32)
    docs[7] = docs[3]  # an exact tie
    with n_threads(threads):
        ids, scores = dense_topk(q, docs, 25)
    truth = q.astype(np.float64) @ docs.T.astype(np.float64)
    for i in range(n_queries):
        _ref_ids, ref_scores = ref.topk_ref(truth[i], 25)
        np.testing.assert_allclose(scores[i], ref_scores, atol=1e-4)
        np.testing.assert_allclose(truth[i, ids[i]], scores[i], atol=1e-4)
        assert len(set(ids[i].tolist())) == 25


def test_n_threads_restores_the_count():
    import numba

    before = numba.get_num_threads()
    with pytest.raises(RuntimeError), single_thread():
        assert numba.get_num_threads() == 1
        raise RuntimeError
    assert numba.get_num_threads() == before
    with n_threads(None) as t:
        assert t == before
