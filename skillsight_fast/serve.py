"""Serving an index to agents: an MCP server over stdio and a small JSON endpoint over HTTP.

Both load the index once and compile the kernels and run the encoder once before the first
request, so every request costs one query encoding plus about a millisecond of search.

Tools (MCP) and routes (HTTP):

* ``find_skills(task, k=5)`` / ``POST /search {"task", "k"}``: the best skills for a task, each with
  its name, description, path, score, score parts (cosine qᵀd, dense s⊥, lexical) and the query's
  evidence tokens it contains; hits below the abstention threshold (``--min-cosine``/``--min-score``
  or the index's ``calibration.json``) are dropped, so a task that no skill fits gets an empty list.
* ``get_skill(id)`` / ``GET /skill/<id>``: the SKILL.md text of an indexed skill. Only files whose
  paths are recorded in the index are ever read; skills indexed from JSONL/datasets are rebuilt
  from the stored body (``texts.jsonl``).
* ``GET /health``: index size, model and threshold.
"""

from __future__ import annotations

import json
import logging
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from skillsight_fast.calibrate import Abstention
from skillsight_fast.find import find_skills
from skillsight_fast.errors import QueryError, SkillsightError
from skillsight_fast.skills import MAX_SKILL_BYTES, SKILL_FILE

logger = logging.getLogger(__name__)

#: Most hits one request may ask for.
MAX_SERVE_K = 100
#: Largest accepted HTTP request body (bytes).
MAX_BODY_BYTES = 64 * 1024
#: Loopback addresses (anything else is reachable from other machines).
LOOPBACK = ("127.0.0.1", "localhost", "::1")


class UnknownSkillError(QueryError):
    """get_skill was asked for an id that is not in the index."""


class SkillService:
    """The index behind a server: search with abstention, and skill texts by id.

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
    """

    def __init__(self, directory: str | Path, *, abstention: Abstention | None = None, index: Any = None,
                 mmap: bool = False) -> None:
        from skillsight_fast.index import SkillIndex

        self.directory = Path(directory).expanduser()
        self.index = index if index is not None else SkillIndex.load(self.directory, mmap=mmap)
        self.abstention = abstention
        self._row_of = {m.id: i for i, m in enumerate(self.index.skills)}
        self._lock = threading.Lock()
        # read with the index, pinned to the texts.jsonl digest it was loaded with: a later
        # `update` replacing the folder can never make the server mix two versions
        from skillsight_fast.io import read_bodies

        self._bodies: list[str] | None = (
            self.index.bodies if self.index.bodies is not None
            else read_bodies(self.directory, getattr(self.index, "texts_sha256", None)))
        self._bodies_read = True

    def warm(self) -> None:
        """Compile every kernel and run the encoder once, so the first request is fast."""
        self.index.warmup()
        self.find("warm up the skill search", 1)

    # ------------------------------------------------------------------ search
    def find(self, task: Any, k: Any = 5) -> dict[str, Any]:
        """Hits for one task, as JSON-able dicts (see the module docstring).

        Raises
        ------
        QueryError
            ``task`` is not a non-empty string, or ``k`` is not an integer in 1..100.
        """
        if not isinstance(task, str):
            raise QueryError("'task' must be a string")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_SERVE_K:
            raise QueryError(f"'k' must be an integer from 1 to {MAX_SERVE_K}, got {k!r}")
        answer = find_skills(self.index, [task], k, abstention=self.abstention, lock=self._lock)[0]
        return answer.to_dict(digits=6)

    def _rule(self) -> dict[str, Any] | None:
        return self.abstention.to_dict() if self.abstention is not None else None

    # ------------------------------------------------------------------ skill text
    def _stored_body(self, row: int) -> str | None:
        if not self._bodies_read:
            from skillsight_fast.io import read_bodies

            self._bodies = read_bodies(self.directory)
            self._bodies_read = True
        return self._bodies[row] if self._bodies is not None else None

    def get_skill(self, skill_id: Any) -> dict[str, Any]:
        """The SKILL.md text of an indexed skill.

        The file at the path recorded in the index is read (never a path from the request); when
        there is none (JSONL/dataset skills) or it is gone, the text is rebuilt from the stored
        name, description and body.

        Raises
        ------
        UnknownSkillError
            No skill has this id, or its text is not available.
        """
        if not isinstance(skill_id, str) or skill_id not in self._row_of:
            raise UnknownSkillError(f"unknown skill id {skill_id!r}")
        row = self._row_of[skill_id]
        meta = self.index.skills[row]
        text = _read_skill_file(meta.path, meta.sha256, getattr(self.index, "roots", [])) if meta.path else None
        source = "file"
        if text is None:
            body = self._stored_body(row)
            if body is None:
                raise UnknownSkillError(f"the text of skill {skill_id!r} is not available "
                                        "(no readable SKILL.md and the index stores no texts)")
            text = _front_matter(meta.name, meta.description) + body
            source = "index"
        return {"id": meta.id, "name": meta.name, "path": meta.path, "source": source, "text": text}

    def health(self) -> dict[str, Any]:
        """Status for ``GET /health``."""
        return {"status": "ok", "n_skills": len(self.index), "model": self.index.model_id,
                "abstention": self._rule()}


