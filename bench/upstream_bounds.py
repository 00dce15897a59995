"""What one hostile upstream costs the tool proxy (issue 41, H1/M6/M9): reading time and peak memory.

1. Reading one long line: :class:`skillsight_fast.tools.guard.BoundedLines` (linear, capped at
   8 MiB) against the MCP SDK's own loop (``(buffer + chunk).split("\\n")``, quadratic), on lines
   of 8, 32 and 200 MB fed in 64 KiB chunks (the SDK loop only up to 32 MB).
2. A proxy against ``tests/data/mcp_hostile_server.py endless`` (512 tools of ~8 KB and a new
   ``nextCursor`` on every page) and ``many 1000``: seconds until ready or the first search
   answers, and the child process's peak RSS (each in its own process).

Run: ``python bench/upstream_bounds.py [--json results/bench/upstream_bounds.json]``; record ``uptime``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = ROOT / "tests" / "data" / "mcp_hostile_server.py"
CHUNK = 65536


def read_line(mb: int, reader: str) -> float:
    import anyio

    from skillsight_fast.tools import guard

    head = b'{"jsonrpc": "2.0", "id": 1, "result": {"text": "'
    n = mb * 1_000_000 // CHUNK

    class Stream:
        def __init__(self) -> None:
            self.i = 0

        async def receive(self) -> bytes:
            self.i += 1
            if self.i == 1:
                return head
            if self.i <= n + 1:
                return b"y" * CHUNK
            if self.i == n + 2:
                return b'"}}\n'
            raise anyio.EndOfStream

    async def bounded() -> None:
        async for _ in guard.BoundedLines(Stream()):
            pass

    async def sdk() -> None:  # the SDK's loop, on text chunks
        stream, buffer = Stream(), ""
        while True:
            try:
                chunk = (await stream.receive()).decode()
            except anyio.EndOfStream:
                return
            lines = (buffer + chunk).split("\n")
            buffer = lines.pop()

    t0 = time.perf_counter()
    anyio.run(bounded if reader == "bounded" else sdk)
    return round(time.perf_counter() - t0, 3)


CHILD = r"""
import json, resource, sys, time, anyio
sys.path.insert(0, sys.argv[1] + "/tests/support")
from fakes import HashEncoder
from skillsight_fast.tools.catalog import ServerConfig
from skillsight_fast.tools.proxy import ToolProxy
mode, n = sys.argv[2], sys.argv[3]
proxy = ToolProxy([ServerConfig(name="up", command=sys.executable,
                                args=(sys.argv[1] + "/tests/data/mcp_hostile_server.py", mode, n))],
                  encoder=HashEncoder(), errlog=open("/dev/null", "w"), index_cache=False, abstain=False,
                  start_timeout=120)
async def main():
    t0 = time.perf_counter()
    async with proxy.running():
        out = await proxy.search("alpha beta gamma", 5)
        first = time.perf_counter() - t0
        await proxy.wait_ready()
        ready = time.perf_counter() - t0
        return {"first_search_s": round(first, 2), "ready_s": round(ready, 2),
                "state": proxy.status()[0]["state"],
                "tools": proxy.status()[0]["tools"], "note": proxy.status()[0]["note"],
                "first_search_tools": len(out["tools"]), "indexing": out.get("indexing")}
res = anyio.run(main)
res["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(res))
"""


def proxy_case(mode: str, n: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", CHILD, str(ROOT), mode, str(n)], capture_output=True,
                          text=True, env=env, timeout=900, check=False)
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    out: dict = {"load_before": round(os.getloadavg()[0], 2), "lines": {}, "proxy": {}}
    for mb in (8, 32, 200):
        out["lines"][f"{mb}MB"] = {"bounded_s": read_line(mb, "bounded")}
        if mb <= 32:
            out["lines"][f"{mb}MB"]["sdk_loop_s"] = read_line(mb, "sdk")
        print(mb, out["lines"][f"{mb}MB"], flush=True)
    for mode, n in (("endless", 0), ("many", 1000)):
        out["proxy"][f"{mode} {n}"] = proxy_case(mode, n)
        print(mode, n, out["proxy"][f"{mode} {n}"], flush=True)
    out["load_after"] = round(os.getloadavg()[0], 2)
    out["bench_peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
