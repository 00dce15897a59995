"""``skillsight install HOST``: where each agent host reads a prompt hook and an MCP server, and what
to write there.

Hosts and the files written (each merge adds or replaces only skillsight's own entries and keeps
every other key; nothing is written into files a team commits unless asked with ``--project``):

- **Claude Code, settings** (:func:`skillsight_fast.agents.install.plan_claude_code`): ``user`` (the default)
  writes ``~/.claude/settings.json`` (hook) and ``~/.claude.json`` (``mcpServers``); ``local`` writes
  the project's uncommitted ``.claude/settings.local.json`` and the project's entry of
  ``~/.claude.json`` (``projects.<folder>.mcpServers``, Claude Code's "local" MCP scope);
  ``project`` writes the team's ``.claude/settings.json`` and ``.mcp.json``.
- **Claude Code, plugin** (:func:`plan_claude_plugin`): a plugin folder (``.claude-plugin/plugin.json``,
  ``hooks/hooks.json`` with the ``UserPromptSubmit`` hook, ``.mcp.json`` with the server) inside a
  one-plugin marketplace folder (``.claude-plugin/marketplace.json``), installed the way Claude Code
  installs plugins: ``/plugin marketplace add DIR`` then ``/plugin install skillsight@skillsight-local``.
- **Gemini CLI** (:func:`plan_gemini`): ``~/.gemini/settings.json`` (``user``, the default) or the
  project's ``.gemini/settings.json`` (``project``): a ``hooks.BeforeAgent`` command hook running
  ``skillsight hook gemini`` (its ``hookSpecificOutput.additionalContext`` is appended to the prompt)
  and ``mcpServers.skillsight``.

The formats follow each host's documentation: Claude Code's hooks, settings, MCP and plugins
reference; Gemini CLI's hooks reference (``docs/hooks/reference.md``: hook groups under the event
name, ``type``/``command``/``name``/``timeout`` in milliseconds) and MCP server settings
(``mcpServers.NAME.command``/``args``).
"""

from __future__ import annotations

import copy
import json
import os
import shlex
from pathlib import Path
from typing import Any

from skillsight_fast._version import __version__
from skillsight_fast.agents.install import (
    HOOK_TIMEOUT,
    SERVER_NAME,
    Change,
    _change,
    command_prefix,
    home_dir,
    hook_command,
    hook_groups,
    index_dir,
    is_own_hook,
    merge_hook,
    merge_server,
    plan_claude_code,
    server_entry,
)
from skillsight_fast.errors import SkillsightError

HOSTS = ("claude-code", "gemini")
SCOPES = ("user", "local", "project")
#: The plugin's name, and the name of the one-plugin marketplace folder that carries it.
PLUGIN_NAME = "skillsight"
MARKETPLACE_NAME = "skillsight-local"
#: Where ``install claude-code --plugin`` puts the marketplace folder by default (under the home folder).
DEFAULT_PLUGIN_DIR = Path(".skillsight") / "claude-plugin"
#: Gemini CLI's hook timeout is in milliseconds.
GEMINI_HOOK_TIMEOUT_MS = HOOK_TIMEOUT * 1000
GEMINI_HOOK_MARK = "hook gemini"
DESCRIPTION = ("Skills from the local skill library that fit each prompt (skillsight-fast), and an MCP server "
               "to search it")


def _json_change(path: Path, new: dict[str, Any]) -> Change:
    """A whole file of ours: old text (if any) and the new one."""
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    text = json.dumps(new, indent=2, ensure_ascii=False) + "\n"
    return Change(path, old, text)


# --- Claude Code -------------------------------------------------------------------------------------


