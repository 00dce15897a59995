"""File plumbing shared by the whole package: checksums, durable and atomic writes, text readers.

One copy of each: the index format (:mod:`skillsight_fast.engine.io`), the model export and cache, the
evaluation cache, the installer, the endpoint files and every JSONL reader use these. This module
imports nothing else of the package.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import hashlib
import io
import json
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import IO, Any


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike[str], chunk: int = 1 << 20) -> str:
    """Hex SHA-256 of a file, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def sha256_files_in_background(paths: Iterable[str | os.PathLike[str]]) -> Callable[[], list[str | OSError]]:
    """Start hashing ``paths`` (:func:`sha256_file`, one after the other) on a thread of its own.

    Returns a function that waits for the thread and gives each file's hex SHA-256, or the
    ``OSError`` that reading it raised. hashlib and file reads release the GIL, so on a machine
    with a free core the digests cost the caller no time while it parses and validates.
    """
    paths = list(paths)
    out: list[str | OSError] = []

    def work() -> None:
        for path in paths:
            try:
                out.append(sha256_file(path))
            except OSError as exc:
                out.append(exc)

    thread = threading.Thread(target=work, name="skillsight-sha256", daemon=True)
    thread.start()

    def result() -> list[str | OSError]:
        thread.join()
        return out

    return result


def write_durable(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` and fsync it (the caller makes the folder appear atomically)."""
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def write_durable_chunks(path: str | os.PathLike[str], chunks: Iterable[bytes]) -> str:
    """Write ``chunks`` one after the other to ``path``, fsync it and return its hex SHA-256.

    The streaming twin of :func:`write_durable`: the content is never held in memory at once.
    """
    h = hashlib.sha256()
    with open(path, "wb") as fh:
        for chunk in chunks:
            h.update(chunk)
            fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    return h.hexdigest()


def umask_mode(mode: int = 0o777) -> int:
    """``mode`` with this process's umask applied: what ``mkdir`` would give a folder (temporary folders
    from :func:`tempfile.mkdtemp` are 0700; an index renamed from one must look like any other folder)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:  # no race with other threads
            for line in fh:
                if line.startswith("Umask:"):
                    return mode & ~int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mode & ~mask


def fsync_dir(path: str | os.PathLike[str]) -> None:
    """fsync a folder so renames inside it are durable (ignored where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: int = 0o644, suffix: str = ".tmp") -> Iterator[Path]:
    """A temporary path beside ``path`` that replaces ``path`` when the block ends without error.

    The block writes the temporary file (by name: for writers that take a path, such as
    onnxruntime's quantizer or :func:`shutil.copyfile`); it is then fsynced, given ``mode``
    (:func:`tempfile.mkstemp` creates 0600) and renamed over ``path`` with :func:`os.replace`, and
    the folder is fsynced. On an error the temporary file is removed and ``path`` is unchanged.

    Parameters
    ----------
    path : path
        The destination; its folder is created if missing.
    mode : int
        Permission bits of the result.
    suffix : str
        Ending of the temporary file's name (for writers that look at it).

    Yields
    ------
    pathlib.Path
        The temporary file (created empty).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` atomically and durably (see :func:`atomic_output`)."""
    with atomic_output(path, mode) as tmp, open(tmp, "wb") as fh:
        fh.write(data)


#: Longest line :func:`iter_lines` returns (characters); a longer one is an error, not a memory blow-up.
MAX_LINE_CHARS = 16 << 20


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open a regular UTF-8 text file for reading, gunzipping ``*.gz``.

    The file is opened non-blocking and checked on the open descriptor: a FIFO, a device (a link
    to ``/dev/zero``) or a socket raises ``OSError`` at once instead of hanging or filling memory.
    """
    import stat

    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket)", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        raw = open(fd, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except BaseException:
        os.close(fd)
        raise
    if str(path).endswith(".gz"):
        return gzip.open(raw, "rt", encoding="utf-8")
    return io.TextIOWrapper(raw, encoding="utf-8")


def iter_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """(line number, line) of each non-blank line of a UTF-8 text file, gunzipping ``*.gz``.

    A UTF-8 byte-order mark at the start of the file is dropped. Lines keep their newline. For
    readers that parse each line themselves (and report a bad one without stopping); the others
    use :func:`iter_jsonl`. Raises ``UnicodeDecodeError`` or ``OSError``/``EOFError`` (a damaged
    gzip stream can also raise ``zlib.error``).
    """
    with open_text(path) as fh:
        for lineno, line in enumerate(iter(lambda: fh.readline(MAX_LINE_CHARS + 1), ""), 1):
            if len(line) > MAX_LINE_CHARS:
                raise OSError(errno.EFBIG, f"line {lineno} is over {MAX_LINE_CHARS:,} characters", str(path))
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            if line.strip():
                yield lineno, line


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank line of a ``.jsonl`` / ``.jsonl.gz`` file.

    A UTF-8 byte-order mark before the first record is skipped. Raises ``json.JSONDecodeError``,
    ``RecursionError``, ``UnicodeDecodeError`` or ``OSError``/``EOFError``; callers turn them into
    their own error with the file and line.
    """
    for lineno, line in iter_lines(path):
        yield lineno, json.loads(line)


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Every record of a ``.jsonl`` / ``.jsonl.gz`` file (see :func:`iter_jsonl`)."""
    return [rec for _, rec in iter_jsonl(path)]
