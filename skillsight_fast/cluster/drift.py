"""What the drift rule starts from, kept between updates of shard folders: the token directions' sums.

The rule of :func:`skillsight_fast.cluster.update.update_layout` compares the kept background basis with
the one a build of the updated library would estimate (:func:`~skillsight_fast.cluster.update.fresh_basis`).
That estimate starts from the token directions g_t (the mean raw embedding of the documents holding
background term t, METHOD.md 4) and the corpus mean. Computed from the postings it reads every row of
every background term, the longest lists of the library: 241 s of the rule's 273 s at 1M skills
(docs/LARGE.md), for an update that may change one row in a thousand.

Both are sums over rows, so an update can move them by its own rows instead. The layout keeps, in
``IDX.shards/directions/`` (``.npy`` files with their checksums, and the index version they are of):

* ``terms``: the background terms, as the layout's term ids (stable across updates);
* ``sums`` (float64 (m, d)) and ``counts`` (int64 (m,)): Σ of the raw embeddings of the rows holding
  each term, and how many rows that is;
* ``total`` (float64 (d,)): Σ of every row's raw embedding, for the mean.

The next update subtracts the rows it removes or changes (their raw vectors and terms as the shard
folders hold them, read before those are rewritten) and adds the rows it adds or changes (from the
updated index). A term that is a background term now but was not then is summed over its postings. The
moved counts must equal the updated index's document frequencies of those terms, and the rows the
updated index's size; otherwise (and when nothing is kept, or it is of another index version, or fails
its checksums) the sums are computed over the postings, as a build does, and kept for the next update.
Sums moved this way differ from sums recomputed only by float64 rounding; the directions are float32.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.cluster.layout import DIRECTIONS, _replace_folder, read_folder
from skillsight_fast.errors import IndexFormatError

logger = logging.getLogger(__name__)


@dataclass
class DirectionSums:
    """The token directions of a library as sums (see the module docstring).

    terms : int32 (m,), the layout's term ids. sums : float64 (m, d). counts : int64 (m,).
    total : float64 (d,), Σ of every row. rows : int, the rows summed.
    """

    terms: np.ndarray
    sums: np.ndarray
    counts: np.ndarray
    total: np.ndarray
    rows: int

    def directions(self) -> tuple[np.ndarray, np.ndarray]:
        """``(g, mean)`` as :func:`~skillsight_fast.cluster.update.background_directions` gives them: float32
        (m, d) means (a zero row for a term no row holds) and the float64 mean of every row."""
        c = self.counts[:, None]
        g = np.divide(self.sums, c, out=np.zeros_like(self.sums), where=c > 0).astype(np.float32)
        mean = self.total / self.rows if self.rows else np.zeros_like(self.total)
        return g, mean


def read_sums(out: Path, index: str | None) -> DirectionSums | None:
    """The sums kept in the layout ``out`` for the index version ``index``, or None (none kept, of another
    version, or unreadable: then said once in the log)."""
    folder = Path(out) / DIRECTIONS
    if index is None or not (folder / "manifest.json").is_file():
        return None
    try:
        meta, arrays = read_folder(folder)
    except IndexFormatError as exc:
        logger.warning("the kept token directions are not used (%s); summing them over the postings", exc)
        return None
    if meta.get("index") != index:
        return None
    return DirectionSums(np.array(arrays["terms"], np.int32), np.array(arrays["sums"], np.float64),
                         np.array(arrays["counts"], np.int64), np.array(arrays["total"], np.float64),
                         int(meta.get("rows", 0)))


def write_sums(out: Path, sums: DirectionSums, index: str | None) -> None:
    """Keep ``sums`` in the layout ``out`` as of the index version ``index``."""
    arrays = {"terms": np.asarray(sums.terms, np.int32), "sums": np.asarray(sums.sums, np.float64),
              "counts": np.asarray(sums.counts, np.int64), "total": np.asarray(sums.total, np.float64)}
    _replace_folder(Path(out) / DIRECTIONS, arrays, {"index": index, "rows": int(sums.rows)})


def rows_csr(indptr: np.ndarray, terms: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The document -> terms lists of ``rows`` (ascending or not) of a CSR:
    ``(ptr (len(rows) + 1,), terms)``."""
    from skillsight_fast.engine.lexicon import segments

    indptr = np.asarray(indptr, np.int64)
    rows = np.asarray(rows, np.int64)
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    ptr = np.zeros(rows.shape[0] + 1, np.int64)
    np.cumsum(lengths, out=ptr[1:])
    return ptr, np.asarray(terms)[segments(starts, lengths)]


