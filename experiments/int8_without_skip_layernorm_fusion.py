"""Question: is the int8 task encoder faster, at no accuracy cost, when onnxruntime does not fuse its
residual Add + LayerNormalization pairs into ``SkipLayerNormalization``?

Why asked: bench/encoder_floor.py put the int8 graph at 1.6-1.9x its multiply-add floor (124 us per word
piece at this machine's u8 x s8 rate) and an op profile gave ``SkipLayerNormalization`` 14 % of the
time, far more than 12 layer norms of 384 floats should cost. The int8 graph written without value
types (which onnxruntime needs to apply that fusion) ran 10-15 % faster per piece at 32-128 pieces
(CPU time, one thread) and agreed with the float32 graph at least as well as today's int8 graph.
Turning the fusion off (``disabled_optimizers=["SkipLayerNormFusion"]`` at session creation) gives
that graph without a second file.

Declared before running. Index: the skillsight index of the int8-transformer tier
(``IndexConfig(query_encoder="transformer")``, the path every task the cascade does not answer by lookup
takes) over the cached float32 document vectors of each dataset (documents not re-encoded); only the
task vectors change. (Amended before any accuracy number was seen: the first run used the default
``IndexConfig()``, whose build fits a lookup table per dataset that these task vectors never reach, and
had not finished one dataset in 30 minutes at load 20.) Arms:

- ``int8``: today's int8 task encoder (``load_encoder(int8=True)``, every onnxruntime fusion);
- ``int8-no-skip-ln``: the same graph with ``SkipLayerNormFusion`` disabled.

Data: every task of the five shared datasets (skillsbench, sra_theoremqa, bfcl, metatool,
gorilla_hf). Reported per dataset: R@10 of each arm, the paired bootstrap 95 % interval of the
difference (2,000 resamples, seed 0), the cosine of each arm's task vectors to the float32 task
vectors (median, min). Speed: per-piece CPU time of one task of 16, 64 and 128 word pieces, one
thread, arms interleaved, medians of 60 runs.

Adoption rule: turn the fusion off for int8 graphs in ``OnnxEncoder`` if (1) on every dataset the
R@10 difference is ≥ -0.3 points and its interval contains 0, (2) the median cosine to float32 is not
lower on any dataset, and (3) CPU per piece is lower at each of the three lengths. Otherwise keep today's
session.

Result, first run (5 Dec 2026, branch encoder, load 20-28 from other agents): speed part met (CPU per
piece 253.6 -> 231.6 us at 16 pieces, 209.9 -> 185.7 at 64, 221.3 -> 196.4 at 128); the accuracy part had
not finished one dataset by that branch's deadline.

Result, full run (5 Dec 2026 11:32-11:42 UTC, branch s19-short, load 0.2 during the speed part, 8 at the
end from other jobs; ``python experiments/int8_without_skip_layernorm_fusion.py --json
results/experiments/int8_without_skip_layernorm_fusion.json``):

- speed: CPU per piece 251.7 -> 230.2 us (16 pieces, -8.5 %), 199.2 -> 177.3 (64, -11.0 %),
  210.9 -> 189.8 (128, -10.0 %): condition (3) met;
- R@10 int8 -> int8-no-skip-ln, difference [95 % interval]: skillsbench 81.8 -> 80.4 (-1.37 [-4.11,
  +0.00]), sra_theoremqa 81.1 -> 81.3 (+0.13 [-0.27, +0.67]), bfcl 91.3 -> 91.2 (-0.14 [-0.32, +0.04]),
  metatool 81.8 -> 81.5 (-0.25 [-0.65, +0.15]), gorilla_hf 44.4 -> 44.0 (-0.36 [-0.84, +0.00]):
  condition (1) fails on skillsbench (-1.37, i.e. 1/73: one task's worth) and gorilla_hf (-0.36);
- median cosine to float32 tasks: lower on skillsbench, sra_theoremqa and metatool (by 2-5e-5; higher
  on bfcl and gorilla_hf; the minimum is not lower on any): condition (2) fails.

**Not adopted**: ``OnnxEncoder`` keeps every onnxruntime fusion. The ~10 % CPU it would save per piece is
real, but the R@10 rule fails on two datasets and it leans the same way on four of five; the task
vectors of saved indexes and caches stay what they were.

Run: python experiments/int8_without_skip_layernorm_fusion.py [--json OUT] [--skip-accuracy] [--skip-speed]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.lab.evaluation.cache import EmbeddingCache
from skillsight_fast.lab.evaluation.datasets import SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import bootstrap_diff, per_query
from skillsight_fast.models import cache_root, load_encoder

DATA_ROOT = Path(__file__).parents[1] / "data"
ARM = "int8-no-skip-ln"


def arms(threads: int) -> dict:
    import onnxruntime as ort

    today = load_encoder("all-MiniLM-L6-v2", int8=True, threads=threads)
    other = load_encoder("all-MiniLM-L6-v2", int8=True, threads=threads)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    other._session = ort.InferenceSession(str(other.onnx_path), sess_options=options,
                                          providers=["CPUExecutionProvider"],
                                          disabled_optimizers=["SkipLayerNormFusion"])
    return {"int8": today, ARM: other}


def accuracy(encoders: dict, n_boot: int) -> dict:
    out: dict = {}
    cache = cache_root()
    for name in SHARED_DATASETS:
        ds = load_dataset(DATA_ROOT / name)
        ctx = EvalContext(ds)
        index = ctx.index(IndexConfig(query_encoder="transformer"))
        texts = ds.query_texts
        fp32 = ctx.query_emb
        rows: dict = {}
        per0 = None
        for arm, enc in encoders.items():
            tag = f"{enc.model_id}-int8" if arm == "int8" else f"{enc.model_id}-{arm}"
            q = EmbeddingCache(cache, tag, enc.checksum, "query").get(texts, enc.encode)
            per = per_query(index.search_vectors(q, texts, 10, explain=False).ids, ds.gold)
            cos = np.sum(q * fp32, axis=1)
            row = {"recall@10": 100 * float(per["recall@10"].mean()), "cosine_fp32_median": float(np.median(cos)),
                   "cosine_fp32_min": float(cos.min())}
            if per0 is None:
                per0 = per
            else:
                d, lo, hi = bootstrap_diff(per["recall@10"], per0["recall@10"], n_boot=n_boot, seed=0)
                row["recall@10_diff"] = [100 * d, 100 * lo, 100 * hi]
            rows[arm] = row
        out[name] = rows
        a, b = rows["int8"], rows[ARM]
        d, lo, hi = b["recall@10_diff"]
        print(f"{name} ({len(texts)} tasks): R@10 {a['recall@10']:.1f} -> {b['recall@10']:.1f} "
              f"({d:+.2f} [{lo:+.2f}, {hi:+.2f}]); cosine to fp32 median {a['cosine_fp32_median']:.4f} -> "
              f"{b['cosine_fp32_median']:.4f}, min {a['cosine_fp32_min']:.4f} -> {b['cosine_fp32_min']:.4f}",
              flush=True)
    return out


def speed(encoders: dict, reps: int) -> dict:
    out: dict = {"load_before": list(os.getloadavg())}
    for n in (16, 64, 128):
        ids = np.full((1, n), 2023, np.int64)
        ids[0, 0], ids[0, -1] = 101, 102
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
        times: dict = {a: [] for a in encoders}
        for _ in range(3):
            for enc in encoders.values():
                enc._session.run(None, feed)
        for _ in range(reps):
            for arm, enc in encoders.items():
                t = time.thread_time()
                enc._session.run(None, feed)
                times[arm].append(time.thread_time() - t)
        out[str(n)] = {a: round(float(np.median(v)) / n * 1e6, 1) for a, v in times.items()}
        print(f"{n} pieces, CPU us per piece: {out[str(n)]}", flush=True)
    out["load_after"] = list(os.getloadavg())
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--bootstrap", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=60)
    args = ap.parse_args()
    result = {} if args.skip_speed else {"speed": speed(arms(threads=1), args.reps)}
    if not args.skip_accuracy:
        result["accuracy"] = accuracy(arms(threads=os.cpu_count() or 1), args.bootstrap)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
