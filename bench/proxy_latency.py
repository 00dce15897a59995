"""Added latency of the tool-search proxy, measured with the MCP SDK's own stdio client.

    python bench/proxy_latency.py                    # 20 warm-up + 200 timed requests of each kind
    python bench/proxy_latency.py --runs 500 --json  # writes results/bench/proxy_latency.json too

Starts the real ``mcp-server-time``, ``mcp-server-git`` and ``mcp-server-fetch`` directly and
``skillsight serve --mcp --proxy`` in front of the same three, then times warm round trips
(client send -> result parsed) and reports medians and 90th percentiles in milliseconds:

* ``direct_list_tools_git``: ``tools/list`` of mcp-server-git (12 tools), the reference a host
  pays per listing today; ``proxy_list_tools``: ``tools/list`` of the proxy (2 tools).
* ``proxy_search_tools``: ``search_tools(task, k=5)`` through the proxy, tasks cycled from a fixed
  list of 20 (each call encodes its task: nothing is cached);
  ``inprocess_find_skills``: ``find_skills`` on an index of the same 15 tools in this process
  (encoder + search + hit records, no JSON-RPC, no thread hop), i.e. what of the round trip is
  search.
* ``direct_call_time`` / ``proxy_call_time``: ``get_current_time`` called on mcp-server-time
  directly and through ``call_tool``; their difference is the added latency of a forwarded call.
* ``proxy_start_to_first_search``: from spawning the proxy to its first ``search_tools`` answer
  (servers started, model loaded, index built), one cold-ish start per run of this script, with
  an empty index cache; ``proxy_restart_to_first_search``: the same for a second proxy process
  started after the first ended, whose index cache holds the index of the same tool lists
  (``--starts N`` repeats the restart N times; ``--start-only`` skips the latency loops).

CPU model, core count, load average and package versions are recorded with the numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import anyio

from skillsight_fast.lab.benchmark.runner import cpu_name

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
TASKS = [
    "what time is it in Tokyo", "convert 3pm New York time to London time", "show the working tree status",
    "show the last ten commits", "stage the changed files", "commit the staged changes with a message",
    "create a new branch called feature", "switch to the main branch", "show the diff of unstaged changes",
    "show what changed in a given commit", "unstage all files", "download the web page at a URL",
    "read the content of a website as markdown", "what day of the week is it in Sydney",
    "compare the staged changes with HEAD", "current time in UTC", "list the branches of the repository",
    "fetch the documentation page and summarise it", "undo the staging of one file",
    "what is the time difference between Paris and Los Angeles",
]


def _stats(times: list[float]) -> dict[str, float]:
    ms = sorted(t * 1000 for t in times)
    return {"median_ms": round(statistics.median(ms), 3), "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 3),
            "n": len(ms)}


async def _timed(fn, runs: int, warm: int) -> list[float]:
    for i in range(warm):
        await fn(i)
    out = []
    for i in range(runs):
        t0 = time.perf_counter()
        await fn(i)
        out.append(time.perf_counter() - t0)
    return out


async def first_search(cfg: Path, cache: Path, errlog) -> float:
    """Seconds from spawning ``serve --mcp --proxy`` to its first ``search_tools`` answer."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    cmd = StdioServerParameters(
        command=sys.executable, env={"PYTHONPATH": str(ROOT)},
        args=["-m", "skillsight_fast.cli", "-c", f"index-cache={cache}", "serve", "--mcp", "--proxy",
              str(cfg), "-q"])
    t0 = time.perf_counter()
    async with stdio_client(cmd, errlog=errlog) as (r, w), ClientSession(r, w) as px:
        await px.initialize()
        first = await px.call_tool("search_tools", {"task": TASKS[0]})
        took = time.perf_counter() - t0
        assert not first.is_error, first
    return took


