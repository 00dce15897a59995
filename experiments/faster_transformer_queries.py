"""Question: can the transformer query encoder itself get faster without losing accuracy: dynamic int8
(onnxruntime's integer kernels, activation ranges measured per call), static int8 (activation ranges
calibrated once on real skill documents), a 128-token query budget instead of 256, or onnxruntime's
basic graph optimisations instead of all (the fused attention / GELU / LayerNorm kernels)?

Declared before running: the index is the default skillsight index over fp32 document vectors (the
documents are not re-encoded); only the task vectors change. Arms:

- ``fp32-256``: today (the cached eval vectors);
- ``fp32-128``: 128-token budget;
- ``int8-dynamic``: ``quantize_dynamic``, per-channel int8 weights of the constant-weight MatMuls (the
  cached ``model.int8.onnx`` of ``skillsight -c int8=true index``);
- ``int8-static-qdq``: ``quantize_static``, QDQ format, per-channel symmetric int8 weights (axis 1),
  uint8 activations, every constant-weight MatMul (``MatMulConstBOnly``), **MinMax** calibration;
- ``int8-static-qdq-pct``: the same with **Percentile** calibration (99.999th percentile of |x|);
- ``int8-static-qop-ffn2fp32``: QOperator format, MinMax, the FFN down-projection MatMuls (input = the
  GELU output, the long-tailed activation) left float32: the best-agreeing static variant found while
  probing (which MatMul group to leave float was chosen on the cosine of 73 skillsbench + 100
  sra_theoremqa tasks, not on R@10);
- ``fp32-256-basic-graph``: ``ORT_ENABLE_BASIC`` instead of ``ORT_ENABLE_ALL``.

Calibration data of the static arms: 32 skill documents drawn (seed 0) from each fit set's corpus
(skillsbench, sra_theoremqa, bfcl: 96 documents), tokenized as the encoder does (256 tokens), never a
task text. MinMax runs on the unpadded documents; Percentile needs one shape, so its documents are
padded to the longest with the attention mask off. Data: every task of the three fit sets (73
skillsbench, 747 sra_theoremqa, 2,501 bfcl). Reported per arm: R@10 and nDCG@10 of the default
skillsight, paired bootstrap 95% intervals of the differences to fp32-256 (2,000 resamples), the
cosine of each task vector to its fp32-256 vector (min / median), and encode p50 on one thread, arms
interleaved in one process, of short tasks (fit-set tasks under 20 tokens) and long tasks (the
skillsbench tasks, one at a time), with the CPU, onnxruntime version and load average. Selection rule
of the issue: keep what holds its accuracy; a faster tier becomes the default only if within 0.5 R@10
of the transformer on every fit set.

Result (docs/ENCODERS.md, "A faster transformer"; results/experiments/faster_transformer_queries.json, main at
4cb389b, load ~4.7): dynamic int8 holds on all three fit sets (R@10 +0.0 / +0.0 / +0.1, intervals
containing 0, cosine min 0.97-0.99) and is the fastest arm (long 51.5 ms, short 3.25 ms against fp32's
97.8 / 9.61). Every static int8 arm is slower than dynamic int8 (long 56-73 ms, short 3.7-6.0 ms); with all
MatMuls quantised it agrees less with fp32 (cosine min 0.78-0.90, sra R@10 -1.1 with MinMax), and the
variant that agrees as well as dynamic (FFN down-projection fp32) is the slowest of them: rejected.
128 tokens costs 5.3 R@10 on skillsbench: rejected. ORT_ENABLE_BASIC gives the same vectors and is not
faster: ORT_ENABLE_ALL kept.

Run: python experiments/faster_transformer_queries.py [--json OUT] [--skip-timing] [--skip-accuracy]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.lab.benchmark.runner import cpu_name
from skillsight_fast.lab.evaluation.cache import EmbeddingCache
from skillsight_fast.lab.evaluation.datasets import FIT_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import bootstrap_diff, per_query
from skillsight_fast.models import cache_root, load_encoder
from skillsight_fast.models.encoder import OnnxEncoder
from skillsight_fast.models.export import quantize_onnx_int8

DATA_ROOT = Path(__file__).parents[1] / "data"
CALIBRATION_DOCS = 32  # per fit set
SHORT_TOKENS = 20
PERCENTILE = 99.999
STATIC = {  # arm -> (format, calibration, leave the FFN down-projection float32)
    "int8-static-qdq": ("QDQ", "minmax", False),
    "int8-static-qdq-pct": ("QDQ", "percentile", False),
    "int8-static-qop-ffn2fp32": ("QOperator", "minmax", True),
}


def calibration_feeds(enc: OnnxEncoder, *, pad: bool) -> list[dict[str, np.ndarray]]:
    """One feed per calibration document (skill documents of the fit sets, never tasks)."""
    rng = np.random.default_rng(0)
    texts: list[str] = []
    for name in FIT_DATASETS:
        ds = load_dataset(DATA_ROOT / name)
        rows = sorted(rng.choice(len(ds.docs), CALIBRATION_DOCS, replace=False))
        texts += [ds.docs[i].text for i in rows]
    toks = enc.tokenize(texts)
    width = max(len(t) for t in toks)
    feeds = []
    for t in toks:
        n = width if pad else len(t)
        ids = np.zeros((1, n), np.int64)
        mask = np.zeros((1, n), np.int64)
        ids[0, : len(t)] = t
        mask[0, : len(t)] = 1
        feeds.append({"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})
    return feeds


def quantize_static_arm(enc: OnnxEncoder, out: Path, fmt: str, calibration: str, ffn2_fp32: bool) -> Path:
    """``onnxruntime.quantization.quantize_static`` of the fp32 graph into ``out`` (once)."""
    if out.is_file():
        return out
    import onnx
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    feeds = calibration_feeds(enc, pad=calibration == "percentile")

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self._it = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._it, None)

    graph = onnx.load(str(enc.onnx_path)).graph
    exclude = [n.name for n in graph.node if n.op_type == "MatMul" and ".output.dense." in n.input[1]
               and ".attention." not in n.input[1]] if ffn2_fp32 else []
    extra = {"MatMulConstBOnly": True, "QDQOpTypePerChannelSupportToAxis": {"MatMul": 1}}
    method = CalibrationMethod.MinMax
    if calibration == "percentile":
        method = CalibrationMethod.Percentile
        extra["CalibPercentile"] = PERCENTILE
    t0 = time.perf_counter()
    tmp = out.with_suffix(".tmp.onnx")
    quantize_static(str(enc.onnx_path), str(tmp), Reader(), quant_format=getattr(QuantFormat, fmt),
                    op_types_to_quantize=["MatMul"], per_channel=True, reduce_range=False,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, calibrate_method=method,
                    nodes_to_exclude=exclude, extra_options=extra)
    os.replace(tmp, out)
    print(f"quantized {out.name} ({fmt}, {calibration}, {len(feeds)} documents, {len(exclude)} MatMuls "
          f"left fp32) in {time.perf_counter() - t0:.0f} s", flush=True)
    return out


def arms(threads: int) -> dict[str, OnnxEncoder]:
    base = load_encoder("all-MiniLM-L6-v2", threads=threads)
    onnx_path = Path(base.onnx_path)
    folder = onnx_path.parent
    tok = folder / "tokenizer.json"

    def graph(path: Path, max_length: int = 256) -> OnnxEncoder:
        return OnnxEncoder(path, tok, model_id=base.model_id, checksum=base.checksum, max_length=max_length,
                           threads=threads)

    out: dict[str, OnnxEncoder] = {"fp32-256": base, "fp32-128": graph(onnx_path, 128)}
    dyn = folder / "model.int8.onnx"
    if not dyn.is_file():
        quantize_onnx_int8(onnx_path, dyn)
    out["int8-dynamic"] = graph(dyn)
    for name, spec in STATIC.items():
        out[name] = graph(quantize_static_arm(base, folder / f"model.{name}.onnx", *spec))
    import onnxruntime as ort

    basic = graph(onnx_path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 3
    basic._session = ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
    out["fp32-256-basic-graph"] = basic
    return out


def accuracy(encoders: dict[str, OnnxEncoder], n_boot: int) -> dict[str, dict[str, dict[str, float]]]:
    result: dict[str, dict[str, dict[str, float]]] = {}
    cache = cache_root()
    for name in FIT_DATASETS:
        ds = load_dataset(DATA_ROOT / name)
        ctx = EvalContext(ds)
        index = ctx.index(IndexConfig())
        texts = ds.query_texts
        print(f"{ds.name}: {len(ds.docs)} docs, {len(texts)} tasks", flush=True)
        base = ref = None
        rows: dict[str, dict[str, float]] = {}
        for arm, enc in encoders.items():
            if arm == "fp32-256":
                q = ctx.query_emb
            else:  # cached per arm: a rerun encodes nothing
                q = EmbeddingCache(cache, f"{enc.model_id}-{arm}", enc.checksum, "query").get(texts, enc.encode)
            per = per_query(index.search_vectors(q, texts, 10, explain=False).ids, ds.gold)
            row = {"recall@10": 100 * float(per["recall@10"].mean()), "ndcg@10": 100 * float(per["ndcg@10"].mean())}
            if base is None:
                base, ref = per, q
            else:
                cos = np.sum(q * ref, axis=1)
                row |= {"cosine_min": float(cos.min()), "cosine_median": float(np.median(cos))}
                for key in ("recall@10", "ndcg@10"):
                    d, lo, hi = bootstrap_diff(per[key], base[key], n_boot=n_boot, seed=0)
                    row[f"{key}_diff"] = [100 * d, 100 * lo, 100 * hi]
            rows[arm] = row
            line = f"  {arm:<26} R@10 {row['recall@10']:5.1f}  nDCG@10 {row['ndcg@10']:5.1f}"
            if "cosine_min" in row:
                d, lo, hi = row["recall@10_diff"]
                line += (f"  R@10 {d:+.1f} [{lo:+.1f}, {hi:+.1f}]  nDCG@10 {row['ndcg@10_diff'][0]:+.1f}"
                         f"  cosine min {row['cosine_min']:.4f} median {row['cosine_median']:.4f}")
            print(line, flush=True)
        result[name] = rows
    return result


def timing(encoders: dict[str, OnnxEncoder], rounds: int) -> dict[str, object]:
    """Encode p50 (ms), one task per call, arms interleaved so the machine's load hits all alike."""
    long_tasks = load_dataset(DATA_ROOT / "skillsbench").query_texts
    enc0 = encoders["fp32-256"]
    short_tasks = []
    for name in FIT_DATASETS:
        texts = load_dataset(DATA_ROOT / name).query_texts
        short_tasks += [t for t, ids in zip(texts, enc0.tokenize(texts)) if len(ids) < SHORT_TOKENS][:10]
    long_len = [len(x) for x in enc0.tokenize(long_tasks)]
    out: dict[str, object] = {
        "cpu": cpu_name(), "onnxruntime": __import__("onnxruntime").__version__, "threads": 1,
        "load_average_before": list(os.getloadavg()),
        "short_tasks": len(short_tasks), "long_tasks": len(long_tasks),
        "long_tokens_median": float(np.median(long_len)),
    }
    for label, tasks in (("short", short_tasks), ("long", long_tasks)):
        times: dict[str, list[float]] = {a: [] for a in encoders}
        for enc in encoders.values():
            enc.encode(tasks[:2])
        for _ in range(rounds):
            for text in tasks:
                for arm, enc in encoders.items():
                    t0 = time.perf_counter()
                    enc.encode([text])
                    times[arm].append(time.perf_counter() - t0)
        out[label] = {a: round(1000 * float(np.median(v)), 2) for a, v in times.items()}
        print(f"encode p50 {label} ({len(tasks)} tasks x {rounds}): "
              + ", ".join(f"{a} {v:.2f} ms" for a, v in out[label].items()), flush=True)  # type: ignore[union-attr]
    out["load_average_after"] = list(os.getloadavg())
    print(f"cpu {out['cpu']}, onnxruntime {out['onnxruntime']}, load average before {out['load_average_before']} "
          f"after {out['load_average_after']}", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--skip-accuracy", action="store_true")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="timing rounds over the tasks")
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args()
    out: dict[str, object] = {}
    if not args.skip_accuracy:
        out["accuracy"] = accuracy(arms(threads=os.cpu_count() or 1), args.bootstrap)
    if not args.skip_timing:
        out["timing"] = timing(arms(threads=1), args.rounds)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
