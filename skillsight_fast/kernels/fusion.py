"""Fusion of calibrated dense and lexical scores over the candidate set, then the final top-k."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from skillsight_fast.config import FUSIONS
from skillsight_fast.kernels._checks import check_fusion
from skillsight_fast.kernels._compiled import ensure_compiled
from skillsight_fast.kernels._flags import PARALLEL_JIT
from skillsight_fast.kernels._launch import parallel_launch
from skillsight_fast.kernels.topk import _heap_replace_root, _heap_sort_desc

#: Fusion modes understood by :func:`fuse_topk` (name -> code passed to the kernel).
FUSION_MODES = {name: code for code, name in enumerate(FUSIONS)}


@njit(**PARALLEL_JIT)
def _fuse_topk(
    candidates, s_dense, s_lex, mode, weight, rrf_k, out_pos, out_scores
):  # pragma: no cover - jitted
    """Fuse per candidate and keep the k best positions per row.

    candidates : int64 (n, K), -1 padding. s_dense, s_lex : float32 (n, K).
    mode : 0 eq15, 1 convex, 2 rrf, 3 dense only, 4 lexical only. weight : lexical weight
    (eq15 multiplier / convex alpha). out_pos : int64 (n, k) filled with -1, positions into the
    candidate row. out_scores : float32 (n, k) filled with -inf. Complexity O(n K log K).
    """
    n, kc = candidates.shape
    for i in prange(n):
        m = 0
        sd = 0.0
        sl = 0.0
        dmin = np.inf
        dmax = -np.inf
        lmin = np.inf
        lmax = -np.inf
        for c in range(kc):
            if candidates[i, c] >= 0:
                m += 1
                x = s_dense[i, c]
                y = s_lex[i, c]
                sd += x
                sl += y
                dmin = min(dmin, x)
                dmax = max(dmax, x)
                lmin = min(lmin, y)
                lmax = max(lmax, y)
        if m == 0:
            continue
        mean_d = sd / m
        mean_l = sl / m
        vd = 0.0
        vl = 0.0
        for c in range(kc):
            if candidates[i, c] >= 0:
                vd += (s_dense[i, c] - mean_d) ** 2
                vl += (s_lex[i, c] - mean_l) ** 2
        std_d = np.sqrt(vd / m)
        std_l = np.sqrt(vl / m)
        lex_rank = np.zeros(kc, dtype=np.int64)
        if mode == 2:
            order = np.argsort(-s_lex[i], kind="mergesort")
            r = 0
            for c in order:
                if candidates[i, c] >= 0:
                    lex_rank[c] = r
                    r += 1
            order_d = np.argsort(-s_dense[i], kind="mergesort")
            dense_rank = np.zeros(kc, dtype=np.int64)
            r = 0
            for c in order_d:
                if candidates[i, c] >= 0:
                    dense_rank[c] = r
                    r += 1
        hs = out_scores[i]
        hp = out_pos[i]
        for c in range(kc):
            if candidates[i, c] < 0:
                continue
            x = s_dense[i, c]
            y = s_lex[i, c]
            if mode == 0:
                if std_l > 0.0:
                    z = (y - mean_l) / std_l
                    if z < 0.0:  # noqa: PLR1730 - a branch in the kernel: NaN stays NaN, the type stays
                        z = 0.0
                    scale = std_d if std_d > 0.0 else 1.0
                    f = x + weight * z * scale
                else:
                    f = x
            elif mode == 1:
                nd = (x - dmin) / (dmax - dmin) if dmax > dmin else 0.0
                nl = (y - lmin) / (lmax - lmin) if lmax > lmin else 0.0
                f = (1.0 - weight) * nd + weight * nl
            elif mode == 2:
                f = 1.0 / (rrf_k + 1.0 + dense_rank[c]) + 1.0 / (rrf_k + 1.0 + lex_rank[c])
            elif mode == 3:
                f = x
            else:
                f = y
            fs = np.float32(f)
            if fs > hs[0] or (fs == hs[0] and hp[0] >= 0 and c < hp[0]):
                _heap_replace_root(hs, hp, fs, c)
        _heap_sort_desc(hs, hp)


def fuse_topk(
    candidates: np.ndarray,
    s_dense: np.ndarray,
    s_lex: np.ndarray,
    k: int,
    *,
    mode: str = "eq15",
    weight: float = 1.0,
    rrf_k: float = 60.0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fuse dense and lexical candidate scores and return the top-k.

    Parameters
    ----------
    candidates : int64 (n, K)
        Candidate document rows, -1 for padding.
    s_dense, s_lex : float32 (n, K)
        Calibrated dense score s⊥ and LEC score of each candidate.
    k : int
        Hits per query; rows with fewer valid candidates are padded.
    mode : {"eq15", "convex", "rrf", "dense", "lexical"}
        ``eq15``: S = s⊥ + weight·[z(s_lex)·σ(s⊥)]₊ with z the z-score over the candidate set
        (METHOD.md Eq. 15; if σ(s⊥) = 0 the z-score is added unscaled, if σ(s_lex) = 0 nothing is).
        ``convex``: (1 − weight)·minmax(s⊥) + weight·minmax(s_lex). ``rrf``: Σ 1/(rrf_k + rank).
    weight : float
        Lexical weight (Eq. 15 multiplier, or the convex α).
    rrf_k : float
        RRF constant.

    Returns
    -------
    ids : int64 (n, k)
        Document rows, best first, -1 padding.
    scores : float32 (n, k)
        Fused scores, -inf padding; ties ordered by candidate position (dense order).
    positions : int64 (n, k)
        Position of each hit inside its candidate row (to read its components), -1 padding.
    """
    ensure_compiled()  # a cold cache: compile the whole set, once per install
    cand, sd, sl = check_fusion(candidates, s_dense, s_lex, k, mode)
    pos = np.full((cand.shape[0], k), -1, dtype=np.int64)
    scores = np.full((cand.shape[0], k), -np.inf, dtype=np.float32)
    if cand.size:
        with parallel_launch():
            _fuse_topk(cand, sd, sl, FUSION_MODES[mode], float(weight), float(rrf_k), pos, scores)
    rows = np.arange(cand.shape[0])[:, None]
    ids = np.where(pos >= 0, cand[rows, np.maximum(pos, 0)], -1)
    return ids, scores, pos
