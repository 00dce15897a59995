"""The HTTP transport: ``POST /search``, ``GET /skill/<id>``, ``GET /health`` over the service.

Hardened for a loopback service (docs/SECURITY.md): Host/Origin checks against DNS rebinding, a
bearer token for any other address, body and connection caps, and request deadlines.
"""

from __future__ import annotations

import hmac
import io
import json
import logging
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from skillsight_fast.agents.live import SkillFileError, UnknownSkillError
from skillsight_fast.agents.service import LOOPBACK, MAX_BODY_BYTES, SkillService
from skillsight_fast.errors import QueryError, SkillsightError

logger = logging.getLogger(__name__)

#: Connections the HTTP server serves at once (one thread each); more get 503.
DEFAULT_MAX_CONNECTIONS = 64


class _DeadlineReader(io.RawIOBase):
    """The socket's read side under two clocks (see :class:`_Handler`).

    Each wait for bytes may last ``handler.timeout`` seconds (idle), and once the first byte of a
    request has arrived the whole request (line, headers, body) must arrive within
    ``handler.request_timeout`` seconds: a client sending a byte every 20 s is dropped instead of
    holding a thread forever.
    """

    def __init__(self, sock: Any, handler: _Handler) -> None:
        super().__init__()
        self._sock = sock
        self._handler = handler

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        handler = self._handler
        wait = handler.timeout
        if handler.request_deadline is not None:
            left = handler.request_deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"request not received within {handler.request_timeout} s")
            wait = left if wait is None else min(wait, left)
        self._sock.settimeout(wait)
        n = self._sock.recv_into(buffer)
        if n and handler.request_deadline is None:
            handler.request_deadline = time.monotonic() + handler.request_timeout
        return int(n)


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


class _Handler(BaseHTTPRequestHandler):
    """One connection: checks every request (token or Host/Origin, framing, size) before routing.

    Clocks: a connection may wait ``timeout`` seconds for bytes (idle keep-alive included); a
    request must arrive whole within ``request_timeout`` seconds of its first byte; each response
    write must finish within ``write_timeout`` seconds (a client that does not read is dropped).
    """

    server_version = "skillsight-fast"
    protocol_version = "HTTP/1.1"
    #: Seconds a connection may sit idle or stall mid-request before it is closed (slow clients
    #: would otherwise hold a server thread forever).
    timeout = 30
    #: Seconds from the first byte of a request to its last (line, headers and body).
    request_timeout = 10.0
    #: Seconds one response write may take.
    write_timeout = 30.0

    request_deadline: float | None = None
    _body: bytes | None = None
    _responded = False

    @property
    def service(self) -> SkillService:
        return self.server.service  # type: ignore[attr-defined,no-any-return]

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self))

    def handle_one_request(self) -> None:
        self.request_deadline = None
        self._body = None
        self._responded = False
        try:
            super().handle_one_request()
        except (ConnectionError, TimeoutError):  # the client hung up or stalled: nobody to answer
            self.close_connection = True
        except Exception:  # a bug: answer 500 if nothing was sent yet, and keep serving others
            logger.exception("%s %s failed", self.command, self.path)
            self.close_connection = True
            if not self._responded:
                try:
                    self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error (see the server log)")
                except OSError:
                    pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("%s " + format, self.address_string(), *args)

    def flush_headers(self) -> None:
        self._responded = True
        self.connection.settimeout(self.write_timeout)
        super().flush_headers()

    def _send(self, status: int, obj: Any) -> None:
        # "replace": a lone surrogate echoed from the request must not crash the response
        body = json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        if status == HTTPStatus.UNAUTHORIZED:
            self.send_header("WWW-Authenticate", 'Bearer realm="skillsight"')
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, {"error": message, "status": int(status)})

    # ------------------------------------------------------------------ checks before routing
    def parse_request(self) -> bool:
        """The stdlib parse, then the checks; on a failure answer it, and route nothing."""
        if not super().parse_request():
            return False
        problem = self._check_access() or self._check_framing()
        if problem is not None:
            self.close_connection = True  # an unread body must never be parsed as a request
            self._error(*problem)
            return False
        length = self.headers.get("Content-Length")
        if length is not None and int(length) > 0:
            try:  # read every body, routed or not, so it is never taken for the next request
                self._body = self.rfile.read(int(length))
            except OSError:  # the client stalled past a deadline or hung up mid-body: drop it quietly
                self.close_connection = True
                return False
            if len(self._body) < int(length):
                self.close_connection = True
                return False
        return True

    def _check_access(self) -> tuple[HTTPStatus, str] | None:
        server = self.server
        token: bytes | None = server.token  # type: ignore[attr-defined]
        if token is not None:  # the token is the proof; Host and Origin do not matter then
            auth = self.headers.get_all("Authorization") or []
            given = auth[0].encode("utf-8", "replace") if len(auth) == 1 else b""
            if not hmac.compare_digest(given, b"Bearer " + token):
                return HTTPStatus.UNAUTHORIZED, "a valid 'Authorization: Bearer <token>' header is required"
            return None
        allowed: frozenset[str] = server.allowed_hosts  # type: ignore[attr-defined]
        hosts = self.headers.get_all("Host") or []
        if len(hosts) > 1:
            return HTTPStatus.BAD_REQUEST, "more than one Host header"
        if not hosts:
            if self.request_version == "HTTP/1.1":
                return HTTPStatus.BAD_REQUEST, "a Host header is required"
        elif _host_name(hosts[0]) not in allowed:
            # a web page whose name was re-pointed at this machine (DNS rebinding) sends its own name
            return HTTPStatus.FORBIDDEN, (f"Host {hosts[0].strip()[:100]!r} is not served here "
                                          "(allowed: loopback names; see --allow-host)")
        origins = self.headers.get_all("Origin") or []
        for origin in origins:
            parts = urlsplit(origin.strip())
            if parts.scheme not in ("http", "https") or (parts.hostname or "") not in allowed:
                return HTTPStatus.FORBIDDEN, (f"requests from web pages of origin {origin.strip()[:100]!r} "
                                              "are refused")
        return None

    def _check_framing(self) -> tuple[HTTPStatus, str] | None:
        if self.headers.get_all("Transfer-Encoding"):
            return HTTPStatus.LENGTH_REQUIRED, "Transfer-Encoding is not supported; send a Content-Length"
        lengths = self.headers.get_all("Content-Length") or []
        if len(lengths) > 1:
            return HTTPStatus.BAD_REQUEST, "more than one Content-Length header"
        if lengths:
            value = lengths[0].strip()
            if not (value.isascii() and value.isdigit() and len(value) <= 18):
                return HTTPStatus.BAD_REQUEST, f"Content-Length must be a decimal number of bytes, got {value[:40]!r}"
            if int(value) > MAX_BODY_BYTES:
                return HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY_BYTES} bytes"
        return None

    # ------------------------------------------------------------------ routes
    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        path = urlsplit(self.path).path
        if path == "/health":
            self._send(HTTPStatus.OK, self.service.health())
        elif path.startswith("/skill/") and len(path) > len("/skill/"):
            file = parse_qs(urlsplit(self.path).query).get("path", [None])[0]
            try:
                self._send(HTTPStatus.OK, self.service.get_skill(unquote(path[len("/skill/"):]), file))
            except (UnknownSkillError, SkillFileError) as exc:
                self._error(HTTPStatus.NOT_FOUND, str(exc))
        else:
            self._error(HTTPStatus.NOT_FOUND, f"no route {path}; use GET /health, POST /search, GET /skill/<id>")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        path = urlsplit(self.path).path
        if path != "/search":
            self._error(HTTPStatus.NOT_FOUND, f"no route POST {path}; use POST /search")
            return
        if self.headers.get("Content-Length") is None:
            self.close_connection = True
            self._error(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required")
            return
        try:
            payload = json.loads((self._body or b"").decode("utf-8"))
        except (ValueError, RecursionError):  # bad UTF-8 or JSON, or nesting too deep to parse
            self._error(HTTPStatus.BAD_REQUEST, "the body must be a JSON object {\"task\": ..., \"k\": ...}")
            return
        if not isinstance(payload, dict):
            self._error(HTTPStatus.BAD_REQUEST, "the body must be a JSON object {\"task\": ..., \"k\": ...}")
            return
        try:
            self._send(HTTPStatus.OK, self.service.find(
                payload.get("task"), payload.get("k", 5), tags=payload.get("tags"), source=payload.get("source"),
                cut=payload.get("cut", "task"), collapse=payload.get("collapse", True)))
        except QueryError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except SkillsightError as exc:  # pragma: no cover - model or index failure
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))


class SkillHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that carries the service and the access rules; threads are daemons.

    At most ``max_connections`` connections are served at once; one more gets ``503`` and is
    closed at once. Hang-ups and stalls are logged at debug level, never printed as tracebacks.
    """

    daemon_threads = True

    def __init__(self, address: tuple[str, int], service: SkillService, *, token: str | None = None,
                 allow_hosts: tuple[str, ...] = (), max_connections: int = DEFAULT_MAX_CONNECTIONS) -> None:
        import socket

        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.service = service
        self.token = token.encode("utf-8") if token is not None else None
        names = {*LOOPBACK, address[0].lower(), *(h.lower().rstrip(".") for h in allow_hosts)}
        self.allowed_hosts = frozenset(n for n in names if n not in ("", "0.0.0.0", "::"))
        self.max_connections = max_connections
        self._slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}"

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: Any) -> None:
        body = json.dumps({"error": f"server busy: {self.max_connections} connections open", "status": 503})
        head = ("HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json; charset=utf-8\r\n"
                f"Content-Length: {len(body)}\r\nRetry-After: 1\r\nConnection: close\r\n\r\n")
        try:
            request.settimeout(1.0)
            request.sendall((head + body).encode())
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)):
            logger.debug("connection from %s ended: %r", client_address, exc)
        else:
            logger.error("request from %s failed", client_address, exc_info=True)


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
        raise SkillsightError(f"the token must be at least {MIN_TOKEN_CHARS} printable characters without spaces")
    if not is_loopback(host) and token is None:
        raise SkillsightError(f"serving on {host} makes the index reachable from other machines: "
                              "set a token (--token-file FILE or SKILLSIGHT_TOKEN) or bind 127.0.0.1")


def make_http_server(service: SkillService, host: str = "127.0.0.1", port: int = 8765, *,
                     token: str | None = None, allow_hosts: tuple[str, ...] = (),
                     max_connections: int = DEFAULT_MAX_CONNECTIONS) -> SkillHTTPServer:
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
    max_connections : int
        Connections served at once; more get 503.

    Raises
    ------
    SkillsightError
        See :func:`check_http_options`; or the address cannot be bound.
    """
    check_http_options(host, port, token, max_connections)
    if not is_loopback(host):
        logger.warning("serving on %s: reachable from other machines; every request needs the token", host)
    try:
        return SkillHTTPServer((host, port), service, token=token, allow_hosts=allow_hosts,
                               max_connections=max_connections)
    except OSError as exc:
        raise SkillsightError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
