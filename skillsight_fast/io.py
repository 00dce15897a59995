"""On-disk index format: one ``.npy`` per array plus ``manifest.json``; never pickle.

Layout of an index folder::

    manifest.json     format_version, package version, model, config, stats, arrays
                      (file, dtype, shape, sha256 of each)
    vocab.json        the sorted terms
    skills.jsonl      one {id, name, description, path, sha256} per row
    texts.jsonl       optional: each skill's Markdown body, one JSON string per row
                      (indexes without it still load; see read_bodies)
    scan_*            optional: the dense candidate scan's own arrays (scan_int8_codes.npy,
                      scan_int8_scales.npy) or files (scan_ivf.faiss, faiss's own format), listed
                      with their sha256 under the manifest's ``scan`` section (no section: exact)
    *.npy             the arrays (doc_tf.npy and doc_len.npy, the term frequencies and
                      document lengths of the BM25 lexical side, are optional: indexes saved
                      before them still load, and their lexical side is LEC)

Saving writes a sibling temporary folder, fsyncs it, then swaps it in, so a crash leaves either
the old or the new index, never a mix. On Linux the swap is one atomic ``renameat2(RENAME_EXCHANGE)``
(the index path never disappears, even for a moment); elsewhere it is two renames, and
:func:`recover` puts the old folder back if a crash fell between them. Saves into the same parent
folder are serialised with an advisory ``flock`` on that folder (released by the kernel if the
process dies), and each save removes the ``.NAME.tmp-*`` / ``.NAME.old-*`` leftovers of crashed
saves. Loading ignores those leftovers, and retries if a save swapped the folder mid-read.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast import __version__
from skillsight_fast.config import LEXICAL_SIDES, IndexConfig
from skillsight_fast.errors import IndexFormatError

if TYPE_CHECKING:
    from skillsight_fast.index import SkillIndex

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
logger = logging.getLogger(__name__)

#: Optional: one JSON string (the skill's Markdown body) per row; read on demand by read_bodies().
TEXTS = "texts.jsonl"
# name -> (dtype, number of dimensions)
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
#: Arrays written when present and read when the manifest lists them (indexes saved before they
#: existed still load; their lexical side is LEC, which does not need them).
OPTIONAL_ARRAYS: dict[str, tuple[str, int]] = {
    "doc_tf": ("uint16", 1),
    "doc_len": ("int32", 1),
}
#: Every array the format knows, required or optional (the scan's arrays: skillsight_fast.scan).
ALL_ARRAYS = ARRAYS | OPTIONAL_ARRAYS


def _scan_arrays() -> dict[str, tuple[str, int]]:
    from skillsight_fast.scan import SCAN_ARRAYS

    return SCAN_ARRAYS


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
        **({"doc_tf": lex.doc_tf, "doc_len": lex.doc_len} if lex.has_tf else {}),
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


def save_index(index: "SkillIndex", directory: Path, extra_files: dict[str, bytes] | None = None) -> Path:
    """Write ``index`` to ``directory`` atomically and return the folder.

    ``extra_files`` (plain file name -> bytes, e.g. ``calibration.json``) are written into the same
    temporary folder, so they appear together with the index in the one swap.
    """
    for name in extra_files or {}:
        _check_side_file_name(name)
    directory = directory.expanduser().absolute()
    directory.parent.mkdir(parents=True, exist_ok=True)
    if directory.exists() and not directory.is_dir():
        raise IndexFormatError(f"{directory} exists and is not a folder")
    if directory.is_dir() and any(directory.iterdir()) and not (directory / MANIFEST).is_file():
        raise IndexFormatError(f"{directory} is a non-empty folder that holds no index; refusing to overwrite it")
    if index.bodies is None and index.source_dir is not None:
        # a loaded index keeps its bodies on disk only: carry them into the new folder
        try:
            index.bodies = read_bodies(index.source_dir)
        except (OSError, IndexFormatError) as exc:
            logger.warning("not carrying texts.jsonl over from %s: %s", index.source_dir, exc)
    with _save_lock(directory.parent):
        _recover_unlocked(directory)
        _remove_leftovers(directory)
        _save_unlocked(index, directory, extra_files or {})
    return directory


def _save_array(folder: Path, name: str, arr: np.ndarray, dtype: str) -> dict[str, Any]:
    """Write ``<name>.npy`` (fsynced) and return its manifest entry."""
    a = arr if arr.dtype == np.dtype(dtype) and arr.flags.c_contiguous else np.ascontiguousarray(arr, dtype=dtype)
    file = folder / f"{name}.npy"
    with open(file, "wb") as fh:
        np.save(fh, a, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())
    return {"file": file.name, "dtype": dtype, "shape": list(a.shape), "sha256": _sha256(file)}


def _save_scan(index: "SkillIndex", folder: Path) -> dict[str, Any]:
    """Write the scan's arrays and files; returns the manifest's ``scan`` section."""
    scan = index.scan
    specs = _scan_arrays()
    arrays = {name: _save_array(folder, name, arr, specs[name][0]) for name, arr in scan.arrays().items()}
    files: dict[str, Any] = {}
    for name in scan.write_files(folder):
        path = folder / name
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())
        files[name] = {"bytes": path.stat().st_size, "sha256": _sha256(path)}
    return {"kind": scan.kind, "params": scan.params(), "arrays": arrays, "files": files}


def _save_unlocked(index: "SkillIndex", directory: Path, extra_files: dict[str, bytes]) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    try:
        for name, data in extra_files.items():
            _write_file(tmp / name, data)
        entries: dict[str, Any] = {}
        for name, arr in _arrays_of(index).items():
            entries[name] = _save_array(tmp, name, arr, ALL_ARRAYS[name][0])
        scan_section = _save_scan(index, tmp)
        vocab = json.dumps(index.lexicon.vocab, ensure_ascii=False).encode("utf-8")
        _write_file(tmp / "vocab.json", vocab)
        skills = "".join(
            json.dumps({"id": s.id, "name": s.name, "description": s.description, "path": s.path,
                        "sha256": s.sha256}, ensure_ascii=False) + "\n"
            for s in index.skills
        ).encode("utf-8")
        _write_file(tmp / "skills.jsonl", skills)
        texts = None
        if index.bodies is not None and len(index.bodies) == len(index.skills):
            texts = "".join(json.dumps(b, ensure_ascii=False) + "\n" for b in index.bodies).encode("utf-8")
            _write_file(tmp / TEXTS, texts)
        manifest = {
            "format": "skillsight-fast-index",
            "format_version": FORMAT_VERSION,
            "package_version": __version__,
            "model": {"id": index.model_id, "checksum": index.model_checksum, "dim": index.stats.dim},
            "config": index.config.to_dict(),
            "stats": index.stats.to_dict(),
            "n_skills": len(index.skills),
            "arrays": entries,
            "scan": scan_section,
            "files": {
                "vocab.json": hashlib.sha256(vocab).hexdigest(),
                "skills.jsonl": hashlib.sha256(skills).hexdigest(),
            },
        }
        if texts is not None:
            manifest["files"][TEXTS] = hashlib.sha256(texts).hexdigest()
        _write_file(tmp / MANIFEST, json.dumps(manifest, indent=2, allow_nan=True).encode("utf-8"))
        _fsync_dir(tmp)
        _swap_in(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _check_side_file_name(name: str) -> None:
    """A side file must be a plain name that no part of the index format uses."""
    if (not name or "/" in name or "\\" in name or name.startswith((".", "scan_")) or name.endswith(".npy")
            or name in (MANIFEST, "vocab.json", "skills.jsonl", TEXTS)):
        raise ValueError(f"extra file name {name!r} is not a plain, free file name")


def write_index_file(directory: Path, name: str, data: bytes) -> Path:
    """Write one small side file (e.g. ``calibration.json``) into an existing index folder.

    Written to a temporary file and renamed, under the same lock as :func:`save_index`, so a
    concurrent save or update cannot swap the folder away in between and drop the file.
    """
    directory = directory.expanduser().absolute()
    _check_side_file_name(name)
    with _save_lock(directory.parent):
        if not (directory / MANIFEST).is_file():
            raise IndexFormatError(f"{directory}: not an index folder")
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=directory)
        os.close(fd)
        try:
            _write_file(Path(tmp), data)
            os.replace(tmp, directory / name)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    return directory / name


@contextlib.contextmanager
def _save_lock(parent: Path) -> Iterator[None]:
    """Exclusive advisory lock on the index's parent folder (a no-op where flock is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        fd = os.open(parent, os.O_RDONLY)
    except OSError:  # pragma: no cover - unreadable parent: save without the lock
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _remove_leftovers(directory: Path) -> None:
    """Delete temporary and renamed-away folders left by crashed saves (called under the lock)."""
    for pattern in (f".{directory.name}.tmp-*", f".{directory.name}.old-*"):
        for stale in directory.parent.glob(pattern):
            if stale.is_dir() and not stale.is_symlink():
                shutil.rmtree(stale, ignore_errors=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two existing paths (Linux ``renameat2``); False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # pragma: no cover - libc without renameat2
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):  # pragma: no cover
        return False
    raise OSError(err, os.strerror(err), str(b))  # pragma: no cover


