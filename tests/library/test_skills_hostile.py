"""Issue 41, M3 and L9: one hostile skill folder must not break or leak through the whole library.

M3: a skill whose name is over 100,000 characters made ``index`` fail for the whole library with a
message naming no file; it is now skipped and reported with its file, and the rest is indexed.
L9: a SKILL.md that is a symlink to a file outside the library (a private file with front matter)
was indexed and served; it is now skipped and reported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from fakes import HashEncoder

from skillsight_fast import SkillIndex
from skillsight_fast.library.skills import MAX_FIELD_CHARS, load_skills


def _skill(folder: Path, name: str, description: str = "Merge PDF files.") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\nMerge pdf pages.\n")
    return folder / "SKILL.md"


def test_an_over_long_name_skips_that_skill_naming_its_file(tmp_path):
    lib = tmp_path / "lib"
    _skill(lib / "pdf", "pdf")
    bad = _skill(lib / "huge", "x" * 120_000)
    report = load_skills([lib])
    assert [s.id for s in report.skills] == ["pdf"]
    assert len(report.problems) == 1 and report.problems[0].source == str(bad)
    assert "name" in report.problems[0].reason and f"{MAX_FIELD_CHARS:,}" in report.problems[0].reason


def test_an_over_long_name_in_a_jsonl_record_is_skipped(tmp_path):
    path = tmp_path / "skills.jsonl"
    path.write_text(json.dumps({"id": "a", "name": "pdf", "description": "Merge PDF files."}) + "\n"
                    + json.dumps({"id": "b", "name": "y" * 120_000, "description": "x"}) + "\n")
    report = load_skills([path])
    assert [s.id for s in report.skills] == ["a"] and report.problems[0].source == f"{path}:2"


def test_the_rest_of_a_library_with_an_over_long_name_is_indexed(tmp_path):
    lib = tmp_path / "lib"
    for name, desc in [("pdf", "Merge PDF files."), ("csv", "Clean CSV tables."),
                       ("mesh", "STL mesh volume."),
                       ("email", "Draft polite emails."), ("x" * 120_000, "Merge files.")]:
        _skill(lib / name[:10], name, desc)
    report = load_skills([lib])
    index = SkillIndex.build(report.skills, HashEncoder())  # its label-free rule searches the names
    assert sorted(index.ids) == ["csv", "email", "mesh", "pdf"]


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symlinks")
def test_a_skill_md_linked_to_a_file_outside_the_library_is_not_read(tmp_path):
    private = tmp_path / "home" / "notes.md"
    private.parent.mkdir()
    private.write_text("---\nname: secret\ndescription: my private notes, API key sk-123\n---\nsecret\n")
    private.chmod(0o600)
    lib = tmp_path / "lib"
    _skill(lib / "pdf", "pdf")
    (lib / "leak").mkdir()
    (lib / "leak" / "SKILL.md").symlink_to(private)
    (lib / "inside").mkdir()
    (lib / "inside" / "SKILL.md").symlink_to(lib / "pdf" / "SKILL.md")  # inside the library: read
    report = load_skills([lib])
    assert sorted(s.id for s in report.skills) == ["inside", "pdf"]
    assert [p.source for p in report.problems] == [str(lib / "leak" / "SKILL.md")]
    assert "outside the library" in report.problems[0].reason
