"""The first hour of a new user, as whole commands: where a first build's time goes, and its silences.

    python bench/first_hour.py                          # personal library: index, search, hook, one-shot
    python bench/first_hour.py --bundled                # also the bundled 3,434-skill build (minutes)
    python bench/first_hour.py --skillsight /tmp/venv/bin/skillsight -o results/bench/first_hour.json

Every command runs as a fresh process under an empty HOME: ``HOME``, ``XDG_CACHE_HOME`` and
``NUMBA_CACHE_DIR`` point into one temporary folder, so the first command pays every one-time cost
(the ONNX export, the int8 graph, the distilled static model, the kernel compile) exactly as a new
install would, and later commands find what it left. ``--skillsight`` runs another install's console
script (a fresh venv); by default the one next to this Python. ``--keep-cache DIR`` reuses a cache
(only the per-command costs are then measured).

Steps, in order, in the same HOME:

1. ``index data/personal`` (16 skills) with ``-v``: each stderr line is time-stamped, and the run is
   cut into phases by the lines the package writes (ONNX export, static distillation, int8
   quantisation, kernel compile, document encoding, the lookup-table fit, writing).
2. ``search`` of one task on that index (the first search), then ``search`` again (one-shot, warm).
3. ``hook claude-code`` on one prompt without a running server (cold hook).
4. with ``--bundled``: ``index data/skillsbench`` (3,434 skills) in the same HOME (caches warm).

For each step: wall time, the CPU time of the process (user + system: on a loaded machine the
comparable number), exit code, the longest time stderr stayed silent (from the start to the
first line, between two lines, from the last line to the exit) and the phases. The load average
before and after is recorded with the numbers (the machine is shared). Never a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TASK = "merge two PDF files into one and add page numbers"

#: (phase, the stderr line that starts it, a line that ends it): the first start line and the last end
#: line found (the last start line when no end line is); phases may overlap (the kernel compile runs beside
#: the build in a thread of its own).
MARKERS: tuple[tuple[str, str, str], ...] = (
    ("onnx export", r"exporting it to ONNX", r"exported .* -> |still exporting"),
    ("static distillation", r"distilling a static encoder",
     r"saved static model|distilling the static encoder"),
    ("int8 quantisation", r"quantising .* to int8", r"quantized .* -> |still quantising"),
    ("kernel compile", r"compiling search kernels", r"compiling search kernels"),
    ("document encoding", r"^encoding \d+ skills", r"document encoding: \d+ texts|^encoding \d+ skills"),
    ("training pieces", r"encoding \d+ training pieces", r"fitted tier: \d+ training texts encoded"),
    ("lookup-table fit", r"fitted tier: \d+ training texts encoded", r"index: \d+ skills"),
    ("writing", r"index: \d+ skills", r"$^"),
)


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def run(cmd: list[str], env: dict[str, str], stdin: bytes | None = None) -> dict:
    """Run ``cmd``; time-stamp each stderr line; the longest silence and the phases from the markers."""
    t0 = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdin is not None and proc.stderr is not None and proc.stdout is not None
    if stdin:
        proc.stdin.write(stdin)
    proc.stdin.close()
    lines: list[tuple[float, str]] = []
    last, gap, gap_at = t0, 0.0, 0.0
    for raw in proc.stderr:
        now = time.monotonic()
        if now - last > gap:
            gap, gap_at = now - last, last - t0
        last = now
        lines.append((round(now - t0, 2), raw.decode("utf-8", "replace").rstrip()))
    out = proc.stdout.read().decode("utf-8", "replace")
    rc = proc.wait()
    end = time.monotonic()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if end - last > gap:
        gap, gap_at = end - last, last - t0
    return {"cmd": [Path(cmd[0]).name, *cmd[1:]], "rc": rc, "seconds": round(end - t0, 2),
            "cpu_s": round(cpu, 2),
            "longest_silence_s": round(gap, 2), "silence_starts_at_s": round(gap_at, 2),
            "phases": phases(lines, end - t0), "stderr": lines, "stdout_tail": out[-400:]}


def phases(lines: list[tuple[float, str]], total: float) -> list[dict]:
    """Each phase found, from its first start line to its last end line (the exit for ``writing``)."""
    out = []
    for name, start, end in MARKERS:
        begun = next((t for t, line in lines if re.search(start, line)), None)
        if begun is None:
            continue
        ends = [t for t, line in lines if t >= begun and (re.search(end, line) or re.search(start, line))]
        stop = total if name == "writing" else max(ends, default=begun)
        out.append({"phase": name, "from_s": round(begun, 2), "seconds": round(stop - begun, 2)})
    return sorted(out, key=lambda p: p["from_s"])


def show(label: str, r: dict) -> None:
    print(f"{label}: {r['seconds']:.1f} s, CPU {r['cpu_s']:.1f} s (exit {r['rc']}), "
          f"longest silence {r['longest_silence_s']:.1f} s "
          f"from {r['silence_starts_at_s']:.1f} s", flush=True)
    for p in r["phases"]:
        if r["phases"]:
            print(f"    {p['phase']:<22} {p['seconds']:7.1f} s  (from {p['from_s']:.1f} s)", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skillsight", default=str(Path(sys.executable).with_name("skillsight")),
                    help="the console script to run (default: the one next to this Python)")
    ap.add_argument("--bundled", action="store_true", help="also build the bundled 3,434-skill library")
    ap.add_argument("--keep-cache", metavar="DIR", help="use DIR as the HOME (kept; caches reused)")
    ap.add_argument("-o", "--output", default=str(ROOT / "results" / "bench" / "first_hour.json"))
    args = ap.parse_args()

    home = (Path(args.keep_cache) if args.keep_cache
            else Path(tempfile.mkdtemp(prefix="skillsight-first-hour-")))
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SKILLSIGHT_", "NUMBA_"))}
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"),
               NUMBA_CACHE_DIR=str(home / ".cache" / "numba"),
               PYTHONUNBUFFERED="1")
    cli = [args.skillsight]
    small, big = home / "personal-index", home / "bundled-index"
    for folder in (small, big):
        shutil.rmtree(folder, ignore_errors=True)
    report: dict = {"load_before": loadavg(), "cpu": platform.processor() or platform.machine(),
                    "cores": os.cpu_count(), "home": str(home), "fresh_cache": not args.keep_cache,
                    "steps": {}}
    steps = report["steps"]
    try:
        steps["first_index_personal"] = run([*cli, "-v", "index", "data/personal", "-o", str(small)], env)
        show("first index of data/personal", steps["first_index_personal"])
        steps["first_search"] = run([*cli, "search", "-i", str(small), TASK], env)
        show("first search", steps["first_search"])
        steps["one_shot_search"] = run([*cli, "search", "-i", str(small), TASK], env)
        show("one-shot search", steps["one_shot_search"])
        prompt = json.dumps({"session_id": "first-hour", "hook_event_name": "UserPromptSubmit",
                             "cwd": str(ROOT), "prompt": TASK}).encode()
        steps["hook_cold"] = run([*cli, "hook", "claude-code", "-i", str(small)], env, stdin=prompt)
        show("hook without a server", steps["hook_cold"])
        if args.bundled:
            steps["bundled_index"] = run([*cli, "-v", "index", "data/skillsbench", "-o", str(big)], env)
            show("bundled index (data/skillsbench)", steps["bundled_index"])
        report["index_mb"] = round(sum(f.stat().st_size for f in small.rglob("*") if f.is_file()) / 2**20, 1)
        print(f"personal index on disk: {report['index_mb']} MB", flush=True)
    finally:
        report["load_after"] = loadavg()
        print(f"load average before {report['load_before']}, after {report['load_after']}", flush=True)
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        if not args.keep_cache:
            shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
