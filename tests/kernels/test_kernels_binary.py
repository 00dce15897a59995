"""The binary (sign code, Hamming) prefilter scan against NumPy references."""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

from skillsight_fast.kernels.binary import dense_topk_binary, hamming, pack_signs
from skillsight_fast.kernels.compressed import dense_topk_int8, quantize_int8


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def exact_data(rng, n_docs, n_queries, d, spread=3):
    """Documents and queries whose int8 scales are exactly 1 (every int8 and exact score is exact in
    float32) and whose small integer ranges make ties frequent, in the Hamming distances too."""
    docs = rng.integers(-2 * spread, 2 * spread + 1, (n_docs, d)).astype(np.float32) / 2
    docs[:, 0], docs[:, 1] = 127, 0
    q = rng.integers(-spread, spread + 1, (n_queries, d)).astype(np.float32)
    q[:, 0], q[:, 1] = 0, 127
    return docs, q


@pytest.mark.parametrize("d", [1, 63, 64, 66, 130, 384])
def test_sign_bits_match_numpy_packbits(rng, d):
    x = rng.standard_normal((37, d)).astype(np.float32)
    x[0] = 0.0
    x[1] = -0.0
    x[2, 0] = np.nan  # not > 0: bit 0
    x[3] = np.abs(x[3]) + 1e-30
    bits = pack_signs(x)
    assert bits.dtype == np.uint64 and bits.shape == (37, -(-d // 64))
    np.testing.assert_array_equal(bits, ref.sign_bits(x))
    assert (bits[0] == 0).all() and (bits[1] == 0).all()
    assert pack_signs(np.zeros((0, d), np.float32)).shape == (0, -(-d // 64))


@pytest.mark.parametrize("d", [8, 64, 100, 384])
def test_hamming_matches_numpy(rng, d):
    x = rng.standard_normal((500, d)).astype(np.float32)
    bits = pack_signs(x)
    for qb in (bits[7], pack_signs(-x[:1])[0], np.zeros(bits.shape[1], np.uint64)):
        h = hamming(qb, bits)
        assert h.dtype == np.uint16
        np.testing.assert_array_equal(h, ref.hamming(qb, bits))
    assert hamming(bits[7], bits)[7] == 0
    assert hamming(pack_signs(-x[7:8])[0], bits)[7] == np.count_nonzero(x[7])  # every nonzero sign flips
    with pytest.raises(ValueError):
        hamming(bits[0][:-1] if bits.shape[1] > 1 else np.zeros(2, np.uint64), bits)


@pytest.mark.parametrize("d", [66, 128, 384])  # 66: not a multiple of 64 (padding bits, portable int8 loop)
@pytest.mark.parametrize("n_docs,k,oversample,rerank", [(1, 1, 4, 1), (5, 10, 4, 3), (37, 3, 4, 12),
                                                        (300, 7, 1, 20), (1000, 10, 4, 60), (1000, 10, 4, 5),
                                                        (1000, 50, 2, 1000), (4100, 30, 4, 400)])
@pytest.mark.parametrize("n_queries", [1, 3])
def test_binary_scan_equals_the_reference_exactly(rng, d, n_docs, k, oversample, rerank, n_queries):
    docs, q = exact_data(rng, n_docs, n_queries, d)
    codes, scales = quantize_int8(docs)
    qc, qs = quantize_int8(q)
    assert (scales == 1).all() and (qs == 1).all()  # the premise: every score is exact
    bits = pack_signs(docs)
    ids, scores = dense_topk_binary(q, bits, codes, scales, docs, k, rerank=rerank, oversample=oversample)
    ref_ids, ref_scores = ref.binary_topk_rescored(q, bits, codes, scales, qc, qs, docs, k, oversample,
                                                   rerank)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_array_equal(scores, ref_scores.astype(np.float32))


def test_binary_scan_reranking_everything_is_the_int8_scan(rng):
    docs = rng.standard_normal((3000, 96)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    q = rng.standard_normal((4, 96)).astype(np.float32)
    codes, scales = quantize_int8(docs)
    bits = pack_signs(docs)
    for k in (1, 20, 300):
        want = dense_topk_int8(q, codes, scales, k, docs=docs)
        got = dense_topk_binary(q, bits, codes, scales, docs, k, rerank=len(docs))
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


def test_binary_scan_ties_keep_every_row_at_the_last_distance(rng):
    """Rows repeated 400 times: every copy of a row has its distance, so the kept set is whole groups,
    and the hits are the lowest ids of the best group, as in the reference."""
    base, q = exact_data(rng, 5, 2, 64, spread=1)
    docs = np.repeat(base, 400, axis=0)
    codes, scales = quantize_int8(docs)
    qc, qs = quantize_int8(q)
    bits = pack_signs(docs)
    for k, rerank in ((10, 1), (10, 450), (300, 10), (700, 2000)):
        ids, scores = dense_topk_binary(q, bits, codes, scales, docs, k, rerank=rerank)
        ref_ids, ref_scores = ref.binary_topk_rescored(q, bits, codes, scales, qc, qs, docs, k, 4, rerank)
        np.testing.assert_array_equal(ids, ref_ids)
        np.testing.assert_array_equal(scores, ref_scores.astype(np.float32))


def test_binary_one_and_many_queries_agree(rng):
    docs = rng.standard_normal((2500, 128)).astype(np.float32)
    q = rng.standard_normal((5, 128)).astype(np.float32)
    codes, scales = quantize_int8(docs)
    bits = pack_signs(docs)
    ids, scores = dense_topk_binary(q, bits, codes, scales, docs, 20, rerank=200)  # the parallel kernel
    for i in range(5):
        one = dense_topk_binary(q[i], bits, codes, scales, docs, 20, rerank=200)  # the serial one
        np.testing.assert_array_equal(one[0][0], ids[i])
        np.testing.assert_array_equal(one[1][0], scores[i])


def test_binary_scan_pads_and_refuses_bad_input(rng):
    docs = np.array([[1, 0], [0, 1], [1, 0]], np.float32)
    codes, scales = quantize_int8(docs)
    bits = pack_signs(docs)
    ids, scores = dense_topk_binary(np.array([[1, 0]], np.float32), bits, codes, scales, docs, 5, rerank=1)
    assert ids[0].tolist() == [0, 2, 1, -1, -1] and np.isneginf(scores[0, 3:]).all()
    ids, _ = dense_topk_binary(np.zeros((0, 2), np.float32), bits, codes, scales, docs, 2, rerank=4)
    assert ids.shape == (0, 2)
    empty = np.zeros((0, 2), np.float32)
    ids, _ = dense_topk_binary(np.ones((1, 2), np.float32), pack_signs(empty), *quantize_int8(empty),
                               empty, 2, rerank=4)
    assert ids.tolist() == [[-1, -1]]
    for bad in ({"k": 0}, {"rerank": 0}, {"oversample": 0}):
        with pytest.raises(ValueError):
            dense_topk_binary(docs[:1], bits, codes, scales, docs, **{"k": 2, "rerank": 4, **bad})
    with pytest.raises(ValueError):
        dense_topk_binary(np.zeros((1, 3), np.float32), bits, codes, scales, docs, 2, rerank=4)
    with pytest.raises(ValueError):
        dense_topk_binary(docs[:1], bits[:2], codes, scales, docs, 2, rerank=4)
