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
    went away); ``errlog`` receives a stdio server's stderr (default: discarded);
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
            errlog = stack.enter_context(open(os.devnull, "w"))
        streams = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    read, write = streams[0], streams[1]
    if wrap_read is not None:
        read = wrap_read(read)
    return await stack.enter_async_context(mcp.ClientSession(read, write, message_handler=message_handler))


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


async def list_all_tools(session: Any) -> list[Any]:
    """Every page of ``tools/list`` of an initialized session (the SDK's tool objects)."""
    mcp = _sdk()
    tools: list[Any] = []
    cursor = None
    while True:
        if cursor is None:
            page = await session.list_tools()
        else:
            page = await session.list_tools(params=mcp.types.PaginatedRequestParams(cursor=cursor))
        tools += list(page.tools)
        cursor = getattr(page, "next_cursor", None) or getattr(page, "nextCursor", None)
        if not cursor:
            return tools


async def list_server_tools(config: ServerConfig) -> list[Tool]:
    """Start (or connect to) one server, read every page of ``tools/list``, and close it.

    The tools' server name is ``config.name``, else the name the server reports, else the
    command's file name.
    """
    import anyio

    async with AsyncExitStack() as stack:
        session = await open_session(stack, config)
        with anyio.fail_after(LIST_TIMEOUT):
            name = server_name(config, await session.initialize())
            return [tool_of(name, t) for t in await list_all_tools(session)]


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
            raise SkillFormatError(f"MCP server {config.describe()!r}: cannot list its tools ({detail})") from None
        logger.info("%s: %d tools", config.describe(), len(tools))
        skills += [tool_skill(t, text) for t in tools]
    return skills
