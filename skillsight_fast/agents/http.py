"""The HTTP transport: ``POST /search``, ``GET /skill/<id>``, ``GET /health`` and MCP at ``/mcp``.

A Starlette app on uvicorn (both come with the ``mcp`` SDK of the ``serve`` extra), hardened for a
loopback service (docs/SECURITY.md) by :mod:`skillsight_fast.agents.http_guard`: access checks
(a bearer token, or ``Host`` and ``Origin`` naming loopback, the bound address or an
``--allow-host`` name), strict framing, and per-connection clocks and caps (:class:`HTTPLimits`).

``HEAD`` is answered like ``GET`` without a body. MCP's streamable HTTP transport (the SDK's
session manager over the server of :func:`~skillsight_fast.agents.mcp.build_mcp_server`) is served
at ``/mcp`` behind the same checks, so remote hosts can use the MCP tools and resources.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import logging
import socket
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from skillsight_fast.agents.http_guard import Guard, HTTPLimits, json_bytes, protocol_class
from skillsight_fast.agents.live import SkillFileError, UnknownSkillError
from skillsight_fast.agents.service import DEFAULT_MAX_CONNECTIONS, LOOPBACK, MAX_BODY_BYTES, SkillService
from skillsight_fast.errors import QueryError, SkillsightError

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_MAX_CONNECTIONS", "HTTPLimits", "SkillHTTPServer", "build_app", "check_http_options",
           "is_loopback", "make_http_server"]

#: What a route answers on an unknown path.
ROUTES = "GET /health, POST /search, GET /skill/<id>, /mcp (MCP streamable HTTP)"


# ---------------------------------------------------------------------------------------------- the app
def build_app(service: SkillService, *, token: str | None = None,
              allowed_hosts: frozenset[str] = frozenset(LOOPBACK), limits: HTTPLimits = HTTPLimits(),
              mcp: bool = True, endpoint_secret: str | None = None) -> Any:
    """The ASGI app: the routes and ``/mcp`` behind :class:`Guard`.

    Parameters
    ----------
    service : SkillService
        What the routes answer from.
    token : str, optional
        Every request needs ``Authorization: Bearer <token>``; None: Host/Origin checks instead.
    allowed_hosts : frozenset of str
        Host names accepted in ``Host``/``Origin`` when there is no token.
    limits : HTTPLimits
        The MCP session caps.
    mcp : bool
        Serve MCP's streamable HTTP transport at ``/mcp``.
    """
    import anyio
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import Response
    from starlette.routing import Route

    class JSON(Response):
        media_type = "application/json"

        def render(self, content: Any) -> bytes:
            return json_bytes(content)

    def error(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        return JSON({"error": message, "status": int(status)}, status_code=int(status), headers=headers)

    async def call(what: str, fn: Callable[..., Any], *args: Any, not_found: bool = False,
                   **kwargs: Any) -> Response:
        """Run a service call in a worker thread and translate its outcome."""
        try:
            return JSON(await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs)))
        except (UnknownSkillError, SkillFileError) as exc:
            return error(404 if not_found else 400, str(exc))
        except QueryError as exc:
            return error(400, str(exc))
        except SkillsightError as exc:  # model or index failure (or still loading)
            return error(500, str(exc))
        except Exception:  # a bug: answer 500 and keep serving the others
            logger.exception("%s failed", what)
            return error(500, "internal error (see the server log)")

    def health_with_watch() -> dict[str, Any]:
        out = service.health()
        watch = getattr(service, "watch_status", None)  # set by serve --watch's watcher
        if callable(watch):
            out["watch"] = watch()
            if not out["watch"]["ok"] and out.get("status") == "ok":
                out["status"] = "degraded"
        return out

    async def health(request: Request) -> Response:
        return await call("GET /health", health_with_watch)

    async def skill(request: Request) -> Response:
        skill_id = request.path_params["skill_id"]
        file = request.query_params.get("path")
        return await call(f"GET /skill/{skill_id[:100]}", service.get_skill, skill_id, file, not_found=True)

    async def search(request: Request) -> Response:
        try:
            body = await request.body()
        except ClientDisconnect:  # nobody to answer
            return error(400, "the client hung up")
        try:
            payload = json.loads(body.decode("utf-8"))
        except (ValueError, RecursionError):  # bad UTF-8 or JSON, or nesting too deep to parse
            payload = None
        if not isinstance(payload, dict):
            return error(400, "the body must be a JSON object {\"task\": ..., \"k\": ...}")
        return await call("POST /search", service.find, payload.get("task"), payload.get("k", 5),
                          tags=payload.get("tags"), source=payload.get("source"),
                          cut=payload.get("cut", "task"), collapse=payload.get("collapse", True))

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            return error(404, f"no route {request.url.path[:200]}; use {ROUTES}")
        if exc.status_code == 405:
            return error(405, f"{request.method} is not allowed on {request.url.path[:200]}; use {ROUTES}",
                         headers=dict(exc.headers or {}))
        return error(exc.status_code, str(exc.detail))

    routes: list[Any] = [Route("/health", health, methods=["GET"]),
                         Route("/search", search, methods=["POST"]),
                         Route("/skill/{skill_id:path}", skill, methods=["GET"])]
    manager = None
    if mcp:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
        from mcp.server.transport_security import TransportSecuritySettings

        from skillsight_fast.agents.mcp import build_mcp_server

        server = build_mcp_server(service)
        # the guard in front checks Host/Origin or the token for /mcp too; the SDK's own Host check
        # would refuse a remote client that has the token
        server.streamable_http_app(
            streamable_http_path="/mcp", max_request_body_size=MAX_BODY_BYTES,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_sessions=limits.max_sessions, session_idle_timeout=limits.session_idle_timeout)
        manager = server.session_manager
        routes.append(Route("/mcp", StreamableHTTPASGIApp(manager)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        if manager is None:
            yield
            return
        async with manager.run():
            yield

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error}, lifespan=lifespan)
    return Guard(app, token=token, allowed_hosts=allowed_hosts, endpoint_secret=endpoint_secret)


# ---------------------------------------------------------------------------------------------- the server
class SkillHTTPServer:
    """The app on uvicorn, bound at construction; :meth:`serve_forever` serves in the calling thread.

    The interface of :class:`http.server.HTTPServer` that the callers use: ``server_address``,
    ``url``, ``service``, ``serve_forever()``, ``shutdown()`` (from another thread; returns when
    serving has stopped) and ``server_close()``.
    """

    def __init__(self, address: tuple[str, int], service: SkillService, *, token: str | None = None,
                 allow_hosts: tuple[str, ...] = (), limits: HTTPLimits = HTTPLimits(),
                 mcp: bool = True, endpoint_secret: str | None = None) -> None:
        import uvicorn

        self.service = service
        self.limits = limits
        names = {*LOOPBACK, address[0].lower(), *(h.lower().rstrip(".") for h in allow_hosts)}
        self.allowed_hosts = frozenset(n for n in names if n not in ("", "0.0.0.0", "::"))
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        # proto IPPROTO_TCP, not 0: asyncio turns Nagle off only on sockets that say they are TCP
        # (with it on, a response written as head + body waits ~40 ms for the client's delayed ACK)
        self.socket = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self.socket.bind(address)
            self.socket.listen(128)
        except OSError:
            self.socket.close()
            raise
        self.server_address = self.socket.getsockname()
        self.app = build_app(service, token=token, allowed_hosts=self.allowed_hosts, limits=limits, mcp=mcp,
                             endpoint_secret=endpoint_secret)
        config = uvicorn.Config(
            self.app, http=functools.partial(protocol_class(), limits=limits), ws="none", lifespan="on",
            loop="asyncio", interface="asgi3", log_config=None, access_log=False, proxy_headers=False,
            server_header=False, backlog=128,
            # our protocol refuses connections beyond the cap at once; uvicorn's own cap (which
            # counts the asking connection) is the backstop
            limit_concurrency=limits.max_connections + 1,
            timeout_keep_alive=max(1, round(limits.idle_timeout)),
            timeout_graceful_shutdown=max(1, round(limits.shutdown_timeout)),
            h11_max_incomplete_event_size=limits.max_header_bytes)
        self._server = uvicorn.Server(config)
        self._serving = threading.Event()
        self._stopped = threading.Event()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}"

    def serve_forever(self, poll_interval: float = 0.1) -> None:
        """Serve until :meth:`shutdown` (or SIGINT/SIGTERM in the main thread).

        ``poll_interval`` is accepted for the :mod:`socketserver` interface; uvicorn looks every 0.1 s.
        """
        self._serving.set()
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop serving (running requests get ``limits.shutdown_timeout`` seconds) and wait for it."""
        self._server.should_exit = True
        if self._serving.is_set():
            self._stopped.wait(self.limits.shutdown_timeout + 10)

    def server_close(self) -> None:
        """Close the listening socket."""
        self.socket.close()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable only from this machine (``localhost``, 127.0.0.0/8, ``::1``)."""
    import ipaddress

    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: Shortest accepted bearer token (characters).
MIN_TOKEN_CHARS = 16


def check_http_options(host: str, port: Any, token: str | None = None, max_connections: Any = 1) -> None:
    """Refuse HTTP settings that cannot work or would expose the index (before anything is loaded).

    Raises
    ------
    SkillsightError
        ``port`` is not in 0..65535, ``max_connections`` is not a positive integer, the token is
        too short, or ``host`` is not a loopback address and there is no token.
    """
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise SkillsightError(f"the port must be an integer from 0 to 65535, got {port!r}")
    if isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1:
        raise SkillsightError(f"the connection cap must be a positive integer, got {max_connections!r}")
    if token is not None and (len(token) < MIN_TOKEN_CHARS or not token.isprintable() or " " in token):
        raise SkillsightError(f"the token must be at least {MIN_TOKEN_CHARS} printable characters "
                              "without spaces")
    if not is_loopback(host) and token is None:
        raise SkillsightError(f"serving on {host} makes the index reachable from other machines: "
                              "set a token (--token-file FILE or SKILLSIGHT_TOKEN) or bind 127.0.0.1")


def make_http_server(service: SkillService, host: str = "127.0.0.1", port: int = 8765, *,
                     token: str | None = None, allow_hosts: tuple[str, ...] = (),
                     max_connections: int | None = None, limits: HTTPLimits | None = None,
                     mcp: bool = True, endpoint_secret: str | None = None) -> SkillHTTPServer:
    """Bind (``port`` 0 picks a free one) without serving yet; call ``serve_forever()``.

    Parameters
    ----------
    service : SkillService
        What the routes answer from.
    host, port : str, int
        The address; anything but loopback needs ``token``.
    token : str, optional
        When set, every request needs ``Authorization: Bearer <token>`` (compared in constant time).
        Without it, the ``Host`` header must name loopback, ``host`` or one of ``allow_hosts``, and
        an ``Origin`` header (sent by browsers) must too: this is what defeats DNS rebinding.
    allow_hosts : tuple of str
        More host names accepted in ``Host``/``Origin`` (e.g. the name of a reverse proxy).
    max_connections : int, optional
        Connections served at once; more get 503 (default ``limits.max_connections``, 64).
    limits : HTTPLimits, optional
        Clocks and caps (:class:`HTTPLimits`); default the class defaults.
    mcp : bool
        Also serve MCP's streamable HTTP transport at ``/mcp``.
    endpoint_secret : str, optional
        The secret published in the endpoint record for the prompt hook: accepted as a bearer
        token, and answers to a request with a nonce carry a proof keyed by it.

    Raises
    ------
    SkillsightError
        See :func:`check_http_options`; or the address cannot be bound.
    """
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        from skillsight_fast.errors import install_hint

        raise SkillsightError("the HTTP server needs Starlette and uvicorn (they come with the MCP SDK): "
                              + install_hint("serve")) from None
    limits = limits or HTTPLimits()
    if max_connections is not None:
        check_http_options(host, port, token, max_connections)
        limits = dataclasses.replace(limits, max_connections=max_connections)
    check_http_options(host, port, token, limits.max_connections)
    if not is_loopback(host):
        logger.warning("serving on %s: reachable from other machines; every request needs the token", host)
    try:
        return SkillHTTPServer((host, port), service, token=token, allow_hosts=allow_hosts, limits=limits,
                               mcp=mcp, endpoint_secret=endpoint_secret)
    except OSError as exc:
        raise SkillsightError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
