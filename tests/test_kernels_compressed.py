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
        ref_ids, ref_scores = ref.topk_ref(exact[i], k)
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
    ids, scores = dense_topk_int8(np.zeros((0, 2), np.float32), codes, scales, 2)
    assert ids.shape == (0, 2)
    with pytest.raises(ValueError):
        dense_topk_int8(np.zeros((1, 3), np.float32), codes, scales, 2)
