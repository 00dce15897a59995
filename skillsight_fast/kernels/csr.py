"""Transpose of a binary CSR matrix (document→terms into term→documents postings)."""

from __future__ import annotations

import numpy as np
from numba import njit

from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import JIT


@njit(**JIT)
def _transpose_csr(indptr, indices, out_ptr, out_rows):  # pragma: no cover - jitted
    """Counting-sort transpose; ``out_ptr`` (n_cols + 1,) given, ``out_rows`` written.

    Rows come out sorted within each column because rows are visited in order. O(nnz).
    """
    fill = out_ptr[:-1].copy()
    for j in range(indptr.shape[0] - 1):
        for p in range(indptr[j], indptr[j + 1]):
            c = indices[p]
            out_rows[fill[c]] = j
            fill[c] += 1


def transpose_csr(indptr: np.ndarray, indices: np.ndarray, n_cols: int, *,
                  out: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Transpose a binary CSR matrix: rows→columns becomes columns→rows (rows sorted).

    Parameters
    ----------
    indptr : int64 (n_rows + 1,)
    indices : int32 (nnz,)
        Column ids, each < ``n_cols``.
    n_cols : int
    out : int32 (nnz,), optional
        Where to write ``out_rows`` (a memory-mapped scratch file, say); default a new array.

    Returns
    -------
    out_ptr : int64 (n_cols + 1,)
    out_rows : int32 (nnz,)

    Examples
    --------
    >>> ptr, rows = transpose_csr(np.array([0, 2, 3]), np.array([0, 1, 1], np.int32), 2)
    >>> ptr.tolist(), rows.tolist()
    ([0, 1, 3], [0, 0, 1])
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    indptr = np.ascontiguousarray(indptr, dtype=np.int64)
    indices = np.ascontiguousarray(indices, dtype=np.int32)
    counts = np.bincount(indices, minlength=n_cols) if indices.size else np.zeros(n_cols, np.int64)
    out_ptr = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(counts, out=out_ptr[1:])
    out_rows = np.empty(indices.shape[0], dtype=np.int32) if out is None else out
    if out_rows.shape != indices.shape or out_rows.dtype != np.int32:
        raise ValueError(f"out must be int32 of shape {indices.shape}")
    _transpose_csr(indptr, indices, out_ptr, out_rows)
    return out_ptr, out_rows
