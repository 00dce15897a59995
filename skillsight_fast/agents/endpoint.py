"""Where a warm server of an index can be reached: a small JSON file per index, per user.

``skillsight serve --http`` (and ``serve --mcp --endpoint``) write
``<runtime dir>/<key>.json`` = ``{"url", "pid", "index", "started"}`` once they listen, and remove
it when they stop; ``<key>`` is a hash of the index folder's real path and the runtime dir is
``$XDG_RUNTIME_DIR/skillsight`` (else ``~/.cache/skillsight-fast/servers``), private to the user.
The prompt hook reads it to ask the warm server instead of loading the model itself. The file is
kept outside the index folder, which ``update`` replaces as a whole.

Light on purpose (standard library only): the hook imports it on every prompt.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from skillsight_fast.files import atomic_write_bytes, sha256_bytes

logger = logging.getLogger(__name__)


def runtime_dir() -> Path:
    """The per-user folder of endpoint files."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base) and os.access(base, os.W_OK):
        return Path(base) / "skillsight"
    return Path.home() / ".cache" / "skillsight-fast" / "servers"


def endpoint_file(index: str | os.PathLike[str]) -> Path:
    """The endpoint file of an index folder (keyed by its real path)."""
    real = os.path.realpath(os.path.expanduser(os.fspath(index)))
    key = sha256_bytes(real.encode("utf-8", "surrogateescape"))[:20]
    return runtime_dir() / f"{key}.json"


def publish(index: str | os.PathLike[str], url: str) -> Path:
    """Write the endpoint file of ``index`` (atomically, mode 0600) and return its path."""
    path = endpoint_file(index)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = {"url": url, "pid": os.getpid(), "index": os.path.realpath(os.fspath(index)), "started": time.time()}
    atomic_write_bytes(path, json.dumps(record).encode("utf-8"), mode=0o600)
    return path


def withdraw(index: str | os.PathLike[str]) -> None:
    """Remove the endpoint file of ``index`` if this process wrote it."""
    path = endpoint_file(index)
    try:
        if json.loads(path.read_text(encoding="utf-8")).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def lookup(index: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The endpoint record of a live server of ``index``, or None (no file, stale or unreadable)."""
    path = endpoint_file(index)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("url"), str):
        return None
    pid = record.get("pid")
    if not isinstance(pid, int) or not _alive(pid):
        return None
    if not record["url"].startswith(("http://127.0.0.1:", "http://localhost:", "http://[::1]:")):
        return None  # only loopback servers are asked
    return record


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True
