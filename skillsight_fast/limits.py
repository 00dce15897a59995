"""Bounded input: read only regular files, at most a size limit; parse JSON with depth limits.

Everything skillsight-fast reads from disk goes through :func:`read_regular_file`, so a FIFO, a
device (``/dev/zero``), a socket or a symlink to one is refused instead of hanging the process or
filling its memory, and no more than ``limit + 1`` bytes are ever read (a file that grows past
its ``stat`` size is still cut). Every JSON document goes through :func:`load_json`, which turns
the failures Python's parser raises beyond ``JSONDecodeError`` (``RecursionError`` on deep
nesting, ``ValueError`` on a 5,000-digit integer) into the caller's error class, and refuses
documents nested deeper than ``max_depth``.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillsight_fast.errors import SkillsightError

#: Characters of one text the encoder's tokenizer sees. The encoder keeps at most 256 tokens, and a
#: WordPiece token spans at most 100 characters (longer words become [UNK]); real text reaches 256
#: tokens within ~1,500 characters, so 32,768 leaves every real embedding unchanged while bounding
#: the tokenizer's memory (it keeps what it truncates: a 3.4 MB text cost ~1 GB).
MAX_ENCODE_CHARS = 32_768
#: Deepest JSON nesting accepted in index files, manifests and side files.
MAX_JSON_DEPTH = 64
#: Most digits of a JSON integer (Python refuses > 4,300 with a ValueError).
MAX_INT_DIGITS = 40


def read_regular_file(path: str | os.PathLike[str], limit: int, *, error: type[SkillsightError],
                      what: str = "file") -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes.

    The file is opened non-blocking (a FIFO never blocks the open), checked to be a regular file
    on the open descriptor (no race with a swap of the path), and read up to ``limit + 1`` bytes.

    Raises
    ------
    error
        Missing, unreadable, not a regular file, or over the limit.
    """
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:
        raise error(f"{p}: cannot read {what} ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: {what} is not a regular file (a FIFO, device or socket); refusing to read it")
        if st.st_size > limit:
            raise error(f"{p}: {st.st_size:,} bytes is over the {limit:,}-byte limit for {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        chunks: list[bytes] = []
        remaining = limit + 1
        while remaining > 0:
            block = os.read(fd, min(remaining, 1 << 22))
            if not block:
                break
            chunks.append(block)
            remaining -= len(block)
    except OSError as exc:
        raise error(f"{p}: cannot read {what} ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise error(f"{p}: over the {limit:,}-byte limit for {what} (the file grew while read)")
    return data


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` (following symlinks) is a regular file; never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _parse_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise ValueError(f"an integer of {len(text)} digits")
    return int(text)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"a number out of range ({text[:20]}...)")
    return value


def _depth(obj: Any, max_depth: int) -> bool:
    """True when ``obj`` nests at most ``max_depth`` containers deep (iterative: no recursion)."""
    stack = [(obj, 1)]
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            if d > max_depth:
                return False
            values = node.values() if isinstance(node, dict) else node
            # JSON values are exactly these types: a flat list of 100k strings costs one C-level pass
            kinds = set(map(type, values))
            if dict in kinds or list in kinds:  # only containers go on the stack
                stack.extend((v, d + 1) for v in values if isinstance(v, (dict, list)))
    return True


def load_json(data: str | bytes, *, error: type[SkillsightError], what: str, max_depth: int = MAX_JSON_DEPTH,
              allow_constants: bool = False) -> Any:
    """Parse one JSON document or raise ``error("<what>: ...")`` (never another exception).

    Parameters
    ----------
    data : str or bytes
        UTF-8 bytes (a leading BOM is dropped) or text.
    error : SkillsightError subclass
    what : str
        Where the document came from, for the message.
    max_depth : int
        Deepest nesting of objects and arrays accepted.
    allow_constants : bool
        Accept ``NaN``/``Infinity`` and overflowing floats (the manifest stores an infinite
        Otsu threshold); otherwise they are refused.
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
    except UnicodeDecodeError as exc:
        raise error(f"{what}: not valid UTF-8 (byte {exc.start})") from None
    text = text.removeprefix("\ufeff")
    hooks: dict[str, Callable[[str], Any]] = {"parse_int": _parse_int}
    if not allow_constants:
        hooks["parse_float"] = _parse_float
        hooks["parse_constant"] = _refuse_constant
    try:
        obj = json.loads(text, **hooks)  # type: ignore[arg-type]
    except (ValueError, TypeError, RecursionError) as exc:
        raise _json_error(exc, error, what, with_line=True) from None
    if not _depth(obj, max_depth):
        raise error(f"{what}: JSON nested deeper than {max_depth} levels")
    return obj


def _json_error(exc: Exception, error: type[SkillsightError], where: str, *,
                with_line: bool = False) -> SkillsightError:
    """The one-line error for a JSON parse failure at ``where``."""
    if isinstance(exc, json.JSONDecodeError):
        return error(f"{where}: invalid JSON ({exc.msg}{f', line {exc.lineno}' if with_line else ''})")
    if isinstance(exc, RecursionError):
        return error(f"{where}: JSON nested too deeply")
    return error(f"{where}: invalid JSON ({str(exc)[:80]})")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not allowed here")


def clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD (they cannot be encoded as UTF-8)."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def load_json_lines(lines: list[str], *, error: type[SkillsightError], what: str) -> list[Any]:
    """One JSON value per non-empty line (JSONL), each parsed as :func:`load_json` would but without
    its depth walk: callers check that every value is flat (a string, or an object of strings)."""
    out: list[Any] = []
    decode = json.JSONDecoder(parse_int=_parse_int, parse_constant=_refuse_constant).decode  # one decoder
    for i, line in enumerate(lines):
        if not line:
            continue
        try:
            out.append(decode(line))
        except (ValueError, TypeError, RecursionError) as exc:
            raise _json_error(exc, error, f"{what}:{i + 1}") from None
    return out
