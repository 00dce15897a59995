"""On-disk index format: one ``.npy`` per array plus ``manifest.json``; never pickle.

Layout of an index folder::

    manifest.json     format_version, package version, model (and, static-mapped tier, the
                      static query model under model.query), config (the build settings),
                      decisions (what the build decided; what a search does), stats, arrays
                      (bundle, file, dtype, shape, sha256 of each), roots, injection_screen (read as injection_scan
                      in indexes written before the rename)
    vocab.json        the sorted terms
    skills.jsonl      one {id, name, description, path, sha256} per row (for people and for
                      format 2; format 3 loads the skill strings below instead)
    texts.jsonl       optional: each skill's Markdown body, one JSON string per row
                      (indexes without it still load; see read_bodies)
    skill_strings.npy, skill_offsets.npy, skill_id_order.npy
                      format 3: the skill records as one UTF-8 blob (uint8) with int64 offsets,
                      fields interleaved per row (skillsight_fast.engine.columns.SKILL_FIELDS), and the
                      permutation that sorts the ids; listed under the manifest's ``strings``
    vocab_strings.npy, vocab_offsets.npy
                      format 3: the sorted terms, the same way (vocab.json stays, for people)
    text_strings.npy, text_offsets.npy
                      format 3, optional: the bodies of texts.jsonl, the same way
    scan_*            optional: the dense candidate scan's own arrays (scan_int8_codes.npy,
                      scan_int8_scales.npy, scan_binary_bits.npy) or files (scan_ivf.faiss, faiss's own format), listed
                      with their sha256 under the manifest's ``scan`` section
    *.npy             the arrays of the dense and lexical bundles; skillsight_fast.engine.state owns
                      their names, dtypes and shapes (doc_tf.npy / doc_len.npy, the term
                      frequencies of the BM25 side, are optional)

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
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast._version import __version__
from skillsight_fast.config import CASCADE_KEYS, IndexConfig
from skillsight_fast.engine import validate
from skillsight_fast.engine.cascade import Cascade
from skillsight_fast.engine.io_folder import (
    _LOAD_ATTEMPTS,
    MANIFEST,
    STATIC_MODEL_DIR,
    TEXTS,
    _check_side_file_name,
    _identity,
    _pinned,
    _recover_unlocked,
    _remove_leftovers,
    _save_error,
    _save_lock,
    _still_there,
    _swap_in,
    check_index_target,
    recover,
    write_index_file,
)
from skillsight_fast.engine.io_manifest import (
    ALL_ARRAYS,
    FORMAT_VERSION,
    READABLE_VERSIONS,
    STRING_COLUMNS,
    check_manifest_schema,
    read_manifest,
)
from skillsight_fast.engine.io_shared import (
    GENERAL_TABLE_ARRAYS,
    STATIC_TIER_ARRAYS,
    StaticModelMissing,
    _check_static_model,
    _load_shared_general_table,
    _refer_static_model,
    _resolve_static_model,
    _shared_general_table,
    fallback_notice,
    transformer_fallback,
)
from skillsight_fast.engine.io_verification import (
    Verification,
    _check_digests,
    _checksum_error,
    _verification_jobs,
)
from skillsight_fast.engine.scan import SCAN_ARRAYS, SCAN_TYPES, Scan, restore_scan
from skillsight_fast.engine.state import BUNDLES, Decisions, IndexState, IndexStats, ModelInfo, SkillMeta
from skillsight_fast.errors import IndexFormatError, SkillsightError
from skillsight_fast.files import (
    fsync_dir,
    sha256_bytes,
    sha256_file,
    sha256_files_in_background,
    umask_mode,
    write_durable,
    write_durable_chunks,
)
from skillsight_fast.limits import is_regular_file, load_json, load_json_lines, read_regular_file

#: What the format modules offer through this one (the folder, the manifest and the deferred checks live in
#: engine/io_folder.py, engine/io_manifest.py and engine/io_verification.py).
__all__ = ["FORMAT_VERSION", "MANIFEST", "READABLE_VERSIONS", "STATIC_MODEL_DIR", "TEXTS", "Verification",
           "check_index_target", "check_manifest_schema", "load_index", "read_bodies", "read_manifest", "recover",
           "save_index", "write_index_file"]
logger = logging.getLogger(__name__)

#: Largest vocab.json / skills.jsonl read (bytes).
MAX_SIDE_BYTES = 4 * 1024**3
#: Largest texts.jsonl read (bytes).
MAX_TEXTS_BYTES = 16 * 1024**3


def save_index(state: IndexState, directory: Path, extra_files: dict[str, bytes] | None = None) -> Path:
    """Write ``state`` to ``directory`` atomically and return the folder.

    ``extra_files`` (plain file name -> bytes, e.g. ``calibration.json``) are written into the same
    temporary folder, so they appear together with the index in the one swap.
    """
    for name in extra_files or {}:
        _check_side_file_name(name)
    directory = check_index_target(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    with _save_lock(directory.parent):
        _recover_unlocked(directory)
        _remove_leftovers(directory)
        try:
            _save_unlocked(state, directory, extra_files or {})
        except OSError as exc:
            raise _save_error(directory, exc) from None
    return directory


def _save_array(folder: Path, name: str, arr: np.ndarray, dtype: str) -> dict[str, Any]:
    """Write ``<name>.npy`` (fsynced) and return its manifest entry."""
    a = arr if arr.dtype == np.dtype(dtype) and arr.flags.c_contiguous else np.ascontiguousarray(arr, dtype=dtype)
    file = folder / f"{name}.npy"
    with open(file, "wb") as fh:
        np.save(fh, a, allow_pickle=False)
        fh.flush()
        os.fsync(fh.fileno())
    return {"file": file.name, "dtype": dtype, "shape": list(a.shape), "sha256": sha256_file(file)}


def _save_scan(scan: Scan, folder: Path) -> dict[str, Any]:
    """Write the scan's arrays and files; returns the manifest's ``scan`` section."""
    arrays = {name: _save_array(folder, name, arr, SCAN_ARRAYS[name][0]) for name, arr in scan.arrays().items()}
    files: dict[str, Any] = {}
    for name in scan.write_files(folder):
        path = folder / name
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())
        files[name] = {"bytes": path.stat().st_size, "sha256": sha256_file(path)}
    return {"kind": scan.kind, "params": scan.params(), "arrays": arrays, "files": files}


def _save_unlocked(state: IndexState, directory: Path, extra_files: dict[str, bytes]) -> None:
    from skillsight_fast.library.screen import SCREEN_VERSION

    tmp = Path(tempfile.mkdtemp(prefix=f".{directory.name}.tmp-", dir=directory.parent))
    os.chmod(tmp, umask_mode(0o777))  # mkdtemp's 0700 would stay on the index after the rename
    try:
        for name, data in extra_files.items():
            write_durable(tmp / name, data)
        entries: dict[str, Any] = {}
        shared = _shared_general_table(state)  # the shipped table: referred to, not stored
        for name, (bundle, arr, spec) in state.arrays().items():
            if shared is not None and name in GENERAL_TABLE_ARRAYS:
                continue
            entries[name] = {"bundle": bundle, **_save_array(tmp, name, arr, spec.dtype)}
        scan_section = _save_scan(state.scan, tmp)  # type: ignore[arg-type]
        vocab = json.dumps(list(state.lexical.lexicon.vocab), ensure_ascii=False).encode("utf-8")
        write_durable(tmp / "vocab.json", vocab)
        skills = "".join(json.dumps(s.to_dict(), ensure_ascii=False) + "\n" for s in state.skills).encode("utf-8")
        write_durable(tmp / "skills.jsonl", skills)
        del vocab, skills
        files = {"vocab.json": sha256_file(tmp / "vocab.json"), "skills.jsonl": sha256_file(tmp / "skills.jsonl")}
        strings = _save_strings(state, tmp)
        if state.bodies is not None and len(state.bodies) == len(state.skills):
            # line by line: a streamed build's bodies live on disk (skillsight_fast.indexing.DiskTexts)
            files[TEXTS] = write_durable_chunks(
                tmp / TEXTS, ((json.dumps(b, ensure_ascii=False) + "\n").encode("utf-8") for b in state.bodies))
            strings["texts"] = _save_text_column(tmp, state.bodies)
        static_ref: dict[str, Any] = {}
        manifest = {
            "format": "skillsight-fast-index",
            "format_version": FORMAT_VERSION,
            "package_version": __version__,
            "model": {"id": state.model.id, "checksum": state.model.checksum, "dim": state.stats.dim,
                      **({"query": {"id": state.model.query_id, "checksum": state.model.query_checksum}}
                         if state.model.query_id else {})},
            "config": _refer_static_model(state.config, static_ref).to_dict(),
            "cascade": state.cascade.to_dict(),
            "decisions": state.decisions.to_dict(),
            "stats": state.stats.to_dict(),
            "n_skills": len(state.skills),
            "arrays": entries,
            "scan": scan_section,
            "files": files,
            "strings": strings,
            "roots": [str(r) for r in state.roots],
            "pins": list(state.pins),
            **({"abstention": state.abstention} if state.abstention is not None else {}),
            # what the index refers to instead of storing: the shipped general table, the static model
            # in the user's cache (each by checksum; a load refuses a missing or different one)
            **({"shared": {**({"general_query_table": shared} if shared is not None else {}),
                           **({"static_model": static_ref} if static_ref else {})}}
               if shared is not None or static_ref else {}),
            "injection_screen": {"version": SCREEN_VERSION,
                               "flagged": {str(i): list(r) for i, r in enumerate(state.flags or []) if r}},
        }
        write_durable(tmp / MANIFEST, json.dumps(manifest, indent=2, allow_nan=False).encode("utf-8"))
        fsync_dir(tmp)
        _swap_in(tmp, directory)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise




def _save_strings(state: IndexState, folder: Path) -> dict[str, Any]:
    """Write the skill records and the vocabulary as string columns; the manifest's ``strings``."""
    from skillsight_fast.engine.columns import SkillTable, StringColumn

    table = state.skills if isinstance(state.skills, SkillTable) else SkillTable.of(state.skills, SkillMeta)
    if table.groups is None and len(table):
        table.same_name(0)  # computes them
    group_of, group_ptr, group_rows = table.groups if table.groups is not None else (
        np.zeros(0, np.int64), np.zeros(1, np.int64), np.zeros(0, np.int64))
    vocab = state.lexical.lexicon.vocab
    vcol = vocab if isinstance(vocab, StringColumn) else StringColumn.of(vocab)
    out: dict[str, Any] = {}
    for column, parts in (("skills", {"blob": table.column.blob, "offsets": table.column.offsets,
                                      "order": table.id_order, "group_of": group_of, "group_ptr": group_ptr,
                                      "group_rows": group_rows}),
                          ("vocab", {"blob": vcol.blob, "offsets": vcol.offsets})):
        out[column] = {part: _save_array(folder, STRING_COLUMNS[column][part][0], arr, STRING_COLUMNS[column][part][1])
                       for part, arr in parts.items()}
    return out


