"""Sharded search on Ray: latency, throughput and memory with 1, 2 and 4 shards of one index.

A local Ray cluster is started on this machine; for each shard count the index is served by that
many Ray actors (skillsight_fast.cluster, int8 or exact as the index was built), and

* **latency**: ``--requests`` searches one at a time (``search_vectors`` on already encoded tasks,
  evidence included: the fan-out, the shards' scans and scoring, the merge and the fusion), p50/p99;
* **throughput**: ``--clients`` threads searching at once for ``--seconds``, searches per second;
* **parts**: a Ray round trip to one shard (a call that does nothing) and one shard's first round (the
  int8 scan of its rows, or its exact top C scored), round trip included, p50/p99: the per-shard rate
  the 10M/100M plan of docs/LARGE.md is derived from;
* **start**: the coordinator's load plus every shard opening its rows, what an update's swap to the
  next version also costs (``ShardedIndex.next_version`` re-opens each shard);
* **update**: ``next_version`` on the same folder, every shard kept, then every shard re-opened;
* **memory**: each shard actor's resident set after the runs (``/proc/<pid>/status``: RssAnon, its own
  memory, and RssFile, mapped index pages shared with the page cache) and the bytes of its arrays.

Equality with the single index is checked on the first 20 tasks before timing (ids and scores).

    python bench/cluster_scaling.py -i /tmp/idx-300k --shards 1 2 4 --json results/bench/cluster_scaling.json
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-i", "--index", required=True)
    p.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    p.add_argument("--requests", type=int, default=100)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--cpus", type=int, default=4, help="CPUs the local Ray cluster advertises")
    p.add_argument("--json")
    args = p.parse_args()

    import ray

    from skillsight_fast.cluster.index import ShardedIndex
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    tasks = [q.text for q in load_dataset(ROOT / "data" / "skillsbench").queries]
    single = SkillIndex.load(args.index, mmap=True, verify="lazy")
    vectors = single.encode(tasks)
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    out: dict[str, Any] = {"index": args.index, "n_skills": len(single), "scan": single.scan.kind,
                           "machine": {"cpus": os.cpu_count(), "load_average": list(os.getloadavg())},
                           "runs": []}
    try:
        for shards in args.shards:
            t0 = time.perf_counter()
            sharded = ShardedIndex.connect(args.index, shards,
                                           cpus_per_shard=args.cpus / max(shards, 1) * 0.99)
            start_s = time.perf_counter() - t0
            try:
                for i in range(20):  # equal to the single index, then warm
                    a = single.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                    b = sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                    assert a.skill_ids == b.skill_ids and np.array_equal(a.scores, b.scores), (i, a.skill_ids,
                                                                                           b.skill_ids)
                ms = []
                for r in range(args.requests):
                    i = r % len(tasks)
                    t = time.perf_counter()
                    sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
                    ms.append((time.perf_counter() - t) * 1000)
                # the parts of a search: a Ray round trip to a shard (a call that does nothing), and one
                # shard's first round (int8: its kk best rows; exact: its C best, scored), round trip included
                q_perp = single.remove_background(vectors[:1])[0]
                depth = single.decisions.candidates
                if single.scan.kind == "int8":
                    first = ("approx", (q_perp, single.scan.oversample * depth))
                else:
                    terms = (np.zeros(0, np.int32), np.zeros(0, np.int32))
                    first = ("exact_top", (q_perp, vectors[0], depth, terms, "bm25"))
                calls = {"roundtrip": ("__len__", ()), "shard_first_round": first}
                parts: dict[str, list[float]] = {name: [] for name in calls}
                for _ in range(max(20, args.requests // 2)):
                    for name, (method, call_args) in calls.items():
                        t = time.perf_counter()
                        sharded._call(method, [(call_args, 0)])
                        parts[name].append((time.perf_counter() - t) * 1000)
                done = [0] * args.clients
                stop = time.perf_counter() + args.seconds

                def client(c: int, stop: float = stop, sharded: Any = sharded,
                           done: list[int] = done) -> None:
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
                qps = sum(done) / (time.perf_counter() - t)
                # what an update's swap costs (ShardedIndex.next_version on the same folder): the
                # coordinator's load and the comparison when every shard keeps its rows, and with every
                # shard re-opening its rows (what follows a content change: the background basis moves)
                t = time.perf_counter()
                kept = sharded.next_version()
                keep_s = time.perf_counter() - t
                t = time.perf_counter()
                sharded = kept.next_version(reopen=True)
                reopen_s = time.perf_counter() - t
                assert not any(kept.reopened) and all(sharded.reopened)
                a = single.search_vectors(vectors[:5], tasks[:5], 5)
                assert a.skill_ids == sharded.search_vectors(vectors[:5], tasks[:5], 5).skill_ids
                info = sharded.shard_info()
                run = {"shards": shards, "start_s": round(start_s, 2), "latency_ms": pct(ms),
                       "update_keep_s": round(keep_s, 2), "update_reopen_s": round(reopen_s, 2),
                       "roundtrip_ms": pct(parts["roundtrip"]),
                       "shard_first_round_ms": pct(parts["shard_first_round"]),
                       "rows_per_shard": int(np.ceil(len(single) / shards)),
                       "throughput_qps": round(qps, 2), "clients": args.clients,
                       "shard_rss_anon_mb": [round(s["rss"]["anon"] / 2**20, 1) for s in info],
                       "shard_rss_file_mb": [round(s["rss"]["file"] / 2**20, 1) for s in info],
                       "shard_array_mb": [round(s["array_bytes"] / 2**20, 1) for s in info],
                       "load_average": list(os.getloadavg())}
                out["runs"].append(run)
                print(json.dumps(run), flush=True)
            finally:
                sharded.close()
    finally:
        ray.shutdown()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
