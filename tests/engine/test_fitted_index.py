"""The fitted query encoder tier in an index: built with the real MiniLM on real SKILL.md documents,
saved and loaded, updated (the table is kept), refused when its table does not match, and the same
vectors through ``eval`` and the CLI (skillsight_fast/models/fitted.py, docs/ENCODERS.md)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.errors import IndexFormatError, ModelError, SkillsightError

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def real(small_skillsbench):
    """(skills, tasks, static folder): tests/conftest.py's ``small_skillsbench``."""
    return small_skillsbench


@pytest.fixture(scope="module")
def built(teacher, real):
    """The fitted index of the 24 skills, fitted as a library of GENERAL_DIRECT_BELOW skills or more is."""
    skills, _, folder = real
    config = IndexConfig(query_encoder="fitted", query_model=str(folder))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("skillsight_fast.models.fitted.GENERAL_DIRECT_BELOW", 0)
        return SkillIndex.build(skills, teacher, config), config


@pytest.mark.model
def test_fitted_index_is_the_fit_of_its_contextual_table(teacher, real, built) -> None:
    """The table an index stores = fit_library_table run by hand on the same inputs."""
    from skillsight_fast.models import load_encoder
    from skillsight_fast.models.contextual import ContextualEncoder, contextual_table, token_state_sums
    from skillsight_fast.models.fitted import fit_library_table, library_training_set
    from skillsight_fast.models.static import apply_query_map, load_static_encoder

    skills, tasks, folder = real
    index, _ = built
    texts = [s.text for s in skills]
    ids, prior = contextual_table(*token_state_sums(teacher, texts))
    int8 = load_encoder("all-MiniLM-L6-v2", int8=True)
    all_texts, targets, owner = library_training_set(
        skills, texts, index.dense.embeddings, [f"{s.name}\n{s.description}" for s in skills], index.dense.namedesc, int8)
    assert len(all_texts) > 3 * len(skills)  # pieces + name/description + whole texts
    static = load_static_encoder(folder)
    got_ids, res = fit_library_table(ids, prior, teacher.tokenize, all_texts, targets, owner, index.dense.basis,
                                     index.dense.embeddings_perp, drop=[static.unk_id])
    np.testing.assert_array_equal(index.dense.query_table_ids, got_ids)
    np.testing.assert_allclose(index.dense.query_table, res.table, rtol=1e-4, atol=1e-5)
    assert np.abs(index.dense.query_table / np.linalg.norm(index.dense.query_table, axis=1, keepdims=True)
                  - prior / np.linalg.norm(prior, axis=1, keepdims=True)).max() > 1e-3  # it did move
    assert res.history[-1] < res.history[0]
    qmap = index.dense.query_map
    ref = ContextualEncoder(static, got_ids, res.table, lambda t: apply_query_map(static.encode(t), qmap),
                            max_length=teacher.max_length)
    np.testing.assert_allclose(index.encode(tasks), ref.encode(tasks), atol=1e-5)


@pytest.mark.model
def test_fitted_index_saves_loads_and_update_keeps_the_table(teacher, real, built, tmp_path: Path) -> None:
    from skillsight_fast.engine.update import update_index

    skills, tasks, _ = real
    index, _ = built
    q = index.encode(tasks)
    index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["config"]["query_encoder"] == "fitted"
    assert {"query_table", "query_table_ids"} <= set(json.dumps(manifest).replace('"', " ").split())
    loaded = SkillIndex.load(tmp_path / "idx")
    np.testing.assert_allclose(loaded.encode(tasks), q, atol=1e-6)
    np.testing.assert_array_equal(loaded.search(tasks, k=5).ids, index.search(tasks, k=5).ids)
    assert loaded.encoders.attached is None  # a search never loads the transformer

    table = loaded.dense.query_table.copy()
    report = update_index(tmp_path / "idx", skills[:-3])  # update keeps the fitted table (a rebuild refits)
    assert len(report.removed) == 3
    again = SkillIndex.load(tmp_path / "idx")
    np.testing.assert_array_equal(again.dense.query_table, table)
    assert again.config.encoder.query_encoder == "fitted" and len(again) == len(skills) - 3

    with pytest.raises(SkillsightError, match="fitted"):
        SkillIndex.from_embeddings(skills, index.dense.embeddings, IndexConfig(query_encoder="fitted",
                                                                          query_model=index.config.encoder.query_model))