def _save_text_column(folder: Path, bodies: Any) -> dict[str, Any]:
    """The bodies as a string column, streamed (a streamed build's bodies never sit in memory)."""
    blob_name, _ = STRING_COLUMNS["texts"]["blob"]
    raw = folder / f".{blob_name}.raw"
    n = len(bodies)
    offsets = np.zeros(n + 1, np.int64)
    with open(raw, "wb") as fh:
        for i, body in enumerate(bodies):
            data = body.encode("utf-8")
            fh.write(data)
            offsets[i + 1] = offsets[i] + len(data)
    total = int(offsets[-1])
    file = folder / f"{blob_name}.npy"
    with open(file, "wb") as out, open(raw, "rb") as src:
        header = {"descr": "|u1", "fortran_order": False, "shape": (total,)}
        if total < 2**31:
            np.lib.format.write_array_header_1_0(out, header)
        else:  # pragma: no cover - bodies over 2 GiB
            np.lib.format.write_array_header_2_0(out, header)
        shutil.copyfileobj(src, out, 1 << 20)
        out.flush()
        os.fsync(out.fileno())
    raw.unlink()
    blob_entry = {"file": file.name, "dtype": "uint8", "shape": [total], "sha256": sha256_file(file)}
    return {"blob": blob_entry,
            "offsets": _save_array(folder, STRING_COLUMNS["texts"]["offsets"][0], offsets, "int64")}


