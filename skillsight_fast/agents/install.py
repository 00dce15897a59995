"""``skillsight install HOST``: the host-independent half of the installers.

Each host (:mod:`skillsight_fast.agents.hosts`) says where its settings live and what it merges
there; this module holds what they share: the :class:`Change` of one settings file (old and new
text, a unified diff), the bounded and depth-checked read of a settings file, the merge of the
``mcpServers.skillsight`` entry, the hook command's prefix and the server command, and
:func:`apply`, the atomic, locked write. A merge adds or replaces only skillsight's own entries
(the hook whose command runs ``hook HOST``, the server named ``skillsight``); every other key, hook
and server is kept as it was. Running it twice changes nothing; ``--dry-run`` prints the diff.
"""

from __future__ import annotations

import contextlib
import copy
import difflib
import json
import os
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from skillsight_fast.errors import SkillsightError
from skillsight_fast.files import atomic_write_bytes

#: Name of the MCP server entry.
SERVER_NAME = "skillsight"
#: Seconds a host gives the hook (the hook's own budget is shorter).
HOOK_TIMEOUT = 10


@dataclass
class Change:
    """One settings file: its path, old and new text (None: the file does not exist)."""

    path: Path
    old: str | None
    new: str
    #: The new text for another old text (``apply`` re-merges when the file changed since it was read).
    remake: Callable[[str | None], str] | None = None

    @property
    def changed(self) -> bool:
        return self.old != self.new

    def diff(self) -> str:
        """Unified diff from the old to the new text."""
        old = [] if self.old is None else self.old.splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, self.new.splitlines(keepends=True),
                                            fromfile=str(self.path) if self.old is not None else "/dev/null",
                                            tofile=str(self.path)))


def command_prefix() -> list[str]:
    """How the host starts skillsight: this interpreter with the package module (no PATH needed)."""
    return [sys.executable, "-m", "skillsight_fast.cli"]


def hook_command(host: str, index: Path, prefix: list[str] | None = None) -> str:
    """The shell command of ``host``'s hook entry (its options from the one table,
    :func:`skillsight_fast.agents.hook_options.hook_argv`)."""
    from skillsight_fast.agents.hook_options import hook_argv

    return shlex.join([*(prefix or command_prefix()), "hook", *hook_argv(host, str(index))])


def server_command(index: Path, prefix: list[str] | None = None, watch: bool = False) -> list[str]:
    """The MCP server's command: ``serve --mcp --endpoint`` (the hook asks it when warm)."""
    cmd = [*(prefix or command_prefix()), "serve", "--mcp", "-i", str(index), "--endpoint", "-q"]
    return cmd + ["--watch"] if watch else cmd


#: Largest settings file read (bytes).
MAX_SETTINGS_BYTES = 16 << 20
#: Deepest nesting of a settings file (deeper ones are refused, never rewritten).
MAX_SETTINGS_DEPTH = 64
#: Stands for a number with a fraction or exponent while a settings file is merged; ``_dump``
#: writes the number's original text back (``1e400`` stays ``1e400``, never ``Infinity``).
_NUMBER_TAG = f"\x00skillsight-number-{os.urandom(6).hex()}:"
_NUMBERS: list[str] = []


def _keep_number(text: str) -> str:
    _NUMBERS.append(text)
    return f"{_NUMBER_TAG}{len(_NUMBERS) - 1}\x00"


def _read_text(path: Path) -> str | None:
    """The text of a settings file (None: it does not exist), through the bounded reader: a FIFO,
    a device or a file over :data:`MAX_SETTINGS_BYTES` is refused with a message."""
    from skillsight_fast.limits import read_text

    if not os.path.lexists(path) or not os.path.exists(path):
        return None  # missing, or a dangling symlink (written through to its target)
    return read_text(path, MAX_SETTINGS_BYTES, error=SkillsightError, what="settings file")


def _parse(path: Path, text: str | None) -> dict[str, Any]:
    from skillsight_fast.limits import load_json

    if text is None or not text.strip():
        return {}
    try:
        data = load_json(text, error=SkillsightError, what=str(path), max_depth=MAX_SETTINGS_DEPTH,
                         parse_float=_keep_number)
    except SkillsightError as exc:
        raise SkillsightError(f"{exc}; fix it first, nothing was changed") from None
    if not isinstance(data, dict):
        raise SkillsightError(f"{path}: the top level is not a JSON object; nothing was changed")
    return data


