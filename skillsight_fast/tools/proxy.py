"""A tool-search MCP proxy: one MCP server in front of many, exposing search instead of a tool list.

The host connects to the proxy only. The proxy starts the downstream ("upstream" from its own side)
MCP servers named in a host-style ``mcpServers`` block with the official SDK client, indexes every
tool they list as ``server/tool`` (:func:`~skillsight_fast.tools.catalog.tool_skill`), and lists
two tools of its own instead of the whole catalog:

``search_tools(task, k=5)``
    The best tools for a task (through :func:`skillsight_fast.agents.find.find_skills`, the one search
    use case), each with its input schema, so the agent can call one without a second lookup.
    With an abstention rule (``--min-cosine`` / ``--min-score``) a task that no tool fits gets an
    empty list. Servers that could not be started are named in ``unavailable``.
``call_tool(name, arguments)``
    Forwards ``tools/call`` to the server owning ``name`` (``server/tool``, or a bare tool name
    that only one server has) and returns that server's result unchanged.

Pinned tools (``pins``) are listed directly under their own names and left out of search results.

Lifecycle: every server is started in the background when the proxy starts (the host's own handshake
never waits for them, unless tools are pinned); the first search waits at most
:data:`FIRST_SEARCH_WAIT` seconds for them and answers from the servers that are ready (the others
are named in ``starting``). A server that dies keeps its last tool list in the index and is
restarted on the next call that needs it; a call that times out restarts its server (a server that
answers one request at a time would otherwise stay stuck behind it); one that fails to start is
retried after a growing pause (:data:`RETRY_MIN` .. :data:`RETRY_MAX` seconds) and reported in
results meanwhile. A call cut off by a dying server gets an error result saying so (it is not re-sent:
it may have run). When a server sends ``notifications/tools/list_changed`` its tools are
listed again (coalesced: at most once per two seconds) and the index is rebuilt in the background
(only new tool texts are encoded). No failure of a downstream
server ends the proxy.

The three parts: :mod:`skillsight_fast.tools.upstream` (connecting to the servers and listing their
tools), :mod:`skillsight_fast.tools.ranking` (the index over their tools, its on-disk cache keyed by
the tool lists, and the tool records of an answer) and this module (the state the host's requests
reach, and the MCP server itself). A restarted proxy answers its first searches from the index it
last built for the same servers while they start (``remembered: true``).

Bounds (:mod:`skillsight_fast.tools.guard`): a stdio server's answers are parsed by the guard (a
malformed tool is skipped, not its server; an unreadable answer fails its request at once), each
server keeps at most :data:`~skillsight_fast.tools.guard.MAX_TOOLS_PER_SERVER` tools (search results
say so in ``notes``), and on Linux every stdio server is killed when the proxy dies. Reading one
server is bounded too: a stdio message over :data:`~skillsight_fast.tools.guard.MAX_MESSAGE_BYTES`
fails its request (read in linear time), a tool listing stops at the caps of
:func:`~skillsight_fast.tools.mcp_source.list_all_tools`, its stderr reaches the log up to
:data:`~skillsight_fast.tools.mcp_source.MAX_STDERR_BYTES` per start, and ``tools/list_changed``
costs at most one listing per :data:`~skillsight_fast.tools.upstream.REFRESH_INTERVAL`. A server
with many new tool texts is encoded in the background (:data:`BACKGROUND_TEXTS`): searches answer
within :data:`FIRST_SEARCH_WAIT` seconds from the others and name it in ``indexing``.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import SkillFormatError, SkillsightError, install_hint
from skillsight_fast.tools import guard
from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT, ServerConfig
from skillsight_fast.tools.mcp_source import _sdk
from skillsight_fast.tools.ranking import ToolRanking, default_index_cache
from skillsight_fast.tools.upstream import CALL_TIMEOUT, START_TIMEOUT, Upstream, UpstreamError, detail

logger = logging.getLogger(__name__)

#: Most seconds a search waits for servers still starting or tools being encoded (it then answers
#: from what is indexed by then, and names the servers not yet in it in ``indexing``).
FIRST_SEARCH_WAIT = 5.0
#: A server with more new tool texts than this is encoded after the others: the index of the
#: others is served meanwhile.
BACKGROUND_TEXTS = 64
#: Most tools one search may return.
MAX_K = 50
#: The proxy's own tool names.
SEARCH_TOOL, CALL_TOOL = "search_tools", "call_tool"

INSTRUCTIONS = (
    "This server fronts several MCP servers. Their tools are not listed: call search_tools with the "
    "task in natural language to get the best-fitting tools with their input schemas, then "
    "call_tool(name, arguments) with a returned name (server/tool) to run one."
)



class ToolProxy:
    """The state behind the proxy server: downstream servers, the tool index, search and call.

    Parameters
    ----------
    configs : sequence of ServerConfig
        The downstream servers; every one needs a unique name (an ``mcpServers`` key).
    encoder : Encoder, optional
        Defaults to the bundled all-MiniLM-L6-v2 (loaded in the background at start).
    abstention : Abstention, optional
        An explicit threshold: each tool below it is left out (a task that no tool fits gets none).
        Default: the rule derived, without labels, when the proxy indexes its upstream tools
        (:func:`skillsight_fast.engine.abstention.derive_abstention`), unless ``abstain`` is False.
    abstain : bool
        False: no threshold unless ``abstention`` is given (``--min-cosine none``).
    pins : sequence of str
        ``server/tool`` ids listed directly (and left out of search results).
    tool_text : str
        Which tool text is indexed (see :mod:`skillsight_fast.tools.catalog`).
    start_timeout, call_timeout : float
        Seconds a server may take to start and list its tools / to answer one call.
    errlog : file, optional
        Where the servers' stderr goes (default: this process's stderr).
    index_cache : path, None or False
        Folder of saved tool indexes keyed by :func:`~skillsight_fast.tools.ranking.tool_list_key`
        (None: the user cache's ``proxy`` folder, :func:`~skillsight_fast.tools.ranking.default_index_cache`;
        False: no cache).

    Attributes
    ----------
    ranking : ToolRanking
        The index over the upstream tools (``ranking.index_from_cache``: whether the last index came
        from the cache).
    preloaded : bool
        Whether the first searches were answered from the index remembered for these servers.
    """

    def __init__(self, configs: Sequence[ServerConfig], *, encoder: Any = None,
                 abstention: Abstention | None = None, abstain: bool = True, pins: Sequence[str] = (),
                 tool_text: str = DEFAULT_TOOL_TEXT, start_timeout: float = START_TIMEOUT,
                 call_timeout: float = CALL_TIMEOUT, errlog: Any = None, index_cache: Any = None,
                 first_wait: float = FIRST_SEARCH_WAIT) -> None:
        _sdk_v2()
        guard.install()
        names = [c.name for c in configs]
        if not configs:
            raise SkillFormatError("the proxy needs at least one MCP server")
        if any(not n for n in names) or len(set(names)) != len(names):
            raise SkillFormatError(f"proxied servers need unique, non-empty names (got {names})")
        for pin in pins:
            if pin.partition("/")[0] not in names or not pin.partition("/")[2]:
                raise SkillFormatError(f"pinned tool {pin!r} must be server/tool with a configured server "
                                       f"({', '.join(names)})")
        self.upstreams = {c.name: Upstream(c, self) for c in configs}
        self.abstention = abstention
        self.abstain = bool(abstain)
        self.pins = list(dict.fromkeys(pins))
        self.tool_text = tool_text
        self.start_timeout, self.call_timeout = float(start_timeout), float(call_timeout)
        self.first_wait = float(first_wait)
        self._encoder_ready: Any = None
        self.errlog = errlog if errlog is not None else sys.stderr
        from pathlib import Path

        cache = None if index_cache is False else Path(
            default_index_cache() if index_cache is None else index_cache).expanduser()
        self.ranking = ToolRanking(configs, tool_text=tool_text, index_cache=cache, pins=self.pins,
                                   abstain=self.abstain, encoder=encoder)
        #: Whether the first searches were answered from the index remembered for these servers.
        self.preloaded = False
        self._version = 0
        self._index_version = -1
        self._search_lock = threading.Lock()
        #: The task group every upstream connection runs in (while running).
        self.task_group: Any = None
        self._ready: Any = None
        self._first_index: Any = None
        self._index_lock: Any = None
        self._index_built: Any = None  # set (and replaced) after every index build
        self._indexer_running = False
        self._costly: set[str] = set()  # servers whose tools are being encoded in the background

    # ------------------------------------------------------------------ lifecycle
    @asynccontextmanager
    async def running(self) -> AsyncIterator[ToolProxy]:
        """Start every downstream server in the background; stop them all on exit."""
        import anyio

        self._ready, self._index_lock, self._first_index = anyio.Event(), anyio.Lock(), anyio.Event()
        self._index_built, self._indexer_running = anyio.Event(), False
        self._encoder_ready = anyio.Event()
        if self.ranking.encoder is not None:
            self._encoder_ready.set()
        async with anyio.create_task_group() as tg:
            self.task_group = tg
            tg.start_soon(self._start_all)
            try:
                yield self
            finally:
                for up in self.upstreams.values():
                    await up.stop()
                tg.cancel_scope.cancel()
        self.task_group = None

    async def _start_all(self) -> None:
        import anyio

        async def start(up: Upstream) -> None:
            try:
                await up.session()
            except UpstreamError:
                pass  # recorded in up.state / up.error and reported by search

        try:
            # the remembered index first (a restart answers from it at once); starting the servers
            # and the encoder meanwhile would only compete for the CPU. A call that comes earlier
            # starts its own server.
            await self._preload()
            async with anyio.create_task_group() as tg:
                if self.ranking.encoder is None:
                    tg.start_soon(self._load_encoder)
                for up in self.upstreams.values():
                    tg.start_soon(start, up)
            await self._ensure_index()
        except Exception as exc:  # never let a background failure end the proxy
            logger.error("tool proxy start-up: %s", detail(exc))
        finally:
            self._ready.set()
            self._first_index.set()

    async def _load_encoder(self) -> None:
        import anyio

        from skillsight_fast.config import IndexConfig
        from skillsight_fast.models.encoder import load_encoder

        config = IndexConfig()
        try:
            self.ranking.encoder = await anyio.to_thread.run_sync(
                lambda: load_encoder(config.encoder.model, int8=config.encoder.int8))
        except Exception as exc:  # no model package, broken model: searches say so, calls still work
            self.ranking.encoder_error = detail(exc)
            logger.error("tool proxy: cannot load the encoder: %s", self.ranking.encoder_error)
        finally:
            self._encoder_ready.set()

    async def wait_ready(self) -> None:
        """Wait until every server was tried once and the first index is built."""
        if self._ready is None:
            raise SkillsightError("the tool proxy is not running (use `async with proxy.running()`)")
        await self._ready.wait()

    def status(self) -> list[dict[str, Any]]:
        """One status record per downstream server."""
        return [up.status() for up in self.upstreams.values()]

    # ------------------------------------------------------------------ index
    def catalog_changed(self) -> None:
        """An upstream's tool list changed: re-index (in the background once every server was tried)."""
        self._version += 1
        if self._ready is not None and self._ready.is_set():
            self._schedule_index()

    def _schedule_index(self) -> None:
        """Start the one background indexer unless it runs (it re-indexes until the index is current:
        changes that arrive meanwhile cost one more build, not one each)."""
        if self._indexer_running or self.task_group is None:
            return
        self._indexer_running = True
        self.task_group.start_soon(self._index_until_current)

    async def _index_until_current(self) -> None:
        try:
            while self._index_version != self._version:
                await self._ensure_index()
        except Exception as exc:
            logger.error("tool proxy: re-indexing failed: %s", detail(exc))
        finally:
            self._indexer_running = False
            self._signal_built()

    def _signal_built(self) -> None:
        import anyio

        done, self._index_built = self._index_built, anyio.Event()
        done.set()

    async def _wait_current(self, deadline: float) -> None:
        """Wait until the index is current or the indexer stops; when a big server is being encoded,
        only until every other server is indexed or ``deadline`` (anyio time). A build of small
        servers only is waited for (at most ``start_timeout``)."""
        import anyio

        until = max(deadline, anyio.current_time() + self.start_timeout)
        while self._index_version != self._version and self._indexer_running:
            if self._costly:
                if not set(self._not_indexed()) - self._costly:
                    return  # the others are indexed: answer now, the big ones follow
                until = deadline
            event = self._index_built
            with anyio.move_on_after(max(0.0, until - anyio.current_time())) as scope:
                await event.wait()
            if scope.cancelled_caught:
                return

    async def _ensure_index(self) -> None:
        """Rebuild the index if a server's tools changed since it was built.

        A server with more than :data:`BACKGROUND_TEXTS` tool texts not encoded yet is left out of a
        first build of the others (served at once), then the whole index is built.
        """
        import anyio

        async with self._index_lock:
            if self._index_version == self._version:
                return
            version = self._version
            pinned = set(self.pins)
            entries: dict[str, tuple[Upstream, Any]] = {}
            for up in self.upstreams.values():
                for name, t in up.tools.items():
                    if f"{up.name}/{name}" not in pinned:
                        entries[f"{up.name}/{name}"] = (up, t)
            big = self.ranking.costly_servers(entries, BACKGROUND_TEXTS)
            self._costly = big
            if big:
                quick = {key: e for key, e in entries.items() if e[0].name not in big}
                if quick and any(key not in self.ranking.entries for key in quick):
                    logger.info("tool proxy: indexing %s in the background; the other servers first",
                                ", ".join(sorted(big)))
                    index = await anyio.to_thread.run_sync(self.ranking.build, quick)
                    self.ranking.index, self.ranking.entries = index, quick
                    self._first_index.set()
                    self._signal_built()
            try:
                index = await anyio.to_thread.run_sync(self.ranking.build, entries) if entries else None
            finally:
                self._costly = set()
            self.ranking.index, self.ranking.entries, self._index_version = index, entries, version
            self._first_index.set()
            self._signal_built()
            logger.info("tool proxy: indexed %d tools", len(entries))

    async def _preload(self) -> None:
        """Answer searches from the index last built for these servers until they have listed."""
        import anyio

        if self.ranking.index_cache is None:
            return
        try:
            found = await anyio.to_thread.run_sync(self.ranking.remembered, self.upstreams)
        except Exception as exc:  # a damaged cache costs only the wait for the servers
            logger.warning("tool proxy: not using the remembered index (%s)", detail(exc))
            return
        ranking = self.ranking
        if found is not None and ranking.index is None:
            ranking.preloaded_folder, ranking.index, ranking.entries = found
            self.preloaded = True
            self._first_index.set()
            logger.info("tool proxy: answering from the remembered index of %d tools (%s)",
                        len(ranking.entries), ranking.preloaded_folder)

    # ------------------------------------------------------------------ the two tools
    async def search(self, task: Any, k: Any = 5) -> dict[str, Any]:
        """``{query, abstention, tools: [...], servers: [...], unavailable: [...]}`` for one task.

        ``remembered: true`` marks an answer given from the index cache before the servers have
        listed their tools (a restart): the tools of their last listing.

        Each tool has ``name`` (``server/tool``, what :meth:`call` takes), ``server``, ``title``,
        ``description``, ``inputSchema``, ``score`` and ``evidence``. ``servers`` groups the same
        tools by server: ``[{server, tools: [names, best first]}]``, servers in the order of their
        best tool. Two servers' tools of one name are two results, never folded as copies.

        Raises
        ------
        QueryError
            ``task`` is not a non-empty string or ``k`` is not an integer in 1..50.
        """
        import anyio

        from skillsight_fast.errors import QueryError

        if not isinstance(task, str):
            raise QueryError("'task' must be a string")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise QueryError(f"'k' must be an integer from 1 to {MAX_K}, got {k!r}")
        if self._first_index is None:
            raise SkillsightError("the tool proxy is not running (use `async with proxy.running()`)")
        # the remembered index, or the one built once every server was tried; but never more than
        # first_wait seconds in all: then the answer comes from what is indexed by now (a big
        # server's tools are still encoded in the background; `indexing` names it)
        deadline = anyio.current_time() + self.first_wait
        with anyio.move_on_after(self.first_wait):
            await self._first_index.wait()
        if not self._first_index.is_set() or self._ready.is_set():
            # the encoder is waited for (at most start_timeout) only when nothing is indexed yet
            wait = deadline if self.ranking.index is not None else anyio.current_time() + self.start_timeout
            with anyio.move_on_after(max(0.0, wait - anyio.current_time())):
                await self._encoder_ready.wait()
            if (self._encoder_ready.is_set() and self.ranking.encoder is None
                    and self.ranking.index is None):
                raise SkillsightError(f"tool search is unavailable: the encoder could not be loaded "
                                      f"({self.ranking.encoder_error or 'unknown error'})")
            if self.ranking.encoder is not None and self._index_version != self._version:
                self._schedule_index()
                await self._wait_current(deadline)
        index = self.ranking.index
        abstention = self.abstention
        if abstention is None and self.abstain and index is not None:  # derived when the tools were indexed
            abstention = Abstention.of_rule(index.state.abstention)
        out: dict[str, Any] = {"query": task, "abstention": abstention.to_dict() if abstention else None,
                               "tools": []}
        if self.preloaded and self._index_version < 0:  # the servers have not listed yet
            out["remembered"] = True
        out.update(await anyio.to_thread.run_sync(
            lambda: self.ranking.answer(task, k, abstention, self._search_lock)))
        # the same tools grouped by server (servers in the order of their best tool), for a task
        # that needs several tools of one server
        groups: dict[str, list[str]] = {}
        for tool in out["tools"]:
            groups.setdefault(tool["server"], []).append(tool["name"])
        out["servers"] = [{"server": srv, "tools": names} for srv, names in groups.items()]
        bad = [{"server": up.name, "state": up.state, "error": up.error}
               for up in self.upstreams.values() if up.state == "failed"]
        if bad:
            out["unavailable"] = bad
        starting = [up.name for up in self.upstreams.values() if up.state in ("idle", "starting")]
        if starting:
            out["starting"] = starting
        indexing = self._not_indexed()
        if indexing:
            out["indexing"] = indexing
        notes = [{"server": up.name, "note": up.note} for up in self.upstreams.values() if up.note]
        if notes:
            out["notes"] = notes
        return out

    def _not_indexed(self) -> list[str]:
        """The servers whose listed tools are not all in the index searched now (being encoded)."""
        entries, pinned = self.ranking.entries or {}, set(self.pins)
        return [up.name for up in self.upstreams.values() if up.state == "ready" and any(
            f"{up.name}/{n}" not in entries and f"{up.name}/{n}" not in pinned for n in up.tools)]

    def resolve(self, name: str) -> tuple[Upstream, str]:
        """The server and tool name behind ``server/tool`` (or a tool name only one server has).

        Raises
        ------
        UpstreamError
            No known tool has this name.
        """
        server, sep, tool = name.partition("/")
        if sep and server in self.upstreams:
            return self.upstreams[server], tool
        owners = [up for up in self.upstreams.values() if name in up.tools]
        if len(owners) == 1:
            return owners[0], name
        if len(owners) > 1:
            raise UpstreamError(f"tool {name!r} exists on several servers "
                                f"({', '.join(u.name for u in owners)}): call it as server/{name}")
        raise UpstreamError(f"unknown tool {name!r}: use a name returned by {SEARCH_TOOL}")

    async def call(self, name: Any, arguments: Any = None) -> Any:
        """Forward one call and return the server's ``CallToolResult`` unchanged.

        Every failure (unknown tool, server unavailable or dying mid-call, timeout, an error the
        server answers with) comes back as an error result (``isError``) with the reason.
        """
        import anyio

        mcp = _sdk()
        if not isinstance(name, str) or not name:
            return _error_result("'name' must be a tool name returned by search_tools (server/tool)")
        if name in (SEARCH_TOOL, CALL_TOOL):
            return _error_result(f"{name!r} is the proxy's own tool: call it directly")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return _error_result("'arguments' must be an object of the tool's parameters")
        try:
            up, tool = self.resolve(name)
            session = await up.session()
        except UpstreamError as exc:
            return _error_result(str(exc))
        if tool not in up.tools:
            await up.refresh()  # a tool added since the last listing (its notification may be on its way)
        if tool not in up.tools:
            return _error_result(f"server {up.name!r} has no tool {tool!r}: "
                                 f"use a name returned by {SEARCH_TOOL}")
        try:
            with anyio.fail_after(self.call_timeout):
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            up.restart()  # a server that answers one request at a time would stay stuck behind this one
            return _error_result(f"server {up.name!r} did not answer {tool!r} within "
                                 f"{self.call_timeout:g} s; "
                                 "it is restarted on the next call (this call may or may not have run)")
        except mcp.MCPError as exc:
            if not up.alive:
                return _error_result(f"server {up.name!r} went away during the call to {tool!r} (it is "
                                     "restarted on the next call; the call may or may not have run)")
            return _error_result(f"server {up.name!r} answered {tool!r} with an error: {exc}")
        except Exception as exc:  # a transport failure: report it, keep the proxy
            return _error_result(f"server {up.name!r} failed the call to {tool!r}: {detail(exc)}")

    def pinned(self) -> dict[str, tuple[str, Any]]:
        """``{listed name: (server/tool, SDK tool)}`` of the pinned tools their servers listed.

        A pin whose name is taken (by the proxy's own tools or an earlier pin) is left out (search
        still finds it).
        """
        out: dict[str, tuple[str, Any]] = {}
        for pin in self.pins:
            server, _, tool = pin.partition("/")
            t = self.upstreams[server].tools.get(tool)
            if t is None:
                continue
            if str(t.name) in out or str(t.name) in (SEARCH_TOOL, CALL_TOOL):
                logger.warning("pinned tool %r is not listed: its name %r is taken", pin, t.name)
                continue
            out[str(t.name)] = (pin, t)
        return out

    async def pinned_tools(self) -> list[Any]:
        """The SDK tool objects of the pinned tools (under their own names), once the servers were tried."""
        if self.pins:
            await self.wait_ready()
        return [t for _, t in self.pinned().values()]