def _array_path(directory: Path, name: str, entry: dict[str, Any]) -> Path:
    """The file of array ``name``: a plain, existing regular file inside the folder."""
    file = entry.get("file") if isinstance(entry, dict) else None
    # a plain file name inside the folder: a manifest must not point a load outside it
    if (not isinstance(file, str) or not file.endswith(".npy") or "/" in file or "\\" in file
            or file.startswith(".") or "\x00" in file):
        raise IndexFormatError(f"{directory}: malformed manifest (array {name!r} file {file!r})")
    path = directory / file
    if not path.is_file():
        raise IndexFormatError(f"{directory}: array file {name}.npy is missing")
    if not is_regular_file(path):
        raise IndexFormatError(f"{path}: not a regular file")
    return path


def _load_array(directory: Path, name: str, entry: dict[str, Any], mmap: bool, verify: bool,
                spec: tuple[str, int] | None = None) -> np.ndarray:
    dtype, ndim = spec or (ALL_ARRAYS[name][1:] if name in ALL_ARRAYS else SCAN_ARRAYS[name])
    path = _array_path(directory, name, entry)
    if verify and sha256_file(path) != entry.get("sha256"):
        raise _checksum_error(path)
    _check_npy_header(path, dtype, ndim, entry)
    try:
        arr = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError, MemoryError) as exc:
        raise IndexFormatError(f"{path}: unreadable or truncated array ({exc})") from None
    if arr.dtype != np.dtype(dtype) or arr.ndim != ndim or list(arr.shape) != list(entry["shape"]):
        raise IndexFormatError(
            f"{path}: expected {dtype} {tuple(entry['shape'])}, found {arr.dtype} {arr.shape}"
        )
    return arr


