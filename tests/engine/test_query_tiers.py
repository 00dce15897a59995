"""Query encoder tiers: static-mapped (static tasks mapped into the transformer's space) and static.

Real data: SKILL.md documents and tasks of data/skillsbench, the bundled MiniLM as the teacher, a
static model distilled from it over the tokens those texts use (the full vocabulary takes a minute).
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.errors import IndexFormatError, ModelMismatchError, SkillsightError
from skillsight_fast.models.static import apply_query_map, fit_query_map, load_static_encoder

pytestmark = pytest.mark.model

ROOT = Path(__file__).parents[2]
N_QUERIES = 4


@pytest.fixture(scope="module")
def real(teacher, tmp_path_factory: pytest.TempPathFactory):
    """(skills, tasks, gold ids, static folder, transformer vectors of the skills): the gold skills of
    4 skillsbench tasks + 16 others."""
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.models.distill import distill_to_folder

    ds = load_dataset(ROOT / "data" / "skillsbench")
    queries = ds.queries[:N_QUERIES]
    rows = sorted({g for q in queries for g in q.gold} | set(range(0, len(ds.docs), len(ds.docs) // 16)))
    skills = [ds.docs[i] for i in rows]
    tasks = [q.text for q in queries]
    gold = [[ds.docs[g].id for g in q.gold] for q in queries]
    texts = [s.text for s in skills] + tasks + ["deploy to kubernetes"]
    ids = sorted({i for e in teacher._tokenizer.encode_batch(texts, add_special_tokens=False) for i in e.ids})
    folder = distill_to_folder(teacher, tmp_path_factory.mktemp("m2v") / "minilm-static", token_ids=ids)
    return skills, tasks, gold, folder, teacher.encode([s.text for s in skills])


def mapped_config(folder: Path) -> IndexConfig:
    return IndexConfig(query_encoder="static-mapped", query_model=str(folder))


def test_fit_query_map_is_the_ridge_solution() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((50, 6)), rng.standard_normal((50, 4))
    w = fit_query_map(x, y, ridge=0.5)
    # ridge as an augmented least-squares problem: [[x 1]; sqrt(0.5) I] w = [y; 0]
    xb = np.hstack([x, np.ones((50, 1))])
    a = np.vstack([xb, np.sqrt(0.5) * np.eye(7)])
    ref = np.linalg.lstsq(a, np.vstack([y, np.zeros((7, 4))]), rcond=None)[0]
    np.testing.assert_allclose(w, ref, atol=1e-5)
    mapped = apply_query_map(x[:3].astype(np.float32), w)
    want = xb[:3] @ ref
    np.testing.assert_allclose(mapped, want / np.linalg.norm(want, axis=1, keepdims=True), atol=1e-5)


def test_static_mapped_index_builds_saves_and_searches(teacher, real, tmp_path: Path) -> None:
    skills, tasks, gold, folder, _emb = real
    config = IndexConfig(query_encoder="static-mapped", query_model=str(folder))
    index = SkillIndex.build(skills, teacher, config)
    static = load_static_encoder(folder)
    qmap = index.dense.query_map
    assert qmap is not None and qmap.shape == (static.dim + 1, teacher.dim)
    # the map is the ridge fit of the skills' static vectors onto their transformer vectors
    np.testing.assert_allclose(qmap, fit_query_map(static.encode([s.text for s in skills]), index.dense.embeddings),
                               atol=1e-5)
    q = index.encode(tasks)
    np.testing.assert_allclose(q, apply_query_map(static.encode(tasks), qmap), atol=1e-6)
    # mapped task vectors point much closer to the transformer's than the raw static ones
    t = teacher.encode(tasks)
    assert np.mean(np.sum(q * t, axis=1)) > np.mean(np.sum(static.encode(tasks) * t, axis=1))
    hits = index.search(tasks, k=10)
    found = np.mean([len(set(g) & set(h)) / len(g) for g, h in zip(gold, hits.skill_ids)])
    assert found >= 0.5  # recall@10 over the 4 tasks on this library of about 20 skills
    index.save(tmp_path / "idx")
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["config"]["query_encoder"] == "static-mapped"
    assert manifest["model"]["query"] == {"id": static.model_id, "checksum": static.checksum}
    assert manifest["arrays"]["query_map"]["bundle"] == "dense"
    loaded = SkillIndex.load(tmp_path / "idx")
    again = loaded.search(tasks, k=10)
    assert again.skill_ids == hits.skill_ids
    np.testing.assert_allclose(again.scores, hits.scores, atol=1e-5)


def test_static_mapped_refuses_other_static_model(teacher, real, tmp_path: Path) -> None:
    skills, _tasks, _, folder, emb = real
    index = SkillIndex.from_embeddings(skills, emb, mapped_config(folder))
    other = load_static_encoder(folder)
    other.checksum = "0" * 64
    with pytest.raises(ModelMismatchError, match="query map was fitted"):
        index.encoders.query_encoder = other
    # a map without the tier, or the tier without a map, is not an index
    with pytest.raises(SkillsightError, match="query map"):
        SkillIndex.from_embeddings(skills, index.dense.embeddings, IndexConfig(query_encoder="static-mapped",
                                   query_model=str(folder)), query_map=np.zeros((3, 384), np.float32))
    index.save(tmp_path / "idx")
    man = tmp_path / "idx" / "manifest.json"
    m = json.loads(man.read_text())
    m["config"]["query_encoder"] = "transformer"
    man.write_text(json.dumps(m))
    with pytest.raises(IndexFormatError, match="query map"):
        SkillIndex.load(tmp_path / "idx")


def test_one_shot_static_mapped_search_imports_no_onnxruntime(teacher, real, tmp_path: Path) -> None:
    skills, _, _, folder, emb = real
    SkillIndex.from_embeddings(skills, emb, mapped_config(folder), model_id=teacher.model_id,
                               model_checksum=teacher.checksum).save(tmp_path / "idx")
    out = subprocess.run([sys.executable, "-m", "skillsight_fast.cli", "search", "-i", str(tmp_path / "idx"),
                          "deploy to kubernetes", "-k", "2", "--json"],
                         capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    hits = json.loads(out.stdout.splitlines()[0])["hits"]
    assert 1 <= len(hits) <= 2 and hits[0]["id"] in {s.id for s in skills}
    code = ("import sys; from skillsight_fast import SkillIndex; "
            f"i = SkillIndex.load({str(tmp_path / 'idx')!r}); i.search(['deploy to kubernetes'], k=1); "
            "print('onnxruntime' in sys.modules, 'onnx' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split() == ["False", "False"]


def test_update_refits_the_map(teacher, real, tmp_path: Path) -> None:
    from skillsight_fast.engine.update import update_index

    skills, tasks, _, folder, emb = real
    index = SkillIndex.from_embeddings(skills[:-1], emb[:-1], mapped_config(folder), model_id=teacher.model_id,
                                       model_checksum=teacher.checksum)
    index.save(tmp_path / "idx")
    report = update_index(tmp_path / "idx", skills, encoder=teacher)
    assert report.added == [skills[-1].id]
    new = SkillIndex.load(tmp_path / "idx")
    static = load_static_encoder(folder)
    np.testing.assert_allclose(new.dense.query_map,
                               fit_query_map(static.encode([s.text for s in skills]), new.dense.embeddings), atol=1e-5)
    assert new.search(tasks[:1], k=3).skill_ids[0][0] is not None


def _write_dataset(folder: Path, skills, tasks, gold) -> Path:
    folder.mkdir()
    with gzip.open(folder / "corpus.jsonl.gz", "wt", encoding="utf-8") as fh:
        for s in skills:
            fh.write(json.dumps({"id": s.id, "name": s.name, "description": s.description, "body": s.body}) + "\n")
    with gzip.open(folder / "queries.jsonl.gz", "wt", encoding="utf-8") as fh:
        for i, (t, g) in enumerate(zip(tasks, gold)):
            fh.write(json.dumps({"id": f"q{i}", "text": t, "gold": g}) + "\n")
    (folder / "meta.json").write_text(json.dumps({"name": "skillsbench-sample", "distractors": None}))
    return folder


@pytest.mark.slow
def test_cli_index_info_search_and_eval_with_tiers(real, tmp_path: Path, monkeypatch, capsys) -> None:
    from skillsight_fast.cli import main

    skills, tasks, gold, folder, _emb = real
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(tmp_path / "cache"))
    data = _write_dataset(tmp_path / "ds", skills, tasks, gold)
    results = {}
    for tier in ("static-mapped", "static"):  # transformer: the rest of the suite
        out = tmp_path / f"idx-{tier}"
        assert main(["-c", f"query-encoder={tier}", "-c", f"query-model={folder}", "index", str(data), "-o", str(out),
                     "-q", "--json"]) == 0
        summary = json.loads(capsys.readouterr().out)
        assert summary["query_encoder"] == tier and summary["n_skills"] == len(skills)
        assert main(["info", "-i", str(out)]) == 0
        assert f"query encoder {tier}" in capsys.readouterr().out
        assert main(["info", "-i", str(out), "--json"]) == 0  # each tier derives its own threshold
        assert json.loads(capsys.readouterr().out)["abstention"]["derived"]["query_encoder"] == tier
        # no threshold here: on the static tiers the derived one also silences real tasks (docs/ABSTENTION.md)
        assert main(["-c", "min-cosine=none", "search", "-i", str(out), tasks[0], "-k", "3", "--json"]) == 0
        assert len(json.loads(capsys.readouterr().out)["hits"]) == 3
        res = tmp_path / f"eval-{tier}.json"
        assert main(["-c", "methods=skillsight", "-c", f"query-encoder={tier}", "-c", f"query-model={folder}",
                     "-c", "bootstrap=20", "-c", "quiet=true", "eval", "--data", str(data), "--json", str(res)]) == 0
        obj = json.loads(res.read_text())
        results[tier] = obj["results"]["skillsight"]["recall@10"]
        assert obj["notes"]["query_encoder"]["tier"] == tier
    man = json.loads((tmp_path / "idx-static" / "manifest.json").read_text())
    # the static model is referred to in the user's cache by checksum (issue 39), named by its folder there
    ref = man["shared"]["static_model"]
    assert man["model"]["id"] == folder.name and man["config"]["model"] == man["config"]["query_model"] == ref["folder"]
    assert not (tmp_path / "idx-static" / "static_model").exists() and "model.safetensors" in ref["files"]
    assert all(0.0 <= r <= 1.0 for r in results.values())
    assert main(["-c", "query-encoder=static-mapped", "-c", f"query-model={tmp_path}", "index", str(data), "-o",
                 str(tmp_path / "bad"), "-q"]) != 0
    assert "not a model2vec folder" in capsys.readouterr().err