def _swap_in(tmp: Path, directory: Path) -> None:
    """Replace ``directory`` by ``tmp``; the old index survives until the swap."""
    if directory.exists() and _exchange(tmp, directory):
        _fsync_dir(directory.parent)
        shutil.rmtree(tmp, ignore_errors=True)  # now holds the old index
    elif directory.exists():
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
    if directory.exists() or not directory.parent.is_dir():
        return
    with _save_lock(directory.parent):  # a live save may be between its two renames: wait for it
        _recover_unlocked(directory)


def _recover_unlocked(directory: Path) -> None:
    if directory.exists():
        return
    olds = []
    for p in directory.parent.glob(f".{directory.name}.old-*"):
        with contextlib.suppress(OSError):
            if (p / MANIFEST).is_file():
                olds.append((p.stat().st_mtime, p))
    if olds:
        with contextlib.suppress(OSError):
            os.rename(max(olds)[1], directory)


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
    dtype, ndim = ALL_ARRAYS[name] if name in ALL_ARRAYS else _scan_arrays()[name]
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


def _identity(directory: Path) -> tuple[int, int, int] | None:
    try:
        st = os.stat(directory)
        return st.st_dev, st.st_ino, os.stat(directory / MANIFEST).st_mtime_ns
    except OSError:
        return None


