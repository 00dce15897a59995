"""Retrieval metrics over ranked lists, per query, plus paired bootstrap intervals.

A ranking is an int64 array (n_queries, depth) of document rows, best first, -1 for padding.
Gold is one set of document rows per query. Every metric is first computed per query (so that
paired bootstrap intervals can be drawn), then averaged.

- Recall@k = |gold ∩ top-k| / |gold|
- Hit@k = 1 if gold ∩ top-k ≠ ∅
- Completeness@k = 1 if gold ⊆ top-k (every gold document retrieved; 0 for an empty gold set)
- MRR@k = 1 / rank of the first gold document within the top k (0 if none)
- nDCG@k with binary gains: Σ_{i ≤ k, d_i ∈ gold} 1/log2(i + 1) / Σ_{i ≤ min(k, |gold|)} 1/log2(i + 1)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: The metrics written to ``--json`` (the exact key set of each method's entry).
METRIC_KEYS = ("recall@1", "recall@5", "recall@10", "recall@50", "hit@1", "hit@10", "completeness@5",
               "completeness@10", "mrr@10", "ndcg@10")
#: Ranking depth every method must return.
DEPTH = 50


def _hits(ranked: np.ndarray, gold: Sequence[frozenset[int] | set[int]], depth: int) -> np.ndarray:
    """bool (n, depth): whether the document at each rank is gold (padding never is)."""
    ranked = np.asarray(ranked)
    if ranked.ndim != 2 or ranked.shape[0] != len(gold):
        raise ValueError(f"ranking {ranked.shape} does not match {len(gold)} gold sets")
    out = np.zeros((ranked.shape[0], depth), bool)
    m = min(depth, ranked.shape[1])
    for i, g in enumerate(gold):
        if g:
            row = ranked[i, :m]
            out[i, :m] = np.isin(row, np.fromiter(g, np.int64, len(g))) & (row >= 0)
    return out


def recall_at_k(ranked: np.ndarray, gold: Sequence[frozenset[int]], k: int) -> np.ndarray:
    """Per-query |gold ∩ top-k| / |gold|, float64 (n,) (0 for an empty gold set)."""
    h = _hits(ranked, gold, k)
    sizes = np.array([len(g) for g in gold], float)
    return np.where(sizes > 0, h.sum(1) / np.maximum(sizes, 1), 0.0)


def hit_at_k(ranked: np.ndarray, gold: Sequence[frozenset[int]], k: int) -> np.ndarray:
    """Per-query 1.0 if any gold document is in the top k."""
    return _hits(ranked, gold, k).any(1).astype(float)


def completeness_at_k(ranked: np.ndarray, gold: Sequence[frozenset[int]], k: int) -> np.ndarray:
    """Per-query 1.0 if every gold document is in the top k (0 for an empty gold set)."""
    h = _hits(ranked, gold, k)
    sizes = np.array([len(g) for g in gold])
    return ((h.sum(1) >= sizes) & (sizes > 0)).astype(float)


def mrr_at_k(ranked: np.ndarray, gold: Sequence[frozenset[int]], k: int) -> np.ndarray:
    """Per-query reciprocal rank of the first gold document within the top k (0 if none)."""
    h = _hits(ranked, gold, k)
    first = np.where(h.any(1), h.argmax(1) + 1, 0)
    return np.where(first > 0, 1.0 / np.maximum(first, 1), 0.0)


def ndcg_at_k(ranked: np.ndarray, gold: Sequence[frozenset[int]], k: int) -> np.ndarray:
    """Per-query nDCG@k with binary gains."""
    h = _hits(ranked, gold, k)
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = (h * disc).sum(1)
    ideal = np.array([disc[: min(len(g), k)].sum() for g in gold])
    return np.where(ideal > 0, dcg / np.where(ideal > 0, ideal, 1), 0.0)


def per_query(ranked: np.ndarray, gold: Sequence[frozenset[int]]) -> dict[str, np.ndarray]:
    """Every metric of :data:`METRIC_KEYS`, per query."""
    return {
        "recall@1": recall_at_k(ranked, gold, 1),
        "recall@5": recall_at_k(ranked, gold, 5),
        "recall@10": recall_at_k(ranked, gold, 10),
        "recall@50": recall_at_k(ranked, gold, 50),
        "hit@1": hit_at_k(ranked, gold, 1),
        "hit@10": hit_at_k(ranked, gold, 10),
        "completeness@5": completeness_at_k(ranked, gold, 5),
        "completeness@10": completeness_at_k(ranked, gold, 10),
        "mrr@10": mrr_at_k(ranked, gold, 10),
        "ndcg@10": ndcg_at_k(ranked, gold, 10),
    }


def summarize(per: dict[str, np.ndarray]) -> dict[str, float]:
    """Means of per-query metrics, as plain floats."""
    return {k: float(np.mean(v)) if len(v) else 0.0 for k, v in per.items()}


def evaluate(ranked: np.ndarray, gold: Sequence[frozenset[int]]) -> dict[str, float]:
    """Mean of every metric of :data:`METRIC_KEYS`."""
    return summarize(per_query(ranked, gold))


def topk_from_scores(scores: np.ndarray, k: int, *, tiebreak: np.ndarray | None = None) -> np.ndarray:
    """Rows of the k highest scores per query, best first.

    Ties are broken by ``tiebreak`` (higher first; e.g. a seeded random permutation, so that the
    order of documents in the corpus file never decides a tie), else by lower row.

    Parameters
    ----------
    scores : float (n, N)
    k : int
    tiebreak : float (N,), optional

    Returns
    -------
    int64 (n, k), padded with -1 when N < k.
    """
    scores = np.asarray(scores)
    n, n_docs = scores.shape
    kk = min(k, n_docs)
    out = np.full((n, k), -1, np.int64)
    if kk == 0:
        return out
    tb = np.zeros(n_docs) if tiebreak is None else np.asarray(tiebreak, float)
    for i in range(n):
        s = scores[i]
        if kk < n_docs:
            # everything strictly above the k-th value, plus enough of the tied group
            kth = np.partition(s, n_docs - kk)[n_docs - kk]
            cand = np.flatnonzero(s >= kth)
        else:
            cand = np.arange(n_docs)
        order = np.lexsort((cand, -tb[cand], -s[cand]))
        out[i, :kk] = cand[order[:kk]]
    return out


def bootstrap_diff(a: np.ndarray, b: np.ndarray, *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float, float]:
    """Paired bootstrap over queries of mean(a) − mean(b): (difference, low, high)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    if a.shape != b.shape:
        raise ValueError("paired bootstrap needs per-query values of the same queries")
    d = a - b
    if d.size == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(n_boot, d.size))
    means = d[idx].mean(1)
    lo, hi = np.quantile(means, [(1 - level) / 2, 1 - (1 - level) / 2])
    return float(d.mean()), float(lo), float(hi)


def bootstrap_mean(a: np.ndarray, *, n_boot: int = 2000, seed: int = 0,
                   level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) over queries."""
    _, lo, hi = bootstrap_diff(np.asarray(a, float), np.zeros(len(a)), n_boot=n_boot, seed=seed, level=level)
    return lo, hi
