"""One line on stderr when kernels are compiled rather than loaded from Numba's on-disk cache.

The first compile of the search kernels takes about a minute on a small machine; it happens once per
install (:mod:`skillsight_fast.kernels._compiled`: the first kernel call with a cold cache compiles the
whole set), and a process that loads them from the cache (``cache=True``) takes well under a second
and says nothing. Numba fires its ``numba:compile`` event only on a cache miss, so a listener on it
tells the two apart exactly. Two lines, each said at most once per process:

- :data:`NOTICE`, while :func:`whole_set` is active (the warm-up compiling every search kernel);
- :data:`STRAY`, for any other compile of a kernel of ours: a build-only kernel (sharded builds, the
  fitted query table, ``bench``) the first time a build uses it, or a kernel whose cache entry was lost.

The lines are ``logging`` warnings of this module: with no logging set up, Python prints them on
stderr as they are; ``-q`` on the command line raises the ``skillsight_fast.kernels`` logger's level to
``ERROR``, which silences them. While compiles go on, a line follows every :data:`EVERY` seconds
(a kernel can take half a minute on its own), so a compiling process is never silent for long.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)

#: The line said when the whole set of search kernels is compiled (once per install).
NOTICE = ("compiling the search kernels, once for this install (about a minute; "
          "later runs load them from Numba's cache)…")
#: The line said for a compile outside that set (``%s``: the kernel's module and name).
STRAY = "compiling kernel %s (not in Numba's cache yet; a few seconds)…"

#: Seconds between two lines while kernels compile (under 5: a busy process wakes its thread late).
EVERY = 4.0

_lock = threading.Lock()
_installed = False
_said_whole = False
_said_stray = False
_whole = 0  # whole_set() blocks under way
_heartbeat_started = False
_active = 0  # compiles of our kernels under way (several threads may compile at once)
_started = 0.0
_last_seen = 0.0  # when a compile of ours last started or ended


@contextmanager
def whole_set() -> Iterator[None]:
    """Mark compiles inside the block as the once-per-install compile of every search kernel."""
    global _whole
    with _lock:
        _whole += 1
    try:
        yield
    finally:
        with _lock:
            _whole -= 1


def _name_of(event: Any) -> str:
    func = getattr((event.data or {}).get("dispatcher"), "py_func", None)
    module = (getattr(func, "__module__", "") or "").rsplit(".", 1)[-1]
    return f"{module}.{getattr(func, '__name__', '?')}"


def _is_ours(event: Any) -> bool:
    dispatcher = (event.data or {}).get("dispatcher")
    module = getattr(getattr(dispatcher, "py_func", None), "__module__", "") or ""
    return module.startswith("skillsight_fast")


def _say(event: Any) -> None:
    global _said_whole, _said_stray, _started, _heartbeat_started
    with _lock:
        whole = _whole > 0
        if (whole and _said_whole) or (not whole and (_said_stray or _said_whole)):
            return  # a stray compile after the whole set's line adds nothing the user needs
        if whole:
            _said_whole = True
        else:
            _said_stray = True
        _started = time.monotonic()
        start = not _heartbeat_started
        _heartbeat_started = True
    if whole:
        logger.warning(NOTICE)
    else:
        logger.warning(STRAY, _name_of(event))
    if start:
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
            logger.warning("still compiling kernels (%d s so far)…", now - _started)


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
                _say(ev)

        def on_end(self, ev: Any) -> None:
            if _is_ours(ev):
                _count(-1)

    event.register("numba:compile", _CompileNotice())
