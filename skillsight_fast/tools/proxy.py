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
listed again and the index is rebuilt (only new tool texts are encoded). No failure of a downstream
server ends the proxy.

Index cache: every index the proxy builds is saved under ``index_cache`` (default
``<user cache>/skillsight-fast/proxy``) in a folder named by :func:`tool_list_key`, the sha256 of
the canonical JSON of the tool list (every ``server/tool`` with its title, description and input
schema), the tool text, the index configuration and the encoder. A restarted proxy whose servers
list the same tools loads that index instead of encoding them again; any change of a tool, a
server name or the model gives another key. At most :data:`INDEX_CACHE_KEEP` folders are kept
(least recently used removed); an unreadable or unwritable cache only costs the encoding.
A restart does not even wait for its servers: the cache remembers the last index of each set of
server configurations (``servers-<sha256>`` points at its folder, which holds the tool records in
``tools.json``), so the first search is answered from it while the servers start; once they have
listed their tools the index is keyed again by the live lists (the same folder when nothing changed).
Catalogues of at most :data:`NUMPY_ENGINE_MAX_TOOLS` tools are searched by the NumPy stages (same
ids and order as the kernels, no Numba start-up).

Bounds (:mod:`skillsight_fast.tools.guard`): a stdio server's answers are parsed by the guard (a
malformed tool is skipped, not its server; an unreadable answer fails its request at once), each
server keeps at most :data:`~skillsight_fast.tools.guard.MAX_TOOLS_PER_SERVER` tools (search results
say so in ``notes``), and on Linux every stdio server is killed when the proxy dies.
"""

from __future__ import annotations

import json
import logging
import math
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import numpy as np

from skillsight_fast.agents.find import find_skills
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import SkillFormatError, SkillsightError, install_hint
from skillsight_fast.tools import guard
from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT, ServerConfig, Tool, tool_skill
from skillsight_fast.tools.mcp_source import _sdk, list_all_tools, open_session, server_name, tool_of

logger = logging.getLogger(__name__)

#: Seconds a downstream server may take to start and list its tools.
START_TIMEOUT = 60.0
#: Seconds a forwarded tools/call may take.
CALL_TIMEOUT = 300.0
#: Most seconds a search waits for servers still starting (it then answers from the ready ones).
FIRST_SEARCH_WAIT = 5.0
#: Pause before the first retry of a server that failed to start, doubled per failure up to RETRY_MAX.
RETRY_MIN, RETRY_MAX = 2.0, 60.0
#: Most tools one search may return.
MAX_K = 50
#: Index folders kept in the proxy's index cache (least recently used removed beyond this).
INDEX_CACHE_KEEP = 16
#: Version of the cache key's layout (bumped when the key's content changes).
INDEX_CACHE_FORMAT = 1
#: Tool catalogues up to this size are searched with the NumPy stages (engine ``numpy``): for a few
#: hundred tools they answer as fast as the kernels and spare a restarted proxy the Numba start-up.
NUMPY_ENGINE_MAX_TOOLS = 2000
#: The tool records stored with each cached index (what a search returns before the servers list).
_TOOLS_FILE = "tools.json"
#: The proxy's own tool names.
SEARCH_TOOL, CALL_TOOL = "search_tools", "call_tool"
_LIST_CHANGED = "notifications/tools/list_changed"

INSTRUCTIONS = (
    "This server fronts several MCP servers. Their tools are not listed: call search_tools with the "
    "task in natural language to get the best-fitting tools with their input schemas, then "
    "call_tool(name, arguments) with a returned name (server/tool) to run one."
)


class UpstreamError(SkillsightError):
    """A downstream server is unavailable (cannot be started, died, or failed a request)."""


def _detail(exc: BaseException) -> str:
    """A one-line reason from an exception or an exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_detail(e) for e in exc.exceptions)
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    return str(exc) or type(exc).__name__


class _WatchedStream:
    """A transport read stream that sets ``gone`` when the server's side ends (EOF or closed)."""

    def __init__(self, inner: Any, gone: Any) -> None:
        self._inner, self._gone = inner, gone

    def __getattr__(self, name: str) -> Any:  # last_context and any other transport extra
        return getattr(self._inner, name)

    async def receive(self) -> Any:
        import anyio

        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._gone.set()
            raise

    def __aiter__(self) -> _WatchedStream:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self._gone.set()
        await self._inner.aclose()

    async def __aenter__(self) -> _WatchedStream:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


