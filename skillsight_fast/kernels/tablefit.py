"""Numba kernels of the fitted query table (:mod:`skillsight_fast.models.fitted`): weighted sums of
table rows over a bag of tokens, and their gradients.

A text is a CSR row of (slot, count) pairs; its pooled vector is ``u = sum_j c_j w_s E_s`` over its slots
``s``. The NumPy twins (``pool_reference``, ``pool_backward_reference`` in tests) check both.
"""

from __future__ import annotations

import numba as nb
import numpy as np

import skillsight_fast.kernels._flags  # noqa: F401 - says when a kernel compiles (kernels._notice)


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
def pool_rows_backward_into(rows: np.ndarray, indptr: np.ndarray, slots: np.ndarray, counts: np.ndarray,
                            weights: np.ndarray, table: np.ndarray, grad: np.ndarray, g_table: np.ndarray,
                            g_logw: np.ndarray,
                            mark: np.ndarray) -> np.ndarray:  # pragma: no cover - compiled
    """Gradients of ``sum_k grad[k] . u[k]`` with respect to ``table`` and to ``log(weights)``,
    accumulated into the zeroed buffers ``g_table`` and ``g_logw``; returns the slots touched (int64,
    each once) and sets ``mark`` on them (the caller's :func:`adam_rows` clears both)."""
    d = table.shape[1]
    touched = np.empty(min(table.shape[0], slots.shape[0]), np.int64)
    n_touched = 0
    for k in range(rows.shape[0]):
        r = rows[k]
        for j in range(indptr[r], indptr[r + 1]):
            s = slots[j]
            if not mark[s]:
                mark[s] = True
                touched[n_touched] = s
                n_touched += 1
            c = counts[j] * weights[s]
            dot = 0.0
            for t in range(d):
                g_table[s, t] += c * grad[k, t]
                dot += grad[k, t] * table[s, t]
            g_logw[s] += c * dot
    return touched[:n_touched]


@nb.njit(cache=True, fastmath=False)
def adam_rows(touched: np.ndarray, param: np.ndarray, prior: np.ndarray, grad: np.ndarray, m1: np.ndarray,
              v1: np.ndarray, mark: np.ndarray, prior_weight: float, lr: float, b1: float, b2: float,
              bias1: float, bias2: float, eps: float) -> None:  # pragma: no cover - compiled
    """Adam on the rows ``touched`` of ``param`` with the gradient ``grad + 2 prior_weight (param - prior)``,
    in place (lazy Adam: untouched rows and their moments stay as they are); clears ``grad`` and ``mark``
    on those rows."""
    d = param.shape[1]
    for i in range(touched.shape[0]):
        s = touched[i]
        for t in range(d):
            g = grad[s, t] + 2.0 * prior_weight * (param[s, t] - prior[s, t])
            m = b1 * m1[s, t] + (1.0 - b1) * g
            v = b2 * v1[s, t] + (1.0 - b2) * g * g
            m1[s, t] = m
            v1[s, t] = v
            param[s, t] -= lr * (m / bias1) / (np.sqrt(v / bias2) + eps)
            grad[s, t] = 0.0
        mark[s] = False
