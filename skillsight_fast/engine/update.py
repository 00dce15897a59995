"""Incremental updates: re-encode only added or changed skills, then recompute the statistics.

Every corpus statistic of SkillSight (df, IDF, Otsu's threshold, the generic tokens, the background
subspace, the projected vectors, the LEC weights) depends on the whole corpus, so it is recomputed;
the encoder, by far the slowest step, and the lexical analysis are skipped for skills whose content
is unchanged (their stored embedding and lexicon row are reused, :meth:`Lexicon.reuse_rows`), and
an IVF scan keeps its trained cells while the library stays within a factor 2 of the size they
were trained at. What is left is linear array work over the corpus (the statistics refresh).
A skill is unchanged when the SHA-256 of its indexed text (name, description, body) equals one
stored in the index; its stored raw embedding is reused (even if its id or path changed).
The result equals a full rebuild with the same encoder.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.engine.abstention import CALIBRATION, calibration_bytes, read_calibration
from skillsight_fast.engine.columns import record_fields
from skillsight_fast.library.skills import Skill, namedesc_text

logger = logging.getLogger(__name__)


@dataclass
class UpdateReport:
    """What an update changed."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    unchanged: int = 0
    encoded: int = 0
    n_skills: int = 0
    seconds: float = 0.0
    #: seconds per phase: load, compare, encode, rebuild (statistics and scan), save
    phases: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"n_skills": self.n_skills, "added": self.added, "changed": self.changed,
                "removed": self.removed, "unchanged": self.unchanged, "encoded": self.encoded,
                "seconds": self.seconds, "phases": self.phases}


