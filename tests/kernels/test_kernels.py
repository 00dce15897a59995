"""Every kernel against its NumPy twin (skillsight_fast/kernels/twins.py, through tests/support/reference.py),
on random and edge inputs."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.kernels import (
    dense_topk,
    fuse_topk,
    merge_candidates,
    project_out_background,
    score_bm25_candidates,
    score_lexical_all,
    score_lexical_candidates,
    token_direction_sums,
    token_directions,
    transpose_csr,
)

ATOL = 1e-4


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


def unit(x):
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(n > 0, n, 1)).astype(np.float32)


def orthonormal_rows(rng, r, d):
    if r == 0:
        return np.zeros((0, d), np.float32)
    q, _ = np.linalg.qr(rng.standard_normal((d, r)))
    return q.T.astype(np.float32)


def assert_topk(ids, scores, score_matrix, k):
    """ids/scores are a correct top-k of score_matrix (float64 truth), ties in any order."""
    n, _n_docs = score_matrix.shape
    assert ids.shape == (n, k) and scores.shape == (n, k)
    assert ids.dtype == np.int64 and scores.dtype == np.float32
    for i in range(n):
        ref_ids, ref_scores = ref.topk_ref(score_matrix[i], k)
        np.testing.assert_allclose(scores[i], ref_scores, atol=ATOL, rtol=0)
        valid = ids[i] >= 0
        assert (valid == (ref_ids >= 0)).all()
        assert len(set(ids[i][valid].tolist())) == valid.sum()
        np.testing.assert_allclose(score_matrix[i, ids[i][valid]], scores[i][valid], atol=ATOL, rtol=0)
        assert np.all(np.diff(scores[i][valid]) <= ATOL)  # best first


# ---------------------------------------------------------------- projection
@pytest.mark.parametrize("n,d,r", [(1, 8, 1), (5, 16, 3), (7, 32, 0), (0, 8, 2), (3, 8, 8)])
@pytest.mark.parametrize("renormalize", [False, True])
def test_projection_matches_reference(rng, n, d, r, renormalize):
    v = rng.standard_normal((n, d)).astype(np.float32)
    b = orthonormal_rows(rng, r, d)
    out = project_out_background(v, b, renormalize=renormalize)
    assert out.shape == (n, d) and out.dtype == np.float32
    np.testing.assert_allclose(out, ref.project_out_background(v, b, renormalize), atol=1e-5)


def test_projection_zero_vector_stays_zero_and_is_idempotent(rng):
    b = orthonormal_rows(rng, 3, 12)
    v = np.zeros((2, 12), np.float32)
    v[1] = rng.standard_normal(12)
    out = project_out_background(v, b, renormalize=True)
    assert np.all(out[0] == 0) and np.all(np.isfinite(out))
    again = project_out_background(out, b)
    np.testing.assert_allclose(again, out, atol=1e-5)
    np.testing.assert_allclose(out @ b.T, 0, atol=1e-5)


def test_projection_accepts_1d_and_readonly(rng):
    b = orthonormal_rows(rng, 2, 6)
    v = rng.standard_normal(6).astype(np.float32)
    v.setflags(write=False)
    b.setflags(write=False)
    out = project_out_background(v, b)
    assert out.shape == (1, 6)
    np.testing.assert_allclose(out[0], ref.project_out_background(v, b)[0], atol=1e-5)


def test_projection_rejects_wrong_basis_shape(rng):
    with pytest.raises(ValueError):
        project_out_background(np.ones((1, 4), np.float32), np.ones((2, 5), np.float32))


# ---------------------------------------------------------------- dense top-k
@pytest.mark.parametrize("n_docs", [1, 10, 257])
@pytest.mark.parametrize("k_mode", ["one", "less", "equal", "more"])
def test_dense_topk_matches_reference(rng, n_docs, k_mode):
    k = {"one": 1, "less": max(1, n_docs // 3), "equal": n_docs, "more": n_docs + 5}[k_mode]
    q = unit(rng.standard_normal((4, 24)))
    docs = unit(rng.standard_normal((n_docs, 24)))
    ids, scores = dense_topk(q, docs, k)
    assert_topk(ids, scores, q.astype(np.float64) @ docs.T.astype(np.float64), k)


def test_dense_topk_padding_when_k_exceeds_n(rng):
    ids, scores = dense_topk(unit(rng.standard_normal((2, 8))), unit(rng.standard_normal((3, 8))), 7)
    assert (ids[:, 3:] == -1).all() and np.isneginf(scores[:, 3:]).all()
    assert (ids[:, :3] >= 0).all()


def test_dense_topk_ties_order_by_id():
    docs = np.array([[1, 0], [0, 1], [1, 0], [1, 0], [0, 0]], np.float32)
    ids, _scores = dense_topk(np.array([[1, 0]], np.float32), docs, 4)
    assert ids[0].tolist() == [0, 2, 3, 1]
    ids, _ = dense_topk(np.array([[1, 0]], np.float32), docs, 2)
    assert ids[0].tolist() == [0, 2]


def test_dense_topk_zero_vectors(rng):
    docs = unit(rng.standard_normal((6, 5)))
    ids, scores = dense_topk(np.zeros((1, 5), np.float32), docs, 3)
    assert (scores == 0).all() and ids[0].tolist() == [0, 1, 2]
    docs[2] = 0
    q = unit(rng.standard_normal((1, 5)))
    ids, scores = dense_topk(q, docs, 6)
    assert_topk(ids, scores, q.astype(np.float64) @ docs.T.astype(np.float64), 6)


def test_dense_topk_nan_documents_never_returned(rng):
    docs = unit(rng.standard_normal((5, 4)))
    docs[1] = np.nan
    ids, _ = dense_topk(unit(rng.standard_normal((1, 4))), docs, 5)
    assert 1 not in ids[0].tolist() and ids[0, -1] == -1


def test_dense_topk_empty_inputs(rng):
    ids, scores = dense_topk(np.zeros((0, 4), np.float32), unit(rng.standard_normal((3, 4))), 2)
    assert ids.shape == (0, 2)
    ids, scores = dense_topk(unit(rng.standard_normal((2, 4))), np.zeros((0, 4), np.float32), 2)
    assert (ids == -1).all() and np.isneginf(scores).all()
    with pytest.raises(ValueError):
        dense_topk(np.zeros((1, 4), np.float32), np.zeros((3, 4), np.float32), 0)
    with pytest.raises(ValueError):
        dense_topk(np.zeros((1, 4), np.float32), np.zeros((3, 5), np.float32), 1)


def test_dense_topk_readonly_memmap(rng, tmp_path):
    docs = unit(rng.standard_normal((50, 16)))
    np.save(tmp_path / "d.npy", docs)
    mm = np.load(tmp_path / "d.npy", mmap_mode="r")
    assert not mm.flags.writeable
    q = unit(rng.standard_normal((3, 16)))
    ids, scores = dense_topk(q, mm, 10)
    assert_topk(ids, scores, q.astype(np.float64) @ docs.T.astype(np.float64), 10)


def test_dense_topk_float64_and_noncontiguous_inputs(rng):
    docs = rng.standard_normal((20, 8))[:, ::1][::2]
    q = rng.standard_normal((2, 16))[:, ::2]
    ids, scores = dense_topk(q, docs, 4)
    assert_topk(ids, scores, q @ docs.T, 4)


# ---------------------------------------------------------------- lexical
def random_lexicon(rng, n_docs, vocab):
    sets = [set(rng.choice(vocab, size=rng.integers(0, vocab + 1), replace=False).tolist())
            for _ in range(n_docs)]
    lex = Lexicon.from_token_sets([{f"t{t}" for t in s} for s in sets])
    ids = [{lex.term_ids[f"t{t}"] for t in s} for s in sets]
    return lex, ids


def random_queries(rng, n, vocab_size, empty_every=3):
    queries = []
    for i in range(n):
        size = 0 if i % empty_every == empty_every - 1 else rng.integers(1, min(6, vocab_size) + 1)
        queries.append(rng.choice(vocab_size, size=size, replace=False).tolist())
    ptr = np.zeros(n + 1, np.int64)
    ptr[1:] = np.cumsum([len(q) for q in queries])
    flat = np.array([t for q in queries for t in q], np.int32)
    return queries, flat, ptr


@pytest.mark.parametrize("n_docs,vocab,kc", [(12, 9, 5), (40, 30, 40), (5, 3, 8)])
def test_lexical_candidates_matches_reference(rng, n_docs, vocab, kc):
    lex, doc_ids = random_lexicon(rng, n_docs, vocab)
    v = len(lex.vocab)
    if v == 0:
        pytest.skip("empty vocabulary drawn")
    w = rng.random(v).astype(np.float32)
    queries, flat, ptr = random_queries(rng, 6, v)
    cand = np.stack([rng.permutation(np.arange(-3, n_docs))[:kc] if kc <= n_docs + 3 else
                     np.concatenate([np.arange(n_docs), -np.ones(kc - n_docs, np.int64)]) for _ in range(6)])
    cand = np.where(cand < 0, -1, cand).astype(np.int64)
    out = score_lexical_candidates(cand, flat, ptr, lex.doc_indptr, lex.doc_terms, w)
    np.testing.assert_allclose(out, ref.score_lexical_candidates(cand, queries, doc_ids, w), atol=1e-6)
    all_scores = score_lexical_all(flat, ptr, lex.post_indptr, lex.post_docs, w, n_docs)
    np.testing.assert_allclose(all_scores, ref.score_lexical_all(queries, doc_ids, w), atol=1e-6)


def test_lexical_no_evidence_tokens_scores_zero(rng):
    lex, _ = random_lexicon(rng, 5, 4)
    w = np.ones(len(lex.vocab), np.float32)
    ptr = np.zeros(3, np.int64)
    cand = np.arange(10, dtype=np.int64).reshape(2, 5) % 5
    none = np.zeros(0, np.int32)
    assert (score_lexical_candidates(cand, none, ptr, lex.doc_indptr, lex.doc_terms, w) == 0).all()
    assert (score_lexical_all(np.zeros(0, np.int32), ptr, lex.post_indptr, lex.post_docs, w, 5) == 0).all()


def test_lexical_zero_weights_and_readonly(rng, tmp_path):
    lex, doc_ids = random_lexicon(rng, 10, 6)
    w = np.zeros(len(lex.vocab), np.float32)
    queries, flat, ptr = random_queries(rng, 3, len(lex.vocab), empty_every=10)
    np.save(tmp_path / "t.npy", lex.doc_terms)
    terms = np.load(tmp_path / "t.npy", mmap_mode="r")
    cand = np.tile(np.arange(10, dtype=np.int64), (3, 1))
    assert (score_lexical_candidates(cand, flat, ptr, lex.doc_indptr, terms, w) == 0).all()
    w[:] = 1
    out = score_lexical_candidates(cand, flat, ptr, lex.doc_indptr, terms, w)
    np.testing.assert_allclose(out, ref.score_lexical_candidates(cand, queries, doc_ids, w), atol=1e-6)


def test_lexical_rejects_bad_csr():
    w = np.ones(3, np.float32)
    with pytest.raises(ValueError):
        score_lexical_candidates(np.zeros((1, 1), np.int64), np.array([5], np.int32), np.array([0, 1]),
                                 np.array([0, 0]), np.zeros(0, np.int32), w)
    with pytest.raises(ValueError):
        score_lexical_candidates(np.zeros((1, 1), np.int64), np.array([1], np.int32), np.array([0, 2]),
                                 np.array([0, 0]), np.zeros(0, np.int32), w)


# ---------------------------------------------------------------- BM25
def random_tf_lexicon(rng, n_docs, vocab, max_tf=5):
    """A lexicon with term frequencies; returns it and each document's {term id: tf}."""
    counts = []
    for _ in range(n_docs):
        terms = rng.choice(vocab, size=rng.integers(0, vocab + 1), replace=False)
        counts.append({f"t{t}": int(rng.integers(1, max_tf + 1)) for t in terms})
    lex = Lexicon.from_token_counts(counts)
    docs_tf = [{lex.term_ids[t]: f for t, f in c.items()} for c in counts]
    return lex, docs_tf


