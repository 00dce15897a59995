"""The service behind every server surface: one live index version, search with abstention,
skill texts and files, resources. The transports (:mod:`skillsight_fast.agents.mcp` over stdio,
:mod:`skillsight_fast.agents.http` over HTTP) translate requests into its calls; they decide nothing.

Both load the index once and compile the kernels and run the encoder once before the first
request, so every request costs one query encoding plus about a millisecond of search.

Tools (MCP) and routes (HTTP):

* ``find_skills(task, k=5, tags, source, cut, collapse)`` / ``POST /search {"task", "k", ...}``: the
  best skills for a task (filters, pins, per-hit cut and duplicate collapse of
  :func:`~skillsight_fast.agents.find.find_skills`), each with
  its name, description, path, score, score parts (cosine qᵀd, dense s⊥, lexical) and the query's
  evidence tokens it contains; hits below the abstention threshold (``--min-cosine``/``--min-score``
  or the index's ``calibration.json``) are dropped, so a task that no skill fits gets an empty list.
* ``get_skill(id, path=None)`` / ``GET /skill/<id>[?path=<file>]``: the SKILL.md text of an indexed
  skill, or a text file inside its folder (``scripts/...``, ``references/...``) by a relative path
  that cannot leave the folder. Only files whose paths are recorded in the index, and files in
  their folders, are ever read; skills indexed from JSONL/datasets are rebuilt from the stored
  body (``texts.jsonl``).
* ``GET /health``: index size, model, threshold and the live index's version (``live_version``;
  ``version`` is the same number, kept for older clients).

MCP resources (Skills-over-MCP draft, SEP-2640): every indexed skill is listed as
``skill://<id>/SKILL.md``, :data:`RESOURCES_PAGE_SIZE` per ``resources/list`` page (MCP cursor
pagination: ``nextCursor`` until the last page); ``skill://<id>/<relative path>`` reads any file
of its folder; each ``find_skills`` hit carries its ``uri``. With ``serve --watch``
(:mod:`skillsight_fast.agents.watch`) the live index behind all of this is replaced atomically when
the skill folders change.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from skillsight_fast.agents.find import find_skills
from skillsight_fast.agents.live import LiveIndex, SkillFileError, skill_uri
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import QueryError, SkillsightError
from skillsight_fast.library.skills import SKILL_FILE

logger = logging.getLogger(__name__)

#: Most hits one request may ask for.
MAX_SERVE_K = 100
#: Largest accepted HTTP request body (bytes).
MAX_BODY_BYTES = 64 * 1024
#: Loopback addresses (anything else is reachable from other machines).
LOOPBACK = ("127.0.0.1", "localhost", "::1")
#: Connections the HTTP server serves at once; more get 503.
DEFAULT_MAX_CONNECTIONS = 64
#: Skills per page of the MCP ``resources/list`` answer (cursor pagination): a 1M-skill library is
#: listed in 2,000 pages of ~100 KB instead of one answer of ~200 MB.
RESOURCES_PAGE_SIZE = 500


class SkillService:
    """The index behind a server: search with abstention, skill texts and files, resources.

    The service holds one :class:`~skillsight_fast.agents.live.LiveIndex` (index + texts + abstention
    rule of one version) and every request reads it once at its start, so :meth:`swap` (called by
    ``serve --watch``) never lets a request mix two versions.

    Parameters
    ----------
    directory : path
        The index folder (also where ``texts.jsonl`` and ``calibration.json`` are read).
    abstention : Abstention, optional
        Hits below its threshold are dropped (see :mod:`skillsight_fast.engine.abstention`); None keeps all.
    index : Searcher, optional
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
        self._live: LiveIndex | None = None
        self._thread: threading.Thread | None = None
        self._swap_listeners: list[Callable[[LiveIndex], None]] = []
        if not defer:
            self._live = self._load(index)
            self._ready.set()

    def _load(self, index: Any = None) -> LiveIndex:
        from skillsight_fast.engine.index import SkillIndex

        if index is None:  # checksums and float checks on a thread: ready sooner (docs/GUARANTEES.md §8)
            index = SkillIndex.load(self.directory, mmap=self._mmap or _scan_reads_few_rows(self.directory),
                                    verify="background")
        return LiveIndex.of(index, self._initial_rule, self.directory)

    def start(self, *, warm: bool = True) -> threading.Thread:
        """Load (if deferred) and warm up in a daemon thread; requests wait until it is loaded."""
        def run() -> None:
            try:
                if self._live is None:
                    self._live = self._load()
                self._ready.set()
                if warm:
                    self.warm()
            except BaseException as exc:
                logger.exception("loading the index %s failed", self.directory)
                self._load_error = exc
                self._ready.set()

        self._thread = threading.Thread(target=run, name="skillsight-warmup", daemon=True)
        self._thread.start()
        return self._thread

    def live(self) -> LiveIndex:
        """The current version (waits for a deferred load)."""
        if not self._ready.wait(self.READY_TIMEOUT):
            raise SkillsightError(f"the index {self.directory} is still loading; try again")
        if self._live is None:
            raise SkillsightError(f"the index {self.directory} could not be loaded: {self._load_error}")
        return self._live

    def swap(self, live: LiveIndex) -> None:
        """Serve ``live`` from the next request on (one reference assignment: atomic)."""
        self._live = live
        logger.info("serving version %d of %s: %d skills", live.version, self.directory, len(live.index))
        for listener in list(self._swap_listeners):
            try:
                listener(live)
            except Exception:  # a listener (an MCP notification) never undoes a swap
                logger.warning("a swap listener failed", exc_info=True)

    def add_swap_listener(self, listener: Callable[[LiveIndex], None]) -> None:
        """Call ``listener(live)`` after each :meth:`swap`, on the swapping thread (the watcher's).

        The MCP server uses it to send ``notifications/resources/list_changed``; a listener that
        raises is logged and the swap stands.
        """
        self._swap_listeners.append(listener)

    @property
    def index(self) -> Any:
        """The index of the current version."""
        return self.live().index

    @property
    def abstention(self) -> Abstention | None:
        """The abstention rule of the current version."""
        return self.live().abstention

    @abstention.setter
    def abstention(self, rule: Abstention | None) -> None:
        self._initial_rule = rule
        self._live = self.live().with_abstention(rule)

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
        ``uri`` (``skill://<id>/SKILL.md``), and the answer the ``version`` of the live index it came from.

        ``tags``, ``source``, ``cut`` and ``collapse`` are those of
        :func:`~skillsight_fast.agents.find.find_skills` (pinned skills come first in every answer).

        Raises
        ------
        QueryError
            ``task`` is not a non-empty string, ``k`` is not an integer in 1..100, or a filter,
            ``cut`` or ``collapse`` is malformed.

        Only the types a transport could get wrong are checked here (JSON gives any type); the
        index checks ``k`` and the text (:meth:`~skillsight_fast.engine.index.SkillIndex.check_k`,
        :func:`~skillsight_fast.engine.result.check_queries`) and
        :func:`~skillsight_fast.agents.find.find_skills` the filters and ``cut``.
        """
        if not isinstance(task, str):  # a list would be taken for a batch of tasks
            raise QueryError("'task' must be a string")
        if tags is not None and not isinstance(tags, (list, str)):
            raise QueryError("'tags' must be a list of strings")
        if not isinstance(collapse, bool):
            raise QueryError("'collapse' must be true or false")
        live = self.live()
        _check_verified(live.index)
        answer = find_skills(live.index, [task], k, abstention=live.abstention, lock=self._lock, tags=tags,
                             source=source, cut=cut, collapse=collapse, max_k=MAX_SERVE_K)[0]
        out = answer.to_dict(digits=6)
        for hit in out["hits"]:
            hit["uri"] = skill_uri(hit["id"])
        out["version"] = live.version
        return out

    # ------------------------------------------------------------------ skill text and files
    def get_skill(self, skill_id: Any, path: Any = None) -> dict[str, Any]:
        """The SKILL.md text of an indexed skill, or (``path``) a text file inside its folder.

        Only files whose paths are recorded in the index, or files inside the folders of those
        SKILL.md files, are ever read; ``path`` may not leave the folder (see
        :meth:`LiveIndex.skill_file`).

        Raises
        ------
        UnknownSkillError
            No skill has this id, or its text is not available.
        SkillFileError
            ``path`` is not allowed, not there, or not UTF-8 text.
        """
        live = self.live()
        if path is None or path == SKILL_FILE:
            return live.skill_text(skill_id)
        data, mime, _ = live.skill_file(skill_id, path)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            raise SkillFileError(f"{path!r} of skill {skill_id!r} is not UTF-8 text ({mime}); "
                                 f"read the resource {skill_uri(skill_id, path)} instead") from None
        meta = live.index.skills[live.row(skill_id)]
        return {"id": meta.id, "name": meta.name, "path": str(Path(meta.path).parent / path),
                "uri": skill_uri(meta.id, path), "source": "file", "mime_type": mime, "text": text}

    def read_uri(self, uri: str) -> tuple[str | bytes, str]:
        """Content and MIME type of a ``skill://`` resource (text for UTF-8 files, else bytes)."""
        live = self.live()
        sid, rel = live.parse_uri(uri)
        if rel == SKILL_FILE:
            return str(live.skill_text(sid)["text"]), "text/markdown"
        data, mime, _ = live.skill_file(sid, rel)
        try:
            return data.decode("utf-8"), mime
        except UnicodeDecodeError:
            return data, mime

    def resources_page(self, cursor: Any = None,
                       limit: int | None = None) -> tuple[list[dict[str, Any]], str | None]:
        """One page of the skill resources (MCP ``resources/list`` with cursor pagination).

        Parameters
        ----------
        cursor : str, optional
            The ``nextCursor`` of the previous page (None: the first page). It is opaque to the client:
            the live version and the row to go on from.
        limit : int, optional
            Skills per page (default :data:`RESOURCES_PAGE_SIZE`).

        Returns
        -------
        records : list of dict
            ``{uri, name, description, mimeType}`` per listed skill (:meth:`LiveIndex.resources`).
        next_cursor : str or None
            None after the last page.

        Raises
        ------
        InvalidCursorError
            The cursor is not one this server gave, or was given for another version of the index
            (the library changed while the client was paging; it lists again from the start, as
            the ``list_changed`` notification it was sent also tells it).
        """
        live = self.live()
        start = 0
        if cursor is not None:
            version, start = _parse_cursor(cursor)
            if version != live.version:
                raise InvalidCursorError(f"the skill list changed since this cursor (version {version}, now "
                                         f"{live.version}): list the resources again from the start")
        records, nxt = live.resources_page(start, limit or RESOURCES_PAGE_SIZE)
        return records, (None if nxt is None else _cursor(live.version, nxt))

    def health(self) -> dict[str, Any]:
        """Status for ``GET /health``."""
        live = self.live()
        check = live.index.state.verification
        out = {"status": "ok" if check is None or check.status != "failed" else "failed",
               "n_skills": len(live.index), "model": live.index.state.model.id,
               "abstention": live.abstention.to_dict() if live.abstention is not None else None,
               "live_version": live.version, "version": live.version}
        if check is not None:  # a load that deferred checks (docs/GUARANTEES.md §8): their state
            out["verification"] = check.to_dict()
        return out


class InvalidCursorError(QueryError):
    """A ``resources/list`` cursor this server did not give, or gave for another version."""


def _cursor(version: int, row: int) -> str:
    """The opaque ``nextCursor``: the live version and the next row, URL-safe base64."""
    import base64

    return base64.urlsafe_b64encode(f"{version}:{row}".encode()).decode("ascii")


def _parse_cursor(cursor: Any) -> tuple[int, int]:
    import base64
    import binascii

    try:
        if not isinstance(cursor, str) or len(cursor) > 64:
            raise ValueError
        version, row = base64.urlsafe_b64decode(cursor.encode("ascii")).decode("ascii").split(":")
        out = int(version), int(row)
        if min(out) < 0:
            raise ValueError
        return out
    except (ValueError, UnicodeError, binascii.Error):
        raise InvalidCursorError("invalid cursor: pass the nextCursor of the previous resources/list "
                                 "page") from None


def _scan_reads_few_rows(directory: Path) -> bool:
    """An int8 or IVF index is always memory-mapped: a search streams the int8 codes (or visits a few
    cells) and reads float32 rows only to re-score its survivors, so only those pages need be resident."""
    from skillsight_fast.engine.io import read_manifest

    try:
        return read_manifest(directory).get("scan", {}).get("kind") in ("int8", "ivf")
    except SkillsightError:
        return False  # the load reports it


def _check_verified(index: Any) -> None:
    """Refuse to answer from an index whose deferred verification failed (IndexFormatError)."""
    check = index.state.verification
    if check is not None:
        check.check()


