"""One shard of a sharded index: a contiguous range of rows and the library's global statistics.

A shard holds rows ``[start, stop)`` of the index's per-skill arrays (the background-removed and raw
matrices, the int8 codes and scales, the document -> terms lists with their term frequencies and
lengths), memory-mapped from the index folder, so only its own rows become resident. It does not
derive any statistic from its rows: the per-term weights (LEC weights, BM25 idf, the mean document
length) are the whole library's, handed to it by the coordinator
(:class:`skillsight_fast.cluster.index.ShardedIndex`), which is why a shard scores a skill exactly as
the single index does. Ids in and out are the index's global rows.

What a shard answers (one query at a time, ``q_perp`` float32 (d,)):

* :meth:`ShardEngine.approx` (int8 scan, first round): the ``kk`` best rows by the int8 score, the
  same scores and tie order as the single index's int8 scan (rows are scored independently);
* :meth:`ShardEngine.exact_top` (exact scan): its ``depth`` best rows by the exact float32 score,
  with what :meth:`ShardEngine.score` returns for them;
* :meth:`ShardEngine.score` (second round): for given rows, the exact dense score (the float32 loop of
  the int8 scan's re-scoring), the lexical score, the raw cosine qᵀd and the evidence term ids;
* :meth:`ShardEngine.coverage_top` (LEC coverage candidates): the best rows by LEC coverage;
* :meth:`ShardEngine.restricted_top` (filtered search): the best of the rows a filter allows, by the
  exact score, and :meth:`ShardEngine.score` of them;
* :meth:`ShardEngine.rows`: raw or background-removed rows (duplicate collapse, pinned skills).

A :class:`ShardHost` (the Ray actor) holds the engine of each served version of its shard, so a
library update swaps a shard's rows in place
(:meth:`skillsight_fast.cluster.index.ShardedIndex.next_version`).
"""

from __future__ import annotations

import collections
import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.config import BM25_B, BM25_K1
from skillsight_fast.engine import validate
from skillsight_fast.errors import IndexFormatError, SkillsightError

#: The lexical sides a shard scores (the LEC coverage candidates need the postings: not sharded).
LEXICAL_SIDES = ("bm25", "lec")
#: Hamming distances a shard keeps from a binary search's histogram round for its filter round (the
#: most recent queries; uint16 per row, 1 MB per 500k rows each), so a search reads the sign bits once.
DISTANCES_KEPT = 8
#: BM25's k1 and b, as float (the single index's).
_BM25 = (float(BM25_K1), float(BM25_B))


