"""A live index: watch the skill folders, update the index incrementally, swap it in atomically.

``skillsight serve --watch`` runs a :class:`LiveIndexWatcher` beside the server. When files change in
the watched sources (the ``watchfiles`` package, debounced), it re-reads the library, brings the
index folder in line with :func:`skillsight_fast.engine.update.update_index` (only added or changed skills
are encoded, with the server's own encoder), loads the new version with its texts and calibration
as one :class:`~skillsight_fast.agents.live.LiveIndex` and hands it to
:meth:`SkillService.swap <skillsight_fast.agents.service.SkillService.swap>`. Requests keep being answered by
the previous version until the swap, and each request sees exactly one version. A sharded index
(``serve --ray --watch``) is brought to the new version by
:meth:`ShardedIndex.next_version <skillsight_fast.cluster.index.ShardedIndex.next_version>`: the same
update, applied shard by shard. Served from shard folders (``IDX.shards``), the update is
:func:`skillsight_fast.cluster.update.update_layout`, as ``skillsight update`` runs it: while the
background basis holds, only the folders whose rows changed are rewritten and only their shards
re-open them (:attr:`LiveIndexWatcher.last_shards` says which).

The watched paths are the configured ones, not the folders they named at start: after each round
the watcher checks that every source is still the same folder (device, inode and real path), so a
library root replaced as a whole (``rm -rf lib && cp -r new lib``) or a symlinked root swapped
atomically (the usual deploy layout) is refreshed and watched anew, and said so in the log. A
source that is gone is logged, named in :meth:`LiveIndexWatcher.status` (``GET /health`` says
``"status": "degraded"`` with a ``watch`` record) and polled until it is back; the last version
is served meanwhile.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from skillsight_fast.errors import SkillsightError, install_hint

if TYPE_CHECKING:
    from skillsight_fast.agents.service import SkillService
    from skillsight_fast.engine.abstention import Abstention
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.engine.update import UpdateReport

logger = logging.getLogger(__name__)

#: Milliseconds a round of the watch waits before yielding "no change": the first round's refresh runs
#: once the watch is live, after at most this long (the later empty rounds cost nothing).
FIRST_ROUND_MS = 500
#: Seconds between two checks for a watched source that is gone.
GONE_POLL_S = 0.5


def _identity(path: Path) -> tuple[str, int, int] | None:
    """(real path, device, inode) of a watched source, or None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return os.path.realpath(path), st.st_dev, st.st_ino


def sources_of(index: SkillIndex) -> list[Path]:
    """The folder trees an index was built from, read back from its skills' ids and paths.

    A skill read from ``<root>/<id>/SKILL.md`` gives ``<root>``; ids prefixed with a root label
    (``label:id``, see :func:`skillsight_fast.library.skills.prefix_colliding_tree_ids`) are handled. A
    library indexed as one skill folder (``skillsight index lib/pdf``) reads back as its parent
    ``lib``, which would add pdf's siblings: give the sources explicitly for such a library.

    Raises
    ------
    SkillsightError
        Some skill was not read from a folder tree (JSONL/dataset records), so the sources
        cannot be recovered: pass them to ``--watch`` explicitly.
    """
    roots: dict[str, Path] = {}
    for meta in index.skills:
        p = Path(meta.path) if meta.path else None
        if p is None or p.name != "SKILL.md":
            raise SkillsightError(f"skill {meta.id!r} was not read from a SKILL.md folder tree, so the indexed "
                                  "folders cannot be recovered: pass the sources, --watch SOURCE ...")
        folder = p.parent
        rel = meta.id.rsplit(":", 1)[-1] if ":" in meta.id else meta.id
        parts = Path(rel).parts
        if tuple(folder.parts[-len(parts):]) != parts:
            raise SkillsightError(f"cannot tell which folder skill {meta.id!r} ({meta.path}) was indexed from: "
                                  "pass the sources, --watch SOURCE ...")
        root = Path(*folder.parts[: len(folder.parts) - len(parts)])
        roots.setdefault(str(root.absolute()), root.absolute())
    return sorted(roots.values())


class _LockedEncoder:
    """The server's encoder, used under the server's encoder lock (requests share it)."""

    def __init__(self, encoder: Any, lock: threading.Lock) -> None:
        self._encoder = encoder
        self._lock = lock

    def __getattr__(self, name: str) -> Any:
        return getattr(self._encoder, name)

    def encode(self, texts: Sequence[str]) -> Any:
        with self._lock:
            return self._encoder.encode(texts)


