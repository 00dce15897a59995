"""Seeded synthetic corpora for the pytest-benchmark suites (run: ``pytest bench/``).

Three sizes (faiss SyntheticDataset style): unit-norm random embeddings of dimension 384 with a
shared background direction, and a Zipfian lexicon (document token sets drawn from a power law
over a vocabulary that grows with the corpus). Kernels are compiled in setup (``warmup_kernels``)
so the timed calls never include JIT compilation; ``test_*_cold`` time the first call separately.
The full method comparison (real corpus, faiss, bm25s, Dense + Reranker) is ``skillsight bench``.
"""

from __future__ import annotations

import os
import platform

import numpy as np
import pytest

SIZES = {"small": 3_434, "medium": 26_000, "large": 100_000}
DIM = 384


def _zipf_sets(rng, n_docs, n_vocab, mean_len):
    lens = np.maximum(1, rng.poisson(mean_len, n_docs))
    ranks = np.arange(1, n_vocab + 1, dtype=np.float64) ** -1.1
    cdf = np.cumsum(ranks) / ranks.sum()
    flat = np.minimum(np.searchsorted(cdf, rng.random(int(lens.sum()))), n_vocab - 1).astype(np.int32)
    rows = np.repeat(np.arange(n_docs), lens)
    key = np.unique(rows.astype(np.int64) * n_vocab + flat)
    doc_rows, terms = key // n_vocab, (key % n_vocab).astype(np.int32)
    indptr = np.zeros(n_docs + 1, np.int64)
    np.cumsum(np.bincount(doc_rows, minlength=n_docs), out=indptr[1:])
    return indptr, terms


class Corpus:
    """Arrays of one synthetic library plus a SkillIndex over them and a batch of queries."""

    def __init__(self, n_docs: int, seed: int = 0):
        from skillsight_fast.engine.index import SkillIndex, SkillMeta
        from skillsight_fast.engine.lexicon import Lexicon
        from skillsight_fast.engine.state import Decisions
        from skillsight_fast.kernels import project_out_background, transpose_csr

        rng = np.random.default_rng(seed)
        background = rng.standard_normal(DIM).astype(np.float32)
        background /= np.linalg.norm(background)
        emb = rng.standard_normal((n_docs, DIM)).astype(np.float32) + 3.0 * background
        emb /= np.linalg.norm(emb, axis=1, keepdims=True)
        self.basis = background[None, :]
        self.perp = project_out_background(emb, self.basis)
        n_vocab = int(20_000 * (n_docs / 3_434) ** 0.6)
        indptr, terms = _zipf_sets(rng, n_docs, n_vocab, 150)
        post_ptr, post_docs = transpose_csr(indptr, terms, n_vocab)
        # term frequencies as the default (BM25) index stores them; their values do not change the
        # kernels' cost
        lexicon = Lexicon([f"t{i}" for i in range(n_vocab)], indptr, terms, post_ptr, post_docs,
                         rng.integers(1, 4, terms.shape[0]).astype(np.uint16),
                         np.diff(indptr).astype(np.int32))
        # the public build path, with the synthetic background and the default's decisions kept
        self.index = SkillIndex.from_embeddings(
            [SkillMeta(f"s{i}", f"s{i}", "", "", "") for i in range(n_docs)], emb, lexicon=lexicon,
            basis=(self.basis, np.ones(1, np.float32)), model_id="synthetic",
            decisions=Decisions(background=True, lexical="bm25", lexical_weight=0.25))
        self.perp = self.index.dense.embeddings_perp
        self.generic = self.index.lexical.generic
        self.weights = self.index.lexical.weights
        self.lexicon = lexicon
        noise = 0.05 * rng.standard_normal((64, DIM)).astype(np.float32)
        self.queries = emb[rng.integers(0, n_docs, 64)] + noise
        self.queries /= np.linalg.norm(self.queries, axis=1, keepdims=True)
        self.texts = [" ".join(f"t{t}" for t in rng.integers(0, n_vocab, 60)) for _ in range(64)]
        self.q_terms, self.q_ptr = lexicon.query_terms(self.texts, self.generic)


_CACHE: dict[str, Corpus] = {}


@pytest.fixture(scope="session", params=list(SIZES))
def corpus(request) -> Corpus:
    if request.param not in _CACHE:
        _CACHE[request.param] = Corpus(SIZES[request.param])
    return _CACHE[request.param]


@pytest.fixture(scope="session", autouse=True)
def compiled():
    from skillsight_fast.kernels.warmup import warmup_kernels

    warmup_kernels(DIM)


@pytest.fixture
def one_thread():
    from skillsight_fast.kernels import single_thread

    with single_thread() as t:
        yield t


def record_machine(benchmark, corpus=None) -> None:
    """CPU model, thread count and library versions into ``benchmark.extra_info``."""
    import numba

    from skillsight_fast.lab.benchmark.driver import _versions
    from skillsight_fast.lab.benchmark.runner import cpu_name, load_average

    benchmark.extra_info.update(cpu=cpu_name(), numba_threads=numba.get_num_threads(),
                                cores=os.cpu_count(), load=load_average(), platform=platform.platform(),
                                **_versions())
    if corpus is not None:
        benchmark.extra_info["n_docs"] = int(corpus.perp.shape[0])