def _read_skill_file(path: str, sha256: str, roots: list[str]) -> str | None:
    """The SKILL.md at ``path`` if it is still under an indexed root and still holds the indexed text.

    Anything else (a relative path from an old index, a JSONL record pointing elsewhere, a file
    replaced by a symlink to a private file, an edited file) gives None: the caller serves the
    indexed text instead and says so (``source: "index"``).
    """
    import os

    from skillsight_fast.errors import SkillFormatError
    from skillsight_fast.skills import read_skill_file

    p = Path(path)
    if p.name != SKILL_FILE or not p.is_absolute():
        return None
    real = os.path.realpath(p)
    # the roots the library was read from, when recorded (`skillsight index` records them; an index
    # built through the API may not: then the content check below is what protects)
    if roots and not any(real.startswith(os.path.join(os.path.realpath(r), "")) for r in roots):
        return None
    try:
        skill = read_skill_file(Path(real), "served")
    except SkillFormatError:
        return None
    if skill.sha256 != sha256:
        return None
    try:
        return Path(real).read_text(encoding="utf-8") if len(skill.body) < MAX_SKILL_BYTES else None
    except (OSError, UnicodeDecodeError):
        return None


def _front_matter(name: str, description: str) -> str:
    import yaml

    meta = yaml.safe_dump({"name": name, "description": description}, sort_keys=False,
                          allow_unicode=True, width=100_000)
    return f"---\n{meta}---\n"


# ---------------------------------------------------------------------- MCP


def build_mcp_server(service: SkillService) -> Any:
    """An MCP server (official SDK; v2 ``MCPServer`` or v1 ``FastMCP``) with the two tools."""
    try:
        from mcp.server.mcpserver import MCPServer as Server
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError:
        try:  # mcp 1.x
            from mcp.server.fastmcp import FastMCP as Server
            from mcp.server.fastmcp.exceptions import ToolError
        except ImportError:
            raise SkillsightError(
                "the MCP server needs the official MCP SDK: pip install 'skillsight-fast[serve]'"
            ) from None

    server = Server(
        "skillsight",
        instructions=(
            "Skill search over a local library of agent skills. Call find_skills with the user's task "
            "to get the best-fitting skills (an empty list means no skill fits), then get_skill(id) "
            "to read the chosen skill's SKILL.md before following it."
        ),
    )

    @server.tool()
    def find_skills(task: str, k: int = 5) -> dict[str, Any]:
        """Find the skills that fit a task, best first.

        Each hit has id, name, description, path, score (fused), dense and lexical score parts and
        evidence (the task's distinctive words the skill contains). No hits means that no skill
        in the library fits the task well enough.

        Args:
            task: The task, in natural language.
            k: How many skills to return (1 to 100).
        """
        try:
            return service.find(task, k)
        except SkillsightError as exc:  # bad input: the agent sees the reason and can correct it
            raise ToolError(str(exc)) from None

    @server.tool()
    def get_skill(id: str) -> str:  # noqa: A002 - the tool's public argument name
        """Return the full SKILL.md text of a skill found by find_skills.

        Args:
            id: The skill's id, as returned by find_skills.
        """
        try:
            return str(service.get_skill(id)["text"])
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
            try:
                self._send(HTTPStatus.OK, self.service.get_skill(unquote(path[len("/skill/"):])))
            except UnknownSkillError as exc:
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
