"""The small interface every agent host implements: :class:`Host`.

A host is what ``skillsight hook HOST`` answers and ``skillsight install HOST`` writes for: the
prompt event its hook answers and what the hook prints (:meth:`Host.hook_output`), where its settings
live for each scope (:meth:`Host.settings_files`), how skillsight's hook entry and MCP server entry
are merged there (:meth:`Host.merge_hook`, :meth:`Host.merge_server`, :meth:`Host.server_entry`), an
optional plugin (:meth:`Host.plan_plugin`) and what the user does next (:meth:`Host.next_steps`).

The hook imports this module on every prompt: the class attributes are plain data and the
installers' machinery (:mod:`skillsight_fast.agents.install`) is imported only inside the methods
that write settings.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from skillsight_fast.agents.install import Change

#: A settings merge: the parsed file in, the new content out.
Merge = Callable[[dict[str, Any]], dict[str, Any]]


class Host:
    """One agent host. Subclasses set the class attributes and the settings methods.

    Attributes
    ----------
    name : str
        The word on the command line: ``skillsight install NAME``, ``skillsight hook NAME``.
    title : str
        The host's name in messages ("Claude Code").
    event : str
        The hook event the prompt hook answers (``UserPromptSubmit``, ``BeforeAgent``).
    nothing : str
        What the hook prints when it has nothing to add ("": nothing at all).
    scopes : tuple of str
        The install scopes the host has settings for, the default first.
    """

    name: ClassVar[str]
    title: ClassVar[str]
    event: ClassVar[str]
    nothing: ClassVar[str] = ""
    scopes: ClassVar[tuple[str, ...]] = ("user", "project")

    # --- the hook ------------------------------------------------------------------------------------
    def hook_output(self, context: str) -> str:
        """The JSON the hook prints to add ``context`` to the prompt ("" when there is nothing)."""
        if not context:
            return ""
        return json.dumps({"hookSpecificOutput": {"hookEventName": self.event, "additionalContext": context}})

    def hook_command(self, index: Path, prefix: list[str] | None = None) -> str:
        """The shell command of this host's hook entry."""
        from skillsight_fast.agents.install import hook_command

        return hook_command(self.name, index, prefix)

    def is_own_hook(self, hook: Any) -> bool:
        """Whether a hook entry of the settings is skillsight's hook for this host."""
        from skillsight_fast.agents.install import is_own_hook

        return is_own_hook(hook, f"hook {self.name}")

    # --- the settings --------------------------------------------------------------------------------
    def settings_files(self, scope: str, project: Path, home: Path) -> tuple[Path, Path]:
        """The file the hook is merged into and the file the MCP server is merged into, for ``scope``
        (one of :attr:`scopes`), the project root and the home folder (both absolute)."""
        raise NotImplementedError

    def merge_hook(self, settings: dict[str, Any], command: str) -> dict[str, Any]:
        """``settings`` with skillsight's hook running ``command`` (replacing an older one of its own)."""
        raise NotImplementedError

    def server_entry(self, index: Path, prefix: list[str] | None = None, watch: bool = False) -> dict[str, Any]:
        """The ``mcpServers.skillsight`` entry (default: a stdio server's ``command`` and ``args``)."""
        from skillsight_fast.agents.install import server_command

        cmd = server_command(index, prefix, watch)
        return {"command": cmd[0], "args": cmd[1:]}

    def merge_server(self, settings: dict[str, Any], entry: dict[str, Any], scope: str,
                     project: Path) -> dict[str, Any]:
        """``settings`` with the server ``entry`` as ``mcpServers.skillsight`` (``scope`` and the
        project root are there for hosts that keep a project's servers in a user file)."""
        from skillsight_fast.agents.install import merge_server

        return merge_server(settings, entry)

    def plan(self, index: str | os.PathLike[str], *, scope: str | None = None,
             project: str | os.PathLike[str] = ".", home: str | os.PathLike[str] | None = None,
             hook: bool = True, mcp: bool = True, watch: bool = False,
             prefix: list[str] | None = None) -> list[Change]:
        """The settings files ``skillsight install`` changes for ``scope`` (default: the first of
        :attr:`scopes`), old and new text, nothing written yet.

        Parameters
        ----------
        index : path
            The index folder (written as an absolute path).
        scope : str, optional
            One of :attr:`scopes`.
        project, home : path
            The project root and the home folder (default: the current folder and ``~``).
        hook, mcp : bool
            Install the prompt hook / the MCP server.
        watch : bool
            Start the MCP server with ``--watch`` (live index).
        prefix : list of str, optional
            Command that starts skillsight (default: this Python with ``-m skillsight_fast.cli``).

        Raises
        ------
        SkillsightError
            A scope the host has no settings for, no index at ``index``, or a settings file that
            cannot be merged (nothing is changed).
        """
        from skillsight_fast.agents.install import home_dir, index_dir, json_merge
        from skillsight_fast.errors import SkillsightError

        scope = scope or self.scopes[0]
        if scope not in self.scopes:
            names = " and ".join([", ".join(self.scopes[:-1]), self.scopes[-1]] if len(self.scopes) > 1
                                 else self.scopes)
            raise SkillsightError(f"{self.title} has {names} settings, not {scope!r}")
        idx = index_dir(index)
        root = Path(project).expanduser().absolute()
        hook_path, mcp_path = self.settings_files(scope, root, home_dir(home))
        merges: dict[Path, list[Merge]] = {}
        if hook:
            command = self.hook_command(idx, prefix)
            merges.setdefault(hook_path, []).append(lambda data: self.merge_hook(data, command))
        if mcp:
            entry = self.server_entry(idx, prefix, watch)
            merges.setdefault(mcp_path, []).append(lambda data: self.merge_server(data, entry, scope, root))
        return [json_merge(path, _chain(steps)) for path, steps in merges.items()]

    def plan_plugin(self, index: str | os.PathLike[str], folder: str | os.PathLike[str] | None = None, *,
                    home: str | os.PathLike[str] | None = None, hook: bool = True, mcp: bool = True,
                    watch: bool = False, prefix: list[str] | None = None) -> list[Change]:
        """The files of a plugin for this host (``install --plugin``); only some hosts have one."""
        from skillsight_fast.errors import SkillsightError

        raise SkillsightError(f"--plugin is for Claude Code; {self.title} reads its settings.json")

    def next_steps(self, changes: list[Change], plugin: str | None = None) -> str:
        """What the user does after the files are written."""
        return f"restart {self.title} (or run /hooks and /mcp) to load the hook and the skillsight MCP server"


def _chain(steps: list[Merge]) -> Merge:
    def merge(data: dict[str, Any]) -> dict[str, Any]:
        for step in steps:
            data = step(data)
        return data

    return merge
