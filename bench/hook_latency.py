"""Latency of skills where agents live: the prompt hook end to end, MCP start-up, the live catalog.

    python bench/hook_latency.py                       # writes results/bench/hook_latency.json
    python bench/hook_latency.py --prompts 50 --watch-runs 10 --mcp-runs 5 -o results/bench/hook_latency.json

The library is real: the 183 SkillsBench skills written as SKILL.md folders into a temporary
folder, indexed with the bundled model (``skillsight index``) and calibrated on the SkillsBench
tasks plus the bundled off-topic list (``skillsight calibrate``), as a user would set it up.

1. **Hook, end to end.** ``skillsight hook claude-code -i IDX`` as Claude Code runs it: a fresh
   process per prompt, the ``UserPromptSubmit`` JSON on stdin, wall time until it exits. Prompts:
   the first SkillsBench tasks plus off-topic tasks (``--prompts`` in all, 4 task per off-topic).
   *Cold*: no server running, the hook loads the index and the model itself (after one untimed run
   that fills the OS page cache and the Numba/ONNX caches). *Warm*: ``skillsight serve --http`` of
   the same index is running and published; the hook runs with ``--no-cold`` so every answer is the
   server's. Baselines measured the same way: ``python -c pass`` and ``python -m skillsight_fast.cli
   hook`` on empty stdin (interpreter + imports, no search), and one ``POST /search`` from a
   kept-alive client (the server's own share).
2. **MCP start-up.** ``serve --mcp`` driven by the official SDK client over stdio: time from process
   start to the ``initialize`` result, and to the first ``find_skills`` result (the index loads and
   warms up behind ``initialize``).
3. **Live catalog.** ``serve --http --watch`` on the library folder: a new skill is written, and a
   client polls ``POST /search`` (every 100 ms) with a task for it until it is the top hit; the time
   from the write to that first hit. The skill is then removed and its disappearance awaited, so
   each run starts from the same library.

Reports medians (p50) and p90 of each series, the load average before and after, CPU, and versions.
Never a test: speed is measured here, not asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "skillsight_fast.cli"]
#: How often the live-catalog client asks again (each ask is a search the server must also answer).
POLL_S = 0.1


def write_library(root: Path) -> tuple[Path, Path, list[dict]]:
    """The SkillsBench skills as SKILL.md folders and its tasks as labelled queries (folder ids)."""
    data = ROOT / "data" / "skillsbench"
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = [json.loads(line) for line in fh]
    with gzip.open(data / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        tasks = [json.loads(line) for line in fh]
    lib = root / "lib"
    for doc in docs:
        folder = lib / doc["id"].split(":", 1)[1]
        folder.mkdir(parents=True, exist_ok=True)
        meta = yaml.safe_dump({"name": doc["name"], "description": doc["description"]}, sort_keys=False,
                              allow_unicode=True, width=1_000_000)
        (folder / "SKILL.md").write_text(f"---\n{meta}---\n{doc['body']}", encoding="utf-8")
    rows = [{"id": t["id"], "text": t["text"], "gold": [g.split(":", 1)[1] for g in t["gold"]]}
            for t in tasks]
    labelled = root / "labelled.jsonl"
    labelled.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return lib, labelled, rows


def host_json(prompt: str) -> bytes:
    return json.dumps({"session_id": "bench", "transcript_path": "/tmp/bench.jsonl", "cwd": str(ROOT),
                       "permission_mode": "default", "hook_event_name": "UserPromptSubmit",
                       "prompt": prompt}).encode("utf-8")


def prompts_of(rows: list[dict], n: int) -> list[str]:
    text = (ROOT / "data" / "offtopic_queries.txt").read_text(encoding="utf-8")
    off = [line.strip() for line in text.splitlines()
           if line.strip() and not line.startswith("#")]
    n_off = n // 5
    return [r["text"] for r in rows[: n - n_off]] + off[:n_off]


def timed(cmd: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes, int]:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, input=stdin, capture_output=True, env=env, check=False)
    return time.perf_counter() - t0, done.stdout, done.returncode


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    p90 = xs[min(len(xs) - 1, round(0.9 * (len(xs) - 1)))]
    return {"n": len(xs), "p50_ms": round(1000 * statistics.median(xs), 1), "p90_ms": round(1000 * p90, 1),
            "min_ms": round(1000 * xs[0], 1), "max_ms": round(1000 * xs[-1], 1)}


def hook_series(idx: Path, prompts: list[str], env: dict[str, str],
                extra: list[str]) -> tuple[dict, list[bytes]]:
    """Wall times of one hook process per prompt, and what each printed."""
    cmd = [*CLI, "hook", "claude-code", "-i", str(idx), *extra]
    times, outputs = [], []
    for p in prompts:
        dt, out, rc = timed(cmd, host_json(p), env)
        if rc != 0:
            raise SystemExit(f"the hook exited {rc}")
        times.append(dt)
        outputs.append(out)
    return summary(times) | {"command": " ".join(cmd[2:])}, outputs


def start_http(idx: Path, env: dict[str, str], *extra: str,
               settings: tuple[str, ...] | list[str] = ()) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([*CLI, *settings, "serve", "--http", "-i", str(idx), "--port", "0", "--json",
                             *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("serve --http did not start")
    return proc, json.loads(line)["url"]


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


def search(url: str, task: str, k: int = 1) -> dict:
    req = urllib.request.Request(url + "/search", data=json.dumps({"task": task, "k": k}).encode(),
                                 headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(req, timeout=60) as resp:
        return json.loads(resp.read())


def bench_hook(idx: Path, prompts: list[str], n_tasks: int, env: dict[str, str]) -> dict:
    out: dict = {}
    base = [*CLI, "hook", "claude-code", "-i", str(idx)]
    timed(base, host_json(prompts[0]), env)  # fills the page cache and the Numba/ONNX caches
    out["python_startup"] = summary([timed([sys.executable, "-c", "pass"], b"", env)[0] for _ in range(20)])
    out["hook_no_search"] = summary([timed(base, b"", env)[0] for _ in range(20)])
    out["cold"], cold = hook_series(idx, prompts, env, [])
    server, url = start_http(idx, env)
    try:
        out["warm"], warm = hook_series(idx, prompts, env, ["--no-cold", "--server-timeout", "5"])
        server_times = []
        for p in prompts:
            t0 = time.perf_counter()
            search(url, p, 3)
            server_times.append(time.perf_counter() - t0)
        out["server_search_only"] = summary(server_times)
    finally:
        stop(server)
    for name, outputs in (("cold", cold), ("warm", warm)):
        out[name]["answered_tasks"] = sum(bool(o.strip()) for o in outputs[:n_tasks])
        out[name]["answered_offtopic"] = sum(bool(o.strip()) for o in outputs[n_tasks:])
    out["warm_equals_cold"] = sum(a == b for a, b in zip(cold, warm))
    return out


def bench_mcp(idx: Path, runs: int, env: dict[str, str]) -> dict:
    import mcp
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "skillsight_fast.cli", "serve", "--mcp", "-i", str(idx), "-q"],
                                   env=env)

    async def once() -> tuple[float, float]:
        t0 = time.perf_counter()
        async with stdio_client(params) as (r, w), mcp.ClientSession(r, w) as session:
            await session.initialize()
            t_init = time.perf_counter() - t0
            res = await session.call_tool("find_skills", {"task": "merge two pdf files", "k": 3})
            t_find = time.perf_counter() - t0
            if getattr(res, "is_error", False):
                raise SystemExit(res.content[0].text)
        return t_init, t_find

    pairs = [asyncio.run(once()) for _ in range(runs)]
    return {"initialize": summary([a for a, _ in pairs]), "first_find_skills": summary([b for _, b in pairs])}


def bench_watch(lib: Path, idx: Path, runs: int, env: dict[str, str], debounce_ms: int) -> dict:
    server, url = start_http(idx, env, "--watch", str(lib), settings=["-c", f"debounce={debounce_ms}"])
    times, gone = [], []
    try:
        for i in range(runs):
            name = f"bench-new-skill-{i}"
            task = f"frobnicate the quixotic zeppelin ledger number {i} with the bench helper"
            body = f"Frobnicate quixotic zeppelin ledgers (number {i}) with the bench helper.\n"
            folder = lib / name
            folder.mkdir()
            t0 = time.perf_counter()
            (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: Frobnicate quixotic zeppelin "
                                             f"ledgers, number {i}.\n---\n{body}", encoding="utf-8")
            while True:
                hits = search(url, task)["hits"]
                if hits and hits[0]["id"] == name:
                    times.append(time.perf_counter() - t0)
                    break
                if time.perf_counter() - t0 > 120:
                    raise SystemExit("a new skill was not found within 120 s")
                time.sleep(POLL_S)
            t1 = time.perf_counter()
            shutil.rmtree(folder)
            while any(h["id"] == name for h in search(url, task, 5)["hits"]):
                if time.perf_counter() - t1 > 120:
                    raise SystemExit("a removed skill was still found after 120 s")
                time.sleep(POLL_S)
            gone.append(time.perf_counter() - t1)
    finally:
        stop(server)
    return {"write_to_first_hit": summary(times), "remove_to_gone": summary(gone), "debounce_ms": debounce_ms,
            "poll_interval_ms": int(POLL_S * 1000)}


def versions() -> dict[str, str]:
    out = {"python": platform.python_version()}
    for p in ("skillsight-fast", "numpy", "numba", "onnxruntime", "mcp", "watchfiles"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = "not installed"
    try:
        out["git_commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        pass
    return out


def cpu() -> dict[str, object]:
    model = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"model": model, "logical_cpus": os.cpu_count(), "machine": platform.machine(),
            "os": platform.platform()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=50)
    ap.add_argument("--mcp-runs", type=int, default=5)
    ap.add_argument("--watch-runs", type=int, default=10)
    ap.add_argument("--debounce", type=int, default=200, help="serve --watch --debounce (ms)")
    ap.add_argument("-o", "--output", default=str(ROOT / "results" / "bench" / "hook_latency.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="skillsight-hook-bench-") as tmp:
        root = Path(tmp)
        run = root / "run"
        run.mkdir(mode=0o700)
        env = os.environ | {"XDG_RUNTIME_DIR": str(run)}  # a private endpoint folder
        lib, labelled, rows = write_library(root)
        idx = root / "idx"
        t0 = time.perf_counter()
        subprocess.run([*CLI, "index", str(lib), "-o", str(idx), "-q"], check=True, env=env)
        subprocess.run([*CLI, "calibrate", "-i", str(idx), "--data", str(labelled)], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        setup_s = time.perf_counter() - t0
        calibration = json.loads((idx / "calibration.json").read_text())
        prompts = prompts_of(rows, args.prompts)
        load_before = os.getloadavg()
        out = {
            "library": {"skills": sum(1 for _ in lib.glob("*/SKILL.md")),
                        "source": "data/skillsbench as SKILL.md folders",
                        "calibration": {"signal": calibration["signal"],
                                        "threshold": calibration["threshold"]},
                        "index_and_calibrate_s": round(setup_s, 1)},
            "prompts": {"n": len(prompts), "skillsbench_tasks": len(prompts) - args.prompts // 5,
                        "offtopic": args.prompts // 5},
            "hook": bench_hook(idx, prompts, len(prompts) - args.prompts // 5, env),
            "mcp_startup": bench_mcp(idx, args.mcp_runs, env),
            "watch": bench_watch(lib, idx, args.watch_runs, env, args.debounce),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "cpu": cpu(), "versions": versions(),
            "command": "python bench/hook_latency.py " + " ".join(sys.argv[1:]),
        }
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    h = out["hook"]
    print(f"hook cold p50 {h['cold']['p50_ms']} ms, warm p50 {h['warm']['p50_ms']} ms "
          f"(python start {h['python_startup']['p50_ms']} ms, "
          f"hook without search {h['hook_no_search']['p50_ms']} ms, "
          f"server search {h['server_search_only']['p50_ms']} ms); MCP initialize p50 "
          f"{out['mcp_startup']['initialize']['p50_ms']} ms, first find_skills "
          f"{out['mcp_startup']['first_find_skills']['p50_ms']} ms; watch write->first hit p50 "
          f"{out['watch']['write_to_first_hit']['p50_ms']} ms; "
          f"load {out['load_before'][0]} -> {out['load_after'][0]}")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
