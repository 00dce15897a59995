"""Where a warm server of an index can be reached: a small JSON file per index, per user.

``skillsight serve --http`` (and ``serve --mcp --endpoint``) write
``<runtime dir>/<key>.json`` = ``{"url", "pid", "index", "started", "secret"}`` once they listen,
and remove it when they stop (``SIGTERM`` and ``SIGHUP`` included); ``<key>`` is a hash of the
index folder's real path and the runtime dir is ``$XDG_RUNTIME_DIR/skillsight`` (else
``~/.cache/skillsight-fast/servers``), private to the user. The prompt hook reads it to ask the warm
server instead of loading the model itself. The file is kept outside the index folder, which
``update`` replaces as a whole.

Trust: ``secret`` is 32 random bytes drawn by the server at start, in a file of mode 0600 that
the hook reads only when it belongs to its user and nobody else can read it. The secret itself never
goes over the wire. Two keys are derived from it with HMAC-SHA256 under fixed labels:
:func:`hook_token` (what the hook sends as its bearer token, with a fresh 128-bit nonce) and
:func:`proof_key` (what the server signs each answer with: header ``X-Skillsight-Proof`` =
``HMAC-SHA256(proof_key, nonce + "\n" + body)``). Whatever holds the recorded port (a server of
another user, a port taken over after a crash, a reused pid) learns the hook token and the nonce, but
cannot compute the proof key from them, so its answer is refused and the hook says nothing. The hook
token only opens the same searches a token-less loopback server answers anyway. The record itself
is read by the bounded reader (a FIFO or ``/dev/zero`` in its place is refused at once), and its
``pid`` must be a positive integer of a live process.

Light on purpose (standard library only): the hook imports it on every prompt.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from skillsight_fast.errors import SkillsightError
from skillsight_fast.files import atomic_write_bytes, sha256_bytes

logger = logging.getLogger(__name__)

#: Largest endpoint record read (bytes).
MAX_RECORD_BYTES = 4096
#: Header carrying the hook's nonce, and the header of the server's proof.
NONCE_HEADER, PROOF_HEADER = "X-Skillsight-Nonce", "X-Skillsight-Proof"
#: Characters of a secret (hex of 32 random bytes).
SECRET_CHARS = 64


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


def new_secret() -> str:
    """A fresh per-server secret (64 hex characters)."""
    import secrets

    return secrets.token_hex(SECRET_CHARS // 2)


def _derive(secret: str | bytes, label: bytes) -> bytes:
    key = secret.encode("utf-8") if isinstance(secret, str) else secret
    return hmac.new(key, label, hashlib.sha256).digest()


def hook_token(secret: str | bytes) -> str:
    """The hook's bearer token: ``HMAC-SHA256(secret, "skillsight hook token")`` in hex (never the
    secret itself, so the server holding the port learns nothing that lets it sign an answer)."""
    return _derive(secret, b"skillsight hook token").hex()


def proof_key(secret: str | bytes) -> bytes:
    """The key a server signs its answers with: ``HMAC-SHA256(secret, "skillsight server proof")``."""
    return _derive(secret, b"skillsight server proof")


def proof(secret: str | bytes, nonce: str | bytes, body: bytes) -> str:
    """``HMAC-SHA256(proof_key(secret), nonce + "\n" + body)`` in hex: what a server signs an answer with."""
    msg = (nonce.encode("utf-8", "replace") if isinstance(nonce, str) else nonce) + b"\n" + body
    return hmac.new(proof_key(secret), msg, hashlib.sha256).hexdigest()


def publish(index: str | os.PathLike[str], url: str, secret: str | None = None) -> Path:
    """Write the endpoint file of ``index`` (atomically, mode 0600) and return its path.

    ``secret`` (see the module docstring) is what the hook derives its token and the expected
    proof of each answer from; without one the hook does not use the server.
    """
    path = endpoint_file(index)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    record = {"url": url, "pid": os.getpid(), "index": os.path.realpath(os.fspath(index)),
              "started": time.time(), "secret": secret}
    atomic_write_bytes(path, json.dumps(record).encode("utf-8"), mode=0o600)
    return path


def _read(path: Path) -> Any:
    from skillsight_fast.limits import load_json, read_regular_file

    raw = read_regular_file(path, MAX_RECORD_BYTES, error=SkillsightError, what="endpoint record",
                            private=True)
    return load_json(raw, error=SkillsightError, what=str(path), max_depth=2)


def withdraw(index: str | os.PathLike[str]) -> None:
    """Remove the endpoint file of ``index`` if this process wrote it."""
    path = endpoint_file(index)
    try:
        record = _read(path)
        if isinstance(record, dict) and record.get("pid") == os.getpid():
            path.unlink()
    except (OSError, SkillsightError):
        pass


def withdraw_on_signals(index: str | os.PathLike[str]) -> None:
    """Withdraw the endpoint of ``index`` when ``SIGTERM`` or ``SIGHUP`` ends this process, which
    then ends by that signal as it would have (call from the main thread; elsewhere it does nothing)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum: int, _frame: Any) -> None:
        withdraw(index)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) in (signal.SIG_DFL, None):
            signal.signal(sig, handler)


def lookup(index: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The endpoint record of a live server of ``index``, or None (no file, stale, unreadable, not
    private to this user, or without a secret)."""
    path = endpoint_file(index)
    try:
        record = _read(path)
    except SkillsightError as exc:
        logger.info("%s", exc)
        return None
    if not isinstance(record, dict) or not isinstance(record.get("url"), str):
        return None
    pid = record.get("pid")
    if type(pid) is not int or pid <= 0 or not _alive(pid):  # pid 0 / -1 name groups; `true` is no pid
        return None
    if not record["url"].startswith(("http://127.0.0.1:", "http://localhost:", "http://[::1]:")):
        return None  # only loopback servers are asked
    secret = record.get("secret")
    if not (isinstance(secret, str) and len(secret) == SECRET_CHARS and secret.isascii()
            and secret.isalnum()):
        return None  # no proof possible: do not trust whatever answers on that port
    return record


def _alive(pid: int) -> bool:
    if not 0 < pid < 2**31:  # 0 and -1 name process groups; larger ones are no pid (os.kill overflows)
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except (OSError, OverflowError):
        return False
    return True
