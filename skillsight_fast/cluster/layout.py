"""Shard folders on disk: each shard's own rows in its own folder, plus a small shared part.

A sharded index is a folder::

    shards.json              the layout: the shards' row ranges and folder names, the shared part's name
    shared/                  the library-wide statistics every shard scores with
        manifest.json        avgdl, the vocabulary size, the checksums of the arrays below
        weights.npy          LEC weights per term (float32 (V,))
        bm25_idf.npy         BM25 idf per term (float32 (V,), empty without term frequencies)
    shard-000/ ...           one folder per shard, holding only its rows [start, stop)
        manifest.json        start, stop, scan kind, the checksums of the arrays below
        perp.npy raw.npy     background-removed and raw embeddings (float32 (n, d))
        doc_indptr.npy doc_terms.npy doc_tf.npy doc_len.npy   its document -> terms lists
        post_indptr.npy post_docs.npy                          its postings (global row ids)
        codes.npy scales.npy                                   int8 scan only

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


def shards_folder(directory: str | os.PathLike[str]) -> Path:
    """Where ``skillsight split`` puts the shard folders of the index in ``directory``: ``DIR.shards``."""
    d = Path(directory).expanduser().absolute()
    return d.parent / (d.name + SHARDS_SUFFIX)
#: The folder of the library-wide statistics.
SHARED = "shared"
#: Format of the layout (bumped on an incompatible change).
LAYOUT_FORMAT = 1


def shard_ranges(n: int, shards: int) -> list[tuple[int, int]]:
    """``shards`` contiguous row ranges covering ``0..n`` (sizes differ by at most one)."""
    if shards < 1:
        raise SkillsightError("the number of shards must be at least 1")
    bounds = np.linspace(0, n, shards + 1).round().astype(np.int64)
    return [(int(a), int(b)) for a, b in itertools.pairwise(bounds.tolist())]


def global_stats(index: Any) -> dict[str, Any]:
    """What every shard scores with: the library's LEC weights, BM25 idf and mean document length."""
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
                               f"this version reads {LAYOUT_FORMAT}")
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


def shard_arrays(index: Any, start: int, stop: int) -> dict[str, np.ndarray]:
    """The arrays of rows ``[start, stop)`` of a loaded index, as a shard folder holds them."""
    from skillsight_fast.kernels import transpose_csr

    lex = index.lexical.lexicon
    a, b = int(lex.doc_indptr[start]), int(lex.doc_indptr[stop])
    doc_indptr = np.asarray(lex.doc_indptr[start : stop + 1], np.int64) - a
    doc_terms = np.ascontiguousarray(lex.doc_terms[a:b], np.int32)
    post_indptr, post_docs = transpose_csr(doc_indptr, doc_terms, len(lex.vocab))
    out = {
        "perp": np.asarray(index.dense.embeddings_perp[start:stop], np.float32),
        "raw": np.asarray(index.dense.embeddings[start:stop], np.float32),
        "doc_indptr": doc_indptr, "doc_terms": doc_terms,
        "post_indptr": np.asarray(post_indptr, np.int64),
        "post_docs": (np.asarray(post_docs, np.int64) + start).astype(np.int32),  # global rows, ascending per term
    }
    if lex.doc_tf is not None:
        out["doc_tf"] = np.asarray(lex.doc_tf[a:b])
    if lex.doc_len is not None:
        out["doc_len"] = np.asarray(lex.doc_len[start:stop])
    scan = index.scan
    if scan.kind == "int8":
        out["codes"] = np.asarray(scan.codes[start:stop])
        out["scales"] = np.asarray(scan.scales[start:stop])
    return out


def write_shared(folder: Path, stats: dict[str, Any]) -> dict[str, Any]:
    """Write the shared part (:func:`global_stats`)."""
    weights = np.asarray(stats["weights"], np.float32)
    return _write_arrays(folder, {"weights": weights, "bm25_idf": np.asarray(stats["bm25_idf"], np.float32)},
                         {"avgdl": float(stats["avgdl"]), "n_terms": int(weights.shape[0])})


