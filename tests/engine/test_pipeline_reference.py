"""The whole search against a slow NumPy reference (tests/support/reference.py: search_pipeline).

Every stage of :meth:`SkillIndex.search_vectors` (background removal, the dense candidates, the
evidence tokens, BM25 or LEC, the optional lexical candidate merge, each fusion mode, the SBC-off
path, padding when k exceeds the library) is recomputed from the index's raw arrays and compared,
on random libraries and edge cases.
"""

from __future__ import annotations

import numpy as np
import pytest
import reference as ref

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.engine.index import SkillMeta
from skillsight_fast.engine.state import query_decisions

WORDS = [f"w{i}" for i in range(60)] + ["skill", "use", "the", "file", "data"]


def library(rng: np.random.Generator, n: int, dim: int = 24, shared: float = 2.0):
    """Random unit embeddings around a shared direction, and texts of Zipf-ish words plus boilerplate."""
    bg = rng.standard_normal(dim)
    emb = rng.standard_normal((n, dim)) + shared * bg
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    p = 1.0 / np.arange(1, len(WORDS) + 1)
    texts = [" ".join(rng.choice(WORDS, int(rng.integers(3, 25)), p=p / p.sum())) + " use the skill"
             for _ in range(n)]
    metas = [SkillMeta(f"s{i}", f"s{i}", "", "", "") for i in range(n)]
    return metas, emb, texts


def raw(index: SkillIndex) -> dict:
    lex = index.lexical.lexicon
    terms = [set(lex.doc_term_ids(j).tolist()) for j in range(len(index))]
    tfs = []
    for j in range(len(index)):
        a, b = lex.doc_indptr[j], lex.doc_indptr[j + 1]
        tfs.append(dict(zip(lex.doc_terms[a:b].tolist(), lex.doc_tf[a:b].tolist())))
    return {"embeddings": index.dense.embeddings, "basis": index.dense.basis, "renormalize": index.config.background.renormalize,
                "vocab": lex.vocab, "doc_terms": terms, "doc_tf": tfs, "doc_len": lex.doc_len, "generic": index.lexical.generic,
                "beta": index.config.scoring.beta, "namedesc": index.dense.namedesc}


def check(index: SkillIndex, qv: np.ndarray, texts: list[str], k: int, **knobs) -> None:
    res = index.search_vectors(qv, texts, k, **knobs)
    d = query_decisions(index, **knobs)
    ids, scores = ref.search_pipeline(
        qv, texts, k, **raw(index), side=d.lexical, candidates=d.candidates,
        lexical_candidates=d.lexical_candidates, fusion=d.fusion, weight=d.lexical_weight, rrf_k=d.rrf_k,
        lexical_evidence=d.lexical_evidence)
    finite = np.isfinite(scores)
    assert np.array_equal(np.isfinite(res.scores), finite)
    np.testing.assert_allclose(res.scores[finite], scores[finite], rtol=1e-4, atol=1e-4)
    # ids agree wherever the reference's score is not within float32 noise of a neighbour's
    for i in range(ids.shape[0]):
        s = np.where(finite[i], scores[i], -1e9)
        gap = np.minimum(np.abs(np.diff(s, prepend=np.inf)), np.abs(np.diff(s, append=-np.inf)))
        clear = gap > 1e-3
        np.testing.assert_array_equal(res.ids[i][clear], ids[i][clear])
    # the explanation: each hit's matched evidence tokens, in the order they appear in the task
    r = raw(index)
    stop = np.array([t in ref.STOPWORDS for t in r["vocab"]], bool)  # never evidence either
    evidence = ref.evidence_terms(texts, r["vocab"], np.asarray(r["generic"], bool) | stop)
    for i in range(res.ids.shape[0]):
        want = [[r["vocab"][t] for t in evidence[i] if t in r["doc_terms"][j]] if j >= 0 else []
                for j in res.ids[i].tolist()]
        assert res.evidence[i] == want


CONFIGS = {
    "default (adaptive, bm25)": IndexConfig(),
    "paper (SBC, LEC)": IndexConfig(adaptive=False),
    "SBC off (r = 0)": IndexConfig(adaptive=False, rank=0),
    "renormalised": IndexConfig(adaptive=False, renormalize=True, lexical="bm25"),
    "lexical candidates": IndexConfig(candidates=5, lexical_candidates=7),
    "few candidates": IndexConfig(candidates=5),
    "bm25 over Q' only": IndexConfig(lexical_evidence="masked"),
    "paper with bm25 over every token": IndexConfig(adaptive=False, lexical="bm25", lexical_evidence="all"),
}


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("seed", [0, 1])
def test_search_matches_the_numpy_pipeline(name, seed):
    rng = np.random.default_rng(seed)
    metas, emb, texts = library(rng, int(rng.integers(20, 80)))
    index = SkillIndex.from_embeddings(metas, emb, CONFIGS[name], texts=texts)
    qv = emb[rng.integers(0, len(metas), 6)] + 0.3 * rng.standard_normal((6, emb.shape[1])).astype(np.float32)
    qv = (qv / np.linalg.norm(qv, axis=1, keepdims=True)).astype(np.float32)
    queries = [" ".join(rng.choice(WORDS, int(rng.integers(1, 8)))) for _ in range(5)] + ["nothing known here"]
    for k in (1, 10):
        check(index, qv, queries, k)


