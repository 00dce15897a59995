"""One benchmark group per kernel, one query on one thread and a 64-query batch."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import record_machine

from skillsight_fast.kernels import (
    dense_topk,
    fuse_topk,
    project_out_background,
    score_bm25_candidates,
    score_lexical_candidates,
)
from skillsight_fast.kernels.compressed import dense_topk_int8, quantize_int8

K = 300


@pytest.mark.benchmark(group="project")
def test_project_one_query(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    benchmark(project_out_background, corpus.queries[:1], corpus.basis)


@pytest.mark.benchmark(group="topk")
def test_dense_topk_one_query(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    q = project_out_background(corpus.queries[:1], corpus.basis)
    ids, _ = benchmark(dense_topk, q, corpus.perp, K)
    exact = np.argsort(-(corpus.perp @ q[0]), kind="stable")[:K]
    benchmark.extra_info["recall_at_K"] = len(set(ids[0].tolist()) & set(exact.tolist())) / K


@pytest.mark.benchmark(group="topk-batch")
def test_dense_topk_batch64(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    q = project_out_background(corpus.queries, corpus.basis)
    benchmark(dense_topk, q, corpus.perp, K)
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info["qps"] = 64 / benchmark.stats.stats.median


@pytest.mark.benchmark(group="topk-int8")
def test_dense_topk_int8_rescored(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    codes, scales = quantize_int8(corpus.perp)
    q = project_out_background(corpus.queries[:8], corpus.basis)
    exact, _ = dense_topk(q, corpus.perp, K)
    _ids, _ = benchmark(dense_topk_int8, q[:1], codes, scales, K, docs=corpus.perp)
    approx, _ = dense_topk_int8(q, codes, scales, K, docs=corpus.perp)
    benchmark.extra_info["recall_at_K_vs_exact"] = float(np.mean(
        [len(set(a) & set(b)) / K for a, b in zip(approx.tolist(), exact.tolist())]))


def _one_query_candidates(corpus):
    """The dense top-K candidates and the evidence tokens of the corpus' first query."""
    q = project_out_background(corpus.queries[:1], corpus.basis)
    cand, _ = dense_topk(q, corpus.perp, K)
    return cand, corpus.q_terms[corpus.q_ptr[0]: corpus.q_ptr[1]]


@pytest.mark.benchmark(group="lexical")
def test_lexical_candidates_one_query(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    cand, qt = _one_query_candidates(corpus)
    lex = corpus.lexicon
    benchmark(score_lexical_candidates, cand, qt, np.array([0, qt.size]), lex.doc_indptr, lex.doc_terms,
              corpus.weights)


@pytest.mark.benchmark(group="lexical")
def test_bm25_candidates_one_query(benchmark, corpus, one_thread):
    """The adaptive default's lexical side: the LEC kernel's binary searches plus a tf read per hit."""
    record_machine(benchmark, corpus)
    cand, qt = _one_query_candidates(corpus)
    lex = corpus.lexicon
    benchmark(score_bm25_candidates, cand, qt, np.array([0, qt.size]), lex.doc_indptr, lex.doc_terms,
              lex.doc_tf, lex.doc_len, corpus.weights)


@pytest.mark.benchmark(group="fusion")
def test_fuse_topk_one_query(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    rng = np.random.default_rng(0)
    cand = rng.permutation(corpus.perp.shape[0])[:K][None, :].astype(np.int64)
    sd = rng.random((1, K)).astype(np.float32)
    sl = rng.random((1, K)).astype(np.float32)
    benchmark(fuse_topk, cand, sd, sl, 10)


@pytest.mark.benchmark(group="cold")
def test_dense_topk_cold_first_call(benchmark):
    """First call in a fresh process state: loading the kernel from Numba's on-disk cache."""
    import subprocess
    import sys

    code = ("import numpy as np; from skillsight_fast.kernels import dense_topk; "
            "dense_topk(np.ones((1, 384), np.float32), np.ones((10, 384), np.float32), 3)")
    benchmark.pedantic(subprocess.run, args=([sys.executable, "-c", code],), kwargs={"check": True},
                       rounds=3, iterations=1)