def _dump(data: dict[str, Any]) -> str:
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    pattern = re.escape(json.dumps(_NUMBER_TAG)[1:-1]) + r"(\d+)\\u0000"
    return re.sub(f'"{pattern}"', lambda m: _NUMBERS[int(m.group(1))], text)


def index_dir(index: str | os.PathLike[str]) -> Path:
    """The index folder as an absolute path (what the hook and server commands name); a folder
    without a ``manifest.json`` is refused with a message."""
    idx = Path(index).expanduser().absolute()
    if not (idx / "manifest.json").is_file():
        raise SkillsightError(f"{idx}: no such index (build one with: skillsight index SKILLS -o {idx})")
    return idx


def home_dir(home: str | os.PathLike[str] | None) -> Path:
    """The home folder: ``home`` (expanded) or the user's."""
    return Path(home).expanduser() if home is not None else Path.home()


def hook_groups(out: dict[str, Any], event: str) -> tuple[dict[str, Any], list[Any]]:
    """The ``hooks`` object of the settings ``out`` and its list of hook groups for ``event`` (both
    created when missing); either of the wrong type is refused with a message."""
    hooks = out.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise SkillsightError("the settings' 'hooks' is not an object; nothing was changed")
    groups = hooks.setdefault(event, [])
    if not isinstance(groups, list):
        raise SkillsightError(f"the settings' hooks.{event} is not a list; nothing was changed")
    return hooks, groups


def is_own_hook(hook: Any, mark: str) -> bool:
    """Whether the hook entry ``hook`` is skillsight's: its command runs ``mark`` of skillsight."""
    return (isinstance(hook, dict) and mark in str(hook.get("command", ""))
            and "skillsight" in str(hook.get("command")))


def merge_server(config: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """``config`` with ``mcpServers.skillsight`` set to ``entry``."""
    out = copy.deepcopy(config)
    servers = out.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise SkillsightError("the 'mcpServers' key is not an object; nothing was changed")
    servers[SERVER_NAME] = entry
    return out


def json_file(path: Path, new: dict[str, Any]) -> Change:
    """A whole file of ours (a plugin's): its old text (if any) and the new one."""
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    return Change(path, old, json.dumps(new, indent=2, ensure_ascii=False) + "\n")


def json_merge(path: Path, merge: Callable[[dict[str, Any]], dict[str, Any]]) -> Change:
    """The change ``merge`` makes to the JSON file ``path``, able to redo itself on a newer text."""
    def remake(old: str | None) -> str:
        data = _parse(path, old)
        return _keep_if_same(old, data, merge(data))

    old = _read_text(path)
    return Change(path, old, remake(old), remake)


def _keep_if_same(old: str | None, before: dict[str, Any], after: dict[str, Any]) -> str:
    """The old text untouched when the merge changed nothing (idempotent, formatting kept)."""
    if old is not None and before == after:
        return old
    return _dump(after)


def apply(changes: list[Change]) -> list[Path]:
    """Write the changed files atomically (same folder, then rename); returns what was written.

    A symlinked settings file is written through to its target (the link stays). Each file is
    written under an exclusive ``fcntl`` lock of its folder (no lock file is left behind), and re-read under
    that lock: when another writer changed it since it was planned, the merge is made again on
    the new text (or, for a change that cannot redo itself, nothing is written and the error says so).
    """
    written = []
    for ch in changes:
        if not ch.changed:
            continue
        target = Path(os.path.realpath(ch.path))
        with _locked(target):
            current = _read_text(target)
            new = ch.new
            if current != ch.old:
                if ch.remake is None:
                    raise SkillsightError(f"{ch.path}: changed while installing; nothing was written, "
                                          "run again")
                new = ch.remake(current)
                if new == current:
                    continue
            mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
            atomic_write_bytes(target, new.encode("utf-8"), mode)
        written.append(ch.path)
    return written


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """An exclusive ``flock`` of the folder of ``path`` (a no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