def random_candidates(rng, n, n_docs, kc):
    cand = np.stack([rng.permutation(np.arange(-3, n_docs))[:kc] if kc <= n_docs + 3 else
                     np.concatenate([np.arange(n_docs), -np.ones(kc - n_docs, np.int64)]) for _ in range(n)])
    return np.where(cand < 0, -1, cand).astype(np.int64)


@pytest.mark.parametrize("n_docs,vocab,kc", [(12, 9, 5), (40, 30, 40), (5, 3, 8), (4, 5, 10)])
def test_bm25_candidates_matches_reference(rng, n_docs, vocab, kc):
    lex, docs_tf = random_tf_lexicon(rng, n_docs, vocab)
    v = len(lex.vocab)
    if v == 0:
        pytest.skip("empty vocabulary drawn")
    idf = (rng.random(v) * 3).astype(np.float32)
    queries, flat, ptr = random_queries(rng, 6, v)
    cand = random_candidates(rng, 6, n_docs, kc)  # kc > n_docs pads with -1
    out = score_bm25_candidates(cand, flat, ptr, lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len, idf)
    expect = ref.score_bm25_candidates(cand, queries, docs_tf, lex.doc_len, idf)
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6)
    assert out.dtype == np.float32 and (out[cand < 0] == 0).all()
    for k1, b, avgdl in ((0.0, 0.75, None), (2.0, 0.0, None), (1.2, 1.0, 3.0)):
        out = score_bm25_candidates(cand, flat, ptr, lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len,
                                    idf, k1=k1, b=b, avgdl=avgdl)
        expect = ref.score_bm25_candidates(cand, queries, docs_tf, lex.doc_len, idf, k1, b, avgdl)
        np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6)


