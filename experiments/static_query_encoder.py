"""Question: how close does a static query encoder distilled from the bundled MiniLM come to
transformer queries in the default skillsight, and how fast does it encode?

Declared before running: the arms are (1) transformer queries (today), (2) static-mapped: static
query vectors mapped into the transformer space by ridge least squares fitted on the library's own
skill texts (static vector of each skill text -> its transformer vector; no labels, no queries),
(3) static: skills and tasks both static. Ridge lambda = 1.0, fixed, not tuned. Selection rule of
the issue: a tier replaces the default only if within 0.5 R@10 of the transformer on every fit set.

Result: docs/ENCODERS.md records the run (neither static arm passes the rule).

Run: python experiments/static_query_encoder.py [--data DIR ...]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.lab.evaluation.datasets import load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import bootstrap_diff, per_query
from skillsight_fast.models import cache_root, load_encoder
from skillsight_fast.models.distill import distill_to_folder
from skillsight_fast.models.static import load_static_encoder

RIDGE = 1.0


def fit_map(x: np.ndarray, y: np.ndarray, lam: float = RIDGE) -> np.ndarray:
    """W minimising |[x 1] W - y|^2 + lam |W|^2, float32 (d_s + 1, d_t)."""
    xb = np.hstack([x, np.ones((len(x), 1), x.dtype)]).astype(np.float64)
    a = xb.T @ xb + lam * np.eye(xb.shape[1])
    return np.linalg.solve(a, xb.T @ y.astype(np.float64)).astype(np.float32)


def apply_map(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    y = x @ w[:-1] + w[-1]
    return (y / np.linalg.norm(y, axis=1, keepdims=True)).astype(np.float32)


def p50_ms(fn, reps: int = 50) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1000 * float(np.median(ts))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", nargs="+", default=["data/skillsbench", "data/sra_theoremqa"])
    args = ap.parse_args()
    teacher = load_encoder("all-MiniLM-L6-v2", threads=1)
    folder = cache_root() / "static" / "all-MiniLM-L6-v2-static"
    if not (folder / "model.safetensors").is_file():
        t0 = time.perf_counter()
        distill_to_folder(teacher, folder)
        print(f"distilled the full vocabulary in {time.perf_counter() - t0:.1f} s -> {folder}", flush=True)
    static = load_static_encoder(folder)
    ds = None
    for folder_ in args.data:
        ds = load_dataset(Path(folder_))
        ctx = EvalContext(ds)
        texts = ds.query_texts
        idx = ctx.index(IndexConfig())
        s_docs = static.encode(ds.texts)
        s_q = static.encode(texts)
        w = fit_map(s_docs, ctx.doc_emb)
        sidx = SkillIndex.from_embeddings(ds.docs, s_docs, IndexConfig(), lexicon=ctx.lexicon)
        arms = {"transformer": (idx, ctx.query_emb), "static-mapped": (idx, apply_map(s_q, w)),
                "static": (sidx, s_q)}
        base = None
        print(f"{ds.name} ({len(ds.docs)} docs, {len(texts)} queries)")
        for name, (index, q) in arms.items():
            ids = index.search_vectors(q, texts, 10, explain=False).ids
            per = per_query(ids, ds.gold)
            ci = ""
            if base is None:
                base = per
            else:
                d, lo, hi = bootstrap_diff(per["recall@10"], base["recall@10"], n_boot=2000, seed=0)
                ci = f"  R@10 vs transformer {100*d:+.1f} [{100*lo:+.1f}, {100*hi:+.1f}]"
            print(f"  {name:<14} R@10 {100*per['recall@10'].mean():5.1f}  "
                  f"nDCG@10 {100*per['ndcg@10'].mean():5.1f}{ci}", flush=True)
    assert ds is not None
    long_task = max(load_dataset(Path(args.data[0])).query_texts, key=len)
    for label, text in (("short", "merge two PDF files"), ("long", long_task)):
        print(f"encode p50 {label}: transformer {p50_ms(lambda text=text: teacher.encode([text]), 10):.2f} ms, "
              f"static {p50_ms(lambda text=text: static.encode([text])):.3f} ms", flush=True)


if __name__ == "__main__":
    main()
