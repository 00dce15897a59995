"""Numba kernels of the synthetic scale-ups (:mod:`skillsight_fast.lab.benchmark.synthetic`): each row's
resampled terms, drawn from a seeded counter-based hash so that rows are independent and parallel."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.kernels._flags import JIT, PARALLEL_JIT


@njit(inline="always", **JIT)
def mix64(x):  # pragma: no cover - jitted
    """splitmix64 finaliser: a seeded, order-free pseudo-random 64-bit value."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@njit(**PARALLEL_JIT)
def resample_terms(src, n_real, src_indptr, src_terms, rare, keep, v0, n_new, seed, extra_ptr, extra_terms,
                    out_ptr, out_terms, out_len):  # pragma: no cover - jitted
    """Row j: kept source terms (rare ones renamed to fresh ids) + its extras, sorted, de-duplicated.

    Writes out_terms[out_ptr[j]:] and out_len[j]; each iteration writes only its own segment.
    """
    n = src.shape[0]
    for j in prange(n):
        s = src[j]
        a = src_indptr[s]
        b = src_indptr[s + 1]
        o = out_ptr[j]
        m = 0
        for p in range(a, b):
            t = src_terms[p]
            if j < n_real:
                out_terms[o + m] = t
                m += 1
                continue
            h = mix64(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(j) * np.uint64(1000003)
                     + np.uint64(t))
            if (h >> np.uint64(40)) * (1.0 / 16777216.0) >= keep:
                continue
            if rare[t] and n_new > 0:
                t = v0 + np.int32(h % np.uint64(n_new))
            out_terms[o + m] = t
            m += 1
        for p in range(extra_ptr[j], extra_ptr[j + 1]):
            out_terms[o + m] = extra_terms[p]
            m += 1
        seg = np.sort(out_terms[o : o + m])
        w = 0
        for p in range(m):
            if p == 0 or seg[p] != seg[p - 1]:
                out_terms[o + w] = seg[p]
                w += 1
        out_len[j] = w


@njit(**JIT)
def compact_rows(ptr, terms, lengths, new_ptr, out):  # pragma: no cover - jitted
    """Copy the first lengths[j] terms of row j (at ptr[j]) to new_ptr[j] in out: a CSR without its slack."""
    for j in range(lengths.shape[0]):
        a = ptr[j]
        b = new_ptr[j]
        for p in range(lengths[j]):
            out[b + p] = terms[a + p]
