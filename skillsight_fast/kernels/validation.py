"""Content checks of a loaded index in one pass each (what :mod:`skillsight_fast.engine.validate` runs
on large arrays; its NumPy functions are the reference and run on small ones).

- :func:`check_csr`: CSR offsets from 0 to ``nnz`` never decreasing, every id in ``[0, bound)``, ids
  strictly increasing inside each row, and (optionally) how often each id occurs, in one read of the
  ids (the NumPy checks read them four times and allocate a temporary per pass).
- :func:`first_unsorted_string`: a permutation that sorts strings of a UTF-8 blob strictly (so the
  strings are distinct), checked pair by pair without decoding.

Each returns the first bad position instead of raising; the wrapper in :mod:`skillsight_fast.engine.validate`
turns it into the error message.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import JIT

#: Codes of :func:`check_csr`.
CSR_OK, CSR_ENDS, CSR_DECREASING, CSR_ID_RANGE, CSR_UNSORTED = 0, 1, 2, 3, 4


@njit(**JIT)
def _check_csr(indptr, ids, bound, counts, count):  # pragma: no cover - jitted
    n_rows = indptr.shape[0] - 1
    nnz = ids.shape[0]
    if indptr[0] != 0 or indptr[n_rows] != nnz:
        return CSR_ENDS, 0
    for r in range(n_rows):
        a = indptr[r]
        b = indptr[r + 1]
        if b < a:
            return CSR_DECREASING, r
        prev = -1
        for p in range(a, b):
            v = ids[p]
            if v < 0 or v >= bound:
                return CSR_ID_RANGE, p
            if v <= prev:
                return CSR_UNSORTED, r
            prev = v
            if count:
                counts[v] += 1
    return CSR_OK, 0


def check_csr(indptr: np.ndarray, ids: np.ndarray, bound: int, counts: np.ndarray | None = None
              ) -> tuple[int, int]:
    """``(code, position)`` of the first problem of a CSR matrix (``(CSR_OK, 0)`` when none).

    Parameters
    ----------
    indptr : int64 (n_rows + 1,)
    ids : int32 (nnz,)
    bound : int
        Ids must lie in ``[0, bound)``.
    counts : int64 (bound,), optional
        Zeros; incremented once per occurrence of each id (a transposed CSR's row lengths).

    Returns
    -------
    (code, position) : a row for CSR_DECREASING and CSR_UNSORTED, an entry for CSR_ID_RANGE.
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    if indptr.shape[0] < 1:
        return CSR_ENDS, 0
    buf = counts if counts is not None else np.zeros(1, np.int64)
    code, pos = _check_csr(indptr, ids, np.int64(bound), buf, counts is not None)
    return int(code), int(pos)


@njit(**JIT)
def _first_unsorted(blob, offsets, order, stride, field, seen):  # pragma: no cover - jitted
    n = order.shape[0]
    for i in range(n):
        r = order[i]
        if r < 0 or r >= n or seen[r]:
            return i
        seen[r] = True
    for i in range(n - 1):
        a0 = offsets[order[i] * stride + field]
        a1 = offsets[order[i] * stride + field + 1]
        b0 = offsets[order[i + 1] * stride + field]
        b1 = offsets[order[i + 1] * stride + field + 1]
        la = a1 - a0
        lb = b1 - b0
        m = min(lb, la)
        res = 0
        for t in range(m):
            x = blob[a0 + t]
            y = blob[b0 + t]
            if x != y:
                res = -1 if x < y else 1
                break
        if res == 0:
            res = -1 if la < lb else (0 if la == lb else 1)
        if res >= 0:
            return i + 1
    return -1


def first_unsorted_string(blob: np.ndarray, offsets: np.ndarray, order: np.ndarray, stride: int = 1,
                          field: int = 0) -> int:
    """First position ``i`` of ``order`` that is not a fresh row or whose string is not strictly
    greater than the one before, -1 when ``order`` sorts the strings strictly.

    String ``r`` is ``blob[offsets[r * stride + field] : offsets[r * stride + field + 1]]`` (offsets
    already checked); strings compare as bytes (= code points for UTF-8).
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    seen = np.zeros(order.shape[0], np.bool_)
    return int(_first_unsorted(blob, offsets, order, np.int64(stride), np.int64(field), seen))
