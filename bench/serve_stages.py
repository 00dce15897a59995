"""Where one served search goes, stage by stage, in process (p50 ms over the 73 skillsbench tasks).

The index is loaded as ``serve`` loads it (``--mmap``, verification deferred) and each task is timed
through the stages a served ``find_skills`` runs, one thread as a server runs one task: the encoder,
the background removal, the evidence tokens (vocabulary lookups), the dense scan (the index's scan),
the lexical side, the fusion, the hits' raw cosines, their ids, their evidence; then
``search_vectors`` as a whole, ``find_skills`` as a whole (filters, collapse of copies, hit records)
and the answer's JSON. ``find_skills − encoder − search_vectors`` is what the use case adds.

    python bench/serve_stages.py -i /tmp/big-1m [-n 73] [--json out.json]

Run it with another checkout on ``PYTHONPATH`` to time that code on the same index (before/after).
"""

# ruff: noqa: B023 - every lambda below is called at once, inside its loop iteration

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("-i", "--index", required=True)
    p.add_argument("-n", type=int, default=73, help="tasks timed (the 73 skillsbench tasks in turn)")
    p.add_argument("--json", help="append the result (one JSON line) to this file")
    args = p.parse_args()
    sys.path.insert(0, str(ROOT / "bench"))
    from serve_latency import tasks

    from skillsight_fast import SkillIndex
    from skillsight_fast.agents.find import find_skills
    from skillsight_fast.engine.index import hit_cosines
    from skillsight_fast.kernels import single_thread

    qs = tasks()
    index = SkillIndex.load(args.index, mmap=True, verify="lazy")
    index.warmup()
    find_skills(index, qs[:2], 5)
    times: dict[str, list[float]] = {}

    def timed(name: str, fn):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        out = fn()
        times.setdefault(name, []).append((time.perf_counter() - t0) * 1e3)
        return out

    load0 = os.getloadavg()
    depth = 2 * 5 + 8  # find_skills' search depth for k = 5 without pins
    for i in range(args.n):
        q = [qs[i % len(qs)]]
        v = timed("encode", lambda: index.encode(q))
        with single_thread():
            qp = timed("remove_background", lambda: index.remove_background(v))
            terms, ptr = timed("evidence_tokens", lambda: index.evidence_tokens(q))
            cand, sd = timed("dense_scan",
                             lambda: index.dense_candidates(qp, max(index.decisions.candidates, depth)))
            sl = timed("lexical", lambda: index.lexical_scores(cand, terms, ptr))
            ids, _, _ = timed("fuse", lambda: index.fuse(cand, sd, sl, depth))
            timed("hit_cosines", lambda: hit_cosines(index.dense.embeddings, v, ids))
            timed("skill_ids",
                  lambda: [[index.skills[j].id if j >= 0 else None for j in row] for row in ids.tolist()])
            timed("evidence", lambda: index._evidence(ids, terms, ptr))
            timed("search_vectors", lambda: index.search_vectors(v, q, depth))
        ans = timed("find_skills", lambda: find_skills(index, q, 5))
        timed("answer_json", lambda: json.dumps(ans[0].to_dict(digits=6)))
    times["find_skills_minus_encode_search"] = list(
        np.asarray(times["find_skills"]) - np.asarray(times["encode"]) - np.asarray(times["search_vectors"]))
    out = {"index": args.index, "scan": index.scan.kind, "n": args.n,
           "code": sys.modules["skillsight_fast"].__file__, "load": [load0, os.getloadavg()],
           "p50_ms": {k: round(float(np.median(v)), 3) for k, v in times.items()}}
    print(json.dumps(out))
    if args.json:
        with open(args.json, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
