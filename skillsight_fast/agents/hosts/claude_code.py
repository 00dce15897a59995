"""Claude Code: a ``UserPromptSubmit`` command hook, ``mcpServers`` entries, and a plugin.

Settings per scope (hook file, MCP server file):

- ``user`` (the default): ``~/.claude/settings.json`` and the top-level ``mcpServers`` of
  ``~/.claude.json``;
- ``local``: the project's uncommitted ``.claude/settings.local.json`` and the project's entry of
  ``~/.claude.json`` (``projects.<folder>.mcpServers``, Claude Code's "local" MCP scope);
- ``project``: the team's ``.claude/settings.json`` and ``.mcp.json``.

The plugin (:meth:`ClaudeCode.plan_plugin`) is a plugin folder (``.claude-plugin/plugin.json``,
``hooks/hooks.json`` with the ``UserPromptSubmit`` hook, ``.mcp.json`` with the server) inside a
one-plugin marketplace folder (``.claude-plugin/marketplace.json``), installed the way Claude Code
installs plugins: ``/plugin marketplace add DIR`` then ``/plugin install skillsight@skillsight-local``.
The formats follow Claude Code's hooks, settings, MCP and plugins reference.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillsight_fast.agents.hosts.base import Host

if TYPE_CHECKING:
    from skillsight_fast.agents.install import Change

#: The plugin's name, and the name of the one-plugin marketplace folder that carries it.
PLUGIN_NAME = "skillsight"
MARKETPLACE_NAME = "skillsight-local"
#: Where ``install claude-code --plugin`` puts the marketplace folder by default (under the home folder).
DEFAULT_PLUGIN_DIR = Path(".skillsight") / "claude-plugin"
DESCRIPTION = ("Skills from the local skill library that fit each prompt (skillsight-fast), and an MCP server "
               "to search it")


class ClaudeCode(Host):
    """Claude Code (``skillsight install claude-code``, ``skillsight hook claude-code``)."""

    name = "claude-code"
    title = "Claude Code"
    event = "UserPromptSubmit"
    scopes = ("user", "local", "project")
    # hooks run with CLAUDE_PROJECT_DIR set; .mcp.json expands ${VAR:-default} in args, and a project's
    # stdio servers start in the project folder, so "." stands in when the variable is not set
    project_root = ('"$CLAUDE_PROJECT_DIR"', "${CLAUDE_PROJECT_DIR:-.}")

    def settings_files(self, scope: str, project: Path, home: Path) -> tuple[Path, Path]:
        if scope == "project":
            return project / ".claude" / "settings.json", project / ".mcp.json"
        if scope == "local":
            return project / ".claude" / "settings.local.json", home / ".claude.json"
        return home / ".claude" / "settings.json", home / ".claude.json"

    def merge_hook(self, settings: dict[str, Any], command: str) -> dict[str, Any]:
        """The first of skillsight's own hook entries is replaced in place (any others are removed);
        without one, a new hook group is added at the end."""
        import copy

        from skillsight_fast.agents.install import HOOK_TIMEOUT, hook_groups

        out = copy.deepcopy(settings)
        hooks, groups = hook_groups(out, self.event)
        entry = {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}
        placed = False
        for group in groups:
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                continue
            for i, h in enumerate(group["hooks"]):
                if self.is_own_hook(h):
                    if not placed:
                        group["hooks"][i] = entry
                        placed = True
                    else:
                        group["hooks"][i] = None
            group["hooks"] = [h for h in group["hooks"] if h is not None]
        hooks[self.event] = [g for g in groups if not (isinstance(g, dict) and g.get("hooks") == [])]
        if not placed:
            hooks[self.event].append({"hooks": [entry]})
        return out

    def server_entry(self, index: Path, prefix: list[str] | None = None, watch: bool = False) -> dict[str, Any]:
        entry = super().server_entry(index, prefix, watch)
        return {"type": "stdio", **entry, "env": {}}

    def merge_server(self, settings: dict[str, Any], entry: dict[str, Any], scope: str,
                     project: Path) -> dict[str, Any]:
        """The local scope keeps the server under ``projects.<project folder>`` of ``~/.claude.json``."""
        if scope != "local":
            return super().merge_server(settings, entry, scope, project)
        import copy

        from skillsight_fast.errors import SkillsightError

        out = copy.deepcopy(settings)
        projects = out.setdefault("projects", {})
        if not isinstance(projects, dict):
            raise SkillsightError("~/.claude.json: 'projects' is not an object; nothing was changed")
        own = projects.setdefault(str(project), {})
        if not isinstance(own, dict):
            raise SkillsightError(f"~/.claude.json: projects[{str(project)!r}] is not an object; nothing was changed")
        projects[str(project)] = super().merge_server(own, entry, scope, project)
        return out

    def plan_plugin(self, index: str | os.PathLike[str], folder: str | os.PathLike[str] | None = None, *,
                    home: str | os.PathLike[str] | None = None, hook: bool = True, mcp: bool = True,
                    watch: bool = False, prefix: list[str] | None = None) -> list[Change]:
        """The files of a Claude Code plugin (hook and MCP server) in a one-plugin marketplace folder.

        ``folder`` (default ``~/.skillsight/claude-plugin``) gets ``.claude-plugin/marketplace.json``
        and the plugin in ``skillsight/``: ``.claude-plugin/plugin.json``, ``hooks/hooks.json``,
        ``.mcp.json``. The commands name this Python and the index by absolute path: the folder is
        the user's own.
        """
        from skillsight_fast._version import __version__
        from skillsight_fast.agents.install import HOOK_TIMEOUT, SERVER_NAME, home_dir, index_dir, json_file

        idx = index_dir(index)
        root = Path(folder).expanduser().absolute() if folder is not None else home_dir(home) / DEFAULT_PLUGIN_DIR
        plugin = root / PLUGIN_NAME
        changes = [
            json_file(root / ".claude-plugin" / "marketplace.json", {
                "name": MARKETPLACE_NAME,
                "owner": {"name": "skillsight-fast"},
                "plugins": [{"name": PLUGIN_NAME, "source": f"./{PLUGIN_NAME}", "description": DESCRIPTION,
                             "version": __version__}],
            }),
            json_file(plugin / ".claude-plugin" / "plugin.json", {
                "name": PLUGIN_NAME,
                "version": __version__,
                "description": DESCRIPTION,
                "author": {"name": "skillsight-fast"},
                "license": "Apache-2.0",
                "keywords": ["skills", "retrieval", "mcp"],
            }),
        ]
        if hook:
            entry = {"type": "command", "command": self.hook_command(idx, prefix), "timeout": HOOK_TIMEOUT}
            changes.append(json_file(plugin / "hooks" / "hooks.json", {
                "description": "skillsight: the skills that fit the prompt, or nothing",
                "hooks": {self.event: [{"hooks": [entry]}]},
            }))
        if mcp:  # a plugin's .mcp.json: a stdio server's command and args only
            changes.append(json_file(plugin / ".mcp.json",
                                     {"mcpServers": {SERVER_NAME: Host.server_entry(self, idx, prefix, watch)}}))
        return changes

    def next_steps(self, changes: list[Change], plugin: str | None = None) -> str:
        if plugin is None:
            return super().next_steps(changes, plugin)
        market = next(c.path for c in changes if c.path.name == "marketplace.json").parent.parent
        return (f"in Claude Code run:  /plugin marketplace add {market}  then  "
                f"/plugin install {PLUGIN_NAME}@{MARKETPLACE_NAME}   "
                f"(or try it for one session: claude --plugin-dir {market / PLUGIN_NAME})")
