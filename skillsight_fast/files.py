"""File plumbing shared by the whole package: checksums, durable and atomic writes, text readers.

One copy of each: the index format (:mod:`skillsight_fast.io`), the model export, the evaluation
cache and every JSONL reader use these.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
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


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` via a fsynced temp file in the same folder and :func:`os.replace`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)  # mkstemp creates 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def open_text(path: str | os.PathLike[str]) -> IO[str]:
    """Open a UTF-8 text file for reading, gunzipping ``*.gz``."""
    if str(path).endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank line of a ``.jsonl`` / ``.jsonl.gz`` file.

    A UTF-8 byte-order mark before the first record is skipped. Raises ``json.JSONDecodeError``,
    ``RecursionError``, ``UnicodeDecodeError`` or ``OSError``/``EOFError``; callers turn them into
    their own error with the file and line.
    """
    with open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            if line.strip():
                yield lineno, json.loads(line)


def read_jsonl(path: str | os.PathLike[str]) -> list[Any]:
    """Every record of a ``.jsonl`` / ``.jsonl.gz`` file (see :func:`iter_jsonl`)."""
    return [rec for _, rec in iter_jsonl(path)]
