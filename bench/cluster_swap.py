"""Search latency while a sharded index swaps to its next version (``ShardedIndex.next_version``).

A local Ray cluster serves the index on ``--shards`` actors; one thread searches without pause (encoded
skillsbench tasks, k = 5) while the coordinator re-opens every shard's rows as the next version (what
follows a content update). Printed: the swap's duration, the search p50 before it, and the searches
that ran during it (count, p50, max). ``--concurrency`` is the calls a shard actor runs at once
(``skillsight_fast.cluster.index.MAX_CONCURRENCY``): with 1 a search waits behind the shard's open.

    python bench/cluster_swap.py -i /tmp/big-1m --shards 2 --concurrency 1
    python bench/cluster_swap.py -i /tmp/big-1m --shards 2 --concurrency 4
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-i", "--index", required=True)
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--cpus", type=int, default=4, help="CPUs the local Ray cluster advertises")
    args = p.parse_args()

    import ray

    import skillsight_fast.cluster.index as cluster_index
    from skillsight_fast.lab.evaluation.datasets import load_dataset

    tasks = [q.text for q in load_dataset(ROOT / "data" / "skillsbench").queries]
    ray.init(address="local", num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    cluster_index.MAX_CONCURRENCY = args.concurrency
    sharded = cluster_index.ShardedIndex.connect(args.index, args.shards,
                                                 cpus_per_shard=args.cpus / args.shards * 0.95)
    try:
        vectors = sharded.head.encode(tasks)
        for i in range(10):
            sharded.search_vectors(vectors[i : i + 1], tasks[i : i + 1], 5)
        stop = threading.Event()
        lat: list[tuple[float, float]] = []

        def loop() -> None:
            i = 0
            while not stop.is_set():
                j = i % len(tasks)
                t = time.perf_counter()
                sharded.search_vectors(vectors[j : j + 1], tasks[j : j + 1], 5)
                lat.append((t, (time.perf_counter() - t) * 1000))
                i += 1

        th = threading.Thread(target=loop)
        th.start()
        time.sleep(3)
        t0 = time.perf_counter()
        nxt = sharded.next_version(reopen=True)
        t1 = time.perf_counter()
        time.sleep(2)
        stop.set()
        th.join()
        during = [ms for t, ms in lat if t0 - 0.5 <= t <= t1]
        before = [ms for t, ms in lat if t < t0 - 0.5]
        print(json.dumps({"shards": args.shards, "max_concurrency": args.concurrency,
                          "swap_s": round(t1 - t0, 2),
                          "before_p50_ms": round(float(np.median(before)), 1), "during_n": len(during),
                          "during_p50_ms": round(float(np.median(during)), 1) if during else None,
                          "during_max_ms": round(max(during), 1) if during else None}))
        assert all(nxt.reopened)
    finally:
        sharded.close()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
