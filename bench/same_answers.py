"""Top-10 ids of the default index on every shared dataset, to check that a change keeps the answers.

    python bench/same_answers.py --out results/bench/same_answers_before.json
    python bench/same_answers.py --out /tmp/after.json --compare results/bench/same_answers_before.json

Builds ``SkillIndex.build(dataset.docs)`` with the default config (what ``skillsight index`` ships)
and searches every task of each dataset (metatool: its fixed 2,000-task subset). ``--compare``
prints, per dataset, how many tasks have identical top-10 ids and exits 1 if any differ.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from skillsight_fast import SkillIndex
from skillsight_fast.lab.evaluation.datasets import load_dataset

DATASETS = ("skillsbench", "sra_theoremqa", "bfcl", "metatool", "gorilla_hf")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1] / "data"))
    ap.add_argument("--datasets", nargs="*", default=list(DATASETS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare")
    ap.add_argument("--limit", type=int, default=None, help="first N tasks of each dataset")
    args = ap.parse_args(argv)
    out: dict[str, dict[str, list[str]]] = {}
    for name in args.datasets:
        t0 = time.perf_counter()
        ds = load_dataset(Path(args.data) / name, limit=args.limit)
        index = SkillIndex.build(ds.docs)
        res = index.search(ds.query_texts, k=10)
        out[name] = {q.id: [s or "" for s in row] for q, row in zip(ds.queries, res.skill_ids)}
        print(f"{name}: {len(ds.docs)} docs, {len(ds.queries)} tasks, {time.perf_counter() - t0:.0f} s",
              file=sys.stderr, flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=0, sort_keys=True))
    if not args.compare:
        return 0
    before = json.loads(Path(args.compare).read_text())
    differ = 0
    for name, rows in out.items():
        old = before.get(name, {})
        same = sum(old.get(q) == ids for q, ids in rows.items())
        differ += len(rows) - same
        print(f"{name}: {same}/{len(rows)} tasks with identical top-10 ids")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
