"""Gemini CLI: a ``BeforeAgent`` command hook and ``mcpServers.skillsight`` in its ``settings.json``.

``~/.gemini/settings.json`` (``user``, the default) or the project's ``.gemini/settings.json``
(``project``). The hook runs ``skillsight hook gemini``; its ``hookSpecificOutput.additionalContext``
is appended to the prompt, and with nothing to add it prints ``{}`` (Gemini CLI parses a successful
hook's stdout as JSON). The formats follow Gemini CLI's hooks reference (``docs/hooks/reference.md``:
hook groups under the event name, ``type``/``command``/``name``/``timeout`` in milliseconds) and its
MCP server settings (``mcpServers.NAME.command``/``args``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from skillsight_fast.agents.hosts.base import Host


class Gemini(Host):
    """Gemini CLI (``skillsight install gemini``, ``skillsight hook gemini``)."""

    name = "gemini"
    title = "Gemini CLI"
    event = "BeforeAgent"
    nothing = "{}"
    scopes = ("user", "project")

    def settings_files(self, scope: str, project: Path, home: Path) -> tuple[Path, Path]:
        path = (home if scope == "user" else project) / ".gemini" / "settings.json"
        return path, path

    def merge_hook(self, settings: dict[str, Any], command: str) -> dict[str, Any]:
        """skillsight's own hook entries are removed (and groups left empty by that), and a new hook
        group is added at the end. Gemini CLI's hook timeout is in milliseconds."""
        import copy

        from skillsight_fast.agents.install import HOOK_TIMEOUT, hook_groups

        out = copy.deepcopy(settings)
        hooks, groups = hook_groups(out, self.event)
        entry = {
            "name": "skillsight",
            "type": "command",
            "command": command,
            "timeout": HOOK_TIMEOUT * 1000,
            "description": "skills from the local skill library that fit the prompt",
        }
        kept = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                own = [h for h in group["hooks"] if self.is_own_hook(h)]
                if own:
                    group = {**group, "hooks": [h for h in group["hooks"] if not any(h is o for o in own)]}
                    if not group["hooks"]:
                        continue
            kept.append(group)
        kept.append({"hooks": [entry]})
        hooks[self.event] = kept
        return out