def _check_npy_header(path: Path, dtype: str, ndim: int, entry: dict[str, Any]) -> None:
    """The .npy header declares the manifest's dtype and shape, and the file holds that many bytes
    (a header claiming 4 TiB is refused before anything is allocated or mapped)."""
    try:
        with open(path, "rb") as fh:
            version = np.lib.format.read_magic(fh)
            if version == (1, 0):
                shape, fortran, found = np.lib.format.read_array_header_1_0(fh)
            elif version in ((2, 0), (3, 0)):
                shape, fortran, found = np.lib.format.read_array_header_2_0(fh)
            else:
                raise ValueError(f"unknown .npy version {version}")
            offset = fh.tell()
        size = os.path.getsize(path)
    except (ValueError, OSError, EOFError, SyntaxError) as exc:
        raise IndexFormatError(f"{path}: unreadable or truncated array ({exc})") from None
    if found != np.dtype(dtype) or len(shape) != ndim or list(shape) != list(entry["shape"]):
        raise IndexFormatError(f"{path}: expected {dtype} {tuple(entry['shape'])}, found {found} {shape}")
    if fortran and ndim > 1:
        raise IndexFormatError(f"{path}: Fortran-ordered array (expected C order)")
    need = offset + int(np.prod(shape, dtype=np.float64)) * found.itemsize
    if size < need:
        raise IndexFormatError(f"{path}: truncated array ({size:,} bytes, the header needs {need:,})")


