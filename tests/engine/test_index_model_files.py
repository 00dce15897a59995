"""Issue 41, M7: every file an index depends on is checksummed, and none is shared with the cache.

The static query tiers keep their model in the index (``static_model/``: tokenizer.json, config.json,
model.safetensors). Before: the tokenizer and config had no checksum (six swapped vocabulary ids
moved the top score from 0.718 to 0.479 with full verification passing), the files were hard links
into the builder's cache (an edit of one index changed every index built from it, and the cache),
and model.safetensors kept the cache's mode 0600 while the rest of the index was readable.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.engine.io import STATIC_MODEL_DIR
from skillsight_fast.errors import IndexFormatError

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
    cache = tmp_path_factory.mktemp("cache") / "static" / "minilm-static"
    folder = distill_to_folder(teacher, cache, token_ids=ids)
    (folder / "model.safetensors").chmod(0o600)  # as the cache keeps it
    index = SkillIndex.build(skills, teacher, IndexConfig(query_encoder="static-mapped", query_model=str(folder)))
    return index, folder


def _save(built, where: Path) -> Path:
    index, _ = built
    return index.save(where)


def test_static_model_files_are_copies_not_links_into_the_cache(built, tmp_path):
    from skillsight_fast.engine.validate import MODEL_FILES_DIR

    assert MODEL_FILES_DIR == STATIC_MODEL_DIR  # the manifest entries validate accepts are the ones io writes
    _, cache = built
    d = _save(built, tmp_path / "idx")
    for f in ("tokenizer.json", "config.json", "model.safetensors"):
        mine, theirs = os.stat(d / STATIC_MODEL_DIR / f), os.stat(cache / f)
        assert (mine.st_dev, mine.st_ino) != (theirs.st_dev, theirs.st_ino), f
        assert mine.st_nlink == 1, f
    modes = {stat.S_IMODE(os.stat(p).st_mode) for p in (d / STATIC_MODEL_DIR).iterdir()}
    assert modes == {stat.S_IMODE(os.stat(d / "manifest.json").st_mode)}  # readable like the rest


@pytest.mark.parametrize("name", ["tokenizer.json", "config.json", "model.safetensors"])
def test_an_edited_static_model_file_fails_verification(built, tmp_path, name):
    d = _save(built, tmp_path / "idx")
    path = d / STATIC_MODEL_DIR / name
    if name == "tokenizer.json":  # the attack: swap vocabulary ids of two words
        tok = json.loads(path.read_text())
        vocab = tok["model"]["vocab"]
        vocab["pdf"], vocab["chart"] = vocab["chart"], vocab["pdf"]
        path.write_text(json.dumps(tok))
    elif name == "config.json":
        cfg = json.loads(path.read_text())
        cfg["normalize"] = not cfg["normalize"]
        path.write_text(json.dumps(cfg))
    else:
        raw = bytearray(path.read_bytes())
        raw[-4] ^= 0x40
        path.write_bytes(bytes(raw))
    with pytest.raises(IndexFormatError, match=f"{name}: checksum mismatch"):
        SkillIndex.load(d, verify=True)
    lazy = SkillIndex.load(d, verify="lazy")
    assert lazy.state.verification.wait() == "failed" and name in lazy.state.verification.error


def test_an_intact_index_with_its_static_model_loads_and_answers(built, tmp_path):
    index, _ = built
    d = _save(built, tmp_path / "idx")
    loaded = SkillIndex.load(d, verify=True)
    assert loaded.search(TASKS, k=5).skill_ids == index.search(TASKS, k=5).skill_ids
    again = loaded.save(tmp_path / "idx2")  # a re-save (update, rescan) carries the files and their sums
    assert SkillIndex.load(again, verify=True).search(TASKS, k=5).skill_ids == index.search(TASKS, k=5).skill_ids
