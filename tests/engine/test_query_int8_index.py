"""The default index encodes its tasks with the int8-quantised transformer, its skills with the
float32 one (docs/ENCODERS.md, "Asymmetric int8"): the config rule, the index's two encoders, the
saved manifest and the command line.

Real data and model where a user would meet them: SkillsBench SKILL.md skills, the bundled MiniLM and
its int8 copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import IndexConfig, SkillIndex

ROOT = Path(__file__).parents[2]


def test_config_rule() -> None:
    assert bool(IndexConfig().settled(can_fit=False).encoder.query_int8) is True  # the default
    assert bool(IndexConfig(adaptive=False).settled(can_fit=False).encoder.query_int8) is False  # the paper as written
    assert bool(IndexConfig(adaptive=False, query_int8=True).settled(can_fit=False).encoder.query_int8) is True
    assert bool(IndexConfig(query_int8=False).settled(can_fit=False).encoder.query_int8) is False
    assert bool(IndexConfig(int8=True).settled(can_fit=False).encoder.query_int8) is True  # one int8 encoder for both sides
    assert bool(IndexConfig(query_encoder="static-mapped").settled(can_fit=False).encoder.query_int8) is False
    assert bool(IndexConfig(query_encoder="static").settled(can_fit=False).encoder.query_int8) is False
    with pytest.raises(ValueError, match="transformer tier only"):
        IndexConfig(query_encoder="static", query_int8=True)
    with pytest.raises(ValueError, match="int8 index"):
        IndexConfig(int8=True, query_int8=False)
    cfg = IndexConfig(query_int8=False)
    assert IndexConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    # a manifest written before the field existed loads with the default rule
    old = {k: v for k, v in IndexConfig().to_dict().items() if k != "query_int8"}
    assert IndexConfig.from_dict(old).settled(can_fit=False).encoder.query_int8 is True


def test_an_encoder_of_its_own_encodes_its_own_tasks() -> None:
    """A non-ONNX encoder (a user's own, a test's fake) is not swapped for an int8 graph."""
    enc = HashEncoder()
    index = SkillIndex.build(toy_skills(), enc)
    assert index.config.encoder.query_int8
    assert index.encoders.query_encoder is enc
    np.testing.assert_array_equal(index.encode(["merge pdf pages"]), enc.encode(["merge pdf pages"]))


def test_a_bad_manifest_value_is_refused(tmp_path: Path) -> None:
    from skillsight_fast.errors import IndexFormatError

    index = SkillIndex.build(toy_skills(), HashEncoder())
    index.save(tmp_path / "idx")
    manifest = tmp_path / "idx" / "manifest.json"
    m = json.loads(manifest.read_text())
    m["config"]["query_int8"] = "yes"
    manifest.write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="query_int8"):
        SkillIndex.load(tmp_path / "idx", verify=False)


@pytest.fixture(scope="module")
def skills(teacher):
    """Every 200th SKILL.md document of data/skillsbench (18 real skills)."""
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    return load_dataset(ROOT / "data" / "skillsbench").docs[::200]


TASKS = ["merge two PDF files into one", "write a polite reply to this email and schedule a meeting"]


@pytest.mark.model
def test_transformer_index_int8_tasks_fp32_skills(skills, tmp_path: Path) -> None:
    from skillsight_fast.models import load_encoder

    fp32 = load_encoder(threads=1)
    int8 = load_encoder(threads=1, int8=True)
    index = SkillIndex.build(skills, fp32, IndexConfig(query_encoder="transformer"))  # the tier with int8 tasks
    np.testing.assert_allclose(index.dense.embeddings, fp32.encode([s.text for s in skills]), atol=1e-6)
    q = index.encode(TASKS)
    np.testing.assert_allclose(q, int8.encode(TASKS), atol=1e-6)  # tasks: the int8 graph
    ref = fp32.encode(TASKS)
    assert not np.allclose(q, ref, atol=1e-4)  # it really is another graph
    assert np.sum(q * ref, axis=1).min() > 0.97
    assert index.encoders.query_encoder.threads == 1  # settings of the attached encoder
    # the whole search is the pipeline over those task vectors
    got = index.search(TASKS, k=5)
    want = index.search_vectors(int8.encode(TASKS), TASKS, 5)
    np.testing.assert_array_equal(got.ids, want.ids)
    np.testing.assert_allclose(got.scores, want.scores, rtol=1e-5, atol=1e-6)

    index.save(tmp_path / "idx")
    loaded = SkillIndex.load(tmp_path / "idx")
    assert loaded.config.encoder.query_int8 is True  # the adaptive default, decided at build and recorded
    np.testing.assert_allclose(loaded.encode(TASKS), q, atol=1e-6)
    assert loaded.encoders.attached is None  # a search never loaded the float32 document graph
    assert loaded.encoders.query_encoder.quantized

    paper = SkillIndex.build(skills, fp32, IndexConfig(adaptive=False))
    np.testing.assert_allclose(paper.encode(TASKS), ref, atol=1e-6)  # the paper keeps float32 tasks
    off = SkillIndex.build(skills, fp32, IndexConfig(query_int8=False))
    np.testing.assert_allclose(off.encode(TASKS), ref, atol=1e-6)
    both = SkillIndex.build(skills, int8, IndexConfig(int8=True))
    np.testing.assert_allclose(both.dense.embeddings, int8.encode([s.text for s in skills]), atol=1e-6)
    assert both.encoders.query_encoder is int8


@pytest.mark.model
def test_update_encodes_new_skills_in_float32(skills, tmp_path: Path) -> None:
    from skillsight_fast.engine.update import update_index
    from skillsight_fast.models import load_encoder

    fp32 = load_encoder(threads=1)
    SkillIndex.build(skills[:-2], fp32, IndexConfig(query_encoder="transformer")).save(tmp_path / "idx")
    report = update_index(tmp_path / "idx", skills)
    assert report.added == [s.id for s in skills[-2:]]
    new = SkillIndex.load(tmp_path / "idx")
    rows = [new.ids.index(s.id) for s in skills[-2:]]
    np.testing.assert_allclose(new.dense.embeddings[rows], fp32.encode([s.text for s in skills[-2:]]), atol=1e-5)
    np.testing.assert_allclose(new.encode(TASKS), load_encoder(int8=True).encode(TASKS), atol=1e-6)


@pytest.mark.model
def test_cli_index_records_and_refuses(skills, tmp_path: Path, capsys) -> None:
    from skillsight_fast.cli import main

    src = tmp_path / "skills.jsonl"
    src.write_text("".join(json.dumps({"id": s.id, "name": s.name, "description": s.description, "body": s.body})
                           + "\n" for s in skills), encoding="utf-8")
    assert main(["-c", "query-encoder=transformer", "index", str(src), "-o", str(tmp_path / "a"), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["query_int8"] is True
    assert main(["-c", "query-int8=false", "index", str(src), "-o", str(tmp_path / "b"), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["query_int8"] is False
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert manifest["config"]["query_int8"] is False
    assert main(["info", "-i", str(tmp_path / "a")]) == 0
    assert "int8-quantised graph" in capsys.readouterr().out
    assert main(["-c", "query-encoder=static", "-c", "query-int8=true", "index", str(src), "-o", str(tmp_path / "c")]) == 1
    assert "--query-int8" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()
