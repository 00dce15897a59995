"""Serving an index to agents: an MCP server over stdio and a small JSON endpoint over HTTP.

Both load the index once and compile the kernels and run the encoder once before the first
request, so every request costs one query encoding plus about a millisecond of search.

Tools (MCP) and routes (HTTP):

* ``find_skills(task, k=5)`` / ``POST /search {"task", "k"}``: the best skills for a task, each with
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

import json
import logging
import threading
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
    def find(self, task: Any, k: Any = 5) -> dict[str, Any]:
        """Hits for one task, as JSON-able dicts (see the module docstring); each hit carries its
        ``uri`` (``skill://<id>/SKILL.md``), and the answer the catalog ``version`` it came from.

        Raises
        ------
        QueryError
            ``task`` is not a non-empty string, or ``k`` is not an integer in 1..100.
        """
        if not isinstance(task, str):
            raise QueryError("'task' must be a string")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SERVE_K:
            raise QueryError(f"'k' must be an integer from 1 to {MAX_SERVE_K}, got {k!r}")
        cat = self.catalog()
        answer = find_skills(cat.index, [task], k, abstention=cat.abstention, lock=self._lock)[0]
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
    async def find_skills(task: str, k: int = 5) -> dict[str, Any]:
        """Find the skills that fit a task, best first.

        Each hit has id, uri (the skill:// resource of its SKILL.md), name, description, path,
        score (fused), dense and lexical score parts and evidence (the task's distinctive words the
        skill contains). No hits means that no skill in the library fits the task well enough.

        Args:
            task: The task, in natural language.
            k: How many skills to return (1 to 100).
        """
        try:
            return await anyio.to_thread.run_sync(service.find, task, k)  # type: ignore[no-any-return]
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
    build_mcp_server(service).run("stdio")


# ---------------------------------------------------------------------- HTTP


class _Handler(BaseHTTPRequestHandler):
    server_version = "skillsight-fast"
    protocol_version = "HTTP/1.1"
    #: Seconds a connection may sit idle or stall mid-request before it is closed (slow clients
    #: would otherwise hold a server thread forever).
    timeout = 30

    @property
    def service(self) -> SkillService:
        return self.server.service  # type: ignore[attr-defined,no-any-return]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        logger.debug("%s " + format, self.address_string(), *args)

    def _send(self, status: int, obj: Any) -> None:
        # "replace": a lone surrogate echoed from the request must not crash the response
        body = json.dumps(obj, ensure_ascii=False).encode("utf-8", "replace")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _error(self, status: HTTPStatus, message: str) -> None:
        self._send(status, {"error": message, "status": int(status)})

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
        try:
            length = int(self.headers.get("Content-Length", ""))
        except ValueError:
            self.close_connection = True
            self._error(HTTPStatus.LENGTH_REQUIRED, "a Content-Length header is required")
            return
        if length < 0 or length > MAX_BODY_BYTES:
            self.close_connection = True
            self._error(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"request body over {MAX_BODY_BYTES} bytes")
            return
        try:
            raw = self.rfile.read(length)
        except OSError:  # the client stalled past `timeout` or hung up mid-body: drop it quietly
            self.close_connection = True
            return
        try:
            payload = json.loads(raw.decode("utf-8"))
        except (ValueError, RecursionError):  # bad UTF-8 or JSON, or nesting too deep to parse
            self._error(HTTPStatus.BAD_REQUEST, "the body must be a JSON object {\"task\": ..., \"k\": ...}")
            return
        if not isinstance(payload, dict):
            self._error(HTTPStatus.BAD_REQUEST, "the body must be a JSON object {\"task\": ..., \"k\": ...}")
            return
        try:
            self._send(HTTPStatus.OK, self.service.find(payload.get("task"), payload.get("k", 5)))
        except QueryError as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except SkillsightError as exc:  # pragma: no cover - model or index failure
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, str(exc))
        except Exception:  # pragma: no cover - a bug: answer 500 and keep serving
            logger.exception("POST /search failed")
            self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error (see the server log)")


class SkillHTTPServer(ThreadingHTTPServer):
    """ThreadingHTTPServer that carries the service; threads are daemons."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], service: SkillService) -> None:
        import socket

        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)
        self.service = service

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        host = f"[{host}]" if ":" in str(host) else host
        return f"http://{host}:{port}"


def make_http_server(service: SkillService, host: str = "127.0.0.1", port: int = 8765) -> SkillHTTPServer:
    """Bind (``port`` 0 picks a free one) without serving yet; call ``serve_forever()``."""
    if host not in LOOPBACK:
        logger.warning("serving on %s: reachable from other machines, and there is no authentication", host)
    try:
        return SkillHTTPServer((host, port), service)
    except OSError as exc:
        raise SkillsightError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
