"""The agent hosts: one module per host behind one small interface (:class:`~.base.Host`), and
:data:`HOSTS`, the registry that ``skillsight install``'s and ``skillsight hook``'s host choices and
the hook's answers are read from.

A new host is one module here (a :class:`~.base.Host` subclass: its prompt event, its settings
files per scope, its hook entry) and one entry in :data:`HOSTS`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from skillsight_fast.agents.hosts.base import Host
from skillsight_fast.agents.hosts.claude_code import ClaudeCode
from skillsight_fast.agents.hosts.gemini import Gemini

if TYPE_CHECKING:
    from skillsight_fast.agents.install import Change

#: Every host, by the name ``skillsight install NAME`` and ``skillsight hook NAME`` take.
HOSTS: dict[str, Host] = {host.name: host for host in (ClaudeCode(), Gemini())}


def get_host(name: str) -> Host:
    """The host called ``name``.

    Raises
    ------
    SkillsightError
        No host has this name.
    """
    host = HOSTS.get(name)
    if host is None:
        from skillsight_fast.errors import SkillsightError

        raise SkillsightError(f"unknown host {name!r}: one of {', '.join(HOSTS)}")
    return host


def plan_install(host: str, index: str | os.PathLike[str], *, scope: str = "user", plugin: str | None = None,
                 project: str | os.PathLike[str] = ".", home: str | os.PathLike[str] | None = None,
                 hook: bool = True, mcp: bool = True, watch: bool = False) -> list[Change]:
    """The changes ``skillsight install HOST`` makes (nothing written yet): the host's settings for
    ``scope``, or with ``plugin`` (the marketplace folder, "" for the default) its plugin's files."""
    h = get_host(host)
    if plugin is not None:
        return h.plan_plugin(index, plugin or None, home=home, hook=hook, mcp=mcp, watch=watch)
    return h.plan(index, scope=scope, project=project, home=home, hook=hook, mcp=mcp, watch=watch)


__all__ = ["HOSTS", "ClaudeCode", "Gemini", "Host", "get_host", "plan_install"]