def _error_result(message: str) -> Any:
    mcp = _sdk()
    return mcp.types.CallToolResult(content=[mcp.types.TextContent(type="text", text=message)], is_error=True)


def _json_result(obj: Any) -> Any:
    mcp = _sdk()
    return mcp.types.CallToolResult(
        content=[mcp.types.TextContent(type="text", text=json.dumps(obj, ensure_ascii=False))],
        structured_content=obj)


# ---------------------------------------------------------------------- the MCP server

SEARCH_SCHEMA = {
    "type": "object",
    "properties": {
        "task": {"type": "string", "description": "What you want to do, in natural language."},
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 5,
              "description": "How many tools to return."},
    },
    "required": ["task"],
}
CALL_SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "description": "A tool name returned by search_tools (server/tool)."},
        "arguments": {"type": "object", "description": "The tool's arguments, as its inputSchema describes.",
                      "default": {}},
    },
    "required": ["name"],
}


def _sdk_v2() -> Any:
    mcp = _sdk()
    from importlib.metadata import version

    if int(version("mcp").split(".")[0]) < 2:
        raise SkillsightError(f"the tool proxy needs the MCP SDK 2.x (installed: {version('mcp')}): "
                              + install_hint("proxy"))
    return mcp


def build_proxy_server(proxy: ToolProxy) -> Any:
    """The proxy as a low-level SDK ``Server`` (its lifespan runs the downstream servers)."""
    mcp = _sdk_v2()
    from mcp.server.lowlevel import Server

    types = mcp.types
    own = [
        types.Tool(name=SEARCH_TOOL, title="Search tools", input_schema=SEARCH_SCHEMA, description=(
            "Find the tools that fit a task among the tools of every connected MCP server, best first. "
            "Each result has name (server/tool, for call_tool), description and inputSchema. An empty "
            "list means that no tool fits the task well enough.")),
        types.Tool(name=CALL_TOOL, title="Call a tool", input_schema=CALL_SCHEMA, description=(
            "Run a tool found by search_tools: name is its server/tool name, arguments follow its "
            "inputSchema. Returns the tool's own result.")),
    ]

    @asynccontextmanager
    async def lifespan(_server: Any) -> AsyncIterator[ToolProxy]:
        async with proxy.running():
            yield proxy

    async def list_tools(ctx: Any, params: Any) -> Any:
        try:
            pinned = await proxy.pinned_tools()
        except Exception as exc:
            logger.error("tool proxy: pinned tools: %s", detail(exc))
            pinned = []
        return types.ListToolsResult(tools=own + pinned)

    async def call_tool(ctx: Any, params: Any) -> Any:
        name, args = params.name, params.arguments or {}
        try:
            if name == SEARCH_TOOL:
                return _json_result(await proxy.search(args.get("task"), args.get("k", 5)))
            if name == CALL_TOOL:
                return await proxy.call(args.get("name"), args.get("arguments"))
            pinned = proxy.pinned()
            if name in pinned:
                return await proxy.call(pinned[name][0], args)
            return _error_result(f"unknown tool {name!r}: this server has {SEARCH_TOOL} and {CALL_TOOL}")
        except SkillsightError as exc:  # bad input: the agent sees the reason and can correct it
            return _error_result(str(exc))
        except Exception as exc:  # never let one request take the proxy down
            logger.exception("tool proxy: %s failed", name)
            return _error_result(f"{name} failed: {detail(exc)}")

    from skillsight_fast._version import __version__

    return Server("skillsight-proxy", version=__version__, instructions=INSTRUCTIONS, lifespan=lifespan,
                  on_list_tools=list_tools, on_call_tool=call_tool)


def run_proxy(proxy: ToolProxy) -> None:
    """Serve the proxy over stdio until the host closes the connection."""
    import anyio
    from mcp.server.stdio import stdio_server

    server = build_proxy_server(proxy)

    async def main() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    from skillsight_fast.agents.stdin_filter import filtered_stdin

    with filtered_stdin():  # a lone surrogate escape would make the SDK drop the request
        anyio.run(main)
