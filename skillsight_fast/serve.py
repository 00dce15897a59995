"""Serving an index to agents: an MCP server over stdio and a small JSON endpoint over HTTP.

Both load the index once and compile the kernels and run the encoder once before the first
request, so every request costs one query encoding plus about a millisecond of search.

Tools (MCP) and routes (HTTP):

* ``find_skills(task, k=5, tags, source, cut, collapse)`` / ``POST /search {"task", "k", ...}``: the
  best skills for a task (filters, pins, per-hit cut and duplicate collapse of
  :func:`~skillsight_fast.find.find_skills`), each with
  its name, description, path, score, score parts (cosine qᵀd, dense s⊥, lexical) and the query's
  evidence tokens it contains; hits below the abstention threshold (``--min-cosine``/``--min-score``
  or the index's ``calibration.json``) are dropped, so a task that no skill fits gets an empty list.
* ``get_skill(id, path=None)`` / ``GET /skill/<id>[?path=<file>]``: the SKILL.md text of an indexed
  skill, or a text file inside its folder (``scripts/...``, ``references/...``) by a relative path
  that cannot leave the folder. Only files whose paths are recorded in the index, and files in
  their folders, are ever read; skills indexed from JSONL/datasets are rebuilt from the stored
  body (``texts.jsonl``).
* ``GET /health``: index size, model, threshold and the catalog version.

MCP resources (Skills-over-MCP draft, SEP-2640): every indexed skill is listed as
``skill://<id>/SKILL.md``; ``skill://<id>/<relative path>`` reads any file of its folder; each
``find_skills`` hit carries its ``uri``. With ``serve --watch`` (:mod:`skillsight_fast.watch`) the
catalog behind all of this is replaced atomically when the skill folders change.
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
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from skillsight_fast.calibrate import Abstention
from skillsight_fast.catalog import Catalog, SkillFileError, UnknownSkillError, skill_uri
from skillsight_fast.errors import QueryError, SkillsightError
from skillsight_fast.find import find_skills
from skillsight_fast.skills import SKILL_FILE

logger = logging.getLogger(__name__)

#: Most hits one request may ask for.
MAX_SERVE_K = 100
#: Largest accepted HTTP request body (bytes).
MAX_BODY_BYTES = 64 * 1024
#: Loopback addresses (anything else is reachable from other machines).
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Connections the HTTP server serves at once (one thread each); more get 503.
DEFAULT_MAX_CONNECTIONS = 64


class SkillService:
    """The index behind a server: search with abstention, skill texts and files, resources.

    The service holds one :class:`~skillsight_fast.catalog.Catalog` (index + texts + abstention
    rule of one version) and every request reads it once at its start, so :meth:`swap` (called by
    ``serve --watch``) never lets a request mix two versions.

    Parameters
    ----------
    directory : path
        The index folder (also where ``texts.jsonl`` and ``calibration.json`` are read).
    abstention : Abstention, optional
        Hits below its threshold are dropped (see :mod:`skillsight_fast.calibrate`); None keeps all.
    index : SkillIndex, optional
        An already loaded index (tests); otherwise it is loaded from ``directory``.
    mmap : bool
        Memory-map the index arrays.
    defer : bool
        Do not load now: :meth:`start` loads and warms up in a background thread, and requests
        wait for it (``serve --mcp`` answers ``initialize`` meanwhile).
    """

    #: Longest a request waits for a deferred load to finish (seconds).
    READY_TIMEOUT = 300.0

    def __init__(self, directory: str | Path, *, abstention: Abstention | None = None, index: Any = None,
                 mmap: bool = False, defer: bool = False) -> None:
        self.directory = Path(directory).expanduser()
        self._mmap = mmap
        self._initial_rule = abstention
        self._lock = threading.Lock()  # around the shared encoder
        self._ready = threading.Event()
        self._load_error: BaseException | None = None
        self._catalog: Catalog | None = None
        self._thread: threading.Thread | None = None
        if not defer:
            self._catalog = self._load(index)
            self._ready.set()

    def _load(self, index: Any = None) -> Catalog:
        from skillsight_fast.index import SkillIndex

        if index is None:
            index = SkillIndex.load(self.directory, mmap=self._mmap)
        return Catalog.of(index, self._initial_rule, self.directory)

    def start(self, *, warm: bool = True) -> threading.Thread:
        """Load (if deferred) and warm up in a daemon thread; requests wait until it is loaded."""
        def run() -> None:
            try:
                if self._catalog is None:
                    self._catalog = self._load()
                self._ready.set()
                if warm:
                    self.warm()
            except BaseException as exc:  # noqa: BLE001 - reported to every request instead
                logger.exception("loading the index %s failed", self.directory)
                self._load_error = exc
                self._ready.set()

        self._thread = threading.Thread(target=run, name="skillsight-warmup", daemon=True)
        self._thread.start()
        return self._thread

    def catalog(self) -> Catalog:
        """The current version (waits for a deferred load)."""
        if not self._ready.wait(self.READY_TIMEOUT):
            raise SkillsightError(f"the index {self.directory} is still loading; try again")
        if self._catalog is None:
            raise SkillsightError(f"the index {self.directory} could not be loaded: {self._load_error}")
        return self._catalog

    def swap(self, catalog: Catalog) -> None:
        """Serve ``catalog`` from the next request on (one reference assignment: atomic)."""
        self._catalog = catalog
        logger.info("serving version %d of %s: %d skills", catalog.version, self.directory, len(catalog.index))

    @property
    def index(self) -> Any:
        """The index of the current version."""
        return self.catalog().index

    @property
    def abstention(self) -> Abstention | None:
        """The abstention rule of the current version."""
        return self.catalog().abstention

    @abstention.setter
    def abstention(self, rule: Abstention | None) -> None:
        self._initial_rule = rule
        self._catalog = self.catalog().with_abstention(rule)

    @property
    def lock(self) -> threading.Lock:
        """The lock held around the shared encoder."""
        return self._lock

    def warm(self) -> None:
        """Compile every kernel and run the encoder once, so the first request is fast."""
        self.index.warmup()
        self.find("warm up the skill search", 1)

    # ------------------------------------------------------------------ search
    def find(self, task: Any, k: Any = 5, *, tags: Any = None, source: Any = None, cut: Any = "task",
             collapse: Any = True) -> dict[str, Any]:
        """Hits for one task, as JSON-able dicts (see the module docstring); each hit carries its
        ``uri`` (``skill://<id>/SKILL.md``), and the answer the catalog ``version`` it came from.

        ``tags``, ``source``, ``cut`` and ``collapse`` are those of
        :func:`~skillsight_fast.find.find_skills` (pinned skills come first in every answer).

        Raises
        ------
        QueryError
            ``task`` is not a non-empty string, ``k`` is not an integer in 1..100, or a filter,
            ``cut`` or ``collapse`` is malformed.
        """
        if not isinstance(task, str):
            raise QueryError("'task' must be a string")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SERVE_K:
            raise QueryError(f"'k' must be an integer from 1 to {MAX_SERVE_K}, got {k!r}")
        if tags is not None and not isinstance(tags, (list, str)):
            raise QueryError("'tags' must be a list of strings")
        if not isinstance(collapse, bool):
            raise QueryError("'collapse' must be true or false")
        cat = self.catalog()
        answer = find_skills(cat.index, [task], k, abstention=cat.abstention, lock=self._lock, tags=tags,
                             source=source, cut=cut, collapse=collapse)[0]
        out = answer.to_dict(digits=6)
        for hit in out["hits"]:
            hit["uri"] = skill_uri(hit["id"])
        out["version"] = cat.version
        return out

    # ------------------------------------------------------------------ skill text and files
    def get_skill(self, skill_id: Any, path: Any = None) -> dict[str, Any]:
        """The SKILL.md text of an indexed skill, or (``path``) a text file inside its folder.

        Only files whose paths are recorded in the index, or files inside the folders of those
        SKILL.md files, are ever read; ``path`` may not leave the folder (see
        :meth:`Catalog.skill_file`).

        Raises
        ------
        UnknownSkillError
            No skill has this id, or its text is not available.
        SkillFileError
            ``path`` is not allowed, not there, or not UTF-8 text.
        """
        cat = self.catalog()
        if path is None or path == SKILL_FILE:
            return cat.skill_text(skill_id)
        data, mime, _ = cat.skill_file(skill_id, path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillFileError(f"{path!r} of skill {skill_id!r} is not UTF-8 text ({mime}); "
                                 f"read the resource {skill_uri(skill_id, path)} instead") from None
        meta = cat.index.skills[cat.row(skill_id)]
        return {"id": meta.id, "name": meta.name, "path": str(Path(meta.path).parent / path),
                "uri": skill_uri(meta.id, path), "source": "file", "mime_type": mime, "text": text}

    def read_uri(self, uri: str) -> tuple[str | bytes, str]:
        """Content and MIME type of a ``skill://`` resource (text for UTF-8 files, else bytes)."""
        cat = self.catalog()
        sid, rel = cat.parse_uri(uri)
        if rel == SKILL_FILE:
            return str(cat.skill_text(sid)["text"]), "text/markdown"
        data, mime, _ = cat.skill_file(sid, rel)
        try:
            return data.decode("utf-8"), mime
        except UnicodeDecodeError:
            return data, mime

    def health(self) -> dict[str, Any]:
        """Status for ``GET /health``."""
        cat = self.catalog()
        return {"status": "ok", "n_skills": len(cat.index), "model": cat.index.model_id,
                "abstention": cat.abstention.to_dict() if cat.abstention is not None else None,
                "version": cat.version}


# ---------------------------------------------------------------------- MCP


def build_mcp_server(service: SkillService) -> Any:
    """An MCP server (official SDK; v2 ``MCPServer`` or v1 ``FastMCP``) with the two tools and the
    skills as resources (``skill://<id>/SKILL.md`` listed, any file of a skill folder readable)."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
        from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    except ImportError:
        try:  # mcp 1.x
            from mcp.server.fastmcp import FastMCP as Server
            from mcp.server.fastmcp.exceptions import ResourceError, ToolError
        except ImportError:
            raise SkillsightError(
                "the MCP server needs the official MCP SDK: pip install 'skillsight-fast[serve]'"
            ) from None
    try:
        from mcp.server.mcpserver.exceptions import ResourceNotFoundError
    except ImportError:  # mcp 1.x
        ResourceNotFoundError = ResourceError  # noqa: N806
    import anyio
    import mcp.types as mcp_types
    from mcp.server.lowlevel.helper_types import ReadResourceContents

    class SkillServer(Server):  # type: ignore[misc,valid-type]
        """The SDK server with the live catalog as its resources."""

        async def list_resources(self) -> list[Any]:
            records = await anyio.to_thread.run_sync(lambda: service.catalog().resources())
            return [mcp_types.Resource.model_validate(r) for r in records]

        async def list_resource_templates(self) -> list[Any]:
            return [mcp_types.ResourceTemplate.model_validate({
                "uriTemplate": "skill://{skill}/{+path}", "name": "skill-file", "mimeType": "text/markdown",
                "description": "A file of an indexed skill's folder: SKILL.md, scripts/..., references/..."})]

        async def read_resource(self, uri: Any, context: Any = None) -> list[Any]:
            try:
                content, mime = await anyio.to_thread.run_sync(service.read_uri, str(uri))
            except UnknownSkillError as exc:
                raise ResourceNotFoundError(str(exc)) from None
            except SkillsightError as exc:
                raise ResourceError(str(exc)) from None
            return [ReadResourceContents(content=content, mime_type=mime)]

    server = SkillServer(
        "skillsight",
        instructions=(
            "Skill search over a local library of agent skills. Call find_skills with the user's task "
            "to get the best-fitting skills (an empty list means no skill fits), then get_skill(id) "
            "to read the chosen skill's SKILL.md before following it; get_skill(id, path) reads a file "
            "the SKILL.md refers to (scripts/..., references/...). Every skill is also the resource "
            "skill://<id>/SKILL.md."
        ),
    )

    @server.tool()
    async def find_skills(task: str, k: int = 5, tags: list[str] | None = None, source: str | None = None,
                          cut: str = "task", collapse: bool = True) -> dict[str, Any]:
        """Find the skills that fit a task, best first.

        Each hit has id, uri (the skill:// resource of its SKILL.md), name, description, path,
        score (fused), dense and lexical score parts, evidence (the task's distinctive words the
        skill contains), tags, pinned (skills the library always returns first) and copies (ids of
        duplicates of this skill folded into it). No hits means that no skill in the library fits
        the task well enough.

        Args:
            task: The task, in natural language.
            k: At most how many skills to return (1 to 100), besides the pinned ones.
            tags: Only skills that carry all of these tags.
            source: Only skills from this folder (or id prefix).
            cut: "task" drops all hits when the best one is below the threshold; "hit" drops each
                hit below it, so fewer than k come back when fewer fit.
            collapse: Fold copies of one skill (same name, near-identical text) into one hit.
        """
        def run() -> dict[str, Any]:
            return service.find(task, k, tags=tags, source=source, cut=cut, collapse=collapse)

        try:
            return await anyio.to_thread.run_sync(run)  # type: ignore[no-any-return]
        except SkillsightError as exc:  # bad input: the agent sees the reason and can correct it
            raise ToolError(str(exc)) from None

    @server.tool()
    async def get_skill(id: str, path: str | None = None) -> str:  # noqa: A002 - the tool's public argument name
        """Return the full SKILL.md text of a skill found by find_skills, or a file in its folder.

        Args:
            id: The skill's id, as returned by find_skills.
            path: Optional file inside the skill's folder, relative to it (e.g. "scripts/extract.py"
                or "references/FORMS.md"); it may not leave the folder.
        """
        try:
            out = await anyio.to_thread.run_sync(service.get_skill, id, path)
            return str(out["text"])
        except SkillsightError as exc:
            raise ToolError(str(exc)) from None

    return server


def run_mcp(service: SkillService) -> None:
    """Serve the MCP tools over stdio until the client closes the connection."""
    from skillsight_fast.stdin_filter import filtered_stdin

    with filtered_stdin():  # a lone surrogate escape would make the SDK drop the request
        build_mcp_server(service).run("stdio")


# ---------------------------------------------------------------------- HTTP


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
