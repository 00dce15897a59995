"""SkillIndex: build, search contract, components, save/load round trip, config variants."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.engine.background import effective_rank, otsu_threshold
from skillsight_fast.errors import IndexFormatError, ModelMismatchError, QueryError, SkillsightError


@pytest.fixture(scope="module")
def index():
    # the single text vector: the 64-dimensional hash encoder collides the toy skills' one-word
    # descriptions ("Helps with pdf tasks."), so their name + description vectors are noise here;
    # the text+namedesc default is checked in test_the_default_builds_the_name_description_vector
    # and against the NumPy pipeline (test_pipeline_reference.py)
    return SkillIndex.build(toy_skills(30), HashEncoder(), IndexConfig(document_vector="text"))


def test_build_records_statistics(index):
    s = index.stats
    assert s.n_docs == 40 and s.dim == 64
    assert 0 < s.n_generic < s.vocab_size
    assert 1 <= s.effective_rank and 0 <= s.rank <= index.config.background.max_rank  # adaptive may skip SBC (r = 0)
    assert index.dense.basis.shape == (s.rank, 64)
    np.testing.assert_allclose(index.dense.basis @ index.dense.basis.T, np.eye(s.rank), atol=1e-5)
    # D⊥ is orthogonal to the background
    np.testing.assert_allclose(index.dense.embeddings_perp @ index.dense.basis.T, 0, atol=1e-5)
    # boilerplate words are generic, topical words are not
    ids = index.lexical.lexicon.term_ids
    assert index.lexical.generic[ids["usage"]] and index.lexical.generic[ids["skill"]]
    assert not index.lexical.generic[ids["stl"]]


def test_search_contract(index):
    res = index.search(["compute the volume of an stl mesh", "resize png thumbnails"], k=5)
    assert res.ids.shape == (2, 5) and res.ids.dtype == np.int64
    assert res.scores.shape == (2, 5) and res.scores.dtype == np.float32
    assert res.skill_ids[0][0] == "mesh-analysis"
    assert res.skill_ids[1][0] == "image-resize"
    assert np.all(np.diff(res.scores, axis=1) <= 1e-6)
    assert "stl" in res.evidence[0][0] and "mesh" in res.evidence[0][0]
    # components are those of the hit
    j = res.ids[0, 0]
    q = index.encoder.encode(["compute the volume of an stl mesh"])
    basis = index.dense.basis
    qp = q - (q @ basis.T) @ basis  # NumPy: q⊥ = q − B Bᵀ q
    assert res.dense[0, 0] == pytest.approx(float(qp[0] @ index.dense.embeddings_perp[j]), abs=1e-5)
    assert index.decisions.lexical == "bm25"  # the adaptive default fuses BM25 over the evidence tokens
    assert res.lexical[0, 0] > 0
    idf, avgdl = index.lexical.bm25
    terms = index.lexical.lexicon.doc_term_ids(int(j))
    q_ids = [index.lexical.lexicon.term_ids[t] for t in res.evidence[0][0]]
    pos = np.searchsorted(terms, q_ids)
    tf = index.lexical.lexicon.doc_tf[index.lexical.lexicon.doc_indptr[j] + pos].astype(np.float64)
    norm = 1.2 * (1 - 0.75 + 0.75 * index.lexical.lexicon.doc_len[j] / avgdl)
    assert res.lexical[0, 0] == pytest.approx(float((idf[q_ids] * tf * 2.2 / (tf + norm)).sum()), rel=1e-5)


def test_paper_config_keeps_lec(index):
    paper = SkillIndex.from_embeddings(
        index.skills, index.dense.embeddings, IndexConfig(adaptive=False), lexicon=index.lexical.lexicon)
    assert paper.decisions.lexical == "lec"
    res = paper.search_vectors(index.encoder.encode(["compute the volume of an stl mesh"]),
                               ["compute the volume of an stl mesh"], k=5)
    assert ((res.lexical[0] >= 0) & (res.lexical[0] <= 1)).all() and res.lexical[0, 0] > 0


def test_single_query_gives_2d_and_padding_when_k_exceeds_n(index):
    res = index.search("git rebase conflicts", k=50)
    assert res.ids.shape == (1, 50)
    assert (res.ids[0, :40] >= 0).all() and (res.ids[0, 40:] == -1).all()
    assert np.isneginf(res.scores[0, 40:]).all() and np.isnan(res.dense[0, 40:]).all()
    assert res.skill_ids[0][45] is None and res.evidence[0][45] == []


@pytest.mark.parametrize("bad", ["", "   \n\t", ["ok", ""]])
def test_empty_query_rejected(index, bad):
    with pytest.raises(QueryError, match="empty"):
        index.search(bad)


@pytest.mark.parametrize("k", [0, -3, 10**9, 2.5, True])
def test_bad_k_rejected(index, k):
    with pytest.raises(QueryError):
        index.search("git", k=k)


def test_query_without_evidence_tokens_still_ranks(index):
    res = index.search("use this skill", k=3)  # only generic tokens
    assert (res.ids[0] >= 0).all()
    assert (res.lexical[0] == 0).all() and res.evidence[0] == [[], [], []]


def test_save_load_roundtrip_identical(index, tmp_path):
    queries = ["merge pdf pages", "docker compose deploy", "sql join tables"]
    before = index.search(queries, k=7)
    index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["format_version"] == 3 and manifest["model"]["id"] == "hash-test"
    assert manifest["decisions"] == index.decisions.to_dict()
    assert {e["bundle"] for e in manifest["arrays"].values()} == {"dense", "lexical"}
    assert manifest["arrays"]["embeddings"]["shape"] == [40, 64]
    assert not list(tmp_path.glob("*.pkl")) and not list((tmp_path / "idx").glob("*.pkl"))
    for mmap in (False, True):
        loaded = SkillIndex.load(tmp_path / "idx", mmap=mmap, encoder=HashEncoder())
        after = loaded.search(queries, k=7)
        np.testing.assert_array_equal(before.ids, after.ids)
        np.testing.assert_array_equal(before.scores, after.scores)
        assert before.evidence == after.evidence
        assert loaded.config == index.config and loaded.stats == index.stats
        assert loaded.decisions == index.decisions
    loaded = SkillIndex.load(tmp_path / "idx", mmap=True)
    assert not loaded.dense.embeddings_perp.flags.writeable


def test_saved_index_keeps_term_frequencies(index, tmp_path):
    index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["arrays"]["doc_tf"]["dtype"] == "uint16" and manifest["decisions"]["lexical"] == "bm25"
    loaded = SkillIndex.load(tmp_path / "idx", mmap=True)
    np.testing.assert_array_equal(loaded.lexical.lexicon.doc_tf, index.lexical.lexicon.doc_tf)
    np.testing.assert_array_equal(loaded.lexical.lexicon.doc_len, index.lexical.lexicon.doc_len)


def test_lec_index_stored_without_term_frequencies_loads(tmp_path):
    """The term frequencies are optional arrays: an LEC index stored without them loads and searches."""
    old = SkillIndex.build(toy_skills(10), HashEncoder(), IndexConfig(lexical="lec"))
    d = old.save(tmp_path / "idx")
    m = json.loads((d / "manifest.json").read_text())
    del m["arrays"]["doc_tf"], m["arrays"]["doc_len"]
    (d / "manifest.json").write_text(json.dumps(m))
    (d / "doc_tf.npy").unlink()
    (d / "doc_len.npy").unlink()
    loaded = SkillIndex.load(d, encoder=HashEncoder())
    assert loaded.decisions.lexical == "lec" and not loaded.lexical.lexicon.has_tf
    queries = ["merge pdf pages", "docker compose deploy"]
    np.testing.assert_array_equal(loaded.search(queries, k=5).ids, old.search(queries, k=5).ids)


def test_bm25_needs_term_frequencies():
    from skillsight_fast.engine.lexicon import Lexicon

    skills = toy_skills(0)
    sets = Lexicon.from_token_sets([set(s.text.lower().split()) for s in skills])
    with pytest.raises(SkillsightError, match="term frequencies"):
        SkillIndex.from_embeddings(skills, HashEncoder().encode([s.text for s in skills]), lexicon=sets)
    with pytest.raises(ValueError, match="lexical"):
        IndexConfig(lexical="tfidf")
    assert IndexConfig().settled(can_fit=False).scoring.lexical == "bm25"
    assert IndexConfig(adaptive=False).settled(can_fit=False).scoring.lexical == "lec"
    assert IndexConfig(adaptive=False, lexical="bm25").settled(can_fit=False).scoring.lexical == "bm25"


def test_save_overwrites_previous_index(index, tmp_path):
    small = SkillIndex.build(toy_skills(0), HashEncoder())
    small.save(tmp_path / "idx")
    index.save(tmp_path / "idx")
    assert len(SkillIndex.load(tmp_path / "idx")) == 40
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_save_refuses_non_index_folder(index, tmp_path):
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    with pytest.raises(IndexFormatError, match="refusing"):
        index.save(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious"


def test_load_rejects_other_model(index, tmp_path):
    index.save(tmp_path / "idx")
    with pytest.raises(ModelMismatchError):
        SkillIndex.load(tmp_path / "idx", encoder=HashEncoder(checksum="other"))


def test_load_rejects_wrong_version_and_corruption(index, tmp_path):
    d = index.save(tmp_path / "idx")
    m = json.loads((d / "manifest.json").read_text())
    m["format_version"] = 99
    (d / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="version"):
        SkillIndex.load(d)
    index.save(d)
    raw = (d / "embeddings_perp.npy").read_bytes()
    (d / "embeddings_perp.npy").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(IndexFormatError, match="checksum"):
        SkillIndex.load(d)
    with pytest.raises(IndexFormatError, match="truncated"):
        SkillIndex.load(d, verify=False)


def test_nan_embeddings_rejected():
    emb = HashEncoder().encode([s.text for s in toy_skills()])
    emb[3, 0] = np.nan
    with pytest.raises(SkillsightError, match="NaN"):
        SkillIndex.from_embeddings(toy_skills(), emb)


@pytest.mark.parametrize(
    "changes",
    [
        {"fusion": "convex", "lexical_weight": 0.3},
        {"fusion": "rrf"},
        {"fusion": "dense"},
        {"renormalize": True},
        {"background_tokens": "all"},
        {"background_tokens": "random"},
        {"background_tokens": "high_idf"},
        {"rank": 0},
        {"otsu_weighted": True},
        {"lexical_candidates": 20, "candidates": 5},
    ],
)
def test_config_variants_search(changes):
    cfg = IndexConfig(document_vector="text", **changes)  # the toy's descriptions: see the fixture
    idx = SkillIndex.build(toy_skills(30), HashEncoder(), cfg)
    res = idx.search(["stl mesh volume", "pytest fixtures coverage"], k=3)
    assert res.skill_ids[0][0] == "mesh-analysis"
    assert res.skill_ids[1][0] == "unit-tests"
    assert IndexConfig.from_dict(cfg.to_dict()) == cfg


def test_rank_zero_means_raw_dense():
    idx = SkillIndex.build(toy_skills(5), HashEncoder(), IndexConfig(rank=0, fusion="dense", document_vector="text"))
    np.testing.assert_array_equal(idx.dense.embeddings_perp, idx.dense.embeddings)
    # with the name + description vector: the mean of the two raw vectors
    both = SkillIndex.build(toy_skills(5), HashEncoder(), IndexConfig(rank=0, fusion="dense"))
    np.testing.assert_allclose(both.dense.embeddings_perp, (both.dense.embeddings + both.dense.namedesc) / 2, atol=1e-6)


def test_the_default_builds_the_name_description_vector(tmp_path):
    skills = toy_skills(5)
    enc = HashEncoder()
    idx = SkillIndex.build(skills, enc)
    assert idx.decisions.document_vector == "text+namedesc"
    expected = enc.encode([f"{s.name}\n{s.description}" for s in skills])
    np.testing.assert_allclose(idx.dense.namedesc, expected, atol=1e-6)
    res = idx.search(["compute the volume of an stl mesh"], k=3)
    q = enc.encode(["compute the volume of an stl mesh"])[0]
    basis = idx.dense.basis
    perp = lambda v: v - (v @ basis.T) @ basis  # noqa: E731
    j = res.ids[0, 0]
    want = 0.5 * (perp(q) @ perp(idx.dense.embeddings[j]) + perp(q) @ perp(expected[j]))
    assert res.dense[0, 0] == pytest.approx(float(want), abs=1e-5)
    # recorded in the manifest and kept by a save / load round trip
    idx.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["decisions"]["document_vector"] == "text+namedesc"
    back = SkillIndex.load(tmp_path / "idx", encoder=HashEncoder())
    np.testing.assert_array_equal(back.dense.namedesc, idx.dense.namedesc)
    np.testing.assert_array_equal(back.search(["stl mesh volume"], k=3).ids, idx.search(["stl mesh volume"], k=3).ids)
    # the paper's configuration keeps the single text vector
    paper = SkillIndex.build(skills, HashEncoder(), IndexConfig(adaptive=False))
    assert paper.decisions.document_vector == "text" and paper.dense.namedesc is None


def test_config_rejects_unknown_values():
    with pytest.raises(ValueError):
        IndexConfig(fusion="magic")
    with pytest.raises(ValueError):
        IndexConfig.from_dict({"nope": 1})


def test_otsu_and_effective_rank():
    assert otsu_threshold(np.array([1.0, 1.0, 1.1, 7.0, 7.2, 7.1])) == pytest.approx(1.1)
    assert otsu_threshold(np.array([2.0, 2.0])) == float("inf")
    assert effective_rank(np.array([1.0, 1.0, 1.0, 1.0])) == 4
    assert effective_rank(np.array([5.0, 0.0])) == 1
    assert effective_rank(np.zeros(3)) == 0


@pytest.mark.skipif(__import__("numba").config.DISABLE_JIT, reason="no dispatchers without the JIT")
@pytest.mark.parametrize("mmap", [False, True])
def test_warmup_compiles_every_signature_a_search_uses(tmp_path, mmap):
    from skillsight_fast.kernels import fusion, lexical, projection, topk
    from skillsight_fast.kernels.warmup import warmup_kernels

    for lexical_side in ("lec", "bm25"):
        SkillIndex.build(toy_skills(n_extra=20), HashEncoder(),
                         IndexConfig(lexical=lexical_side)).save(tmp_path / lexical_side)
        index = SkillIndex.load(tmp_path / lexical_side, mmap=mmap, encoder=HashEncoder())
        warmup_kernels(index.stats.dim)
        kernels = [f for m in (fusion, lexical, projection, topk) for f in vars(m).values()
                   if hasattr(f, "signatures") and f.__module__ == m.__name__]
        before = {f: len(f.signatures) for f in kernels}
        index.search(["merge pdf pages", "docker compose deploy"], k=3)
        assert {f: len(f.signatures) for f in kernels} == before  # nothing compiled on the first query