def test_bm25_no_evidence_tokens_zero_idf_and_empty(rng):
    lex, _ = random_tf_lexicon(rng, 5, 4)
    idf = np.ones(len(lex.vocab), np.float32)
    ptr = np.zeros(3, np.int64)
    cand = np.arange(10, dtype=np.int64).reshape(2, 5) % 5
    args = (lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len)
    assert (score_bm25_candidates(cand, np.zeros(0, np.int32), ptr, *args, idf) == 0).all()
    _queries, flat, qptr = random_queries(rng, 2, len(lex.vocab), empty_every=10)
    assert (score_bm25_candidates(cand, flat, qptr, *args, np.zeros_like(idf)) == 0).all()
    assert score_bm25_candidates(np.zeros((2, 0), np.int64), flat, qptr, *args, idf).shape == (2, 0)
    assert score_bm25_candidates(np.zeros((0, 3), np.int64), np.zeros(0, np.int32), np.zeros(1, np.int64),
                                 *args, idf).shape == (0, 3)


def test_bm25_ties_and_monotone_in_tf():
    # two documents of equal length, identical term lists: equal scores; more occurrences score higher
    lex = Lexicon.from_token_counts([{"aa": 1, "bb": 1}, {"aa": 1, "bb": 1}, {"aa": 3, "cc": 1}, {}])
    idf = np.ones(len(lex.vocab), np.float32)
    q = np.array([lex.term_ids["aa"]], np.int32)
    cand = np.array([[0, 1, 2, 3]], np.int64)
    out = score_bm25_candidates(cand, q, np.array([0, 1]), lex.doc_indptr, lex.doc_terms, lex.doc_tf,
                                lex.doc_len, idf, b=0.0)
    assert out[0, 0] == out[0, 1] < out[0, 2] and out[0, 3] == 0
    assert lex.doc_len.tolist() == [2, 2, 4, 0]


