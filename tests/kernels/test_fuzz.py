"""Property tests (hypothesis): the front-matter parser, the analyzer, and every kernel against
its NumPy twin (tests/support/reference.py) on arbitrary shapes (0 rows, k > n) and values (ties included)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import reference as ref
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from skillsight_fast.engine.analyzer import analyze, unique_tokens
from skillsight_fast.engine.lexicon import Lexicon
from skillsight_fast.errors import SkillFormatError
from skillsight_fast.kernels import (
    FUSION_MODES,
    dense_topk,
    fuse_topk,
    merge_candidates,
    project_out_background,
    score_bm25_candidates,
    score_lexical_all,
    score_lexical_candidates,
    token_directions,
)
from skillsight_fast.library.skills import parse_skill_md, read_skill_file

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ATOL = 2e-4

# small value sets make ties likely; wide floats make rounding matter
TIE_VALUES = st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0])
FLOATS = st.floats(-4, 4, allow_nan=False, allow_infinity=False, width=32)
VALUES = st.one_of(TIE_VALUES, FLOATS)


def f32(shape):
    return arrays(np.float32, shape, elements=VALUES)


# ====================================================================== front matter
YAML_BITS = st.sampled_from([
    "name: x", "description: y", "name: ''", "description: |\n  multi\n  line", "name: [a, b]",
    "date: 2024-13-45", "when: 2001-02-30 10:00:00", "n: 1e999", "a: &x [1, *x]", "? [k]\n: v",
    "name: !!binary aGVsbG8=", "name: !!python/object:os.system x", "- item", "key", ": :", "'", '"',
    "\t", "name: \x00", "%YAML 1.1", "---", "...", "name: " + "[" * 50, "{a: b}", "name: >-\n  folded",
])


@st.composite
def skill_documents(draw):
    head = draw(st.sampled_from(["---\n", "---\r\n", "\ufeff---\n", "", "--- \n", "----\n"]))
    lines = draw(st.lists(st.one_of(YAML_BITS, st.text(max_size=30)), max_size=8))
    close = draw(st.sampled_from(["---\n", "...\n", "", "--- x\n"]))
    body = draw(st.text(max_size=50))
    return head + "\n".join(lines) + "\n" + close + body


@FUZZ
@given(st.one_of(st.text(max_size=300), skill_documents()))
def test_parse_skill_md_raises_only_skill_format_error(text):
    try:
        name, description, body = parse_skill_md(text)
    except SkillFormatError as exc:
        assert "\n" not in str(exc).split(": ", 1)[0]
        return
    assert isinstance(name, str) and name.strip() == name and name
    assert isinstance(description, str) and description.strip()
    assert isinstance(body, str)


@FUZZ
@given(st.binary(max_size=400), st.sampled_from([b"", b"---\nname: x\ndescription: y\n---\n"]))
def test_read_skill_file_on_arbitrary_bytes(tmp_path_factory, raw, prefix):
    path = tmp_path_factory.mktemp("fuzz") / "SKILL.md"
    path.write_bytes(prefix + raw)
    try:
        skill = read_skill_file(path, "x")
    except SkillFormatError:
        return
    assert skill.id == "x" and skill.name


# ====================================================================== analyzer
TOKEN = re.compile(r"[a-z0-9_]{2,40}")


@FUZZ
@given(st.text(max_size=400))
def test_analyzer_tokens_are_lowercase_words(text):
    tokens = analyze(text)
    assert all(TOKEN.fullmatch(t) for t in tokens)
    assert unique_tokens(text) == list(dict.fromkeys(tokens))
    # the analyzer is idempotent on its own output
    assert analyze(" ".join(tokens)) == tokens


@FUZZ
@given(st.text(alphabet=st.sampled_from("abcXYZ_019 -.\u00e9\u0130\u212a\n"), max_size=200),
       st.integers(1, 6), st.integers(1, 45))
def test_analyzer_length_bounds(text, lo, hi):
    assume(lo <= hi)
    tokens = analyze(text, lo, hi)
    assert all(re.fullmatch(r"[a-z0-9_]+", t) and lo <= len(t) <= hi for t in tokens)
    if (lo, hi) == (2, 40):
        assert tokens == [t for t in re.findall(r"[a-z0-9_]+", text.lower()) if 2 <= len(t) <= 40]


# ====================================================================== projection
@st.composite
def projection_case(draw):
    n = draw(st.integers(0, 6))
    d = draw(st.integers(1, 12))
    r = draw(st.integers(0, d))
    seed = draw(st.integers(0, 2**31 - 1))
    v = draw(f32((n, d)))
    rng = np.random.default_rng(seed)
    basis = (np.linalg.qr(rng.standard_normal((d, r)))[0].T.astype(np.float32) if r
             else np.zeros((0, d), np.float32))
    return v, basis


@FUZZ
@given(projection_case())
def test_projection_matches_reference(case):
    v, basis = case
    out = project_out_background(v, basis)
    assert out.shape == v.shape and out.dtype == np.float32
    np.testing.assert_allclose(out, ref.project_out_background(v, basis), atol=ATOL * 10, rtol=1e-4)


@FUZZ
@given(projection_case())
def test_projection_renormalized_matches_reference(case):
    v, basis = case
    out = project_out_background(v, basis, renormalize=True)
    assert np.isfinite(out).all()
    residual = np.linalg.norm(ref.project_out_background(v, basis), axis=1)
    expected = ref.project_out_background(v, basis, renormalize=True)
    for i in range(v.shape[0]):
        norm = float(np.linalg.norm(out[i]))
        if residual[i] > 1e-3 * max(1.0, float(np.linalg.norm(v[i]))):
            np.testing.assert_allclose(out[i], expected[i], atol=1e-3)
        else:  # nothing left but rounding noise: zero or some unit vector, never amplified junk
            assert norm == 0.0 or abs(norm - 1.0) < 1e-3


# ====================================================================== dense top-k
def check_topk(ids, scores, truth, k):
    n = truth.shape[0]
    assert ids.shape == (n, k) and scores.shape == (n, k)
    assert ids.dtype == np.int64 and scores.dtype == np.float32
    for i in range(n):
        ref_ids, ref_scores = ref.topk_ref(truth[i], k)
        np.testing.assert_allclose(scores[i], ref_scores, atol=ATOL, rtol=1e-5)
        valid = ids[i] >= 0
        assert (valid == (ref_ids >= 0)).all()
        assert len(set(ids[i][valid].tolist())) == int(valid.sum())
        np.testing.assert_allclose(truth[i, ids[i][valid]], scores[i][valid], atol=ATOL, rtol=1e-5)
        # ids match the reference as sets within each group of tied scores
        for s in np.unique(ref_scores[ref_ids >= 0]):  # every score, not only 3-decimal ones
            inside = np.abs(truth[i] - s) < 1e-6
            if inside.sum() <= (np.abs(ref_scores - s) < 1e-6).sum():  # group wholly inside the top-k
                assert set(np.flatnonzero(inside)) <= set(ids[i][valid].tolist())


@FUZZ
@given(st.integers(0, 5), st.integers(0, 30), st.integers(1, 8), st.integers(1, 40), st.data())
def test_dense_topk_matches_reference(n, n_docs, d, k, data):
    q = data.draw(f32((n, d)))
    docs = data.draw(f32((n_docs, d)))
    ids, scores = dense_topk(q, docs, k)
    truth = q.astype(np.float64) @ docs.astype(np.float64).T if n_docs else np.zeros((n, 0))
    check_topk(ids, scores, truth, k)


# ====================================================================== lexical
def draw_queries(draw, vocab, n_docs):
    """Up to 5 queries of unique term ids (CSR: lists, flat ids, offsets) and up to 8 candidates each."""
    n_q = draw(st.integers(0, 5))
    queries = [draw(st.lists(st.integers(0, vocab - 1), unique=True, max_size=vocab)) for _ in range(n_q)]
    ptr = np.zeros(n_q + 1, np.int64)
    ptr[1:] = np.cumsum([len(q) for q in queries])
    flat = np.asarray([t for q in queries for t in q], np.int32)
    kc = draw(st.integers(0, 8))
    cand = np.asarray(draw(st.lists(st.lists(st.integers(-1, n_docs - 1), min_size=kc, max_size=kc),
                                    min_size=n_q, max_size=n_q)), np.int64).reshape(n_q, kc)
    return queries, flat, ptr, cand


@st.composite
def lexical_case(draw):
    n_docs = draw(st.integers(0, 12))
    vocab = draw(st.integers(1, 10))
    sets = [set(draw(st.lists(st.integers(0, vocab - 1), max_size=vocab))) for _ in range(n_docs)]
    sets.append(set(range(vocab)))  # every term occurs somewhere (the vocabulary is the union)
    lex = Lexicon.from_token_sets([{f"t{t:02d}" for t in s} for s in sets])
    doc_sets = [{lex.term_ids[f"t{t:02d}"] for t in s} for s in sets]
    # LEC weights are 0 or normal floats (idf >= 1); subnormal weights make the fastmath (arcp)
    # reciprocal of their sum overflow to inf, a documented precondition of the kernels
    weights = np.asarray(draw(st.lists(st.one_of(st.just(0.0), st.floats(2.0**-10, 5, width=32)),
                                       min_size=vocab, max_size=vocab)), np.float32)
    queries, flat, ptr, cand = draw_queries(draw, vocab, len(sets))
    return lex, doc_sets, weights, queries, flat, ptr, cand


@FUZZ
@given(lexical_case())
def test_lexical_kernels_match_reference(case):
    lex, doc_sets, w, queries, flat, ptr, cand = case
    out = score_lexical_candidates(cand, flat, ptr, lex.doc_indptr, lex.doc_terms, w)
    np.testing.assert_allclose(out, ref.score_lexical_candidates(cand, queries, doc_sets, w), atol=1e-5)
    assert ((out >= 0) & (out <= 1 + 1e-6)).all()
    n_docs = len(doc_sets)
    all_scores = score_lexical_all(flat, ptr, lex.post_indptr, lex.post_docs, w, n_docs)
    assert all_scores.shape == (len(queries), n_docs)
    np.testing.assert_allclose(all_scores, ref.score_lexical_all(queries, doc_sets, w), atol=1e-5)


@st.composite
def bm25_case(draw):
    n_docs = draw(st.integers(0, 12))
    vocab = draw(st.integers(1, 10))
    tf = st.integers(1, 70_000) if draw(st.booleans()) else st.integers(1, 4)  # ties, and the uint16 cap
    docs = [draw(st.dictionaries(st.integers(0, vocab - 1), tf, max_size=vocab)) for _ in range(n_docs)]
    docs.append({t: 1 for t in range(vocab)})  # every term occurs somewhere (the vocabulary is the union)
    lex = Lexicon.from_token_counts([{f"t{t:02d}": f for t, f in d.items()} for d in docs])
    docs_tf = [{lex.term_ids[f"t{t:02d}"]: min(f, 65535) for t, f in d.items()} for d in docs]
    idf = np.asarray(draw(st.lists(st.one_of(st.just(0.0), st.floats(2.0**-10, 12, width=32)),
                                   min_size=vocab, max_size=vocab)), np.float32)
    queries, flat, ptr, cand = draw_queries(draw, vocab, len(docs))
    k1 = draw(st.sampled_from([0.0, 1.2, 2.0]))
    b = draw(st.sampled_from([0.0, 0.75, 1.0]))
    return lex, docs_tf, idf, queries, flat, ptr, cand, k1, b


@FUZZ
@given(bm25_case())
def test_bm25_kernel_matches_reference(case):
    lex, docs_tf, idf, queries, flat, ptr, cand, k1, b = case
    out = score_bm25_candidates(cand, flat, ptr, lex.doc_indptr, lex.doc_terms, lex.doc_tf, lex.doc_len, idf,
                                k1=k1, b=b)
    expect = ref.score_bm25_candidates(cand, queries, docs_tf, lex.doc_len, idf, k1, b)
    assert out.shape == cand.shape and (out >= 0).all()
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-5)


# ====================================================================== fusion
@FUZZ
@given(st.integers(0, 5), st.integers(1, 10), st.integers(1, 14), st.sampled_from(sorted(FUSION_MODES)),
       st.floats(0, 1), st.data())
def test_fuse_topk_matches_reference(n, kc, k, mode, weight, data):
    cand = np.asarray(data.draw(st.lists(st.lists(st.integers(-1, 40), min_size=kc, max_size=kc),
                                         min_size=n, max_size=n)), np.int64).reshape(n, kc)
    s_dense = data.draw(f32((n, kc)))
    s_lex = data.draw(arrays(np.float32, (n, kc), elements=st.sampled_from([0.0, 0.25, 0.5, 1.0])))
    ids, scores, pos = fuse_topk(cand, s_dense, s_lex, k, mode=mode, weight=weight)
    _, rscores, rpos = ref.fuse_topk(cand, s_dense, s_lex, k, mode=mode, weight=weight)
    fused = ref.fuse(cand, s_dense, s_lex, mode=mode, weight=weight)
    np.testing.assert_allclose(scores, rscores, atol=ATOL, rtol=1e-5)
    for i in range(n):
        valid = pos[i] >= 0
        assert (valid == (rpos[i] >= 0)).all()
        assert len(set(pos[i][valid].tolist())) == int(valid.sum())
        np.testing.assert_allclose(fused[i, pos[i][valid]], scores[i][valid], atol=ATOL, rtol=1e-5)
        assert (ids[i][valid] == cand[i, pos[i][valid]]).all() and (ids[i][~valid] == -1).all()


@FUZZ
@given(st.integers(0, 4), st.integers(0, 6), st.integers(0, 6), st.data())
def test_merge_candidates_is_an_ordered_union(n, ka, kb, data):
    def rows(width):
        return np.asarray(data.draw(st.lists(st.lists(st.integers(-1, 9), min_size=width, max_size=width),
                                             min_size=n, max_size=n)), np.int64).reshape(n, width)

    a, b = rows(ka), rows(kb)
    out = merge_candidates(a, b)
    assert out.shape == (n, ka + kb)
    for i in range(n):
        expect = [x for x in a[i] if x >= 0]
        seen = set(expect)
        for x in b[i].tolist():  # ids of b already written (from a or earlier in b) are skipped
            if x >= 0 and x not in seen:
                expect.append(x)
                seen.add(x)
        # a's own duplicates stay
        got = out[i].tolist()
        assert got[: len(expect)] == expect and all(x == -1 for x in got[len(expect):])


# ====================================================================== token directions
@FUZZ
@given(lexical_case(), st.integers(1, 6), st.data())
def test_token_directions_match_reference(case, d, data):
    lex, doc_sets, *_ = case
    docs = data.draw(f32((len(doc_sets), d)))
    terms = np.asarray(data.draw(st.lists(st.integers(0, len(lex.vocab) - 1), max_size=8)), np.int64)
    docs_of_term = [[i for i, s in enumerate(doc_sets) if t in s] for t in range(len(lex.vocab))]
    out = token_directions(terms, lex.post_indptr, lex.post_docs, docs)
    assert out.shape == (terms.shape[0], d)
    np.testing.assert_allclose(out, ref.token_directions(terms, docs_of_term, docs), atol=1e-5)


@pytest.mark.parametrize("k", [1, 3])
def test_kernels_accept_zero_rows(k):
    empty = np.zeros((0, 4), np.float32)
    assert project_out_background(empty, np.eye(4, dtype=np.float32)[:2]).shape == (0, 4)
    ids, scores = dense_topk(empty, np.ones((3, 4), np.float32), k)
    assert ids.shape == (0, k)
    ids, scores, pos = fuse_topk(np.zeros((0, 5), np.int64), np.zeros((0, 5), np.float32),
                                 np.zeros((0, 5), np.float32), k)
    assert ids.shape == scores.shape == pos.shape == (0, k)
