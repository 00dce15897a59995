"""Index-build statistics of METHOD.md: IDF, Otsu generic tokens, background subspace, LEC weights."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from skillsight_fast import kernels
from skillsight_fast.config import BM25_B, BM25_K1  # noqa: F401 - the BM25 constants, owned by config


def idf_from_df(df: np.ndarray, n_docs: int) -> np.ndarray:
    """idf(t) = ln((N + 1) / (df(t) + 1)) + 1, float32 (V,)."""
    return (np.log((n_docs + 1.0) / (df.astype(np.float64) + 1.0)) + 1.0).astype(np.float32)


def lec_weights(idf: np.ndarray, df: np.ndarray, n_docs: int, beta: float = 1.0) -> np.ndarray:
    """w(t) = idf(t) · (1 − df(t)/N)^β, float32 (V,)."""
    frac = 1.0 - df.astype(np.float64) / max(n_docs, 1)
    return (idf.astype(np.float64) * np.power(np.clip(frac, 0.0, 1.0), beta)).astype(np.float32)




def bm25_idf(df: np.ndarray, n_docs: int) -> np.ndarray:
    """Lucene BM25 idf ln(1 + (N − df + 0.5)/(df + 0.5)), float32 (V,); always > 0."""
    d = np.asarray(df, dtype=np.float64)
    return np.log1p((n_docs - d + 0.5) / (d + 0.5)).astype(np.float32)


def otsu_threshold(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """Otsu's threshold over 1-D values: the split maximising between-class variance.

    Exact over all distinct values (no histogram binning). Class 0 is ``values <= tau``.
    Returns ``+inf`` when fewer than two distinct values exist (everything is one class).

    Examples
    --------
    >>> otsu_threshold(np.array([1.0, 1.1, 1.2, 5.0, 5.1]))
    1.2
    """
    v = np.asarray(values, dtype=np.float64)
    w = np.ones_like(v) if weights is None else np.asarray(weights, dtype=np.float64)
    if v.size == 0:
        return math.inf
    uniq, inv = np.unique(v, return_inverse=True)
    if uniq.size < 2:
        return math.inf
    wsum = np.bincount(inv, weights=w)
    vsum = np.bincount(inv, weights=w * v)
    w0 = np.cumsum(wsum)[:-1]
    s0 = np.cumsum(vsum)[:-1]
    total_w, total_s = wsum.sum(), vsum.sum()
    w1 = total_w - w0
    mu0 = s0 / w0
    mu1 = (total_s - s0) / w1
    between = w0 * w1 * (mu0 - mu1) ** 2
    return float(uniq[int(np.argmax(between))])


def effective_rank(singular_values: np.ndarray) -> int:
    """r = ⌈exp(−Σ p_i ln p_i)⌉ with p_i = σ_i² / Σσ² (0 for an all-zero spectrum)."""
    s2 = np.asarray(singular_values, dtype=np.float64) ** 2
    total = s2.sum()
    if total <= 0:
        return 0
    p = s2[s2 > 0] / total
    return math.ceil(math.exp(-(p * np.log(p)).sum()) - 1e-9)


@dataclass(frozen=True)
class Background:
    """The background subspace and what it was estimated from."""

    basis: np.ndarray  # float32 (r, d), orthonormal rows
    singular_values: np.ndarray  # float32 (m + 1,) or fewer
    effective_rank: int
    n_directions: int


def select_background_terms(
    df: np.ndarray, idf: np.ndarray, generic: np.ndarray, how: str, seed: int = 0
) -> np.ndarray:
    """Term ids whose directions build the background subspace.

    ``low_idf`` = T_g; ``all`` = every term with df ≥ 2; ``random`` = |T_g| terms drawn from those;
    ``high_idf`` = the |T_g| rarest terms with df ≥ 2.
    """
    eligible = np.flatnonzero(df >= 2)
    n_g = int(generic.sum())
    if how == "low_idf":
        return np.flatnonzero(generic)
    if how == "all":
        return eligible
    if how == "random":
        rng = np.random.default_rng(seed)
        return np.sort(rng.choice(eligible, size=min(n_g, eligible.size), replace=False))
    if how == "high_idf":
        order = eligible[np.argsort(-idf[eligible], kind="stable")]
        return np.sort(order[:n_g])
    raise ValueError(f"unknown background token choice {how!r}")


def index_background_terms(index: Any) -> np.ndarray:
    """:func:`select_background_terms` over an index's own lexical statistics and configuration: the terms
    a build of its library draws the background from."""
    lex, cfg = index.lexical, index.config
    return select_background_terms(lex.lexicon.df(), lex.idf, lex.generic, cfg.background.tokens, cfg.seed)


def estimate_background(
    docs: np.ndarray,
    terms: np.ndarray,
    post_indptr: np.ndarray,
    post_docs: np.ndarray,
    *,
    max_rank: int,
    rank: int | None = None,
) -> Background:
    """Background subspace from token-induced directions plus the corpus mean (METHOD.md 4–5).

    Parameters
    ----------
    docs : float32 (N, d)
    terms : int (m,)
        Terms whose directions g_t are used.
    post_indptr, post_docs : postings of the lexical index.
    max_rank : int
        Clamp of the effective rank.
    rank : int, optional
        Fixed rank instead of the effective rank.
    """
    d = docs.shape[1]
    g = kernels.token_directions(terms, post_indptr, post_docs, docs)
    mean = docs.astype(np.float64).mean(axis=0) if docs.shape[0] else np.zeros(d)
    return background_from_directions(g, mean, max_rank=max_rank, rank=rank)


def background_from_directions(
    directions: np.ndarray, mean: np.ndarray, *, max_rank: int, rank: int | None = None
) -> Background:
    """METHOD.md step 5 from the token directions g_t and the corpus mean d̄.

    :func:`estimate_background` computes both from the embeddings; a build that summed its
    statistics over shards (:mod:`skillsight_fast.indexing`) has them as sums and finishes here.

    Parameters
    ----------
    directions : float (m, d)
        Token-induced directions g_t, one per row.
    mean : float (d,) or (1, d)
        Mean of all document embeddings.
    max_rank, rank : see :func:`estimate_background`.
    """
    mean = np.asarray(mean, dtype=np.float64).reshape(-1)
    d = mean.shape[0]
    g = np.asarray(directions).reshape(-1, d)
    # one float64 matrix, normalised in place (the same values as stacking, masking and dividing
    # copies, without three extra (m, d) float64 copies: m is large when few documents are huge)
    cols = np.empty((g.shape[0] + 1, d), np.float64)
    cols[:-1] = g
    del g
    cols[-1] = mean
    norms = np.linalg.norm(cols, axis=1, keepdims=True)
    keep = norms[:, 0] > 0
    if not keep.all():
        cols, norms = cols[keep], norms[keep]
    cols /= norms
    if cols.shape[0] == 0:
        return Background(np.zeros((0, d), np.float32), np.zeros(0, np.float32), 0, 0)
    _, s, vt = np.linalg.svd(cols, full_matrices=False)
    r_eff = effective_rank(s)
    r = r_eff if rank is None else rank
    r = max(0, min(r, max_rank if rank is None else r, vt.shape[0]))
    return Background(
        basis=np.ascontiguousarray(vt[:r], dtype=np.float32),
        singular_values=s.astype(np.float32),
        effective_rank=r_eff,
        n_directions=int(cols.shape[0]),
    )