def test_bm25_readonly_memmaps_and_float64_inputs(rng, tmp_path):
    lex, docs_tf = random_tf_lexicon(rng, 10, 6)
    idf = rng.random(len(lex.vocab))  # float64: converted by the wrapper
    queries, flat, ptr = random_queries(rng, 3, len(lex.vocab), empty_every=10)
    arrays = {}
    for name in ("doc_indptr", "doc_terms", "doc_tf", "doc_len"):
        np.save(tmp_path / f"{name}.npy", getattr(lex, name))
        arrays[name] = np.load(tmp_path / f"{name}.npy", mmap_mode="r")
    cand = np.tile(np.arange(10, dtype=np.int64), (3, 1))
    out = score_bm25_candidates(cand, flat, ptr, arrays["doc_indptr"], arrays["doc_terms"], arrays["doc_tf"],
                                arrays["doc_len"], idf)
    np.testing.assert_allclose(out, ref.score_bm25_candidates(cand, queries, docs_tf, lex.doc_len, idf),
                               rtol=1e-5, atol=1e-6)


def test_bm25_rejects_bad_inputs():
    lex = Lexicon.from_token_counts([{"aa": 2}, {"bb": 1}])
    idf = np.ones(2, np.float32)
    q, p = np.array([0], np.int32), np.array([0, 1], np.int64)
    cand = np.zeros((1, 1), np.int64)
    with pytest.raises(ValueError, match="doc_tf"):
        score_bm25_candidates(cand, q, p, lex.doc_indptr, lex.doc_terms, lex.doc_tf[:1], lex.doc_len, idf)
    with pytest.raises(ValueError, match="doc_len"):
        score_bm25_candidates(cand, q, p, lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len[:1], idf)
    with pytest.raises(ValueError, match="candidate rows"):
        score_bm25_candidates(cand + 2, q, p, lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len, idf)
    with pytest.raises(ValueError, match="query term ids"):
        score_bm25_candidates(cand, q + 5, p, lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len, idf)
    with pytest.raises(ValueError, match="k1"):
        score_bm25_candidates(cand, q, p, lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len, idf, b=2.0)


