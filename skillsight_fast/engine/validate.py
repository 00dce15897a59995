"""Content checks of a loaded index: every value a kernel will read is checked before it can.

Loading checks shapes, dtypes and checksums; that is not enough, because a checksum only says the
file is the one the manifest names, not that the manifest or the writer was sane. A ``doc_indptr``
entry past the end of ``doc_terms`` makes a Numba kernel read out of bounds (SIGSEGV), a term id
beyond the vocabulary does the same in another kernel, and a NaN embedding or threshold silently
turns every score into NaN. These functions check the contents, as pure functions over arrays and
plain values, and raise :class:`~skillsight_fast.errors.IndexFormatError` naming the array and the
first bad entry. :func:`check_index_contents` is called by :func:`skillsight_fast.engine.io.load_index`.

The checks cost one pass over each array (vectorised numpy, no copies of the large matrices beyond
a boolean per entry); ``bench/validate_cost.py`` measures them at 3,434 and 1M skills. From
:data:`KERNEL_FROM` entries on, the CSR checks run as one Numba pass per matrix
(:mod:`skillsight_fast.kernels.validation`; these NumPy functions are its reference). What is checked
before a loaded index answers and what after (the finiteness of the float32 matrices, the checksums)
is the policy of docs/GUARANTEES.md: :func:`check_index_contents` with ``defer=True`` runs the checks
that keep every kernel's reads in bounds and returns the others (named callables) instead of
running them.
"""

from __future__ import annotations

import itertools
import math
import operator
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import IndexFormatError

#: How far B Bᵀ may be from the identity (float32 rows of an SVD are orthonormal to ~1e-6).
ORTHONORMAL_TOL = 1e-3
#: Rows of a large matrix checked per block (bounds the temporary boolean array).
_BLOCK = 1 << 16
_TINY32 = float(np.finfo(np.float32).tiny)
#: CSR matrices with at least this many entries are checked by the Numba kernel (smaller ones by
#: NumPy, so a one-shot search over a small index never imports Numba).
KERNEL_FROM = 1 << 22
#: The (N, d) float32 matrices whose finiteness may be checked after the first answer.
LARGE_FLOATS = ("embeddings", "embeddings_perp", "namedesc")


def _fail(name: str, problem: str) -> IndexFormatError:
    return IndexFormatError(f"array {name}: {problem}")


def check_finite(name: str, a: np.ndarray) -> None:
    """Every entry of float array ``a`` is finite (checked in row blocks: mmap-friendly)."""
    if a.size == 0:
        return
    rows = a.reshape(a.shape[0], -1) if a.ndim > 1 else a.reshape(-1, 1)
    for start in range(0, rows.shape[0], _BLOCK):
        block = rows[start : start + _BLOCK]
        if not np.isfinite(block).all():
            bad = start + int(np.nonzero(~np.isfinite(block).all(axis=1))[0][0])
            raise _fail(name, f"NaN or infinity (row {bad})")


def check_offsets(name: str, indptr: np.ndarray, n_rows: int, n_entries: int) -> None:
    """CSR offsets: ``n_rows + 1`` of them, 0 first, ``n_entries`` last, never decreasing."""
    if indptr.shape != (n_rows + 1,):
        raise _fail(name, f"{indptr.shape[0]} offsets for {n_rows} rows")
    if int(indptr[0]) != 0 or int(indptr[-1]) != n_entries:
        raise _fail(name, f"offsets run from {int(indptr[0])} to {int(indptr[-1])}, expected 0 to {n_entries}")
    if n_rows and (np.diff(indptr) < 0).any():
        bad = int(np.nonzero(np.diff(indptr) < 0)[0][0])
        raise _fail(name, f"offsets decrease at row {bad}")


def check_ids(name: str, ids: np.ndarray, bound: int) -> None:
    """Every id in ``[0, bound)``."""
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= bound):
        raise _fail(name, f"ids from {int(ids.min())} to {int(ids.max())}, expected 0 to {bound - 1}")


