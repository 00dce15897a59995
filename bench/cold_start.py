"""Cold start of a one-shot ``skillsight search``: wall time of whole processes, warm caches.

    python bench/cold_start.py -i IDX                 # 1 warm-up run, then 7 timed runs
    python bench/cold_start.py -i IDX --runs 15 --json

Runs the ``skillsight`` console script next to this Python (not a shell shim) as a fresh process
each time, after one untimed run that fills the OS page cache and the Numba and ONNX caches, and
reports every wall time, the median, the load average before and after, and the versions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

TASK = "Extract the tables from a PDF report and save them as CSV files"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-i", "--index", required=True, help="index folder")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--task", default=TASK)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    script = Path(sys.executable).with_name("skillsight")
    cmd = [str(script) if script.is_file() else sys.executable, *([] if script.is_file() else
           ["-m", "skillsight_fast.cli"]), "search", "-i", args.index, args.task, "-k", "3"]

    def run() -> float:
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if done.returncode != 0:
            raise SystemExit(f"skillsight search failed: {done.stderr.strip()}")
        return dt

    run()  # warm-up: page cache, Numba cache, ONNX export
    load_before = os.getloadavg()[0]
    times = [run() for _ in range(args.runs)]
    out = {
        "command": " ".join(cmd), "runs_s": [round(t, 3) for t in times],
        "median_s": round(statistics.median(times), 3),
        "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "versions": {p: version(p) for p in ("numpy", "numba", "onnxruntime", "skillsight-fast")},
    }
    if args.json:
        print(json.dumps(out))
    else:
        print(f"median {out['median_s']} s over {args.runs} runs {out['runs_s']} "
              f"(load {out['load_before']} -> {out['load_after']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