def test_lexicon_term_frequencies_align_with_terms():
    lex = Lexicon.build(["Merge PDF pdf files; merge again", "", "x yy yy yy"])
    for row, text_counts in enumerate([{"merge": 2, "pdf": 2, "files": 1, "again": 1}, {}, {"yy": 3}]):
        terms = lex.doc_term_ids(row)
        tf = lex.doc_tf[lex.doc_indptr[row]:lex.doc_indptr[row + 1]]
        assert {lex.vocab[t]: int(f) for t, f in zip(terms, tf)} == text_counts
    assert lex.doc_len.tolist() == [6, 0, 3] and lex.doc_tf.dtype == np.uint16
    big = Lexicon.from_token_counts([{"aa": 70_000}])
    assert big.doc_tf.tolist() == [65535] and big.doc_len.tolist() == [70_000]


# ---------------------------------------------------------------- fusion
@pytest.mark.parametrize("mode", ["eq15", "convex", "rrf", "dense", "lexical"])
@pytest.mark.parametrize("k", [1, 4, 12, 30])
def test_fuse_topk_matches_reference(rng, mode, k):
    n, kc = 5, 12
    cand = np.stack([rng.permutation(100)[:kc] for _ in range(n)]).astype(np.int64)
    cand[1, 8:] = -1  # padding
    cand[2, :] = -1  # nothing at all
    s_dense = rng.standard_normal((n, kc)).astype(np.float32)
    s_lex = rng.random((n, kc)).astype(np.float32)
    s_lex[3] = 0.25  # constant lexical: no lexical contribution in eq15
    s_dense[4] = 0.5  # constant dense
    ids, scores, pos = fuse_topk(cand, s_dense, s_lex, k, mode=mode, weight=0.4)
    _rids, rscores, rpos = ref.fuse_topk(cand, s_dense, s_lex, k, mode=mode, weight=0.4)
    fused = ref.fuse(cand, s_dense, s_lex, mode=mode, weight=0.4)
    np.testing.assert_allclose(scores, rscores, atol=ATOL, rtol=0)
    for i in range(n):
        valid = pos[i] >= 0
        assert (valid == (rpos[i] >= 0)).all()
        np.testing.assert_allclose(fused[i, pos[i][valid]], scores[i][valid], atol=ATOL)
        assert (ids[i][valid] == cand[i, pos[i][valid]]).all()
        assert (ids[i][~valid] == -1).all()


