"""``manifest.json`` of an index folder: read it (bounded) and check its schema before anything else is read."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from skillsight_fast.engine import validate
from skillsight_fast.engine.io_folder import MANIFEST, TEXTS, recover
from skillsight_fast.engine.state import BUNDLES
from skillsight_fast.errors import IndexFormatError
from skillsight_fast.limits import load_json, read_regular_file

logger = logging.getLogger(__name__)

#: Version 3: the skill records, the vocabulary and the bodies also as string columns (UTF-8 blob +
#: int64 offsets, ``.npy``; the manifest's ``strings`` section), so a load parses no JSON lines.
#: Version 2 (arrays grouped in bundles, the build's decisions in their own record) still loads;
#: version-1 folders get the "rebuild the index" error.
FORMAT_VERSION = 3
#: The versions this package reads.
READABLE_VERSIONS = (2, 3)
#: Every array of the bundles: name -> (bundle, dtype, number of dimensions); the scan's arrays
#: are listed by skillsight_fast.engine.scan.
ALL_ARRAYS: dict[str, tuple[str, str, int]] = {
    name: (bundle, spec.dtype, spec.ndim) for bundle, cls in BUNDLES.items() for name, spec in cls.ARRAYS.items()
}
#: Largest manifest.json read (bytes); a real one is a few KB (plus the scan's flags).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
#: The string columns of format 3: column -> (part -> (file stem, dtype)).
STRING_COLUMNS: dict[str, dict[str, tuple[str, str]]] = {
    "skills": {"blob": ("skill_strings", "uint8"), "offsets": ("skill_offsets", "int64"),
               "order": ("skill_id_order", "int64"), "group_of": ("skill_name_group", "int64"),
               "group_ptr": ("skill_name_group_ptr", "int64"), "group_rows": ("skill_name_group_rows", "int64")},
    "vocab": {"blob": ("vocab_strings", "uint8"), "offsets": ("vocab_offsets", "int64")},
    "texts": {"blob": ("text_strings", "uint8"), "offsets": ("text_offsets", "int64")},
}


def read_manifest(directory: Path) -> dict[str, Any]:
    """Read and check an index manifest (format and version)."""
    directory = directory.expanduser()
    recover(directory)
    path = directory / MANIFEST
    if not directory.is_dir():
        raise IndexFormatError(f"{directory}: no such index folder")
    if not path.is_file():
        raise IndexFormatError(f"{directory}: not an index (no {MANIFEST})")
    raw = read_regular_file(path, MAX_MANIFEST_BYTES, error=IndexFormatError, what="the manifest")
    manifest = load_json(raw, error=IndexFormatError, what=f"{path}: unreadable manifest", allow_constants=True)
    if not isinstance(manifest, dict) or manifest.get("format") != "skillsight-fast-index":
        raise IndexFormatError(f"{path}: not a skillsight-fast manifest")
    version = manifest.get("format_version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise IndexFormatError(
            f"{directory}: index format version {version!r}, this skillsight-fast reads versions "
            f"{', '.join(map(str, READABLE_VERSIONS))}; rebuild the index with `skillsight index`"
        )
    check_manifest_schema(manifest, path)
    return manifest


_JSON_KINDS = {dict: "object", str: "string", list: "array"}


def check_manifest_schema(manifest: dict[str, Any], path: Path) -> None:
    """The manifest's structure: the keys and value types every reader relies on (``info`` too)."""
    def bad(what: str) -> IndexFormatError:
        return IndexFormatError(f"{path}: malformed manifest ({what})")

    for key, kind in (("package_version", str), ("model", dict), ("config", dict), ("decisions", dict),
                      ("stats", dict), ("arrays", dict), ("files", dict), ("scan", dict),
                      ("injection_screen", dict), ("roots", list)):
        value = manifest.get(key)
        if key == "injection_screen" and value is None:
            value = manifest.get("injection_scan")  # the key's name before the screen was renamed
        if not isinstance(value, kind):
            raise bad(f"{key!r} must be a JSON {_JSON_KINDS[kind]}")
    n = manifest.get("n_skills")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise bad("'n_skills' must be a non-negative integer")
    model = manifest["model"]
    if not isinstance(model.get("id"), str) or not isinstance(model.get("checksum"), str):
        raise bad("'model' needs string 'id' and 'checksum'")
    if not isinstance(model.get("dim"), int) or isinstance(model.get("dim"), bool):
        raise bad("'model.dim' must be an integer")
    for name, entry in manifest["arrays"].items():
        if name not in ALL_ARRAYS:
            raise bad(f"unknown array {name!r}")
        if (not isinstance(entry, dict) or entry.get("file") != f"{name}.npy"
                or entry.get("bundle") != ALL_ARRAYS[name][0]
                or not isinstance(entry.get("shape"), list) or not isinstance(entry.get("sha256"), str)
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in entry["shape"])):
            raise bad(f"array entry {name!r} must be {{bundle: '{ALL_ARRAYS[name][0]}', file: '{name}.npy', "
                      "dtype, shape: [ints], sha256}")
    for fname, digest in manifest["files"].items():
        if (fname not in ("vocab.json", "skills.jsonl", TEXTS) and not validate.is_model_file_entry(fname)
                or not isinstance(digest, str)):
            raise bad(f"unknown file entry {fname!r}")
    stats = manifest["stats"]
    for key in ("vocab_size", "n_generic", "rank", "effective_rank", "dim", "n_docs"):
        if not isinstance(stats.get(key), int) or isinstance(stats.get(key), bool):
            raise bad(f"'stats.{key}' must be an integer")
    tau = stats.get("otsu_tau")
    if tau is not None and (not isinstance(tau, (int, float)) or isinstance(tau, bool)):
        raise bad("'stats.otsu_tau' must be a number or null")
    if not all(isinstance(r, str) for r in manifest["roots"]):
        raise bad("'roots' must be a list of strings")
    pins = manifest.get("pins", [])
    if not isinstance(pins, list) or not all(isinstance(r, str) for r in pins):
        raise bad("'pins' must be a list of skill ids")
    if "abstention" in manifest:  # the label-free rule derived at build (engine.abstention)
        rule = manifest["abstention"]
        if not isinstance(rule, dict) or rule.get("signal") not in ("cosine", "score"):
            raise bad("'abstention' must be an object with 'signal' cosine or score")
        for key in ("threshold", "duplicate_cosine"):
            value = rule.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value)):
                raise bad(f"'abstention.{key}' must be a finite number or null")
    if manifest.get("format_version") == 3:
        strings = manifest.get("strings")
        if not isinstance(strings, dict) or not {"skills", "vocab"} <= set(strings) or set(strings) - set(STRING_COLUMNS):
            raise bad("'strings' must list the string columns skills, vocab (and optionally texts)")
        for column, parts in strings.items():
            want = STRING_COLUMNS[column]
            if not isinstance(parts, dict) or set(parts) != set(want):
                raise bad(f"string column {column!r} must have the parts {', '.join(want)}")
            for part, entry in parts.items():
                stem, dtype = want[part]
                if (not isinstance(entry, dict) or entry.get("file") != f"{stem}.npy" or entry.get("dtype") != dtype
                        or not isinstance(entry.get("shape"), list) or not isinstance(entry.get("sha256"), str)
                        or len(entry["shape"]) != 1
                        or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in entry["shape"])):
                    raise bad(f"string column entry {column}.{part} must be {{file: '{stem}.npy', dtype: '{dtype}', "
                              "shape: [int], sha256}")
