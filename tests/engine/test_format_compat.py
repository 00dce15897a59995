"""An index written before the package was regrouped (format version 2, manifest key
``injection_scan``) still loads and answers exactly what it answered when it was saved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
from cpu import expected_here
from fakes import HashEncoder

from skillsight_fast import SkillIndex

DATA = Path(__file__).resolve().parents[1] / "data"
OLD = DATA / "index_v2_before_regroup"


def test_index_saved_before_the_regroup_loads_and_searches_the_same(tmp_path):
    expected = json.loads((DATA / "index_v2_before_regroup.expected.json").read_text(encoding="utf-8"))
    folder = tmp_path / "old"
    shutil.copytree(OLD, folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["format_version"] == 2 and "injection_scan" in manifest and "injection_screen" not in manifest
    index = SkillIndex.load(folder)
    index.encoder = HashEncoder()
    result = index.search(expected["queries"], k=3)
    assert result.ids.tolist() == expected["ids"]
    np.testing.assert_allclose(result.scores, np.array(expected["scores"], np.float32), rtol=1e-5, atol=1e-6)
    assert index.state.flags == [[] for _ in range(len(index))]


def test_resaved_old_index_uses_the_new_key_and_keeps_its_answers(tmp_path):
    index = SkillIndex.load(OLD)
    index.encoder = HashEncoder()
    before = index.search(["merge pdf pages"], k=3)
    index.save(tmp_path / "new")
    manifest = json.loads((tmp_path / "new" / "manifest.json").read_text(encoding="utf-8"))
    assert "injection_screen" in manifest and "injection_scan" not in manifest
    again = SkillIndex.load(tmp_path / "new")
    again.encoder = HashEncoder()
    after = again.search(["merge pdf pages"], k=3)
    assert after.ids.tolist() == before.ids.tolist()


BEFORE_SECTIONS = DATA / "index_before_sections"


def test_index_saved_before_the_config_sections_answers_identically(tmp_path):
    """Saved before IndexConfig had sections (flat keys, the cascade in the build config;
    tests/support/make_index_before_sections.py): it loads with the real encoder and gives the same
    top-10 ids, scores and evidence, through the lookup, the length gate and the fallback alike."""
    expected = json.loads(expected_here(DATA / "index_before_sections.expected.json").read_text(encoding="utf-8"))
    manifest = json.loads((BEFORE_SECTIONS / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["config"]["fallback_below"] == 0.45 and manifest["config"]["lookup_min_pieces"] == 64
    folder = tmp_path / "old"
    shutil.copytree(BEFORE_SECTIONS, folder)
    index = SkillIndex.load(folder)
    result = index.search(expected["queries"], k=10)
    assert result.skill_ids == expected["skill_ids"]
    np.testing.assert_allclose(result.scores, np.array(expected["scores"], np.float32), rtol=1e-5, atol=1e-5)
    assert result.evidence == expected["evidence"]
    index.save(tmp_path / "again")  # saved again by today's code: still the same answers
    again = SkillIndex.load(tmp_path / "again").search(expected["queries"], k=10)
    assert again.skill_ids == expected["skill_ids"]
    np.testing.assert_allclose(again.scores, result.scores, rtol=1e-6, atol=1e-6)
