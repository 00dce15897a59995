"""Shard folders on a local multi-node Ray cluster: latency, throughput, memory per shard, start-up.

The index is split into ``--shards`` shard folders (skillsight_fast.cluster.layout.split_index); a
local multi-node Ray cluster is started on this machine (ray.cluster_utils.Cluster: a head without
CPUs and one node per shard, each advertising ``--cpus-per-node`` CPUs and a custom resource naming
it); each shard actor is placed on its node and opens only its own folder and the shared part
(ShardedIndex.from_layout). Measured:

* **equal**: ids of the first ``--equal`` tasks (default: all 73) equal to the single index (scores
  within 1e-6);
* **latency**: ``--requests`` searches one at a time (``search_vectors`` on encoded tasks), p50/p99,
  for the single index (mapped, in this process) and the sharded one, ``--repeat`` times (each
  repeat measures both, one after the other: on a shared machine the load changes between them);
* **where the sharded time goes**: the same searches once more, each round trip to the shards timed
  by its method (``hamming_counts``, ``binary_top``: the binary scan's two first rounds; ``approx``:
  int8's; ``score``: the survivors scored; ``rows``: the hits' vectors) and the rest of the search
  on the coordinator (background removal, evidence tokens, merges, fusion), medians per search; and
  the floor of a round trip (``info``, a call that does no work, on every shard at once);
  ``--in-process`` times the same rounds with the shard hosts in this process, called one after
  the other (no Ray, no two shards at once): each method's time there is the shards' own work;
* **throughput**: ``--clients`` threads searching at once for ``--seconds``, searches per second;
* **memory**: per shard actor, RssAnon (its own memory) and RssFile (mapped pages of its folder),
  the bytes of its folder and of the shared part;
* **start**: the split, and from_layout (every shard checks its folder's checksums and opens it);
  then the coordinator's background check of the index folder's checksums (``head_verify_s``),
  waited for before anything is timed, so it does not share the cores with the measurement.

    python bench/build_synthetic.py --size 200000 --scan int8 -o /tmp/idx-200k
    python bench/cluster_shards.py -i /tmp/idx-200k --shards 4 --json results/bench/cluster_shards_200k.json

``--layout`` pointing at shard folders already written (``shards.json`` there) serves them without a
new split (``split_s`` is then null).
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def pct(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {"p50": round(float(np.percentile(a, 50)), 3), "p99": round(float(np.percentile(a, 99)), 3),
            "n": int(a.size)}


def folder_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.iterdir() if p.is_file()) / 2**20, 1)


def rss_mb() -> dict[str, float]:
    """This process's RssAnon and RssFile, in MB."""
    out = {"anon": -1.0, "file": -1.0}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("RssAnon:", "RssFile:")):
                out[line[3:7].lower()] = round(int(line.split()[1]) / 1024, 1)
    return out


def latency(index, vectors, tasks, requests: int) -> list[float]:
    ms = []
    for r in range(requests):
        i = r % len(tasks)
        t = time.perf_counter()
        index.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
        ms.append((time.perf_counter() - t) * 1000)
    return ms