def load_index(directory: Path, *, mmap: bool = False, verify: bool | str = True
               ) -> tuple[IndexState, Path, str | None]:
    """Load an index folder: its state, the folder, and the sha256 of its ``texts.jsonl`` (None
    when it has none). Every inconsistency raises :class:`IndexFormatError`.

    ``verify``: True checks every checksum and every content check before returning; False every
    content check but no checksum; ``"background"`` returns after the checks that keep the kernels
    in bounds and starts the rest (checksums, finiteness of the float32 matrices, UTF-8 of the
    string columns) on a thread, ``state.verification`` (:class:`Verification`); ``"lazy"`` is the
    same with nothing started (``state.verification.wait()`` runs it); ``"rows"`` is ``"lazy"`` with
    the document -> terms lists deferred too, for a caller that checks the rows it reads (a shard of
    :mod:`skillsight_fast.cluster`). docs/GUARANTEES.md.

    A save may swap the folder while it is read. On Linux the load reads through a descriptor of
    the folder it opened, so it sees one version whole; when a save deletes that version before
    all its files are open, the load is retried (elsewhere the folder's identity is compared
    before and after). The last attempt holds a shared lock that saves wait for.
    """
    directory = directory.expanduser()
    recover(directory)
    for attempt in range(_LOAD_ATTEMPTS):
        locked = attempt == _LOAD_ATTEMPTS - 1
        with _save_lock(directory.parent, shared=True) if locked else contextlib.nullcontext():
            if locked:
                _recover_unlocked(directory)  # recover() would wait for the lock this attempt holds
                if not directory.is_dir():
                    raise IndexFormatError(f"{directory}: no such index folder")
            before = _identity(directory)
            with _pinned(directory) as (base, pinned):
                try:
                    state, texts_sha256 = _load_once(base, mmap=mmap, verify=verify)
                except IndexFormatError as exc:
                    moved = (not _still_there(directory, pinned) if pinned is not None
                             else _identity(directory) != before)
                    if locked or not moved:
                        if base != directory:
                            raise IndexFormatError(str(exc).replace(str(base), str(directory))) from None
                        raise
                    time.sleep(0.01 * (attempt + 1))
                    continue
            if locked or pinned is not None or _identity(directory) == before:
                state.config = _resolve_static_model(state.config, directory)
                if state.verification is not None:  # issue 41 L3: errors name the folder, not /proc/self/fd/N
                    state.verification.directory = directory
                if state.fallback is not None:
                    state.fallback = fallback_notice(state.fallback.replace(str(base), str(directory)))
                    logger.warning("%s", state.fallback)
                return state, directory, texts_sha256
    raise AssertionError("unreachable: the locked attempt returns or raises")  # pragma: no cover


