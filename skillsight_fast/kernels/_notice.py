"""One line on stderr when a kernel is compiled rather than loaded from Numba's on-disk cache.

The first compile of the kernels takes about a minute on a small machine; a process that loads them
from the cache (``cache=True``) takes well under a second and says nothing. Numba fires its
``numba:compile`` event only on a cache miss, so a listener on it tells the two apart exactly. The
line is a ``logging`` warning of this module: with no logging set up, Python prints it on stderr as
is. It is said once per process; while compiles go on, a line follows every :data:`EVERY` seconds
(a kernel can take half a minute on its own), so a compiling process is never silent for long.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

logger = logging.getLogger(__name__)

#: The line said on the first compile of a skillsight kernel in a process.
NOTICE = "compiling search kernels (once per install, about a minute; later runs load them from the cache)…"

#: Seconds between two lines while kernels compile (under 5: a busy process wakes its thread late).
EVERY = 4.0

_lock = threading.Lock()
_installed = False
_said = False
_active = 0  # compiles of our kernels under way (several threads may compile at once)
_started = 0.0
_last_seen = 0.0  # when a compile of ours last started or ended


def _is_ours(event: Any) -> bool:
    dispatcher = (event.data or {}).get("dispatcher")
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    return module.startswith("skillsight_fast")


def _say_once() -> None:
    global _said, _started
    with _lock:
        if _said:
            return
        _said = True
        _started = time.monotonic()
    logger.warning(NOTICE)
    threading.Thread(target=_heartbeat, name="skillsight-compile-notice", daemon=True).start()


def _heartbeat() -> None:
    """A line every EVERY seconds while kernels compile (one after another, with short gaps between
    them); a daemon thread that otherwise sleeps, so a later compile in the process is announced too."""
    last_line = time.monotonic()
    while True:
        time.sleep(0.5)
        now = time.monotonic()
        with _lock:
            busy = _active > 0 or now - _last_seen < 1.0
        if busy and now - last_line >= EVERY:
            last_line = now
            logger.warning("still compiling search kernels (%d s so far)…", now - _started)


def _count(step: int) -> None:
    global _active, _last_seen
    with _lock:
        _active += step
        _last_seen = time.monotonic()


def install() -> None:
    """Register the listener (idempotent). Called when a kernel module is imported."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    from numba.core import event

    class _CompileNotice(event.Listener):
        def on_start(self, ev: Any) -> None:
            if _is_ours(ev):
                _count(1)
                if not _said:
                    _say_once()

        def on_end(self, ev: Any) -> None:
            if _is_ours(ev):
                _count(-1)

    event.register("numba:compile", _CompileNotice())
