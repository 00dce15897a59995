"""Shard folders on disk: each shard's own rows in its own folder, plus a small shared part.

A sharded index is a folder::

    shards.json              the layout: the shards' row ranges and folder names, the shared part's name,
                             the rows a shard takes before a new one is started (``capacity``)
    shared/                  the library-wide statistics every shard scores with
        manifest.json        avgdl, the layout's term count, the checksums of the arrays below
        weights.npy          LEC weights per layout term (float32 (V,))
        bm25_idf.npy         BM25 idf per layout term (float32 (V,), empty without term frequencies)
        head_term.npy        per layout term, its id in the index's vocabulary (int32 (V,), -1: gone)
        vocab_blob.npy vocab_offsets.npy   the layout's terms (UTF-8 blob and offsets)
    shard-000/ ...           one folder per shard, holding only its rows (local ids 0..rows)
        manifest.json        rows, scan kind, term count, the checksums of the arrays below
        perp.npy raw.npy     background-removed and raw embeddings (float32 (n, d))
        doc_indptr.npy doc_terms.npy doc_tf.npy doc_len.npy   its document -> terms lists (layout term ids)
        post_indptr.npy post_docs.npy                          its postings (local rows)
        codes.npy scales.npy                                   int8 and binary scans
        bits.npy                                               binary scan: its rows' sign bits
        cell_indptr.npy cell_rows.npy                          IVF scan: its rows by the library's cell

A shard folder names no global row and no index vocabulary id: where its rows start is the layout's
(``shards.json``), and its term ids are the layout's, which an update only extends (a new term gets the
next id; :mod:`skillsight_fast.cluster.update`). So an update that removes rows of one shard, or adds
a term, leaves every other shard folder byte for byte as it was; the shared part maps the layout's term
ids to the index's (``head_term``), and carries the library-wide LEC weights and BM25 idf in layout ids,
recomputed at every update (they are per-term sums: cheap).

Arrays are ``.npy`` (read memory-mapped, never pickled) and every one is checked against the
SHA-256 its manifest records when the folder is opened: a folder that fails is refused with one
line (:class:`~skillsight_fast.errors.IndexFormatError`). :func:`split_index` writes the layout from
an index folder (an existing index, or the one a single-machine or Ray build just saved); a shard
actor opens only its own folder and the shared part (:meth:`ShardEngine.from_folder
<skillsight_fast.cluster.shard.ShardEngine.from_folder>`).

The shared part is what must be the whole library's for a shard to score a row as the single index
does (docs/LARGE.md, "Shard folders"); the background basis, the vocabulary and the abstention rule
stay in the coordinator's index folder, which the shards never read.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import IndexFormatError, SkillsightError
from skillsight_fast.files import atomic_write_bytes, sha256_file

#: The layout's file at the top of a sharded index folder.
LAYOUT = "shards.json"
#: Suffix of the folder next to an index folder where ``skillsight split`` writes its shard folders
#: (``IDX.shards``: beside the index, not in it, since a save or an update swaps the index folder whole).
SHARDS_SUFFIX = ".shards"
#: The folder of the library-wide statistics.
SHARED = "shared"
#: The folder of a layout that keeps the background token directions' sums for the next update's drift
#: rule (skillsight_fast.cluster.drift).
DIRECTIONS = "directions"
#: The scans a shard folder holds.
SCANS = ("exact", "int8", "binary", "ivf")
#: Format of the layout (bumped on an incompatible change; 2: local rows, layout term ids).
LAYOUT_FORMAT = 2


def shards_folder(directory: str | os.PathLike[str]) -> Path:
    """Where ``skillsight split`` puts the shard folders of the index in ``directory``: ``DIR.shards``."""
    d = Path(directory).expanduser().absolute()
    return d.parent / (d.name + SHARDS_SUFFIX)


def index_digest(directory: str | os.PathLike[str]) -> str | None:
    """The SHA-256 of an index folder's manifest (it names every array's checksum): the layout records
    the index version its folders were written from (``shards.json``'s ``index``)."""
    try:
        return sha256_file(Path(directory) / "manifest.json")
    except OSError:
        return None


def shard_ranges(n: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous row ranges covering ``0..n`` (sizes differ by at most one)."""
    if shards < 1:
        raise SkillsightError("the number of shards must be at least 1")
    bounds = np.linspace(0, n, shards + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds.tolist())]


def global_stats(index: Any) -> dict[str, Any]:
    """What every shard scores with: the library's LEC weights, BM25 idf and mean document length
    (per term of the index's vocabulary)."""
    idf, avgdl = index.lexical.bm25 if index.lexical.lexicon.has_tf else (np.zeros(0, np.float32), 1.0)
    return {"weights": np.asarray(index.lexical.weights, np.float32), "bm25_idf": np.asarray(idf, np.float32),
            "avgdl": float(avgdl)}


def shard_folder_name(i: int) -> str:
    return f"shard-{i:03d}"


def _write_arrays(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any]:
    """Write ``arrays`` as .npy files and a manifest with their checksums; returns the manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, a in arrays.items():
        path = folder / f"{name}.npy"
        np.save(path, np.ascontiguousarray(a), allow_pickle=False)
        files[name] = {"sha256": sha256_file(path), "shape": list(a.shape), "dtype": str(a.dtype)}
    manifest = {"format": LAYOUT_FORMAT, **meta, "arrays": files}
    atomic_write_bytes(folder / "manifest.json", json.dumps(manifest, indent=1).encode("utf-8"))
    return manifest


def _replace_folder(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> dict[str, Any]:
    """Write ``folder`` anew (an old one is removed first)."""
    if folder.is_dir():
        shutil.rmtree(folder)
    return _write_arrays(folder, arrays, meta)


def read_folder(folder: str | os.PathLike[str], *, verify: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The manifest and the arrays (memory-mapped) of a shard or shared folder.

    Raises
    ------
    IndexFormatError
        The manifest is missing or unreadable, an array is missing, or (``verify``) its checksum,
        shape or dtype is not the manifest's.
    """
    folder = Path(folder)
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        files = manifest["arrays"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IndexFormatError(f"{folder}: not a shard folder ({type(exc).__name__}: {exc})") from None
    if manifest.get("format") != LAYOUT_FORMAT:
        raise IndexFormatError(f"{folder}: shard folder format {manifest.get('format')!r}, "
                               f"this version reads {LAYOUT_FORMAT} (write the folders anew: skillsight split)")
    arrays = {}
    for name, entry in files.items():
        path = folder / f"{name}.npy"
        try:
            if verify and sha256_file(path) != entry["sha256"]:
                raise IndexFormatError(f"{path}: checksum mismatch (the file changed after it was written)")
            a = np.load(path, mmap_mode="r", allow_pickle=False)
        except OSError as exc:
            raise IndexFormatError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except ValueError as exc:
            raise IndexFormatError(f"{path}: not a readable array ({exc})") from None
        if list(a.shape) != entry["shape"] or str(a.dtype) != entry["dtype"]:
            raise IndexFormatError(f"{path}: {a.dtype} {a.shape}, the manifest says {entry['dtype']} "
                                   f"{tuple(entry['shape'])}")
        arrays[name] = a
    return manifest, arrays


def _sort_rows(doc_indptr: np.ndarray, terms: np.ndarray, *others: np.ndarray) -> list[np.ndarray]:
    """Each row's entries sorted by term id (``others`` carried along): the kernels read sorted rows."""
    n = doc_indptr.shape[0] - 1
    row = np.repeat(np.arange(n, dtype=np.int64), np.diff(doc_indptr))
    order = np.lexsort((terms, row))
    return [terms[order], *(o[order] for o in others)]


def shard_arrays(index: Any, start: int, stop: int, to_layout: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The arrays of rows ``[start, stop)`` of a loaded index, as a shard folder holds them: local rows,
    and term ids mapped by ``to_layout`` (the index's term id -> the layout's; None: the same ids)."""
    lex = index.lexical.lexicon
    a, b = int(lex.doc_indptr[start]), int(lex.doc_indptr[stop])
    doc_indptr = np.asarray(lex.doc_indptr[start : stop + 1], np.int64) - a
    doc_terms = np.ascontiguousarray(lex.doc_terms[a:b], np.int32)
    doc_tf = np.asarray(lex.doc_tf[a:b]) if lex.doc_tf is not None else None
    n_terms = len(lex.vocab)
    if to_layout is not None:
        n_terms = int(to_layout.max()) + 1 if to_layout.size else 0
        doc_terms = np.asarray(to_layout, np.int32)[doc_terms]
        if doc_tf is not None:
            doc_terms, doc_tf = _sort_rows(doc_indptr, doc_terms, doc_tf)
        else:
            (doc_terms,) = _sort_rows(doc_indptr, doc_terms)
        doc_terms = np.ascontiguousarray(doc_terms, np.int32)
    scan = index.scan
    scans: dict[str, np.ndarray] = {}
    if scan.kind in ("int8", "binary"):
        scans["codes"], scans["scales"] = np.asarray(scan.codes[start:stop]), np.asarray(scan.scales[start:stop])
    if scan.kind == "binary":
        scans["bits"] = np.asarray(scan.bits[start:stop])
    return folder_arrays(
        np.asarray(index.dense.embeddings_perp[start:stop], np.float32),
        np.asarray(index.dense.embeddings[start:stop], np.float32), doc_indptr, doc_terms, doc_tf,
        None if lex.doc_len is None else np.asarray(lex.doc_len[start:stop]), n_terms, scan.kind,
        cells=ivf_cells(scan)[start:stop] if scan.kind == "ivf" else None,
        nlist=getattr(scan, "nlist", None), scans=scans)


def folder_arrays(perp: np.ndarray, raw: np.ndarray, doc_indptr: np.ndarray, doc_terms: np.ndarray,
                  doc_tf: np.ndarray | None, doc_len: np.ndarray | None, n_terms: int, scan: str, *,
                  cells: np.ndarray | None = None, nlist: int | None = None,
                  scans: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """A shard folder's arrays from its rows: background-removed and raw vectors, document -> terms
    lists (local rows, sorted term ids of the layout), and for the ``scan`` its own arrays: ``scans``
    (``codes``, ``scales``, ``bits``) when given (a split reads the index's), else computed from
    ``perp`` row by row as the index's scan computes them (a Ray build's shard writer); the IVF scan's
    ``cells`` (the library's cell of each row, ``nlist`` cells). The postings are the lists transposed."""
    from skillsight_fast.kernels import transpose_csr

    post_indptr, post_docs = transpose_csr(doc_indptr, doc_terms, n_terms)
    out = {
        "perp": np.ascontiguousarray(perp, np.float32),
        "raw": np.ascontiguousarray(raw, np.float32),
        "doc_indptr": np.asarray(doc_indptr, np.int64), "doc_terms": np.ascontiguousarray(doc_terms, np.int32),
        "post_indptr": np.asarray(post_indptr, np.int64),
        "post_docs": np.asarray(post_docs, np.int32),  # local rows, ascending per term
    }
    if doc_tf is not None:
        out["doc_tf"] = np.ascontiguousarray(doc_tf)
    if doc_len is not None:
        out["doc_len"] = np.asarray(doc_len)
    scans = dict(scans or {})
    if scan in ("int8", "binary") and "codes" not in scans:
        from skillsight_fast.kernels.compressed import quantize_int8

        scans["codes"], scans["scales"] = quantize_int8(out["perp"])
    if scan == "binary" and "bits" not in scans:
        from skillsight_fast.kernels.binary import pack_signs

        scans["bits"] = pack_signs(out["perp"])
    out.update(scans)
    if scan == "ivf":  # its rows grouped by the cell the library's IVF structure put them in
        if cells is None or nlist is None:
            raise SkillsightError("an IVF shard folder needs the cell of each of its rows")
        order = np.argsort(cells, kind="stable")  # local rows, ascending within a cell
        out["cell_indptr"] = np.concatenate([[0], np.cumsum(np.bincount(cells, minlength=nlist))]).astype(np.int64)
        out["cell_rows"] = order.astype(np.int32)
    return out


def ivf_cells(scan: Any) -> np.ndarray:
    """The cell of every row of an IVF scan (int32 (N,)), read from its inverted lists once."""
    cells = getattr(scan, "_row_cells", None)
    if cells is None:
        import faiss

        inv = scan.ivf.invlists
        cells = np.full(scan.n_docs, -1, np.int32)
        for c in range(scan.nlist):
            size = inv.list_size(c)
            if size:
                cells[faiss.rev_swig_ptr(inv.get_ids(c), size).copy()] = c
        if (cells < 0).any():
            raise IndexFormatError("the IVF structure leaves rows out of every cell")
        scan._row_cells = cells
    return cells


def vocab_arrays(vocab: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(blob, offsets)`` of a vocabulary (a string column's own arrays, else encoded)."""
    from skillsight_fast.engine.columns import StringColumn, encode_strings

    if isinstance(vocab, StringColumn):
        return np.asarray(vocab.blob, np.uint8), np.asarray(vocab.offsets, np.int64)
    return encode_strings(vocab)


def shared_arrays(stats: dict[str, Any], head_term: np.ndarray, vocab_blob: np.ndarray,
                  vocab_offsets: np.ndarray) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The arrays and manifest fields of the shared part: ``stats`` (:func:`global_stats`, per index
    term) laid out per layout term through ``head_term`` (layout id -> index id, -1: gone, weight 0)."""
    head_term = np.asarray(head_term, np.int32)
    live = head_term >= 0

    def per_layout(values: np.ndarray) -> np.ndarray:
        v = np.asarray(values, np.float32)
        if not v.size:
            return v
        out = np.zeros(head_term.shape[0], np.float32)
        out[live] = v[head_term[live]]
        return out

    arrays = {"weights": per_layout(stats["weights"]), "bm25_idf": per_layout(stats["bm25_idf"]),
              "head_term": head_term, "vocab_blob": np.asarray(vocab_blob, np.uint8),
              "vocab_offsets": np.asarray(vocab_offsets, np.int64)}
    return arrays, {"avgdl": float(stats["avgdl"]), "n_terms": int(head_term.shape[0])}


def write_shared(folder: Path, stats: dict[str, Any], vocab: Any, library: str) -> dict[str, Any]:
    """Write the shared part of a layout whose terms are the index's vocabulary ``vocab`` (a split)."""
    blob, offsets = vocab_arrays(vocab)
    arrays, meta = shared_arrays(stats, np.arange(offsets.shape[0] - 1, dtype=np.int32), blob, offsets)
    return _write_arrays(folder, arrays, {**meta, "library": library})


def shard_meta(index: Any, start: int, stop: int, n_terms: int, library: str) -> dict[str, Any]:
    return {"rows": int(stop - start), "scan": index.scan.kind, "n_terms": int(n_terms), "library": library}


def write_shard(folder: Path, index: Any, start: int, stop: int, *, library: str,
                to_layout: np.ndarray | None = None) -> dict[str, Any]:
    """Write rows ``[start, stop)`` of ``index`` as a shard folder; returns its manifest."""
    check_scan(index)
    arrays = shard_arrays(index, start, stop, to_layout)
    return _replace_folder(folder, arrays, shard_meta(index, start, stop, arrays["post_indptr"].shape[0] - 1,
                                                      library))


def check_scan(index: Any) -> None:
    scan = index.scan.kind
    if scan not in SCANS:
        raise IndexFormatError(f"shard folders hold the exact, int8, binary and IVF scans, not {scan!r} "
                               f"(skillsight rescan -i IDX --scan int8)")


def write_layout(out: Path, layout: dict[str, Any]) -> None:
    atomic_write_bytes(out / LAYOUT, json.dumps(layout, indent=1).encode("utf-8"))


def split_index(directory: str | os.PathLike[str], output: str | os.PathLike[str], shards: int) -> dict[str, Any]:
    """Split the index in ``directory`` into ``shards`` shard folders and a shared part under ``output``.

    ``output`` may be the index folder itself (the layout goes next to the index's own files) or a new
    folder. Returns the layout (``shards.json``); its ``capacity`` (the largest shard's rows) is how many
    rows an update puts in the last shard before it starts a new one.
    """
    from skillsight_fast.engine.index import SkillIndex

    index = SkillIndex.load(Path(directory), mmap=True)
    check_scan(index)
    out = Path(output)
    library = clear_layout(out)
    write_shared(out / SHARED, global_stats(index), index.lexical.lexicon.vocab, library)
    ranges = shard_ranges(len(index), shards)
    for i, (a, b) in enumerate(ranges):
        write_shard(out / shard_folder_name(i), index, a, b, library=library)
    layout = new_layout(ranges, index.scan.kind, library, index_digest(directory))
    write_layout(out, layout)
    return layout


def clear_layout(out: Path) -> str:
    """Make ``out`` ready for a layout written anew: its shard folders, shared part and layout file go;
    returns the library's name (the one the layout there had, else a new one)."""
    out.mkdir(parents=True, exist_ok=True)
    try:  # written anew, a layout keeps its name (its folders are all rewritten)
        library = str(json.loads((out / LAYOUT).read_text(encoding="utf-8"))["library"])
    except (OSError, ValueError, KeyError, TypeError):
        library = uuid.uuid4().hex
    (out / LAYOUT).unlink(missing_ok=True)  # no layout names the folders until they are all written
    for old in [*out.glob("shard-[0-9][0-9][0-9]"), out / SHARED, out / DIRECTIONS]:
        if old.is_dir():
            shutil.rmtree(old)
    return library


def new_layout(ranges: list[tuple[int, int]], scan: str, library: str, index: str | None) -> dict[str, Any]:
    """The layout (``shards.json``) of shard folders holding ``ranges`` of the index version ``index``."""
    return {"format": LAYOUT_FORMAT, "n_skills": ranges[-1][1] if ranges else 0, "shared": SHARED,
            "shards": [{"folder": shard_folder_name(i), "start": a, "stop": b} for i, (a, b) in enumerate(ranges)],
            "scan": scan, "library": library, "capacity": max(1, max(b - a for a, b in ranges)), "index": index}


def read_layout(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The layout (``shards.json``) of a sharded index folder; IndexFormatError when there is none."""
    path = Path(directory) / LAYOUT
    try:
        layout = json.loads(path.read_text(encoding="utf-8"))
        entries = layout["shards"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IndexFormatError(f"{path}: no shard layout ({type(exc).__name__}; "
                               "write one with skillsight split)") from None
    if layout.get("format") != LAYOUT_FORMAT:
        raise IndexFormatError(f"{path}: layout format {layout.get('format')!r}, this version reads "
                               f"{LAYOUT_FORMAT} (write the folders anew: skillsight split)")
    stops = [0] + [e["stop"] for e in entries]
    if any(e["start"] != s for e, s in zip(entries, stops)) or stops[-1] != layout["n_skills"]:
        raise IndexFormatError(f"{path}: the shards' rows do not cover 0..{layout['n_skills']} in order")
    return layout


def _npy_sha256(a: np.ndarray) -> str:
    """The SHA-256 of ``a`` saved as a .npy file (what a manifest records), computed in memory."""
    import hashlib
    import io

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return hashlib.sha256(buf.getbuffer()).hexdigest()


def _unchanged(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> bool:
    """Whether ``folder`` already holds exactly ``arrays`` with ``meta`` (by its manifest's checksums)."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if any(manifest.get(k) != v for k, v in meta.items()) or set(manifest.get("arrays", {})) != set(arrays):
        return False
    return all(manifest["arrays"][name]["sha256"] == _npy_sha256(a) for name, a in arrays.items())


def refresh_layout(directory: str | os.PathLike[str], output: str | os.PathLike[str]) -> tuple[list[int], bool]:
    """Bring the shard folders under ``output`` up to the index in ``directory`` after an update that
    recomputed the statistics (:func:`~skillsight_fast.engine.update.update_index`), rewriting only the
    shards whose bytes changed (and the shared part only if it changed).

    The layout's terms become the index's vocabulary again and the rows are cut anew by
    :func:`shard_ranges` over the new size, with the layout's shard count. A shard whose rows and
    statistics are unchanged keeps its folder untouched (not even rewritten); after a recompute of the
    background basis (it moves every row's background-removed vector) every shard is rewritten.
    :func:`skillsight_fast.cluster.update.update_layout` is the update that holds the statistics and
    rewrites only the shards whose rows changed. Returns the rewritten shards (ascending) and whether
    the shared part changed (then every shard must re-open it).
    """
    from skillsight_fast.engine.index import SkillIndex

    out = Path(output)
    plan = read_layout(out)
    index = SkillIndex.load(Path(directory), mmap=True)
    check_scan(index)
    library = plan["library"]
    # the layout's term ids become the index's: sums kept under the old ids are of no use any more
    shutil.rmtree(out / DIRECTIONS, ignore_errors=True)
    blob, offsets = vocab_arrays(index.lexical.lexicon.vocab)
    shared, smeta = shared_arrays(global_stats(index), np.arange(offsets.shape[0] - 1, dtype=np.int32),
                                  blob, offsets)
    smeta["library"] = library
    shared_changed = not _unchanged(out / plan["shared"], shared, smeta)
    if shared_changed:
        _replace_folder(out / plan["shared"], shared, smeta)
    rewritten, entries = [], []
    ranges = shard_ranges(len(index), len(plan["shards"]))
    for i, (a, b) in enumerate(ranges):
        name = shard_folder_name(i)
        arrays = shard_arrays(index, a, b)
        meta = shard_meta(index, a, b, arrays["post_indptr"].shape[0] - 1, library)
        if not _unchanged(out / name, arrays, meta):
            _replace_folder(out / name, arrays, meta)
            rewritten.append(i)
        entries.append({"folder": name, "start": a, "stop": b})
    layout = {**plan, "n_skills": len(index), "shards": entries, "scan": index.scan.kind,
              "capacity": max(1, max(b - a for a, b in ranges)), "index": index_digest(directory)}
    write_layout(out, layout)
    return rewritten, shared_changed