def _load_once(directory: Path, *, mmap: bool, verify: bool | str) -> tuple[IndexState, str | None]:
    manifest = read_manifest(directory)
    digests = None
    if verify not in (True, False, "background", "lazy", "rows"):
        raise ValueError(f"verify must be True, False, 'background', 'lazy' or 'rows', got {verify!r}")
    later = verify in ("background", "lazy", "rows")
    version3 = manifest["format_version"] >= 3
    try:
        entries = manifest["arrays"]
        named = [(name, entries[name]) for name in ALL_ARRAYS if name in entries]
        if verify is True:  # every path checked first, then hashed on a thread while the rest is read and checked
            wanted: list[tuple[Any, dict[str, Any]]] = [
                (lambda name=name, entry=entry: _array_path(directory, name, entry), entry) for name, entry in named]
            if version3:  # the string columns and the JSON files kept for people, hashed with the arrays
                wanted += [(lambda stem=STRING_COLUMNS[column][part][0], entry=entry:
                            _array_path(directory, stem, entry), entry)
                           for column, parts in manifest["strings"].items() for part, entry in parts.items()]
                wanted += [(lambda name=name: _side_file(directory, name), {"sha256": digest})
                           for name, digest in manifest["files"].items() if name != TEXTS]
            paths: list[tuple[Path, dict[str, Any]]] = []
            for locate, entry in wanted:
                try:
                    paths.append((locate(), entry))
                except IndexFormatError:  # as one array at a time: the earlier ones' checksums come first
                    for path, earlier in paths:
                        if sha256_file(path) != earlier.get("sha256"):
                            raise _checksum_error(path) from None
                    raise
            digests = (paths, sha256_files_in_background([path for path, _ in paths]))
        elif version3:
            for name in manifest["files"]:
                if name != TEXTS:
                    _side_file(directory, name)
        arrays: dict[str, np.ndarray] = {}
        shared = manifest.get("shared") or {}
        if not isinstance(shared, dict):
            raise IndexFormatError(f"{directory}: malformed manifest ('shared' must be an object)")
        if "general_query_table" in shared:
            _load_shared_general_table(directory, shared["general_query_table"], arrays)
        for name, (bundle, _, _) in ALL_ARRAYS.items():
            if name in arrays:
                continue
            if name in entries:
                arrays[name] = _load_array(directory, name, entries[name], mmap, verify=False)
            elif not BUNDLES[bundle].ARRAYS[name].optional:
                raise IndexFormatError(f"{directory}: the manifest lists no array {name}")
        columns: dict[str, Any] = {}
        if version3:
            vocab, records, columns = _load_strings(directory, manifest, mmap=mmap)
        else:
            vocab, records = _load_json_sides(directory, manifest, verify=verify is True)
        if len(records) != manifest["n_skills"]:
            raise IndexFormatError(f"{directory}: skills.jsonl has {len(records)} rows, the manifest "
                                   f"{manifest['n_skills']}")
        deferred = validate.check_index_contents(arrays, vocab, records, manifest["stats"], manifest["config"],
                                                 manifest["decisions"], defer=later, forward=verify != "rows")
        if verify is True:  # issue 41 L2: what the lazy verification checks after the first answer
            validate.check_utf8(columns)
        skills = records if version3 else [SkillMeta(**rec) for rec in records]
        config = IndexConfig.from_dict(manifest["config"])
        fell_back = None
        if "static_model" in shared:  # the static model of the user's cache, by checksum
            try:
                folder = str(_check_static_model(directory, shared["static_model"], verify is True))
            except StaticModelMissing as missing:  # another user's HOME: the transformer answers, or refuse
                fallback = transformer_fallback(config)
                if fallback is None:
                    raise
                config, fell_back = fallback, str(missing)
                for name in STATIC_TIER_ARRAYS:
                    arrays.pop(name, None)
            else:
                config = config.replace(query_model=folder, **(
                    {"model": folder} if config.encoder.model == config.encoder.query_model else {}))
        # the cascade: its own section, or (an index saved before it left the build config) the config's keys
        cascade = Cascade.from_dict(manifest["cascade"] if "cascade" in manifest else
                                    {key: manifest["config"][key] for key in CASCADE_KEYS if key in manifest["config"]})
        decisions = Decisions.from_dict(manifest["decisions"])
        stats = IndexStats.from_dict(manifest["stats"])
        query = manifest["model"].get("query") or {}
        if not isinstance(query, dict) or not all(isinstance(query.get(k, ""), str) for k in ("id", "checksum")):
            raise IndexFormatError("manifest 'model.query' must be {id, checksum} strings")
        model = ModelInfo(str(manifest["model"]["id"]), str(manifest["model"]["checksum"]),
                          query.get("id", ""), query.get("checksum", ""))
        n = len(skills)
        dense = BUNDLES["dense"].from_arrays(arrays, n, stats.dim)  # type: ignore[call-arg]
        lexical = BUNDLES["lexical"].from_arrays(arrays, vocab, n)  # type: ignore[arg-type]
        scan = _load_scan(directory, manifest, dense.embeddings_perp, mmap=mmap, verify=verify is True)
        state = IndexState(skills=skills, dense=dense, lexical=lexical, decisions=decisions, stats=stats,
                           config=config, model=model, scan=scan, roots=list(manifest["roots"]),
                           flags=_read_flags(manifest, n, directory), pins=list(manifest.get("pins", [])),
                           abstention=manifest.get("abstention"), cascade=cascade)
        state.stored_texts = columns.get("texts")
        state.fallback = fell_back
        _check_digests(digests)
        if later:
            deferred.update({f"UTF-8 of {name}": column.decode_all for name, column in columns.items()})
            state.verification = Verification(directory, _verification_jobs(directory, manifest), deferred,
                                              start=verify == "background")
    except IndexFormatError as exc:
        _check_digests(digests)  # a changed file is reported as such, before what it broke
        if str(exc).startswith(("array ", "vocab.json:", "skills.jsonl:", "manifest ", "doc_tf ", "unknown ",
                                "skill strings", "vocab:")):
            raise IndexFormatError(f"{directory}: {exc}") from None
        raise
    except SkillsightError as exc:
        _check_digests(digests)
        raise IndexFormatError(f"{directory}: inconsistent index ({exc})") from None
    except (KeyError, TypeError, ValueError, OSError) as exc:
        _check_digests(digests)
        raise IndexFormatError(f"{directory}: inconsistent index ({type(exc).__name__}: {exc})") from None
    return state, manifest["files"].get(TEXTS)


