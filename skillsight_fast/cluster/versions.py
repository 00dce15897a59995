"""Moving a served sharded index to its folder's next version (``serve --ray --watch``, ``update``): which
shard hosts keep their engine and which re-open their rows, for row-range shards and for shard folders."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.cluster.layout import global_stats, shard_ranges
from skillsight_fast.cluster.shard import ShardHost, _get, _shard_actor
from skillsight_fast.engine.columns import SKILL_FIELDS, StringColumn
from skillsight_fast.errors import SkillsightError

logger = logging.getLogger("skillsight_fast.cluster.index")


def next_version(index: Any, directory: str | os.PathLike[str] | None = None, *, encoder: Any = None,
             reopen: bool = False) -> Any:
    """The index folder's current version, served by the same shard hosts: call it after
    :func:`~skillsight_fast.engine.update.update_index` rewrote the folder (``serve --ray --watch``
    does).

    The folder holds what the single-index update computed: the skills in the library's order,
    their rows, and the global statistics recomputed over the whole library (background basis,
    IDF, generic tokens, LEC weights, BM25 idf and mean length), so the new version answers
    exactly what the single updated index answers. Rows are assigned by the rule of
    :meth:`ShardedIndex.connect` (:func:`shard_ranges` over the new size). Each shard then either keeps its
    engine (its row range is the same and holds the same skill records, byte for byte, and the
    statistics its rows and scores derive from are unchanged: background basis, vocabulary, LEC
    weights, BM25 idf and mean length, scan, document vector) or opens its new rows from the
    folder; which one is recorded in :attr:`reopened`. A content change moves the background
    basis, and with it every row's background-removed vector, so after one every shard re-opens.
    The previous version stays served by the hosts (until the next update) for the searches
    that began on it, and this object keeps serving it.

    Parameters
    ----------
    directory : path, optional
        The folder (default: this index's).
    encoder : Encoder, optional
        Attached to the new coordinator (default: the current one's, if attached).
    reopen : bool
        Re-open every shard from the folder, changed or not.
    """
    from skillsight_fast.engine.index import SkillIndex

    directory = Path(directory).expanduser().absolute() if directory is not None else index.directory
    if index.layout is not None:  # shard folders: rewrite the changed ones, re-open only those
        return _next_layout_version(index, directory, encoder)
    head = SkillIndex.load(directory, mmap=True, verify="background")
    enc = encoder if encoder is not None else index.head.encoders.attached
    if enc is not None:
        head.encoder = enc
    version = index.version + 1
    ranges = shard_ranges(len(head), len(index.shards))
    stats = global_stats(head)
    same_stats = not reopen and _same_statistics(index.head, head)
    keep = [same_stats and old == new and _same_skills(index.head, head, new)
            and _sample_rows_equal(index.head, head, new) for old, new in zip(index.ranges, ranges)]
    if index.remote:
        import ray

        ref = ray.put(stats)
        ray.get([h.keep.remote(version, index.version) if kept
                 else h.open.remote(version, str(directory), a, b, ref)
                 for h, kept, (a, b) in zip(index.shards, keep, ranges)])
    else:
        for h, kept, (a, b) in zip(index.shards, keep, ranges):
            if kept:
                h.keep(version, index.version)
            else:
                h.open(version, directory, a, b, stats)
    new = type(index)(directory, index.shards, ranges, head=head, remote=index.remote, version=version)
    new.reopened = [not kept for kept in keep]
    logger.info("sharded index version %d: %d skills, %d of %d shards re-opened", version, len(head),
                sum(new.reopened), len(keep))
    return new

def _next_layout_version(index: Any, directory: Path, encoder: Any) -> Any:
    """:meth:`next_version` of shards served from their folders. When the layout is behind the index
    folder (an update that recomputed the statistics, :func:`~skillsight_fast.engine.update.
    update_index`), :func:`~skillsight_fast.cluster.layout.refresh_layout` first rewrites the
    folders whose bytes changed; after :func:`~skillsight_fast.cluster.update.update_layout` the
    folders are already the index's. Then a shard whose folder changed re-opens it, a shard whose
    folder is the same keeps its engine (re-bound to the new shared part and first row when those
    moved), and a shard the update appended gets a new host."""
    from skillsight_fast.cluster.layout import read_layout, refresh_layout
    from skillsight_fast.cluster.update import index_digest
    from skillsight_fast.engine.index import SkillIndex

    assert index.layout is not None
    if read_layout(index.layout).get("index") != index_digest(directory):
        refresh_layout(directory, index.layout)
    head = SkillIndex.load(directory, mmap=True, verify="background")
    enc = encoder if encoder is not None else index.head.encoders.attached
    if enc is not None:
        head.encoder = enc
    plan = read_layout(index.layout)
    ranges = [(int(e["start"]), int(e["stop"])) for e in plan["shards"]]
    folders = [str(index.layout / e["folder"]) for e in plan["shards"]]
    shared = str(index.layout / plan["shared"])
    digests = [folder_digest(f) for f in folders]
    shared_digest = folder_digest(shared)
    moved_stats = shared_digest != index._shared_digest
    old = getattr(index, "_digests", [None] * len(index.shards))
    version = index.version + 1
    hosts = list(index.shards)
    options = getattr(index, "_actor_options", {"cpus_per_shard": 1.0, "resources": []})
    if len(ranges) < len(hosts):
        raise SkillsightError(f"{index.layout}: {len(ranges)} shards, {len(hosts)} served (a layout of "
                              "fewer shards needs a new serve)")
    ray = None
    if index.remote:
        import ray
    for s in range(len(hosts), len(ranges)):  # appended shards: new hosts
        res = options["resources"]
        hosts.append(_shard_actor(ray, options["cpus_per_shard"], res[s] if s < len(res) else None)
                     if index.remote else ShardHost())
    calls, rewritten = [], []
    for s, h in enumerate(hosts):
        a = ranges[s][0]
        if s >= len(old) or digests[s] != old[s]:
            rewritten.append(s)
            call = (h.open_folder.remote if index.remote else h.open_folder)(version, folders[s], shared, a)
        else:
            call = (h.keep.remote if index.remote else h.keep)(version, index.version,
                                                              shared if moved_stats else None, a)
        calls.append(call)
    if index.remote:
        _get(ray, calls)
    new = type(index)(directory, hosts, ranges, head=head, remote=index.remote, version=version,
                       layout=index.layout)
    new.reopened = [s in rewritten for s in range(len(hosts))]
    new._digests, new._shared_digest, new._actor_options = digests, shared_digest, options
    logger.info("sharded index version %d: shard folders %s re-opened of %d", version, rewritten, len(hosts))
    return new


def folder_digest(folder: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of a shard or shared folder's manifest (its arrays' checksums): what changes when
    the folder is rewritten with other bytes."""
    from skillsight_fast.files import sha256_file

    try:
        return sha256_file(Path(folder) / "manifest.json")
    except OSError:
        return None


def _same_statistics(old: Any, new: Any) -> bool:
    """Whether every statistic a shard's rows and scores derive from is the same in both versions:
    the background basis, the vocabulary (term ids), the LEC weights, BM25 idf and mean length, the
    scan and the document vector."""
    a, b = global_stats(old), global_stats(new)
    return (old.scan.kind == new.scan.kind
            and getattr(old.scan, "oversample", None) == getattr(new.scan, "oversample", None)
            and old.decisions.document_vector == new.decisions.document_vector
            and old.config.background.renormalize == new.config.background.renormalize
            and np.array_equal(old.dense.basis, new.dense.basis)
            and all(np.array_equal(a[key], b[key]) for key in ("weights", "bm25_idf"))
            and a["avgdl"] == b["avgdl"]
            and _same_strings(old.lexical.lexicon.vocab, new.lexical.lexicon.vocab))


def _same_strings(a: Any, b: Any) -> bool:
    """Two string sequences are equal: by their arrays for string columns (format 3: no decoding of
    millions of terms), else item by item."""
    if isinstance(a, StringColumn) and isinstance(b, StringColumn):
        return bool(np.array_equal(a.offsets, b.offsets) and np.array_equal(a.blob, b.blob))
    return list(a) == list(b)


def _same_skills(old: Any, new: Any, rows: tuple[int, int]) -> bool:
    """Rows ``[a, b)`` hold the same skill records in both versions (every field: id, content hash,
    path, ...): the bytes of those rows of the skill strings column, else the records' ids and hashes."""
    a, b = rows
    so, sn = getattr(old.skills, "column", None), getattr(new.skills, "column", None)
    if isinstance(so, StringColumn) and isinstance(sn, StringColumn):
        nf = len(SKILL_FIELDS)

        def span(col: StringColumn) -> tuple[np.ndarray, np.ndarray]:
            off = np.asarray(col.offsets[a * nf : b * nf + 1], np.int64)
            return np.asarray(col.blob[int(off[0]) : int(off[-1])]), off - off[0]

        (bo, oo), (bn, on) = span(so), span(sn)
        return bool(np.array_equal(oo, on) and np.array_equal(bo, bn))
    return [(old.skills[j].id, old.skills[j].sha256) for j in range(a, b)] == [
        (new.skills[j].id, new.skills[j].sha256) for j in range(a, b)]


def _sample_rows_equal(old: Any, new: Any, rows: tuple[int, int], samples: int = 16) -> bool:
    """A cheap check on top of the ids, hashes and statistics: a few rows of the scored matrix equal."""
    a, b = rows
    if b <= a:
        return True
    at = np.unique(np.linspace(a, b - 1, min(samples, b - a)).round().astype(np.int64))
    return bool(np.array_equal(np.asarray(old.dense.embeddings_perp[at]),
                               np.asarray(new.dense.embeddings_perp[at])))