def check_sorted_rows(name: str, indptr: np.ndarray, ids: np.ndarray) -> None:
    """Ids strictly increase inside each CSR row (the kernels merge and bisect them)."""
    if ids.size < 2:
        return
    rising = np.diff(ids) > 0
    # a step that crosses a row boundary may go down: positions indptr[1:-1] - 1 are boundaries
    starts = indptr[1:-1]
    starts = starts[(starts > 0) & (starts < ids.size)]
    rising[starts - 1] = True
    if not rising.all():
        at = int(np.nonzero(~rising)[0][0])
        row = int(np.searchsorted(indptr, at, side="right")) - 1
        raise _fail(name, f"row {row} is not sorted and distinct")


def check_basis(basis: np.ndarray, dim: int) -> None:
    """The background basis: at most ``dim`` finite rows of length ``dim``, orthonormal."""
    if basis.ndim != 2 or basis.shape[1] != dim or basis.shape[0] > dim:
        raise _fail("basis", f"shape {basis.shape}, expected (r <= {dim}, {dim})")
    check_finite("basis", basis)
    if basis.shape[0]:
        gram = np.asarray(basis, np.float64) @ np.asarray(basis, np.float64).T
        err = float(np.abs(gram - np.eye(basis.shape[0])).max())
        if not err <= ORTHONORMAL_TOL:
            raise _fail("basis", f"rows are not orthonormal (|B Bᵀ - I| = {err:.3g})")


def check_non_negative(name: str, a: np.ndarray) -> None:
    """Finite and non-negative (``idf``: docs/GUARANTEES.md promises both)."""
    check_finite(name, a)
    if a.size and (a < 0).any():
        raise _fail(name, f"negative value at {int(np.nonzero(a < 0)[0][0])}")


def check_query_tables(arrays: Mapping[str, np.ndarray], dim: int) -> None:
    """The query tiers' arrays, by value: the static-mapped tier's map (finite, ``d_s + 1`` rows of
    length ``dim``) and the contextual tier's token table (ids non-negative and strictly increasing,
    one finite row of length ``dim`` per id). Each is optional; the table's two arrays go together."""
    qmap = arrays.get("query_map")
    if qmap is not None:
        if qmap.ndim != 2 or qmap.shape[0] < 2 or qmap.shape[1] != dim:
            raise _fail("query_map", f"shape {qmap.shape}, expected (d_s + 1 >= 2, {dim})")
        check_finite("query_map", qmap)
    ids, table = arrays.get("query_table_ids"), arrays.get("query_table")
    if ids is None and table is None:
        return
    if ids is None or table is None:
        raise _fail("query_table" if table is None else "query_table_ids", "missing (the token table needs "
                    "both query_table_ids and query_table)")
    if table.ndim != 2 or table.shape != (ids.shape[0], dim):
        raise _fail("query_table", f"shape {table.shape}, expected ({ids.shape[0]}, {dim}): one row per id")
    if ids.size and int(ids.min()) < 0:
        raise _fail("query_table_ids", f"negative token id at {int(np.nonzero(ids < 0)[0][0])}")
    if ids.size > 1 and not (np.diff(ids) > 0).all():
        raise _fail("query_table_ids", f"ids not strictly increasing at {int(np.nonzero(np.diff(ids) <= 0)[0][0]) + 1}")
    check_finite("query_table", table)


#: Bounds of the scan parameters a manifest may record (``scan.params``): key -> (low, high).
SCAN_PARAMS = {"oversample": (1, 100_000), "rerank_factor": (1, 100_000), "nlist": (1, 1 << 24),
               "nprobe": (1, 1 << 24), "trained_on": (0, 1 << 40)}


