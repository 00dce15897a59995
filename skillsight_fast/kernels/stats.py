"""Corpus statistics for the background subspace: token-induced directions."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import PARALLEL_JIT
from skillsight_fast.kernels._launch import parallel_launch


@njit(**PARALLEL_JIT)
def _per_term(terms, post_indptr, post_docs, docs, out, mean):  # pragma: no cover - jitted
    """out[j] = Σ docs[i] over the documents i containing terms[j], summed in float64; divided by their
    number (df) when ``mean``. A term no document contains keeps its zero row.

    terms : int64 (m,). post_indptr : int64 (V + 1,). post_docs : int32. docs : float32 (N, d).
    out : float32 or float64 (m, d), zeros, row j written only by iteration j. Complexity
    O(d Σ_j df(terms[j])).
    """
    d = docs.shape[1]
    for j in prange(terms.shape[0]):
        t = terms[j]
        a = post_indptr[t]
        b = post_indptr[t + 1]
        acc = np.zeros(d, dtype=np.float64)
        for x in range(a, b):
            row = post_docs[x]
            for c in range(d):
                acc[c] += docs[row, c]
        if b > a:
            for c in range(d):
                out[j, c] = acc[c] / (b - a) if mean else acc[c]
    return out


def _over_postings(terms: np.ndarray, post_indptr: np.ndarray, post_docs: np.ndarray, docs: np.ndarray,
                   dtype: type, mean: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_per_term` on checked arrays: ``(out, terms as int64, post_indptr as int64)``."""
    t = np.ascontiguousarray(terms, dtype=np.int64)
    x = np.ascontiguousarray(docs, dtype=np.float32)
    indptr = np.ascontiguousarray(post_indptr, dtype=np.int64)
    out = np.zeros((t.shape[0], x.shape[1]), dtype=dtype)
    if t.size:
        with parallel_launch():
            _per_term(t, indptr, np.ascontiguousarray(post_docs, dtype=np.int32), x, out, mean)
    return out, t, indptr


def token_directions(
    terms: np.ndarray, post_indptr: np.ndarray, post_docs: np.ndarray, docs: np.ndarray
) -> np.ndarray:
    """Token-induced directions g_t = mean of the embeddings of the documents containing t.

    Parameters
    ----------
    terms : int (m,)
        Term ids.
    post_indptr, post_docs : int64 (V + 1,), int32 (nnz,)
        Postings of the lexical index.
    docs : float32 (N, d)
        Document embeddings.

    Returns
    -------
    float32 (m, d)
        One direction per term (zero for a term no document contains).
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    return _over_postings(terms, post_indptr, post_docs, docs, np.float32, True)[0]


def token_direction_sums(
    terms: np.ndarray, post_indptr: np.ndarray, post_docs: np.ndarray, docs: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The sums behind :func:`token_directions`: Σ of the embeddings of the documents containing each
    term, and how many there are (g_t = sums / counts), kept so that an update can move them by the
    rows it changes instead of passing over every posting again (skillsight_fast.cluster.drift).

    Parameters and shapes as :func:`token_directions`.

    Returns
    -------
    sums : float64 (m, d)
        One sum per term (zero for a term no document contains).
    counts : int64 (m,)
        The terms' document frequencies.
    """
    sums, t, indptr = _over_postings(terms, post_indptr, post_docs, docs, np.float64, False)
    return sums, indptr[t + 1] - indptr[t]
