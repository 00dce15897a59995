"""The transformer task encoder at serve time: 1 vs 2 onnxruntime intra-op threads, short and long tasks.

A server encodes one task per request with the int8 task encoder (the transformer tier's default,
docs/ENCODERS.md). This times ``encode([task])`` with sessions of 1 and 2 intra-op threads (spinning
off, as the server sets them) on the 73 skillsbench tasks as written (*long*) and cut to their
first 8 words (*short*), the four arms interleaved task by task so the shared machine's load falls
on all of them alike; p50 / p99 in ms, the token counts, and the load average before and after.

    python bench/task_encoder_threads.py --json results/bench/task_encoder_threads.json
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="passes over the 73 tasks")
    p.add_argument("--model", default="all-MiniLM-L6-v2")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.models import load_encoder

    tasks = load_dataset(ROOT / "data" / "skillsbench").query_texts
    texts = {"long": tasks, "short": [" ".join(t.split()[:8]) for t in tasks]}
    encoders = {t: load_encoder(args.model, int8=True, threads=t) for t in (1, 2)}
    n_tokens = {name: [len(ids) for ids in encoders[1].tokenize(group)] for name, group in texts.items()}
    for enc in encoders.values():
        enc.encode(tasks[:2])
    out: dict = {"load_before": list(os.getloadavg()), "cpus": os.cpu_count(), "arms": {}}
    times: dict[str, list[float]] = {f"{length}/{t}t": [] for length in texts for t in encoders}
    for _ in range(args.rounds):
        for i in range(len(tasks)):
            for length, group in texts.items():
                for t, enc in encoders.items():
                    t0 = time.perf_counter()
                    enc.encode([group[i]])
                    times[f"{length}/{t}t"].append((time.perf_counter() - t0) * 1000)
    out["load_after"] = list(os.getloadavg())
    for name, ms in times.items():
        a = np.asarray(ms)
        out["arms"][name] = {"p50": round(float(np.median(a)), 2),
                             "p99": round(float(np.percentile(a, 99)), 2),
                             "min": round(float(a.min()), 2), "n": int(a.size)}
    out["tokens"] = {name: {"median": float(np.median(v)), "max": int(max(v))}
                     for name, v in n_tokens.items()}
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
