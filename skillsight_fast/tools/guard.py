"""What the proxy accepts from an upstream MCP server, and how its children are tied to it.

An upstream server is a program the user configured, but what it sends is data the proxy must
survive. Every line a stdio upstream writes is read here instead of by the SDK's parser
(:func:`install` replaces ``mcp.client.stdio._parse_line``):

* it is parsed by Python's ``json`` (which handles nesting the SDK's parser refuses) and an answer
  that cannot be read at all (nested 100,000 deep, not JSON) becomes a JSON-RPC error for its
  request id, so the request fails at once instead of waiting for its timeout;
* each tool of a ``tools/list`` answer is checked on its own: one without a string name, with a
  schema that is not an object, nested deeper than :data:`MAX_SCHEMA_DEPTH` or longer than
  :data:`MAX_SCHEMA_CHARS` as JSON is skipped (and logged), never its whole server; a
  ``description`` that is not a string counts as none; descriptions and titles are cut to
  :data:`MAX_DESCRIPTION_CHARS` / :data:`MAX_TITLE_CHARS`;
* a page keeps at most :data:`MAX_TOOLS_PER_SERVER` tools (the proxy also caps each server's whole
  list, and says so in search results).

Every line is assembled by :class:`BoundedLines` (it replaces the SDK's text stream on a stdio
upstream's stdout): in time linear in its length (the SDK's reader re-splits its whole buffer on each
chunk, quadratic in a long line), and at most :data:`MAX_MESSAGE_BYTES` of it are held: a longer line
is dropped while it is read, and the request it answers fails at once with a message saying so.

:func:`orphan_guard` wraps an upstream's command line so that, on Linux, the upstream is killed
when the proxy dies (``PR_SET_PDEATHSIG``), whatever way it dies.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from typing import Any

logger = logging.getLogger(__name__)

#: Most tools kept from one upstream server (one page or all pages together).
MAX_TOOLS_PER_SERVER = 512
#: Longest tool description and title kept (characters).
MAX_DESCRIPTION_CHARS, MAX_TITLE_CHARS = 8192, 256
#: Longest tool name accepted (characters).
MAX_NAME_CHARS = 128
#: Deepest input schema accepted (objects and arrays), and its longest JSON text.
MAX_SCHEMA_DEPTH, MAX_SCHEMA_CHARS = 32, 65_536

#: Longest message (one line) a stdio upstream may send, in bytes: a longer one fails its request.
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
#: Bytes of an over-long line kept at each end to find its request id.
_ID_WINDOW = 400

_ID = re.compile(r'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


def check_tool(tool: Any) -> tuple[dict[str, Any] | None, str]:
    """``(tool, "")`` with its texts cut, or ``(None, reason)`` for a tool that is skipped."""
    from skillsight_fast.limits import _depth

    if not isinstance(tool, dict):
        return None, "a tool that is not an object"
    name = tool.get("name")
    if not isinstance(name, str) or not name or len(name) > MAX_NAME_CHARS:
        return None, (
            f"a tool whose name is not a string of 1..{MAX_NAME_CHARS} characters ({str(name)[:60]!r})"
        )
    schema = tool.get("inputSchema", {})
    if schema is None:
        schema = {}
    if not isinstance(schema, dict):
        return None, f"tool {name!r}: its inputSchema is not an object"
    if not _depth(schema, MAX_SCHEMA_DEPTH):
        return None, f"tool {name!r}: its inputSchema is nested deeper than {MAX_SCHEMA_DEPTH} levels"
    if len(json.dumps(schema, ensure_ascii=False)) > MAX_SCHEMA_CHARS:
        return None, f"tool {name!r}: its inputSchema is over {MAX_SCHEMA_CHARS:,} characters"
    out = dict(tool, inputSchema=schema)
    for key, limit in (("description", MAX_DESCRIPTION_CHARS), ("title", MAX_TITLE_CHARS)):
        value = out.get(key)
        if value is not None and not isinstance(value, str):
            out[key] = None
        elif isinstance(value, str) and len(value) > limit:
            out[key] = value[: limit - 1] + "…"
    if "outputSchema" in out and not (
        isinstance(out["outputSchema"], dict) and _depth(out["outputSchema"], MAX_SCHEMA_DEPTH)
    ):
        del out["outputSchema"]  # not used by the proxy; never a reason to lose the tool
    return out, ""


def clean_tools(tools: list[Any]) -> list[dict[str, Any]]:
    """The usable tools of one ``tools/list`` page (see :func:`check_tool`), at most
    :data:`MAX_TOOLS_PER_SERVER` + 1 (one more, so the proxy can tell the server listed too many and
    say so); every skipped tool is logged with its reason."""
    kept: list[dict[str, Any]] = []
    for tool in tools:
        if len(kept) > MAX_TOOLS_PER_SERVER:
            logger.warning(
                "an MCP server listed more than %d tools on one page; the rest are left out",
                MAX_TOOLS_PER_SERVER,
            )
            break
        good, reason = check_tool(tool)
        if good is None:
            logger.warning("an MCP server listed %s; that tool is skipped", reason)
        else:
            kept.append(good)
    return kept


def _error(mid: Any, message: str) -> Any:
    from mcp.client import stdio

    return stdio.SessionMessage(
        stdio.types.jsonrpc_message_adapter.validate_python(
            {"jsonrpc": "2.0", "id": mid, "error": {"code": -32700, "message": message}}, by_name=False
        )
    )


def _recover_id(line: str) -> Any:
    """The request id of a JSON-RPC answer that cannot be parsed (looked for near either end)."""
    for part in (line[:_ID_WINDOW], line[-_ID_WINDOW:]):
        m = _ID.search(part)
        if m:
            try:
                return json.loads(m.group(1))
            except ValueError:
                return None
    return None


class BoundedLines:
    """A stdio upstream's stdout as whole lines (each ending in ``"\\n"``), one per ``receive``.

    Stands in for the SDK's ``TextReceiveStream`` (same constructor). Each chunk is searched for
    newlines once and a line's pieces are joined once, so reading costs time linear in what the
    server sends; a line is held only up to :data:`MAX_MESSAGE_BYTES`: the rest of a longer one is
    read and dropped, and in its place comes a JSON-RPC error for its request id (found in its first
    or last bytes), so that request fails at once. An over-long line without an id is only logged.
    Bytes that are not text in ``encoding`` are replaced (never an exception that ends the reader).
    """

    def __init__(self, transport_stream: Any, encoding: str = "utf-8", errors: str = "strict") -> None:
        from collections import deque

        self._stream = transport_stream
        self._encoding = encoding
        self._errors = errors
        self._lines: Any = deque()
        self._parts: list[bytes] = []
        self._size = 0
        self._over = self._reported = False
        self._head = b""
        self._tail = b""

    def __aiter__(self) -> BoundedLines:
        return self

    async def __anext__(self) -> str:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def receive(self) -> str:
        """The next whole line (an unfinished last line at the end of the stream is dropped)."""
        while not self._lines:
            self._feed(await self._stream.receive())
        return self._lines.popleft()

    async def aclose(self) -> None:
        await self._stream.aclose()

    def _feed(self, chunk: bytes) -> None:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            piece = chunk[start:] if end < 0 else chunk[start:end]
            self._add(piece)
            if end < 0:
                return
            self._finish()
            start = end + 1

    def _add(self, piece: bytes) -> None:
        if not piece:
            return
        if len(self._head) < _ID_WINDOW:
            self._head += piece[: _ID_WINDOW - len(self._head)]
        self._size += len(piece)
        if not self._over and self._size <= MAX_MESSAGE_BYTES:
            self._parts.append(piece)
            return
        if not self._over:  # from now on only the line's last bytes are kept, to find its request id
            self._over = True
            self._tail = b"".join(self._parts)[-_ID_WINDOW:]
            self._parts = []
            self._reported = self._refuse(_recover_id(self._head.decode("utf-8", "replace")))
        self._tail = (self._tail + piece[-_ID_WINDOW:])[-_ID_WINDOW:]

    def _refuse(self, mid: Any) -> bool:
        """Queue the error answer of request ``mid`` for an over-long line; whether there was an id."""
        if not isinstance(mid, (int, str)) or isinstance(mid, bool):
            return False
        self._lines.append(json.dumps({"jsonrpc": "2.0", "id": mid, "error": {
            "code": -32600, "message": f"the server's answer is over the {MAX_MESSAGE_BYTES:,}-byte limit "
                                       "of one message; it was dropped"}}) + "\n")
        return True

    def _finish(self) -> None:
        if self._over:
            logger.warning("an MCP server sent a message of %s bytes, over the %s-byte limit; it was dropped",
                           f"{self._size:,}", f"{MAX_MESSAGE_BYTES:,}")
            if not self._reported:
                self._refuse(_recover_id(self._tail.decode("utf-8", "replace")))
        else:
            raw = b"".join(self._parts)
            try:
                text = raw.decode(self._encoding, self._errors)
            except (UnicodeDecodeError, LookupError):
                text = raw.decode("utf-8", "replace")
            self._lines.append(text + "\n")
        self._parts, self._size, self._over, self._reported = [], 0, False, False
        self._head = self._tail = b""


def parse_line(line: str) -> Any:
    """One line from a stdio upstream as the SDK's ``SessionMessage``, or an exception (as the SDK's own
    parser returns one): see the module docstring."""
    from mcp.client import stdio

    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:
        mid = _recover_id(line)
        reason = "nested too deeply" if isinstance(exc, RecursionError) else "not JSON"
        logger.warning(
            "an MCP server sent a message that cannot be read (%s, %d characters)", reason, len(line)
        )
        if mid is not None:
            return _error(mid, f"the server's answer cannot be read ({reason}, {len(line):,} characters)")
        return exc if isinstance(exc, ValueError) else ValueError(str(exc))
    result = obj.get("result") if isinstance(obj, dict) else None
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        result["tools"] = clean_tools(result["tools"])
    try:
        return stdio.SessionMessage(stdio.types.jsonrpc_message_adapter.validate_python(obj, by_name=False))
    except (ValueError, RecursionError) as exc:
        mid = obj.get("id") if isinstance(obj, dict) else None
        if isinstance(mid, (int, str)) and not isinstance(mid, bool) and ("result" in obj or "error" in obj):
            first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
            return _error(mid, f"the server's answer is not a valid MCP message ({first})")
        return exc if isinstance(exc, ValueError) else ValueError(str(exc))


_installed = False


def install() -> None:
    """Read every stdio upstream line through :class:`BoundedLines` and :func:`parse_line`
    (idempotent; a SDK without the hook points keeps its own reader, and a warning says so)."""
    global _installed
    if _installed:
        return
    from mcp.client import stdio

    if not callable(getattr(stdio, "_parse_line", None)) or not hasattr(stdio, "TextReceiveStream"):
        logger.warning(
            "this MCP SDK has no stdio line parser to guard; upstream answers are parsed by the SDK"
        )
        return
    stdio._parse_line = parse_line
    stdio.TextReceiveStream = BoundedLines
    _installed = True


#: Run by the guard process: die with the parent (checked after the prctl: no race), then exec the server.
_GUARD = (
    "import ctypes,os,signal,sys\n"
    "ctypes.CDLL(None,use_errno=True).prctl(1,signal.SIGKILL,0,0,0)\n"
    "os.getppid()==int(sys.argv[1]) or os._exit(1)\n"
    "os.execvp(sys.argv[2],sys.argv[2:])"
)


def orphan_guard(command: str, args: list[str]) -> tuple[str, list[str]]:
    """``(command, args)`` that start the server so that it is killed when this process dies (Linux:
    ``PR_SET_PDEATHSIG`` = ``SIGKILL``, set in a tiny launcher that then ``exec``s the server, so the
    server is the proxy's direct child); elsewhere the command line unchanged."""
    import shutil

    if not sys.platform.startswith("linux") or shutil.which(command) is None:
        return command, list(args)  # a missing command keeps the SDK's own "cannot start" error
    return sys.executable, ["-S", "-c", _GUARD, str(os.getpid()), command, *args]
