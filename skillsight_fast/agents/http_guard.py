"""The HTTP server's hardening (docs/SECURITY.md): its caps and clocks (:class:`HTTPLimits`), uvicorn's
h11 protocol with those deadlines and the connection cap (:func:`protocol_class`), and the access
and framing checks in front of every route (:class:`Guard`). :mod:`skillsight_fast.agents.http`
puts them together with the routes.

* **access** (:class:`Guard`, ASGI middleware in front of every route, ``/mcp`` included): with a
  token, every request needs ``Authorization: Bearer <token>`` (scheme in any case, token compared
  in constant time); without one, the ``Host`` header and any ``Origin`` must name loopback, the
  bound address or an ``--allow-host`` name (this defeats DNS rebinding);
* **framing**: h11 refuses malformed or conflicting ``Content-Length`` values and headers over
  :attr:`HTTPLimits.max_header_bytes`; the guard refuses ``Transfer-Encoding``, a ``POST`` without
  ``Content-Length`` and a body over :data:`~skillsight_fast.agents.service.MAX_BODY_BYTES`
  before reading it, and closes the connection after every refusal;
* **clocks and caps** (the protocol): a connection may wait ``idle_timeout`` seconds for a request,
  a request must arrive whole within ``request_timeout`` seconds of its first byte (a client
  sending a byte every few seconds is dropped), a response write that makes no progress for
  ``write_timeout`` seconds drops the client, and connections beyond ``max_connections`` get
  ``503`` at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import urlsplit

from skillsight_fast.agents.endpoint import NONCE_HEADER, PROOF_HEADER, hook_token, proof
from skillsight_fast.agents.service import DEFAULT_MAX_CONNECTIONS, MAX_BODY_BYTES

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HTTPLimits:
    """Caps and clocks of the HTTP server.

    Attributes
    ----------
    max_connections : int
        Connections served at once; one more gets ``503`` (with ``Retry-After``) and is closed.
    idle_timeout : float
        Seconds a connection may wait for the first byte of a request (after connecting, and
        between keep-alive requests).
    request_timeout : float
        Seconds from the first byte of a request to its last (line, headers and body).
    write_timeout : float
        Seconds a response write may make no progress (a client that does not read is dropped).
    max_header_bytes : int
        Largest request line + headers (h11's ``max_incomplete_event_size``); more gets ``431``.
    max_sessions : int
        Open MCP sessions at ``/mcp``; one more gets ``503``.
    session_idle_timeout : float
        Seconds after which an MCP session without a request in flight is closed.
    shutdown_timeout : float
        Seconds :meth:`SkillHTTPServer.shutdown` lets running requests finish.
    """

    max_connections: int = DEFAULT_MAX_CONNECTIONS
    idle_timeout: float = 30.0
    request_timeout: float = 10.0
    write_timeout: float = 30.0
    max_header_bytes: int = 16 * 1024
    max_sessions: int = 256
    session_idle_timeout: float = 600.0
    shutdown_timeout: float = 3.0


# ---------------------------------------------------------------------------------------------- replies
def json_bytes(obj: Any) -> bytes:
    # "replace": a lone surrogate echoed from the request must not crash the response
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace")


def _error_body(status: int, message: str) -> bytes:
    return json_bytes({"error": message, "status": int(status)})


def _raw_response(status: int, message: str, extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    """A whole ``Connection: close`` JSON error response as bytes (sent outside the h11 cycle)."""
    body = _error_body(status, message)
    head = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}", "Content-Type: application/json; charset=utf-8",
            f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in extra), "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


async def _send_json(send: Callable[..., Any], status: int, obj: Any, *, close: bool = False,
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    body = json_bytes(obj)
    raw = [(b"content-type", b"application/json; charset=utf-8"),
           (b"content-length", str(len(body)).encode()), *headers]
    if close:
        raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": int(status), "headers": raw})
    await send({"type": "http.response.body", "body": body})


# ---------------------------------------------------------------------------------------------- the protocol
def protocol_class() -> type:
    """uvicorn's h11 protocol with the deadlines and the connection cap (built lazily: uvicorn and
    h11 are imported only when a server is made)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class _Connection(h11.Connection):  # type: ignore[misc]
        """h11's connection that remembers why it refused a request (uvicorn drops the reason)."""

        refusal: h11.RemoteProtocolError | None = None

        def __init__(self, role: Any, max_head: int) -> None:
            super().__init__(role, max_head)
            self.max_head = max_head

        def next_event(self) -> Any:
            try:
                event = super().next_event()
                # h11 caps only a head that is still incomplete; one that arrived whole is measured here
                if isinstance(event, h11.Request) and (len(event.target) + sum(
                        len(k) + len(v) + 4 for k, v in event.headers.raw_items()) > self.max_head):
                    raise h11.RemoteProtocolError("request head too large", error_status_hint=431)
                return event
            except h11.RemoteProtocolError as exc:
                self.refusal = exc
                raise

    class _Protocol(H11Protocol):  # type: ignore[misc]
        """One connection: uvicorn's h11 protocol under three clocks and the connection cap."""

        def __init__(self, config: Any, server_state: Any, app_state: Any, _loop: Any = None, *,
                     limits: HTTPLimits) -> None:
            super().__init__(config, server_state, app_state, _loop)
            self.limits = limits
            self.timeout_keep_alive = limits.idle_timeout  # uvicorn's keep-alive clock, in seconds
            self.conn = _Connection(h11.SERVER, limits.max_header_bytes)
            self._clock: asyncio.TimerHandle | None = None  # the idle or the request clock
            self._write_clock: asyncio.TimerHandle | None = None
            self._write_left = 0
            self._refused = False
            self._lost = False

        # -------------------------------------------------------------- connection
        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            super().connection_made(transport)
            sock = transport.get_extra_info("socket")
            if sock is not None:  # head and body go out at once, never behind a delayed ACK
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if len(self.connections) > self.limits.max_connections:
                self._refused = True
                logger.warning("refusing a connection: %d open", self.limits.max_connections)
                busy = f"server busy: {self.limits.max_connections} connections open"
                transport.write(_raw_response(503, busy, (("Retry-After", "1"),)))
                # half-close and drop what the client still sends for a moment: closing with its
                # request unread would reset the connection before it reads the answer
                if transport.can_write_eof():
                    transport.write_eof()
                self._clock = self.loop.call_later(1.0, self._close)
                return
            self._start_clock(self.limits.idle_timeout, self._idle_expired)

        def connection_lost(self, exc: Exception | None) -> None:
            self._lost = True
            self._stop_clock()
            if self._write_clock is not None:
                self._write_clock.cancel()
                self._write_clock = None
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self._refused or self._lost:
                return
            if self._clock is not None and self._clock_kind == "idle":
                self._stop_clock()
            if self._clock is None and self.conn.their_state in (h11.IDLE, h11.SEND_BODY):
                self._start_clock(self.limits.request_timeout, self._request_expired)
            super().data_received(data)
            self._check_request_clock()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._check_request_clock()
            if self.transport.is_closing() and self.transport.get_write_buffer_size():
                self._watch_writes()

        # -------------------------------------------------------------- clocks
        _clock_kind = ""

        def _start_clock(self, seconds: float, callback: Callable[[], None]) -> None:
            self._stop_clock()
            self._clock_kind = "idle" if callback == self._idle_expired else "request"
            self._clock = self.loop.call_later(seconds, callback)

        def _stop_clock(self) -> None:
            if self._clock is not None:
                self._clock.cancel()
                self._clock = None

        def _check_request_clock(self) -> None:
            """Stop the request clock once the request has arrived whole (or no request is pending)."""
            state = self.conn.their_state
            pending = state is h11.SEND_BODY or (state is h11.IDLE and bool(self.conn.trailing_data[0]))
            if self._clock_kind == "request" and not pending:
                self._stop_clock()
            elif pending and self._clock is None and not self.transport.is_closing():
                self._start_clock(self.limits.request_timeout, self._request_expired)

        def timeout_keep_alive_handler(self) -> None:
            """uvicorn's keep-alive clock ran out: close, and drop a client that does not read."""
            super().timeout_keep_alive_handler()
            if self.transport.get_write_buffer_size():
                self._watch_writes()

        def _idle_expired(self) -> None:
            self._clock = None
            logger.debug("closing a connection idle for %s s", self.limits.idle_timeout)
            self._close()

        def _request_expired(self) -> None:
            self._clock = None
            logger.debug("dropping a request not received within %s s", self.limits.request_timeout)
            if self.conn.our_state is h11.IDLE and self.conn.their_state is h11.IDLE:  # no request parsed yet
                self.transport.write(_raw_response(408, f"request not received within "
                                                        f"{self.limits.request_timeout} s"))
            self._close()

        def _close(self) -> None:
            """Close; a client that does not read what is left to send is dropped by the write clock."""
            if not self.transport.is_closing():
                self.transport.close()
            if self.transport.get_write_buffer_size():
                self._watch_writes()

        # -------------------------------------------------------------- writes
        def pause_writing(self) -> None:
            super().pause_writing()
            self._watch_writes()

        def _watch_writes(self) -> None:
            if self._write_clock is None and not self._lost:
                self._write_left = self.transport.get_write_buffer_size()
                self._write_clock = self.loop.call_later(self.limits.write_timeout, self._write_check)

        def _write_check(self) -> None:
            self._write_clock = None
            if self._lost:
                return
            left = self.transport.get_write_buffer_size()
            if not left or (left < self._write_left and not self.flow.write_paused and not
                            self.transport.is_closing()):
                return  # drained, or draining with nothing queued behind
            if left >= self._write_left:
                logger.debug("dropping a client that read nothing for %s s", self.limits.write_timeout)
                self.transport.abort()
                return
            self._watch_writes()  # progress: look again later

        # -------------------------------------------------------------- refusals by h11
        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to a request h11 refused, as JSON with the reason and its status."""
            exc = self.conn.refusal
            status = getattr(exc, "error_status_hint", 400) if exc is not None else 400
            reason = str(exc) if exc is not None and str(exc) else msg
            if status == 431:
                reason = f"request line and headers over {self.limits.max_header_bytes} bytes"
            body = _error_body(status, f"malformed request: {reason}")
            try:
                self.transport.write(self.conn.send(h11.Response(
                    status_code=status, reason=HTTPStatus(status).phrase.encode(),
                    headers=[(b"Content-Type", b"application/json; charset=utf-8"),
                             (b"Content-Length", str(len(body)).encode()), (b"Connection", b"close")])))
                self.transport.write(self.conn.send(h11.Data(data=body)))
                self.transport.write(self.conn.send(h11.EndOfMessage()))
            except h11.LocalProtocolError:  # a response was already under way: just close
                pass
            self._close()

    return _Protocol


# ---------------------------------------------------------------------------------------------- checks
def _host_name(value: str) -> str:
    """The lowercase host of a ``Host`` header value (``[::1]:8765`` -> ``::1``)."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        name = value[1:end] if end > 0 else value
    elif value.count(":") == 1:
        name = value.split(":", 1)[0]
    else:
        name = value
    return name.rstrip(".")