def check_scan(kind: str, params: Mapping[str, Any], arrays: Mapping[str, np.ndarray]) -> None:
    """The dense scan's recorded parameters and the values of its arrays.

    Every parameter of :data:`SCAN_PARAMS` that is present is an integer (not a float, not ``true``,
    not ``Infinity``) within its bounds; the int8 (and binary) scan's per-row scales are finite and
    non-negative, and 0 only for a row whose codes are all 0 (the quantiser gives an all-zero row
    scale 0): a NaN, infinite or zeroed scale would make every search silently return no hits.
    """
    for key, (lo, hi) in SCAN_PARAMS.items():
        if key in params and (not _is_int(params[key]) or not lo <= params[key] <= hi):
            raise IndexFormatError(f"manifest scan: the {kind} scan parameters are malformed ({key!r} must be an "
                                   f"integer in {lo}..{hi}, not {params[key]!r})")
    scales = arrays.get("scan_int8_scales")
    if scales is None:
        return
    check_non_negative("scan_int8_scales", scales)
    zero = np.nonzero(scales == 0)[0]
    codes = arrays.get("scan_int8_codes")
    if zero.size and codes is not None and codes.shape[:1] == scales.shape:
        used = zero[np.asarray(codes[zero]).any(axis=1)]
        if used.size:
            raise _fail("scan_int8_scales", f"scale 0 for row {int(used[0])}, whose codes are not all 0")


#: The folder inside an index that holds its static query model (engine.io.STATIC_MODEL_DIR).
MODEL_FILES_DIR = "static_model"


def is_model_file_entry(name: str) -> bool:
    """A manifest ``files`` entry of the index's own static model: ``static_model/NAME`` with NAME a
    plain file name (checksummed and verified like the index's other files)."""
    head, sep, tail = name.partition("/")
    return (head == MODEL_FILES_DIR and bool(sep) and bool(tail) and "/" not in tail and "\\" not in tail
            and not tail.startswith(".") and "\x00" not in tail)


def check_utf8(columns: Mapping[str, Any]) -> None:
    """Every string column decodes as UTF-8 (the skill strings, the vocabulary, the stored texts):
    what a lazy verification runs after the first answer, run before it by ``verify=True``."""
    for name, column in columns.items():
        try:
            column.decode_all()
        except IndexFormatError as exc:
            raise IndexFormatError(f"array {name} column: {exc}") from None


def check_weights(name: str, w: np.ndarray) -> None:
    """Finite, non-negative, and 0 or normal (a subnormal weight sum overflows the fastmath reciprocal)."""
    check_finite(name, w)
    if w.size and (w < 0).any():
        raise _fail(name, f"negative value at {int(np.nonzero(w < 0)[0][0])}")
    sub = (w != 0) & (np.abs(w) < _TINY32)
    if sub.any():
        raise _fail(name, f"subnormal value at {int(np.nonzero(sub)[0][0])}")


def check_vocab(vocab: Any) -> None:
    """A list of distinct strings in strictly increasing order (a term's id is its position)."""
    if not isinstance(vocab, list) or not set(map(type, vocab)) <= {str}:
        raise IndexFormatError("vocab.json: not a list of strings")
    if not all(map(operator.lt, vocab, itertools.islice(vocab, 1, None))):
        i = next(i for i in range(1, len(vocab)) if not vocab[i - 1] < vocab[i])
        raise IndexFormatError(f"vocab.json: terms {i - 1} and {i} are not sorted and distinct")


def check_skill_records(records: Sequence[Mapping[str, Any]]) -> None:
    """One ``{id, name, description, path, sha256}`` of strings per skill (plus optional
    ``when_to_use``, a string, and ``tags``, a list of strings); ids unique."""
    seen: set[str] = set()
    keys = ("id", "name", "description", "path", "sha256")
    optional = {"tags", "when_to_use"}
    for row, rec in enumerate(records):
        if not isinstance(rec, dict) or not set(keys) <= set(rec) or set(rec) - set(keys) - optional:
            raise IndexFormatError(f"skills.jsonl: row {row} is not an object with exactly {', '.join(keys)} "
                                   f"(and optionally {', '.join(sorted(optional))})")
        tags = rec.get("tags", [])
        if not isinstance(tags, list) or not all(type(t) is str for t in tags):
            raise IndexFormatError(f"skills.jsonl: row {row}: 'tags' must be a list of strings")
        for key in (*keys, *(optional & set(rec) - {"tags"})):
            value = rec[key]
            if type(value) is not str:
                raise IndexFormatError(f"skills.jsonl: row {row}: {key!r} must be a string")
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise IndexFormatError(f"skills.jsonl: row {row}: {key!r} holds a lone surrogate") from None
        if not rec["id"]:
            raise IndexFormatError(f"skills.jsonl: row {row} has an empty id")
        if rec["id"] in seen:
            raise IndexFormatError(f"skills.jsonl: duplicate skill id {rec['id']!r} (row {row})")
        seen.add(rec["id"])


