"""What an index refers to instead of storing it: the shipped general query table and the static
query model in the user's cache, each named by sha256 in the manifest's ``shared`` section (a small
library's index stays small; docs/SECURITY.md, "Files an index depends on")."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.state import IndexState
from skillsight_fast.errors import IndexFormatError, SkillsightError
from skillsight_fast.files import sha256_file

#: The dense arrays of the query table, left out of an index that uses the shipped general table as it is.
GENERAL_TABLE_ARRAYS = ("query_table_ids", "query_table")
#: The shipped general table's files whose sha256 an index records (models/general.py).
GENERAL_TABLE_FILES = ("ids.npy", "rows.npy", "scale.npy", "meta.json")


def _shipped_general_digest() -> str | None:
    """sha256 over the shipped general table's files (None: not shipped with this install)."""
    import hashlib
    from importlib.resources import files as package_files

    from skillsight_fast.models.general import PACKAGE_FOLDER

    base = package_files("skillsight_fast").joinpath(PACKAGE_FOLDER)
    digest = hashlib.sha256()
    for name in GENERAL_TABLE_FILES:
        part = base.joinpath(name)
        if not part.is_file():
            return None
        digest.update(name.encode() + b"\0" + part.read_bytes())
    return digest.hexdigest()


def _shared_general_table(state: IndexState) -> dict[str, Any] | None:
    """The manifest's reference to the shipped general table when the index's query table is that
    table as it is (a small library's fitted tier: :func:`skillsight_fast.models.fitted.direct_general_table`),
    else None (the table is the library's own and is stored)."""
    ids, table = state.dense.query_table_ids, state.dense.query_table
    if ids is None or table is None:
        return None
    from skillsight_fast.models.general import load_general_table

    digest = _shipped_general_digest()
    if digest is None:
        return None
    try:
        g_ids, g_table = load_general_table(None, dim=int(table.shape[1]))
    except SkillsightError:
        return None
    if g_ids.shape != ids.shape or g_table.shape != table.shape or not (
            np.array_equal(g_ids, ids) and np.array_equal(g_table, table)):
        return None
    return {"sha256": digest, "rows": int(ids.shape[0]), "dim": int(table.shape[1])}


def _load_shared_general_table(directory: Path, ref: Any, arrays: dict[str, np.ndarray]) -> None:
    """Put the shipped general table the manifest refers to into ``arrays``; refuse a missing or
    different one with a message."""
    if not isinstance(ref, dict) or not isinstance(ref.get("sha256"), str) or not isinstance(ref.get("dim"), int):
        raise IndexFormatError(f"{directory}: malformed manifest ('shared.general_query_table' must be "
                               "{sha256, rows, dim})")
    from skillsight_fast.models.general import load_general_table

    digest = _shipped_general_digest()
    if digest != ref["sha256"]:
        have = "is not installed" if digest is None else f"has sha256 {digest[:12]}"
        raise IndexFormatError(
            f"{directory}: the index refers to the general query table shipped with skillsight-fast (sha256 "
            f"{ref['sha256'][:12]}), and this install's {have}: rebuild the index with this version")
    ids, table = load_general_table(None, dim=ref["dim"])
    arrays["query_table_ids"], arrays["query_table"] = ids, table


def _refer_static_model(config: IndexConfig, ref: dict[str, Any]) -> IndexConfig:
    """The config that names the static tiers' model by its folder in the user's cache (a model
    folder outside the cache is copied there once, by content), with the sha256 of each of its
    files recorded in ``ref`` (the manifest's ``shared.static_model``): the index stores no copy.
    A transformer-only config (no ``query_model``) is returned unchanged."""
    if not config.encoder.query_model:
        return config
    src = Path(config.encoder.query_model).expanduser().absolute()
    folder = _in_static_cache(src)
    names = sorted(f.name for f in folder.iterdir() if f.is_file() and not f.name.startswith("."))
    ref.update({"folder": folder.name, "files": {name: sha256_file(folder / name) for name in names}})
    changes: dict[str, Any] = {"query_model": folder.name}
    if config.encoder.model and Path(config.encoder.model).expanduser().absolute() == src:
        changes["model"] = folder.name  # the static tier encodes the skills with it too
    return config.replace(**changes)


def _static_cache() -> Path:
    from skillsight_fast.models.encoder import cache_root

    return cache_root() / "static"


