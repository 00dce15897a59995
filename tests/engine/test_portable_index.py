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

import numpy as np
import pytest

from skillsight_fast import IndexConfig, SkillIndex
from skillsight_fast.engine.io import STATIC_MODEL_DIR

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
def test_an_index_works_for_another_user_after_the_builders_cache_is_gone(teacher, library, tier, tmp_path):
    skills, tasks, builder_home, folder = library
    index = SkillIndex.build(skills, teacher, IndexConfig(query_encoder=tier, query_model=str(folder)))
    want = index.search(tasks, k=5).skill_ids
    index.save(tmp_path / "built")
    manifest = json.loads((tmp_path / "built" / "manifest.json").read_text())
    assert manifest["config"]["query_model"] == STATIC_MODEL_DIR  # no builder path in the manifest
    assert str(builder_home) not in (tmp_path / "built" / "manifest.json").read_text()

    moved = tmp_path / "elsewhere" / "idx"
    shutil.copytree(tmp_path / "built", moved)
    shutil.rmtree(tmp_path / "built")
    cache_copy = tmp_path / "builder-cache"
    shutil.move(str(builder_home / ".cache"), cache_copy)  # the builder's cache is gone ...
    try:
        other = tmp_path / "other-home"
        other.mkdir()
        got = search_as_another_user(moved, tasks, other)
        loaded = SkillIndex.load(moved)
        assert Path(loaded.config.encoder.query_model) == moved.absolute() / STATIC_MODEL_DIR
        np.testing.assert_allclose(loaded.encode(tasks), index.encode(tasks), atol=1e-6)
    finally:
        shutil.move(str(cache_copy), builder_home / ".cache")  # ... for this test only
    assert got == want
    assert not (other / ".cache" / "skillsight-fast" / "static").exists()  # nothing re-made in the new cache
