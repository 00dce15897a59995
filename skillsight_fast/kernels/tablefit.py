"""Numba kernels of the fitted query table (:mod:`skillsight_fast.models.fitted`): weighted sums of
table rows over a bag of tokens, and their gradients.

A text is a CSR row of (slot, count) pairs; its pooled vector is ``u = sum_j c_j w_s E_s`` over its slots
``s``. The NumPy twins (``pool_reference``, ``pool_backward_reference`` in tests) check both.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, fastmath=False)
def pool_rows(rows: np.ndarray, indptr: np.ndarray, slots: np.ndarray, counts: np.ndarray,
              weights: np.ndarray, table: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """``u[k] = sum_j counts[j] * weights[slots[j]] * table[slots[j]]`` over the CSR row ``rows[k]``."""
    d = table.shape[1]
    out = np.zeros((rows.shape[0], d), np.float32)
    for k in range(rows.shape[0]):
        r = rows[k]
        for j in range(indptr[r], indptr[r + 1]):
            s = slots[j]
            c = counts[j] * weights[s]
            for t in range(d):
                out[k, t] += c * table[s, t]
    return out


@nb.njit(cache=True, fastmath=False)
def pool_rows_backward(rows: np.ndarray, indptr: np.ndarray, slots: np.ndarray, counts: np.ndarray,
                       weights: np.ndarray, table: np.ndarray, grad: np.ndarray
                       ) -> tuple[np.ndarray, np.ndarray]:  # pragma: no cover - compiled
    """Gradients of ``sum_k grad[k] . u[k]`` with respect to ``table`` and to ``log(weights)``."""
    m, d = table.shape
    g_table = np.zeros((m, d), np.float32)
    g_logw = np.zeros(m, np.float32)
    for k in range(rows.shape[0]):
        r = rows[k]
        for j in range(indptr[r], indptr[r + 1]):
            s = slots[j]
            c = counts[j] * weights[s]
            dot = 0.0
            for t in range(d):
                g_table[s, t] += c * grad[k, t]
                dot += grad[k, t] * table[s, t]
            g_logw[s] += c * dot
    return g_table, g_logw
