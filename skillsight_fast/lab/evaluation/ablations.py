"""Ablation sweeps of the SkillSight pipeline over cached embeddings (``skillsight eval --ablations``).

Every setting is an :class:`~skillsight_fast.config.IndexConfig` change on top of the paper's
method (``adaptive=False``), run through ``SkillIndex.from_embeddings`` and ``search_vectors`` with
one shared lexicon per dataset, so no sweep re-encodes anything. The document-embedding axis (head of
the skill vs mean of its 256-token chunks, at most 8) encodes the extra chunks once and caches them.

Defaults are chosen on the fit datasets only (skillsbench, sra_theoremqa: best mean R@10, ties to the
paper's setting) and then reported on every dataset.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from skillsight_fast.config import DEFAULT_MODEL
from skillsight_fast.lab.evaluation.datasets import FIT_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext, paper_config
from skillsight_fast.metrics import DEPTH, evaluate

logger = logging.getLogger(__name__)

#: axis -> list of (label, IndexConfig changes); the first entry of each axis is the paper's default.
AXES: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "background tokens": [("low_idf (T_g)", {}), ("all", {"background_tokens": "all"}),
                          ("random", {"background_tokens": "random"}),
                          ("high_idf", {"background_tokens": "high_idf"})],
    "otsu": [("unweighted", {}), ("df-weighted", {"otsu_weighted": True})],
    "fusion": [("eq15 w=1", {}), ("eq15 w=0.5", {"lexical_weight": 0.5}), ("eq15 w=2", {"lexical_weight": 2.0}),
               ("convex a=0.1", {"fusion": "convex", "lexical_weight": 0.1}),
               ("convex a=0.2", {"fusion": "convex", "lexical_weight": 0.2}),
               ("convex a=0.3", {"fusion": "convex", "lexical_weight": 0.3}),
               ("convex a=0.5", {"fusion": "convex", "lexical_weight": 0.5}),
               ("rrf", {"fusion": "rrf"}), ("dense only (SBC)", {"fusion": "dense"})],
    "candidates K": [("300", {}), ("50", {"candidates": 50}), ("100", {"candidates": 100}),
                     ("1000", {"candidates": 1000})],
    "lexical candidates": [("0", {}), ("50", {"lexical_candidates": 50}), ("100", {"lexical_candidates": 100})],
    "rank r": [("effective", {})] + [(str(r), {"rank": r}) for r in (0, 1, 2, 4, 8, 16, 32)],
    "renormalise": [("no", {}), ("yes", {"renormalize": True})],
}


def chunk_texts(encoder: Any, text: str, max_chunks: int = 8) -> list[str]:
    """The text cut into consecutive spans of the encoder's token budget (at most ``max_chunks``).

    Uses the encoder's tokenizer overflow (offsets map each chunk back to a character span); an
    encoder without a tokenizer (test fakes) is cut into 200-word pieces.
    """
    tok = getattr(encoder, "_tokenizer", None)
    if tok is None:
        words = text.split()
        return [" ".join(words[i : i + 200]) for i in range(0, max(len(words), 1), 200)][:max_chunks]
    enc = tok.encode(text)
    out = []
    for e in [enc, *enc.overflowing][:max_chunks]:
        spans = [(a, b) for a, b in e.offsets if b > a]
        if spans:
            out.append(text[spans[0][0] : spans[-1][1]])
    return out or [text]


def chunk_mean_embeddings(ctx: EvalContext, max_chunks: int = 8) -> tuple[np.ndarray, float]:
    """Mean of the chunk embeddings of each document, re-normalised; also the mean chunk count."""
    chunks = [chunk_texts(ctx.enc, t, max_chunks) for t in ctx.dataset.texts]
    flat = [c for cs in chunks for c in cs]
    vecs = ctx.embeddings(f"chunks{max_chunks}", flat)
    out = np.zeros((len(chunks), vecs.shape[1]), np.float32)
    pos = 0
    for i, cs in enumerate(chunks):
        v = vecs[pos : pos + len(cs)].mean(0)
        out[i] = v / max(np.linalg.norm(v), 1e-12)
        pos += len(cs)
    return out, float(np.mean([len(c) for c in chunks]))


def _run(ctx: EvalContext, changes: dict[str, Any], embeddings: np.ndarray | None = None) -> dict[str, Any]:
    idx = ctx.index(paper_config(**changes), embeddings)
    ranked = ctx.search(idx, DEPTH)
    res = evaluate(ranked, ctx.dataset.gold)
    res["n_generic"] = idx.stats.n_generic
    res["rank"] = idx.stats.rank
    return res


def run_ablations(folders: Sequence[str | os.PathLike[str]], *, model: str = DEFAULT_MODEL,
                  int8: bool = False, cache_dir: str | None = None, limit: int | None = None,
                  all_queries: bool = False, seed: int = 0, chunks: bool = False,
                  encoder: Any = None) -> dict[str, Any]:
    """Every axis of :data:`AXES` on every dataset; the chosen defaults; the chunk axis.

    ``chunks`` also runs head-vs-chunk-mean embeddings (encodes up to 8 chunks per document, cached).
    """
    t0 = time.perf_counter()
    axes: dict[str, dict[str, Any]] = {a: {"results": {}} for a in AXES}
    axes["doc embedding"] = {"results": {}, "note": "head = first 256 tokens (default); chunk-mean = mean of "
                             "the embeddings of consecutive 256-token chunks, at most 8, re-normalised"}
    ctxs = {}
    for folder in folders:
        ds = load_dataset(folder, all_queries=all_queries, limit=limit)
        ctx = EvalContext(ds, model=model, int8=int8, cache_dir=cache_dir, seed=seed, encoder=encoder,
                          query_int8=False)  # the ablations compare float32 task vectors
        ctxs[ds.name] = ctx
        for axis, settings in AXES.items():
            axes[axis]["results"][ds.name] = {label: _run(ctx, ch) for label, ch in settings}
            logger.info("%s / %s done", ds.name, axis)
        if chunks:
            emb, mean_chunks = chunk_mean_embeddings(ctx)
            axes["doc embedding"]["results"][ds.name] = {
                "head (256 tokens)": _run(ctx, {}),
                "chunk-mean (<=8 chunks)": {**_run(ctx, {}, emb), "mean_chunks": round(mean_chunks, 2)},
            }
    # defaults chosen on the fit datasets: best mean R@10 per axis, the paper's setting on ties
    chosen: dict[str, Any] = {}
    for axis, block in axes.items():
        fit = [d for d in block["results"] if d in FIT_DATASETS]
        if not fit:
            continue
        labels = list(block["results"][fit[0]])
        score = {lab: float(np.mean([block["results"][d][lab]["recall@10"] for d in fit
                                     if lab in block["results"][d]])) for lab in labels}
        best = max(labels, key=lambda lab: (round(score[lab], 4), lab == labels[0]))
        chosen[axis] = {"setting": best, "fit_mean_recall@10": score, "paper_setting": labels[0]}
    return {"axes": axes, "chosen": chosen, "fit_datasets": list(FIT_DATASETS),
            "seconds": round(time.perf_counter() - t0, 1)}