async def measure(runs: int, warm: int, starts: int = 3, start_only: bool = False) -> dict:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    from skillsight_fast.tools.catalog import ServerConfig
    from skillsight_fast.tools.proxy import ToolProxy

    servers = {n: str(BIN / f"mcp-server-{n}") for n in ("time", "git", "fetch")}
    args = {"time": ["--local-timezone", "UTC"], "git": [], "fetch": []}
    for exe in servers.values():
        if not Path(exe).exists():
            raise SystemExit(f"{exe} is missing: pip install 'skillsight-fast[mcp-servers]'")
    out: dict = {}
    errlog = open(os.devnull, "w")  # noqa: ASYNC230, SIM115 - /dev/null for the servers' stderr, for the whole run
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "servers.json"
        block = {n: {"command": c, "args": args[n]} for n, c in servers.items()}
        cfg.write_text(json.dumps({"mcpServers": block}))

        async with (stdio_client(StdioServerParameters(command=servers["git"]), errlog=errlog) as (r, w),
                    ClientSession(r, w) as git):
            await git.initialize()
            out["direct_list_tools_git"] = _stats(await _timed(lambda i: git.list_tools(), runs, warm))
        async with stdio_client(StdioServerParameters(command=servers["time"], args=args["time"]),
                                errlog=errlog) as (r, w), ClientSession(r, w) as tm:
            await tm.initialize()
            out["direct_call_time"] = _stats(await _timed(
                lambda i: tm.call_tool("get_current_time", {"timezone": "Asia/Tokyo"}), runs, warm))

        cache = Path(tmp) / "index-cache"
        out["proxy_start_to_first_search"] = {"s": round(await first_search(cfg, cache, errlog), 3)}
        restarts = [await first_search(cfg, cache, errlog) for _ in range(starts)]
        out["proxy_restart_to_first_search"] = {"s": [round(t, 3) for t in restarts],
                                                "median_s": round(statistics.median(restarts), 3)}
        if start_only:
            return out
        proxy_cmd = StdioServerParameters(
            command=sys.executable, env={"PYTHONPATH": str(ROOT)},
            args=["-m", "skillsight_fast.cli", "-c", f"index-cache={cache}", "serve", "--mcp", "--proxy",
                  str(cfg), "-q"])
        async with stdio_client(proxy_cmd, errlog=errlog) as (r, w), ClientSession(r, w) as px:
            await px.initialize()
            first = await px.call_tool("search_tools", {"task": TASKS[0]})
            assert not first.is_error, first
            out["proxy_list_tools"] = _stats(await _timed(lambda i: px.list_tools(), runs, warm))

            async def search(i: int) -> None:
                res = await px.call_tool("search_tools", {"task": TASKS[i % len(TASKS)], "k": 5})
                assert not res.is_error

            out["proxy_search_tools"] = _stats(await _timed(search, runs, warm))

            async def call(i: int) -> None:
                res = await px.call_tool("call_tool", {"name": "time/get_current_time",
                                                       "arguments": {"timezone": "Asia/Tokyo"}})
                assert not res.is_error

            out["proxy_call_time"] = _stats(await _timed(call, runs, warm))

        proxy = ToolProxy([ServerConfig(name=n, command=c, args=tuple(args[n])) for n, c in servers.items()],
                          errlog=errlog)
        async with proxy.running():
            await proxy.wait_ready()
            from skillsight_fast.agents.find import find_skills

            index = proxy.ranking.index

            async def find(i: int) -> None:  # in this (event-loop) thread, as a one-shot search would
                find_skills(index, [TASKS[i % len(TASKS)]], 5)

            out["inprocess_find_skills"] = _stats(await _timed(find, runs, warm))
            out["n_tools"] = sum(s["tools"] for s in proxy.status())
    out["added_per_forwarded_call_ms"] = round(out["proxy_call_time"]["median_ms"]
                                               - out["direct_call_time"]["median_ms"], 3)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warm", type=int, default=20)
    ap.add_argument("--json", action="store_true",
                    help="print JSON and write results/bench/proxy_latency.json")
    ap.add_argument("--starts", type=int, default=3, help="restarts timed with a filled index cache")
    ap.add_argument("--start-only", action="store_true", help="time the starts only (no latency loops)")
    args = ap.parse_args()
    load_before = os.getloadavg()[0]
    out = anyio.run(measure, args.runs, args.warm, args.starts, args.start_only)
    pkgs = ("mcp", "mcp-server-time", "mcp-server-git", "mcp-server-fetch", "onnxruntime", "numpy", "numba",
            "skillsight-fast")
    out |= {"cpu": cpu_name(), "cores": os.cpu_count(), "load_before": round(load_before, 2),
            "load_after": round(os.getloadavg()[0], 2), "python": platform.python_version(),
            "versions": {p: version(p) for p in pkgs}, "runs": args.runs, "warm": args.warm}
    if args.start_only:
        print(json.dumps({k: out[k] for k in ("proxy_start_to_first_search", "proxy_restart_to_first_search",
                                              "load_before", "load_after")}))
        return 0
    if args.json:
        (ROOT / "results" / "bench").mkdir(parents=True, exist_ok=True)
        (ROOT / "results" / "bench" / "proxy_latency.json").write_text(json.dumps(out, indent=1) + "\n")
        print(json.dumps(out))
    else:
        for key, val in out.items():
            if isinstance(val, dict) and "median_ms" in val:
                print(f"{key:<28} median {val['median_ms']:8.2f} ms   p90 {val['p90_ms']:8.2f} ms")
        print(f"start to first search {out['proxy_start_to_first_search']['s']} s; added per forwarded call "
              f"{out['added_per_forwarded_call_ms']} ms; {out['n_tools']} tools; {out['cpu']}, "
              f"{out['cores']} cores, load {out['load_before']} -> {out['load_after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
