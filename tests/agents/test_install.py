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


def test_install_project_writes_paths_that_work_on_a_teammates_checkout(tmp_path, capsys):
    import os
    import re
    import shutil
    import subprocess

    proj = tmp_path / "proj"
    SkillIndex.build(toy_skills(), HashEncoder()).save(proj / ".skillsight" / "index")
    assert main(["install", "claude-code", "--project", "--dir", str(proj), "-i", str(proj / ".skillsight" / "index")]) == 0
    err = capsys.readouterr().err
    assert "note: the team's files start `skillsight` from the PATH" in err
    texts = (proj / ".claude" / "settings.json").read_text() + (proj / ".mcp.json").read_text()
    assert str(tmp_path) not in texts and "python" not in texts  # nothing of this machine
    # a teammate's checkout elsewhere: the hook command as their shell runs it
    mate = tmp_path / "elsewhere" / "checkout"
    shutil.copytree(proj, mate)
    command = json.loads((mate / ".claude" / "settings.json").read_text())["hooks"]["UserPromptSubmit"][0]
    command = command["hooks"][0]["command"]
    assert command.startswith("skillsight hook claude-code -i ")
    shown = subprocess.run(["bash", "-c", "printf '%s\\n' " + command.removeprefix("skillsight ")], text=True,
                           capture_output=True, check=True, cwd=tmp_path, env={**os.environ, "CLAUDE_PROJECT_DIR": str(mate)})
    argv = shown.stdout.splitlines()
    index_arg = argv[argv.index("-i") + 1]
    assert index_arg == f"{mate}/.skillsight/index" and (mate / ".skillsight" / "index" / "manifest.json").is_file()
    # .mcp.json: ${VAR:-default} as Claude Code expands it, with and without the variable set
    server = json.loads((mate / ".mcp.json").read_text())["mcpServers"]["skillsight"]
    assert server["command"] == "skillsight"

    def expand(text, env):
        return re.sub(r"\$\{(\w+)(?::-([^}]*))?\}", lambda m: env.get(m[1], m[2] or ""), text)

    for env in ({"CLAUDE_PROJECT_DIR": str(mate)}, {}):
        args = [expand(a, env) for a in server["args"]]
        where = args[args.index("-i") + 1]
        assert (mate / where / "manifest.json").is_file()  # relative: the server starts in the project


def test_install_project_says_why_paths_are_this_machines(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    idx = _index(tmp_path)
    proj = tmp_path / "proj"
    proj.mkdir()
    assert main(["install", "claude-code", "--project", "--dir", str(proj), "-i", str(idx)]) == 0
    err = capsys.readouterr().err
    assert "name this machine's paths" in err and "outside the project" in err
    assert str(idx) in (proj / ".mcp.json").read_text()  # still works here
    assert main(["install", "gemini", "--project", "--dir", str(proj), "-i", str(idx), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert "no project-root variable" in out["note"]
    assert main(["install", "claude-code", "--local", "--dir", str(proj), "-i", str(idx)]) == 0
    assert "note:" not in capsys.readouterr().err  # uncommitted files: this machine's paths are right
