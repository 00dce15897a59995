"""Run methods on datasets and assemble the JSON result objects of ``skillsight eval``."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from skillsight_fast.lab.evaluation.datasets import Dataset
from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext
from skillsight_fast.metrics import bootstrap_diff, bootstrap_mean, per_query, summarize

logger = logging.getLogger(__name__)

#: Pairs (a, b) whose per-query difference gets a paired bootstrap interval when both ran.
COMPARISONS = (("skillsight", "dense"), ("skillsight", "bm25"), ("skillsight", "rrf"),
               ("skillsight", "skillsight-paper"), ("skillsight-paper", "dense"))
CI_METRICS = ("recall@10", "ndcg@10")


def evaluate_dataset(ctx: EvalContext, methods: Sequence[str], *, n_boot: int = 2000,
                     seed: int = 0) -> dict[str, Any]:
    """Run ``methods`` on ``ctx.dataset``; the ``--json`` object of one dataset.

    Returns
    -------
    dict
        ``dataset``, ``n_queries``, ``n_docs``, ``results`` {method: {metric: mean}} (the required
        keys), plus ``ci`` (bootstrap intervals), ``paired`` (differences with intervals),
        ``stats`` (index / adaptive statistics), ``seconds``, ``notes``, and the per-query values:
        ``query_ids`` (every query, in dataset order) and ``per_query`` {method: {metric: [value per
        query]}} in that order (a method run on the first n queries only, e.g. ``dense+rerank``,
        has n values, for ``query_ids[:n]``), so anyone can recompute intervals.
    """
    ds: Dataset = ctx.dataset
    results: dict[str, dict[str, float]] = {}
    per: dict[str, dict[str, np.ndarray]] = {}
    seconds: dict[str, float] = {}
    n_by_method: dict[str, int] = {}
    for name in methods:
        if name not in METHODS:
            raise ValueError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
        t0 = time.perf_counter()
        ranked = METHODS[name](ctx)
        seconds[name] = round(time.perf_counter() - t0, 3)
        gold = ds.gold[: ranked.shape[0]]
        per[name] = per_query(ranked, gold)
        results[name] = summarize(per[name])
        n_by_method[name] = int(ranked.shape[0])
        logger.info("%s / %s: R@10 %.3f nDCG@10 %.3f (%.1f s)", ds.name, name, results[name]["recall@10"],
                    results[name]["ndcg@10"], seconds[name])
    ci = {m: {k: list(bootstrap_mean(per[m][k], n_boot=n_boot, seed=seed)) for k in CI_METRICS} for m in per}
    paired: dict[str, Any] = {}
    for a, b in COMPARISONS:
        if a in per and b in per and n_by_method[a] == n_by_method[b]:
            paired[f"{a} - {b}"] = {
                k: dict(zip(("diff", "low", "high"), bootstrap_diff(per[a][k], per[b][k], n_boot=n_boot, seed=seed)))
                for k in CI_METRICS
            }
    stats: dict[str, Any] = {}
    if any(m in per for m in ("skillsight-paper", "sbc", "dense+lec", "skillsight")):
        from skillsight_fast.lab.evaluation.methods import paper_config

        stats["paper_index"] = ctx.index(paper_config()).stats.to_dict()
    if "adaptive" in ctx.notes:
        stats["adaptive"] = ctx.notes["adaptive"]
    notes = {k: v for k, v in ctx.notes.items() if k != "adaptive"}
    return {
        "dataset": ds.name,
        "n_queries": len(ds.queries),
        "n_docs": len(ds.docs),
        "results": results,
        "n_queries_by_method": n_by_method,
        "ci": ci,
        "paired": paired,
        "stats": stats,
        "seconds": seconds,
        "notes": notes,
        "query_ids": [q.id for q in ds.queries],
        "per_query": {m: {k: [round(float(x), 6) for x in v] for k, v in pq.items()} for m, pq in per.items()},
        "_per_query": per,  # removed before writing JSON
    }


def strip_private(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if not k.startswith("_")}
