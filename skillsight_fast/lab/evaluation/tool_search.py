"""Tool-search accuracy as a tool user reads it: Hit@1, Hit@5 and Completeness@5.

Completeness@5 counts a task as answered only when *every* tool it needs is among the five
offered (a multi-tool task with one tool missing cannot be done). Each method's mean carries a
percentile bootstrap interval, and skillsight's difference to each other method a paired one.

The tool datasets hold their tools in three shapes: metatool has descriptions only, gorilla_hf
an API record (JSON), bfcl a JSON function schema. :func:`tool_docs` rewrites a dataset's
documents into one of the tool texts of :mod:`skillsight_fast.tools.catalog`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

import numpy as np

from skillsight_fast.lab.evaluation.datasets import Dataset
from skillsight_fast.library.skills import Skill
from skillsight_fast.metrics import bootstrap_diff, bootstrap_mean, completeness_at_k, hit_at_k
from skillsight_fast.tools.catalog import TOOL_TEXTS, tool_body

#: Methods compared (names of :mod:`skillsight_fast.lab.evaluation.methods`).
TOOL_METHODS = ("skillsight", "bm25", "dense")


def tool_metrics(ranked: np.ndarray, gold: Sequence[frozenset[int]]) -> dict[str, np.ndarray]:
    """Per-query Hit@1, Hit@5 and Completeness@5."""
    return {"hit@1": hit_at_k(ranked, gold, 1), "hit@5": hit_at_k(ranked, gold, 5),
            "complete@5": completeness_at_k(ranked, gold, 5)}


def _record_schema(doc: Skill) -> tuple[Any, bool]:
    """The input schema of a dataset document, and whether it has one at all."""
    try:
        rec = json.loads(doc.body)
    except (json.JSONDecodeError, TypeError):
        return None, False
    if not isinstance(rec, dict):
        return None, False
    if isinstance(rec.get("parameters"), dict):  # bfcl: a JSON function schema
        return rec["parameters"], True
    if "api_arguments" in rec:  # gorilla_hf: the arguments are names (a list, a dict or a string)
        args = rec["api_arguments"]
        if isinstance(args, dict):
            props = {str(k): {"description": v if isinstance(v, str) else json.dumps(v)} for k, v in args.items()}
        elif isinstance(args, list):
            props = {str(a): {} for a in args}
        elif isinstance(args, str) and args.strip() and args.strip().upper() != "N/A":
            props = {a.strip(): {} for a in args.split(",") if a.strip()}
        else:
            props = {}
        return {"type": "object", "properties": props}, True
    return None, False


def tool_docs(dataset: Dataset, text: str) -> Dataset:
    """The dataset with each document's body rewritten as the tool text ``text``.

    ``schema`` keeps the dataset's own body (the whole JSON schema for bfcl, the whole API
    record for gorilla_hf); ``params`` lists the parameters; ``description`` drops the body.
    Documents without any schema (metatool) keep no body under ``description``/``params``.
    """
    if text not in TOOL_TEXTS:
        raise ValueError(f"unknown tool text {text!r}")
    docs = []
    for d in dataset.docs:
        schema, has = _record_schema(d)
        if text == "schema":
            body = d.body if has else ""
        else:
            body = tool_body(schema, text) if has else ""
        docs.append(dataclasses.replace(d, body=body))
    return dataclasses.replace(dataset, docs=docs)


def has_schemas(dataset: Dataset) -> bool:
    """Whether the dataset's documents carry parameter schemas (the variants differ)."""
    return any(_record_schema(d)[1] for d in dataset.docs[:50])


def summarise(per: dict[str, dict[str, np.ndarray]], *, reference: str = "skillsight", n_boot: int = 2000,
              seed: int = 0) -> dict[str, Any]:
    """Means with bootstrap intervals, and paired differences of ``reference`` to each method.

    Parameters
    ----------
    per : {method: {metric: per-query array}}
    """
    out: dict[str, Any] = {"methods": {}, "paired": {}}
    for m, vals in per.items():
        out["methods"][m] = {k: {"mean": float(v.mean()), "ci": list(bootstrap_mean(v, n_boot=n_boot, seed=seed))}
                             for k, v in vals.items()}
    if reference in per:
        for m in per:
            if m == reference:
                continue
            out["paired"][f"{reference} - {m}"] = {
                k: dict(zip(("diff", "low", "high"),
                            bootstrap_diff(per[reference][k], per[m][k], n_boot=n_boot, seed=seed)))
                for k in per[reference]}
    return out


def run_methods(dataset: Dataset, methods: Sequence[str] = TOOL_METHODS, **ctx_kwargs: Any
                ) -> dict[str, dict[str, np.ndarray]]:
    """Rank the dataset's queries with each method; per-query tool metrics per method."""
    from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext

    ctx = EvalContext(dataset=dataset, **ctx_kwargs)
    return {m: tool_metrics(METHODS[m](ctx), dataset.gold) for m in methods}