def _is_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x: Any) -> bool:
    return (isinstance(x, (int, float)) and not isinstance(x, bool))


def check_stats(stats: Mapping[str, Any], n_skills: int, n_terms: int, rank: int) -> None:
    """The manifest's statistics agree with the arrays and hold sane numbers."""
    for key in ("n_docs", "dim", "vocab_size", "n_generic", "n_background_terms", "effective_rank", "rank"):
        if not _is_int(stats.get(key)) or stats[key] < 0:
            raise IndexFormatError(f"manifest stats: {key!r} must be a non-negative integer")
    if stats["n_docs"] != n_skills or stats["vocab_size"] != n_terms or stats["rank"] != rank:
        raise IndexFormatError(f"manifest stats: n_docs/vocab_size/rank ({stats['n_docs']}, {stats['vocab_size']}, "
                               f"{stats['rank']}) do not match the arrays ({n_skills}, {n_terms}, {rank})")
    if not 1 <= stats["dim"] <= 65_536:
        raise IndexFormatError(f"manifest stats: dim {stats['dim']} out of range")
    tau = stats.get("otsu_tau")  # null: no threshold (one class of tokens)
    if tau is not None and (not _is_num(tau) or math.isnan(tau)):
        raise IndexFormatError("manifest stats: otsu_tau must be a number or null")
    for key in ("generic_share", "doc_background_energy"):
        v = stats.get(key)
        if v is not None and (not _is_num(v) or not math.isfinite(v)):
            raise IndexFormatError(f"manifest stats: {key!r} must be a finite number or null")


def check_query_model(value: Any) -> None:
    """The static query model's folder as a manifest records it: the index's own copy, named by one
    plain relative component (``static_model``), or, in an index from before the copy, an absolute
    folder in this user's model cache (``<cache>/static/NAME``) or one that does not exist here (then
    the cache's folder of that name is used). Anything else (``/etc``, ``../..``) is refused."""
    if not isinstance(value, str):
        raise IndexFormatError("manifest config: 'query_model' must be a string or null")
    if not value:  # no static model (what null means)
        return
    path = Path(value)
    if not path.is_absolute():
        if len(path.parts) != 1 or value.startswith(".") or "\\" in value or "\x00" in value:
            raise IndexFormatError(f"manifest config: 'query_model' {value!r} must name a folder inside the "
                                   "index (one plain name such as 'static_model')")
        return
    from skillsight_fast.models.encoder import cache_root

    static = (cache_root() / "static").absolute()
    real = Path(os.path.realpath(path))
    if real.parent != Path(os.path.realpath(static)) and (".." in path.parts or path.exists()):
        raise IndexFormatError(f"manifest config: 'query_model' {value!r} is outside the index and outside "
                               f"the model cache ({static})")


def check_decisions(decisions: Mapping[str, Any], rank: int) -> None:
    """Types of the build's decisions (the record checks names and ranges) and the basis they imply."""
    if not isinstance(decisions.get("background"), bool):
        raise IndexFormatError("manifest decisions: 'background' must be true or false")
    if not decisions["background"] and rank:
        raise IndexFormatError(f"manifest decisions: background removal is off but the basis has {rank} rows")
    for key in ("candidates", "lexical_candidates"):
        if key in decisions and (not _is_int(decisions[key]) or not 0 <= decisions[key] <= 1_000_000):
            raise IndexFormatError(f"manifest decisions: {key!r} must be an integer in 0..1000000")
    for key in ("lexical_weight", "rrf_k"):
        if key in decisions and (not _is_num(decisions[key]) or not math.isfinite(decisions[key])):
            raise IndexFormatError(f"manifest decisions: {key!r} must be a finite number")
    for key in ("lexical", "fusion", "rule", "continuation"):
        if key in decisions and not isinstance(decisions[key], str):
            raise IndexFormatError(f"manifest decisions: {key!r} must be a string")


