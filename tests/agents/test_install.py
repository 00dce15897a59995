"""skillsight install claude-code merges into existing settings and keeps every other key; the hook
never breaks its host."""

from __future__ import annotations

import io
import json

from fakes import HashEncoder, toy_skills

from skillsight_fast import SkillIndex
from skillsight_fast.agents.hook import format_context
from skillsight_fast.agents.hook import main as hook_main
from skillsight_fast.agents.hosts import HOSTS
from skillsight_fast.cli import main


def _index(tmp_path):
    SkillIndex.build(toy_skills(), HashEncoder()).save(tmp_path / "idx")
    return tmp_path / "idx"


def test_install_merges_and_is_idempotent(tmp_path, capsys):
    idx = _index(tmp_path)
    proj = tmp_path / "proj"
    (proj / ".claude").mkdir(parents=True)
    other_hook = {"hooks": [{"type": "command", "command": "echo hi"}]}
    settings = {"model": "opus", "permissions": {"allow": ["Bash(ls)"]},
                "hooks": {"UserPromptSubmit": [other_hook], "Stop": [{"hooks": [{"type": "command", "command": "x"}]}]}}
    (proj / ".claude" / "settings.json").write_text(json.dumps(settings))
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"git": {"command": "uvx", "args": ["mcp-server-git"]}}}))
    args = ["install", "claude-code", "--project", "--dir", str(proj), "-i", str(idx)]
    assert main(args + ["--dry-run"]) == 0
    diff = capsys.readouterr().out
    assert "+++ " in diff and "hook claude-code" in diff and '"skillsight"' in diff
    assert json.loads((proj / ".claude" / "settings.json").read_text()) == settings  # dry run wrote nothing
    assert main(args) == 0
    new = json.loads((proj / ".claude" / "settings.json").read_text())
    assert new["model"] == "opus" and new["permissions"] == settings["permissions"]
    assert new["hooks"]["Stop"] == settings["hooks"]["Stop"]
    ups = new["hooks"]["UserPromptSubmit"]
    assert ups[0] == other_hook and len(ups) == 2 and "hook claude-code" in ups[1]["hooks"][0]["command"]
    servers = json.loads((proj / ".mcp.json").read_text())["mcpServers"]
    assert servers["git"] == {"command": "uvx", "args": ["mcp-server-git"]}
    assert servers["skillsight"]["args"][-5:] == ["--mcp", "-i", str(idx.absolute()), "--endpoint", "-q"]
    before = [(proj / ".claude" / "settings.json").read_text(), (proj / ".mcp.json").read_text()]
    capsys.readouterr()
    assert main(args) == 0  # twice: nothing changes
    assert [(proj / ".claude" / "settings.json").read_text(), (proj / ".mcp.json").read_text()] == before
    assert "unchanged" in capsys.readouterr().out


def test_install_user_scope_and_bad_files(tmp_path, monkeypatch, capsys):
    idx = _index(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / ".claude.json").write_text(json.dumps({"numStartups": 3, "projects": {"/x": {}}}))
    assert main(["install", "claude-code", "--user", "-i", str(idx)]) == 0
    cfg = json.loads((tmp_path / "home" / ".claude.json").read_text())
    assert cfg["numStartups"] == 3 and cfg["projects"] == {"/x": {}} and "skillsight" in cfg["mcpServers"]
    assert (tmp_path / "home" / ".claude" / "settings.json").is_file()
    (tmp_path / "home" / ".claude.json").write_text("{broken")
    assert main(["install", "claude-code", "--user", "-i", str(idx)]) == 1
    assert "invalid JSON" in capsys.readouterr().err
    assert (tmp_path / "home" / ".claude.json").read_text() == "{broken"
    assert main(["install", "claude-code", "-i", str(tmp_path / "missing"), "--dir", str(tmp_path)]) == 1


def test_hook_never_breaks_the_host(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    idx = _index(tmp_path)
    (idx / "manifest.json").write_text("{damaged")
    for payload in ('{"prompt": "merge pdf files", "hook_event_name": "UserPromptSubmit"}', "not json", "[]", ""):
        out = io.StringIO()
        assert hook_main(["claude-code", "-i", str(idx)], io.StringIO(payload), out) == 0
        assert out.getvalue() == ""
    out = io.StringIO()
    assert hook_main(["--bogus"], io.StringIO("{}"), out) == 0 and out.getvalue() == ""
    assert main(["hook", "claude-code"]) == 0  # missing -i: still exit 0, never argparse's 2


def test_hook_output_shape():
    hook_output = HOSTS["claude-code"].hook_output
    answer = {"hits": [{"id": "pdf", "name": "pdf", "path": "/s/pdf/SKILL.md", "description": "Merge PDFs.",
                        "evidence": ["merge", "pdf"]}]}
    out = json.loads(hook_output(format_context(answer)))
    ctx = out["hookSpecificOutput"]["additionalContext"]
    assert out["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "/s/pdf/SKILL.md" in ctx and "merge, pdf" in ctx
    assert hook_output(format_context({"hits": []})) == ""