def test_fuse_topk_eq15_lexical_only_adds_above_mean():
    cand = np.arange(4, dtype=np.int64)[None]
    s_dense = np.array([[0.9, 0.8, 0.7, 0.6]], np.float32)
    s_lex = np.array([[0.0, 0.0, 0.0, 1.0]], np.float32)
    ids, scores, _ = fuse_topk(cand, s_dense, s_lex, 4)
    # only doc 3 is above the lexical mean: it gains z * std(dense) = sqrt(3) * sqrt(0.0125)
    gain = np.sqrt(3) * np.sqrt(0.0125)
    assert ids[0].tolist() == [0, 1, 3, 2]
    np.testing.assert_allclose(scores[0], [0.9, 0.8, 0.6 + gain, 0.7], atol=1e-6)


def test_fuse_topk_ties_keep_dense_order():
    cand = np.array([[7, 3, 5]], np.int64)
    s = np.array([[0.5, 0.5, 0.5]], np.float32)
    ids, _, pos = fuse_topk(cand, s, np.zeros_like(s), 3)
    assert ids[0].tolist() == [7, 3, 5] and pos[0].tolist() == [0, 1, 2]


def test_fuse_topk_rejects_bad_arguments():
    c = np.zeros((1, 2), np.int64)
    s = np.zeros((1, 2), np.float32)
    with pytest.raises(ValueError):
        fuse_topk(c, s, s, 0)
    with pytest.raises(ValueError):
        fuse_topk(c, s, s, 1, mode="nope")
    with pytest.raises(ValueError):
        fuse_topk(c, s, np.zeros((1, 3), np.float32), 1)


# ---------------------------------------------------------------- merge, token directions
def test_merge_candidates(rng):
    a = np.array([[3, 1, -1], [0, 2, 4]], np.int64)
    b = np.array([[1, 5], [-1, 9]], np.int64)
    out = merge_candidates(a, b)
    assert out.tolist() == [[3, 1, 5, -1, -1], [0, 2, 4, 9, -1]]


def test_token_directions_matches_reference(rng):
    lex, doc_ids = random_lexicon(rng, 30, 12)
    docs = unit(rng.standard_normal((30, 7)))
    docs.setflags(write=False)
    terms = np.arange(len(lex.vocab))
    docs_of_term = [[i for i, s in enumerate(doc_ids) if t in s] for t in terms]
    out = token_directions(terms, lex.post_indptr, lex.post_docs, docs)
    np.testing.assert_allclose(out, ref.token_directions(terms, docs_of_term, docs), atol=1e-5)
    assert token_directions(np.zeros(0, np.int64), lex.post_indptr, lex.post_docs, docs).shape == (0, 7)


@pytest.mark.parametrize("n_docs,vocab", [(30, 12), (1, 1), (0, 3), (50, 40)])
def test_token_direction_sums_match_reference_and_give_the_directions(rng, n_docs, vocab):
    lex, doc_ids = random_lexicon(rng, n_docs, vocab)
    docs = unit(rng.standard_normal((n_docs, 7)))
    docs.setflags(write=False)
    terms = rng.permutation(len(lex.vocab))  # any order, as an update asks for them
    docs_of_term = [[i for i, s in enumerate(doc_ids) if t in s] for t in range(len(lex.vocab))]
    sums, counts = token_direction_sums(terms, lex.post_indptr, lex.post_docs, docs)
    want_sums, want_counts = ref.token_direction_sums(terms, docs_of_term, docs)
    assert sums.dtype == np.float64 and counts.dtype == np.int64
    np.testing.assert_allclose(sums, want_sums, atol=1e-9)
    np.testing.assert_array_equal(counts, want_counts)
    np.testing.assert_array_equal(counts, [len(docs_of_term[t]) for t in terms])
    # g_t = sums / counts, zero for a term no document holds: the directions the build uses
    means = np.divide(sums, counts[:, None], out=np.zeros_like(sums), where=counts[:, None] > 0)
    directions = token_directions(terms, lex.post_indptr, lex.post_docs, docs)
    np.testing.assert_allclose(means, directions, atol=1e-6)
    empty = token_direction_sums(np.zeros(0, np.int64), lex.post_indptr, lex.post_docs, docs)
    assert empty[0].shape == (0, 7) and empty[1].shape == (0,)