def _lock_current_folder(path: Path) -> int | None:
    """An open descriptor of the folder ``path`` names now, holding its exclusive ``flock``; None
    when there is no folder or no flock."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            held, now = os.fstat(fd), os.stat(path)
        except OSError:
            os.close(fd)
            continue  # the folder went away while we waited: lock the one there now
        except BaseException:
            os.close(fd)
            raise
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            return fd
        os.close(fd)  # a save swapped a new version in while we waited: lock that one


@contextlib.contextmanager
def index_write_lock(directory: str | os.PathLike[str]) -> Iterator[None]:
    """Hold the index's write lock from load to save: every load-modify-save of one index (``update``,
    ``rescan``, ``serve --watch``) takes it, so none saves over another's change unseen.

    The lock is an advisory ``flock`` on the index folder itself (no file is created), re-taken on
    the new folder when a save swapped one in while this waited; a save's own lock on the parent
    folder is separate. No folder (nothing to lock yet) or no ``flock``: runs unlocked.
    """
    fd = _lock_current_folder(Path(directory).expanduser())
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)  # releases the lock


def update_index(directory: str | os.PathLike[str], skills: Sequence[Skill], *, encoder: Any = None,
                 dry_run: bool = False, wrap_encoder: Callable[[Any], Any] | None = None,
                 roots: Sequence[str] | None = None, keep_background: bool = False,
                 recompute: bool = False) -> UpdateReport:
    """Bring the index in ``directory`` in line with ``skills`` and save it atomically.

    Parameters
    ----------
    directory : path
        An index folder written by :meth:`SkillIndex.save`.
    skills : sequence of Skill
        The full library as it is now (what a rebuild would index, in the same order).
    encoder : Encoder, optional
        Defaults to the index's own model (checked against the manifest).
    dry_run : bool
        Only report what would change.
    roots : sequence of str, optional
        The library's folders (``LoadReport.roots``); default: the ones the index records.
    wrap_encoder : callable, optional
        Applied to the encoder just before the changed skills are encoded (e.g. a progress bar),
        so the caller need not load the index or the model itself.
    keep_background : bool
        Keep the index's background basis and build decisions instead of estimating them from the
        updated library (every other statistic is recomputed): an unchanged skill's background-removed
        row stays what it was, so a sharded layout rewrites only the shards whose rows changed
        (:func:`skillsight_fast.cluster.update.update_layout`, which decides when the basis must move).
    recompute : bool
        Rebuild the statistics (and save) even when no skill changed: what a kept basis is replaced by
        once it no longer holds.

    Returns
    -------
    UpdateReport

    The whole update holds :func:`index_write_lock`, so a ``rescan`` (or another update) that starts
    meanwhile waits and then applies to this update's result.
    """
    with index_write_lock(directory):
        return _update_locked(directory, skills, encoder=encoder, dry_run=dry_run, wrap_encoder=wrap_encoder,
                              roots=roots, keep_background=keep_background, recompute=recompute)


def _update_locked(directory: str | os.PathLike[str], skills: Sequence[Skill], *, encoder: Any,
                   dry_run: bool, wrap_encoder: Callable[[Any], Any] | None,
                   roots: Sequence[str] | None, keep_background: bool = False,
                   recompute: bool = False) -> UpdateReport:
    from skillsight_fast.engine.index import SkillIndex

    t0 = time.perf_counter()
    clock = [t0]

    def phase(name: str) -> None:
        now = time.perf_counter()
        report.phases[name] = round(now - clock[0], 3)
        clock[0] = now

    old = SkillIndex.load(directory)
    by_id = {m.id: m for m in old.skills}
    row_of_hash: dict[str, int] = {}
    for row, meta in enumerate(old.skills):
        row_of_hash.setdefault(meta.sha256, row)
    report = UpdateReport(n_skills=len(skills))
    phase("load")
    new_ids = {s.id for s in skills}
    report.removed = [m.id for m in old.skills if m.id not in new_ids]
    todo: list[int] = []
    hashes = [s.sha256 for s in skills]  # a property that hashes the text: computed once
    for i, s in enumerate(skills):
        if hashes[i] in row_of_hash:
            report.unchanged += 1
            continue
        todo.append(i)
        (report.changed if s.id in by_id else report.added).append(s.id)
    # A skill whose metadata changed but whose text did not (e.g. a moved file) needs no encoding,
    # but the index is still rewritten so its path is current.
    moved = any(by_id.get(s.id) is None or by_id[s.id].path != s.path for s in skills)
    nothing = not recompute and not todo and not report.removed and not moved and [m.id for m in old.skills] == [
        s.id for s in skills]
    phase("compare")
    if dry_run or nothing:
        report.seconds = round(time.perf_counter() - t0, 3)
        return report
    if encoder is not None:
        old.encoder = encoder  # checked against the index's model
    rows = np.fromiter((row_of_hash.get(h, -1) for h in hashes), np.int64, len(skills))
    emb = np.empty((len(skills), old.stats.dim), np.float32)
    reused = rows >= 0
    emb[reused] = old.dense.embeddings[rows[reused]]
    with_namedesc = old.dense.namedesc is not None  # the index scores name + description vectors too
    if todo:
        enc = old.encoder if wrap_encoder is None else wrap_encoder(old.encoder)
        texts = [skills[i].text for i in todo]
        if with_namedesc:  # one encoder pass over both kinds of text
            texts += [namedesc_text(skills[i].name, skills[i].description) for i in todo]
        vecs = enc.encode(texts)
        emb[todo] = vecs[: len(todo)]
    # the name + description vectors, when the index scores them: reused like the text vectors
    cfg = old.config.replace(document_vector=old.decisions.document_vector)  # keep what the index does
    namedesc = None
    if with_namedesc:
        namedesc = np.empty_like(emb)
        namedesc[reused] = old.dense.namedesc[rows[reused]]
        if todo:
            namedesc[todo] = vecs[len(todo) :]
    report.encoded = len(todo)
    phase("encode")
    lexicon = None
    if old.lexical.lexicon.has_tf:  # analyse only the new texts; a lexicon without tf (token sets) is rebuilt
        lexicon = old.lexical.lexicon.reuse_rows(rows, [skills[i].text for i in todo], cfg.analyzer.min_token_len,
                                         cfg.analyzer.max_token_len)
    # the contextual tier keeps its token table (a rebuild refreshes it: it needs every text's token states)
    table = old.dense.query_table
    query_table = None if table is None else (old.dense.query_table_ids, table)
    # the old index's encoder (loaded if need be): the new version derives its abstention rule with it
    new = SkillIndex.from_embeddings(skills, emb, cfg, model_id=old.state.model.id,
                                     model_checksum=old.state.model.checksum,
                                     encoder=encoder if encoder is not None else old.encoder, lexicon=lexicon,
                                     previous_scan=old.scan, namedesc=namedesc, query_table=query_table,
                                     flags=_known_flags(old, skills, rows),
                                     **({"basis": (np.asarray(old.dense.basis, np.float32),
                                                   np.asarray(old.dense.singular_values, np.float32)),
                                         "decisions": old.decisions} if keep_background else {}))
    phase("rebuild")
    new.state.roots = list(roots) if roots is not None else list(old.state.roots)
    kept = set(new.ids)
    new.pins = [p for p in old.pins if p in kept]  # a pinned skill that is gone is unpinned
    calibration = read_calibration(directory)
    extra = {}
    if calibration is not None:  # keep it, noting that the corpus changed since; same swap as the index
        calibration["updated_after_calibration"] = True
        extra[CALIBRATION] = calibration_bytes(calibration)
    new.save(Path(directory), extra_files=extra)
    phase("save")
    report.seconds = round(time.perf_counter() - t0, 3)
    logger.info("update: %d added, %d changed, %d removed, %d encoded", len(report.added),
                len(report.changed), len(report.removed), report.encoded)
    return report


def _known_flags(old: Any, skills: Sequence[Any], rows: np.ndarray) -> list[list[str] | None] | None:
    """The prompt-injection screen's findings the old index has for the skills whose screened text (name,
    description, body) is the same as a row's there, None for the others (screened by the rebuild); None
    when the old index keeps no bodies (then its flags were never screened: every skill is)."""
    bodies = getattr(old.state, "stored_texts", None)
    if bodies is None or old.state.flags is None:
        return None
    flags = old.state.flags
    at = np.flatnonzero(rows >= 0)
    old_rows = rows[at].tolist()
    names = record_fields(old.skills, old_rows, "name")
    descriptions = record_fields(old.skills, old_rows, "description")
    known: list[list[str] | None] = [None] * len(skills)
    for i, r, name, description in zip(at.tolist(), old_rows, names, descriptions):
        s = skills[i]
        if name == s.name and description == s.description and bodies[r] == s.body:
            known[i] = flags[r]
    return known

