"""Background projection: remove the span of an orthonormal basis from a batch of vectors."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import PARALLEL_JIT
from skillsight_fast.kernels._launch import parallel_launch


@njit(**PARALLEL_JIT)
def _project_out_background(vectors, basis, renormalize, out):  # pragma: no cover - jitted
    """Write ``v - basis.T @ (basis @ v)`` for each row ``v`` of ``vectors`` into ``out``.

    Parameters
    ----------
    vectors : float32 (n, d), read only.
    basis : float32 (r, d), orthonormal rows, read only.
    renormalize : bool, rescale each output row to unit norm (rows with norm <= 1e-6 become zero).
    out : float32 (n, d), written row by row.

    Complexity O(n r d). Each parallel iteration writes only its own row of ``out``.
    """
    n, d = vectors.shape
    r = basis.shape[0]
    for i in prange(n):
        coef = np.zeros(r, dtype=np.float32)
        for j in range(r):
            acc = np.float32(0.0)
            for t in range(d):
                acc += vectors[i, t] * basis[j, t]
            coef[j] = acc
        for t in range(d):
            out[i, t] = vectors[i, t]
        for j in range(r):
            c = coef[j]
            for t in range(d):
                out[i, t] -= c * basis[j, t]
        if renormalize:
            norm = np.float32(0.0)
            for t in range(d):
                norm += out[i, t] * out[i, t]
            if norm > 1e-12:
                inv = np.float32(1.0) / np.sqrt(norm)
                for t in range(d):
                    out[i, t] *= inv
            else:  # nothing left but rounding noise: a zero vector, not amplified noise
                for t in range(d):
                    out[i, t] = 0.0
    return out


def project_out_background(
    vectors: np.ndarray, basis: np.ndarray, *, renormalize: bool = False
) -> np.ndarray:
    """Remove the background subspace from a batch of vectors.

    Parameters
    ----------
    vectors : array (n, d) or (d,)
        Query or document vectors; converted to C-contiguous float32 once.
    basis : array (r, d)
        Orthonormal rows spanning the background subspace (``B.T`` in METHOD.md). r may be 0.
    renormalize : bool
        Rescale each projected vector to unit L2 norm.

    Returns
    -------
    numpy.ndarray, float32 (n, d)
        ``v - B Bᵀ v`` for each row; always 2-D.

    Examples
    --------
    >>> import numpy as np
    >>> basis = np.eye(3, dtype=np.float32)[:1]
    >>> project_out_background(np.ones((1, 3), np.float32), basis)
    array([[0., 1., 1.]], dtype=float32)
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    v = np.ascontiguousarray(np.atleast_2d(vectors), dtype=np.float32)
    b = np.ascontiguousarray(basis, dtype=np.float32).reshape(-1, v.shape[1]) if basis.size else (
        np.zeros((0, v.shape[1]), dtype=np.float32)
    )
    if b.ndim != 2 or b.shape[1] != v.shape[1]:
        raise ValueError(f"basis has shape {basis.shape}, expected (r, {v.shape[1]})")
    out = np.empty_like(v)
    if v.shape[0] == 0:
        return out
    with parallel_launch():
        return _project_out_background(v, b, bool(renormalize), out)
