"""Numba kernels of the sharded and streaming builds (skillsight_fast.indexing): renaming term ids
row by row, and per-token sums."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.kernels._flags import JIT, PARALLEL_JIT


@njit(**PARALLEL_JIT)
def remap_sort_rows(indptr, terms, tf, new_id):  # pragma: no cover - jitted
    """Rename the term ids of a CSR in place (``terms[p] = new_id[terms[p]]``) and sort each row.

    indptr : int64 (n + 1,). terms : int32 (nnz,), tf : uint16 (nnz,), permuted together.
    new_id : int32 (V,). Each row holds distinct ids; each parallel iteration touches only its row.
    """
    for i in prange(indptr.shape[0] - 1):
        a = indptr[i]
        b = indptr[i + 1]
        if b <= a:
            continue
        row = np.empty(b - a, np.int32)
        for p in range(a, b):
            row[p - a] = new_id[terms[p]]
        order = np.argsort(row)
        tfs = tf[a:b].copy()
        for q in range(b - a):
            terms[a + q] = row[order[q]]
            tf[a + q] = tfs[order[q]]


@njit(**JIT)
def token_sums(doc_indptr, doc_terms, docs, slot, generic, sums):  # pragma: no cover - jitted
    """Per-token embedding sums and the documents' generic-token shares over one block of rows.

    doc_indptr : int64 (n + 1,) (offsets into ``doc_terms``, starting at 0), doc_terms : int32.
    docs : float32 (n, d). slot : int32 (V,), row of ``sums`` of each term, -1 if not summed.
    generic : bool (V,). sums : float64 (m, d), accumulated in place.
    Returns (Σ over non-empty documents of |generic terms| / |terms|, number of non-empty documents).
    """
    d = docs.shape[1]
    share = 0.0
    nonempty = 0
    for i in range(doc_indptr.shape[0] - 1):
        a = doc_indptr[i]
        b = doc_indptr[i + 1]
        if b <= a:
            continue
        ng = 0
        for p in range(a, b):
            t = doc_terms[p]
            if generic[t]:
                ng += 1
            s = slot[t]
            if s >= 0:
                for c in range(d):
                    sums[s, c] += docs[i, c]
        share += ng / (b - a)
        nonempty += 1
    return share, nonempty
