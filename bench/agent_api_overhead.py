"""What the Claude and OpenAI tool-search adapters add to the engine's search, and whether they
return exactly its hits.

    python bench/agent_api_overhead.py                  # 500 bfcl tools, 200 tasks, overhead
    python bench/agent_api_overhead.py --exact --json   # + every bfcl and metatool task, exact
                                                        #   equality; writes
                                                        #   results/bench/agent_api_overhead.json

Overhead (500 bfcl function tools, one index shared by both adapters, the bundled model):

* ``engine_ms``: ``find_skills`` on the adapter's index with the adapter's settings (the index's
  abstention cut per hit, no collapse), the task as the adapter searches it;
* ``claude_answer_ms`` / ``openai_answer_ms``: the adapter answering the model's search call
  (``tool_use`` -> ``tool_result`` / ``tool_search_call`` -> ``tool_search_output``), timed
  interleaved with the engine call on the same task; ``*_overhead_ms`` is the median of the paired
  differences (adapter - engine), ``*_own_ms`` the adapter's own work alone (the same answer with
  the engine call replaced by its stored result: query reading, hit -> block translation);
* ``tools_unchanged_ms`` / ``rebuilds``: ``tools(...)`` given the same 500 tools again (a new list
  of equal dicts, as a new request builds them): the catalogue key is computed, no index is built.

``--exact``: every task of bfcl (its whole corpus as tools, 1,427 distinct API-safe names) and
metatool (199 plugins): the names each adapter returns equal the top hits of ``index.search`` that
reach the index's threshold, computed without the adapter. CPU, load and versions are recorded.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import statistics
import sys
import time
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"


def catalogue(name: str, n_tasks: int | None, n_tools: int | None) -> tuple[list[dict], list[str]]:
    """(Claude ToolParam dicts, tasks): gold tools of the tasks first, then the rest of the corpus."""
    def read(p: Path) -> list[dict]:
        with gzip.open(p, "rt", encoding="utf-8") as fh:
            return [json.loads(x) for x in fh]

    docs = read(DATA / name / "corpus.jsonl.gz")
    queries = read(DATA / name / "queries.jsonl.gz")[:n_tasks]
    gold = {g for q in queries for g in q["gold"]}
    tools, seen = [], set()
    for d in [d for d in docs if d["id"] in gold] + [d for d in docs if d["id"] not in gold]:
        api = re.sub(r"[^a-zA-Z0-9_-]", "_", d["name"])[:64]
        if api in seen:
            continue
        seen.add(api)
        schema: dict = {"type": "object", "properties": {}}
        if d.get("body", "").startswith("{"):
            schema = {**(json.loads(d["body"]).get("parameters") or {}), "type": "object"}
        tools.append({"name": api, "description": d["description"], "input_schema": schema})
        if n_tools and len(tools) == n_tools:
            break
    return tools, [q["text"] for q in queries]


def functions(tools: list[dict]) -> list[dict]:
    return [{"type": "function", "name": t["name"], "description": t["description"],
             "parameters": t["input_schema"], "strict": False} for t in tools]


def reference(index, task: str, k: int) -> list[str]:
    """Top ``k`` of ``index.search`` at or above the index's threshold, flagged rows left out."""
    from skillsight_fast.engine.abstention import Abstention

    rule = Abstention.of_rule(index.state.abstention)
    flags = list(index.state.flags or [])
    result = index.search([task], min(len(index), 2 * k + 8))
    out = []
    for j, score, cos in zip(result.ids[0], result.scores[0], result.cosine[0]):
        if j < 0 or (j < len(flags) and flags[j]):
            continue
        value = cos if rule is None or rule.signal == "cosine" else score
        if rule is None or value >= rule.threshold:
            out.append(index.ids[j].split("/", 1)[1])
        if len(out) == k:
            break
    return out


def adapters(encoder, tools, k):
    from skillsight_fast.integrations.agent_apis.catalog import ToolCatalog
    from skillsight_fast.integrations.agent_apis.claude_api import ClaudeToolSearch
    from skillsight_fast.integrations.agent_apis.openai_api import OpenAIToolSearch

    catalog = ToolCatalog(k=k, encoder=encoder)
    claude, openai = ClaudeToolSearch(catalog=catalog), OpenAIToolSearch(catalog=catalog)
    claude.tools(tools)
    openai.tools(functions(tools))
    return claude, openai


def exact(name: str, encoder, k: int, limit: int | None) -> dict:
    tools, tasks = catalogue(name, limit, None)
    t0 = time.perf_counter()
    claude, openai = adapters(encoder, tools, k)
    build_s = time.perf_counter() - t0
    index = claude.toolset.index
    same = answered = 0
    for task in tasks:
        want = reference(index, task, k)
        got_c = [b["tool_name"] for b in claude.answer({"id": "t", "input": {"query": task}})["content"]
                 if b["type"] == "tool_reference"]
        got_o = [t["name"] for t in openai.answer({"call_id": "c", "arguments": {"query": task}})["tools"]]
        same += got_c == want and got_o == want
        answered += bool(want)
    return {"dataset": name, "tools": len(tools), "tasks": len(tasks), "identical": same,
            "answered": answered, "build_s": round(build_s, 1)}