def _block(ptr: np.ndarray, terms: np.ndarray, vectors: np.ndarray, slot: np.ndarray,
           m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Σ of ``vectors`` per slotted term, how many rows hold each, and Σ of all ``vectors``."""
    from skillsight_fast.indexing.stats import TokenStats

    x = np.ascontiguousarray(vectors, np.float32)
    terms = np.ascontiguousarray(terms, np.int32)
    sums = TokenStats.of(ptr, terms, x, slot, np.zeros(slot.shape[0], np.bool_), m).sums
    s = slot[terms]
    counts = np.bincount(s[s >= 0], minlength=m).astype(np.int64)
    return sums, counts, x.astype(np.float64).sum(axis=0)


def _old_rows(folder: Path) -> dict[str, np.ndarray]:
    """The arrays of a shard folder the sums are moved by (raw rows, document -> terms lists), each
    checked against its manifest's checksum (the rest of the folder is not read: it is rewritten)."""
    from skillsight_fast.files import sha256_file

    manifest, arrays = read_folder(folder, verify=False)
    for name in ("raw", "doc_indptr", "doc_terms"):
        path = folder / f"{name}.npy"
        if name not in arrays or sha256_file(path) != manifest["arrays"][name]["sha256"]:
            raise IndexFormatError(f"{path}: checksum mismatch (the file changed after it was written)")
    return arrays


class _Stale(Exception):
    """The kept sums, moved by the update's rows, do not add up to the updated index."""


def moved_sums(kept: DirectionSums, new: Any, out: Path, plan: dict[str, Any], gone: np.ndarray,
               fresh: np.ndarray, to_layout: np.ndarray, n_layout: int, terms: np.ndarray) -> DirectionSums:
    """``kept`` moved by an update: minus the old rows ``gone`` (bool over the layout's old rows: removed
    or changed; read from the shard folders under ``out`` that ``plan`` lists), plus the rows ``fresh``
    (bool over ``new``'s rows: added or changed), for the background ``terms`` of ``new`` (its term ids;
    ``to_layout`` maps them to the layout's ``n_layout`` terms, the old ones and the new). Raises
    :class:`_Stale` when the result is not ``new``'s."""
    from skillsight_fast.kernels import token_direction_sums

    m, d = kept.sums.shape[0], kept.total.shape[0]
    want = np.asarray(to_layout, np.int64)[np.asarray(terms, np.int64)]
    n_slots = max(int(n_layout), int(kept.terms.max()) + 1 if kept.terms.size else 0)
    slot = np.full(n_slots, -1, np.int32)
    slot[kept.terms] = np.arange(m, dtype=np.int32)
    sums, counts, total = kept.sums.copy(), kept.counts.copy(), kept.total.copy()
    for e in plan["shards"]:
        local = np.flatnonzero(gone[int(e["start"]):int(e["stop"])])
        if not local.size:
            continue
        arrays = _old_rows(out / e["folder"])
        ptr, t = rows_csr(arrays["doc_indptr"], arrays["doc_terms"], local)
        s, c, tot = _block(ptr, t, np.asarray(arrays["raw"])[local], slot, m)
        sums -= s
        counts -= c
        total -= tot
    lex = new.lexical.lexicon
    rows = np.flatnonzero(fresh)
    if rows.size:
        ptr, t = rows_csr(lex.doc_indptr, lex.doc_terms, rows)
        x = np.asarray(new.dense.embeddings)[rows]
        s, c, tot = _block(ptr, np.asarray(to_layout, np.int32)[t], x, slot, m)
        sums += s
        counts += c
        total += tot
    n_rows = kept.rows - int(gone.sum()) + int(rows.size)
    if n_rows != len(new) or (counts < 0).any():
        raise _Stale(f"{n_rows} rows moved, {len(new)} in the index")
    pos = slot[want] if want.size else np.zeros(0, np.int32)
    have = pos >= 0
    df = np.asarray(new.lexical.lexicon.df())[np.asarray(terms, np.int64)]
    if not np.array_equal(counts[pos[have]], df[have]):
        raise _Stale("the moved counts are not the index's document frequencies")
    out_sums = np.zeros((want.shape[0], d), np.float64)
    out_counts = np.zeros(want.shape[0], np.int64)
    out_sums[have], out_counts[have] = sums[pos[have]], counts[pos[have]]
    if not have.all():  # background terms now that were not then: over their postings
        out_sums[~have], out_counts[~have] = token_direction_sums(
            np.asarray(terms)[~have], lex.post_indptr, lex.post_docs, new.dense.embeddings)
    return DirectionSums(want.astype(np.int32), out_sums, out_counts, total, len(new))


def summed(new: Any, to_layout: np.ndarray, terms: np.ndarray) -> DirectionSums:
    """The sums of ``new``'s background ``terms`` over its postings (as a build sums them)."""
    from skillsight_fast.kernels import token_direction_sums

    lex = new.lexical.lexicon
    docs = new.dense.embeddings
    sums, counts = token_direction_sums(terms, lex.post_indptr, lex.post_docs, docs)
    total = np.zeros(docs.shape[1], np.float64)
    for a in range(0, docs.shape[0], 65536):  # float64 in blocks, not a whole float64 copy
        total += np.asarray(docs[a:a + 65536], np.float64).sum(axis=0)
    layout_terms = np.asarray(to_layout, np.int64)[np.asarray(terms, np.int64)].astype(np.int32)
    return DirectionSums(layout_terms, sums, counts, total, len(new))


def current_sums(new: Any, out: Path, plan: dict[str, Any], gone: np.ndarray, fresh: np.ndarray,
                 to_layout: np.ndarray, n_layout: int) -> tuple[DirectionSums, str]:
    """The direction sums of the updated index ``new`` and how they were had: ``"moved"`` (the sums the
    layout kept for the version ``plan`` names, moved by the update's rows) or ``"summed"`` (over the
    postings). The terms are the background terms a build of ``new`` would select."""
    from skillsight_fast.engine.background import index_background_terms

    terms = index_background_terms(new)
    kept = read_sums(out, plan.get("index"))
    if kept is not None and kept.total.shape[0] == new.dense.embeddings.shape[1]:
        try:
            return moved_sums(kept, new, out, plan, gone, fresh, to_layout, n_layout, terms), "moved"
        except _Stale as exc:
            logger.warning("the kept token directions do not add up (%s); summing them over the postings",
                           exc)
        except (IndexFormatError, OSError, ValueError, KeyError) as exc:  # an old shard folder unreadable
            logger.warning("the kept token directions cannot be moved (%s); summing them over the postings",
                           exc)
    return summed(new, to_layout, terms), "summed"