def load_index(directory: Path, *, mmap: bool = False, verify: bool = True) -> "SkillIndex":
    """Load an index folder; every inconsistency raises :class:`IndexFormatError`.

    A save that swaps the folder while it is being read would give a mix of two indexes; the
    folder's identity is checked before and after, and the load retried (up to 5 times).
    """
    for attempt in range(5):
        before = _identity(directory.expanduser())
        try:
            index = _load_once(directory, mmap=mmap, verify=verify)
        except IndexFormatError:
            if attempt == 4 or _identity(directory.expanduser()) == before:
                raise
            time.sleep(0.01 * (attempt + 1))
            continue
        if _identity(directory.expanduser()) == before:
            return index
    return index


def _load_once(directory: Path, *, mmap: bool, verify: bool) -> "SkillIndex":
    from skillsight_fast.index import IndexStats, SkillIndex, SkillMeta
    from skillsight_fast.lexicon import Lexicon

    directory = directory.expanduser()
    manifest = read_manifest(directory)
    try:
        entries = manifest["arrays"]
        arrays = {name: _load_array(directory, name, entries[name], mmap, verify) for name in ARRAYS}
        for name in OPTIONAL_ARRAYS:
            if name in entries:
                arrays[name] = _load_array(directory, name, entries[name], mmap, verify)
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
        model_id, model_checksum = str(manifest["model"]["id"]), str(manifest["model"]["checksum"])
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
        ("doc_tf" not in arrays or arrays["doc_tf"].shape == arrays["doc_terms"].shape, "doc_tf"),
        ("doc_len" not in arrays or arrays["doc_len"].shape == (n,), "doc_len"),
    ]
    for ok, name in checks:
        if not ok:
            raise IndexFormatError(f"{directory}: array {name} does not match {n} skills / {len(vocab)} terms")
    if ("doc_tf" in arrays) != ("doc_len" in arrays):
        raise IndexFormatError(f"{directory}: doc_tf and doc_len must be stored together")
    if stats.lexical not in LEXICAL_SIDES:
        raise IndexFormatError(f"{directory}: unknown lexical side {stats.lexical!r} in the manifest")
    if stats.lexical == "bm25" and "doc_tf" not in arrays:
        raise IndexFormatError(f"{directory}: the index fuses BM25 but stores no term frequencies "
                               "(doc_tf.npy / doc_len.npy); rebuild it with `skillsight index`")
    lexicon = Lexicon(vocab, arrays["doc_indptr"], arrays["doc_terms"], arrays["post_indptr"],
                      arrays["post_docs"], arrays.get("doc_tf"), arrays.get("doc_len"))
    scan = _load_scan(directory, manifest, arrays["embeddings_perp"], mmap=mmap, verify=verify)
    index = SkillIndex(
        skills=skills, embeddings=arrays["embeddings"], embeddings_perp=arrays["embeddings_perp"],
        basis=arrays["basis"], singular_values=arrays["singular_values"], lexicon=lexicon,
        idf=arrays["idf"], weights=arrays["weights"], generic=arrays["generic"], config=config,
        stats=stats, model_id=model_id, model_checksum=model_checksum, scan=scan,
    )
    index.source_dir = directory  # bodies (texts.jsonl) stay on disk; save() carries them over
    return index