class ShardEngine:
    """Rows ``[start, stop)`` of the index in ``directory`` with the global statistics (see the module).

    Parameters
    ----------
    directory : path
        The index folder (readable at the same path where the shard runs: one machine, or shared
        storage).
    start, stop : int
        The shard's rows.
    stats : dict
        The library's ``weights`` (LEC), ``bm25_idf``, ``avgdl`` and ``lexical`` side, from the
        coordinator.
    """

    def __init__(self, directory: str | os.PathLike[str], start: int, stop: int, stats: dict[str, Any]) -> None:
        from skillsight_fast.engine.index import SkillIndex

        # "rows": the bounds checks of the whole folder except its document -> terms lists, which the
        # shard checks for its own rows below (a shard start reads its rows, not the library's)
        whole = SkillIndex.load(Path(directory), mmap=True, verify="rows")
        n = len(whole)
        if not 0 <= start <= stop <= n:
            raise IndexFormatError(f"shard rows {start}..{stop} outside the index's {n} skills")
        self.start, self.stop = int(start), int(stop)
        self.directory = str(directory)
        lex = whole.lexical.lexicon
        self.perp = whole.dense.embeddings_perp[start:stop]
        self.raw = whole.dense.embeddings[start:stop]
        a, b = int(lex.doc_indptr[start]), int(lex.doc_indptr[stop])
        self.doc_indptr = np.ascontiguousarray(lex.doc_indptr[start : stop + 1] - a)
        self.doc_terms = lex.doc_terms[a:b]
        self.doc_tf = lex.doc_tf[a:b] if lex.doc_tf is not None else None
        self.doc_len = lex.doc_len[start:stop] if lex.doc_len is not None else None
        validate.check_forward_lists(self.doc_indptr, self.doc_terms, stop - start, len(lex.vocab))
        self.scan_kind = whole.scan.kind
        if self.scan_kind == "int8":
            self.codes = whole.scan.codes[start:stop]
            self.scales = whole.scan.scales[start:stop]
        elif self.scan_kind != "exact":
            raise IndexFormatError(f"a sharded index serves the exact and int8 scans, not {self.scan_kind!r} "
                                   f"(skillsight rescan -i IDX --scan int8)")
        self.weights = np.ascontiguousarray(stats["weights"], np.float32)
        self.bm25_idf = np.ascontiguousarray(stats["bm25_idf"], np.float32)
        self.avgdl = float(stats["avgdl"])
        self.n_terms = int(self.weights.shape[0])
        # the library's postings (mapped; a query's terms' lists are read only for the LEC coverage
        # candidates, and only the entries of this shard's rows are used)
        self.post_indptr, self.post_docs = lex.post_indptr, lex.post_docs
        self.post_first = self.start  # the postings hold global rows
        del whole

    @classmethod
    def from_folder(cls, folder: str | os.PathLike[str], shared: str | os.PathLike[str], start: int = 0
                    ) -> ShardEngine:
        """The shard in its own folder with the library-wide statistics of the shared part
        (:mod:`skillsight_fast.cluster.layout`): nothing else of the index is read. Both folders are
        checked against their manifests' checksums first. ``start``: the global row of its first row
        (the layout's; a folder holds local rows only).

        Raises
        ------
        IndexFormatError
            A folder is missing, fails its checksum, or does not fit the shared part (one line).
        """
        from skillsight_fast.cluster.layout import read_folder

        meta, arrays = read_folder(folder)
        smeta, sarrays = read_folder(shared)
        if meta.get("library") != smeta.get("library") or meta.get("n_terms", 0) > smeta.get("n_terms", 0):
            raise IndexFormatError(f"{folder}: a shard of another layout than the shared part {shared} "
                                   f"(library {meta.get('library')}, {meta.get('n_terms')} terms; the shared "
                                   f"part: {smeta.get('library')}, {smeta.get('n_terms')} terms)")
        self = cls.__new__(cls)
        self.start = int(start)
        self.stop = self.start + int(meta["rows"])
        self.directory = str(folder)
        self.perp, self.raw = arrays["perp"], arrays["raw"]
        if self.perp.shape[0] != self.stop - self.start or self.raw.shape != self.perp.shape:
            raise IndexFormatError(f"{folder}: {self.perp.shape[0]} rows for rows {self.start}..{self.stop}")
        self.doc_indptr, self.doc_terms = arrays["doc_indptr"], arrays["doc_terms"]
        self.doc_tf, self.doc_len = arrays.get("doc_tf"), arrays.get("doc_len")
        validate.check_forward_lists(np.asarray(self.doc_indptr), self.doc_terms, len(self), int(meta["n_terms"]))
        self.scan_kind = meta["scan"]
        if self.scan_kind in ("int8", "binary"):
            self.codes, self.scales = arrays["codes"], arrays["scales"]
        if self.scan_kind == "binary":
            self.bits = arrays["bits"]
            # the latest queries' Hamming distances (:meth:`_distances`; a rebound copy shares them: same bits)
            self._kept_distances: collections.OrderedDict[bytes, np.ndarray] = collections.OrderedDict()
            self._distances_lock = threading.Lock()
        if self.scan_kind == "ivf":
            self.cell_indptr, self.cell_rows = np.asarray(arrays["cell_indptr"]), arrays["cell_rows"]
            if int(self.cell_indptr[-1]) != len(self):
                raise IndexFormatError(f"{folder}: its cells hold {int(self.cell_indptr[-1])} rows, not {len(self)}")
        self._set_shared(smeta, sarrays)
        self.post_indptr, self.post_docs = arrays["post_indptr"], arrays["post_docs"]
        self.post_first = 0  # the postings hold local rows
        return self

    def _set_shared(self, smeta: dict[str, Any], sarrays: dict[str, np.ndarray]) -> None:
        self.weights = np.ascontiguousarray(sarrays["weights"], np.float32)
        self.bm25_idf = np.ascontiguousarray(sarrays["bm25_idf"], np.float32)
        self.avgdl = float(smeta["avgdl"])
        self.n_terms = int(self.weights.shape[0])

    def rebind(self, shared: str | os.PathLike[str] | None, start: int) -> ShardEngine:
        """This shard's rows (its folder unchanged) with the statistics of another ``shared`` part
        (None: the same) and first row ``start``: a copy sharing the mapped arrays (an update that
        moved the library-wide statistics or the rows before this shard, not its rows)."""
        import copy

        from skillsight_fast.cluster.layout import read_folder

        new = copy.copy(self)
        if shared is not None:
            smeta, sarrays = read_folder(shared)
            if smeta.get("n_terms", 0) < int(self.post_indptr.shape[0]) - 1:
                raise IndexFormatError(f"{shared}: fewer terms than the shard {self.directory}")
            new._set_shared(smeta, sarrays)
        new.stop = int(start) + len(self)
        new.start = int(start)
        return new

    def __len__(self) -> int:
        return self.stop - self.start

    def warmup(self) -> None:
        """Run every round once on this shard's own arrays, so the kernels (with the signatures of its
        memory-mapped arrays) are compiled or loaded from the cache before the first search: a search's
        time budget (:attr:`~skillsight_fast.cluster.index.ShardedIndex.partial_after_s`) then measures
        the search, not a compile."""
        n = len(self)
        if not n:
            return
        q = np.zeros(self.perp.shape[1], np.float32)
        q[0] = 1.0
        t = np.ascontiguousarray(np.asarray(self.doc_terms[:1], np.int32))
        if self.scan_kind == "int8":
            self.approx(q, 1)
        if self.scan_kind == "binary":
            self.binary_top(q, int(self.hamming_counts(q).nonzero()[0][0]), 1)
        if self.scan_kind == "ivf":
            self.ivf_top(q, q, 1, np.arange(self.cell_indptr.shape[0] - 1), (t, t), "lec")
        self.exact_top(q, q, 1, (t, t), "lec")
        rows = np.array([self.start], np.int64)
        if self.doc_tf is not None and self.doc_len is not None:
            self.score(q, q, rows, (t, t), "bm25")
        self.restricted_top(q, q, 1, rows, (t, t), "lec")
        self.coverage_top(t, 1)

    def info(self) -> dict[str, Any]:
        """Rows, scan and the bytes of the shard's arrays (what becomes resident when all is touched)."""
        arrays = [self.perp, self.raw, self.doc_indptr, self.doc_terms, self.doc_tf, self.doc_len,
                  getattr(self, "codes", None), getattr(self, "scales", None), getattr(self, "bits", None),
                  self.weights, self.bm25_idf]
        return {"start": self.start, "stop": self.stop, "scan": self.scan_kind, "pid": os.getpid(),
                "array_bytes": int(sum(a.nbytes for a in arrays if a is not None)), "rss": _rss()}

    def _local(self, rows: np.ndarray) -> np.ndarray:
        """Global ``rows`` as this shard's local rows (int64, contiguous); rows of another shard are
        refused."""
        local = np.ascontiguousarray(np.asarray(rows, np.int64) - self.start)
        if local.size and (local.min() < 0 or local.max() >= len(self)):
            raise ValueError("rows outside the shard")
        return local

    # ------------------------------------------------------------------ rounds
    def approx(self, q_perp: np.ndarray, kk: int) -> tuple[np.ndarray, np.ndarray]:
        """int8 scan: the ``min(kk, rows)`` best rows by the int8 score (global ids, scores), best first
        and ties by ascending id, as the single index's int8 scan orders its survivors."""
        from skillsight_fast.kernels import single_thread
        from skillsight_fast.kernels.compressed import dense_topk_int8

        if len(self) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        with single_thread():  # one query: no parallel launch (a shard is one actor, one CPU)
            ids, scores = dense_topk_int8(q_perp[None, :], self.codes, self.scales, min(kk, len(self)))
        keep = ids[0] >= 0
        return ids[0][keep] + self.start, scores[0][keep]

    def hamming_counts(self, q_perp: np.ndarray) -> np.ndarray:
        """Binary scan, first round: how many of this shard's rows lie at each Hamming distance from the
        query's sign bits (int64 (64 w + 1,)); the coordinator sums them into the library's histogram
        and finds the distance the single index's scan stops at."""
        width = 64 * int(self.bits.shape[1]) + 1
        if len(self) == 0:
            return np.zeros(width, np.int64)
        return np.bincount(self._distances(q_perp), minlength=width).astype(np.int64)

    def _distances(self, q_perp: np.ndarray) -> np.ndarray:
        """The Hamming distance of each row's sign bits from the query's (uint16 (rows,)), kept for the
        :data:`DISTANCES_KEPT` latest queries: the filter round of a search finds its histogram round's."""
        from skillsight_fast.kernels.binary import hamming, pack_signs

        q = np.ascontiguousarray(q_perp, np.float32)
        key = hashlib.blake2b(q.tobytes(), digest_size=16).digest()
        kept = self._kept_distances
        with self._distances_lock:
            dist = kept.get(key)
            if dist is not None:
                kept.move_to_end(key)
                return dist
        dist = hamming(pack_signs(q[None, :])[0], self.bits)
        with self._distances_lock:
            kept[key] = dist
            while len(kept) > DISTANCES_KEPT:
                kept.popitem(last=False)
        return dist

    def binary_top(self, q_perp: np.ndarray, threshold: int, kk: int) -> tuple[np.ndarray, np.ndarray]:
        """Binary scan, second round: of this shard's rows within Hamming distance ``threshold`` (ascending),
        the ``kk`` best by the int8 score (global ids, int8 scores), ties by ascending id: the single
        index's binary scan keeps the library's ``kk`` best of the same rows, scored the same way."""
        from skillsight_fast.kernels import single_thread
        from skillsight_fast.kernels.compressed import dense_topk_int8

        if len(self) == 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        rows = np.flatnonzero(self._distances(q_perp) <= threshold)
        if not rows.size:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        with single_thread():
            ids, scores = dense_topk_int8(q_perp[None, :], np.asarray(self.codes[rows]),
                                          np.asarray(self.scales[rows]), min(kk, rows.size))
        keep = ids[0] >= 0
        return rows[ids[0][keep]].astype(np.int64) + self.start, scores[0][keep]

    def ivf_top(self, q_perp: np.ndarray, q_raw: np.ndarray, depth: int, cells: np.ndarray,
                terms: tuple[np.ndarray, np.ndarray], side: str) -> dict[str, Any]:
        """IVF scan: of this shard's rows in the probed ``cells`` (the coordinator's choice, from the
        library's centroids), the ``depth`` best by the exact float32 score, ties by ascending row, and
        :meth:`score` of them."""
        from skillsight_fast.kernels.compressed import rescore_rows

        c = np.asarray(cells, np.int64)
        c = c[(c >= 0) & (c < self.cell_indptr.shape[0] - 1)]
        parts = [np.asarray(self.cell_rows[int(self.cell_indptr[i]) : int(self.cell_indptr[i + 1])]) for i in c]
        local = np.sort(np.concatenate(parts)).astype(np.int64) if parts else np.zeros(0, np.int64)
        if not local.size:
            return self.score(q_perp, q_raw, np.zeros(0, np.int64), terms, side)
        s = rescore_rows(np.ascontiguousarray(q_perp, np.float32), self.perp, np.ascontiguousarray(local))
        top = np.argsort(-s, kind="stable")[: min(depth, local.size)]
        return self.score(q_perp, q_raw, local[top] + self.start, terms, side)

    def exact_top(self, q_perp: np.ndarray, q_raw: np.ndarray, depth: int, terms: tuple[np.ndarray, np.ndarray],
                  side: str) -> dict[str, Any]:
        """Exact scan: the ``depth`` best rows of the shard and :meth:`score` of them."""
        from skillsight_fast.kernels import dense_topk, single_thread

        if len(self) == 0:
            return self.score(q_perp, q_raw, np.zeros(0, np.int64), terms, side)
        with single_thread():
            ids, _ = dense_topk(q_perp[None, :], self.perp, min(depth, len(self)))
        rows = ids[0][ids[0] >= 0] + self.start
        return self.score(q_perp, q_raw, rows, terms, side)

    def restricted_top(self, q_perp: np.ndarray, q_raw: np.ndarray, depth: int, rows: np.ndarray,
                       terms: tuple[np.ndarray, np.ndarray], side: str) -> dict[str, Any]:
        """Filtered search: the ``depth`` best of the given global ``rows`` of this shard (the rows a
        filter allows, ascending) by the exact float32 score, ties by ascending row (the order of the
        single index's filtered stage, :func:`skillsight_fast.agents.find.find_skills`), and
        :meth:`score` of them."""
        from skillsight_fast.kernels.compressed import rescore_rows

        local = self._local(rows)
        s = rescore_rows(np.ascontiguousarray(q_perp, np.float32), self.perp, local)
        top = np.argsort(-s, kind="stable")[: min(depth, local.size)]
        return self.score(q_perp, q_raw, local[top] + self.start, terms, side)

    def coverage_top(self, q_terms: np.ndarray, kl: int) -> tuple[np.ndarray, np.ndarray]:
        """LEC coverage candidates: the ``min(kl, rows)`` best rows of this shard by LEC coverage of the
        query's evidence tokens ``q_terms`` (global ids, coverages), positive coverage only, best first
        and ties by ascending id.

        The coverage is :func:`~skillsight_fast.kernels.score_lexical_all` (the single index's kernel,
        so the same float32 sums in the same order) over the query terms' postings restricted to this
        shard's rows.
        """
        from skillsight_fast.kernels import score_lexical_all, single_thread

        t = np.ascontiguousarray(q_terms, np.int32)
        n = len(self)
        if not t.size or not n:
            return np.zeros(0, np.int64), np.zeros(0, np.float32)
        if t.min() < 0 or t.max() >= self.n_terms:
            raise ValueError("query term ids outside the vocabulary")
        parts, ptr = [], [0]
        n_post = int(self.post_indptr.shape[0]) - 1  # a shard folder's terms: the layout's when it was written
        first = self.post_first
        for term in t.tolist():
            if term >= n_post:  # a term added to the layout after this folder was written: not in its rows
                parts.append(np.zeros(0, np.int32))
                ptr.append(ptr[-1])
                continue
            # a term's postings ascend (an index invariant the kernels bisect on): this shard's rows are
            # one slice of them, found by bisection instead of reading the whole list
            lo, hi = int(self.post_indptr[term]), int(self.post_indptr[term + 1])
            bounds = np.searchsorted(self.post_docs[lo:hi], [first, first + n])
            docs = np.asarray(self.post_docs[lo + int(bounds[0]) : lo + int(bounds[1])]) - first
            parts.append(docs.astype(np.int32))
            ptr.append(ptr[-1] + docs.size)
        with single_thread():
            cov = score_lexical_all(np.arange(t.size, dtype=np.int32), np.array([0, t.size], np.int64),
                                    np.asarray(ptr, np.int64), np.concatenate(parts), self.weights[t], n)[0]
        top = np.argsort(-cov, kind="stable")[: min(kl, n)]
        top = top[cov[top] > 0]
        return top.astype(np.int64) + self.start, cov[top].astype(np.float32)

    def score(self, q_perp: np.ndarray, q_raw: np.ndarray, rows: np.ndarray, terms: tuple[np.ndarray, np.ndarray],
              side: str, dense_by: str = "loop") -> dict[str, Any]:
        """For global ``rows`` of this shard: exact dense score, lexical score (``side``, over the
        scoring terms ``terms[0]``), raw cosine, evidence term ids (of ``terms[1]``, the query's
        evidence tokens; CSR ``ev_ptr``/``ev_terms``), in the order given.

        ``dense_by``: ``loop``, the float32 loop of the scans; ``einsum``, NumPy's row-wise product, as
        the single index scores the candidates once the LEC coverage candidates joined them
        (:meth:`~skillsight_fast.engine.index.SkillIndex.add_lexical_candidates`)."""
        from skillsight_fast.kernels import (
            matched_terms,
            score_bm25_candidates,
            score_lexical_candidates,
            single_thread,
        )
        from skillsight_fast.kernels.compressed import rescore_rows

        if side not in LEXICAL_SIDES:
            raise ValueError(f"lexical side {side!r}: a shard scores {', '.join(LEXICAL_SIDES)}")
        local = self._local(rows)
        q = np.ascontiguousarray(q_perp, np.float32)
        if dense_by == "einsum":
            # the operands laid out as the single index's (a gathered copy of q per row)
            qs = np.repeat(q[None, :], local.size, axis=0)
            dense = (np.einsum("ij,ij->i", qs, np.asarray(self.perp[local])) if local.size
                     else np.zeros(0, np.float32))
        else:
            dense = rescore_rows(q, self.perp, local)
        cosine = (np.asarray(self.raw[local], np.float32) @ np.asarray(q_raw, np.float32)
                  if local.size else np.zeros(0, np.float32))
        t = np.ascontiguousarray(terms[0], np.int32)
        ptr = np.array([0, t.shape[0]], np.int64)
        ev = np.ascontiguousarray(terms[1], np.int32)
        ev_ptr_q = np.array([0, ev.shape[0]], np.int64)
        cand = local[None, :] if local.size else np.full((1, 1), -1, np.int64)
        with single_thread():
            if side == "bm25":
                lex = score_bm25_candidates(cand, t, ptr, self.doc_indptr, self.doc_terms, self.doc_tf,
                                            self.doc_len, self.bm25_idf, k1=_BM25[0], b=_BM25[1], avgdl=self.avgdl)
            else:
                lex = score_lexical_candidates(cand, t, ptr, self.doc_indptr, self.doc_terms, self.weights)
            ev_ptr, ev_terms = matched_terms(cand, ev, ev_ptr_q, self.doc_indptr, self.doc_terms)
        n = local.size
        return {"rows": np.asarray(rows, np.int64), "dense": dense.astype(np.float32),
                "lexical": np.asarray(lex[0, :n], np.float32), "cosine": np.asarray(cosine, np.float32),
                "ev_ptr": np.asarray(ev_ptr[: n + 1], np.int64), "ev_terms": np.asarray(ev_terms, np.int32)}

    def rows(self, rows: np.ndarray, which: str = "raw") -> np.ndarray:
        """float32 rows (global ids) of the raw (``raw``) or background-removed (``perp``) matrix."""
        local = np.asarray(rows, np.int64) - self.start
        src = self.raw if which == "raw" else self.perp
        return np.asarray(src[local], np.float32)


