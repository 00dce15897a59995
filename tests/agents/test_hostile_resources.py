"""MCP resource reads under hostile URIs and files: URI parsing in linear work, hard links never served,
FIFOs and devices in a skill folder refused."""

from __future__ import annotations

import os

import pytest
from fakes import HashEncoder
from skill_files import write_skill

import skillsight_fast.agents.live as catalog_mod
from skillsight_fast import SkillIndex
from skillsight_fast.agents.live import LiveIndex as Catalog
from skillsight_fast.agents.live import SkillFileError, UnknownSkillError
from skillsight_fast.library.skills import load_skills


@pytest.fixture
def cat(tmp_path):
    lib = tmp_path / "lib"
    write_skill(lib, "pdf", name="pdf", description="Merge PDF files.")
    write_skill(lib, "team/csv", name="csv", description="Clean CSV files.")
    (lib / "pdf" / "notes.txt").write_text("notes\n")
    (tmp_path / "secret.txt").write_text("top secret\n")
    report = load_skills([lib])
    index = SkillIndex.build(report.skills, HashEncoder())
    index.state.roots = report.roots
    return Catalog.of(index, None, tmp_path / "idx"), lib, tmp_path


def test_uri_parsing_work_is_linear_in_its_segments(cat, monkeypatch):
    """A URI of n segments costs O(n) segment decodes (it cost O(n^2): a 20 KB URI took 20 s of CPU)."""
    c, _, _ = cat
    calls = []
    real = catalog_mod.unquote
    monkeypatch.setattr(catalog_mod, "unquote", lambda s: calls.append(len(s)) or real(s))
    for n in (100, 1000, 4000):
        calls.clear()
        with pytest.raises(UnknownSkillError):
            c.parse_uri("skill://" + "/".join(["a"] * n))
        assert len(calls) <= 4 * c._id_depth + 2, (n, len(calls))
    assert c.parse_uri("skill://team/csv/SKILL.md") == ("team/csv", "SKILL.md")
    assert c.parse_uri("skill://pdf/" + "/".join(["x"] * 1000)) == ("pdf", "/".join(["x"] * 1000))


def test_an_overlong_uri_is_refused_with_one_line(cat):
    c, _, _ = cat
    with pytest.raises(UnknownSkillError, match="over the"):
        c.parse_uri("skill://" + "a/" * 10_000)
    with pytest.raises(UnknownSkillError) as err:
        c.parse_uri("x" * 1_000_000)
    assert len(str(err.value)) < 400


def test_a_hard_link_inside_a_skill_folder_is_not_served(cat):
    c, lib, root = cat
    os.link(root / "secret.txt", lib / "pdf" / "innocent.txt")
    with pytest.raises(SkillFileError, match="hard link"):
        c.skill_file("pdf", "innocent.txt")
    assert c.skill_file("pdf", "notes.txt")[0] == b"notes\n"


def test_fifo_and_device_links_in_a_skill_folder_are_refused_at_once(cat):
    c, lib, _ = cat
    os.mkfifo(lib / "pdf" / "pipe.txt")
    with pytest.raises(SkillFileError, match="not a regular file"):
        c.skill_file("pdf", "pipe.txt")


@pytest.mark.parametrize("relpath", [".env", ".git/config", "scripts/.secret", "alias.txt", "private.txt",
                                     "linkdir/config"])
def test_hidden_and_private_files_of_a_skill_folder_are_not_served(cat, relpath):
    """M8: dotfiles, dot-folders, links to them and owner-only files are refused; a plain file is served."""
    c, lib, _ = cat
    folder = lib / "pdf"
    (folder / ".env").write_text("API_KEY=sk-123\n")
    (folder / ".env").chmod(0o600)
    (folder / ".git").mkdir()
    (folder / ".git" / "config").write_text("[remote]\n")
    (folder / "scripts").mkdir()
    (folder / "scripts" / ".secret").write_text("x\n")
    (folder / "alias.txt").symlink_to(".env")  # an innocent name for a hidden file
    (folder / "linkdir").symlink_to(".git")
    (folder / "private.txt").write_text("mine\n")
    (folder / "private.txt").chmod(0o600)
    (folder / "notes.txt").chmod(0o644)
    with pytest.raises(SkillFileError, match="hidden|not readable by everyone"):
        c.skill_file("pdf", relpath)
    assert c.skill_file("pdf", "notes.txt")[0] == b"notes\n"
