"""The NumPy twins (skillsight_fast/kernels/twins.py) against the Numba kernels, and the NumPy engine.

Each function gets the inputs of its kernel twin and must give the same ids in the same order
(ties included) and the same scores up to float32 rounding; a whole search with
``index.engine = "numpy"`` must give the hits, scores and evidence of the kernel search, on random
libraries, edge cases (empty library, k > N, exact ties, a task without evidence tokens) and the
real skillsbench library with the static query encoder. A one-shot static ``skillsight search``
imports neither Numba nor onnxruntime.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_pipeline_reference import CONFIGS, library

from skillsight_fast import IndexConfig, SkillIndex, kernels
from skillsight_fast.errors import ModelNotFoundError, SkillsightError
from skillsight_fast.kernels import twins

ROOT = Path(__file__).resolve().parents[2]
#: Scores may differ by float32 rounding of the dense dot products (NumPy's summation order).
ATOL = 2e-5


@pytest.fixture
def rng():
    return np.random.default_rng(2024)


def unit(x):
    n = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(n > 0, n, 1)).astype(np.float32)


def assert_same_ranking(ids_a, scores_a, ids_b, scores_b, tol=1e-6):
    """Same shapes, dtypes and padding; scores within ATOL; the same ids in the same order, except that
    hits whose scores lie within ``tol`` of each other (float32 rounding apart) may swap."""
    assert ids_a.shape == ids_b.shape and scores_a.shape == scores_b.shape
    assert ids_a.dtype == ids_b.dtype == np.int64 and scores_a.dtype == scores_b.dtype == np.float32
    fin = np.isfinite(scores_b)
    assert np.array_equal(np.isfinite(scores_a), fin)
    assert np.array_equal(ids_a < 0, ids_b < 0)
    np.testing.assert_allclose(scores_a[fin], scores_b[fin], atol=ATOL, rtol=0)
    for i in range(ids_b.shape[0]):
        s = np.where(fin[i], scores_b[i], -1e30).astype(np.float64)
        t = np.where(fin[i], scores_a[i], -1e30).astype(np.float64)
        start = 0
        while start < s.size:  # runs of near-equal scores
            stop = start + 1
            while stop < s.size and abs(s[stop] - s[stop - 1]) <= tol:
                stop += 1
            a, b = ids_a[i, start:stop], ids_b[i, start:stop]
            if np.all(s[start:stop] == s[start]) and np.all(t[start:stop] == t[start]):
                np.testing.assert_array_equal(a, b)  # exact ties on both sides: the same order
            elif stop < s.size:  # a run cut by the end of the row may hold a different near-tied hit
                assert set(a.tolist()) == set(b.tolist())
            start = stop


# ---------------------------------------------------------------- each stage
@pytest.mark.parametrize("n,d,r", [(1, 8, 1), (5, 16, 3), (7, 32, 0), (0, 8, 2), (3, 8, 8), (2, 384, 64)])
@pytest.mark.parametrize("renormalize", [False, True])
def test_projection_matches_the_kernel(rng, n, d, r, renormalize):
    v = unit(rng.standard_normal((n, d)))
    basis = np.linalg.qr(rng.standard_normal((d, r)))[0].T.astype(np.float32) if r else np.zeros((0, d), np.float32)
    if n:
        v[0] = basis[0] if r else 0.0  # a vector inside the background: nothing left (zero row)
    got = twins.project_out_background(v, basis, renormalize=renormalize)
    want = kernels.project_out_background(v, basis, renormalize=renormalize)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=1e-5)
    if renormalize:  # the same rows come out as zero
        np.testing.assert_array_equal(got == 0, want == 0)
    with pytest.raises(ValueError):
        twins.project_out_background(v, np.zeros((2, d + 1), np.float32))


@pytest.mark.parametrize("n_docs", [0, 1, 5, 60])
@pytest.mark.parametrize("k", [1, 3, 60, 100])
def test_dense_topk_matches_the_kernel(rng, n_docs, k):
    docs = unit(rng.standard_normal((n_docs, 16)))
    q = unit(rng.standard_normal((4, 16)))
    assert_same_ranking(*twins.dense_topk(q, docs, k), *kernels.dense_topk(q, docs, k))


def test_dense_topk_exact_ties_nan_and_zero_rows(rng, tmp_path):
    docs = unit(rng.standard_normal((300, 384)))
    docs[[3, 50, 77, 150, 298, 299]] = docs[10]  # copies: exactly tied scores, lower id first
    docs[5] = np.nan  # never returned
    docs[6] = 0.0
    q = np.vstack([docs[10], unit(rng.standard_normal((2, 384))), np.zeros((1, 384), np.float32)])
    for k in (1, 4, 7, 299, 400):
        got, want = twins.dense_topk(q, docs, k), kernels.dense_topk(q, docs, k)
        np.testing.assert_array_equal(got[0], want[0])  # identical rows tie exactly: same order
        assert_same_ranking(*got, *want)
        assert 5 not in got[0]
    # a read-only memory map and float64 queries are taken as they are
    np.save(tmp_path / "d.npy", docs)
    mm = np.load(tmp_path / "d.npy", mmap_mode="r")
    np.testing.assert_array_equal(twins.dense_topk(q.astype(np.float64), mm, 9)[0],
                                  kernels.dense_topk(q, docs, 9)[0])
    with pytest.raises(ValueError):
        twins.dense_topk(q, docs, 0)
    with pytest.raises(ValueError):
        twins.dense_topk(q[:, :8], docs, 3)


def _lexical_inputs(rng, n_docs, vocab, kc, n_q=5):
    indptr, terms, tf = [0], [], []
    for _ in range(n_docs):
        t = np.sort(rng.choice(vocab, size=int(rng.integers(0, min(vocab, 12) + 1)), replace=False))
        terms += t.tolist()
        tf += rng.integers(1, 9, t.size).tolist()
        indptr.append(len(terms))
    qptr, qterms = [0], []
    for i in range(n_q):
        size = 0 if i == 1 else int(rng.integers(1, min(vocab, 8) + 1))  # query 1: no evidence tokens
        qterms += rng.choice(vocab, size=size, replace=False).tolist()
        qptr.append(len(qterms))
    cand = rng.integers(-1, max(n_docs, 1), size=(n_q, kc)) if n_docs else np.full((n_q, kc), -1)
    return (cand.astype(np.int64), np.asarray(qterms, np.int32), np.asarray(qptr, np.int64),
            np.asarray(indptr, np.int64), np.asarray(terms, np.int32), np.asarray(tf, np.uint16))


@pytest.mark.parametrize("n_docs,vocab,kc", [(0, 5, 3), (1, 3, 1), (20, 15, 8), (200, 60, 50)])
def test_lexical_sides_match_the_kernels(rng, n_docs, vocab, kc):
    cand, qt, qp, indptr, terms, tf = _lexical_inputs(rng, n_docs, vocab, kc)
    weights = rng.random(vocab).astype(np.float32)
    weights[0] = 0.0
    idf = rng.random(vocab).astype(np.float32) * 3
    lengths = np.diff(indptr).astype(np.int32) * 3 + 1 if n_docs else np.zeros(0, np.int32)
    got = twins.score_lexical_candidates(cand, qt, qp, indptr, terms, weights)
    want = kernels.score_lexical_candidates(cand, qt, qp, indptr, terms, weights)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-6)
    assert not got[1].any()  # no evidence tokens: 0
    if n_docs:
        for avgdl in (None, 7.5):
            got = twins.score_bm25_candidates(cand, qt, qp, indptr, terms, tf, lengths, idf, avgdl=avgdl)
            want = kernels.score_bm25_candidates(cand, qt, qp, indptr, terms, tf, lengths, idf, avgdl=avgdl)
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, atol=1e-6, rtol=1e-6)
    post_indptr, post_docs = kernels.transpose_csr(indptr, terms, vocab)
    np.testing.assert_allclose(
        twins.score_lexical_all(qt, qp, post_indptr, post_docs, weights, n_docs),
        kernels.score_lexical_all(qt, qp, post_indptr, post_docs, weights, n_docs), atol=1e-6, rtol=1e-6)


def test_lexical_sides_reject_what_the_kernels_reject():
    indptr, terms = np.array([0, 2], np.int64), np.array([0, 1], np.int32)
    w = np.ones(2, np.float32)
    for fn in (twins.score_lexical_candidates, kernels.score_lexical_candidates):
        with pytest.raises(ValueError, match="q_ptr"):
            fn(np.zeros((1, 1), np.int64), np.array([0], np.int32), np.array([0, 2], np.int64), indptr, terms, w)
        with pytest.raises(ValueError, match="term ids"):
            fn(np.zeros((1, 1), np.int64), np.array([5], np.int32), np.array([0, 1], np.int64), indptr, terms, w)
    for fn in (twins.score_bm25_candidates, kernels.score_bm25_candidates):
        with pytest.raises(ValueError, match="candidate rows"):
            fn(np.array([[3]], np.int64), np.array([0], np.int32), np.array([0, 1], np.int64), indptr, terms,
               np.ones(2, np.uint16), np.array([2], np.int32), w)


@pytest.mark.parametrize("mode", ["eq15", "convex", "rrf", "dense", "lexical"])
@pytest.mark.parametrize("k", [1, 3, 12, 40])
def test_fusion_matches_the_kernel(rng, mode, k):
    n, kc = 6, 20
    cand = rng.integers(0, 1000, size=(n, kc)).astype(np.int64)
    cand[1, 12:] = -1  # padding
    cand[2] = -1  # a row with no candidate at all
    sd = np.sort(rng.random((n, kc)).astype(np.float32), axis=1)[:, ::-1].copy()
    sl = (rng.random((n, kc)) * 4).astype(np.float32)
    sl[3] = 0.0  # no lexical evidence: eq15 adds nothing
    sd[4, 5:9] = sd[4, 4]  # ties: candidate order decides
    sl[4, 5:9] = sl[4, 4]
    sd = np.where(cand >= 0, sd, -np.inf).astype(np.float32)
    sl = np.where(cand >= 0, sl, 0).astype(np.float32)
    got = twins.fuse_topk(cand, sd, sl, k, mode=mode, weight=0.25, rrf_k=60.0)
    want = kernels.fuse_topk(cand, sd, sl, k, mode=mode, weight=0.25, rrf_k=60.0)
    assert_same_ranking(got[0], got[1], want[0], want[1])
    np.testing.assert_array_equal(got[2][:, :1], want[2][:, :1])
    np.testing.assert_array_equal(got[0][4], want[0][4])  # exact ties: the same order
    with pytest.raises(ValueError):
        twins.fuse_topk(cand, sd, sl, k, mode="nope")


def test_merge_candidates_matches_the_kernel(rng):
    a = rng.integers(-1, 30, size=(5, 8)).astype(np.int64)
    b = rng.integers(-1, 30, size=(5, 11)).astype(np.int64)
    a[0] = -1
    np.testing.assert_array_equal(twins.merge_candidates(a, b), kernels.merge_candidates(a, b))


# ---------------------------------------------------------------- whole searches
def assert_same_search(index: SkillIndex, vectors: np.ndarray, texts: list[str], k: int, **knobs) -> None:
    index.engine = "numba"
    want = index.search_vectors(vectors, texts, k, **knobs)
    index.engine = "numpy"
    try:
        got = index.search_vectors(vectors, texts, k, **knobs)
    finally:
        index.engine = "numba"
    assert_same_ranking(got.ids, got.scores, want.ids, want.scores)
    same = got.ids == want.ids
    np.testing.assert_allclose(got.dense[same], want.dense[same], atol=ATOL, equal_nan=True)
    np.testing.assert_allclose(got.lexical[same], want.lexical[same], atol=ATOL, equal_nan=True)
    if same.all():
        assert got.skill_ids == want.skill_ids and got.evidence == want.evidence


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("seed", [0, 1])
def test_search_on_numpy_equals_the_kernel_search(name, seed):
    rng = np.random.default_rng(seed)
    metas, emb, texts = library(rng, 80)
    index = SkillIndex.from_embeddings(metas, emb, CONFIGS[name], texts=texts)
    qv = unit(rng.standard_normal((4, emb.shape[1])) + emb[:4])
    tasks = ["w1 w2 w3 file", "nothing known here", texts[5], "w7 data use"]
    for k in (1, 5, 80, 120):
        assert_same_search(index, qv, tasks, k)
    for knobs in ({"fusion": "rrf"}, {"fusion": "convex", "lexical_weight": 0.4}, {"fusion": "dense"},
                  {"fusion": "lexical"}, {"lexical": "lec"}, {"candidates": 3}, {"lexical_candidates": 9}):
        assert_same_search(index, qv, tasks, 10, **knobs)


def test_edge_cases_on_numpy_equal_the_kernel_search():
    rng = np.random.default_rng(7)
    metas, emb, texts = library(rng, 12)
    emb[5] = emb[2]  # copies: exactly tied dense scores
    texts[5] = texts[2]
    index = SkillIndex.from_embeddings(metas, emb, IndexConfig(), texts=texts)
    qv = np.vstack([emb[2], unit(rng.standard_normal((1, emb.shape[1])))])
    assert_same_search(index, qv, [texts[2], "zzz unknown words only"], 30)  # k > N, a task without evidence
    one = SkillIndex.from_embeddings(metas[:1], emb[:1], IndexConfig(), texts=texts[:1])
    assert_same_search(one, qv[:1], ["w1"], 3)
    empty = SkillIndex.from_embeddings([], np.zeros((0, emb.shape[1]), np.float32), IndexConfig(), texts=[])
    empty.engine = "numpy"
    res = empty.search_vectors(qv, ["w1", "w2"], 4)
    assert (res.ids == -1).all() and np.isneginf(res.scores).all()
    assert res.skill_ids == [[None] * 4] * 2


def test_engine_is_checked_and_the_int8_scan_keeps_its_kernel():
    rng = np.random.default_rng(3)
    metas, emb, texts = library(rng, 40)
    index = SkillIndex.from_embeddings(metas, emb, IndexConfig(scan="int8"), texts=texts)
    with pytest.raises(SkillsightError, match="engine"):
        index.engine = "cuda"
    assert index.engine == "numba"
    assert_same_search(index, emb[:3], texts[:3], 5)  # the int8 scan runs its kernel either way


# ---------------------------------------------------------------- the real library, static tier
@pytest.fixture(scope="module")
def static_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """data/skillsbench indexed with ``--query-encoder static`` through the CLI (the static model is
    distilled into the cache once, about a minute, when it is not there yet)."""
    from skillsight_fast.cli import main

    try:
        from skillsight_fast.models import load_encoder

        load_encoder("all-MiniLM-L6-v2")
    except ModelNotFoundError as exc:  # weights package not installed
        pytest.skip(f"bundled model unavailable: {exc}")
    out = tmp_path_factory.mktemp("static") / "idx"
    assert main(["-c", "query-encoder=static", "index", str(ROOT / "data" / "skillsbench"), "-o", str(out), "-q"]) == 0
    return out


def _tasks() -> list[str]:
    from skillsight_fast.library.queries import read_queries

    return [t.text for t in read_queries(ROOT / "data" / "skillsbench")]


@pytest.mark.model
@pytest.mark.slow
def test_real_static_index_numpy_equals_kernels(static_index: Path):
    from skillsight_fast.agents.find import find_skills

    index = SkillIndex.load(static_index)
    tasks = _tasks()
    assert len(tasks) >= 70
    vectors = index.encode(tasks)
    for k in (5, 300):
        assert_same_search(index, vectors, tasks, k)
    assert_same_search(index, vectors, tasks, 10, lexical="lec", lexical_candidates=50)
    # the answers of find_skills (filters off, copies collapsed), one task at a time as the CLI runs it
    for task in tasks:
        index.engine = "numba"
        want = find_skills(index, [task], 5)
        index.engine = "numpy"
        got = find_skills(index, [task], 5)
        assert [h.id for h in got[0].hits] == [h.id for h in want[0].hits]
        assert [h.copies for h in got[0].hits] == [h.copies for h in want[0].hits]
        assert [h.evidence for h in got[0].hits] == [h.evidence for h in want[0].hits]
        np.testing.assert_allclose([h.score for h in got[0].hits], [h.score for h in want[0].hits], atol=ATOL)


@pytest.mark.model
@pytest.mark.slow
def test_one_shot_static_search_imports_neither_numba_nor_onnxruntime(static_index: Path):
    task = "merge two pdf files into one document"
    code = ("import sys, json; from skillsight_fast.cli import main; "
            f"rc = main(['-c', 'min-cosine=none', 'search', '-i', {str(static_index)!r}, {task!r}, '-k', '5', "
            "'--json', '--explain']); "
            "import os; print(json.dumps([rc, 'numba' in sys.modules, 'llvmlite' in sys.modules, "
            "'onnxruntime' in sys.modules, os.environ.get('OPENBLAS_NUM_THREADS')]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("OPENBLAS_NUM_THREADS", None)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    *answer, flags = out.stdout.strip().splitlines()
    assert json.loads(flags) == [0, False, False, False, "1"]  # and OpenBLAS started one thread
    # the same hits as the kernels give (--engine numba), in a process of its own
    kernel = subprocess.run([sys.executable, "-m", "skillsight_fast.cli", "-c", "engine=numba", "-c", "min-cosine=none",
                             "search", "-i", str(static_index), task, "-k", "5", "--json"],
                            capture_output=True, text=True, env=env,
                            timeout=300, check=True)
    got, want = json.loads(answer[0])["hits"], json.loads(kernel.stdout)["hits"]
    assert [h["id"] for h in got] == [h["id"] for h in want] and len(got) == 5
    assert [h["evidence"] for h in got] == [h["evidence"] for h in want]
    np.testing.assert_allclose([h["score"] for h in got], [h["score"] for h in want], atol=ATOL)
    # the prompt hook's cold path (no server) is a one-shot process too
    code = ("import sys, json; from skillsight_fast.agents.hook import search_here; "
            f"a = search_here({str(static_index)!r}, {task!r}, 5, float('-inf')); "  # no threshold: the hits
            "print(json.dumps([[h['id'] for h in a['hits']], 'numba' in sys.modules, 'onnxruntime' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    ids, numba_loaded, ort_loaded = json.loads(out.stdout.strip().splitlines()[-1])
    assert ids == [h["id"] for h in want][: len(ids)] and not numba_loaded and not ort_loaded


def test_cli_refuses_an_unknown_engine(capsys: pytest.CaptureFixture[str]):
    from skillsight_fast.cli import main

    assert main(["-c", "engine=cuda", "search", "-i", "nowhere", "a task"]) == 2  # a setting: one line
    assert "--engine" in capsys.readouterr().err


def test_matched_terms_equal_the_kernel_on_random_and_edge_inputs() -> None:
    from skillsight_fast import kernels
    from skillsight_fast.kernels import twins

    rng = np.random.default_rng(7)
    for n_docs, n_q, k in ((30, 4, 5), (1, 1, 3), (12, 3, 12)):
        lengths = rng.integers(0, 9, n_docs)
        doc_terms = [np.sort(rng.choice(40, size=m, replace=False)) for m in lengths]
        indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        flat = np.concatenate(doc_terms).astype(np.int32) if indptr[-1] else np.zeros(0, np.int32)
        q = [rng.choice(40, size=int(rng.integers(0, 7)), replace=False) for _ in range(n_q)]
        q_ptr = np.concatenate([[0], np.cumsum([len(x) for x in q])]).astype(np.int64)
        q_terms = np.concatenate(q).astype(np.int32) if q_ptr[-1] else np.zeros(0, np.int32)
        hits = rng.integers(-1, n_docs, (n_q, k)).astype(np.int64)  # -1: padding
        want = kernels.matched_terms(hits, q_terms, q_ptr, indptr, flat)
        got = twins.matched_terms(hits, q_terms, q_ptr, indptr, flat)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
        assert got[1].dtype == np.int32 and got[0].dtype == np.int64