def check_config(config: Mapping[str, Any]) -> None:
    """Types and ranges of the build settings that search reads (the dataclass checks the rest)."""
    ints = {"min_token_len": (1, 1000), "max_token_len": (1, 1000), "max_rank": (0, 65_536),
            "candidates": (1, 1_000_000), "lexical_candidates": (0, 1_000_000), "seed": (-(2**63), 2**63 - 1)}
    for key, (lo, hi) in ints.items():
        if key in config and (not _is_int(config[key]) or not lo <= config[key] <= hi):
            raise IndexFormatError(f"manifest config: {key!r} must be an integer in {lo}..{hi}")
    if config.get("rank") is not None and (not _is_int(config["rank"]) or config["rank"] < 0):
        raise IndexFormatError("manifest config: 'rank' must be a non-negative integer or null")
    for key in ("beta", "lexical_weight", "rrf_k"):
        if key in config and (not _is_num(config[key]) or not math.isfinite(config[key])):
            raise IndexFormatError(f"manifest config: {key!r} must be a finite number")
    for key in ("int8", "otsu_weighted", "renormalize", "adaptive"):
        if key in config and not isinstance(config[key], bool):
            raise IndexFormatError(f"manifest config: {key!r} must be true or false")
    for key in ("model", "background_tokens", "fusion", "query_encoder"):
        if key in config and not isinstance(config[key], str):
            raise IndexFormatError(f"manifest config: {key!r} must be a string")
    if config.get("query_model") is not None:
        check_query_model(config["query_model"])
    for key in ("int8_oversample", "binary_rerank", "ivf_nlist", "ivf_nprobe"):
        if config.get(key) is not None and (not _is_int(config[key]) or not 1 <= config[key] <= 1 << 24):
            raise IndexFormatError(f"manifest config: {key!r} must be an integer in 1..{1 << 24} or null")
    if config.get("query_int8") is not None and not isinstance(config["query_int8"], bool):
        raise IndexFormatError("manifest config: 'query_int8' must be true, false or null")
    if config.get("fallback_below") is not None and (not _is_num(config["fallback_below"])
                                                     or not math.isfinite(config["fallback_below"])):
        raise IndexFormatError("manifest config: 'fallback_below' must be a finite number or null")
    if "lookup_min_pieces" in config and (not _is_int(config["lookup_min_pieces"])
                                         or not 0 <= config["lookup_min_pieces"] <= 100_000):
        raise IndexFormatError("manifest config: 'lookup_min_pieces' must be an integer in 0..100000")


def check_arrays(arrays: Mapping[str, np.ndarray], n_skills: int, n_terms: int, dim: int, *,
                 defer: bool = False, forward: bool = True) -> dict[str, Any]:
    """Every array's contents: offsets, ids, sortedness, finiteness, basis, lexicon consistency.

    Parameters
    ----------
    arrays : mapping name -> array
        As :func:`skillsight_fast.engine.io.load_index` reads them (shapes and dtypes already checked).
    n_skills, n_terms, dim : int
        Rows of skills.jsonl, terms of vocab.json, the model dimension.
    """
    for name in ("embeddings", "embeddings_perp"):
        if arrays[name].shape != (n_skills, dim):
            raise _fail(name, f"shape {arrays[name].shape}, expected {(n_skills, dim)}")
        if not defer:
            check_finite(name, arrays[name])
    deferred: dict[str, Any] = {}
    check_basis(arrays["basis"], dim)
    check_finite("singular_values", arrays["singular_values"])
    for name in ("idf", "weights", "generic"):
        if arrays[name].shape != (n_terms,):
            raise _fail(name, f"shape {arrays[name].shape}, expected ({n_terms},)")
    check_non_negative("idf", arrays["idf"])
    check_weights("weights", arrays["weights"])
    check_query_tables(arrays, dim)
    doc_indptr, doc_terms = arrays["doc_indptr"], arrays["doc_terms"]
    post_indptr, post_docs = arrays["post_indptr"], arrays["post_docs"]
    if doc_indptr.shape != (n_skills + 1,):
        raise _fail("doc_indptr", f"{doc_indptr.shape[0]} offsets for {n_skills} rows")
    if post_indptr.shape != (n_terms + 1,):
        raise _fail("post_indptr", f"{post_indptr.shape[0]} offsets for {n_terms} rows")
    if doc_terms.shape != post_docs.shape:
        raise IndexFormatError(f"arrays doc_terms and post_docs differ in length "
                               f"({doc_terms.shape[0]} and {post_docs.shape[0]})")
    if defer:  # the forward lists now (every lexical kernel reads them), the postings on first use
        if forward:
            check_forward_lists(doc_indptr, doc_terms, n_skills, n_terms)
        else:  # the caller checks the rows it reads (a shard: skillsight_fast.cluster.shard)
            deferred["forward lists"] = lambda: check_forward_lists(doc_indptr, doc_terms, n_skills, n_terms)
        deferred["postings"] = lambda: check_postings(doc_indptr, doc_terms, post_indptr, post_docs, n_skills,
                                                      n_terms)
    else:
        check_postings(doc_indptr, doc_terms, post_indptr, post_docs, n_skills, n_terms)
    if "doc_tf" in arrays:
        if arrays["doc_tf"].shape != doc_terms.shape:
            raise _fail("doc_tf", "does not match doc_terms")
        if arrays["doc_len"].shape != (n_skills,):
            raise _fail("doc_len", f"shape {arrays['doc_len'].shape}, expected ({n_skills},)")
        if n_skills and int(arrays["doc_len"].min()) < 0:
            raise _fail("doc_len", "negative document length")
    return deferred


