"""The general fitted query table: a token table fitted once to the transformer on public text and the
bundled library (``scripts/build_general_table.py``), shipped as package data.

It is the prior and starting point of a library's fitted table (:mod:`skillsight_fast.models.fitted`):
a token the library uses starts from its general row (else from its contextual row), and a token the
library never uses keeps its general row, so a task word unseen in a small library still has a vector.
Stored as ``ids.npy`` (int32, ascending token ids), ``rows.npy`` (int8, one row per id) and
``scale.npy`` (float32, per row: ``row * scale`` is the float vector), with ``meta.json``; attribution
of the texts it was fitted on in ``NOTICE.md`` beside them.
"""

from __future__ import annotations

import json
import os
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.errors import ModelError

#: Package data folder of the shipped table.
PACKAGE_FOLDER = "data/general_query_table"


def quantize_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row int8: ``(rows int8 (m, d), scale float32 (m,))`` with ``rows * scale ~ table``."""
    table = np.asarray(table, np.float32)
    scale = np.abs(table).max(axis=1) / 127.0 if table.size else np.zeros(table.shape[0], np.float32)
    scale = np.where(scale > 0, scale, 1.0).astype(np.float32)
    rows = np.clip(np.rint(table / scale[:, None]), -127, 127).astype(np.int8)
    return rows, scale


def save_general_table(folder: str | os.PathLike[str], ids: np.ndarray, table: np.ndarray,
                       meta: dict[str, Any] | None = None) -> None:
    """Write a general table (int8 rows) to ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = np.asarray(ids, np.int32)
    if ids.ndim != 1 or table.shape[0] != ids.shape[0]:
        raise ModelError(f"general table: {ids.shape} ids for {table.shape} rows")
    rows, scale = quantize_rows(table)
    np.save(folder / "rows.npy", rows, allow_pickle=False)
    np.save(folder / "scale.npy", scale, allow_pickle=False)
    np.save(folder / "ids.npy", ids, allow_pickle=False)
    (folder / "meta.json").write_text(json.dumps({"dim": int(table.shape[1]), "rows": int(ids.size),
                                                  **(meta or {})}, indent=1) + "\n")


def load_general_table(folder: str | os.PathLike[str] | None = None, dim: int | None = None,
                       checksum: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(ids int32 (m,), table float32 (m, d))`` of the general table in ``folder`` (default: the shipped
    one). Raises ModelError when it is missing, malformed, not of dimension ``dim``, or fitted for a model
    whose weights' checksum is not ``checksum``."""
    base: Any = Path(folder) if folder is not None else files("skillsight_fast").joinpath(PACKAGE_FOLDER)
    if checksum is not None:
        try:
            meta = json.loads(base.joinpath("meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelError(f"cannot read the general query table's meta.json in {base}: {exc}") from exc
        if meta.get("checksum") != checksum:
            raise ModelError(f"the general query table was fitted for the model {meta.get('model_id')!r} "
                             f"(checksum {str(meta.get('checksum'))[:12]}), not this one ({checksum[:12]})")
    try:
        with base.joinpath("ids.npy").open("rb") as f:
            ids = np.load(f, allow_pickle=False)
        with base.joinpath("rows.npy").open("rb") as f:
            rows = np.load(f, allow_pickle=False)
        with base.joinpath("scale.npy").open("rb") as f:
            scale = np.load(f, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ModelError(f"cannot read the general query table in {base}: {exc}") from exc
    if (ids.ndim != 1 or rows.ndim != 2 or rows.dtype != np.int8 or rows.shape[0] != ids.shape[0]
            or scale.shape != ids.shape or (ids.size and (ids.min() < 0 or np.any(np.diff(ids) <= 0)))):
        raise ModelError(f"general query table in {base} is malformed ({ids.shape} ids, {rows.shape} rows)")
    if dim is not None and rows.shape[1] != dim:
        raise ModelError(f"general query table has dimension {rows.shape[1]}, the index {dim}")
    return ids.astype(np.int32), np.ascontiguousarray(rows.astype(np.float32) * scale[:, None], np.float32)


def merge_prior(lib_ids: np.ndarray, lib_table: np.ndarray, gen_ids: np.ndarray, gen_table: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    """The union table: every general token with its general row, and a library token the general table
    lacks with its library row rescaled to the general rows' median norm. ids ascending.

    Returns
    -------
    ids : int32 (m,)
    table : float32 (m, d)
    """
    lib_ids = np.asarray(lib_ids, np.int64)
    gen_ids = np.asarray(gen_ids, np.int64)
    if lib_table.shape[1] != gen_table.shape[1]:
        raise ModelError(f"general table of dimension {gen_table.shape[1]}, "
                         f"library table {lib_table.shape[1]}")
    only = ~np.isin(lib_ids, gen_ids)
    extra = np.asarray(lib_table, np.float32)[only]
    if extra.size:
        g = float(np.median(np.linalg.norm(gen_table, axis=1))) if gen_table.size else 1.0
        lib_norm = float(np.median(np.linalg.norm(lib_table, axis=1))) or 1.0
        extra = extra * (g / lib_norm)
    ids = np.concatenate([gen_ids, lib_ids[only]])
    table = np.vstack([np.asarray(gen_table, np.float32), extra])
    order = np.argsort(ids, kind="stable")
    return ids[order].astype(np.int32), np.ascontiguousarray(table[order], np.float32)


def shipped_general_table(checksum: str | None, dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The shipped general table for a model with weights ``checksum`` and dimension ``dim``, or None
    (logged) when it is not shipped or was fitted for another model: the fit then starts from the
    library's contextual table alone."""
    import logging

    base = files("skillsight_fast").joinpath(PACKAGE_FOLDER)
    if checksum is None or not base.joinpath("ids.npy").is_file():
        return None
    try:
        return load_general_table(None, dim=dim, checksum=checksum)
    except ModelError as exc:
        logging.getLogger(__name__).info("general query table not used: %s", exc)
        return None
