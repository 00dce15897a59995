"""The host registry: a new host is one module (a ``Host``) and one entry in ``HOSTS``; the hook's
options are one table read by ``skillsight hook``, the hook's own parsing and the installers.

A throwaway host registered in a test shows up in ``install``'s and ``hook``'s choices, gets its
settings written where it says, and its hook answers its own event in its own shape, on a real index
of real SKILL.md files.
"""

from __future__ import annotations

import argparse
import io
import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from skillsight_fast.agents.hook import main as hook_main
from skillsight_fast.agents.hook_options import HOOK_OPTIONS, add_hook_args, hook_argv
from skillsight_fast.agents.hosts import HOSTS, Host, get_host
from skillsight_fast.cli import build_parser, main
from skillsight_fast.errors import SkillsightError


class Throwaway(Host):
    """A host that exists only in this test: one settings file, hooks under ``hooks.OnPrompt``."""

    name = "throwaway"
    title = "Throwaway"
    event = "OnPrompt"
    nothing = '{"none": true}'
    scopes = ("user",)

    def settings_files(self, scope: str, project: Path, home: Path) -> tuple[Path, Path]:
        path = home / ".throwaway" / "config.json"
        return path, path

    def merge_hook(self, settings: dict[str, Any], command: str) -> dict[str, Any]:
        return {**settings, "hooks": {self.event: [{"command": command}]}}


@pytest.fixture
def throwaway(monkeypatch) -> Host:
    host = Throwaway()
    monkeypatch.setitem(HOSTS, host.name, host)
    return host


def _choices(parser: argparse.ArgumentParser, command: str) -> list[str]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    host = next(a for a in sub.choices[command]._actions if a.dest == "host")
    return list(host.choices)


def test_every_registered_host_is_a_choice_of_install_and_hook(throwaway):
    parser = build_parser()
    for command in ("install", "hook"):
        assert set(_choices(parser, command)) == set(HOSTS) >= {"claude-code", "gemini", "throwaway"}
    assert get_host("throwaway") is throwaway
    with pytest.raises(SkillsightError, match="unknown host 'nowhere': one of claude-code, gemini, throwaway"):
        get_host("nowhere")


def test_a_registered_host_is_installed_where_it_says(throwaway, tmp_path, capsys):
    idx = tmp_path / "idx"
    idx.mkdir()
    (idx / "manifest.json").write_text("{}")  # all install needs of an index
    home = tmp_path / "home"
    assert main(["install", "throwaway", "-i", str(idx), "--json", "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["written"] == []
    changes = throwaway.plan(idx, home=home, prefix=["skillsight"])
    assert [c.path for c in changes] == [home / ".throwaway" / "config.json"]  # hook and server: one file
    config = json.loads(changes[0].new)
    command = shlex.split(config["hooks"]["OnPrompt"][0]["command"])
    assert command == ["skillsight", "hook", "throwaway", "-i", str(idx.absolute())]
    assert config["mcpServers"]["skillsight"]["args"][:3] == ["serve", "--mcp", "-i"]
    with pytest.raises(SkillsightError, match="Throwaway has user settings, not 'project'"):
        throwaway.plan(idx, scope="project", home=home)
    assert main(["install", "throwaway", "--plugin", "-i", str(idx)]) == 1
    assert "--plugin is for Claude Code" in capsys.readouterr().err


def test_the_hook_options_table_round_trips_through_the_hooks_parser():
    p = argparse.ArgumentParser()
    add_hook_args(p, HOSTS)
    values = {"k": 7, "min_cosine": "none", "no_abstain": True, "budget": 2.5, "server_timeout": 0.1,
              "no_cold": True, "verbose": True}
    assert {o.dest for o in HOOK_OPTIONS} == set(values) | {"index"}
    args = vars(p.parse_args(hook_argv("gemini", "/idx", **values)))
    assert args == {"host": "gemini", "index": "/idx", **values}
    defaults = vars(p.parse_args(hook_argv("claude-code", "/idx")))
    assert defaults == {"host": "claude-code", "index": "/idx", **{o.dest: o.default for o in HOOK_OPTIONS
                                                                   if o.dest != "index"}}
    with pytest.raises(TypeError, match="no hook option colour"):
        hook_argv("gemini", "/idx", colour="red")


@pytest.mark.model
def test_a_registered_hosts_hook_answers_its_own_event_in_its_own_shape(throwaway, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))  # no real warm server of this user is asked
    for name, desc in (("pdf", "Extract text and tables from PDF files, merge PDF documents."),
                       ("git", "Commit, branch, rebase and resolve merge conflicts with git.")):
        (tmp_path / "lib" / name).mkdir(parents=True)
        (tmp_path / "lib" / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {desc}\n---\nBody.\n")
    assert main(["index", str(tmp_path / "lib"), "-o", str(tmp_path / "idx"), "-q"]) == 0
    argv = hook_argv("throwaway", str(tmp_path / "idx"), no_abstain=True, k=1)

    def run(event: str) -> str:
        out = io.StringIO()
        payload = json.dumps({"hook_event_name": event, "prompt": "merge these two PDF documents"})
        assert hook_main(argv, io.StringIO(payload), out) == 0
        return out.getvalue()

    spec = json.loads(run("OnPrompt"))["hookSpecificOutput"]
    assert spec["hookEventName"] == "OnPrompt" and "- pdf (" in spec["additionalContext"]
    assert run("UserPromptSubmit") == '{"none": true}\n'  # another host's event: this host's "nothing"