@pytest.mark.model
def test_a_table_that_does_not_match_is_refused(built, tmp_path: Path) -> None:
    index, _ = built
    index.save(tmp_path / "idx")
    # the manifest says another tier
    m = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    m["config"]["query_encoder"] = "static-mapped"
    (tmp_path / "idx" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="token table"):
        SkillIndex.load(tmp_path / "idx", verify=False)
    # rows of another dimension than the index (the manifest made to agree with the file)
    index.save(tmp_path / "bad")
    table = index.dense.query_table
    np.save(tmp_path / "bad" / "query_table.npy", np.ascontiguousarray(table[:, :10]))
    m = json.loads((tmp_path / "bad" / "manifest.json").read_text())
    m["arrays"]["query_table"]["shape"] = [table.shape[0], 10]
    (tmp_path / "bad" / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="query_table"):
        SkillIndex.load(tmp_path / "bad", verify=False)
    # token ids the tokenizer does not have (a table of another vocabulary / model)
    static = index.encoders.query_encoder
    from skillsight_fast.models.contextual import ContextualEncoder

    with pytest.raises(ModelError, match="outside"):
        ContextualEncoder(static, np.array([0, 10 ** 6], np.int32), table[:2], lambda t: t)


@pytest.mark.model
def test_eval_fitted_tier_gives_what_an_index_of_it_gives(teacher, real, built, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from skillsight_fast.lab.evaluation.datasets import Dataset, EvalQuery
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext

    monkeypatch.setattr("skillsight_fast.models.fitted.GENERAL_DIRECT_BELOW", 0)  # as ``built`` was made
    skills, tasks, folder = real
    index, _ = built
    ds = Dataset("sample", list(skills), [EvalQuery(f"q{i}", t, frozenset({0})) for i, t in enumerate(tasks)])
    ctx = EvalContext(ds, cache_dir=tmp_path, query_encoder="fitted", query_model=str(folder), encoder=teacher)
    np.testing.assert_allclose(ctx.query_emb, index.encode(tasks), atol=1e-4)
    assert METHODS["skillsight"](ctx).shape[0] == len(tasks)


@pytest.mark.model
def test_a_small_library_searches_with_the_general_table(teacher, real, tmp_path: Path, monkeypatch) -> None:
    """Below GENERAL_DIRECT_BELOW skills the fitted tier stores the shipped general table as it is (no
    fit); eval gives the same vectors; update keeps it, so a new skill's words already have rows."""
    from skillsight_fast.engine.update import update_index
    from skillsight_fast.lab.evaluation.datasets import Dataset, EvalQuery
    from skillsight_fast.lab.evaluation.methods import EvalContext
    from skillsight_fast.models.contextual import ContextualEncoder
    from skillsight_fast.models.fitted import GENERAL_DIRECT_BELOW
    from skillsight_fast.models.general import load_general_table
    from skillsight_fast.models.static import apply_query_map, load_static_encoder

    skills, tasks, folder = real
    assert len(skills) < GENERAL_DIRECT_BELOW
    gen_ids, gen = load_general_table(dim=teacher.dim, checksum=teacher.checksum)
    index = SkillIndex.build(skills[:-2], teacher, IndexConfig(query_encoder="fitted", query_model=str(folder)))
    np.testing.assert_array_equal(index.dense.query_table_ids, gen_ids)
    np.testing.assert_array_equal(index.dense.query_table, gen)
    static = load_static_encoder(folder)
    qmap = index.dense.query_map
    ref = ContextualEncoder(static, gen_ids, gen, lambda t: apply_query_map(static.encode(t), qmap),
                            max_length=teacher.max_length)
    np.testing.assert_allclose(index.encode(tasks), ref.encode(tasks), atol=1e-5)
    ds = Dataset("sample", list(skills[:-2]), [EvalQuery(f"q{i}", t, frozenset({0})) for i, t in enumerate(tasks)])
    ctx = EvalContext(ds, cache_dir=tmp_path / "c", query_encoder="fitted", query_model=str(folder), encoder=teacher)
    np.testing.assert_allclose(ctx.query_emb, index.encode(tasks), atol=1e-4)
    index.save(tmp_path / "idx")
    update_index(tmp_path / "idx", skills, encoder=teacher)  # two new skills: the table is kept
    again = SkillIndex.load(tmp_path / "idx")
    assert len(again) == len(skills)
    np.testing.assert_array_equal(again.dense.query_table, gen)
    new_words = {int(t) for s in skills[-2:] for t in teacher.tokenize([s.description])[0]}
    assert np.isin(sorted(new_words), gen_ids).mean() > 0.9  # the general table already covers them
    # issue 39: the shipped table is referred to by checksum, not stored (22 MB of float32 per index)
    m = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert "query_table" not in m["arrays"] and not (tmp_path / "idx" / "query_table.npy").exists()
    assert m["shared"]["general_query_table"]["rows"] == gen_ids.size
    assert sum(p.stat().st_size for p in (tmp_path / "idx").iterdir()) < 5 * 2**20
    # another install's table (another package version) is refused, not used
    monkeypatch.setattr("skillsight_fast.engine.io_shared._shipped_general_digest", lambda: "0" * 64)
    with pytest.raises(IndexFormatError, match="general query table shipped with skillsight-fast .* rebuild"):
        SkillIndex.load(tmp_path / "idx")


@pytest.mark.model
def test_cli_fitted_index_and_refusals(real, tmp_path: Path, capsys) -> None:
    from skillsight_fast.cli import main

    skills, tasks, folder = real
    src = tmp_path / "skills.jsonl"
    src.write_text("".join(json.dumps({"id": s.id, "name": s.name, "description": s.description, "body": s.body})
                           + "\n" for s in skills), encoding="utf-8")
    assert main(["-c", "query-encoder=fitted", "-c", f"query-model={folder}", "index", str(src), "-o",
                 str(tmp_path / "a"), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["query_encoder"] == "fitted"
    # no abstention: this tests the tier's mechanics, not whether the task fits this small library
    assert main(["-c", "min-cosine=none", "search", "-i", str(tmp_path / "a"), tasks[-1], "-k", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["hits"]
    for flag in ("stream=true", "ray=true"):
        assert main(["-c", "query-encoder=fitted", "-c", flag, "index", str(src), "-o", str(tmp_path / "b")]) == 1
        assert "--stream / --ray" in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


@pytest.mark.model
def test_bench_view_searches_like_a_fitted_index(teacher, real, built) -> None:
    from skillsight_fast.lab.benchmark.driver import tier_views
    from skillsight_fast.models.static import load_static_encoder

    skills, tasks, folder = real
    index, _ = built
    base = SkillIndex.build(skills, teacher, IndexConfig(query_encoder="transformer"))
    views = tier_views(base, load_static_encoder(folder), index.dense.query_map,
                       fitted=(index.dense.query_table_ids, index.dense.query_table))
    assert "fitted" in views and "contextual" not in views
    np.testing.assert_allclose(views["fitted"].encode(tasks), index.encode(tasks), atol=1e-6)
    assert views["fitted"].config.encoder.query_encoder == "fitted" and base.dense.query_table is None
    # with the int8 task encoder, the default's cascade: the fitted view plus the transformer fallback
    from skillsight_fast import SkillIndex as Index
    from skillsight_fast.config import FALLBACK_BELOW, LOOKUP_MIN_PIECES
    from skillsight_fast.models import load_encoder

    int8 = load_encoder("all-MiniLM-L6-v2", int8=True)
    views = tier_views(base, load_static_encoder(folder), index.dense.query_map, int8_encoder=int8,
                       fitted=(index.dense.query_table_ids, index.dense.query_table))
    cascade = views["cascade"]
    assert (cascade.cascade.fallback_below, cascade.cascade.lookup_min_pieces) == (FALLBACK_BELOW, LOOKUP_MIN_PIECES)
    assert cascade.encoders.fallback_encoder is int8
    import dataclasses

    from skillsight_fast.engine.cascade import DEFAULT_CASCADE

    ref = Index(dataclasses.replace(index.state, cascade=DEFAULT_CASCADE), index.encoders.attached)
    np.testing.assert_array_equal(cascade.search(tasks, k=5).ids, ref.search(tasks, k=5).ids)


@pytest.mark.model
def test_one_pass_gives_the_vectors_and_the_token_sums(teacher, real) -> None:
    from skillsight_fast.models.contextual import encode_with_token_sums, token_state_sums

    skills, _, _ = real
    texts = [s.text for s in skills[:8]] + ["short", ""]
    emb, sums, counts = encode_with_token_sums(teacher, texts)
    np.testing.assert_allclose(emb, teacher.encode(texts), atol=1e-6)
    ref_sums, ref_counts = token_state_sums(teacher, texts)
    np.testing.assert_array_equal(counts, ref_counts)
    np.testing.assert_allclose(sums, ref_sums, atol=1e-6)


@pytest.mark.model
def test_one_pass_draws_the_wrappers_progress(teacher, real) -> None:
    """The build's one pass over the skills speaks through the CLI's progress wrapper (it was silent)."""
    import io

    from skillsight_fast.models.contextual import encode_with_token_sums
    from skillsight_fast.progress import ProgressEncoder

    skills, _, _ = real
    texts = [s.text for s in skills[:6]]
    out = io.StringIO()
    emb, _sums, counts = encode_with_token_sums(ProgressEncoder(teacher, desc="encoding 6 skills", stream=out,
                                                               lines=False), texts)
    ref = encode_with_token_sums(teacher, texts)
    np.testing.assert_array_equal(emb, ref[0])
    np.testing.assert_array_equal(counts, ref[2])
    assert "encoding 6 skills 6/6" in out.getvalue()