class ShardHost:
    """The place of one shard (run as a Ray actor): the :class:`ShardEngine` of each index version it
    serves, so an update swaps a shard's rows without a new actor (and without the CPUs a second one
    would reserve).

    A version is opened from the index folder (:meth:`open`) or carried over unchanged from the
    previous version (:meth:`keep`); every search names its version (:meth:`call`). The host keeps
    the :data:`KEEP` newest versions, so a search that began before an update ends on the version it
    began with; an older one is dropped when a newer one arrives.
    """

    #: Versions a host keeps (the current one and the one before it).
    KEEP = 2

    def __init__(self) -> None:
        self.engines: dict[int, ShardEngine] = {}
        self.warm = False

    def open(self, version: int, directory: str | os.PathLike[str], start: int, stop: int,
             stats: dict[str, Any]) -> dict[str, Any]:
        """Serve rows ``[start, stop)`` of the folder as ``version``; returns :meth:`ShardEngine.info`."""
        return self._put(version, ShardEngine(directory, start, stop, stats))

    def open_folder(self, version: int, folder: str | os.PathLike[str], shared: str | os.PathLike[str],
                    start: int = 0) -> dict[str, Any]:
        """Serve the shard in its own ``folder`` (with the ``shared`` part; first row ``start``) as
        ``version`` (:meth:`ShardEngine.from_folder`); returns :meth:`ShardEngine.info`."""
        engine = ShardEngine.from_folder(folder, shared, start)
        if not self.warm:  # once per process: the compiled kernels stay loaded
            engine.warmup()
            self.warm = bool(len(engine))
        return self._put(version, engine)

    def keep(self, version: int, previous: int, shared: str | os.PathLike[str] | None = None,
             start: int | None = None) -> dict[str, Any]:
        """Serve ``previous``'s engine as ``version`` too (its rows did not change); with ``shared``
        and/or ``start``, re-bound to a new shared part or first row (:meth:`ShardEngine.rebind`)."""
        engine = self.engines[previous]
        if shared is not None or (start is not None and start != engine.start):
            engine = engine.rebind(shared, engine.start if start is None else start)
        return self._put(version, engine)

    def _put(self, version: int, engine: ShardEngine) -> dict[str, Any]:
        self.engines[version] = engine
        for old in sorted(self.engines)[: -self.KEEP]:
            del self.engines[old]
        return engine.info()

    def versions(self) -> list[int]:
        """The versions this host serves, oldest first."""
        return sorted(self.engines)

    def call(self, version: int, method: str, *args: Any) -> Any:
        """``engine(version).method(*args)``."""
        engine = self.engines.get(version)
        if engine is None:
            raise IndexFormatError(f"this shard no longer serves version {version} "
                                   f"(it serves {self.versions()})")
        return getattr(engine, method)(*args)


