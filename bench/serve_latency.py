"""Served search latency next to the scoring: where the time of a served search goes, at any size.

For each index (``-i``, repeatable: e.g. the 26k, 100k and 1M synthetic scale-ups of
bench/build_synthetic.py), one after the other:

1. ``skillsight -c mmap=true serve --http --port 0 --json`` is started as a real process; *ready* is the
   time from its spawn to the line it prints when it listens (index loaded, kernels and encoder
   warmed up). Then ``--requests`` sequential ``POST /search`` (k=5, keep-alive connection, the 73
   skillsbench tasks in turn) give the HTTP p50/p99, and the server is stopped.
2. ``skillsight -c mmap=true serve --mcp`` is started through the MCP SDK's stdio client; ``find_skills``
   is called ``--requests`` times: the MCP p50/p99 (JSON-RPC over pipes included).
3. In this process, the index is loaded (``--mmap``) and the same tasks are timed stage by stage:
   the encoder alone, the *scoring* (``search_vectors`` on already encoded tasks, no evidence: the
   scan + lexical + fusion, what docs/LARGE.md calls scoring) and the whole ``find_skills`` (encoder,
   search, evidence, hit records, collapse), so the served latency can be read against them.

    python bench/serve_latency.py -i /tmp/idx-26k -i /tmp/idx-100k -i /tmp/idx-1m \\
        --json results/bench/serve_latency.json

One request at a time (latency, not throughput; bench/load_test.py measures throughput). The HTTP
searches made while the server verifies the index after its first answer (sha256 of every file and
the float checks on a thread, docs/GUARANTEES.md §8) are timed apart (``during_verification``): that
thread takes a core and memory bandwidth from the scan; p50/p99 are the steady state after it. The
MCP run waits as long before its timed calls. ``--words N`` cuts the tasks to N words (short tasks).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def tasks() -> list[str]:
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    queries = load_dataset(ROOT / "data" / "skillsbench").queries
    return [q.text if hasattr(q, "text") else str(q) for q in queries]


def pct(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50": round(float(np.percentile(a, 50)), 3), "p99": round(float(np.percentile(a, 99)), 3),
            "mean": round(float(a.mean()), 3), "n": int(a.size)}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


#: ``serve`` with every task encoded by a static model instead of the index's encoder (latency only:
#: the index's model check is bypassed, so the answers mean nothing for a transformer index).
LOOKUP_SERVER = """
import sys
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.models import load_encoder
from skillsight_fast.cli import main
static = load_encoder(sys.argv[1])
SkillIndex.encode = lambda self, q: static.encode([q] if isinstance(q, str) else list(q))
sys.exit(main(sys.argv[2:]))
"""


def http_run(index: str, queries: list[str], n: int, lookup: str | None = None) -> dict[str, Any]:
    t0 = time.perf_counter()
    serve = ["-c", "mmap=true", "serve", "--http", "-i", index, "--port", "0", "--json", "-q"]
    head = ([sys.executable, "-c", LOOKUP_SERVER, lookup] if lookup
            else [sys.executable, "-m", "skillsight_fast.cli"])
    proc = subprocess.Popen([*head, *serve], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env())
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            raise RuntimeError(f"the server did not start: {proc.stderr.read()}")  # type: ignore[union-attr]
        ready = time.perf_counter() - t0
        url = json.loads(line)["url"]
        host, port = url.split("//")[1].rstrip("/").split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=60)

        def search(i: int) -> float:
            body = json.dumps({"task": queries[i % len(queries)], "k": 5})
            t = time.perf_counter()
            conn.request("POST", "/search", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            dt = (time.perf_counter() - t) * 1000
            if resp.status != 200:
                raise RuntimeError(f"POST /search: {resp.status} {data[:200]!r}")
            return dt

        def health() -> dict[str, Any]:
            conn.request("GET", "/health")
            return json.loads(conn.getresponse().read())  # type: ignore[no-any-return]

        first = search(0)
        # while the index is verified after its first answer (sha256 of every file and the float
        # checks, docs/GUARANTEES.md §8), the verifying thread takes a core and memory bandwidth
        # from the scan: those searches are timed apart, the steady state after it
        during: list[float] = []
        while (health().get("verification") or {}).get("status") == "pending":
            during.append(search(len(during) + 1))
            if len(during) >= n:
                time.sleep(0.5)
        verified = time.perf_counter() - t0
        ms = [search(i) for i in range(n)]
        h = health()
        conn.close()
        return {"ready_s": round(ready, 3), "first_ms": round(first, 3), "verified_s": round(verified, 3),
                "during_verification": pct(during) if during else None, **pct(ms), "health": h}
    finally:
        proc.terminate()
        proc.wait(30)


def mcp_run(index: str, queries: list[str], n: int, settle: float = 0.0) -> dict[str, Any]:
    """``settle``: seconds to wait after the first answer (the stdio server has no /health: the
    verification time the HTTP run measured on the same index), so the timed calls are steady state."""
    import mcp
    from mcp.client.stdio import StdioServerParameters, stdio_client

    async def go() -> dict[str, Any]:
        params = StdioServerParameters(command=sys.executable, env=_env(),
                                       args=["-m", "skillsight_fast.cli", "-c", "mmap=true", "serve",
                                             "--mcp", "-i", index, "-q"])
        t0 = time.perf_counter()
        async with stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
            await session.initialize()
            await session.call_tool("find_skills", {"task": queries[0], "k": 5})  # waits for the load
            ready = time.perf_counter() - t0
            await asyncio.sleep(settle)
            ms = []
            for i in range(n):
                t = time.perf_counter()
                out = await session.call_tool("find_skills", {"task": queries[i % len(queries)], "k": 5})
                ms.append((time.perf_counter() - t) * 1000)
                if getattr(out, "isError", False):
                    raise RuntimeError(out.content[0].text)
            return {"ready_s": round(ready, 3), **pct(ms)}

    return asyncio.run(asyncio.wait_for(go(), 900))


def stages(index_dir: str, queries: list[str], n: int, lookup: str | None = None) -> dict[str, Any]:
    from skillsight_fast import SkillIndex
    from skillsight_fast.agents.find import find_skills

    t0 = time.perf_counter()
    index = SkillIndex.load(index_dir, mmap=True, verify="lazy")
    load = time.perf_counter() - t0
    index.warmup()
    find_skills(index, queries[:2], 5)
    enc, score, full = [], [], []
    for i in range(n):
        q = [queries[i % len(queries)]]
        t = time.perf_counter()
        v = index.encode(q)
        enc.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        index.search_vectors(v, q, 5, explain=False)
        score.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        find_skills(index, q, 5)
        full.append((time.perf_counter() - t) * 1000)
    out = {"n_skills": len(index), "scan": index.scan.kind, "load_lazy_s": round(load, 3),
           "encoder": pct(enc), "scoring": pct(score), "find_skills": pct(full)}
    if lookup:  # the same searches with a lookup-tier task encoder (a static model of the same dimension)
        from skillsight_fast.models import load_encoder

        static = load_encoder(lookup)
        # the index's model check refuses another model (rightly): a latency-only stand-in
        index.encode = lambda q: static.encode([q] if isinstance(q, str) else list(q))  # type: ignore[method-assign]
        find_skills(index, queries[:2], 5)
        enc, full = [], []
        for i in range(n):
            q = [queries[i % len(queries)]]
            t = time.perf_counter()
            index.encode(q)
            enc.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            find_skills(index, q, 5)
            full.append((time.perf_counter() - t) * 1000)
        out["lookup_tier"] = {"model": lookup, "encoder": pct(enc), "find_skills": pct(full)}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-i", "--index", action="append", required=True)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--skip-mcp", action="store_true")
    p.add_argument("--lookup-model", metavar="PATH",
                   help="also time find_skills in process with this static (model2vec) task encoder in "
                        "place of the transformer: the latency of a lookup tier (static, fitted) on the "
                        "same index; its "
                        "answers mean nothing unless the index was built for that tier")
    p.add_argument("--words", type=int, default=0,
                   help="cut each task to its first N words (0: as written; the skillsbench tasks are long: "
                        "their median is the encoder's 256-token cap)")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args()
    queries = tasks()
    if args.words > 0:
        queries = [" ".join(q.split()[: args.words]) for q in queries]
    out: dict[str, Any] = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                       "load_average": list(os.getloadavg())}, "words": args.words,
                           "command": "python bench/serve_latency.py " + " ".join(sys.argv[1:]),
                           "indexes": []}
    for index in args.index:
        row: dict[str, Any] = {"index": index, "load_before": list(os.getloadavg())}
        row["http"] = http_run(index, queries, args.requests)
        if args.lookup_model:
            row["http_lookup_tier"] = http_run(index, queries, args.requests, args.lookup_model)
        if not args.skip_mcp:
            settle = row["http"]["verified_s"] - row["http"]["ready_s"] + 2.0
            row["mcp"] = mcp_run(index, queries, args.requests, settle=max(settle, 0.0))
        row.update(stages(index, queries, args.requests, args.lookup_model))
        row["load_after"] = list(os.getloadavg())
        out["indexes"].append(row)
        print(json.dumps({k: row[k] for k in ("index", "n_skills", "scan", "load_lazy_s")}), flush=True)
        http = row["http"]
        print(f"  http  ready {http['ready_s']} s  p50 {http['p50']} ms  p99 {http['p99']} ms"
              f"  (verified at {http['verified_s']} s; during it: {http['during_verification']})")
        if "mcp" in row:
            mcp = row["mcp"]
            print(f"  mcp   ready {mcp['ready_s']} s  p50 {mcp['p50']} ms  p99 {mcp['p99']} ms")
        for key in ("encoder", "scoring", "find_skills"):
            print(f"  {key:12s} p50 {row[key]['p50']} ms  p99 {row[key]['p99']} ms")
        if "http_lookup_tier" in row:
            hl = row["http_lookup_tier"]
            print(f"  http with the lookup encoder  p50 {hl['p50']} ms  p99 {hl['p99']} ms")
        if "lookup_tier" in row:
            lt = row["lookup_tier"]
            print(f"  lookup tier  encoder p50 {lt['encoder']['p50']} ms  "
                  f"find_skills p50 {lt['find_skills']['p50']} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
