"""The checks a load deferred (``verify="background"`` / ``"lazy"``, docs/GUARANTEES.md): checksums and content
checks run on a thread or on demand, their state in :class:`Verification`."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
from pathlib import Path
from typing import Any

from skillsight_fast.errors import IndexFormatError

logger = logging.getLogger(__name__)


def _checksum_error(path: Path) -> IndexFormatError:
    return IndexFormatError(f"{path}: checksum mismatch (the file is corrupt or was changed)")





def _verification_jobs(directory: Path, manifest: dict[str, Any]) -> list[tuple[str, int, str]]:
    """(file name, open descriptor, expected sha256) of every checksummed file of the folder; opened
    now, so a later save swapping the folder cannot make the check read another version."""
    wanted: list[tuple[str, str]] = [(e["file"], e["sha256"]) for e in manifest["arrays"].values()]
    scan = manifest.get("scan") or {}
    wanted += [(e["file"], e["sha256"]) for e in (scan.get("arrays") or {}).values()]
    wanted += [(name, e["sha256"]) for name, e in (scan.get("files") or {}).items()]
    wanted += [(name, digest) for name, digest in manifest["files"].items()]
    for entries in (manifest.get("strings") or {}).values():
        wanted += [(e["file"], e["sha256"]) for e in entries.values()]
    jobs = []
    try:
        for name, digest in wanted:
            jobs.append((name, os.open(directory / name, os.O_RDONLY), digest))
    except OSError as exc:
        for _, fd, _ in jobs:
            os.close(fd)
        raise IndexFormatError(f"{directory}: cannot open {exc.filename} to verify it ({exc.strerror})") from None
    return jobs


class Verification:
    """The checks of a loaded index that run after it answers (docs/GUARANTEES.md): the sha256 of every
    file against the manifest, then the deferred content checks (finiteness of the float32
    matrices, UTF-8 of the string columns), on a daemon thread of their own.

    ``status`` is ``"pending"``, ``"ok"`` or ``"failed"``; ``error`` the first failure's message.
    :meth:`check` raises it (IndexFormatError) once the verification has failed; a server calls it
    before every answer, so a corrupt index stops answering as soon as the corruption is found.
    """

    def __init__(self, directory: Path, jobs: list[tuple[str, int, str]], checks: dict[str, Any],
                 start: bool = True) -> None:
        self.directory = Path(str(directory))
        self._jobs = jobs
        self._checks = dict(checks)
        self._passed: set[str] = set()
        self._check_lock = threading.Lock()
        self.status = "pending"
        self.error: str | None = None
        self.seconds: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="skillsight-verify", daemon=True)
        if start:
            self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        if threading.current_thread() is self._thread and hasattr(os, "setpriority"):
            # the lowest CPU priority for this thread alone (Linux: a thread's own nice value): the
            # searches served meanwhile keep the core
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        jobs, self._jobs = self._jobs, []
        try:
            for name, fd, digest in jobs:
                if self.error is None:
                    h = hashlib.sha256()
                    with os.fdopen(os.dup(fd), "rb") as fh:
                        while block := fh.read(1 << 20):
                            h.update(block)
                    if h.hexdigest() != digest:
                        self.error = f"{name}: checksum mismatch (the file is corrupt or was changed)"
            for name in list(self._checks) if self.error is None else ():
                self.require(name)
        except IndexFormatError as exc:
            self.error = self.error or str(exc)
        except (OSError, ValueError) as exc:  # pragma: no cover - a file unreadable after it was opened
            self.error = f"cannot verify: {exc}"
        finally:
            for _, fd, _ in jobs:
                with contextlib.suppress(OSError):
                    os.close(fd)
            self.seconds = time.perf_counter() - t0
            self.status = "failed" if self.error else "ok"
            self._done.set()

    def require(self, name: str) -> None:
        """Run the deferred content check ``name`` now unless it has run (a kernel about to read what
        it checks calls this first); raises IndexFormatError when it fails."""
        if name in self._passed or name not in self._checks:
            return
        with self._check_lock:
            if name in self._passed:
                return
            try:
                self._checks[name]()
            except IndexFormatError as exc:
                self.error = self.error or str(exc)
                raise IndexFormatError(f"{self.directory}: {exc}") from None
            self._passed.add(name)

    def wait(self, timeout: float | None = None) -> str:
        """Wait for the verification (at most ``timeout`` seconds) and return its status."""
        if not self._thread.is_alive() and not self._done.is_set():
            self._run()
        self._done.wait(timeout)
        return self.status

    def check(self) -> None:
        """Raise IndexFormatError when the verification has failed (never waits)."""
        if self.error is not None and self._done.is_set():
            raise IndexFormatError(f"{self.directory}: the index failed its verification after loading: "
                                   f"{self.error}")

    def to_dict(self) -> dict[str, Any]:
        """``{status, error, seconds}`` for ``GET /health``."""
        return {"status": self.status, "error": self.error,
                "seconds": round(self.seconds, 3) if self.seconds is not None else None}


def _check_digests(digests: tuple[list[tuple[Path, dict[str, Any]]], Any] | None) -> None:
    """Wait for the background digests of the arrays; raise for the first one that differs from the
    manifest (a file that could not be read is left to the error its load gave)."""
    if digests is None:
        return
    paths, result = digests
    for (path, entry), digest in zip(paths, result()):
        if isinstance(digest, str) and digest != entry.get("sha256"):
            raise _checksum_error(path)