class Upstream:
    """One downstream server, its connection owned by one task of the proxy's task group.

    Attributes
    ----------
    config : ServerConfig
    tools : dict
        The SDK tool objects it listed last, by name (kept while the server is down).
    state : str
        ``idle`` (not started yet), ``starting``, ``ready``, ``down`` (died; restarted on next
        use), ``failed`` (the last start failed; ``error`` says why) or ``stopped``.
    starts : int
        Start attempts so far.
    """

    def __init__(self, config: ServerConfig, proxy: ToolProxy) -> None:
        self.config = config
        self.name = server_name(config)  # the configured name: the naming rule of index --mcp too
        self.proxy = proxy
        self.tools: dict[str, Any] = {}
        self.state = "idle"
        self.error = ""
        self.starts = 0
        self._failures = 0
        self._retry_at = -math.inf
        self._session: Any = None
        self._gone: Any = None
        self._stop: Any = None
        self._lock: Any = None
        #: Why some of its tools are left out (the per-server cap), for search results.
        self.note = ""

    def status(self) -> dict[str, Any]:
        """``{server, state, error, tools, starts}`` for reports."""
        return {"server": self.name, "state": self.state, "error": self.error, "tools": len(self.tools),
                "starts": self.starts, "note": self.note}

    @property
    def alive(self) -> bool:
        return self._session is not None and not self._gone.is_set()

    async def session(self) -> Any:
        """The live SDK session, starting (or restarting) the server first when needed.

        Raises
        ------
        UpstreamError
            The server cannot be started (or failed recently and waits for its retry time).
        """
        import anyio

        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if self.alive:
                return self._session
            now = anyio.current_time()
            if self.state == "failed" and now < self._retry_at:
                raise UpstreamError(f"server {self.name!r} is unavailable ({self.error}); "
                                    f"next start attempt in {self._retry_at - now:.0f} s")
            self.state, self.starts = "starting", self.starts + 1
            try:
                await self.proxy._tg.start(self._own)
            except Exception as exc:  # spawn failure, protocol error, timeout (as a group or alone)
                self._failures += 1
                self._retry_at = anyio.current_time() + min(RETRY_MAX, RETRY_MIN * 2 ** (self._failures - 1))
                self.state, self.error = "failed", _detail(exc)
                logger.warning("MCP server %r (%s) failed to start: %s", self.name, self.config.describe(),
                               self.error)
                raise UpstreamError(f"server {self.name!r} cannot be started ({self.error})") from None
            self._failures, self.error = 0, ""
            return self._session

    async def _own(self, *, task_status: Any) -> None:
        """Open the connection, list the tools, report ready, and hold it until it ends or is stopped."""
        import anyio

        gone, stop, started, session = anyio.Event(), anyio.Event(), False, None
        try:
            async with AsyncExitStack() as stack:
                session = await open_session(
                    stack, self.config, message_handler=self._on_message, errlog=self.proxy.errlog,
                    wrap_read=lambda stream: _WatchedStream(stream, gone), die_with_parent=True)
                with anyio.fail_after(self.proxy.start_timeout):
                    await session.initialize()
                    tools = await list_all_tools(session)
                self._session, self._gone, self._stop = session, gone, stop
                self._set_tools(tools)
                self.state = "ready"
                started = True
                task_status.started()
                logger.info("MCP server %r ready: %d tools", self.name, len(tools))
                async with anyio.create_task_group() as watch:
                    async def stop_on(event: Any) -> None:
                        await event.wait()
                        watch.cancel_scope.cancel()
                    watch.start_soon(stop_on, gone)
                    watch.start_soon(stop_on, stop)
        except Exception as exc:
            if not started:
                raise
            logger.warning("MCP server %r: connection ended with an error: %s", self.name, _detail(exc))
        finally:
            if started and self._session is session:  # still the current connection (not restarted)
                self._session = None
                if stop.is_set():
                    self.state = "stopped"
                elif self.state == "ready":
                    self.state = "down"
                    logger.warning("MCP server %r went away; it is restarted on its next call", self.name)

    def _set_tools(self, tools: Sequence[Any]) -> None:
        cap = guard.MAX_TOOLS_PER_SERVER
        over = len(tools) > cap
        self.note = f"lists more than {cap} tools; only its first {cap} are searched" if over else ""
        if self.note:
            logger.warning("MCP server %r %s", self.name, self.note)
        new = {str(t.name): t for t in list(tools)[:cap]}
        if _tools_key(new) != _tools_key(self.tools):
            self.tools = new
            self.proxy._catalog_changed()

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == _LIST_CHANGED:
            self.proxy._tg.start_soon(self.refresh)

    async def refresh(self) -> None:
        """List the tools again (after ``tools/list_changed``); errors are logged, never raised."""
        import anyio

        try:
            session = self._session
            if session is None:
                return
            with anyio.fail_after(self.proxy.start_timeout):
                tools = await list_all_tools(session)
            self._set_tools(tools)
            logger.info("MCP server %r changed its tools: %d now", self.name, len(tools))
        except Exception as exc:
            logger.warning("MCP server %r: cannot list its changed tools: %s", self.name, _detail(exc))

    async def stop(self) -> None:
        """Close the connection (the server process is stopped by the SDK transport)."""
        if self._stop is not None:
            self._stop.set()

    def restart(self) -> None:
        """Drop the connection now (its process is stopped in the background); the next use starts
        the server again."""
        if self._session is not None:
            self._session = None
            self.state = "down"
            logger.warning("MCP server %r is restarted on its next call", self.name)
        if self._stop is not None:
            self._stop.set()


