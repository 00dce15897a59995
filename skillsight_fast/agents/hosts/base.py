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
import sys
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
    #: How the project's root is named in the team's files (``--project``): in the hook's shell command
    #: and in the MCP server's ``args``; None when the host has no such variable (the files then name
    #: this machine's paths, and :meth:`portability_note` says so).
    project_root: ClassVar[tuple[str, str] | None] = None
    #: The command a teammate's host runs (on their PATH) in the team's files.
    PORTABLE_COMMAND: ClassVar[list[str]] = ["skillsight"]

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
        rel = self.portable_index(scope, idx, root) if prefix is None else None
        if hook:
            command = self.hook_command(idx, prefix) if rel is None else self.project_hook_command(rel)
            merges.setdefault(hook_path, []).append(lambda data: self.merge_hook(data, command))
        if mcp:
            entry = (self.server_entry(idx, prefix, watch) if rel is None
                     else self.server_entry(Path(f"{self.project_root[1]}/{rel}"),  # type: ignore[index]
                                            self.PORTABLE_COMMAND, watch))
            merges.setdefault(mcp_path, []).append(lambda data: self.merge_server(data, entry, scope, root))
        return [json_merge(path, _chain(steps)) for path, steps in merges.items()]

    # --- the team's files (--project) ----------------------------------------------------------------
    def portable_index(self, scope: str, index: Path, project: Path) -> str | None:
        """The index's path relative to the project root when the ``project`` scope can name it so on
        a teammate's checkout (the host has a project-root variable and the index lies inside the
        project), else None (the files name this machine's paths)."""
        if scope != "project" or self.project_root is None:
            return None
        try:
            rel = index.resolve().relative_to(project.resolve())
        except ValueError:
            return None
        return rel.as_posix() if rel.parts else "."

    def project_hook_command(self, rel: str) -> str:
        """The hook's shell command in the team's files: ``skillsight`` from the PATH and the index
        under the host's project-root variable (``"$CLAUDE_PROJECT_DIR"/.skillsight/index``)."""
        import shlex

        from skillsight_fast.agents.hook_options import hook_argv

        mark = "@SKILLSIGHT_INDEX@"  # shlex leaves it unquoted; replaced by the variable and the path
        words = shlex.join([*self.PORTABLE_COMMAND, "hook", *hook_argv(self.name, mark)])
        return words.replace(mark, f"{self.project_root[0]}/{shlex.quote(rel)}")  # type: ignore[index]

    def portability_note(self, scope: str, index: str | os.PathLike[str],
                         project: str | os.PathLike[str] = ".") -> str | None:
        """What ``install --project`` tells the user when the team's files cannot work on a
        teammate's checkout as written (None: they can, or another scope)."""
        if scope != "project":
            return None
        idx = Path(index).expanduser().absolute()
        root = Path(project).expanduser().absolute()
        if self.portable_index(scope, idx, root) is not None:
            return (f"note: the team's files start `skillsight` from the PATH and read the index at "
                    f"{os.path.relpath(idx, root)} in the project: each teammate installs skillsight-fast "
                    "and builds (or checks out) that index")
        if self.project_root is None:
            why = f"{self.title} has no project-root variable its settings and hooks both expand"
        else:
            why = f"the index {idx} lies outside the project {root}"
        return (f"note: the team's files name this machine's paths ({sys.executable}, {idx}) because {why}; "
                "they work on this checkout only" + ("" if self.project_root is None else
                                                     ": build the index inside the project (e.g. "
                                                     f"{root / '.skillsight' / 'index'}) and install again"))

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