def check_forward_lists(doc_indptr: np.ndarray, doc_terms: np.ndarray, n_skills: int, n_terms: int) -> None:
    """The document -> terms CSR: offsets, term ids in range, sorted and distinct per document."""
    if doc_terms.shape[0] >= KERNEL_FROM:
        check_csr_kernel("doc_indptr", "doc_terms", doc_indptr, doc_terms, n_terms)
        return
    check_offsets("doc_indptr", doc_indptr, n_skills, doc_terms.shape[0])
    check_ids("doc_terms", doc_terms, n_terms)
    check_sorted_rows("doc_terms", doc_indptr, doc_terms)


def check_postings(doc_indptr: np.ndarray, doc_terms: np.ndarray, post_indptr: np.ndarray,
                   post_docs: np.ndarray, n_skills: int, n_terms: int) -> None:
    """Both CSR matrices, and the postings the transpose of the forward lists (same count per term)."""
    if doc_terms.shape[0] >= KERNEL_FROM:
        df = np.zeros(n_terms, np.int64)
        check_csr_kernel("doc_indptr", "doc_terms", doc_indptr, doc_terms, n_terms, df)
        check_csr_kernel("post_indptr", "post_docs", post_indptr, post_docs, n_skills)
    else:
        check_offsets("doc_indptr", doc_indptr, n_skills, doc_terms.shape[0])
        check_offsets("post_indptr", post_indptr, n_terms, post_docs.shape[0])
        check_ids("doc_terms", doc_terms, n_terms)
        check_ids("post_docs", post_docs, n_skills)
        check_sorted_rows("doc_terms", doc_indptr, doc_terms)
        check_sorted_rows("post_docs", post_indptr, post_docs)
        df = np.bincount(doc_terms, minlength=n_terms) if doc_terms.size else np.zeros(n_terms, np.int64)
    if not np.array_equal(df, np.diff(post_indptr)):
        bad = int(np.nonzero(df != np.diff(post_indptr))[0][0])
        raise _fail("post_indptr", f"term {bad} has {int(np.diff(post_indptr)[bad])} postings but occurs in "
                    f"{int(df[bad])} documents")


