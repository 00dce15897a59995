"""``skillsight install`` under hostile and clumsy settings files: numbers kept as written, symlinks
written through, FIFOs and deep nesting refused with one line, concurrent writers not lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest
from fakes import HashEncoder, toy_skills

from skillsight_fast import SkillIndex
from skillsight_fast.agents.hosts import ClaudeCode
from skillsight_fast.agents.install import apply
from skillsight_fast.cli import main


@pytest.fixture
def idx(tmp_path):
    SkillIndex.build(toy_skills(), HashEncoder()).save(tmp_path / "idx")
    return tmp_path / "idx"


def _project(tmp_path, text):
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    (proj / ".claude" / "settings.json").write_text(text)
    return proj


def test_a_huge_number_is_written_back_as_written_never_as_infinity(tmp_path, idx):
    proj = _project(
        tmp_path, '{"weight": 1e400, "ratio": 1.50, "tiny": -2.5E-400, "n": 12345678901234567890}'
    )
    assert main(["install", "claude-code", "--project", "--dir", str(proj), "-i", str(idx), "--no-mcp"]) == 0
    text = (proj / ".claude" / "settings.json").read_text()
    assert "Infinity" not in text and "NaN" not in text
    assert '"weight": 1e400' in text and '"ratio": 1.50' in text and '"tiny": -2.5E-400' in text
    assert '"n": 12345678901234567890' in text
    # a strict parser (the host's) still loads it
    json.loads(text, parse_constant=lambda c: pytest.fail(f"non-standard constant {c}"))


def test_a_symlinked_settings_file_is_written_through_to_its_target(tmp_path, idx):
    dotfiles = tmp_path / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text('{"model": "opus"}')
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    link = proj / ".claude" / "settings.json"
    link.symlink_to(dotfiles / "settings.json")
    assert main(["install", "claude-code", "--project", "--dir", str(proj), "-i", str(idx), "--no-mcp"]) == 0
    assert link.is_symlink()
    data = json.loads((dotfiles / "settings.json").read_text())
    assert data["model"] == "opus" and "hook claude-code" in json.dumps(data["hooks"])


def _run_install(proj, idx, timeout=20):
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "skillsight_fast.cli",
            "install",
            "claude-code",
            "--project",
            "--dir",
            str(proj),
            "-i",
            str(idx),
            "--no-mcp",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_fifo_settings_file_is_refused_at_once(tmp_path, idx):
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    os.mkfifo(proj / ".claude" / "settings.json")
    out = _run_install(proj, idx)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "not a regular file" in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_settings_nested_100000_deep_give_one_line(tmp_path, idx):
    proj = _project(tmp_path, '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}")
    out = _run_install(proj, idx)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "nested" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    proj2 = _project(tmp_path / "b", '{"a": ' + "[" * 500 + "]" * 500 + "}")  # deep enough to break a copy
    out = _run_install(proj2, idx)
    assert out.returncode == 1 and "Traceback" not in out.stderr and "nested" in out.stderr


def test_a_file_changed_by_another_writer_is_merged_again_not_overwritten(tmp_path, idx, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"numStartups": 1}))
    changes = ClaudeCode().plan(idx, scope="user", home=home, hook=False)
    # the host rewrites the file between our read and our write
    (home / ".claude.json").write_text(json.dumps({"numStartups": 2, "tipsShown": ["x"]}))
    apply(changes)
    data = json.loads((home / ".claude.json").read_text())
    assert data["numStartups"] == 2 and data["tipsShown"] == ["x"] and "skillsight" in data["mcpServers"]


def test_concurrent_installs_are_serialized_by_the_lock(tmp_path, idx):
    home = tmp_path / "home"
    home.mkdir()
    (home / ".claude.json").write_text(json.dumps({"keep": True}))
    errors = []

    def one(i):
        try:
            apply(ClaudeCode().plan(idx, scope="user", home=home, hook=False))
            with open(home / ".claude.json") as fh:  # a reader under no lock always sees a whole file
                json.load(fh)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    data = json.loads((home / ".claude.json").read_text())
    assert data["keep"] is True and "skillsight" in data["mcpServers"]
    assert [p.name for p in home.iterdir()] == [".claude.json"]  # no lock or temporary file left