def breakdown(sharded, vectors, tasks, requests: int) -> dict[str, Any]:
    """Median ms per search of each kind of round trip and of the coordinator's own work, and the
    floor of a round trip to every shard (``info``)."""
    spent: dict[str, float] = defaultdict(float)
    own = sharded._call

    def timed(method, per_shard):
        t = time.perf_counter()
        try:
            return own(method, per_shard)
        finally:
            spent[method] += (time.perf_counter() - t) * 1000

    rows: list[dict[str, float]] = []
    sharded._call = timed  # this instance only
    try:
        for r in range(requests):
            i = r % len(tasks)
            spent.clear()
            t = time.perf_counter()
            sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
            total = (time.perf_counter() - t) * 1000
            rows.append({**spent, "round_trips": sum(spent.values()), "total": total,
                         "coordinator": total - sum(spent.values())})
    finally:
        del sharded._call
    floor = []
    for _ in range(max(20, requests // 2)):
        t = time.perf_counter()
        sharded.shard_info()
        floor.append((time.perf_counter() - t) * 1000)
    keys = sorted({k for r in rows for k in r})
    return {"median_ms": {k: round(float(np.median([r.get(k, 0.0) for r in rows])), 3) for k in keys},
            "round_trip_floor_ms": pct(floor), "n": len(rows)}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-i", "--index", required=True)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--layout", help="where the shard folders go (default INDEX.shards)")
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--cpus-per-node", type=float, default=1.0)
    p.add_argument("--equal", type=int, default=0, help="tasks checked equal (default: all)")
    p.add_argument("--repeat", type=int, default=1, help="latency measurements of both")
    p.add_argument("--in-process", action="store_true",
                   help="also time the rounds with the shard hosts in this process, one after the other")
    p.add_argument("--json")
    args = p.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from skillsight_fast.cluster.index import ShardedIndex
    from skillsight_fast.cluster.layout import read_layout, shards_folder, split_index
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    tasks = [q.text for q in load_dataset(ROOT / "data" / "skillsbench").queries]
    single = SkillIndex.load(args.index, mmap=True, verify="lazy")
    vectors = single.encode(tasks)
    layout = Path(args.layout) if args.layout else shards_folder(args.index)
    load_before = list(os.getloadavg())
    if args.layout and (layout / "shards.json").exists():
        plan, split_s = read_layout(layout), None
        if plan["n_skills"] != len(single) or len(plan["shards"]) != args.shards:
            raise SystemExit(f"{layout}: {len(plan['shards'])} shards of {plan['n_skills']} skills, not "
                             f"{args.shards} of {len(single)}")
    else:
        t0 = time.perf_counter()
        plan = split_index(args.index, layout, args.shards)
        split_s = round(time.perf_counter() - t0, 2)
    out: dict[str, Any] = {"index": args.index, "n_skills": len(single), "scan": single.scan.kind,
                           "shards": args.shards, "split_s": split_s,
                           "machine": {"cpus": os.cpu_count(), "load_average": load_before}}
    # the single index, one search at a time, in this process (mapped, warm)
    for i in range(20):
        single.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
    single_runs = [pct(latency(single, vectors, tasks, args.requests))]
    out["single_process_rss_mb"] = rss_mb()  # the single index mapped and warm, in this process

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    names = [f"shard-node-{s}" for s in range(args.shards)]
    for name in names:
        cluster.add_node(num_cpus=args.cpus_per_node, resources={name: 1})
    ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
    try:
        t0 = time.perf_counter()
        sharded = ShardedIndex.from_layout(args.index, layout, cpus_per_shard=args.cpus_per_node * 0.99,
                                           resources=[{n: 1} for n in names])
        out["start_s"] = round(time.perf_counter() - t0, 2)
        sharded.partial_after_s = None  # whole answers only: a slow shard is waited for, never left out
        try:
            t0 = time.perf_counter()
            verification = sharded.head.state.verification
            out["head_verify"] = verification.wait() if verification is not None else None
            out["head_verify_s"] = round(time.perf_counter() - t0, 2)
            n_equal = min(args.equal or len(tasks), len(tasks))
            for i in range(n_equal):  # equal to the single index, then warm
                a = single.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                b = sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                assert a.skill_ids == b.skill_ids, (i, a.skill_ids, b.skill_ids)
                assert np.allclose(a.scores, b.scores, rtol=0, atol=1e-6), i
            out["equal_tasks"] = n_equal
            sharded_runs = [pct(latency(sharded, vectors, tasks, args.requests))]
            for _ in range(args.repeat - 1):
                out.setdefault("load_average_repeats", []).append(list(os.getloadavg()))
                single_runs.append(pct(latency(single, vectors, tasks, args.requests)))
                sharded_runs.append(pct(latency(sharded, vectors, tasks, args.requests)))
            out["single_latency_ms"], out["sharded_latency_ms"] = single_runs[0], sharded_runs[0]
            if args.repeat > 1:
                out["single_latency_runs_ms"], out["sharded_latency_runs_ms"] = single_runs, sharded_runs
            out["p50_ratio"] = [round(b["p50"] / a["p50"], 2) for a, b in zip(single_runs, sharded_runs)]
            out["breakdown"] = breakdown(sharded, vectors, tasks, args.requests)
            done = [0] * args.clients
            stop = time.perf_counter() + args.seconds

            def client(c: int) -> None:
                r = c
                while time.perf_counter() < stop:
                    i = r % len(tasks)
                    sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                    done[c] += 1
                    r += args.clients

            threads = [threading.Thread(target=client, args=(c,)) for c in range(args.clients)]
            t = time.perf_counter()
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            out["throughput_qps"] = round(sum(done) / (time.perf_counter() - t), 2)
            out["clients"] = args.clients
            info = sharded.shard_info()
            out["per_shard"] = [{"rows": s["stop"] - s["start"],
                                 "rss_anon_mb": round(s["rss"]["anon"] / 2**20, 1),
                                 "rss_file_mb": round(s["rss"]["file"] / 2**20, 1),
                                 "folder_mb": folder_mb(layout / e["folder"])}
                                for s, e in zip(info, plan["shards"])]
            out["shared_mb"] = folder_mb(layout / plan["shared"])
            out["index_npy_mb"] = round(sum(p.stat().st_size for p in Path(args.index).iterdir()
                                            if p.suffix == ".npy") / 2**20, 1)
            out["recoveries"] = len(sharded.recoveries)  # shard actors re-opened during the run
            out["coordinator_process_rss_mb"] = rss_mb()  # single index + coordinator, this process
            out["load_average_after"] = list(os.getloadavg())
        finally:
            sharded.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    if args.in_process:  # the shards' own work per round: the same folders, hosts in this process
        local = ShardedIndex.from_layout(args.index, layout, remote=False)
        try:
            verification = local.head.state.verification
            if verification is not None:
                verification.wait()
            for i in range(20):
                local.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
            out["in_process_breakdown"] = breakdown(local, vectors, tasks, args.requests)
            out["in_process_breakdown"].pop("round_trip_floor_ms")
        finally:
            local.close()
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
