"""Question: can the transformer query encoder itself get faster without losing accuracy: dynamic int8
(onnxruntime's integer kernels), a 128-token query budget instead of 256, or onnxruntime's basic graph
optimisations instead of all (the fused attention / GELU / LayerNorm kernels)?

Declared before running: the index is the default skillsight index over fp32 document vectors (the
documents are not re-encoded); only the task vectors change. Arms: fp32 with 256 tokens (today),
fp32 with 128 tokens, dynamic int8 with 256 tokens, fp32 256 tokens with ORT_ENABLE_BASIC. Data: all
73 skillsbench tasks and the first 200 sra_theoremqa tasks (fixed before running, to keep the run
short on the shared machine). Reported per arm: R@10 of the default skillsight, paired bootstrap 95%
interval of the difference to fp32-256 (2,000 resamples), the cosine of each task vector to its
fp32-256 vector (mean and minimum), and encode p50 of one long task on one thread. Selection rule of
the issue: keep what holds its accuracy (R@10 interval containing 0 and within 0.5 points).

Result (docs/ENCODERS.md, "A faster transformer"): dynamic int8 holds (skillsbench -0.3 [-3.8, +2.4],
sra +0.5 [+0.0, +1.5], cosine >= 0.990, 24% faster); 128 tokens costs 3.0 on skillsbench (rejected);
ORT_ENABLE_BASIC gives the same vectors 1.38x slower than ORT_ENABLE_ALL (kept ALL).

Run: python experiments/faster_transformer_queries.py
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.evaluation.datasets import load_dataset
from skillsight_fast.evaluation.methods import EvalContext
from skillsight_fast.evaluation.metrics import bootstrap_diff, per_query
from skillsight_fast.models import load_encoder
from skillsight_fast.models.encoder import OnnxEncoder

DATA = (("data/skillsbench", None), ("data/sra_theoremqa", 200))


def arms() -> dict[str, object]:
    base = load_encoder("all-MiniLM-L6-v2", threads=1)
    onnx_path = Path(base.onnx_path)
    folder = onnx_path.parent
    out: dict[str, object] = {"fp32-256": base}
    out["fp32-128"] = OnnxEncoder(onnx_path, folder / "tokenizer.json", model_id=base.model_id,
                                  checksum=base.checksum, max_length=128, threads=1)
    out["int8-256"] = load_encoder("all-MiniLM-L6-v2", int8=True, threads=1)
    import onnxruntime as ort

    basic = OnnxEncoder(onnx_path, folder / "tokenizer.json", model_id=base.model_id,
                        checksum=base.checksum, max_length=256, threads=1)
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3
    basic._session = ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
    out["fp32-256-basic-graph"] = basic
    return out


def p50_ms(fn, reps: int = 15) -> float:
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return 1000 * float(np.median(ts))


def main() -> None:
    encoders = arms()
    long_task = None
    for folder, limit in DATA:
        ds = load_dataset(Path(folder), limit=limit)
        ctx = EvalContext(ds)
        index = ctx.index(IndexConfig())
        texts = ds.query_texts
        long_task = long_task or max(texts, key=len)
        ref = None
        base = None
        print(f"{ds.name}: {len(ds.docs)} docs, {len(texts)} tasks", flush=True)
        for name, enc in encoders.items():
            q = ctx.query_emb if name == "fp32-256" else enc.encode(texts)
            ids = index.search_vectors(q, texts, 10, explain=False).ids
            per = per_query(ids, ds.gold)
            line = f"  {name:<22} R@10 {100 * per['recall@10'].mean():5.1f}"
            if base is None:
                base, ref = per, q
            else:
                d, lo, hi = bootstrap_diff(per["recall@10"], base["recall@10"], n_boot=2000, seed=0)
                cos = np.sum(q * ref, axis=1)
                line += (f"  vs fp32-256 {100 * d:+.1f} [{100 * lo:+.1f}, {100 * hi:+.1f}]"
                         f"  cosine mean {cos.mean():.4f} min {cos.min():.4f}")
            print(line, flush=True)
    for name, enc in encoders.items():
        print(f"encode p50 long task ({len(long_task)} chars), {name}: "
              f"{p50_ms(lambda enc=enc: enc.encode([long_task])):.1f} ms", flush=True)


if __name__ == "__main__":
    main()
