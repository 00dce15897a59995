"""Agent Skills libraries as they are: several roots, colliding ids, stored texts, progress bars."""

from __future__ import annotations

import io
import json

import numpy as np
from fakes import HashEncoder, toy_skills
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.engine.io import read_bodies
from skillsight_fast.library.skills import load_skills
from skillsight_fast.progress import Progress, ProgressEncoder, progress_enabled


def test_two_agent_roots_keep_plain_ids_unless_they_collide(tmp_path):
    claude = tmp_path / "home" / ".claude" / "skills"
    github = tmp_path / "repo" / ".github" / "skills"
    write_skill(claude, "pdf", name="pdf")
    write_skill(claude, "notes", name="notes")
    write_skill(github, "pdf", name="pdf2")
    write_skill(github, "ci/release", name="release")
    write_skill(github, "broken", raw="no front matter")
    report = load_skills([claude, github])
    ids = [s.id for s in report.skills]
    # only the colliding id is prefixed, with the shortest path suffix that tells the roots apart
    assert ids == ["notes", ".claude/skills:pdf", "ci/release", ".github/skills:pdf"]
    by_id = {s.id: s for s in report.skills}
    assert by_id[".claude/skills:pdf"].path.endswith(".claude/skills/pdf/SKILL.md")
    assert by_id[".github/skills:pdf"].name == "pdf2"
    assert len(report.problems) == 1 and report.problems[0].source.endswith("broken/SKILL.md")


def test_bodies_are_saved_and_old_indexes_without_them_still_load(tmp_path):
    skills = toy_skills()
    index = SkillIndex.build(skills, HashEncoder())
    index.save(tmp_path / "idx")
    assert read_bodies(tmp_path / "idx") == [s.body for s in skills]
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert "texts.jsonl" in manifest["files"]
    (tmp_path / "idx" / "texts.jsonl").unlink()
    loaded = SkillIndex.load(tmp_path / "idx", encoder=HashEncoder())
    assert read_bodies(tmp_path / "idx") is None
    assert loaded.search("pdf merge pages", k=1).skill_ids[0] == ["pdf-tools"]


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_only_on_a_terminal_and_not_quiet():
    assert not progress_enabled(False, io.StringIO())
    assert progress_enabled(False, _Tty()) and not progress_enabled(True, _Tty())
    out = _Tty()
    with Progress(10, "encoding", stream=out) as bar:
        for _ in range(10):
            bar.update(1)
    text = out.getvalue()
    assert "encoding 10/10" in text and "100.0%" in text and text.endswith("\n")


def test_progress_encoder_gives_the_same_vectors():
    texts = [s.text for s in toy_skills(n_extra=300)]
    inner = HashEncoder()
    out = _Tty()
    wrapped = ProgressEncoder(inner, stream=out)
    assert wrapped.dim == inner.dim and wrapped.model_id == inner.model_id
    np.testing.assert_array_equal(wrapped.encode(texts), inner.encode(texts))
    assert f"{len(texts)}/{len(texts)}" in out.getvalue()
