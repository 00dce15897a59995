"""Make every MCP request line on stdin parseable by the SDK: lone surrogate escapes become U+FFFD.

``"\\ud800"`` is valid JSON (Python's parser accepts it), but the MCP SDK parses request lines with
pydantic-core, which rejects a lone surrogate escape as invalid JSON; the SDK then drops the line
and the client never gets an answer, not even an error. :func:`filtered_stdin` puts a pipe in
front of file descriptor 0 for as long as a stdio server runs: a thread copies the real stdin line
by line, replacing each lone surrogate escape by ``\\ufffd`` (the replacement character, which is
what :func:`skillsight_fast.limits.clean_text` makes of a lone surrogate anyway). Escaped
backslashes and proper surrogate pairs (``\\ud83d\\ude00``) are left alone. The SDK is untouched:
it reads fd 0 as usual.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
from collections.abc import Iterator

logger = logging.getLogger(__name__)

# an escaped backslash (consumed first, so "\\\\ud800" is text, not an escape), a high surrogate
# escape with its optional low partner, or a lone low one
_ESCAPE = re.compile(rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}(?:\\u[dD][c-fC-F][0-9a-fA-F]{2})?"
                     rb"|\\u[dD][c-fC-F][0-9a-fA-F]{2}")
_REPLACEMENT = b"\\ufffd"


def _fix(match: re.Match[bytes]) -> bytes:
    text = match.group(0)
    return text if text == b"\\\\" or len(text) == 12 else _REPLACEMENT


def fix_lone_surrogate_escapes(line: bytes) -> bytes:
    """``line`` (JSON text) with every lone surrogate escape replaced by ``\\ufffd``.

    Examples
    --------
    >>> fix_lone_surrogate_escapes(rb'{"task": "a \\ud800 b"}')
    b'{"task": "a \\\\ufffd b"}'
    >>> fix_lone_surrogate_escapes(rb'"\\ud83d\\ude00 \\\\ud800"')  # a pair, and an escaped backslash
    b'"\\\\ud83d\\\\ude00 \\\\\\\\ud800"'
    """
    if b"\\ud" not in line and b"\\uD" not in line:
        return line
    return _ESCAPE.sub(_fix, line)


@contextlib.contextmanager
def filtered_stdin() -> Iterator[None]:
    """While inside, file descriptor 0 reads the process's stdin through :func:`fix_lone_surrogate_escapes`.

    Meant for a stdio server's process (``serve --mcp``, the proxy); on exit fd 0 is the original
    stdin again. Nothing changes when fd 0 is closed.
    """
    try:
        real = os.dup(0)
    except OSError:  # no stdin at all: nothing to filter
        yield
        return
    saved = os.dup(0)
    read_end, write_end = os.pipe()
    os.dup2(read_end, 0)
    os.close(read_end)

    def pump() -> None:
        try:
            with open(real, "rb") as src, open(write_end, "wb") as dst:
                for line in src:
                    dst.write(fix_lone_surrogate_escapes(line))
                    dst.flush()
        except OSError as exc:  # the server stopped reading (pipe closed): nothing left to do
            logger.debug("stdin filter stopped: %s", exc)

    threading.Thread(target=pump, daemon=True, name="skillsight-stdin-filter").start()
    try:
        yield
    finally:
        os.dup2(saved, 0)
        os.close(saved)