def _load_json_sides(directory: Path, manifest: dict[str, Any], *, verify: bool) -> tuple[list[str], list[Any]]:
    """Format 2: the vocabulary and the skill records parsed from vocab.json and skills.jsonl."""
    raw_vocab = read_regular_file(directory / "vocab.json", MAX_SIDE_BYTES, error=IndexFormatError,
                                  what="vocab.json")
    raw_skills = read_regular_file(directory / "skills.jsonl", MAX_SIDE_BYTES, error=IndexFormatError,
                                   what="skills.jsonl")
    if verify:
        for fname, raw in (("vocab.json", raw_vocab), ("skills.jsonl", raw_skills)):
            if sha256_bytes(raw) != manifest["files"][fname]:
                raise IndexFormatError(f"{directory / fname}: checksum mismatch")
    vocab = load_json(raw_vocab, error=IndexFormatError, what=str(directory / "vocab.json"), max_depth=1)
    try:
        lines = raw_skills.decode("utf-8").split("\n")  # not splitlines(): U+2028 is a character
    except UnicodeDecodeError as exc:
        raise IndexFormatError(f"{directory / 'skills.jsonl'}: not valid UTF-8 (byte {exc.start})") from None
    records = load_json_lines(lines, error=IndexFormatError, what=str(directory / "skills.jsonl"))
    return vocab, records


def _side_file(directory: Path, name: str) -> Path:
    """A JSON side file the manifest lists (vocab.json, skills.jsonl): there and a regular file."""
    path = directory / name
    if not is_regular_file(path):
        raise IndexFormatError(f"{path}: cannot read {name} (missing or not a regular file)")
    return path


def _load_strings(directory: Path, manifest: dict[str, Any], *, mmap: bool) -> tuple[Any, Any, dict[str, Any]]:
    """Format 3: the vocabulary and the skill records as string columns (no JSON parsed); also the
    bodies' column when the index stores one. Offsets and the id order are checked by
    :func:`skillsight_fast.validate.check_index_contents`; the bodies' offsets here."""
    from skillsight_fast.engine.columns import SkillTable, StringColumn

    parts: dict[str, dict[str, np.ndarray]] = {}
    for column, entries in manifest["strings"].items():
        parts[column] = {part: _load_array(directory, STRING_COLUMNS[column][part][0], entry, mmap, False,
                                           spec=(STRING_COLUMNS[column][part][1], 1))
                         for part, entry in entries.items()}
    vocab = StringColumn(parts["vocab"]["blob"], parts["vocab"]["offsets"], name="vocab")
    sk = parts["skills"]
    skills = SkillTable(StringColumn(sk["blob"], sk["offsets"], name="skill strings"), sk["order"],
                        (sk["group_of"], sk["group_ptr"], sk["group_rows"]), record=SkillMeta)
    columns: dict[str, Any] = {"vocab": vocab, "skills": skills.column}
    if "texts" in parts:
        texts = StringColumn(parts["texts"]["blob"], parts["texts"]["offsets"], name=TEXTS)
        validate.check_string_offsets("text_offsets", texts.offsets, int(manifest["n_skills"]),
                                      int(texts.blob.shape[0]))
        columns["texts"] = texts
    return vocab, skills, columns