def check_index_contents(arrays: Mapping[str, np.ndarray], vocab: Any, records: Any,
                         stats: Mapping[str, Any], config: Mapping[str, Any],
                         decisions: Mapping[str, Any], *, defer: bool = False, forward: bool = True
                         ) -> dict[str, Any]:
    """All content checks of one index, in order of cost (cheap JSON first, arrays last).

    ``vocab`` and ``records`` are the parsed ``vocab.json`` / ``skills.jsonl`` (format 2) or the
    string columns of format 3 (:class:`~skillsight_fast.engine.columns.StringColumn`,
    :class:`~skillsight_fast.engine.columns.SkillTable`). With ``defer`` only the checks that keep every
    kernel's reads in bounds run here (shapes, offsets, the forward lists' term ids and order, the
    small arrays); the others are returned as name -> callable (raising IndexFormatError): the
    finiteness of the (N, d) float32 matrices, the postings, the order of the string columns
    (docs/GUARANTEES.md). ``forward=False`` (with ``defer``) defers the forward lists too: for a
    caller that checks the rows it reads itself.
    """
    from skillsight_fast.engine.columns import SkillTable, StringColumn

    deferred: dict[str, Any] = {}
    # the string columns are read through Python slices (bounds-checked), never by a kernel: with
    # ``defer`` their offsets, order and groups are checked after the first answer
    if isinstance(vocab, StringColumn):
        if defer:
            deferred["vocab"] = lambda: check_string_column(vocab, "vocab", sorted_strictly=True)
        else:
            check_string_column(vocab, "vocab", sorted_strictly=True)
    else:
        check_vocab(vocab)
    if isinstance(records, SkillTable):
        if records.id_order.shape != (len(records),):
            raise _fail("skill_id_order", f"shape {records.id_order.shape}, expected ({len(records)},)")
        if defer:
            deferred["skill strings"] = lambda: check_skill_table(records)
        else:
            check_skill_table(records)
    else:
        check_skill_records(records)
    check_config(config)
    check_stats(stats, len(records), len(vocab), int(arrays["basis"].shape[0]))
    check_decisions(decisions, int(arrays["basis"].shape[0]))
    deferred.update(check_arrays(arrays, len(records), len(vocab), int(stats["dim"]), defer=defer,
                                 forward=forward))
    check_namedesc(arrays, decisions, len(records), int(stats["dim"]), defer=defer)
    if defer:
        for name in LARGE_FLOATS:
            if name in arrays:
                deferred[f"finite {name}"] = lambda name=name: check_finite(name, arrays[name])
    return deferred


def check_namedesc(arrays: Mapping[str, np.ndarray], decisions: Mapping[str, Any], n_skills: int,
                   dim: int, *, defer: bool = False) -> None:
    """The name + description vectors are there exactly when the decisions say the index scores them
    (``document_vector``; absent in manifests written before it = ``text``), finite, one per skill."""
    wanted = decisions.get("document_vector", "text") == "text+namedesc"
    if wanted != ("namedesc" in arrays):
        raise IndexFormatError(f"decisions say document_vector {decisions.get('document_vector', 'text')!r} "
                               f"but namedesc.npy is {'missing' if wanted else 'present'}")
    if wanted:
        if arrays["namedesc"].shape != (n_skills, dim):
            raise _fail("namedesc", f"shape {arrays['namedesc'].shape}, expected {(n_skills, dim)}")
        if not defer:
            check_finite("namedesc", arrays["namedesc"])


_CSR_PROBLEMS = {1: "offsets do not run from 0 to the number of entries", 2: "offsets decrease at row {}",
                 3: "id out of range at entry {}", 4: "row {} is not sorted and distinct"}


def check_csr_kernel(ptr_name: str, ids_name: str, indptr: np.ndarray, ids: np.ndarray, bound: int,
                     counts: np.ndarray | None = None) -> None:
    """:func:`check_offsets`, :func:`check_ids` and :func:`check_sorted_rows` (and the counts of
    ``np.bincount``) in one Numba pass (:func:`skillsight_fast.kernels.validation.check_csr`)."""
    from skillsight_fast.kernels.validation import CSR_DECREASING, CSR_ENDS, CSR_ID_RANGE, check_csr

    code, pos = check_csr(indptr, ids, bound, counts)
    if code == CSR_ENDS:
        raise _fail(ptr_name, f"offsets run from {int(indptr[0])} to {int(indptr[-1])}, expected 0 to "
                    f"{ids.shape[0]}")
    if code == CSR_DECREASING:
        raise _fail(ptr_name, f"offsets decrease at row {pos}")
    if code == CSR_ID_RANGE:
        raise _fail(ids_name, f"id {int(ids[pos])} at entry {pos}, expected 0 to {bound - 1}")
    if code:
        raise _fail(ids_name, f"row {pos} is not sorted and distinct")