@pytest.mark.parametrize("config", [IndexConfig(), IndexConfig(adaptive=False, renormalize=True,
                                                                document_vector="text+namedesc")])
@pytest.mark.parametrize("seed", [0, 1])
def test_the_name_description_vector_matches_the_numpy_pipeline(config, seed):
    """text+namedesc: a document's dense score is the mean of its two background-removed cosines."""
    rng = np.random.default_rng(seed)
    metas, emb, texts = library(rng, int(rng.integers(20, 80)))
    nd = emb + 0.8 * rng.standard_normal(emb.shape).astype(np.float32)
    nd = (nd / np.linalg.norm(nd, axis=1, keepdims=True)).astype(np.float32)
    index = SkillIndex.from_embeddings(metas, emb, config, texts=texts, namedesc=nd)
    assert index.decisions.document_vector == "text+namedesc"
    np.testing.assert_array_equal(index.dense.namedesc, nd)
    qv = emb[rng.integers(0, len(metas), 5)] + 0.3 * rng.standard_normal((5, emb.shape[1])).astype(np.float32)
    qv = (qv / np.linalg.norm(qv, axis=1, keepdims=True)).astype(np.float32)
    queries = [" ".join(rng.choice(WORDS, int(rng.integers(1, 8)))) for _ in range(4)] + ["nothing known here"]
    for k in (1, 10):
        check(index, qv, queries, k)
        check(index, qv, queries, k, fusion="dense")
    # without the vectors (no encoder to make them) the index scores the text vector, and says so
    plain = SkillIndex.from_embeddings(metas, emb, config, texts=texts)
    assert plain.decisions.document_vector == "text" and plain.dense.namedesc is None
    # a config asking for the text vector ignores them
    text_only = SkillIndex.from_embeddings(metas, emb, config.replace(document_vector="text"), texts=texts,
                                           namedesc=nd)
    assert text_only.dense.namedesc is None


@pytest.mark.parametrize("knobs", [
    {"fusion": "convex", "lexical_weight": 0.3}, {"fusion": "rrf", "rrf_k": 10.0}, {"fusion": "dense"},
    {"fusion": "lexical"}, {"lexical": "lec"}, {"lexical_weight": 2.0}, {"candidates": 3},
    {"lexical_candidates": 4, "lexical": "lec", "candidates": 3},
])
def test_per_call_knobs_match_the_numpy_pipeline(knobs):
    rng = np.random.default_rng(7)
    metas, emb, texts = library(rng, 50)
    index = SkillIndex.from_embeddings(metas, emb, IndexConfig(), texts=texts)
    qv = emb[:4] + 0.2 * rng.standard_normal((4, emb.shape[1])).astype(np.float32)
    qv = (qv / np.linalg.norm(qv, axis=1, keepdims=True)).astype(np.float32)
    check(index, qv, ["w1 w2 w3", "w40 data", "w7", "zzz unknown"], 8, **knobs)


def test_edge_cases_match_the_numpy_pipeline():
    rng = np.random.default_rng(3)
    metas, emb, texts = library(rng, 4)
    index = SkillIndex.from_embeddings(metas, emb, IndexConfig(), texts=texts)
    # k far above the library (padding), a query equal to a document, an all-generic query
    check(index, emb[:2].copy(), [texts[0], "use the skill"], 9)
    one = SkillIndex.from_embeddings(metas[:1], emb[:1], IndexConfig(adaptive=False), texts=texts[:1])
    check(one, emb[:1].copy(), [texts[0]], 3)
    # identical documents: ties broken the same way (ascending row) by both
    twins = SkillIndex.from_embeddings(metas[:3], np.repeat(emb[:1], 3, 0), IndexConfig(), texts=[texts[0]] * 3)
    res = twins.search_vectors(emb[:1].copy(), [texts[0]], 3)
    assert res.ids[0].tolist() == [0, 1, 2]


def test_a_replaced_stage_changes_only_that_stage():
    """dense_stage / lexical_stage swap one stage for one call; the rest is the index's own."""
    rng = np.random.default_rng(11)
    metas, emb, texts = library(rng, 40)
    index = SkillIndex.from_embeddings(metas, emb, IndexConfig(), texts=texts)
    qv, q_texts = emb[:3].copy(), ["w1 w5", "w9 data", "w2"]
    same = index.search_vectors(qv, q_texts, 5, dense_stage=index.dense_candidates,
                                lexical_stage=index.lexical_scores)
    base = index.search_vectors(qv, q_texts, 5)
    np.testing.assert_array_equal(same.ids, base.ids)
    zero = index.search_vectors(qv, q_texts, 5, lexical_stage=lambda c, t, p: np.zeros(c.shape, np.float32))
    dense_only = index.search_vectors(qv, q_texts, 5, fusion="dense")
    np.testing.assert_array_equal(zero.ids, dense_only.ids)