def plan_claude_code_local(
    index: str | os.PathLike[str],
    *,
    project: str | os.PathLike[str] = ".",
    home: str | os.PathLike[str] | None = None,
    hook: bool = True,
    mcp: bool = True,
    watch: bool = False,
    prefix: list[str] | None = None,
) -> list[Change]:
    """Claude Code's local scope: the hook in ``<project>/.claude/settings.local.json`` (not committed),
    the server in ``~/.claude.json`` under ``projects.<project folder>.mcpServers``."""
    idx = index_dir(index)
    root = Path(project).expanduser().absolute()
    home_path = home_dir(home)
    changes = []
    if hook:
        changes.append(
            _change(
                root / ".claude" / "settings.local.json",
                lambda data: merge_hook(data, hook_command(idx, prefix)),
            )
        )
    if mcp:

        def merge(data: dict[str, Any]) -> dict[str, Any]:
            out = copy.deepcopy(data)
            projects = out.setdefault("projects", {})
            if not isinstance(projects, dict):
                raise SkillsightError("~/.claude.json: 'projects' is not an object; nothing was changed")
            entry = projects.setdefault(str(root), {})
            if not isinstance(entry, dict):
                raise SkillsightError(
                    f"~/.claude.json: projects[{str(root)!r}] is not an object; nothing was changed"
                )
            projects[str(root)] = merge_server(entry, server_entry(idx, prefix, watch))
            return out

        changes.append(_change(home_path / ".claude.json", merge))
    return changes


def plan_claude_plugin(
    index: str | os.PathLike[str],
    folder: str | os.PathLike[str] | None = None,
    *,
    home: str | os.PathLike[str] | None = None,
    hook: bool = True,
    mcp: bool = True,
    watch: bool = False,
    prefix: list[str] | None = None,
) -> list[Change]:
    """The files of a Claude Code plugin (hook and MCP server) in a one-plugin marketplace folder.

    ``folder`` (default ``~/.skillsight/claude-plugin``) gets ``.claude-plugin/marketplace.json`` and
    the plugin in ``skillsight/``: ``.claude-plugin/plugin.json``, ``hooks/hooks.json``, ``.mcp.json``.
    The commands name this Python and the index by absolute path: the folder is the user's own.
    """
    idx = index_dir(index)
    root = Path(folder).expanduser().absolute() if folder is not None else home_dir(home) / DEFAULT_PLUGIN_DIR
    plugin = root / PLUGIN_NAME
    changes = [
        _json_change(
            root / ".claude-plugin" / "marketplace.json",
            {
                "name": MARKETPLACE_NAME,
                "owner": {"name": "skillsight-fast"},
                "plugins": [
                    {
                        "name": PLUGIN_NAME,
                        "source": f"./{PLUGIN_NAME}",
                        "description": DESCRIPTION,
                        "version": __version__,
                    }
                ],
            },
        ),
        _json_change(
            plugin / ".claude-plugin" / "plugin.json",
            {
                "name": PLUGIN_NAME,
                "version": __version__,
                "description": DESCRIPTION,
                "author": {"name": "skillsight-fast"},
                "license": "Apache-2.0",
                "keywords": ["skills", "retrieval", "mcp"],
            },
        ),
    ]
    if hook:
        changes.append(
            _json_change(
                plugin / "hooks" / "hooks.json",
                {
                    "description": "skillsight: the skills that fit the prompt, or nothing",
                    "hooks": {
                        "UserPromptSubmit": [
                            {
                                "hooks": [
                                    {
                                        "type": "command",
                                        "command": hook_command(idx, prefix),
                                        "timeout": HOOK_TIMEOUT,
                                    }
                                ]
                            }
                        ]
                    },
                },
            )
        )
    if mcp:
        changes.append(
            _json_change(plugin / ".mcp.json", {"mcpServers": {SERVER_NAME: stdio_entry(idx, prefix, watch)}})
        )
    return changes


# --- Gemini CLI --------------------------------------------------------------------------------------


def gemini_hook_command(index: Path, prefix: list[str] | None = None) -> str:
    """The shell command of the Gemini CLI ``BeforeAgent`` hook."""
    return shlex.join([*(prefix or command_prefix()), "hook", "gemini", "-i", str(index)])


def merge_gemini_hook(settings: dict[str, Any], command: str) -> dict[str, Any]:
    """``settings`` with skillsight's ``hooks.BeforeAgent`` hook (replacing an older one of its own)."""
    out = copy.deepcopy(settings)
    hooks, groups = hook_groups(out, "BeforeAgent")
    entry = {
        "name": "skillsight",
        "type": "command",
        "command": command,
        "timeout": GEMINI_HOOK_TIMEOUT_MS,
        "description": "skills from the local skill library that fit the prompt",
    }
    kept = []
    for group in groups:
        if isinstance(group, dict) and isinstance(group.get("hooks"), list):
            own = [h for h in group["hooks"] if is_own_hook(h, GEMINI_HOOK_MARK)]
            if own:
                group = {**group, "hooks": [h for h in group["hooks"] if not any(h is o for o in own)]}
                if not group["hooks"]:
                    continue
        kept.append(group)
    kept.append({"hooks": [entry]})
    hooks["BeforeAgent"] = kept
    return out


