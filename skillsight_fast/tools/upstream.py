"""The tool proxy's upstream side: connecting to the MCP servers it fronts and listing their tools.

One :class:`Upstream` per configured server, its connection owned by one task of the proxy's task
group: started in the background (or by the first call that needs it), its tools listed (and listed
again on ``notifications/tools/list_changed``), restarted on the next use when it died or a call timed
out, retried after a growing pause (:data:`RETRY_MIN` .. :data:`RETRY_MAX` seconds) when it failed to
start. Its owner (:class:`skillsight_fast.tools.proxy.ToolProxy`) gives it ``task_group``, ``errlog``,
``start_timeout`` and ``catalog_changed()``, called when its tool list changed.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from contextlib import AsyncExitStack
from typing import Any, Self

from skillsight_fast.errors import SkillsightError
from skillsight_fast.tools import guard
from skillsight_fast.tools.catalog import ServerConfig
from skillsight_fast.tools.mcp_source import list_all_tools, open_session, server_name

logger = logging.getLogger(__name__)

#: Seconds a downstream server may take to start and list its tools.
START_TIMEOUT = 60.0
#: Seconds a forwarded tools/call may take.
CALL_TIMEOUT = 300.0
#: Pause before the first retry of a server that failed to start, doubled per failure up to RETRY_MAX.
RETRY_MIN, RETRY_MAX = 2.0, 60.0
#: Fewest seconds between two listings a server's ``tools/list_changed`` notifications cause: any
#: number of them while one listing runs or waits cost one more listing, not one each.
REFRESH_INTERVAL = 2.0
_LIST_CHANGED = "notifications/tools/list_changed"


class UpstreamError(SkillsightError):
    """A downstream server is unavailable (cannot be started, died, or failed a request)."""


def detail(exc: BaseException) -> str:
    """A one-line reason from an exception or an exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(detail(e) for e in exc.exceptions)
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

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
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

    def __init__(self, config: ServerConfig, proxy: Any) -> None:
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
        self._refresh_wanted = False
        self._refreshing = False
        self._last_refresh = -math.inf
        #: Listings caused by ``tools/list_changed`` so far (coalesced), and notifications received.
        self.refreshes = 0
        self.notifications = 0

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
                await self.proxy.task_group.start(self._own)
            except Exception as exc:  # spawn failure, protocol error, timeout (as a group or alone)
                self._failures += 1
                self._retry_at = anyio.current_time() + min(RETRY_MAX, RETRY_MIN * 2 ** (self._failures - 1))
                self.state, self.error = "failed", detail(exc)
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
                    tools, note = await list_all_tools(session)
                self._session, self._gone, self._stop = session, gone, stop
                self._set_tools(tools, note)
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
            logger.warning("MCP server %r: connection ended with an error: %s", self.name, detail(exc))
        finally:
            if started and self._session is session:  # still the current connection (not restarted)
                self._session = None
                if stop.is_set():
                    self.state = "stopped"
                elif self.state == "ready":
                    self.state = "down"
                    logger.warning("MCP server %r went away; it is restarted on its next call", self.name)

    def _set_tools(self, tools: Sequence[Any], note: str = "") -> None:
        cap = guard.MAX_TOOLS_PER_SERVER
        if len(tools) > cap and not note:
            note = f"lists more than {cap} tools"
        kept = min(len(tools), cap)
        self.note = f"{note}; only its first {kept} tools are searched" if note else ""
        if self.note:
            logger.warning("MCP server %r %s", self.name, self.note)
        new = {str(t.name): t for t in list(tools)[:cap]}
        if _tools_key(new) != _tools_key(self.tools):
            self.tools = new
            self.proxy.catalog_changed()

    async def _on_message(self, message: Any) -> None:
        if getattr(message, "method", None) == _LIST_CHANGED:
            self.notifications += 1
            self._refresh_wanted = True
            if not self._refreshing and self.proxy.task_group is not None:
                self._refreshing = True
                self.proxy.task_group.start_soon(self._refresh_when_due)

    async def _refresh_when_due(self) -> None:
        """List the tools again while notifications asked for it, at most once per
        :data:`REFRESH_INTERVAL` seconds (searches meanwhile use the last index)."""
        import anyio

        try:
            while self._refresh_wanted and self._session is not None:
                await anyio.sleep(max(0.0, self._last_refresh + REFRESH_INTERVAL - anyio.current_time()))
                self._refresh_wanted = False
                self._last_refresh = anyio.current_time()
                self.refreshes += 1
                await self.refresh()
        finally:
            self._refreshing = False

    async def refresh(self) -> None:
        """List the tools again (after ``tools/list_changed``); errors are logged, never raised."""
        import anyio

        try:
            session = self._session
            if session is None:
                return
            with anyio.fail_after(self.proxy.start_timeout):
                tools, note = await list_all_tools(session)
            self._set_tools(tools, note)
            logger.debug("MCP server %r listed its tools again: %d now", self.name, len(tools))
        except Exception as exc:
            logger.warning("MCP server %r: cannot list its changed tools: %s", self.name, detail(exc))

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
    return json.dumps([(n, getattr(t, "description", None), getattr(t, "title", None), tool_schema(t))
                       for n, t in sorted(tools.items())], sort_keys=True, default=str)


def tool_schema(t: Any) -> dict[str, Any]:
    schema = getattr(t, "input_schema", None)
    if schema is None:
        schema = getattr(t, "inputSchema", None)
    return dict(schema or {})
