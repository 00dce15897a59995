"""``skillsight install HOST`` for every host, checked against each host's documented formats.

- Gemini CLI (docs/hooks/reference.md of google-gemini/gemini-cli): hooks live in settings.json under
  ``hooks.<Event>`` as hook definitions ``{matcher?, sequential?, hooks: [...]}`` whose hook
  configurations are ``{type: "command", command, name?, timeout? (ms), description?}``; a
  ``BeforeAgent`` hook reads ``{session_id, transcript_path, cwd, hook_event_name, timestamp, prompt}``
  on stdin and answers ``{"hookSpecificOutput": {"hookEventName": "BeforeAgent", "additionalContext":
  ...}}`` on stdout (exit 0, stdout parsed as JSON, nothing else on stdout). MCP servers:
  ``mcpServers.NAME = {command, args}``.
- Claude Code plugins: ``.claude-plugin/plugin.json`` (``name`` required), ``hooks/hooks.json``
  (``{"hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command", "timeout"}]}]}}``),
  ``.mcp.json`` (``{"mcpServers": {...}}``) at the plugin root; a marketplace folder's
  ``.claude-plugin/marketplace.json`` lists it (``name``, ``owner.name``, ``plugins[].name/source``).
- Claude Code settings: by default the user's own files; ``--local`` the uncommitted
  ``.claude/settings.local.json``; the team's files only with ``--project``.

The hook commands are run as written in the installed files (through a shell, as the hosts run them)
on a real index of real SKILL.md files.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from skillsight_fast.cli import main

pytestmark = pytest.mark.model

GEMINI_HOOK_DEF = {"matcher", "sequential", "hooks"}
GEMINI_HOOK_CONFIG = {"type", "command", "name", "timeout", "description"}


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("hosts")
    for name, desc in (
        ("pdf", "Extract text and tables from PDF files, fill PDF forms, merge PDF documents."),
        ("git", "Commit, branch, rebase and resolve merge conflicts with git."),
        ("docker", "Write Dockerfiles and run containers with docker compose."),
    ):
        (root / "lib" / name).mkdir(parents=True)
        (root / "lib" / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\nBody.\n")
    assert main(["index", str(root / "lib"), "-o", str(root / "idx"), "-q"]) == 0
    return root / "idx"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    from skillsight_fast.models import cache_root

    monkeypatch.setenv("SKILLSIGHT_CACHE", str(cache_root()))  # the exported model stays where it is
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no real warm server of this user is asked
    return h


def run_shell(command: str, payload: dict, cwd: Path) -> subprocess.CompletedProcess:
    """A hook command as a host runs it: through the shell, the event JSON on stdin."""
    return subprocess.run(
        command,
        shell=True,
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
        env=os.environ.copy(),
        check=False,
    )


def gemini_event(prompt: str, event: str = "BeforeAgent") -> dict:
    return {
        "session_id": "s-1",
        "transcript_path": "/home/me/.gemini/tmp/s-1.json",
        "cwd": "/home/me/proj",
        "hook_event_name": event,
        "timestamp": "2026-01-28T10:00:00.000Z",
        "prompt": prompt,
    }


def check_gemini_hooks(settings: dict) -> list[dict]:
    """The documented schema of settings.hooks: every definition and configuration; returns ours."""
    ours = []
    for event, defs in settings["hooks"].items():
        assert isinstance(defs, list), event
        for d in defs:
            assert set(d) <= GEMINI_HOOK_DEF and isinstance(d["hooks"], list)
            for h in d["hooks"]:
                assert (
                    set(h) <= GEMINI_HOOK_CONFIG and h["type"] == "command" and isinstance(h["command"], str)
                )
                if "timeout" in h:
                    assert isinstance(h["timeout"], int) and h["timeout"] >= 1000  # milliseconds
                if event == "BeforeAgent" and "hook gemini" in h["command"]:
                    ours.append(h)
    return ours


def test_install_gemini_merges_user_settings_in_the_documented_schema(index, home, tmp_path):
    settings = {
        "theme": "GitHub",
        "mcpServers": {"git": {"command": "mcp-server-git", "args": []}},
        "hooks": {
            "BeforeAgent": [{"matcher": "*", "hooks": [{"type": "command", "command": "echo {}"}]}],
            "AfterTool": [{"hooks": [{"type": "command", "command": "log.sh", "timeout": 5000}]}],
        },
    }
    (home / ".gemini").mkdir()
    path = home / ".gemini" / "settings.json"
    path.write_text(json.dumps(settings))
    project = tmp_path / "proj"
    project.mkdir()
    assert main(["install", "gemini", "-i", str(index), "--dir", str(project)]) == 0
    new = json.loads(path.read_text())
    assert new["theme"] == "GitHub" and new["mcpServers"]["git"] == settings["mcpServers"]["git"]
    assert new["hooks"]["AfterTool"] == settings["hooks"]["AfterTool"]
    assert new["hooks"]["BeforeAgent"][0] == settings["hooks"]["BeforeAgent"][0]
    (ours,) = check_gemini_hooks(new)
    server = new["mcpServers"]["skillsight"]
    assert set(server) == {"command", "args"} and server["args"][-5:] == [
        "--mcp",
        "-i",
        str(index),
        "--endpoint",
        "-q",
    ]
    assert list(project.iterdir()) == []  # nothing in the project
    before = path.read_text()
    assert main(["install", "gemini", "-i", str(index)]) == 0
    assert path.read_text() == before  # idempotent

    # the hook, run as Gemini CLI runs it, answers a BeforeAgent event in the documented shape
    done = run_shell(ours["command"], gemini_event("merge these two PDF documents into one file"), tmp_path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert set(out) == {"hookSpecificOutput"}
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "BeforeAgent" and "- pdf (" in spec["additionalContext"]


def test_gemini_hook_with_nothing_to_add_prints_an_empty_json_object(index, home, tmp_path):
    cmd = shlex.join([sys.executable, "-m", "skillsight_fast.cli", "hook", "gemini", "-i"])
    for payload, idx in (
        (gemini_event("merge pdf files", event="UserPromptSubmit"), index),  # not its event
        (gemini_event("   "), index),
        (gemini_event("merge pdf files"), tmp_path / "missing-index"),
    ):
        done = run_shell(f"{cmd} {idx}", payload, tmp_path)
        assert done.returncode == 0 and json.loads(done.stdout) == {} and done.stderr == ""


def test_install_gemini_project_scope_and_no_local_scope(index, home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    assert main(["install", "gemini", "--project", "--dir", str(project), "-i", str(index)]) == 0
    assert check_gemini_hooks(json.loads((project / ".gemini" / "settings.json").read_text()))
    assert not (home / ".gemini").exists()
    assert main(["install", "gemini", "--local", "-i", str(index)]) == 1


def test_install_claude_code_writes_the_users_own_settings_by_default(index, home, tmp_path, monkeypatch):
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)
    assert main(["install", "claude-code", "-i", str(index)]) == 0
    assert list(project.iterdir()) == []  # no machine paths in files a team commits
    assert "hook claude-code" in (home / ".claude" / "settings.json").read_text()
    assert "skillsight" in json.loads((home / ".claude.json").read_text())["mcpServers"]


def test_install_claude_code_local_writes_the_uncommitted_files(index, home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (home / ".claude.json").write_text(json.dumps({"numStartups": 2, "projects": {"/other": {"x": 1}}}))
    assert main(["install", "claude-code", "--local", "--dir", str(project), "-i", str(index)]) == 0
    assert sorted(p.name for p in (project / ".claude").iterdir()) == ["settings.local.json"]
    assert not (project / ".mcp.json").exists()
    local = json.loads((project / ".claude" / "settings.local.json").read_text())
    assert "hook claude-code" in local["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    cfg = json.loads((home / ".claude.json").read_text())
    assert cfg["numStartups"] == 2 and cfg["projects"]["/other"] == {"x": 1}
    assert "skillsight" in cfg["projects"][str(project.absolute())]["mcpServers"]


def test_install_claude_code_plugin_in_the_documented_layout(index, home, tmp_path, capsys):
    assert main(["install", "claude-code", "--plugin", "-i", str(index)]) == 0
    market = home / ".skillsight" / "claude-plugin"
    assert f"/plugin marketplace add {market}" in capsys.readouterr().out
    catalog = json.loads((market / ".claude-plugin" / "marketplace.json").read_text())
    assert catalog["name"] and catalog["owner"]["name"]
    (entry,) = catalog["plugins"]
    plugin = (market / entry["source"]).resolve()
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == entry["name"] == "skillsight" and manifest["version"]
    assert sorted(p.name for p in (plugin / ".claude-plugin").iterdir()) == ["plugin.json"]
    hooks = json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"]
    assert set(hooks) == {"UserPromptSubmit"}
    (group,) = hooks["UserPromptSubmit"]
    (hook,) = group["hooks"]
    assert hook["type"] == "command" and isinstance(hook["timeout"], int) and hook["timeout"] <= 60
    servers = json.loads((plugin / ".mcp.json").read_text())["mcpServers"]
    assert set(servers["skillsight"]) == {"command", "args"}
    assert not list(tmp_path.glob("*.json")) and not (tmp_path / ".claude").exists()

    event = {
        "session_id": "s",
        "transcript_path": "/t.jsonl",
        "cwd": str(tmp_path),
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "resolve the merge conflicts in my git rebase",
    }
    done = run_shell(hook["command"], event, tmp_path)
    assert done.returncode == 0, done.stderr
    spec = json.loads(done.stdout)["hookSpecificOutput"]
    assert spec["hookEventName"] == "UserPromptSubmit" and "- git (" in spec["additionalContext"]
    before = {p: p.read_text() for p in market.rglob("*.json")}
    assert main(["install", "claude-code", "--plugin", "-i", str(index)]) == 0
    assert {p: p.read_text() for p in market.rglob("*.json")} == before


def test_gemini_has_no_plugin_option(index, home, capsys):
    assert main(["install", "gemini", "--plugin", "-i", str(index)]) == 1
    assert "--plugin is for Claude Code" in capsys.readouterr().err
