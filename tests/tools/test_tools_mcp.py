"""Indexing the tools of real MCP servers (the reference servers from PyPI), over stdio."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from fakes import HashEncoder

pytest.importorskip("mcp")
BIN = Path(sys.executable).parent


def _server(name: str) -> str:
    exe = BIN / name
    if not exe.exists() and shutil.which(name) is None:
        pytest.skip(f"{name} is not installed (pip install {name})")
    return str(exe if exe.exists() else shutil.which(name))


def test_real_servers_are_indexed_as_server_slash_tool():
    from skillsight_fast import SkillIndex
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.tools.catalog import parse_server_arg
    from skillsight_fast.tools.mcp_source import read_mcp_tools

    skills = read_mcp_tools([parse_server_arg(f"time={_server('mcp-server-time')}"),
                             parse_server_arg(_server("mcp-server-git")),
                             parse_server_arg(f"fetch={_server('mcp-server-fetch')}")])
    ids = {s.id for s in skills}
    # git has no configured name: the name it reports ("mcp-git") without the MCP affix
    assert {"time/get_current_time", "time/convert_time", "git/git_status", "fetch/fetch"} <= ids
    tz = next(s for s in skills if s.id == "time/get_current_time")
    assert "timezone" in tz.body and tz.description.startswith("Get current time")
    index = SkillIndex.build(skills, HashEncoder())
    hits = find_skills(index, ["get the current time in a timezone"], k=3)[0].hits
    assert hits[0].id == "time/get_current_time"


def test_index_cli_with_mcp_and_a_broken_server(tmp_path, capsys, monkeypatch):
    from skillsight_fast.cli import main

    assert main(["index", "--mcp", "/nonexistent/mcp-server", "-o", str(tmp_path / "i"), "-q"]) == 1
    assert "cannot list its tools" in capsys.readouterr().err
    assert main(["index", "-o", str(tmp_path / "i"), "-q"]) == 1
    assert "nothing to index" in capsys.readouterr().err


def test_one_naming_rule_for_index_and_proxy():
    """A server without a configured name is named alike by ``index --mcp`` and the proxy; a
    configured name (``NAME=``, an ``mcpServers`` key) is kept as written by both."""
    from skillsight_fast.tools.catalog import ServerConfig, parse_mcp_config, parse_server_arg
    from skillsight_fast.tools.mcp_source import canonical_server_name, read_mcp_tools, server_name
    from skillsight_fast.tools.upstream import Upstream

    assert [canonical_server_name(n) for n in ("mcp-git", "mcp-server-git", "mcp_time", "github-mcp-server",
                                               "Filesystem", "mcp", "a/b-server")] == [
        "git", "git", "time", "github", "Filesystem", "mcp", "a-b"]
    git = _server("mcp-server-git")
    # unnamed: the reported name "mcp-git" and the command "mcp-server-git" both give "git",
    # the key the documented servers.json uses for this server
    assert {s.id.split("/")[0] for s in read_mcp_tools([parse_server_arg(git)])} == {"git"}
    assert server_name(ServerConfig(command=git)) == "git"
    configs = parse_mcp_config({"mcpServers": {"git": {"command": git}, "mcp-vcs": {"command": git}}})
    assert [Upstream(c, None).name for c in configs] == ["git", "mcp-vcs"]  # keys kept as written
    named = read_mcp_tools([parse_server_arg(f"mcp-vcs={git}")])
    assert {s.id.split("/")[0] for s in named} == {"mcp-vcs"}
