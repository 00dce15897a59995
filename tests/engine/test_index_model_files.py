"""The static query tiers' model is shared, not copied: an index refers to its folder in the user's
model cache by the sha256 of each file (issue 39: a 16-skill index was 67 MB, 47 MB of it the model),
and refuses a missing or different file with a message that says how to fix it.

Issue 41, M7 still holds: every file an index depends on is checksummed (six swapped vocabulary ids
in tokenizer.json moved the top score from 0.718 to 0.479 with full verification passing), and
nothing in the index is a link into the cache.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.errors import IndexFormatError, ModelMismatchError

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]
TASKS = ["merge two pdf files into one", "plot a bar chart from a csv file"]


@pytest.fixture(scope="module")
def built(teacher, tmp_path_factory: pytest.TempPathFactory):
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.models.distill import distill_to_folder

    ds = load_dataset(ROOT / "data" / "skillsbench")
    skills = ds.docs[:: max(1, len(ds.docs) // 24)]
    texts = [s.text for s in skills] + TASKS
    ids = sorted({i for e in teacher._tokenizer.encode_batch(texts, add_special_tokens=False) for i in e.ids})
    cache = tmp_path_factory.mktemp("cache")
    folder = distill_to_folder(teacher, cache / "static" / "minilm-static", token_ids=ids)
    index = SkillIndex.build(skills, teacher, IndexConfig(query_encoder="static-mapped", query_model=str(folder)))
    return index, folder, cache


@pytest.fixture
def saved(built, tmp_path, monkeypatch):
    index, folder, cache = built
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(cache))
    return index.save(tmp_path / "idx"), folder


def test_the_index_refers_to_the_cached_model_and_stores_no_copy(saved):
    d, folder = saved
    m = json.loads((d / "manifest.json").read_text())
    ref = m["shared"]["static_model"]
    assert ref["folder"] == folder.name and m["config"]["query_model"] == folder.name
    assert set(ref["files"]) >= {"tokenizer.json", "config.json", "model.safetensors"}
    assert not (d / "static_model").exists()
    sizes = sum(p.stat().st_size for p in d.iterdir())
    assert sizes < (folder / "model.safetensors").stat().st_size  # the weights alone outweigh the index
    assert all(os.stat(p).st_nlink == 1 for p in d.iterdir() if p.is_file())  # no link into the cache


def test_a_model_outside_the_cache_is_copied_there_once(built, tmp_path, monkeypatch):
    import shutil

    index, folder, _ = built
    elsewhere = tmp_path / "models" / "mine"
    shutil.copytree(folder, elsewhere)
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(tmp_path / "cache2"))
    index.state.config = index.state.config.replace(query_model=str(elsewhere))
    try:
        d = index.save(tmp_path / "idx")
    finally:
        index.state.config = index.state.config.replace(query_model=str(folder))
    ref = json.loads((d / "manifest.json").read_text())["shared"]["static_model"]
    cached = tmp_path / "cache2" / "static" / ref["folder"]
    assert ref["folder"].startswith("mine-") and (cached / "model.safetensors").is_file()
    assert SkillIndex.load(d).search(TASKS, k=3).skill_ids == index.search(TASKS, k=3).skill_ids


def test_a_missing_cached_model_falls_back_to_the_transformer_with_the_fix(saved, monkeypatch, tmp_path, caplog):
    """Another user's empty cache: the index loads without its lookup and says so once, naming the index
    folder (not the descriptor the load reads through) and the missing file."""
    import logging

    d, _ = saved
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(tmp_path / "empty-cache"))  # another user's cache
    with caplog.at_level(logging.WARNING, logger="skillsight_fast"):
        index = SkillIndex.load(d)
    assert index.config.encoder.query_encoder == "transformer" and index.dense.query_map is None
    notes = [r.getMessage() for r in caplog.records if "int8 transformer" in r.getMessage()]
    assert len(notes) == 1 and notes[0].startswith(f"{d}: the index refers to the static model file ")
    assert "which is missing" in notes[0] and "/proc/self/fd" not in notes[0]
    assert index.state.fallback == notes[0]


@pytest.mark.parametrize("name", ["tokenizer.json", "config.json"])
def test_an_edited_cached_model_file_is_refused(saved, name, monkeypatch, tmp_path):
    import shutil

    d, folder = saved
    copy = tmp_path / "cache3"
    shutil.copytree(folder, copy / "static" / folder.name)
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(copy))
    path = copy / "static" / folder.name / name
    if name == "tokenizer.json":  # the issue-41 attack: swap vocabulary ids of two words
        tok = json.loads(path.read_text())
        vocab = tok["model"]["vocab"]
        vocab["pdf"], vocab["chart"] = vocab["chart"], vocab["pdf"]
        path.write_text(json.dumps(tok))
    else:
        cfg = json.loads(path.read_text())
        cfg["normalize"] = not cfg["normalize"]
        path.write_text(json.dumps(cfg))
    with pytest.raises(IndexFormatError, match=f"{name} differs from the one the index was built with"):
        SkillIndex.load(d, verify=True)


def test_edited_cached_weights_are_refused_before_an_answer(saved, monkeypatch, tmp_path):
    import shutil

    d, folder = saved
    copy = tmp_path / "cache4"
    shutil.copytree(folder, copy / "static" / folder.name)
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(copy))
    path = copy / "static" / folder.name / "model.safetensors"
    raw = bytearray(path.read_bytes())
    raw[-4] ^= 0x40
    path.write_bytes(bytes(raw))
    loaded = SkillIndex.load(d, verify=True)  # the weights' sha256 is checked when the static encoder loads
    with pytest.raises(ModelMismatchError, match="fitted for the static model"):
        loaded.search(TASKS, k=3)


def test_an_intact_index_with_its_cached_model_loads_and_answers(built, saved, tmp_path):
    index = built[0]
    d, _ = saved
    loaded = SkillIndex.load(d, verify=True)
    assert loaded.search(TASKS, k=5).skill_ids == index.search(TASKS, k=5).skill_ids
    again = loaded.save(tmp_path / "idx2")  # a re-save (update, rescan) keeps the reference
    assert json.loads((again / "manifest.json").read_text())["shared"]["static_model"]["folder"] == built[1].name
    assert SkillIndex.load(again, verify=True).search(TASKS, k=5).skill_ids == index.search(TASKS, k=5).skill_ids