class LiveIndexWatcher:
    """Keep a :class:`SkillService`'s index in line with its skill folders.

    Parameters
    ----------
    service : SkillService
        The server whose live index is swapped.
    sources : sequence of path
        The full library, as given to ``skillsight index`` (folder trees, JSONL files, datasets).
    rule : callable
        ``rule(index_folder) -> Abstention | None`` for each new version (re-reads the
        calibration carried over by the update unless a threshold was given explicitly).
    debounce_ms : int
        Changes that arrive within this many milliseconds are handled as one update.
    force_polling : bool, optional
        Passed to ``watchfiles`` (for file systems without change notifications).
    """

    def __init__(self, service: SkillService, sources: Sequence[str | os.PathLike[str]], *,
                 rule: Callable[[Path], Abstention | None], debounce_ms: int = 200,
                 force_polling: bool | None = None) -> None:
        try:
            import watchfiles  # noqa: F401
        except ImportError:
            raise SkillsightError("serve --watch needs the watchfiles package: "
                                  + install_hint("watch")) from None
        if not sources:
            raise SkillsightError("nothing to watch: give the library's sources")
        self.service = service
        self.sources = [Path(s).expanduser().absolute() for s in sources]
        for s in self.sources:
            if not s.exists():
                raise SkillsightError(f"cannot watch {s}: no such file or folder")
        self.rule = rule
        self.debounce_ms = debounce_ms
        self.force_polling = force_polling
        self.updates = 0
        self.last_report: UpdateReport | None = None
        #: the last update of shard folders (cluster.update.update_layout: rewritten, kept, drift, ...)
        self.last_shards: dict[str, Any] | None = None
        self.last_error: str | None = None
        self._encoder: Any = None
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread: threading.Thread | None = None
        self._index_dir = service.directory.expanduser().absolute()
        #: The skipped files of the last refresh (each is logged once, when it first appears).
        self._problems: set[str] = set()
        #: Sources that are gone (the last version is served until they are back).
        self.missing: list[Path] = []
        #: Times a source was found replaced (a new folder or a swapped symlink) and watched anew.
        self.root_swaps = 0
        self._watch_error = ""
        service.watch_status = self.status  # read by GET /health

    def status(self) -> dict[str, Any]:
        """``{sources, updates, missing, root_swaps, last_error, ok}`` for ``GET /health``: ``ok`` is
        False while a source is gone or the last refresh failed."""
        return {"sources": [str(s) for s in self.sources], "updates": self.updates,
                "missing": [str(s) for s in self.missing], "root_swaps": self.root_swaps,
                "last_error": self.last_error, "ok": not self.missing and self.last_error is None}

    # ------------------------------------------------------------------ one update
    def refresh(self) -> UpdateReport | None:
        """Re-read the library now; update, load and swap in a new version if anything changed.

        Returns the update's report, or None when nothing changed. Raises what loading the
        library or updating the index raises (the watch loop logs it and keeps serving).
        """
        from skillsight_fast.agents.live import LiveIndex
        from skillsight_fast.engine.index import SkillIndex
        from skillsight_fast.engine.update import update_index
        from skillsight_fast.library.skills import load_skills

        current = self.service.live()  # its texts were read with it, before the folder is rewritten
        loaded = load_skills(self.sources)
        problems = {str(problem) for problem in loaded.problems}
        for problem in sorted(problems - self._problems):  # only what changed, not every refresh
            logger.warning("watch: skipped %s", problem)
        for problem in sorted(self._problems - problems):
            logger.info("watch: no longer skipped: %s", problem)
        self._problems = problems
        skills = loaded.skills
        # the document encoder, loaded only when a skill needs encoding (a served index that only
        # searched has its task encoder loaded, not this one), then kept for the next refresh
        encoder = self._encoder or current.index.encoders.attached

        def wrap(enc: Any) -> _LockedEncoder:
            self._encoder = enc
            return _LockedEncoder(enc, self.service.lock)

        layout = getattr(current.index, "layout", None)
        if layout is not None:  # shard folders: only those whose rows changed are rewritten
            from skillsight_fast.cluster.update import update_layout
            from skillsight_fast.engine.update import UpdateReport

            shards = update_layout(self.service.directory, layout, skills, encoder=encoder, wrap_encoder=wrap,
                                   roots=loaded.roots)
            report = UpdateReport(**shards.pop("update"))
            self.last_shards = shards
        else:
            report = update_index(self.service.directory, skills, encoder=encoder, wrap_encoder=wrap,
                                  roots=loaded.roots)
        encoder = self._encoder or encoder
        same = [(m.id, m.path) for m in current.index.skills] == [(s.id, s.path) for s in skills]
        if same and not (report.added or report.changed or report.removed):
            return None
        # a sharded index (skillsight_fast.cluster) hands the new version to its shards, each taking
        # only what changed for it; a single index loads the folder
        next_version = getattr(type(current.index), "next_version", None)
        if next_version is not None:
            index = next_version(current.index, self.service.directory, encoder=encoder)
        else:
            index = SkillIndex.load(self.service.directory, encoder=encoder)
        new = LiveIndex.of(index, self.rule(self.service.directory), self.service.directory,
                         version=current.version + 1)
        self.service.swap(new)
        self.updates += 1
        self.last_report = report
        logger.info("watch: version %d, %d added, %d changed, %d removed (%d encoded) in %.3f s", new.version,
                    len(report.added), len(report.changed), len(report.removed), report.encoded, report.seconds)
        return report

    # ------------------------------------------------------------------ the loop
    def _keep(self, change: Any, path: str) -> bool:
        p = Path(path)
        name = self._index_dir.name
        if p == self._index_dir or self._index_dir in p.parents:
            return False  # the index folder itself (it may live inside a watched tree)
        for part in (p, *p.parents):
            if part.parent == self._index_dir.parent and part.name.startswith(f".{name}"):
                return False  # the index's temporary and swap folders
        return True

    def _run(self) -> None:
        import watchfiles

        base = watchfiles.DefaultFilter()

        def keep(change: Any, path: str) -> bool:
            return base(change, path) and self._keep(change, path)

        first, pending = True, False
        try:
            while not self._stop.is_set():
                ids = [_identity(s) for s in self.sources]
                missing = [s for s, i in zip(self.sources, ids) if i is None]
                if missing:
                    if missing != self.missing:
                        logger.warning("watch: %s gone; serving the last version until it is back",
                                       ", ".join(map(str, missing)))
                    self.missing = missing
                    self._started.set()
                    self._stop.wait(GONE_POLL_S)
                    continue
                if self.missing:
                    logger.warning("watch: %s back; refreshing", ", ".join(map(str, self.missing)))
                    self.missing, pending = [], True
                # the folders the configured paths name now (a symlinked root: its current target);
                # yield_on_timeout: the first (empty) round comes once the watch is live, and its
                # refresh catches what changed while nothing was watching
                watched = {i[0] for i in ids if i is not None}

                def watched_gone(changes: Any, watched: set[str] = watched) -> set[str]:
                    # a watched folder deleted (a copy put in its place may reuse its inode number)
                    return {p for c, p in changes if p in watched and c == watchfiles.Change.deleted}

                try:
                    for changes in watchfiles.watch(*watched, watch_filter=keep,
                                                    debounce=self.debounce_ms, step=20, stop_event=self._stop,
                                                    raise_interrupt=False, force_polling=self.force_polling,
                                                    yield_on_timeout=True, rust_timeout=FIRST_ROUND_MS):
                        if self._stop.is_set():
                            break
                        now = [_identity(s) for s in self.sources]
                        deleted = watched_gone(changes or ())
                        replaced = now != ids or bool(deleted)
                        if (changes or first or pending) and not replaced:
                            pending = False
                            self._safe_refresh()
                        if first:
                            first = False
                            self._started.set()
                        if replaced:  # a root replaced, swapped or gone: watch what the paths name now
                            if None not in now:
                                self.root_swaps += 1
                                logger.warning("watch: %s replaced; watching the new folder", ", ".join(
                                    str(s) for s, old, new in zip(self.sources, ids, now)
                                    if old != new or (old is not None and old[0] in deleted)))
                            # refreshed once the watch of what the path names now is live: nothing
                            # written between this round and that watch is missed
                            pending = True
                            break
                except (OSError, RuntimeError) as exc:  # a root removed while the watch starts: retry
                    if str(exc) != self._watch_error:
                        logger.warning("watch: cannot watch %s (%s); retrying", ", ".join(watched), exc)
                    self._watch_error, pending = str(exc), True
                    self._started.set()
                    self._stop.wait(GONE_POLL_S)
        except Exception:  # pragma: no cover - the watcher dies, the server keeps serving
            logger.exception("watch: stopped watching %s", ", ".join(map(str, self.sources)))
            self.last_error = "the watcher stopped (see the server log)"
        finally:
            self._started.set()

    def _safe_refresh(self) -> None:
        t0 = time.perf_counter()
        try:
            self.refresh()
            self.last_error = None
        except SkillsightError as exc:
            self.last_error = str(exc)
            logger.warning("watch: keeping the current version: %s", exc)
        except Exception as exc:  # a bug or an I/O error: log it, keep serving the current version
            self.last_error = str(exc)
            logger.exception("watch: update failed after %.2f s; keeping the current version",
                             time.perf_counter() - t0)

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> LiveIndexWatcher:
        """Start watching in a daemon thread (after one initial refresh when ``wait``)."""
        self._thread = threading.Thread(target=self._run, name="skillsight-watch", daemon=True)
        self._thread.start()
        if wait:
            self._started.wait(timeout)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop watching and wait for the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
