"""Shard folders written by a Ray build, each on a Ray worker from the rows in Ray's object store.

A Ray build (:func:`skillsight_fast.indexing.ray.ray_build`) encodes the library chunk by chunk on its
workers; with ``write_folders=ShardFolders(...)`` each worker also leaves, apart from what the driver
fetches, the part of its chunk a shard folder is made of (:class:`~skillsight_fast.indexing.shard.ShardRows`:
raw vectors and document -> terms lists over the chunk's own vocabulary) in Ray's object store. Once the
driver has the library-wide statistics (the background basis, the vocabulary, the scan's cells), it
writes the small shared part itself and starts one Ray task per shard: the task reads its rows' parts
straight from the object store (from the node that encoded them, never through the driver), removes
the background, maps the terms to the library's ids, computes its scan's arrays row by row and writes
its folder. Each folder is byte for byte the one ``skillsight split`` writes from the saved index
(tests/indexing/test_build_ray.py): every step is a function of the row alone (the projection, the
int8 codes and scales, the sign bits) or of the shard's own rows (the postings), given the statistics.

A task can be placed on the node that will serve its shard (``resources``, as
:meth:`ShardedIndex.from_layout <skillsight_fast.cluster.index.ShardedIndex.from_layout>` places the
shard actors), so a shard folder is written where it is served. The layout (``shards.json``) names the
index version its folders were written from, so it is written last, by :meth:`ShardFolders.commit`,
once the index is saved: until then the folders are not a layout anyone opens.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.cluster.layout import (
    SHARED,
    _replace_folder,
    check_scan,
    clear_layout,
    folder_arrays,
    global_stats,
    index_digest,
    ivf_cells,
    new_layout,
    shard_folder_name,
    shard_ranges,
    write_layout,
    write_shared,
)
from skillsight_fast.errors import IndexFormatError, SkillsightError


@dataclass(frozen=True)
class FolderContext:
    """What every shard writer needs of the library (put once in Ray's object store)."""

    basis: np.ndarray          # float32 (r, d), the background basis
    renormalize: bool
    namedesc: bool             # the scored vector is (e⊥ + e_nd⊥) / 2
    vocab: np.ndarray          # bytes (V,), the index's sorted terms, UTF-8
    term_frequencies: bool     # the index keeps doc_tf
    lengths: bool              # the index keeps doc_len
    scan: str
    nlist: int | None
    library: str


def _term_ids(vocab: np.ndarray, local: list[str]) -> np.ndarray:
    """The library's ids of a chunk's sorted terms (every one is in the library's sorted vocabulary)."""
    if not local:
        return np.zeros(0, np.int32)
    keys = np.array([t.encode("utf-8") for t in local], dtype=vocab.dtype if vocab.size else np.bytes_)
    ids = np.searchsorted(vocab, keys)
    if ids.size and (ids.max() >= vocab.shape[0] or (vocab[np.minimum(ids, vocab.shape[0] - 1)] != keys).any()):
        raise SkillsightError("a chunk holds a term the library's vocabulary does not")
    return ids.astype(np.int32)


def rows_folder_arrays(pieces: Sequence[tuple[Any, int, int]], ctx: FolderContext,
                       cells: np.ndarray | None) -> tuple[dict[str, np.ndarray], int]:
    """A shard folder's arrays from ``pieces`` (per chunk in row order: its ShardRows and the local row
    range ``[lo, hi)`` the shard takes of it); returns them and the shard's rows."""
    from skillsight_fast.engine.state import scored_rows

    raw = np.concatenate([p.embeddings[lo:hi] for p, lo, hi in pieces]).astype(np.float32, copy=False)
    namedesc = None
    if ctx.namedesc:
        if any(p.namedesc is None for p, _, _ in pieces):
            raise SkillsightError("the index scores name + description vectors a chunk did not carry")
        namedesc = np.ascontiguousarray(np.concatenate([p.namedesc[lo:hi] for p, lo, hi in pieces]), np.float32)
    perp = scored_rows(np.ascontiguousarray(raw), ctx.basis, ctx.renormalize, namedesc)
    lengths, terms, tfs, doc_lens = [], [], [], []
    for p, lo, hi in pieces:
        a, b = int(p.doc_indptr[lo]), int(p.doc_indptr[hi])
        lengths.append(np.diff(p.doc_indptr[lo : hi + 1]))
        # both vocabularies are sorted, so the map keeps each row's terms in order
        terms.append(_term_ids(ctx.vocab, p.vocab)[p.doc_terms[a:b]])
        tfs.append(p.doc_tf[a:b])
        doc_lens.append(p.doc_len[lo:hi])
    doc_indptr = np.zeros(raw.shape[0] + 1, np.int64)
    np.cumsum(np.concatenate(lengths), out=doc_indptr[1:])
    arrays = folder_arrays(
        perp, raw, doc_indptr, np.concatenate(terms).astype(np.int32),
        np.concatenate(tfs) if ctx.term_frequencies else None,
        np.concatenate(doc_lens).astype(np.int32) if ctx.lengths else None,
        int(ctx.vocab.shape[0]), ctx.scan, cells=cells, nlist=ctx.nlist)
    return arrays, int(raw.shape[0])


def write_rows_folder(folder: str, pieces: Sequence[tuple[Any, int, int]], ctx: FolderContext,
                      cells: np.ndarray | None) -> dict[str, Any]:
    """The Ray task: fetch the pieces' rows from the object store, write the folder; returns
    ``{"rows", "seconds", "node"}``."""
    import ray

    t0 = time.perf_counter()
    rows = ray.get([ref for ref, _, _ in pieces])
    arrays, n = rows_folder_arrays([(r, lo, hi) for r, (_, lo, hi) in zip(rows, pieces)], ctx, cells)
    del rows
    _replace_folder(Path(folder), arrays, {"rows": n, "scan": ctx.scan, "n_terms": int(ctx.vocab.shape[0]),
                                           "library": ctx.library})
    return {"rows": n, "seconds": round(time.perf_counter() - t0, 3), "node": ray.get_runtime_context().get_node_id()}


def pieces_of(sizes: Sequence[int], start: int, stop: int) -> list[tuple[int, int, int]]:
    """The chunks (index, lo, hi) rows ``[start, stop)`` of the library take, chunks of ``sizes`` rows."""
    out, offset = [], 0
    for i, n in enumerate(sizes):
        a, b = max(start, offset), min(stop, offset + n)
        if a < b:
            out.append((i, a - offset, b - offset))
        offset += n
    return out


class ShardFolders:
    """The ``write_folders`` of :func:`~skillsight_fast.indexing.ray.ray_build`: ``shards`` shard folders
    and the shared part under ``output`` (``IDX.shards``), each folder written by a Ray task.

    Parameters
    ----------
    output : path
        The layout folder (on storage every writer node reaches at this path, or each node's own disk
        when ``resources`` places each shard's task on the node that serves it).
    shards : int
    resources : list of dict, optional
        Per shard, the Ray custom resources its writer task needs (the node that will serve it).
    """

    def __init__(self, output: str | os.PathLike[str], shards: int, *,
                 resources: Sequence[dict[str, float] | None] | None = None) -> None:
        if shards < 1:
            raise SkillsightError("the number of shards must be at least 1")
        if resources is not None and len(resources) != shards:
            raise SkillsightError(f"{len(resources)} resource sets for {shards} shards")
        self.output = Path(output).expanduser().absolute()
        self.shards = shards
        self.resources = resources
        self.layout: dict[str, Any] | None = None
        self.written: list[dict[str, Any]] = []

    def __call__(self, index: Any, parts: Sequence[tuple[Any, int]]) -> None:
        import ray

        check_scan(index)
        sizes = [n for _, n in parts]
        if sum(sizes) != len(index):
            raise SkillsightError(f"the chunks hold {sum(sizes)} rows, the index {len(index)}")
        out = self.output
        library = clear_layout(out)  # no layout names these folders until commit()
        lex = index.lexical.lexicon
        write_shared(out / SHARED, global_stats(index), lex.vocab, library)
        scan = index.scan
        ctx = FolderContext(
            basis=np.ascontiguousarray(index.dense.basis, np.float32),
            renormalize=bool(index.config.background.renormalize),
            namedesc=index.dense.namedesc is not None,
            vocab=np.array([t.encode("utf-8") for t in lex.vocab], dtype=np.bytes_),
            term_frequencies=lex.doc_tf is not None, lengths=lex.doc_len is not None,
            scan=scan.kind, nlist=getattr(scan, "nlist", None), library=library)
        ctx_ref = ray.put(ctx)
        cells = ivf_cells(scan) if scan.kind == "ivf" else None
        write = ray.remote(num_cpus=1)(write_rows_folder)
        ranges = shard_ranges(len(index), self.shards)
        tasks = []
        for i, (a, b) in enumerate(ranges):
            pieces = [(parts[c][0], lo, hi) for c, lo, hi in pieces_of(sizes, a, b)]
            opts = {"resources": self.resources[i]} if self.resources and self.resources[i] else {}
            tasks.append(write.options(**opts).remote(
                str(out / shard_folder_name(i)), pieces, ctx_ref, None if cells is None else cells[a:b]))
        self.written = ray.get(tasks)
        self.layout = new_layout(ranges, scan.kind, library, None)

    def commit(self, directory: str | os.PathLike[str]) -> dict[str, Any]:
        """Write the layout (``shards.json``) naming the index saved in ``directory``; returns it."""
        if self.layout is None:
            raise IndexFormatError(f"{self.output}: no shard folders were written")
        layout = {**self.layout, "index": index_digest(directory)}
        write_layout(self.output, layout)
        self.layout = layout
        return layout