# ---------------------------------------------------------------- multi-tool tasks at depth
#: Per-query metrics of a tool ranking read at several depths (issue: tasks that need several tools).
DEPTH_METRICS = ("R@5", "R@10", "R@20", "R@50", "C@5", "C@10", "C@20", "nDCG@10")
#: The metrics of the adoption rule of the tool-search experiments (experiments/tool_*.py).
RULE_METRICS = ("R@10", "nDCG@10", "R@50", "C@10")
#: The baselines the default must not be significantly worse than.
RULE_BASELINES = ("dense", "bm25", "rrf")


#: The columns of the depth tables of docs/TOOLS.md (k = 3/5/10/20/50).
TABLE_METRICS = ("R@3", "R@5", "R@10", "R@20", "R@50", "C@3", "C@5", "C@10", "C@20", "C@50", "nDCG@10")
#: The metrics of issue 44's criterion (not significantly worse than the best of dense, BM25, RRF).
DEPTH_RULE_METRICS = ("R@10", "nDCG@10", "R@20", "R@50", "C@10")


def depth_metrics(ranked: np.ndarray, gold: Sequence[frozenset[int]]) -> dict[str, np.ndarray]:
    """Per-query recall R@k and Completeness C@k (every gold tool in the top k) at k = 3, 5, 10, 20,
    50, and nDCG@10; ``ranked`` needs at least 50 columns (-1 padding)."""
    from skillsight_fast.metrics import ndcg_at_k, recall_at_k

    out: dict[str, np.ndarray] = {}
    for k in (3, 5, 10, 20, 50):
        out[f"R@{k}"] = recall_at_k(ranked, gold, k)
    for k in (3, 5, 10, 20, 50):
        out[f"C@{k}"] = completeness_at_k(ranked, gold, k)
    out["nDCG@10"] = ndcg_at_k(ranked, gold, 10)
    return out


def recall_curve(ranked: np.ndarray, gold: Sequence[frozenset[int]], depth: int = 50) -> np.ndarray:
    """Per-query recall at every depth 1..``depth``: float64 (n, depth)."""
    n = ranked.shape[0]
    out = np.zeros((n, depth), np.float64)
    for i in range(n):
        g = gold[i]
        hit = np.array([j in g for j in ranked[i, :depth].tolist()], np.float64)
        out[i, : hit.size] = np.cumsum(hit) / max(1, len(g))
        out[i, hit.size:] = out[i, hit.size - 1] if hit.size else 0.0
    return out


def curve_losses(candidate: np.ndarray, reference: np.ndarray, *, n_boot: int = 2000, seed: int = 0
                 ) -> list[int]:
    """Depths k (1-based) where ``candidate``'s recall@k is significantly below ``reference``'s
    (paired bootstrap 95 %: the interval of candidate − reference lies below 0); curves (n, depth)."""
    return [k + 1 for k in range(candidate.shape[1])
            if bootstrap_diff(candidate[:, k], reference[:, k], n_boot=n_boot, seed=seed)[2] < 0]


def rule_check(candidate: dict[str, np.ndarray], baselines: dict[str, dict[str, np.ndarray]],
               metrics: Sequence[str] = RULE_METRICS, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Whether ``candidate`` is not significantly worse than the best baseline on each metric.

    For each metric the best baseline is the one with the highest mean; the paired bootstrap 95 %
    interval of (candidate − best) must reach 0 or above (``high >= 0``).

    Returns
    -------
    dict
        ``{"pass": bool, metric: {"best": name, "diff", "low", "high", "pass"}}``.
    """
    out: dict[str, Any] = {}
    ok = True
    for m in metrics:
        best = max(baselines, key=lambda b: float(np.mean(baselines[b][m])))
        diff, lo, hi = bootstrap_diff(candidate[m], baselines[best][m], n_boot=n_boot, seed=seed)
        passed = hi >= 0.0
        ok &= passed
        out[m] = {"best": best, "diff": diff, "low": lo, "high": hi, "pass": bool(passed)}
    out["pass"] = bool(ok)
    return out


def not_worse(candidate: dict[str, np.ndarray], reference: dict[str, np.ndarray],
              metrics: Sequence[str] = RULE_METRICS, *, n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Whether ``candidate`` is not significantly worse than ``reference`` on each metric (paired
    bootstrap 95 %: the interval of candidate − reference reaches 0 or above)."""
    out: dict[str, Any] = {}
    ok = True
    for m in metrics:
        diff, lo, hi = bootstrap_diff(candidate[m], reference[m], n_boot=n_boot, seed=seed)
        ok &= hi >= 0.0
        out[m] = {"diff": diff, "low": lo, "high": hi, "pass": bool(hi >= 0.0)}
    out["pass"] = bool(ok)
    return out


def fmt_diff(d: dict[str, float], scale: float = 100.0) -> str:
    """``+1.2 [-0.3, +2.6]`` from a ``{diff, low, high}`` record (in points by default)."""
    return f"{d['diff'] * scale:+.1f} [{d['low'] * scale:+.1f}, {d['high'] * scale:+.1f}]"