def overhead(encoder, k: int, n_tasks: int, n_tools: int, reps: int) -> dict:
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.integrations.agent_apis.catalog import query_text

    tools, tasks = catalogue("bfcl", n_tasks, n_tools)
    claude, openai = adapters(encoder, tools, k)
    toolset, catalog = claude.toolset, claude.catalog
    index = toolset.index

    def engine(task):
        return find_skills(index, [query_text(task)], k, abstention=catalog.abstention, collapse=False,
                           cut="hit")

    for task in tasks[:20]:  # warm: encoder, kernels, caches
        engine(task)
        claude.answer({"id": "t", "input": {"query": task}})
    times: dict[str, list[float]] = {n: [] for n in ("engine", "claude", "openai")}
    diffs: dict[str, list[float]] = {"claude": [], "openai": []}
    for _ in range(reps):
        for task in tasks:
            t0 = time.perf_counter()
            engine(task)
            t1 = time.perf_counter()
            claude.answer({"id": "t", "input": {"query": task}})
            t2 = time.perf_counter()
            openai.answer({"call_id": "c", "arguments": {"query": task}})
            t3 = time.perf_counter()
            times["engine"].append(t1 - t0)
            times["claude"].append(t2 - t1)
            times["openai"].append(t3 - t2)
            diffs["claude"].append((t2 - t1) - (t1 - t0))
            diffs["openai"].append((t3 - t2) - (t1 - t0))
    # the adapters' own work: the same answers with the engine call replaced by its stored result
    stored = {(id(a.toolset), task): a.toolset.search(task) for a in (claude, openai) for task in tasks}
    own: dict[str, list[float]] = {"claude": [], "openai": []}
    real = type(catalog).search_in
    type(catalog).search_in = lambda self, tools, query: stored[id(tools), query]  # type: ignore[method-assign]
    try:
        for _ in range(reps):
            for task in tasks:
                t0 = time.perf_counter()
                claude.answer({"id": "t", "input": {"query": task}})
                t1 = time.perf_counter()
                openai.answer({"call_id": "c", "arguments": {"query": task}})
                t2 = time.perf_counter()
                own["claude"].append(t1 - t0)
                own["openai"].append(t2 - t1)
    finally:
        type(catalog).search_in = real  # type: ignore[method-assign]
    builds = catalog.builds
    again = []
    for _ in range(5):
        fresh = [dict(t) for t in tools]
        t0 = time.perf_counter()
        claude.tools(fresh)
        again.append(time.perf_counter() - t0)
    def ms(xs):
        return round(1000 * statistics.median(xs), 3)
    return {"tools": len(tools), "tasks": len(tasks), "reps": reps, "k": k,
            "engine_ms": ms(times["engine"]), "claude_answer_ms": ms(times["claude"]),
            "openai_answer_ms": ms(times["openai"]), "claude_overhead_ms": ms(diffs["claude"]),
            "openai_overhead_ms": ms(diffs["openai"]), "claude_own_ms": ms(own["claude"]),
            "openai_own_ms": ms(own["openai"]), "tools_unchanged_ms": ms(again),
            "rebuilds": catalog.builds - builds}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=200)
    p.add_argument("--tools", type=int, default=500)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("-k", type=int, default=5)
    p.add_argument("--exact", action="store_true", help="also every bfcl and metatool task: exact equality")
    p.add_argument("--exact-limit", type=int, default=None, help="tasks per dataset in --exact (default all)")
    p.add_argument("--json", action="store_true", help="write results/bench/agent_api_overhead.json")
    args = p.parse_args(argv)
    from skillsight_fast.lab.benchmark.runner import cpu_name
    from skillsight_fast.models import load_encoder

    encoder = load_encoder("all-MiniLM-L6-v2")
    out: dict = {"machine": {"cpu": cpu_name(), "cores": os.cpu_count(), "load_before": os.getloadavg(),
                             "python": platform.python_version(),
                             "versions": {m: version(m)
                                          for m in ("anthropic", "openai", "numpy", "onnxruntime")}}}
    out["overhead"] = overhead(encoder, args.k, args.tasks, args.tools, args.reps)
    print(json.dumps(out["overhead"], indent=1))
    if args.exact:
        out["exact"] = [exact(name, encoder, args.k, args.exact_limit) for name in ("bfcl", "metatool")]
        print(json.dumps(out["exact"], indent=1))
    out["machine"]["load_after"] = os.getloadavg()
    if args.json:
        (ROOT / "results" / "agent_api_overhead.json").write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
