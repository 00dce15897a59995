"""The streaming build (skillsight_fast.indexing) writes the index the in-memory build writes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.adaptive import background_energy, decide, generic_share
from skillsight_fast.engine.background import background_from_directions, estimate_background
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.indexing import CorpusStats, TokenStats, encode_shard, stream_build
from skillsight_fast.library.skills import LoadReport, iter_skills, load_skills

DATA = Path(__file__).resolve().parents[2] / "data"


def queries(name: str) -> list[str]:
    import gzip

    with gzip.open(DATA / name / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def assert_same_index(a: SkillIndex, b: SkillIndex, texts: list[str], *, atol: float = 1e-5) -> None:
    """Equal arrays (floats within atol), basis up to sign, equal decisions, stats and rankings."""
    assert [m.to_dict() for m in a.skills] == [m.to_dict() for m in b.skills]
    la, lb = a.lexical.lexicon, b.lexical.lexicon
    assert la.vocab == lb.vocab
    for name in ("doc_indptr", "doc_terms", "post_indptr", "post_docs", "doc_tf", "doc_len"):
        np.testing.assert_array_equal(getattr(la, name), getattr(lb, name), err_msg=name)
    for name in ("idf", "weights", "generic"):
        np.testing.assert_array_equal(getattr(a.lexical, name), getattr(b.lexical, name), err_msg=name)
    np.testing.assert_allclose(a.dense.embeddings, b.dense.embeddings, atol=atol)
    assert a.dense.basis.shape == b.dense.basis.shape
    if a.dense.basis.shape[0]:
        np.testing.assert_allclose(np.abs(a.dense.basis @ b.dense.basis.T), np.eye(a.dense.basis.shape[0]),
                                   atol=1e-4)
    np.testing.assert_allclose(a.dense.singular_values, b.dense.singular_values, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(a.dense.embeddings_perp, b.dense.embeddings_perp, atol=1e-4)
    assert a.decisions == b.decisions
    sa, sb = a.stats.to_dict(), b.stats.to_dict()
    for key in ("generic_share", "doc_background_energy"):
        if sa[key] is not None:
            assert abs(sa.pop(key) - sb.pop(key)) < 2e-6, key
    assert sa == sb
    assert a.state.flags == b.state.flags
    if a.state.bodies is not None and b.state.bodies is not None:
        assert list(a.state.bodies) == list(b.state.bodies)
    ra, rb = a.search(texts, k=10), b.search(texts, k=10)
    np.testing.assert_array_equal(ra.ids, rb.ids)
    np.testing.assert_allclose(ra.scores, rb.scores, atol=1e-4)


def test_shard_statistics_add_up_to_the_whole_corpus():
    skills, enc, cfg = toy_skills(n_extra=60, seed=3), HashEncoder(dim=32), IndexConfig()
    index = SkillIndex.build(skills, enc, cfg)
    total = CorpusStats.empty(32)
    for a in range(0, len(skills), 25):
        total.add(encode_shard(skills[a:a + 25], enc, cfg).stats)
    total, _ = total.sorted()
    lex = index.lexical.lexicon
    assert total.vocab == lex.vocab and total.n_docs == len(skills)
    np.testing.assert_array_equal(total.df, lex.df())
    emb = index.dense.embeddings.astype(np.float64)
    np.testing.assert_allclose(total.mean, emb.mean(0), atol=1e-12)
    # round 2 over two row blocks of the whole lexicon
    generic = index.lexical.generic
    terms = np.flatnonzero(generic)
    slot = np.full(len(lex.vocab), -1, np.int32)
    slot[terms] = np.arange(terms.size)
    half = len(skills) // 2
    tok = TokenStats.of(lex.doc_indptr[: half + 1], lex.doc_terms, index.dense.embeddings[:half], slot,
                        generic, terms.size).merge(
        TokenStats.of(lex.doc_indptr[half:], lex.doc_terms, index.dense.embeddings[half:], slot, generic,
                      terms.size))
    assert abs(tok.generic_share - generic_share(lex, generic)) < 1e-12
    g = (tok.sums / total.df[terms][:, None]).astype(np.float32)
    bg = background_from_directions(g, total.mean, max_rank=cfg.background.max_rank)
    ref = estimate_background(index.dense.embeddings, terms, lex.post_indptr, lex.post_docs,
                              max_rank=cfg.background.max_rank)
    assert bg.basis.shape == ref.basis.shape and bg.effective_rank == ref.effective_rank
    np.testing.assert_allclose(np.abs(bg.basis @ ref.basis.T), np.eye(ref.basis.shape[0]), atol=1e-5)
    e_d = total.background_energy(ref.basis)
    assert abs(e_d - background_energy(index.dense.embeddings, ref.basis).mean()) < 1e-9
    from skillsight_fast.engine.adaptive import decide_from_statistics

    mine = decide_from_statistics(tok.generic_share, e_d, ref.basis, cfg)
    theirs = decide(index.dense.embeddings, ref.basis, lex, generic, cfg)
    assert mine[0] == theirs[0] and mine[2] == theirs[2]


@pytest.mark.parametrize("paper", [False, True], ids=["adaptive", "paper"])
def test_streamed_build_equals_the_in_memory_build_on_a_real_corpus(paper, tmp_path):
    """The 183 real skills of skillsbench in chunks of 40: the same index, saved and reloaded too."""
    cfg = IndexConfig(adaptive=not paper)
    enc = HashEncoder(dim=48)
    source = DATA / "skillsbench" / "corpus.jsonl.gz"
    whole = SkillIndex.build(load_skills([source]).skills, enc, cfg)
    work = tmp_path / "work"
    work.mkdir()
    streamed = stream_build(iter_skills([source], LoadReport()), enc, cfg, chunk_size=40, workdir=work)
    assert not list(work.iterdir())  # the temporary files are gone already
    assert_same_index(streamed, whole, queries("skillsbench"), atol=1e-6)
    # saved and reloaded, the streamed index is the same index again (texts.jsonl included)
    streamed.save(tmp_path / "s")
    whole.save(tmp_path / "w")
    ms, mw = (json.loads((tmp_path / d / "manifest.json").read_text()) for d in ("s", "w"))
    for key in ("config", "decisions", "n_skills", "roots", "injection_screen"):
        assert ms[key] == mw[key], key
    assert ms["files"] == mw["files"]
    for name, entry in mw["arrays"].items():
        if entry["dtype"] != "float32":
            assert ms["arrays"][name]["sha256"] == entry["sha256"], name
    from skillsight_fast.engine.io import read_bodies

    assert read_bodies(tmp_path / "s") == list(whole.state.bodies)
    loaded = SkillIndex.load(tmp_path / "s")
    loaded.encoder = enc
    assert_same_index(loaded, whole, queries("skillsbench")[:20], atol=1e-6)


def test_one_skill_per_chunk_and_odd_chunks_give_the_same_index():
    skills, enc, cfg = toy_skills(n_extra=40, seed=1), HashEncoder(dim=32), IndexConfig()
    whole = SkillIndex.build(skills, enc, cfg)
    texts = ["merge pdf pages", "docker compose deploy", "rebase a git branch"]
    for size in (1, 7):
        assert_same_index(stream_build(iter(skills), enc, cfg, chunk_size=size), whole, texts)


def test_streamed_build_refuses_duplicates_and_empty_input():
    from skillsight_fast.errors import DuplicateSkillError, EmptyLibraryError

    skills = toy_skills()
    with pytest.raises(DuplicateSkillError):
        stream_build(skills + [dataclasses.replace(skills[0], body="other")], HashEncoder(), chunk_size=4)
    with pytest.raises(EmptyLibraryError):
        stream_build([], HashEncoder())


def test_cli_index_stream_writes_the_same_index(tmp_path, monkeypatch, capsys):
    from skill_files import write_skill

    from skillsight_fast import models
    from skillsight_fast.cli import main

    monkeypatch.setattr(models, "load_encoder", lambda *a, **k: HashEncoder())
    root = tmp_path / "skills"
    for s in toy_skills(n_extra=12):
        write_skill(root, s.id, name=s.name, description=s.description, body=s.body)
    write_skill(root, "broken", raw="no front matter")
    assert main(["index", str(root), "-o", str(tmp_path / "a"), "-q"]) == 0
    assert main(["-c", "stream=true", "-c", "chunk-size=5", "index", str(root), "-o", str(tmp_path / "b"),
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["n_skills"] == 22 and len(out["skipped"]) == 1
    a, b = SkillIndex.load(tmp_path / "a"), SkillIndex.load(tmp_path / "b")
    a.encoder = b.encoder = HashEncoder()
    assert a.state.roots == b.state.roots == [str(root.resolve())]
    assert_same_index(b, a, ["merge pdf pages", "docker compose deploy"], atol=0)
    assert main(["-c", "chunk-size=5", "index", str(root), "-o", str(tmp_path / "c")]) == 1
    assert "--chunk-size is for --stream" in capsys.readouterr().err
