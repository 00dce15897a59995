"""The transformer encoder against the machine's multiply-add rate: how far the int8 task encoder is
from its floor, and what each onnxruntime setting changes.

    python bench/encoder_floor.py                       # writes results/bench/encoder_floor.json
    python bench/encoder_floor.py --reps 60 -o /tmp/floor.json

all-MiniLM-L6-v2 costs 10.6M multiply-adds per word piece in its weight matrices (6 layers of
384x1152 Q/K/V, 384x384 output, 384x1536 and 1536x384 feed-forward; attention adds 2 x 384 x n per
piece, small below a few hundred pieces). The floor of a graph is that count divided by the rate the
machine multiplies at:

1. **Machine rate.** One ``MatMul`` (float32) and one ``MatMulInteger`` (u8 x s8, the kernel the int8
   graph runs; VNNI where the CPU has it, else AVX2 ``vpmaddubsw``) of the encoder's largest shape
   (rows x 384 x 1536), one thread, in onnxruntime itself.
2. **Encoder per word piece.** The float32 and int8 graphs of the cache (``load_encoder``), one task of
   n pieces (no padding), one intra-op thread, n in 8..256: CPU time per piece, its multiply-add rate
   and its distance from the floor.
3. **Settings.** The same int8 graph under each graph-optimisation level, with onnxruntime's
   ``SkipLayerNormFusion`` turned off, from a pre-optimised copy (session creation), and two intra-op
   threads (wall time of one task).
4. **Distillation.** CPU time of one batch of the static distillation (512 ``[CLS] token [SEP]`` rows
   through the float32 graph) and the whole vocabulary's estimate.

Times are per-thread CPU time (``time.thread_time``; one intra-op thread runs in the caller), medians
of ``--reps`` runs, which other jobs on a shared machine disturb far less than wall time; the load
average is recorded before and after. Never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MACS_PER_PIECE = 6 * (384 * 1152 + 384 * 384 + 2 * 384 * 1536)  # 10,616,832
LENGTHS = (8, 16, 32, 64, 128, 256)


def cpu_flags() -> list[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")),
                 [])
    return sorted(f for f in flags if "vnni" in f or f.startswith(("avx512", "amx")) or f in ("avx2", "fma"))


def session(path: str | bytes, threads: int = 1, level: str = "ORT_ENABLE_ALL",
            disabled: list[str] | None = None,
            save: str | None = None):
    import onnxruntime as ort

    o = ort.SessionOptions()
    o.intra_op_num_threads = threads
    o.inter_op_num_threads = 1
    o.add_session_config_entry("session.intra_op.allow_spinning", "0")
    o.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    o.log_severity_level = 3
    if save:
        o.optimized_model_filepath = save
    kwargs = {"disabled_optimizers": disabled} if disabled else {}
    return ort.InferenceSession(path, o, providers=["CPUExecutionProvider"], **kwargs)


def median_cpu(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    out = []
    for _ in range(reps):
        t = time.thread_time()
        fn()
        out.append(time.thread_time() - t)
    return float(np.median(out))


def median_wall(fn, reps: int) -> float:
    for _ in range(3):
        fn()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return float(np.median(out))


def machine_rate(rows: int, int8: bool, reps: int) -> float:
    """Multiply-adds per second of one rows x 384 x 1536 product, one thread."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    k, n = 384, 1536
    if int8:
        w = numpy_helper.from_array(rng.integers(-127, 128, (k, n)).astype(np.int8), "W")
        node = helper.make_node("MatMulInteger", ["x", "W"], ["y"])
        x_t, y_t, x = TensorProto.UINT8, TensorProto.INT32, rng.integers(0, 256, (rows, k)).astype(np.uint8)
    else:
        w = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "W")
        node = helper.make_node("MatMul", ["x", "W"], ["y"])
        x_t, y_t, x = TensorProto.FLOAT, TensorProto.FLOAT, rng.standard_normal((rows, k)).astype(np.float32)
    graph = helper.make_graph([node], "gemm", [helper.make_tensor_value_info("x", x_t, [rows, k])],
                              [helper.make_tensor_value_info("y", y_t, [rows, n])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    s = session(model.SerializeToString())
    return rows * k * n / median_cpu(lambda: s.run(None, {"x": x}), reps)


def feed_of(s, n: int, batch: int = 1) -> dict:
    ids = np.full((batch, n), 2023, np.int64)
    ids[:, 0], ids[:, -1] = 101, 102
    arrays = {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": np.zeros_like(ids)}
    return {i.name: arrays[i.name] for i in s.get_inputs()}


def per_piece(s, reps: int, floor_rate: float) -> list[dict]:
    rows = []
    for n in LENGTHS:
        feed = feed_of(s, n)
        sec = median_cpu(lambda feed=feed: s.run(None, feed), reps if n <= 64 else max(reps // 3, 5))
        rate = MACS_PER_PIECE * n / sec
        rows.append({"pieces": n, "cpu_ms": round(sec * 1e3, 3), "us_per_piece": round(sec / n * 1e6, 1),
                     "gmac_per_s": round(rate / 1e9, 1), "times_floor": round(floor_rate / rate, 2)})
    return rows


def show(label: str, rows: list[dict]) -> None:
    cells = "  ".join(f"{r['pieces']}:{r['us_per_piece']:.0f}us(x{r['times_floor']:.2f})" for r in rows)
    print(f"{label:<34} {cells}", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("-o", "--output", default=str(ROOT / "results" / "bench" / "encoder_floor.json"))
    args = ap.parse_args()

    import onnxruntime as ort

    from skillsight_fast.models import load_encoder

    report: dict = {"load_before": [round(x, 2) for x in os.getloadavg()], "cpu": platform.processor(),
                    "cpu_flags": cpu_flags(), "onnxruntime": ort.__version__,
                    "macs_per_piece": MACS_PER_PIECE}
    rates = {}
    for kind in ("fp32", "int8"):
        rates[kind] = {rows: machine_rate(rows, kind == "int8", args.reps) for rows in (8, 64, 256)}
        print(f"machine {kind} rate (rows x 384 x 1536, 1 thread): "
              + ", ".join(f"{r} rows {v / 1e9:.1f} GMAC/s" for r, v in rates[kind].items()), flush=True)
    report["machine_gmac_per_s"] = {k: {str(r): round(v / 1e9, 1) for r, v in d.items()}
                                    for k, d in rates.items()}
    floor = {k: max(d.values()) for k, d in rates.items()}
    print(f"floor: int8 {MACS_PER_PIECE / floor['int8'] * 1e6:.0f} us/piece, "
          f"fp32 {MACS_PER_PIECE / floor['fp32'] * 1e6:.0f} us/piece", flush=True)

    fp32 = load_encoder(threads=1)
    int8 = load_encoder(int8=True, threads=1)
    paths = {"fp32": str(fp32.onnx_path), "int8": str(int8.onnx_path)}
    graphs: dict = {}
    for kind in ("fp32", "int8"):
        rows = per_piece(session(paths[kind]), args.reps, floor[kind])
        graphs[f"{kind}, ORT_ENABLE_ALL"] = rows
        show(f"{kind} graph, ORT_ENABLE_ALL", rows)
    for level in ("ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED"):
        rows = per_piece(session(paths["int8"], level=level), args.reps, floor["int8"])
        graphs[f"int8, {level}"] = rows
        show(f"int8 graph, {level}", rows)
    rows = per_piece(session(paths["int8"], disabled=["SkipLayerNormFusion"]), args.reps, floor["int8"])
    graphs["int8, ORT_ENABLE_ALL without SkipLayerNormFusion"] = rows
    show("int8 graph, no SkipLayerNormFusion", rows)
    report["per_piece"] = graphs

    creation = {}
    with tempfile.TemporaryDirectory() as tmp:
        saved = str(Path(tmp) / "int8.optimised.onnx")
        session(paths["int8"], save=saved)
        for label, make in (("int8 as exported, ORT_ENABLE_ALL", lambda: session(paths["int8"])),
                            ("int8 pre-optimised, ORT_DISABLE_ALL",
                             lambda: session(saved, level="ORT_DISABLE_ALL"))):
            t = time.process_time()
            for _ in range(5):
                make()
            creation[label] = round((time.process_time() - t) / 5, 3)
            print(f"session creation, {label}: {creation[label]:.3f} s CPU", flush=True)
    report["session_creation_cpu_s"] = creation

    threads = {}
    for n in (16, 64, 256):
        for t in (1, 2):
            s = session(paths["int8"], threads=t)
            feed = feed_of(s, n)
            wall = median_wall(lambda s=s, feed=feed: s.run(None, feed), args.reps)
            threads[f"{n} pieces, {t} thread(s)"] = round(wall * 1e3, 2)
    print("one task, int8, wall ms:", threads, flush=True)
    report["one_task_wall_ms"] = threads

    s = session(paths["fp32"], threads=1)
    feed = feed_of(s, 3, batch=512)
    batch_s = median_cpu(lambda: s.run(None, feed), max(args.reps // 8, 3))
    vocab = fp32.vocab_size
    report["distillation"] = {"batch_512_cpu_s": round(batch_s, 3), "tokens": vocab,
                              "estimate_cpu_s": round(batch_s * vocab / 512, 1)}
    print(f"distillation: {batch_s:.3f} s CPU per 512 tokens, about {batch_s * vocab / 512:.0f} CPU-s for "
          f"{vocab} tokens", flush=True)

    report["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(f"load average before {report['load_before']}, after {report['load_after']}", flush=True)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
