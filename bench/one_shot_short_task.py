"""One-shot `skillsight search` of a short task, with and without the cascade's character bound.

    python bench/one_shot_short_task.py -i IDX [--runs 9] [--json results/bench/one_shot_short_task.json]

Each run is a fresh process (what a user's shell does), A and B in turn: A is the shipped search;
B replaces ``Cascade.lookup_first`` with the gate before the bound (every task tokenized by the
lookup's encoder, which loads it). Prints wall and CPU (user + system) medians of each and the
median of the paired ratios B/A; a short task goes to the transformer either way, so the ids are
the same and the difference is what the bound saves.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

TASK = "merge two PDF files"
SEARCH = "from skillsight_fast.cli import main; main(['search', '-i', {idx!r}, {task!r}, '-k', '3'])"
OLD_GATE = """
import numpy as np
from skillsight_fast.engine.cascade import Cascade
def lookup_first(self, tokenize, texts):
    if not self.lookup_min_pieces:
        return np.ones(len(texts), bool)
    return np.array([ids.size + 2 >= self.lookup_min_pieces for ids in tokenize(list(texts))], bool)
Cascade.lookup_first = lookup_first
"""


def one(code: str) -> tuple[float, float, str]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-i", "--index", required=True)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    a_code = SEARCH.format(idx=args.index, task=TASK)
    b_code = OLD_GATE + a_code
    one(a_code), one(b_code)  # warm-up: byte code, page cache
    rows: dict[str, list[tuple[float, float]]] = {"A": [], "B": []}
    outs = set()
    for _ in range(args.runs):
        for name, code in (("A", a_code), ("B", b_code)):
            wall, cpu, out = one(code)
            rows[name].append((wall, cpu))
            outs.add(out)
    med = {n: {"wall_s": statistics.median(w for w, _ in r), "cpu_s": statistics.median(c for _, c in r)}
           for n, r in rows.items()}
    ratio = statistics.median(b[0] / a[0] for a, b in zip(rows["A"], rows["B"]))
    result = {"task": TASK, "runs": args.runs, "shipped": med["A"], "without_bound": med["B"],
              "wall_ratio_without_over_shipped": ratio, "same_output": len(outs) == 1,
              "cpu": platform.processor() or platform.machine(), "python": platform.python_version(),
              "load": os.getloadavg()}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