def write_shard(folder: Path, index: Any, start: int, stop: int) -> dict[str, Any]:
    """Write rows ``[start, stop)`` of ``index`` as a shard folder; returns its manifest."""
    scan = index.scan.kind
    if scan not in ("exact", "int8"):
        raise IndexFormatError(f"shard folders hold the exact and int8 scans, not {scan!r} "
                               f"(skillsight rescan -i IDX --scan int8)")
    return _write_arrays(folder, shard_arrays(index, start, stop),
                         {"start": int(start), "stop": int(stop), "scan": scan,
                          "n_terms": len(index.lexical.lexicon.vocab)})


def split_index(directory: str | os.PathLike[str], output: str | os.PathLike[str], shards: int) -> dict[str, Any]:
    """Split the index in ``directory`` into ``shards`` shard folders and a shared part under ``output``.

    ``output`` may be the index folder itself (the layout goes next to the index's own files) or a new
    folder. Returns the layout (``shards.json``).
    """
    from skillsight_fast.engine.index import SkillIndex

    index = SkillIndex.load(Path(directory), mmap=True)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("shard-[0-9][0-9][0-9]"), out / SHARED]:
        if old.is_dir():
            shutil.rmtree(old)
    write_shared(out / SHARED, global_stats(index))
    entries = []
    for i, (a, b) in enumerate(shard_ranges(len(index), shards)):
        name = shard_folder_name(i)
        write_shard(out / name, index, a, b)
        entries.append({"folder": name, "start": a, "stop": b})
    layout = {"format": LAYOUT_FORMAT, "n_skills": len(index), "shared": SHARED, "shards": entries,
              "scan": index.scan.kind}
    atomic_write_bytes(out / LAYOUT, json.dumps(layout, indent=1).encode("utf-8"))
    return layout


def read_layout(directory: str | os.PathLike[str]) -> dict[str, Any]:
    """The layout (``shards.json``) of a sharded index folder; IndexFormatError when there is none."""
    path = Path(directory) / LAYOUT
    try:
        layout = json.loads(path.read_text(encoding="utf-8"))
        entries = layout["shards"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise IndexFormatError(f"{path}: no shard layout ({type(exc).__name__}; "
                               "write one with skillsight split)") from None
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
    """Bring the shard folders under ``output`` up to the index in ``directory`` after an update,
    rewriting only the shards whose bytes changed (and the shared part only if it changed).

    The rows keep the layout's shard count, cut by :func:`shard_ranges` over the new size. A shard whose
    range, rows and statistics are unchanged keeps its folder untouched (not even rewritten); when the
    library-wide statistics moved (any content change under ``skillsight update``: the background
    basis moves every row's background-removed vector) every shard is rewritten. Returns the rewritten
    shards (ascending) and whether the shared part changed (then every shard must re-open it).
    """
    from skillsight_fast.engine.index import SkillIndex

    out = Path(output)
    plan = read_layout(out)
    index = SkillIndex.load(Path(directory), mmap=True)
    stats = global_stats(index)
    shared_arrays = {"weights": np.asarray(stats["weights"], np.float32),
                     "bm25_idf": np.asarray(stats["bm25_idf"], np.float32)}
    shared_meta = {"avgdl": float(stats["avgdl"]), "n_terms": int(shared_arrays["weights"].shape[0])}
    shared_changed = not _unchanged(out / plan["shared"], shared_arrays, shared_meta)
    if shared_changed:
        _write_arrays(out / plan["shared"], shared_arrays, shared_meta)
    rewritten, entries = [], []
    for i, (a, b) in enumerate(shard_ranges(len(index), len(plan["shards"]))):
        name = shard_folder_name(i)
        arrays = shard_arrays(index, a, b)
        meta = {"start": a, "stop": b, "scan": index.scan.kind, "n_terms": len(index.lexical.lexicon.vocab)}
        if not _unchanged(out / name, arrays, meta):
            if (out / name).is_dir():
                shutil.rmtree(out / name)
            _write_arrays(out / name, arrays, meta)
            rewritten.append(i)
        entries.append({"folder": name, "start": a, "stop": b})
    layout = {**plan, "n_skills": len(index), "shards": entries, "scan": index.scan.kind}
    atomic_write_bytes(out / LAYOUT, json.dumps(layout, indent=1).encode("utf-8"))
    return rewritten, shared_changed
