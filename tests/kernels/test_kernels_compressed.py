"""The int8 compressed scan against exact NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

from skillsight_fast.kernels.compressed import dense_topk_int8, quantize_int8


def unit(x):
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(n > 0, n, 1)).astype(np.float32)


@pytest.fixture
def rng():
    return np.random.default_rng(7)


def test_quantize_int8_roundtrip(rng):
    docs = unit(rng.standard_normal((20, 16)))
    docs[3] = 0
    codes, scales = quantize_int8(docs)
    assert codes.dtype == np.int8 and scales.dtype == np.float32 and scales[3] == 0
    assert np.abs(codes).max() <= 127
    np.testing.assert_allclose(codes * scales[:, None], docs, atol=scales.max() / 2 + 1e-7)


@pytest.mark.parametrize("n_docs,k", [(1, 1), (50, 5), (300, 20), (30, 40)])
def test_int8_scan_matches_quantised_reference(rng, n_docs, k):
    docs = unit(rng.standard_normal((n_docs, 24)))
    q = unit(rng.standard_normal((3, 24)))
    codes, scales = quantize_int8(docs)
    qc, qs = quantize_int8(q)  # the query is quantised the same way as the documents
    approx = (qc * qs[:, None]).astype(np.float64) @ (codes * scales[:, None]).T.astype(np.float64)
    ids, scores = dense_topk_int8(q, codes, scales, k)
    for i in range(3):
        ref_ids, ref_scores = ref.topk_ref(approx[i], k)
        np.testing.assert_allclose(scores[i], ref_scores, atol=1e-4)
        assert ((ids[i] >= 0) == (ref_ids >= 0)).all()


@pytest.mark.parametrize("n_docs,k", [(1, 1), (200, 10), (30, 40)])
def test_int8_scan_rescored_is_exact_with_full_oversampling(rng, n_docs, k):
    docs = unit(rng.standard_normal((n_docs, 24)))
    q = unit(rng.standard_normal((2, 24)))
    codes, scales = quantize_int8(docs)
    ids, scores = dense_topk_int8(q, codes, scales, k, docs=docs, oversample=max(1, n_docs))
    exact = q.astype(np.float64) @ docs.T.astype(np.float64)
    for i in range(2):
        _ref_ids, ref_scores = ref.topk_ref(exact[i], k)
        np.testing.assert_allclose(scores[i], ref_scores, atol=1e-5)
        valid = ids[i] >= 0
        np.testing.assert_allclose(exact[i, ids[i][valid]], scores[i][valid], atol=1e-5)


def test_int8_scan_integer_dot_products_are_exact(rng):
    """Extreme codes (all ±127, d = 384) neither overflow nor round: the score is s_q s_j (c_q · c_j)."""
    docs = np.sign(rng.standard_normal((600, 384))).astype(np.float32)
    docs[:300] = 1.0
    q = np.ones((1, 384), np.float32)
    codes, scales = quantize_int8(docs)
    qc, qs = quantize_int8(q)
    ids, scores = dense_topk_int8(q, codes, scales, 5)
    exact = (qc.astype(np.int64) @ codes.T.astype(np.int64))[0] * (qs[0] * scales)
    assert ids[0].tolist() == [0, 1, 2, 3, 4]  # 300 tied at the maximum: lowest ids first
    np.testing.assert_allclose(scores[0], np.sort(exact)[::-1][:5], rtol=1e-6)


def test_int8_scan_recall_with_default_oversampling(rng):
    docs = unit(rng.standard_normal((2000, 32)))
    q = unit(rng.standard_normal((4, 32)))
    codes, scales = quantize_int8(docs)
    ids, _ = dense_topk_int8(q, codes, scales, 10, docs=docs)
    exact = np.argsort(-(q @ docs.T), axis=1)[:, :10]
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(ids.tolist(), exact.tolist())])
    assert recall >= 0.95


def test_int8_scan_ties_and_empty(rng):
    docs = np.array([[1, 0], [0, 1], [1, 0], [1, 0]], np.float32)
    codes, scales = quantize_int8(docs)
    ids, _ = dense_topk_int8(np.array([[1, 0]], np.float32), codes, scales, 2, docs=docs)
    assert ids[0].tolist() == [0, 2]
    ids, _scores = dense_topk_int8(np.zeros((0, 2), np.float32), codes, scales, 2)
    assert ids.shape == (0, 2)
    with pytest.raises(ValueError):
        dense_topk_int8(np.zeros((1, 3), np.float32), codes, scales, 2)


def exact_int8_data(rng, n_docs, n_queries, d, spread=3):
    """Documents and queries whose int8 scales are exactly 1, so every score below is exact in float32.

    Documents: column 0 is 127 (their scale), the rest half-integers in [-spread, spread] (rounded
    half to even by the quantiser: approximate and exact scores differ). Queries: column 1 is 127,
    the rest integers. Small ranges make ties frequent, in both the int8 and the exact scores.
    """
    docs = rng.integers(-2 * spread, 2 * spread + 1, (n_docs, d)).astype(np.float32) / 2
    docs[:, 0], docs[:, 1] = 127, 0
    q = rng.integers(-spread, spread + 1, (n_queries, d)).astype(np.float32)
    q[:, 0], q[:, 1] = 0, 127
    return docs, q


@pytest.mark.parametrize("d", [66, 128, 384])  # 66: not a multiple of any vector width
@pytest.mark.parametrize("n_docs,k,oversample", [(1, 1, 4), (5, 10, 4), (37, 3, 4), (300, 7, 1),
                                                 (1000, 10, 4), (1000, 50, 2), (4100, 300, 4)])
@pytest.mark.parametrize("n_queries", [1, 3])
def test_int8_rescored_scan_equals_the_reference_exactly(rng, d, n_docs, k, oversample, n_queries):
    docs, q = exact_int8_data(rng, n_docs, n_queries, d)
    codes, scales = quantize_int8(docs)
    qc, qs = quantize_int8(q)
    assert (scales == 1).all() and (qs == 1).all()  # the premise: every score is exact
    ids, scores = dense_topk_int8(q, codes, scales, k, docs=docs, oversample=oversample)
    ref_ids, ref_scores = ref.int8_topk_rescored(q, codes, scales, qc, qs, docs, k, oversample)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(scores, ref_scores.astype(np.float32))


def test_int8_scan_ties_keep_the_lowest_ids(rng):
    """Many equal rows: the survivors and the hits are the lowest ids of each tied group."""
    base, q = exact_int8_data(rng, 6, 1, 64, spread=1)
    docs = np.repeat(base, 500, axis=0)  # rows 500 r .. 500 r + 499 are copies of row r
    codes, scales = quantize_int8(docs)
    qc, qs = quantize_int8(q)
    for k, oversample in ((10, 4), (300, 1), (700, 2)):
        ids, scores = dense_topk_int8(q, codes, scales, k, docs=docs, oversample=oversample)
        ref_ids, ref_scores = ref.int8_topk_rescored(q, codes, scales, qc, qs, docs, k, oversample)
        np.testing.assert_array_equal(ids, ref_ids)
        np.testing.assert_array_equal(scores, ref_scores.astype(np.float32))


def test_int8_threshold_selection_edge_cases(rng):
    """The survivor selection against the reference: a sample that overshoots (the fallback),
    NaN, all-equal scores, k >= N."""
    from skillsight_fast.kernels.compressed import _select_top

    n = 4096
    v = rng.standard_normal(n).astype(np.float32)
    v[::16] += 100  # the strided sample sees only high scores: too few reach its threshold
    cases = [(v, 300), (v, 100), (np.full(n, 0.5, np.float32), 300), (v[:50], 300), (v[:50], 50)]
    w = v.copy()
    w[rng.choice(n, 200, replace=False)] = np.nan
    cases += [(w, 1000), (np.array([np.nan, 1.0, np.nan], np.float32), 2)]
    rounded = np.round(rng.standard_normal(n), 1).astype(np.float32)  # many ties at the cut
    cases += [(rounded, 777), (rounded, 1)]
    for scores, kk in cases:
        s, i = _select_top(scores, kk)
        want = ref.select_top(scores, kk)
        np.testing.assert_array_equal(i, want)
        np.testing.assert_array_equal(s, scores[want])


def test_int8_one_and_many_queries_agree(rng):
    docs = unit(rng.standard_normal((3000, 96)))
    q = unit(rng.standard_normal((5, 96)))
    codes, scales = quantize_int8(docs)
    ids, scores = dense_topk_int8(q, codes, scales, 20, docs=docs)  # the parallel kernel
    for i in range(5):
        one_ids, one_scores = dense_topk_int8(q[i], codes, scales, 20, docs=docs)  # the serial one
        np.testing.assert_array_equal(one_ids[0], ids[i])
        np.testing.assert_array_equal(one_scores[0], scores[i])
    approx_ids, _ = dense_topk_int8(q, codes, scales, 20)
    assert approx_ids.shape == (5, 20) and (approx_ids >= 0).all()


def test_int8_dots_portable_and_vnni_paths_agree(rng):
    """The integer dot products are exact on both paths (d = 128: vpdpbusd where the CPU has it;
    d = 100: the portable loop), including the extreme codes ±127 and -128 never produced."""
    from skillsight_fast.kernels.compressed import _int8_dots

    for d in (64, 100, 128, 384):
        codes = rng.integers(-127, 128, (700, d)).astype(np.int8)
        codes[0] = 127
        codes[1] = -127
        extremes = (rng.integers(-127, 128, d).astype(np.int8), np.full(d, 127, np.int8),
                    np.full(d, -127, np.int8))
        for qc in extremes:
            out = np.empty(700 - 3, np.int32)
            _int8_dots(qc, codes, 3, 700, out)
            np.testing.assert_array_equal(out, codes[3:].astype(np.int64) @ qc.astype(np.int64))
            out = np.empty(2, np.int32)
            _int8_dots(qc, codes, 0, 2, out)
            np.testing.assert_array_equal(out, codes[:2].astype(np.int64) @ qc.astype(np.int64))
