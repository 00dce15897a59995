"""Cold start of a one-shot ``skillsight search``: wall time of whole processes, warm caches.

    python bench/cold_start.py -i IDX                 # 1 warm-up run, then 7 timed runs
    python bench/cold_start.py -i IDX --runs 15 --json
    python bench/cold_start.py --tiers data/skillsbench --out /tmp/tiers   # one index per query
                                                      # encoder tier, each timed the same way

With ``--tiers SOURCE`` the script builds (once; reused when present) ``OUT/transformer``,
``OUT/static-mapped`` and ``OUT/static`` with ``skillsight -c query-encoder=TIER index`` and times a
one-shot search on each, the runs interleaved so background load hits the tiers alike. Each timed
index also gets one untimed in-process search that reports whether onnxruntime and Numba were
imported. Next to each wall time the script records the process's CPU time (user + sys), which
other jobs on the machine disturb less than the wall time.

Runs the ``skillsight`` console script next to this Python (not a shell shim) as a fresh process
each time, after one untimed run that fills the OS page cache and the Numba and ONNX caches, and
reports every wall time, the median, the load average before and after, and the versions.
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
from importlib.metadata import version
from pathlib import Path

TASK = "Extract the tables from a PDF report and save them as CSV files"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-i", "--index", action="append", default=[], metavar="[LABEL=]DIR",
                    help="index folder (repeatable)")
    ap.add_argument("--tiers", metavar="SOURCE", help="build one index of SOURCE per query encoder tier")
    ap.add_argument("--out", default="/tmp/skillsight-cold-start", help="where --tiers puts the indexes")
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--task", default=TASK)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    script = Path(sys.executable).with_name("skillsight")
    base = [str(script) if script.is_file() else sys.executable, *([] if script.is_file() else
            ["-m", "skillsight_fast.cli"])]
    indexes: dict[str, str] = {}
    for item in args.index:
        label, _, path = item.rpartition("=")
        indexes[label or path] = path
    if args.tiers:
        for tier in ("transformer", "static-mapped", "static"):
            folder = Path(args.out) / tier
            if not (folder / "manifest.json").is_file():
                subprocess.run([*base, "-c", f"query-encoder={tier}", "index", args.tiers, "-o", str(folder),
                                "-q"], check=True)
            indexes[tier] = str(folder)
    if not indexes:
        ap.error("give -i DIR or --tiers SOURCE")

    def run(path: str) -> tuple[float, float]:
        cmd = [*base, "search", "-i", path, args.task, "-k", "3"]
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        dt = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"skillsight search failed: {done.stderr.strip()}")
        return dt, (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)

    def imported(path: str) -> dict[str, bool]:
        code = ("import sys; from skillsight_fast.cli import main; "
                f"main(['search', '-i', {path!r}, {args.task!r}, '-k', '3']); "
                "print('onnxruntime' in sys.modules, 'numba' in sys.modules)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
        ort_in, numba_in = done.stdout.strip().splitlines()[-1].split()
        return {"onnxruntime_imported": ort_in == "True", "numba_imported": numba_in == "True"}

    mods = {label: imported(path) for label, path in indexes.items()}  # also the warm-up
    load_before = os.getloadavg()[0]
    times: dict[str, list[float]] = {label: [] for label in indexes}
    cpu: dict[str, list[float]] = {label: [] for label in indexes}
    for _ in range(args.runs):  # interleaved: load changes hit every index alike
        for label, path in indexes.items():
            wall, used = run(path)
            times[label].append(wall)
            cpu[label].append(used)
    out = {
        "command": " ".join([*base, "search", "-i", "IDX", repr(args.task), "-k", "3"]),
        "indexes": {label: {"index": indexes[label], "runs_s": [round(t, 3) for t in ts],
                            "median_s": round(statistics.median(ts), 3),
                            "cpu_median_s": round(statistics.median(cpu[label]), 3), **mods[label]}
                    for label, ts in times.items()},
        "load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "bytecode_cached": not sys.flags.dont_write_bytecode and "PYTHONDONTWRITEBYTECODE" not in os.environ,
        "versions": {p: version(p) for p in ("numpy", "numba", "onnxruntime", "skillsight-fast")},
    }
    if args.json:
        print(json.dumps(out))
    else:
        for label, r in out["indexes"].items():
            loaded = [m for m in ("onnxruntime", "numba") if r[f"{m}_imported"]]
            imported = " and ".join(loaded) + " imported" if loaded else "no onnxruntime, no numba"
            print(f"{label}: median {r['median_s']} s (CPU {r['cpu_median_s']} s) over {args.runs} runs "
                  f"{r['runs_s']} ({imported})")
        print(f"load {out['load_before']} -> {out['load_after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
