"""Compile the search kernels once per install, in whichever process calls a kernel first.

Each kernel is compiled lazily and cached on disk per signature (``cache=True``), so without this a
process compiles only the kernels it calls: ``index`` the build's, the first ``serve`` the query
side's, the first Python search the rest (issue 39: three "about a minute" waits). Instead, the
first call of a public kernel in a process checks for a stamp beside Numba's cache of this folder;
if it is missing, :func:`skillsight_fast.kernels.warmup.warmup_kernels` compiles (or loads) every
search kernel on tiny arrays of the production dtypes, both writable and read-only (memory-mapped),
and writes the stamp. Every later process, whatever its entry point, finds the stamp and loads each
kernel from the cache when it first calls it.

The stamp's name hashes what Numba keys its cache on: the kernel sources (each file's mtime and
size), Numba's and Python's versions and the target CPU, so a changed kernel or a new Numba
compiles the set again. Under ``NUMBA_DISABLE_JIT``, or when Numba keeps no cache file for the
kernels, nothing is done.
"""

from __future__ import annotations

import importlib
import logging
import sys
import threading
from pathlib import Path

from skillsight_fast.files import sha256_text

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_ready = False  # True once this process has checked (and if needed compiled) the set


def ensure_compiled() -> None:
    """Make sure every search kernel is in Numba's cache (cheap after the first call of a process)."""
    if not _ready:
        _compile_once()


def _compile_once() -> None:
    global _ready
    with _lock:
        if _ready:
            return
        _ready = True  # first: the warm-up calls the kernels, which call ensure_compiled again
        stamp = stamp_path()
        if stamp is None or stamp.is_file():
            return
        # the warm-up imports every kernel module, and every kernel module imports this one: the one
        # intended back edge (a kernel's first call runs the set) is a run-time import, as the lazy
        # names of kernels/__init__.py are, so the static graph the import contracts check stays acyclic
        warmup = importlib.import_module(f"{__package__}.warmup")
        try:
            warmup.warmup_kernels()  # writes the stamp when the whole set is in the cache
        except Exception as exc:  # noqa: BLE001 - ahead-of-time work only: the caller's own kernel still runs
            logger.warning("could not compile the search kernels ahead of use: %s", exc)


def stamp_path() -> Path | None:
    """The stamp that says every search kernel of this install is in Numba's cache, or None (no JIT,
    or no cache directory)."""
    import numba

    if numba.config.DISABLE_JIT:
        return None
    from numba.core.caching import FunctionCache

    try:  # Numba's cache folder of a function of this folder: the one every kernel here caches in
        folder = FunctionCache(_probe).cache_path
    except (AttributeError, RuntimeError, OSError):  # no usable cache location
        return None
    return Path(folder) / f"skillsight-kernels-{_key()}.stamp"


def _probe() -> None:  # pragma: no cover - never called; only its source file counts
    """Stands for the kernels of this folder when asking Numba where their cache lives."""


def _key() -> str:
    import llvmlite.binding as ll
    import numba

    parts = [numba.__version__, sys.version, str(numba.config.CPU_NAME), str(numba.config.CPU_FEATURES),
             ll.get_host_cpu_name(), ll.get_host_cpu_features().flatten()]
    for source in sorted(Path(__file__).parent.glob("*.py")):
        st = source.stat()
        parts.append(f"{source.name}:{st.st_mtime_ns}:{st.st_size}")
    return sha256_text("\n".join(parts))[:16]


def write_stamp() -> None:
    """Record that the whole set is in the cache (a failure only costs the next process a reload)."""
    stamp = stamp_path()
    if stamp is None:
        return
    try:
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_bytes(b"")
    except OSError as exc:
        logger.debug("could not write %s: %s", stamp, exc)