def _tools_key(tools: dict[str, Any]) -> str:
    return json.dumps([(n, getattr(t, "description", None), getattr(t, "title", None), _schema(t))
                       for n, t in sorted(tools.items())], sort_keys=True, default=str)


def _schema(t: Any) -> dict[str, Any]:
    schema = getattr(t, "input_schema", None)
    if schema is None:
        schema = getattr(t, "inputSchema", None)
    return dict(schema or {})


def tool_list_key(tools: Sequence[Tool], *, tool_text: str, config: dict[str, Any], model_id: str,
                  model_checksum: str) -> str:
    """sha256 (hex) of the canonical JSON of a tool list and of what shapes its index.

    The list is sorted by ``server/tool``; each tool contributes its id, title, description and
    input schema, so any change of one of them (or of the tool text, the index configuration or
    the encoder) gives another key.
    """
    import hashlib

    rows = sorted([t.id, t.title, t.description, t.input_schema] for t in tools)
    blob = json.dumps({"format": INDEX_CACHE_FORMAT, "tool_text": tool_text, "config": config,
                       "model": [model_id, model_checksum], "tools": rows},
                      sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def default_index_cache() -> Any:
    """``<user cache>/skillsight-fast/proxy`` (see :func:`skillsight_fast.models.cache_root`)."""
    from skillsight_fast.models import cache_root

    return cache_root() / "proxy"


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
        Folder of saved tool indexes keyed by :func:`tool_list_key` (None: the user cache's
        ``proxy`` folder, :func:`default_index_cache`; False: no cache).
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
        self._encoder = encoder
        self._encoder_error = ""
        from pathlib import Path

        self.index_cache = None if index_cache is False else Path(
            default_index_cache() if index_cache is None else index_cache).expanduser()
        #: Whether the last index came from the index cache (for tests and logs).
        self.index_from_cache = False
        #: Whether the first searches were answered from the index remembered for these servers.
        self.preloaded = False
        self._preloaded_folder: Any = None
        self._query_encoder: Any = None  # shared by every index the proxy builds (loaded once)
        self._first_index: Any = None
        self._vectors: dict[str, np.ndarray] = {}  # tool text -> embedding (re-index encodes new texts only)
        self._index: Any = None
        self._index_tools: dict[str, tuple[Upstream, Any]] = {}
        self._version = 0
        self._index_version = -1
        self._search_lock = threading.Lock()
        self._tg: Any = None
        self._ready: Any = None
        self._index_lock: Any = None

    # ------------------------------------------------------------------ lifecycle
    @asynccontextmanager
    async def running(self) -> AsyncIterator[ToolProxy]:
        """Start every downstream server in the background; stop them all on exit."""
        import anyio

        self._ready, self._index_lock, self._first_index = anyio.Event(), anyio.Lock(), anyio.Event()
        self._encoder_ready = anyio.Event()
        if self._encoder is not None:
            self._encoder_ready.set()
        async with anyio.create_task_group() as tg:
            self._tg = tg
            tg.start_soon(self._start_all)
            try:
                yield self
            finally:
                for up in self.upstreams.values():
                    await up.stop()
                tg.cancel_scope.cancel()
        self._tg = None

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
                if self._encoder is None:
                    tg.start_soon(self._load_encoder)
                for up in self.upstreams.values():
                    tg.start_soon(start, up)
            await self._ensure_index()
        except Exception as exc:  # never let a background failure end the proxy
            logger.error("tool proxy start-up: %s", _detail(exc))
        finally:
            self._ready.set()
            self._first_index.set()

    async def _load_encoder(self) -> None:
        import anyio

        from skillsight_fast.config import IndexConfig
        from skillsight_fast.models.encoder import load_encoder

        config = IndexConfig()
        try:
            self._encoder = await anyio.to_thread.run_sync(
                lambda: load_encoder(config.model, int8=config.int8))
        except Exception as exc:  # no model package, broken model: searches say so, calls still work
            self._encoder_error = _detail(exc)
            logger.error("tool proxy: cannot load the encoder: %s", self._encoder_error)
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
    def _catalog_changed(self) -> None:
        self._version += 1
        if self._tg is not None and self._ready is not None and self._ready.is_set():
            self._tg.start_soon(self._ensure_index_quietly)

    async def _ensure_index_quietly(self) -> None:
        try:
            await self._ensure_index()
        except Exception as exc:
            logger.error("tool proxy: re-indexing failed: %s", _detail(exc))

    async def _ensure_index(self) -> None:
        """Rebuild the index if a server's tools changed since it was built."""
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
            index = await anyio.to_thread.run_sync(self._build, entries) if entries else None
            self._index, self._index_tools, self._index_version = index, entries, version
            self._first_index.set()
            logger.info("tool proxy: indexed %d tools", len(entries))

    def _build(self, entries: dict[str, tuple[Upstream, Any]]) -> Any:
        from skillsight_fast.engine.index import SkillIndex
        from skillsight_fast.tools.catalog import tool_index_config

        config = tool_index_config()
        tools = [tool_of(up.name, t) for up, t in entries.values()]
        skills = [tool_skill(t, self.tool_text) for t in tools]
        folder = None
        ident = self._model_ident()
        if self.index_cache is not None and ident is not None:
            key = tool_list_key(tools, tool_text=self.tool_text, config=config.to_dict(),
                                model_id=ident[0], model_checksum=ident[1])
            folder = self.index_cache / key[:32]
            if folder == self._preloaded_folder and self._index is not None:
                self.index_from_cache = True  # the remembered index is the live lists' one
                return self._index
            index = self._load_cached(folder, skills)
            if index is not None:
                self._remember(folder)
                return self._prepare(index)
        self.index_from_cache = False
        if self._encoder is None:
            raise SkillsightError(f"tool search is unavailable: the encoder could not be loaded "
                                  f"({self._encoder_error or 'unknown error'})")
        texts = [s.text for s in skills]
        new = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if new:
            self._vectors.update(zip(new, self._encoder.encode(new)))
        embeddings = np.stack([self._vectors[t] for t in texts]).astype(np.float32)
        index = SkillIndex.from_embeddings(skills, embeddings, config, model_id=self._encoder.model_id,
                                           model_checksum=self._encoder.checksum, encoder=self._encoder)
        if folder is not None:
            self._save_cached(index, folder, tools)
        return self._prepare(index)

    def _model_ident(self) -> tuple[str, str] | None:
        """(model id, checksum) of the encoder the proxy indexes with, known without loading a
        registry model; None if it is unknown until loaded."""
        if self._encoder is not None:
            return str(self._encoder.model_id), str(self._encoder.checksum)
        from skillsight_fast.config import IndexConfig
        from skillsight_fast.models.registry import get_spec

        spec = get_spec(IndexConfig().model)
        return (spec.name, spec.sha256) if spec is not None else None

    def _servers_pointer(self) -> Any:
        """The cache file naming the last index of this set of servers (configs, pins, tool text)."""
        import hashlib

        rows = sorted([c.name, c.command, list(c.args), sorted(c.env.items()), c.url]
                      for c in (up.config for up in self.upstreams.values()))
        blob = json.dumps({"format": INDEX_CACHE_FORMAT, "servers": rows, "pins": sorted(self.pins),
                           "tool_text": self.tool_text}, sort_keys=True, default=str)
        return self.index_cache / f"servers-{hashlib.sha256(blob.encode()).hexdigest()[:32]}"

    def _remember(self, folder: Any) -> None:
        """Point this set of servers at ``folder`` (the index of their current tool lists)."""
        from skillsight_fast.files import atomic_write_bytes

        try:
            atomic_write_bytes(self._servers_pointer(), folder.name.encode())
        except OSError as exc:
            logger.warning("tool proxy: cannot write %s (%s)", self._servers_pointer(), _detail(exc))

    def _prepare(self, index: Any) -> Any:
        """Engine, shared task encoder and a warm-up search, so the first real search is quick."""
        if len(index) <= NUMPY_ENGINE_MAX_TOOLS:
            index.engine = "numpy"
        if self._query_encoder is not None:
            index.encoders.query_encoder = self._query_encoder
        else:
            self._query_encoder = index.encoders.query_encoder
        find_skills(index, ["warm up"], 1, collapse=False)
        return index

    async def _preload(self) -> None:
        """Answer searches from the index last built for these servers until they have listed."""
        import anyio

        if self.index_cache is None:
            return
        try:
            found = await anyio.to_thread.run_sync(self._preload_sync)
        except Exception as exc:  # a damaged cache costs only the wait for the servers
            logger.warning("tool proxy: not using the remembered index (%s)", _detail(exc))
            return
        if found is not None and self._index is None:
            self._preloaded_folder, self._index, self._index_tools = found
            self.preloaded = True
            self._first_index.set()
            logger.info("tool proxy: answering from the remembered index of %d tools (%s)",
                        len(self._index_tools), self._preloaded_folder)

    def _preload_sync(self) -> tuple[Any, Any, dict[str, tuple[Upstream, Any]]] | None:
        from types import SimpleNamespace

        from skillsight_fast.engine.index import SkillIndex

        ident = self._model_ident()
        pointer = self._servers_pointer()
        if ident is None or not pointer.is_file():
            return None
        folder = self.index_cache / pointer.read_text(encoding="utf-8").strip()
        if not (folder / "manifest.json").is_file() or not (folder / _TOOLS_FILE).is_file():
            return None
        index = SkillIndex.load(folder, encoder=self._encoder)
        if (index.state.model.id, index.state.model.checksum) != ident or (self.abstain and index.state.abstention is None):
            return None  # another model, or saved before indexes derived their abstention rule
        entries: dict[str, tuple[Upstream, Any]] = {}
        for rec in json.loads((folder / _TOOLS_FILE).read_text(encoding="utf-8")):
            up = self.upstreams.get(rec["server"])
            if up is None:
                return None
            entries[f"{up.name}/{rec['name']}"] = (up, SimpleNamespace(
                name=rec["name"], title=rec.get("title", ""), description=rec.get("description", ""),
                inputSchema=rec.get("inputSchema", {})))
        if list(entries) != index.ids:
            return None
        return folder, self._prepare(index), entries

    def _load_cached(self, folder: Any, skills: list[Any]) -> Any:
        """The index saved in ``folder`` if it holds exactly the tools ``skills``, else None."""
        import os

        from skillsight_fast.engine.index import SkillIndex

        if not (folder / "manifest.json").is_file():
            return None
        try:
            index = SkillIndex.load(folder, encoder=self._encoder)
            if index.ids != [sk.id for sk in skills]:
                raise SkillsightError("its tools differ from the listed ones")
            if self.abstain and index.state.abstention is None:
                raise SkillsightError("saved before indexes derived their abstention rule")
            os.utime(folder)  # least recently used is removed first
        except (OSError, SkillsightError) as exc:
            logger.warning("tool proxy: not using the cached index %s (%s)", folder, _detail(exc))
            return None
        # a later re-index (a server's tools changed) encodes only new texts
        self._vectors.update(zip((sk.text for sk in skills), np.asarray(index.dense.embeddings)))
        self.index_from_cache = True
        logger.info("tool proxy: loaded the index of %d tools from %s", len(index), folder)
        return index

    def _save_cached(self, index: Any, folder: Any, tools: Sequence[Tool]) -> None:
        """Save ``index`` (and the tool records) into the cache, point this set of servers at it, and
        drop the least recently used folders beyond the limit."""
        import shutil

        records = [{"server": t.server, "name": t.name, "title": t.title, "description": t.description,
                    "inputSchema": t.input_schema} for t in tools]
        try:
            index.save(folder, extra_files={_TOOLS_FILE: json.dumps(records, ensure_ascii=False).encode()})
            self._remember(folder)
            kept = sorted((p for p in folder.parent.iterdir() if (p / "manifest.json").is_file()),
                          key=lambda p: p.stat().st_mtime, reverse=True)
            for old in kept[INDEX_CACHE_KEEP:]:
                shutil.rmtree(old, ignore_errors=True)
            for pointer in folder.parent.glob("servers-*"):  # pointers to removed indexes
                target = folder.parent / pointer.read_text(encoding="utf-8").strip() if pointer.is_file() else None
                if target is not None and not target.is_dir():
                    pointer.unlink(missing_ok=True)
        except (OSError, SkillsightError) as exc:
            logger.warning("tool proxy: cannot save the index into %s (%s)", folder, _detail(exc))

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
        # first_wait seconds: then the answer comes from the servers that have listed by now
        with anyio.move_on_after(self.first_wait):
            await self._first_index.wait()
        if not self._first_index.is_set() or self._ready.is_set():
            await self._encoder_ready.wait()
            if self._encoder is None and self._index is None:
                raise SkillsightError(f"tool search is unavailable: the encoder could not be loaded "
                                      f"({self._encoder_error or 'unknown error'})")
            if self._ready.is_set() or self._encoder is not None:
                await self._ensure_index()
        index, entries = self._index, self._index_tools
        abstention = self.abstention
        if abstention is None and self.abstain and index is not None:  # derived when the tools were indexed
            abstention = Abstention.of_rule(index.state.abstention)
        rule = abstention.to_dict() if abstention else None
        out: dict[str, Any] = {"query": task, "abstention": rule, "tools": []}
        if self.preloaded and self._index_version < 0:  # the servers have not listed yet
            out["remembered"] = True
        if index is not None:
            answer = await anyio.to_thread.run_sync(
                # collapse=False: two servers' tools of one name are different tools, not copies;
                # cut per hit: a weak second or third tool is not put in front of the model
                lambda: find_skills(index, [task], k, abstention=abstention, lock=self._search_lock,
                                    collapse=False, cut="hit")[0])
            from skillsight_fast.library.screen import screen_text

            for hit in answer.hits:
                up, t = entries[hit.id]
                title = _bounded(getattr(t, "title", None), guard.MAX_TITLE_CHARS)
                desc = _bounded(getattr(t, "description", None), guard.MAX_DESCRIPTION_CHARS)
                found = screen_text(f"{hit.id}\n{title}\n{desc}")
                if found:  # what reaches the agent passes the injection screen
                    out.setdefault("withheld", []).append({"name": hit.id[:200],
                                                           "reasons": [f.rule for f in found]})
                    continue
                out["tools"].append({
                    "name": hit.id, "server": up.name, "title": title, "description": desc,
                    "inputSchema": _schema(t), "score": round(hit.score, 4), "evidence": hit.evidence})
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
        notes = [{"server": up.name, "note": up.note} for up in self.upstreams.values() if up.note]
        if notes:
            out["notes"] = notes
        return out

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
            return _error_result(f"server {up.name!r} failed the call to {tool!r}: {_detail(exc)}")

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


def _bounded(value: Any, limit: int) -> str:
    """A tool text for search results: a string cut to ``limit`` characters (anything else is "")."""
    if not isinstance(value, str):
        return ""
    return value if len(value) <= limit else value[: limit - 1] + "…"


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
            logger.error("tool proxy: pinned tools: %s", _detail(exc))
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
            return _error_result(f"{name} failed: {_detail(exc)}")

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