def test_merge_candidates_skips_duplicates_within_b():
    a = np.array([[4, -1]], np.int64)
    b = np.array([[7, 4, 7, 2, 2]], np.int64)
    assert merge_candidates(a, b).tolist() == [[4, 7, 2, -1, -1, -1, -1]]


@pytest.mark.parametrize("n_rows,n_cols,density",
                         [(0, 3, 0.5), (1, 1, 1.0), (7, 5, 0.0), (40, 30, 0.2), (13, 200, 0.05)])
def test_transpose_csr_matches_reference(rng, n_rows, n_cols, density):
    dense = rng.random((n_rows, n_cols)) < density
    indptr = np.zeros(n_rows + 1, np.int64)
    np.cumsum(dense.sum(1), out=indptr[1:])
    indices = (np.concatenate([np.flatnonzero(r) for r in dense]).astype(np.int32) if n_rows
               else np.zeros(0, np.int32))
    ptr, rows = transpose_csr(indptr, indices, n_cols)
    ref_ptr, ref_rows = ref.transpose_csr(indptr, indices, n_cols)
    np.testing.assert_array_equal(ptr, ref_ptr)
    np.testing.assert_array_equal(rows, ref_rows)
    assert ptr.dtype == np.int64 and rows.dtype == np.int32
    ptr2, rows2 = transpose_csr(ptr, rows, n_rows)  # twice is the identity
    np.testing.assert_array_equal(ptr2, indptr)
    np.testing.assert_array_equal(rows2, indices)


def test_matched_terms_against_set_intersection():
    from skillsight_fast.kernels import matched_terms

    rng = np.random.default_rng(11)
    n_docs, vocab = 60, 40
    rows = [np.unique(rng.integers(0, vocab, rng.integers(0, 12))).astype(np.int32) for _ in range(n_docs)]
    rows[5] = np.zeros(0, np.int32)  # a document without terms
    indptr = np.zeros(n_docs + 1, np.int64)
    indptr[1:] = np.cumsum([r.size for r in rows])
    doc_terms = np.concatenate(rows)
    queries = [rng.permutation(vocab)[:15].astype(np.int32), np.zeros(0, np.int32),
               rng.permutation(vocab)[:3]]
    q_ptr = np.zeros(len(queries) + 1, np.int64)
    q_ptr[1:] = np.cumsum([q.size for q in queries])
    q_terms = np.concatenate(queries).astype(np.int32)
    hits = rng.integers(0, n_docs, (3, 7))
    hits[0, 2] = 5
    hits[1, :] = rng.integers(0, n_docs, 7)
    hits[2, 5:] = -1  # padding
    ptr, terms = matched_terms(hits, q_terms, q_ptr, indptr, doc_terms)
    assert ptr.shape == (hits.size + 1,) and ptr[0] == 0 and ptr[-1] == terms.size
    for i, q in enumerate(queries):
        for c, j in enumerate(hits[i]):
            want = [t for t in q.tolist() if j >= 0 and t in set(rows[j].tolist())]  # query order
            assert terms[ptr[i * 7 + c] : ptr[i * 7 + c + 1]].tolist() == want
    ptr, terms = matched_terms(np.zeros((0, 3), np.int64), np.zeros(0, np.int32), np.zeros(1, np.int64),
                               indptr, doc_terms)
    assert ptr.tolist() == [0] and terms.size == 0
    with pytest.raises(ValueError):
        matched_terms(np.array([[n_docs]]), q_terms[:2], np.array([0, 2]), indptr, doc_terms)
