"""End-to-end scoring (everything after query encoding) next to a faiss flat scan."""

from __future__ import annotations

import pytest
from conftest import record_machine


@pytest.mark.benchmark(group="scoring")
def test_search_vectors_one_query(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    benchmark(corpus.index.search_vectors, corpus.queries[:1], corpus.texts[:1], 10, explain=False)


@pytest.mark.benchmark(group="scoring")
def test_faiss_flat_one_query(benchmark, corpus):
    faiss = pytest.importorskip("faiss")
    faiss.omp_set_num_threads(1)
    record_machine(benchmark, corpus)
    flat = faiss.IndexFlatIP(corpus.perp.shape[1])
    flat.add(corpus.perp)
    benchmark(flat.search, corpus.queries[:1], 10)


@pytest.mark.benchmark(group="scoring-batch")
def test_search_vectors_batch64(benchmark, corpus, one_thread):
    record_machine(benchmark, corpus)
    benchmark(corpus.index.search_vectors, corpus.queries, corpus.texts, 10, explain=False)
    if benchmark.stats:  # None under --benchmark-disable
        benchmark.extra_info["qps"] = 64 / benchmark.stats.stats.median
