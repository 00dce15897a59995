"""An index is portable: built by one user (their cache holds the static model), it works for another
user on another machine with an empty cache, after the builder's cache is gone.

Real data: skillsbench skills, the bundled MiniLM as the teacher, a static model distilled from it over
the tokens the texts use, kept in the builder's cache folder (as ``resolve_static_model`` does).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from skillsight_fast import IndexConfig, SkillIndex

pytestmark = [pytest.mark.model, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def library(teacher, tmp_path_factory: pytest.TempPathFactory):
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.models.distill import distill_to_folder

    ds = load_dataset(ROOT / "data" / "skillsbench")
    skills = ds.docs[:: max(1, len(ds.docs) // 24)]
    tasks = [q.text for q in ds.queries[:3]]
    texts = [s.text for s in skills] + tasks
    ids = sorted({i for e in teacher._tokenizer.encode_batch(texts, add_special_tokens=False) for i in e.ids})
    builder_home = tmp_path_factory.mktemp("builder")
    folder = distill_to_folder(
        teacher, builder_home / ".cache" / "skillsight-fast" / "static" / "minilm-static", token_ids=ids
    )
    return skills, tasks, builder_home, folder


CODE = """
import json, sys
from skillsight_fast import SkillIndex
index = SkillIndex.load(sys.argv[1])
print(json.dumps(index.search(sys.argv[2:], k=5).skill_ids))
"""


def search_as_another_user(index: Path, tasks: list[str], home: Path) -> list[list[str]]:
    """A new process with another HOME and no cache settings: the other user's empty cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("SKILLSIGHT_CACHE", "XDG_CACHE_HOME")}
    env.update(HOME=str(home), PYTHONPATH=str(ROOT))
    out = subprocess.run(
        [sys.executable, "-c", CODE, str(index), *tasks],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("tier", ["static-mapped", "contextual", "fitted"])
def test_an_index_works_for_another_user_with_the_same_model_in_their_cache(teacher, library, tier, tmp_path,
                                                                             monkeypatch):
    """Issue 39: the index refers to the static model in the cache by checksum instead of carrying
    a copy, so another user needs that model in their own cache: without it the load says so and
    how to fix it; with it (the same files) the answers are the builder's."""
    skills, tasks, builder_home, folder = library
    monkeypatch.setenv("SKILLSIGHT_CACHE", str(builder_home / ".cache" / "skillsight-fast"))
    index = SkillIndex.build(skills, teacher, IndexConfig(query_encoder=tier, query_model=str(folder)))
    want = index.search(tasks, k=5).skill_ids
    index.save(tmp_path / "built")
    text = (tmp_path / "built" / "manifest.json").read_text()
    manifest = json.loads(text)
    assert manifest["config"]["query_model"] == folder.name == manifest["shared"]["static_model"]["folder"]
    assert str(builder_home) not in text  # no builder path in the manifest

    moved = tmp_path / "elsewhere" / "idx"
    shutil.copytree(tmp_path / "built", moved)
    shutil.rmtree(tmp_path / "built")
    other = tmp_path / "other-home"
    other.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("SKILLSIGHT_CACHE", "XDG_CACHE_HOME")}
    # without the model in their cache: every task answered by the int8 transformer (the cascade's own
    # fallback), with one warning that says why and how to restore the lookup
    fell_back = subprocess.run([sys.executable, "-m", "skillsight_fast.cli", "search", "-i", str(moved), tasks[0]],
                               capture_output=True, text=True,
                               env={**env, "HOME": str(other), "PYTHONPATH": str(ROOT)}, timeout=300, check=False)
    assert fell_back.returncode == 0 and "Traceback" not in fell_back.stderr, fell_back.stderr
    assert "refers to the static model file" in fell_back.stderr and "missing" in fell_back.stderr
    assert "int8 transformer" in fell_back.stderr
    vectors = index.encoders.fallback_encoder.encode(tasks)
    assert search_as_another_user(moved, tasks, other) == index.search_vectors(vectors, tasks, 5).skill_ids
    assert not (other / ".cache" / "skillsight-fast" / "static").exists()  # nothing written to their cache
    shutil.copytree(folder, other / ".cache" / "skillsight-fast" / "static" / folder.name)
    got = search_as_another_user(moved, tasks, other)
    assert got == want