def _in_static_cache(src: Path) -> Path:
    """``src`` when it is a folder of the static-model cache, else its copy there (made once: a
    folder named after ``src`` and its weights' sha256)."""
    cache = _static_cache()
    if src.parent.resolve() == cache.resolve():
        return src
    weights = src / "model.safetensors"
    tag = sha256_file(weights)[:12] if weights.is_file() else "files"
    dest = cache / f"{src.name}-{tag}"
    if not dest.is_dir():
        cache.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.tmp-", dir=cache))
        try:
            for f in sorted(src.iterdir()):
                if f.is_file() and not f.name.startswith("."):
                    shutil.copyfile(f, tmp / f.name)
            os.replace(tmp, dest)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if not dest.is_dir():
                raise
    return dest


class StaticModelMissing(IndexFormatError):
    """The static query model an index refers to is not in this user's cache (another HOME, a
    cleared cache): an index whose skills the transformer encoded answers with the transformer."""


def _check_static_model(directory: Path, ref: Any, verify: bool) -> Path:
    """The cache folder of the static model the manifest refers to, its files there and (``verify``)
    their sha256 as recorded; a missing file raises :class:`StaticModelMissing`, a different one is
    refused with a message. The weights' own checksum is checked again when the static encoder loads
    (the manifest's ``model.query``)."""
    if (not isinstance(ref, dict) or not isinstance(ref.get("folder"), str) or not isinstance(ref.get("files"), dict)
            or not ref["folder"] or "/" in ref["folder"] or ref["folder"].startswith(".")):
        raise IndexFormatError(f"{directory}: malformed manifest ('shared.static_model' must be {{folder, files}})")
    folder = _static_cache() / ref["folder"]
    fix = ("rebuild the index (skillsight index ... -o DIR), which prepares the static model in the cache again")
    for name, digest in ref["files"].items():
        path = folder / str(name)
        if not isinstance(digest, str) or "/" in str(name):
            raise IndexFormatError(f"{directory}: malformed manifest ('shared.static_model' files)")
        if not path.is_file():
            raise StaticModelMissing(f"{directory}: the index refers to the static model file {path}, which is "
                                   f"missing: {fix}")
        if verify and name != "model.safetensors" and sha256_file(path) != digest:
            raise IndexFormatError(f"{directory}: the static model file {path} differs from the one the index "
                                   f"was built with (sha256 {digest[:12]}): {fix}")
    return folder


#: The arrays of the static tiers (query map, token table): left out when an index falls back to the
#: transformer because its static model is missing.
STATIC_TIER_ARRAYS = ("query_map", "query_table", "query_table_ids")


def transformer_fallback(config: IndexConfig) -> IndexConfig | None:
    """The config that answers every task with the int8 transformer (the cascade's own fallback) when
    the static model an index refers to is missing, or None when the skills themselves were encoded
    by the static model (nothing else can encode their space)."""
    if config.encoder.query_encoder not in ("static-mapped", "contextual", "fitted") or (
            config.encoder.model == config.encoder.query_model):
        return None
    return config.replace(query_encoder="transformer", query_model=None, query_int8=True)


def fallback_notice(why: str) -> str:
    """The one-line warning of a load that fell back to the transformer (``why``: the missing file)."""
    return (why.split(": rebuild")[0] + "; answering every task with the int8 transformer instead (slower; "
            "rebuilding the index as this user restores the lookup)")


def _resolve_static_model(config: IndexConfig, directory: Path) -> IndexConfig:
    """The loaded config with its static model's folder made absolute (an index that refers to the
    cache by ``shared.static_model`` has it already: :func:`_check_static_model`): the index's own
    copy (an index saved with one); for an older index, the recorded folder, or else the folder of
    the same name in this user's cache (the model's checksum, kept in the manifest, is checked when
    it loads)."""
    if not config.encoder.query_model:
        return config
    recorded = Path(config.encoder.query_model)
    if not recorded.is_absolute():
        folder = str(directory.absolute() / recorded)
    elif recorded.is_dir():
        return config
    else:
        folder = str(_static_cache() / recorded.name)
    changes: dict[str, Any] = {"query_model": folder}
    if config.encoder.model == config.encoder.query_model:
        changes["model"] = folder
    return config.replace(**changes)