def _rss() -> dict[str, int]:
    """Resident bytes of this process: ``anon`` (its own memory) and ``file`` (mapped index pages,
    shared with the page cache and with every process mapping the same folder)."""
    out = {"anon": -1, "file": -1}
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(("RssAnon:", "RssFile:")):
                    out["anon" if line.startswith("RssAnon") else "file"] = int(line.split()[1]) * 1024
    except (OSError, ValueError):  # pragma: no cover - not Linux
        pass
    return out


#: Calls a shard actor runs at once (threads): searches, and an update opening the next version.
MAX_CONCURRENCY = 4


def _get(ray: Any, refs: list[Any]) -> list[Any]:
    """``ray.get(refs)``, an actor's error as its own one line (an IndexFormatError of a shard folder)."""
    try:
        return list(ray.get(refs))
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        if isinstance(cause, SkillsightError):
            raise cause from None
        raise


def _shard_actor(ray: Any, cpus_per_shard: float, resources: dict[str, float] | None) -> Any:
    """A new :class:`ShardHost` actor (restarted by Ray when lost; the coordinator re-opens its folder)."""
    return ray.remote(num_cpus=cpus_per_shard, max_concurrency=MAX_CONCURRENCY, resources=resources or {},
                      max_restarts=-1, max_task_retries=0)(ShardHost).remote()


def _lost_version(exc: Any) -> bool:
    """A shard's error saying its actor no longer holds the searched version (Ray restarted it, empty)."""
    return "no longer serves version" in str(getattr(exc, "cause", exc))