def stdio_entry(index: Path, prefix: list[str] | None = None, watch: bool = False) -> dict[str, Any]:
    """The server entry as only ``command`` and ``args`` (a stdio server): Gemini CLI's
    ``mcpServers.skillsight`` and the Claude Code plugin's ``.mcp.json``."""
    entry = server_entry(index, prefix, watch)
    return {"command": entry["command"], "args": entry["args"]}


#: Gemini CLI's ``mcpServers.skillsight`` entry.
gemini_server_entry = stdio_entry


def plan_gemini(
    index: str | os.PathLike[str],
    *,
    scope: str = "user",
    project: str | os.PathLike[str] = ".",
    home: str | os.PathLike[str] | None = None,
    hook: bool = True,
    mcp: bool = True,
    watch: bool = False,
    prefix: list[str] | None = None,
) -> list[Change]:
    """Gemini CLI's ``settings.json``: ``~/.gemini/settings.json`` (user) or the project's
    ``.gemini/settings.json``."""
    if scope not in ("user", "project"):
        raise SkillsightError(f"Gemini CLI has user and project settings, not {scope!r}")
    idx = index_dir(index)
    base = home_dir(home) if scope == "user" else Path(project).expanduser().absolute()
    path = base / ".gemini" / "settings.json"

    def merge(data: dict[str, Any]) -> dict[str, Any]:
        if hook:
            data = merge_gemini_hook(data, gemini_hook_command(idx, prefix))
        if mcp:
            data = merge_server(data, gemini_server_entry(idx, prefix, watch))
        return data

    return [_change(path, merge)]


# --- one entry point for the CLI ---------------------------------------------------------------------


def plan_install(
    host: str,
    index: str | os.PathLike[str],
    *,
    scope: str = "user",
    plugin: str | None = None,
    project: str | os.PathLike[str] = ".",
    home: str | os.PathLike[str] | None = None,
    hook: bool = True,
    mcp: bool = True,
    watch: bool = False,
) -> list[Change]:
    """The changes ``skillsight install HOST`` makes (nothing written yet).

    ``plugin`` (Claude Code only) is the marketplace folder of a plugin install ("" for the default).
    """
    if host not in HOSTS:
        raise SkillsightError(f"unknown host {host!r}: one of {', '.join(HOSTS)}")
    if scope not in SCOPES:
        raise SkillsightError(f"scope must be one of {', '.join(SCOPES)}, got {scope!r}")
    kw: dict[str, Any] = {"home": home, "hook": hook, "mcp": mcp, "watch": watch}
    if host == "gemini":
        if plugin is not None:
            raise SkillsightError("--plugin is for Claude Code; Gemini CLI reads its settings.json")
        return plan_gemini(index, scope=scope, project=project, **kw)
    if plugin is not None:
        return plan_claude_plugin(index, plugin or None, **kw)
    if scope == "local":
        return plan_claude_code_local(index, project=project, **kw)
    return plan_claude_code(index, scope=scope, project=project, **kw)


def next_steps(host: str, changes: list[Change], plugin: str | None = None) -> str:
    """What the user does after the files are written."""
    if host == "gemini":
        return "restart Gemini CLI (or run /hooks and /mcp) to load the hook and the skillsight MCP server"
    if plugin is not None:
        market = next(c.path for c in changes if c.path.name == "marketplace.json").parent.parent
        return (
            f"in Claude Code run:  /plugin marketplace add {market}  then  "
            f"/plugin install {PLUGIN_NAME}@{MARKETPLACE_NAME}   "
            f"(or try it for one session: claude --plugin-dir {market / PLUGIN_NAME})"
        )
    return "restart Claude Code (or run /hooks and /mcp) to load the hook and the skillsight MCP server"
