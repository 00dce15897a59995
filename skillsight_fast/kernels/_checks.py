"""Argument checks shared by the kernels' wrappers and their NumPy twins
(:mod:`skillsight_fast.kernels.twins`).

Plain NumPy, no Numba: importing this module does not start the JIT, so the one-shot NumPy stages can
validate their inputs exactly as the kernels do.
"""

from __future__ import annotations

import numpy as np

from skillsight_fast.config import FUSIONS


def check_queries(q_terms: np.ndarray, q_ptr: np.ndarray, n_terms: int) -> tuple[np.ndarray, np.ndarray]:
    """Query evidence tokens as CSR (int32 terms, int64 offsets), checked against ``n_terms``."""
    qt = np.ascontiguousarray(q_terms, dtype=np.int32)
    qp = np.ascontiguousarray(q_ptr, dtype=np.int64)
    if qp.ndim != 1 or qp.shape[0] < 1 or qp[0] != 0 or qp[-1] != qt.shape[0] or np.any(np.diff(qp) < 0):
        raise ValueError("q_ptr must be non-decreasing CSR offsets from 0 to len(q_terms)")
    if qt.size and (qt.min() < 0 or qt.max() >= n_terms):
        raise ValueError(f"query term ids must lie in [0, {n_terms})")
    return qt, qp


def check_candidates(candidates: np.ndarray, qp: np.ndarray) -> np.ndarray:
    """Candidate rows int64 (n, K), one row per query of the offsets ``qp``."""
    cand = np.ascontiguousarray(candidates, dtype=np.int64)
    if cand.ndim != 2 or cand.shape[0] != qp.shape[0] - 1:
        raise ValueError(f"candidates {cand.shape} do not match {qp.shape[0] - 1} queries")
    return cand


def check_fusion(candidates: np.ndarray, s_dense: np.ndarray, s_lex: np.ndarray, k: int, mode: str
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fusion's inputs as (int64, float32, float32) arrays of one shape, ``k`` and ``mode`` checked."""
    if k <= 0:
        raise ValueError(f"k must be positive, got {k}")
    if mode not in FUSIONS:
        raise ValueError(f"unknown fusion mode {mode!r}; choose from {sorted(FUSIONS)}")
    cand = np.ascontiguousarray(candidates, dtype=np.int64)
    sd = np.ascontiguousarray(s_dense, dtype=np.float32)
    sl = np.ascontiguousarray(s_lex, dtype=np.float32)
    if cand.ndim != 2 or sd.shape != cand.shape or sl.shape != cand.shape:
        raise ValueError(f"shapes differ: candidates {cand.shape}, dense {sd.shape}, lexical {sl.shape}")
    return cand, sd, sl