class Guard:
    """ASGI middleware: the access and framing checks of every HTTP request, before any route.

    A refused request is answered with a JSON error and ``Connection: close`` (its body is never
    read, so it can never be taken for a next request).
    """

    def __init__(self, app: Any, *, token: str | None, allowed_hosts: frozenset[str],
                 max_body: int = MAX_BODY_BYTES, endpoint_secret: str | None = None) -> None:
        self.app = app
        self.token = token.encode("utf-8") if token is not None else None
        self.allowed_hosts = allowed_hosts
        self.max_body = max_body
        #: The secret of the endpoint record (:mod:`skillsight_fast.agents.endpoint`): the hook token
        #: derived from it is accepted as a bearer token, and every answer to a request with a nonce
        #: carries a proof keyed by the proof key derived from it. The secret itself is never accepted.
        self.secret = endpoint_secret.encode("utf-8") if endpoint_secret else None
        self.hook_token = hook_token(self.secret).encode("ascii") if self.secret else None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        problem = self._check_access(scope, headers) or self._check_framing(scope, headers)
        if problem is None:
            nonce = [v for k, v in headers if k == NONCE_HEADER.lower().encode()]
            if self.secret is not None and len(nonce) == 1 and len(nonce[0]) <= 128:
                send = self._signing(send, nonce[0].strip())
            await self.app(scope, receive, send)
            return
        status, message = problem
        extra = ((b"www-authenticate", b'Bearer realm="skillsight"'),) if status == 401 else ()
        await _send_json(send, status, {"error": message, "status": int(status)}, close=True, headers=extra)

    def _signing(self, send: Any, nonce: bytes) -> Any:
        """``send`` that holds the response until its body is whole, then adds the proof header
        ``HMAC-SHA256(proof_key(secret), nonce + "\\n" + body)`` (the prompt hook checks it)."""
        held: list[dict[str, Any]] = []
        body: list[bytes] = []

        async def signed(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                held.append(message)
                return
            if message["type"] == "http.response.body" and held:
                body.append(message.get("body", b""))
                if message.get("more_body", False):
                    return
                data = b"".join(body)
                start = dict(held.pop())
                start["headers"] = [*start.get("headers", []),
                                    (PROOF_HEADER.lower().encode(), proof(self.secret, nonce, data).encode())]
                await send(start)
                await send({"type": "http.response.body", "body": data, "more_body": False})
                return
            await send(message)

        return signed

    def _bearer(self, headers: list[tuple[bytes, bytes]]) -> bytes:
        """The credentials of the one ``Authorization: Bearer ...`` header (scheme in any case), or b""."""
        auth = [v for k, v in headers if k == b"authorization"]
        scheme, _, given = auth[0].strip().partition(b" ") if len(auth) == 1 else (b"", b"", b"")
        return given.strip(b" ") if scheme.lower() == b"bearer" else b""

    @staticmethod
    def _values(headers: list[tuple[bytes, bytes]], name: bytes) -> list[str]:
        return [v.decode("latin-1") for k, v in headers if k == name]

    def _check_access(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]]
                      ) -> tuple[int, str] | None:
        if self.hook_token is not None and hmac.compare_digest(self._bearer(headers), self.hook_token):
            return None  # the prompt hook, with the token derived from the endpoint record's secret
        if self.token is not None:  # the token is the proof; Host and Origin do not matter then
            auth = [v for k, v in headers if k == b"authorization"]
            scheme, _, given = auth[0].strip().partition(b" ") if len(auth) == 1 else (b"", b"", b"")
            ok = hmac.compare_digest(given.strip(b" "), self.token)  # constant time over the token
            if not (ok and scheme.lower() == b"bearer"):
                return 401, "a valid 'Authorization: Bearer <token>' header is required"
            return None
        hosts = self._values(headers, b"host")
        if len(hosts) > 1:
            return 400, "more than one Host header"
        if not hosts:
            if scope.get("http_version") != "1.0":
                return 400, "a Host header is required"
        elif _host_name(hosts[0]) not in self.allowed_hosts:
            # a web page whose name was re-pointed at this machine (DNS rebinding) sends its own name
            return 403, (f"Host {hosts[0].strip()[:100]!r} is not served here "
                         "(allowed: loopback names; see --allow-host)")
        for origin in self._values(headers, b"origin"):
            parts = urlsplit(origin.strip())
            try:
                name = parts.hostname or ""
            except ValueError:
                name = ""
            if parts.scheme not in ("http", "https") or name not in self.allowed_hosts:
                return 403, f"requests from web pages of origin {origin.strip()[:100]!r} are refused"
        return None

    def _check_framing(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]]
                       ) -> tuple[int, str] | None:
        if any(k == b"transfer-encoding" for k, _ in headers):
            return 411, "Transfer-Encoding is not supported; send a Content-Length"
        lengths = self._values(headers, b"content-length")  # h11 checked: one plain decimal number
        if lengths and int(lengths[0]) > self.max_body:
            return 413, f"request body over {self.max_body} bytes"
        if not lengths and scope["method"] == "POST":
            return 411, "a Content-Length header is required"
        return None