def check_string_offsets(name: str, offsets: np.ndarray, n_strings: int, n_bytes: int) -> None:
    """Offsets of a string column: ``n_strings + 1`` of them, 0 first, ``n_bytes`` last, never decreasing."""
    check_offsets(name, offsets, n_strings, n_bytes)


def _first_unsorted_python(column: Any, order: np.ndarray | None, stride: int, field: int) -> int:
    n = order.shape[0] if order is not None else len(column) // stride
    if order is not None:
        seen = np.zeros(n, bool)
        for i, r in enumerate(order.tolist()):
            if not 0 <= r < n or seen[r]:
                return i
            seen[r] = True
    rows = order.tolist() if order is not None else range(n)
    prev = None
    for i, r in enumerate(rows):
        key = column.raw(r * stride + field)
        if prev is not None and not prev < key:
            return i
        prev = key
    return -1


def first_unsorted(column: Any, order: np.ndarray | None = None, stride: int = 1, field: int = 0) -> int:
    """First position where ``order`` (the identity when None) stops sorting the strings
    ``column[r * stride + field]`` strictly (or is not a permutation), -1 when it sorts them."""
    n = order.shape[0] if order is not None else len(column) // stride
    if n < 2 and order is None:
        return -1
    if column.blob.size >= KERNEL_FROM or n >= KERNEL_FROM // 16:
        from skillsight_fast.kernels.validation import first_unsorted_string

        perm = order if order is not None else np.arange(n, dtype=np.int64)
        return first_unsorted_string(column.blob, column.offsets, perm, stride, field)
    return _first_unsorted_python(column, order, stride, field)


def check_string_column(column: Any, name: str, *, sorted_strictly: bool = False) -> None:
    """A :class:`~skillsight_fast.engine.columns.StringColumn`: sane offsets; sorted and distinct if asked."""
    check_string_offsets(f"{name}_offsets", column.offsets, len(column), int(column.blob.shape[0]))
    if sorted_strictly:
        bad = first_unsorted(column)
        if bad >= 0:
            raise IndexFormatError(f"{name}: terms {bad - 1} and {bad} are not sorted and distinct")


def check_skill_table(table: Any, *, order: bool = True) -> None:
    """The skill columns of format 3: offsets, non-empty ids, the name groups, and (``order``) the id
    permutation sorting the ids strictly (so ids are distinct). UTF-8 and the tags' JSON are checked
    as rows are decoded."""
    from skillsight_fast.engine.columns import SKILL_FIELDS

    nf = len(SKILL_FIELDS)
    column = table.column
    check_string_column(column, "skill_strings")
    n = len(table)
    if table.id_order.shape != (n,):
        raise _fail("skill_id_order", f"shape {table.id_order.shape}, expected ({n},)")
    id_len = column.offsets[1::nf] - column.offsets[0:-1:nf] if n else np.zeros(0, np.int64)
    if (id_len <= 0).any():
        row = int(np.nonzero(id_len <= 0)[0][0])
        raise IndexFormatError(f"skill strings: row {row} has an empty id")
    if order:
        bad = first_unsorted(column, table.id_order, nf, 0)
        if bad >= 0:
            raise IndexFormatError(f"skill strings: ids not distinct or id order broken at position {bad}")
    if table.groups is not None:
        group_of, ptr, rows = table.groups
        if group_of.shape != (n,):
            raise _fail("skill_name_group", f"shape {group_of.shape}, expected ({n},)")
        n_groups = ptr.shape[0] - 1
        check_offsets("skill_name_group_ptr", ptr, n_groups, rows.shape[0])
        check_ids("skill_name_group_rows", rows, n)
        if n and (int(group_of.min()) < -1 or int(group_of.max()) >= n_groups):
            raise _fail("skill_name_group", f"group ids from {int(group_of.min())} to {int(group_of.max())}, "
                        f"expected -1 to {n_groups - 1}")
        if not np.array_equal(group_of[rows], np.repeat(np.arange(n_groups, dtype=np.int64), np.diff(ptr))):
            raise _fail("skill_name_group_rows", "a group lists a row of another group")
