"""On-disk index format: one ``.npy`` per array plus ``manifest.json``; never pickle.

Layout of an index folder::

    manifest.json     format_version, package version, model, config, stats, arrays
                      (file, dtype, shape, sha256 of each)
    vocab.json        the sorted terms
    skills.jsonl      one {id, name, description, path, sha256} per row
    *.npy             the arrays

Saving writes a sibling temporary folder, fsyncs it, then swaps it in with renames, so a crash
leaves either the old or the new index, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast import __version__
from skillsight_fast.config import IndexConfig
from skillsight_fast.errors import IndexFormatError

if TYPE_CHECKING:
    from skillsight_fast.index import SkillIndex

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# name -> (dtype, number of dimensions, memory-mappable)
ARRAYS: dict[str, tuple[str, int]] = {
    "embeddings": ("float32", 2),
    "embeddings_perp": ("float32", 2),
    "basis": ("float32", 2),
    "singular_values": ("float32", 1),
    "idf": ("float32", 1),
    "weights": ("float32", 1),
    "generic": ("bool", 1),
    "doc_indptr": ("int64", 1),
    "doc_terms": ("int32", 1),
    "post_indptr": ("int64", 1),
    "post_docs": ("int32", 1),
}


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _arrays_of(index: "SkillIndex") -> dict[str, np.ndarray]:
    lex = index.lexicon
    return {
        "embeddings": index.embeddings,
        "embeddings_perp": index.embeddings_perp,
        "basis": index.basis,
        "singular_values": index.singular_values,
        "idf": index.idf,
        "weights": index.weights,
        "generic": index.generic,
        "doc_indptr": lex.doc_indptr,
        "doc_terms": lex.doc_terms,
        "post_indptr": lex.post_indptr,
        "post_docs": lex.post_docs,
    }


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_file(path: Path, data: bytes) -> None:
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def save_index(index: "SkillIndex", directory: Path) -> Path:
    """Write ``index`` to ``directory`` atomically and return the folder."""
    directory = directory.expanduser().absolute()
    directory.parent.mkdir(parents=True, exist_ok=True)
    if directory.exists() and not directory.is_dir():
        raise IndexFormatError(f"{directory} exists and is not a folder")
    if directory.is_dir() and any(directory.iterdir()) and not (directory / MANIFEST).is_file():
        raise IndexFormatError(f"{directory} is a non-empty folder that holds no index; refusing to overwrite it")
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        entries: dict[str, Any] = {}
        for name, arr in _arrays_of(index).items():
            dtype, ndim = ARRAYS[name]
            a = np.ascontiguousarray(arr, dtype=dtype)
            file = tmp / f"{name}.npy"
            with open(file, "wb") as fh:
                np.save(fh, a, allow_pickle=False)
                fh.flush()
                os.fsync(fh.fileno())
            entries[name] = {"file": file.name, "dtype": dtype, "shape": list(a.shape), "sha256": _sha256(file)}
        vocab = json.dumps(index.lexicon.vocab, ensure_ascii=False).encode("utf-8")
        _write_file(tmp / "vocab.json", vocab)
        skills = "".join(
            json.dumps({"id": s.id, "name": s.name, "description": s.description, "path": s.path,
                        "sha256": s.sha256}, ensure_ascii=False) + "\n"
            for s in index.skills
        ).encode("utf-8")
        _write_file(tmp / "skills.jsonl", skills)
        manifest = {
            "format": "skillsight-fast-index",
            "format_version": FORMAT_VERSION,
            "package_version": __version__,
            "model": {"id": index.model_id, "checksum": index.model_checksum, "dim": index.stats.dim},
            "config": index.config.to_dict(),
            "stats": index.stats.to_dict(),
            "n_skills": len(index.skills),
            "arrays": entries,
            "files": {
                "vocab.json": hashlib.sha256(vocab).hexdigest(),
                "skills.jsonl": hashlib.sha256(skills).hexdigest(),
            },
        }
        _write_file(tmp / MANIFEST, json.dumps(manifest, indent=2, allow_nan=True).encode("utf-8"))
        _fsync_dir(tmp)
        _swap_in(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return directory


def _swap_in(tmp: Path, directory: Path) -> None:
    """Replace ``directory`` by ``tmp`` with renames; the old index survives until the swap."""
    if directory.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{directory.name}.old-", dir=directory.parent))
        old.rmdir()
        os.rename(directory, old)
        try:
            os.rename(tmp, directory)
        except BaseException:
            os.rename(old, directory)
            raise
        _fsync_dir(directory.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(tmp, directory)
        _fsync_dir(directory.parent)


def recover(directory: Path) -> None:
    """If a crash left only the renamed-away old index, put it back."""
    if directory.exists():
        return
    olds = sorted(directory.parent.glob(f".{directory.name}.old-*"), key=lambda p: p.stat().st_mtime)
    if olds and (olds[-1] / MANIFEST).is_file():
        os.rename(olds[-1], directory)


def read_manifest(directory: Path) -> dict[str, Any]:
    """Read and check an index manifest (format and version)."""
    directory = directory.expanduser()
    recover(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        raise IndexFormatError(f"{directory}: no such index folder")
    if not path.is_file():
        raise IndexFormatError(f"{directory}: not an index (no {MANIFEST})")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"{path}: unreadable manifest ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != "skillsight-fast-index":
        raise IndexFormatError(f"{path}: not a skillsight-fast manifest")
    version = manifest.get("format_version")
    if version != FORMAT_VERSION:
        raise IndexFormatError(
            f"{directory}: index format version {version!r}, this skillsight-fast reads version "
            f"{FORMAT_VERSION}; rebuild the index with `skillsight index`"
        )
    return manifest


def _load_array(directory: Path, name: str, entry: dict[str, Any], mmap: bool, verify: bool) -> np.ndarray:
    dtype, ndim = ARRAYS[name]
    path = directory / entry["file"]
    if not path.is_file():
        raise IndexFormatError(f"{directory}: array file {entry['file']} is missing")
    if verify and _sha256(path) != entry.get("sha256"):
        raise IndexFormatError(f"{path}: checksum mismatch (the file is corrupt or was changed)")
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise IndexFormatError(f"{path}: unreadable or truncated array ({exc})") from None
    if arr.dtype != np.dtype(dtype) or arr.ndim != ndim or list(arr.shape) != list(entry["shape"]):
        raise IndexFormatError(
            f"{path}: expected {dtype} {tuple(entry['shape'])}, found {arr.dtype} {arr.shape}"
        )
    return arr


def load_index(directory: Path, *, mmap: bool = False, verify: bool = True) -> "SkillIndex":
    """Load an index folder; every inconsistency raises :class:`IndexFormatError`."""
    from skillsight_fast.index import IndexStats, SkillIndex, SkillMeta
    from skillsight_fast.lexicon import Lexicon

    directory = directory.expanduser()
    manifest = read_manifest(directory)
    try:
        entries = manifest["arrays"]
        arrays = {name: _load_array(directory, name, entries[name], mmap, verify) for name in ARRAYS}
        raw_vocab = (directory / "vocab.json").read_bytes()
        raw_skills = (directory / "skills.jsonl").read_bytes()
        if verify:
            for fname, raw in (("vocab.json", raw_vocab), ("skills.jsonl", raw_skills)):
                if hashlib.sha256(raw).hexdigest() != manifest["files"][fname]:
                    raise IndexFormatError(f"{directory / fname}: checksum mismatch")
        vocab = json.loads(raw_vocab)
        skills = [SkillMeta(**json.loads(line)) for line in raw_skills.decode("utf-8").splitlines() if line]
        config = IndexConfig.from_dict(manifest["config"])
        stats = IndexStats(**manifest["stats"])
        model = manifest["model"]
    except IndexFormatError:
        raise
    except (KeyError, TypeError, ValueError, OSError) as exc:
        raise IndexFormatError(f"{directory}: inconsistent index ({type(exc).__name__}: {exc})") from None
    n, d = len(skills), stats.dim
    checks = [
        (arrays["embeddings"].shape == (n, d), "embeddings"),
        (arrays["embeddings_perp"].shape == (n, d), "embeddings_perp"),
        (arrays["doc_indptr"].shape == (n + 1,), "doc_indptr"),
        (arrays["post_indptr"].shape == (len(vocab) + 1,), "post_indptr"),
        (arrays["idf"].shape == (len(vocab),), "idf"),
        (arrays["basis"].shape[1:] == (d,), "basis"),
    ]
    for ok, name in checks:
        if not ok:
            raise IndexFormatError(f"{directory}: array {name} does not match {n} skills / {len(vocab)} terms")
    lexicon = Lexicon(vocab, arrays["doc_indptr"], arrays["doc_terms"], arrays["post_indptr"], arrays["post_docs"])
    return SkillIndex(
        skills=skills, embeddings=arrays["embeddings"], embeddings_perp=arrays["embeddings_perp"],
        basis=arrays["basis"], singular_values=arrays["singular_values"], lexicon=lexicon,
        idf=arrays["idf"], weights=arrays["weights"], generic=arrays["generic"], config=config,
        stats=stats, model_id=model["id"], model_checksum=model["checksum"],
    )
