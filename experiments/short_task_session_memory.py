"""Question: does the int8 task encoder spend less CPU on a short task when onnxruntime does not plan its
memory per input shape (``enable_mem_pattern=False``) or does not use its CPU arena
(``enable_cpu_mem_arena=False``)?

Why asked: issue 42 (the default at its floor for short tasks). Every task under 64 word pieces goes to
the int8 transformer, and below ~32 pieces a fixed cost per run dominates it (bench/encoder_floor.py:
373 us per piece at 8 pieces against 207 at 64). Each new sequence length is a new input shape, for which
onnxruntime's memory pattern is planned again; short tasks come in many lengths. Neither option changes
any arithmetic, so the task vectors must stay the same to the bit.

Declared before running. Arms, each an ``OnnxEncoder`` of the cache's int8 graph on one intra-op thread
with the session options of ``OnnxEncoder`` and one change:

- ``today``: as shipped;
- ``no-mem-pattern``: ``SessionOptions.enable_mem_pattern = False``;
- ``no-arena``: ``SessionOptions.enable_cpu_mem_arena = False``.

Data: the bench's short tasks (``skillsight_fast.lab.benchmark.driver.short_tasks``: 64 seeded tasks from
each of bfcl, metatool and gorilla_hf, 192 in all), each encoded alone (``encode([task])``, tokenization
included: what a short task pays), arms interleaved task by task, ``--rounds`` passes (default 7) after one
untimed pass; per-thread CPU time (``time.thread_time``). Reported per arm: the mean over tasks of each
task's median CPU ms, the same per length bucket (under 16, 16-31, 32-63 word pieces), and whether its 192
vectors equal ``today``'s to the bit. Load average before and after.

Adoption rule: set the option in ``OnnxEncoder``'s session if (1) its vectors equal today's to the bit,
(2) its mean CPU per task is at least 3 % lower than today's, and (3) it is lower in each of the three
length buckets. If both arms pass, the one with the lower mean. Otherwise keep today's session.

Result (5 Dec 2026 12:26-12:27 UTC, branch s19-short, load 4.6 -> 4.2 from other jobs, 7 rounds;
results/experiments/short_task_session_memory.json): median 26 word pieces (7 of the 192 tasks have 64 or
more and fall in no bucket). Mean CPU per task: today 6.795 ms; no-mem-pattern 6.843 (+0.7 %); no-arena
6.796 (+0.0 %). Both are bit-identical to today. By bucket (under 16 / 16-31 / 32-63 pieces; 23 / 104 / 58
tasks): today 3.68 / 5.54 / 8.78 ms, no-mem-pattern 3.64 / 5.59 / 8.86, no-arena 3.58 / 5.52 / 8.85.
Condition (2) fails for both arms (neither is 3 % lower), and (3) fails too. **Not adopted**: the fixed
cost of a short task's run is not onnxruntime's memory planning or its arena.


Run: python experiments/short_task_session_memory.py [--rounds 7] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from skillsight_fast.lab.benchmark.driver import short_tasks
from skillsight_fast.models import load_encoder

DATA_ROOT = Path(__file__).parents[1] / "data"
BUCKETS = ((0, 16), (16, 32), (32, 64))


def arms() -> dict:
    import onnxruntime as ort

    out = {}
    for name in ("today", "no-mem-pattern", "no-arena"):
        enc = load_encoder("all-MiniLM-L6-v2", int8=True, threads=1)
        if name != "today":
            options = ort.SessionOptions()
            options.intra_op_num_threads = 1
            options.inter_op_num_threads = 1
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
            options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.log_severity_level = 3
            if name == "no-mem-pattern":
                options.enable_mem_pattern = False
            else:
                options.enable_cpu_mem_arena = False
            enc._session = ort.InferenceSession(str(enc.onnx_path), sess_options=options,
                                                providers=["CPUExecutionProvider"])
        out[name] = enc
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    tasks = short_tasks(DATA_ROOT)
    encoders = arms()
    pieces = np.array([len(ids) for ids in encoders["today"].tokenize(tasks)])
    vectors = {a: enc.encode(tasks) for a, enc in encoders.items()}  # batched, for the bit check
    singles = {a: np.vstack([enc.encode([t]) for t in tasks]) for a, enc in encoders.items()}  # untimed pass
    load_before = list(os.getloadavg())
    cpu = {a: np.zeros((args.rounds, len(tasks))) for a in encoders}
    for r in range(args.rounds):
        for i, task in enumerate(tasks):
            for a, enc in encoders.items():
                t = time.thread_time()
                enc.encode([task])
                cpu[a][r, i] = (time.thread_time() - t) * 1e3
    per_task = {a: np.median(v, axis=0) for a, v in cpu.items()}
    out: dict = {"load_before": load_before, "load_after": list(os.getloadavg()), "tasks": len(tasks),
                 "rounds": args.rounds, "pieces_median": float(np.median(pieces)), "arms": {}}
    base = per_task["today"]
    for a, ms in per_task.items():
        row = {"cpu_ms_mean": round(float(ms.mean()), 4),
               "vs_today": round(float(ms.mean() / base.mean() - 1), 4),
               "bit_identical": bool(np.array_equal(vectors[a], vectors["today"])
                                     and np.array_equal(singles[a], singles["today"])),
               "buckets": {}}
        for lo, hi in BUCKETS:
            sel = (pieces >= lo) & (pieces < hi)
            row["buckets"][f"{lo}-{hi - 1}"] = {"tasks": int(sel.sum()),
                                               "cpu_ms_mean": round(float(ms[sel].mean()), 4) if sel.any() else None}
        out["arms"][a] = row
        print(f"{a}: {row['cpu_ms_mean']:.3f} ms CPU per task ({100 * row['vs_today']:+.1f} %), bit-identical "
              f"{row['bit_identical']}; by pieces " +
              ", ".join(f"{k}: {v['cpu_ms_mean']} ({v['tasks']})" for k, v in row["buckets"].items()), flush=True)
    print(f"load {out['load_before'][0]:.2f} -> {out['load_after'][0]:.2f}; median {out['pieces_median']:.0f} pieces")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