def _load_scan(directory: Path, manifest: dict[str, Any], perp: np.ndarray, *, mmap: bool, verify: bool) -> Scan:
    """The saved scan, as the manifest's ``scan`` section describes it."""
    section = manifest["scan"]
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
        validate.check_scan(kind, params, arrays)  # issue 41 M2, L1: values, not only shapes
        for name, entry in files.items():
            path = directory / name
            if not path.is_file():
                raise IndexFormatError(f"{directory}: the {kind} scan's file {name} is missing")
            if verify and sha256_file(path) != entry.get("sha256"):
                raise IndexFormatError(f"{path}: checksum mismatch (the file is corrupt or was changed)")
    except IndexFormatError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise IndexFormatError(f"{directory}: malformed scan section ({type(exc).__name__}: {exc})") from None
    return restore_scan(kind, perp, params, arrays, directory, mmap=mmap)


def _read_flags(manifest: dict[str, Any], n: int, directory: Path) -> Any:
    """Per skill, the reasons the index-time injection screen flagged it (empty lists when none), as a
    :class:`~skillsight_fast.engine.columns.FlagList` (no list per skill is built)."""
    from skillsight_fast.engine.columns import FlagList

    section = manifest.get("injection_screen", manifest.get("injection_scan"))
    flags = section.get("flagged")
    if not isinstance(flags, dict):
        raise IndexFormatError(f"{directory}: malformed manifest ('injection_screen.flagged' must be an object)")
    out: dict[int, list[str]] = {}
    for row, reasons in flags.items():
        if (not row.isdigit() or int(row) >= n or not isinstance(reasons, list)
                or not all(isinstance(r, str) for r in reasons)):
            raise IndexFormatError(f"{directory}: malformed manifest (injection_screen entry {row!r})")
        out[int(row)] = list(reasons)
    return FlagList(n, out)


def read_bodies(directory: Path, expected_sha256: str | None = None) -> list[str] | None:
    """The skills' Markdown bodies saved in ``texts.jsonl``, or None when the index has none.

    Parameters
    ----------
    directory : path
    expected_sha256 : str, optional
        The digest of ``texts.jsonl`` recorded when the index was loaded
        (``SkillIndex.texts_sha256``): if the folder has been replaced since (an ``update``), the
        bodies belong to another version and :class:`IndexFormatError` is raised instead of
        mixing two versions.
    """
    directory = directory.expanduser()
    path = directory / TEXTS
    if not path.exists():
        if expected_sha256 is not None:
            raise IndexFormatError(f"{path}: gone since the index was loaded (the folder was replaced)")
        return None
    manifest = read_manifest(directory)
    expected = manifest.get("files", {}).get(TEXTS)
    if "texts" in (manifest.get("strings") or {}):  # format 3: the column, mapped, nothing parsed
        if expected_sha256 is not None and expected != expected_sha256:
            raise IndexFormatError(f"{path}: the index folder was replaced since the index was loaded "
                                   "(another version's texts); reload the index")
        with _pinned(directory) as (base, _):
            entries = manifest["strings"]["texts"]
            blob = _load_array(base, "text_strings", entries["blob"], True, False, spec=("uint8", 1))
            offsets = _load_array(base, "text_offsets", entries["offsets"], False, False, spec=("int64", 1))
        validate.check_string_offsets("text_offsets", offsets, int(manifest["n_skills"]), int(blob.shape[0]))
        from skillsight_fast.engine.columns import StringColumn

        return StringColumn(blob, offsets, name=str(path))  # type: ignore[return-value]
    raw = read_regular_file(path, MAX_TEXTS_BYTES, error=IndexFormatError, what=TEXTS)
    digest = sha256_bytes(raw)
    if expected is not None and digest != expected:
        raise IndexFormatError(f"{path}: checksum mismatch")
    if expected_sha256 is not None and digest != expected_sha256:
        raise IndexFormatError(f"{path}: the index folder was replaced since the index was loaded "
                               "(another version's texts); reload the index")
    try:
        lines = raw.decode("utf-8").split("\n")
    except UnicodeDecodeError as exc:
        raise IndexFormatError(f"{path}: unreadable (not UTF-8 at byte {exc.start})") from None
    bodies = load_json_lines(lines, error=IndexFormatError, what=str(path))
    if len(bodies) != manifest.get("n_skills") or not all(isinstance(b, str) for b in bodies):
        raise IndexFormatError(f"{path}: does not match the {manifest.get('n_skills')} skills of the index")
    return bodies
