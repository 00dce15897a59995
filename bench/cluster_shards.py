"""Shard folders on a local multi-node Ray cluster: latency, throughput, memory per shard, start-up.

The index is split into ``--shards`` shard folders (skillsight_fast.cluster.layout.split_index); a
local multi-node Ray cluster is started on this machine (ray.cluster_utils.Cluster: a head without
CPUs and one node per shard, each advertising ``--cpus-per-node`` CPUs and a custom resource naming
it); each shard actor is placed on its node and opens only its own folder and the shared part
(ShardedIndex.from_layout). Measured:

* **equal**: ids of the first 20 tasks equal to the single index (scores within 1e-6);
* **latency**: ``--requests`` searches one at a time (``search_vectors`` on encoded tasks), p50/p99,
  for the single index (mapped, in this process) and the sharded one;
* **throughput**: ``--clients`` threads searching at once for ``--seconds``, searches per second;
* **memory**: per shard actor, RssAnon (its own memory) and RssFile (mapped pages of its folder),
  the bytes of its folder and of the shared part;
* **start**: the split, and from_layout (every shard checks its folder's checksums and opens it).

    python bench/build_synthetic.py --size 200000 --scan int8 -o /tmp/idx-200k
    python bench/cluster_shards.py -i /tmp/idx-200k --shards 4 --json results/bench/cluster_shards_200k.json
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import time
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-i", "--index", required=True)
    p.add_argument("--shards", type=int, default=4)
    p.add_argument("--layout", help="where the shard folders go (default INDEX.shards)")
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=15.0)
    p.add_argument("--cpus-per-node", type=float, default=1.0)
    p.add_argument("--json")
    args = p.parse_args()

    import ray
    from ray.cluster_utils import Cluster

    from skillsight_fast.cluster.index import ShardedIndex
    from skillsight_fast.cluster.layout import shards_folder, split_index
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    tasks = [q.text for q in load_dataset(ROOT / "data" / "skillsbench").queries]
    single = SkillIndex.load(args.index, mmap=True, verify="lazy")
    vectors = single.encode(tasks)
    layout = Path(args.layout) if args.layout else shards_folder(args.index)
    t0 = time.perf_counter()
    plan = split_index(args.index, layout, args.shards)
    split_s = time.perf_counter() - t0
    out: dict[str, Any] = {"index": args.index, "n_skills": len(single), "scan": single.scan.kind,
                           "shards": args.shards, "split_s": round(split_s, 2),
                           "machine": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg())}}
    # the single index, one search at a time, in this process (mapped, warm)
    for i in range(20):
        single.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
    ms = []
    for r in range(args.requests):
        i = r % len(tasks)
        t = time.perf_counter()
        single.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
        ms.append((time.perf_counter() - t) * 1000)
    out["single_latency_ms"] = pct(ms)

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
        try:
            for i in range(20):  # equal to the single index, then warm
                a = single.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                b = sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                assert a.skill_ids == b.skill_ids, (i, a.skill_ids, b.skill_ids)
                assert np.allclose(a.scores, b.scores, rtol=0, atol=1e-6), i
            out["equal_first_20"] = True
            ms = []
            for r in range(args.requests):
                i = r % len(tasks)
                t = time.perf_counter()
                sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                ms.append((time.perf_counter() - t) * 1000)
            out["sharded_latency_ms"] = pct(ms)
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
            out["load_average_after"] = list(os.getloadavg())
        finally:
            sharded.close()
    finally:
        ray.shutdown()
        cluster.shutdown()
    print(json.dumps(out, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
