"""Reading the tools of live MCP servers with the official SDK client (stdio or streamable HTTP)."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any

from skillsight_fast.errors import SkillFormatError, SkillsightError, install_hint
from skillsight_fast.library.skills import Skill
from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT, ServerConfig, Tool, tool_skill

logger = logging.getLogger(__name__)

#: Seconds a server may take to start and list its tools.
LIST_TIMEOUT = 60.0
#: Most pages of ``tools/list`` read from one server, and most characters of tool text (names,
#: titles, descriptions and schemas as JSON) kept from all of them: a server whose list never ends
#: (a new ``nextCursor`` on every page) costs at most this much.
MAX_LIST_PAGES, MAX_LIST_CHARS = 64, 16 * 1024 * 1024
#: Most bytes of one stdio server's stderr copied to the log per start (the rest is dropped).
MAX_STDERR_BYTES = 1024 * 1024


def _sdk() -> Any:
    try:
        import mcp
    except ImportError:
        raise SkillsightError("reading MCP servers needs the official MCP SDK: "
                              + install_hint("serve")) from None
    return mcp


def tool_of(server: str, t: Any) -> Tool:
    """The :class:`Tool` record of an SDK tool object listed by ``server``."""
    schema = getattr(t, "input_schema", None)
    if schema is None:
        schema = getattr(t, "inputSchema", None)
    return Tool(server=server, name=str(t.name), description=str(getattr(t, "description", "") or ""),
                title=str(getattr(t, "title", "") or ""), input_schema=dict(schema or {}))


async def open_session(stack: AsyncExitStack, config: ServerConfig, *, message_handler: Any = None,
                       errlog: Any = None, wrap_read: Any = None, die_with_parent: bool = False) -> Any:
    """Start (stdio) or connect to (URL) one server inside ``stack``; the SDK session, not initialized.

    ``wrap_read`` may wrap the transport's read stream (the proxy uses it to notice a server that
    went away); ``errlog`` (any writable text file) receives the first :data:`MAX_STDERR_BYTES` of
    a stdio server's stderr, then one line saying the rest is dropped (default: all discarded);
    ``die_with_parent`` starts a stdio server so that it is killed when this process dies
    (:func:`skillsight_fast.tools.guard.orphan_guard`).
    """
    mcp = _sdk()
    if config.url:
        from mcp.client.streamable_http import streamable_http_client

        streams = await stack.enter_async_context(streamable_http_client(config.url))
    else:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        command, args = config.command, list(config.args)
        if die_with_parent:
            from skillsight_fast.tools.guard import orphan_guard

            command, args = orphan_guard(command, args)
        params = StdioServerParameters(command=command, args=args, env=dict(config.env) or None)
        if errlog is None:
            errlog = stack.enter_context(open(os.devnull, "w"))  # noqa: ASYNC230, SIM115 - closed by the stack
            streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            pipe = _capped_copy(errlog, config.describe())
            try:
                streams = await stack.enter_async_context(stdio_client(params, errlog=pipe))
            finally:
                pipe.close()  # the server holds its own copy; the copier ends when it closes
    read, write = streams[0], streams[1]
    if wrap_read is not None:
        read = wrap_read(read)
    return await stack.enter_async_context(mcp.ClientSession(read, write, message_handler=message_handler))


def _capped_copy(errlog: Any, what: str) -> Any:
    """The write end of a pipe whose bytes a daemon thread copies to ``errlog``, at most
    :data:`MAX_STDERR_BYTES` of them, until every writer has closed it."""
    import threading

    r, w = os.pipe()

    def copy() -> None:
        left = MAX_STDERR_BYTES
        try:
            while chunk := os.read(r, 65536):
                if left > 0:
                    text = chunk[:left].decode("utf-8", "replace")
                    left -= len(chunk)
                    try:
                        errlog.write(text)
                        if left <= 0:
                            errlog.write(f"\n[skillsight: MCP server {what} wrote over {MAX_STDERR_BYTES:,} "
                                         "bytes to stderr; the rest is dropped]\n")
                        errlog.flush()
                    except (OSError, ValueError):  # a closed log: keep draining the pipe
                        left = 0
        finally:
            os.close(r)

    threading.Thread(target=copy, name="mcp-stderr", daemon=True).start()
    return os.fdopen(w, "wb", buffering=0)


#: Affixes a server's reported or command name carries that say only "an MCP server".
_NAME_PREFIXES = ("mcp-server-", "mcp_server_", "mcp-", "mcp_", "server-")
_NAME_SUFFIXES = ("-mcp-server", "_mcp_server", "-mcp", "_mcp", "-server", "_server")


def canonical_server_name(raw: str) -> str:
    """A server's name in tool ids when none is configured: ``raw`` without the affixes that only
    say "MCP server" (``mcp-git`` and ``mcp-server-git`` -> ``git``, ``github-mcp-server`` ->
    ``github``), ``/`` replaced by ``-``; ``raw`` itself if nothing would be left.

    Examples
    --------
    >>> [canonical_server_name(n) for n in ("mcp-git", "mcp-server-time", "github-mcp-server", "mcp")]
    ['git', 'time', 'github', 'mcp']
    """
    name = raw.strip().replace("/", "-")
    base = name
    low = base.lower()
    for p in _NAME_PREFIXES:
        if low.startswith(p) and len(base) > len(p):
            base, low = base[len(p):], low[len(p):]
            break
    for sfx in _NAME_SUFFIXES:
        if low.endswith(sfx) and len(base) > len(sfx):
            base = base[: -len(sfx)]
            break
    return base or name


def server_name(config: ServerConfig, init: Any = None) -> str:
    """The one naming rule of a server, in ``index --mcp`` and in the proxy alike.

    The configured name (``NAME=`` of ``--mcp``, the ``mcpServers`` key) as written; else the name
    the server reports in ``initialize`` (``init``), else the command's (or URL's) last path part,
    either through :func:`canonical_server_name` — so ``index --mcp mcp-server-git`` names its
    tools ``git/...`` as a proxy whose config calls the server ``git`` does.
    """
    if config.name:
        return config.name
    info = getattr(init, "server_info", None) or getattr(init, "serverInfo", None)
    reported = str(getattr(info, "name", "") or "")
    fallback = os.path.basename(config.command) or config.url.rstrip("/").rsplit("/", 1)[-1]
    return canonical_server_name(reported or fallback or "server")


async def list_all_tools(session: Any, max_tools: int | None = None) -> tuple[list[Any], str]:
    """The pages of ``tools/list`` of an initialized session (the SDK's tool objects), and a note
    ("" when the whole list was read).

    Reading stops, with a note saying why, once more than ``max_tools`` tools (default
    :data:`~skillsight_fast.tools.guard.MAX_TOOLS_PER_SERVER`) were listed (at most one more is
    returned, so the caller can tell), after :data:`MAX_LIST_PAGES` pages, when tool texts reach
    :data:`MAX_LIST_CHARS` characters, or when a cursor repeats; a server that never ends its list
    costs no more than that.
    """
    import json

    from skillsight_fast.tools.guard import MAX_TOOLS_PER_SERVER

    mcp = _sdk()
    cap = MAX_TOOLS_PER_SERVER if max_tools is None else int(max_tools)
    tools: list[Any] = []
    chars, cursor, seen = 0, None, set()
    for pages in range(1, MAX_LIST_PAGES + 1):
        if cursor is None:
            page = await session.list_tools()
        else:
            page = await session.list_tools(params=mcp.types.PaginatedRequestParams(cursor=cursor))
        for t in page.tools:
            schema = getattr(t, "input_schema", None) or getattr(t, "inputSchema", None) or {}
            chars += sum(len(str(getattr(t, key, None) or "")) for key in ("name", "title", "description"))
            chars += len(json.dumps(schema, default=str))
            if len(tools) > cap:
                break
            tools.append(t)
        cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
        if not cursor:
            return tools, ""
        if len(tools) > cap:
            return tools, f"lists more than {cap} tools"
        if chars >= MAX_LIST_CHARS:
            return tools, f"lists over {MAX_LIST_CHARS:,} characters of tool text; the rest is not read"
        if cursor in seen:
            return tools, "repeats a page cursor; the rest of its list is not read"
        seen.add(cursor)
    return tools, f"lists more than {MAX_LIST_PAGES} pages of tools; the rest is not read"


async def list_server_tools(config: ServerConfig) -> list[Tool]:
    """Start (or connect to) one server, read every page of ``tools/list``, and close it.

    The tools' server name is ``config.name``, else the name the server reports, else the
    command's file name.
    """
    import anyio

    from skillsight_fast.tools import guard

    guard.install()  # bounded, linear-time reading of every line the server writes
    async with AsyncExitStack() as stack:
        session = await open_session(stack, config)
        with anyio.fail_after(LIST_TIMEOUT):
            name = server_name(config, await session.initialize())
            tools, note = await list_all_tools(session)
        from skillsight_fast.tools.guard import MAX_TOOLS_PER_SERVER

        if note:
            logger.warning("MCP server %s %s; only the first %d tools read are indexed", name, note,
                           min(len(tools), MAX_TOOLS_PER_SERVER))
        return [tool_of(name, t) for t in tools[:MAX_TOOLS_PER_SERVER]]


def read_mcp_tools(configs: Sequence[ServerConfig], *, text: str = DEFAULT_TOOL_TEXT) -> list[Skill]:
    """The tools of every server as skills (ids ``server/tool``), servers read one after another.

    Raises
    ------
    SkillFormatError
        A server cannot be started, does not answer in time, or fails to list its tools.
    """
    import anyio

    skills: list[Skill] = []
    for config in configs:
        try:
            tools = anyio.run(list_server_tools, config)
        except SkillsightError:
            raise
        except (Exception, TimeoutError) as exc:  # spawn failure, protocol error, timeout
            detail = str(exc) or type(exc).__name__
            if isinstance(exc, BaseExceptionGroup):
                detail = "; ".join(str(e) or type(e).__name__ for e in exc.exceptions)
            raise SkillFormatError(
                f"MCP server {config.describe()!r}: cannot list its tools ({detail})") from None
        logger.info("%s: %d tools", config.describe(), len(tools))
        skills += [tool_skill(t, text) for t in tools]
    return skills