def _load_scan(directory: Path, manifest: dict[str, Any], perp: np.ndarray, *, mmap: bool, verify: bool) -> Any:
    """The saved scan (exact when the manifest has no ``scan`` section: indexes saved before it)."""
    from skillsight_fast.scan import SCAN_TYPES, restore_scan

    section = manifest.get("scan") or {"kind": "exact"}
    try:
        kind = section["kind"]
        params = dict(section.get("params") or {})
        entries = dict(section.get("arrays") or {})
        files = dict(section.get("files") or {})
        if kind not in SCAN_TYPES:
            raise IndexFormatError(f"{directory}: unknown scan {kind!r} in the manifest")
        wanted = SCAN_TYPES[kind]
        if set(entries) != set(wanted.ARRAYS) or set(files) != set(wanted.FILES):
            raise IndexFormatError(f"{directory}: the {kind} scan lists arrays {sorted(entries)} and files "
                                   f"{sorted(files)}, expected {sorted(wanted.ARRAYS)} and {sorted(wanted.FILES)}")
        arrays = {name: _load_array(directory, name, entry, mmap, verify) for name, entry in entries.items()}
        for name, entry in files.items():
            path = directory / name
            if not path.is_file():
                raise IndexFormatError(f"{directory}: the {kind} scan's file {name} is missing")
            if verify and _sha256(path) != entry.get("sha256"):
                raise IndexFormatError(f"{path}: checksum mismatch (the file is corrupt or was changed)")
    except IndexFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IndexFormatError(f"{directory}: malformed scan section ({type(exc).__name__}: {exc})") from None
    return restore_scan(kind, perp, params, arrays, directory, mmap=mmap)


def read_bodies(directory: Path) -> list[str] | None:
    """The skills' Markdown bodies saved in ``texts.jsonl``, or None when the index has none."""
    directory = directory.expanduser()
    path = directory / TEXTS
    if not path.is_file():
        return None
    manifest = read_manifest(directory)
    raw = path.read_bytes()
    expected = manifest.get("files", {}).get(TEXTS)
    if expected is not None and hashlib.sha256(raw).hexdigest() != expected:
        raise IndexFormatError(f"{path}: checksum mismatch")
    try:
        bodies = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line]
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise IndexFormatError(f"{path}: unreadable ({exc})") from None
    if len(bodies) != manifest.get("n_skills") or not all(isinstance(b, str) for b in bodies):
        raise IndexFormatError(f"{path}: does not match the {manifest.get('n_skills')} skills of the index")
    return bodies
