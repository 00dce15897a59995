"""Does a Ray build answer every task of a shared dataset as the single-machine build does?

    PYTHONPATH=. nice python bench/ray_same_answers.py --datasets metatool gorilla_hf bfcl \
        --json results/bench/ray_same_answers.json

For each dataset: the whole library built in this process (``SkillIndex.build`` with the real MiniLM,
the configuration ``skillsight index`` gives the dataset's kind) and built on a local Ray cluster
(``indexing.ray.ray_build``, the documents encoded on ``--workers`` actors in chunks of
``--chunk-size``). Every task is asked through ``find_skills`` (k = 10, as the servers and the hook
ask: the abstention rule and the duplicate collapse applied); counted are the tasks whose hit ids
(in order) and abstention agree, with the first few that differ. Also recorded: the query tier, the
cascade and the abstention rule of both builds.
"""

from __future__ import annotations

import argparse
import functools
import json
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.agents.find import find_skills  # noqa: E402
from skillsight_fast.engine.index import SkillIndex  # noqa: E402
from skillsight_fast.indexing.ray import ray_build  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import shipped_config  # noqa: E402
from skillsight_fast.models import load_encoder  # noqa: E402


def compare(name: str, workers: int, chunk_size: int) -> dict[str, Any]:
    ds = load_dataset(ROOT / "data" / name)
    skills, tasks = list(ds.docs), list(ds.query_texts)
    config = shipped_config(ds)
    teacher = load_encoder("all-MiniLM-L6-v2")
    t0 = time.perf_counter()
    whole = SkillIndex.build(skills, teacher, config)
    t1 = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        factory = functools.partial(load_encoder, "all-MiniLM-L6-v2", threads=1)
        rayed = ray_build(iter(skills), factory, config, workers=workers, chunk_size=chunk_size, workdir=work,
                          query_encoder=teacher)
    t2 = time.perf_counter()
    same, differ = 0, []
    for a, b in zip(find_skills(whole, tasks, k=10), find_skills(rayed, tasks, k=10), strict=True):
        if a.abstained == b.abstained and [h.id for h in a.hits] == [h.id for h in b.hits]:
            same += 1
        elif len(differ) < 5:
            differ.append({"task": a.query[:120], "single": [h.id for h in a.hits][:5],
                           "ray": [h.id for h in b.hits][:5], "abstained": [a.abstained, b.abstained]})

    def described(index: SkillIndex) -> dict[str, Any]:
        rule = index.state.abstention or {}
        return {"query_encoder": index.state.config.encoder.query_encoder,
                "cascade": str(index.state.cascade),
                "abstention": {k: rule.get(k) for k in ("source", "threshold", "duplicate_cosine")},
                "continuation": index.decisions.continuation}

    return {"n_skills": len(skills), "n_tasks": len(tasks), "same": same, "differ": differ,
            "single": described(whole), "ray": described(rayed),
            "seconds": {"single_build": round(t1 - t0, 1), "ray_build": round(t2 - t1, 1)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["metatool", "gorilla_hf", "bfcl"])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk-size", type=int, default=256)
    ap.add_argument("--json", default=str(ROOT / "results" / "bench" / "ray_same_answers.json"))
    args = ap.parse_args()
    import ray

    ray.init(address="local", num_cpus=args.workers, include_dashboard=False, log_to_driver=False)
    command = "python bench/ray_same_answers.py --datasets " + " ".join(args.datasets)
    out: dict[str, Any] = {"command": command,
                           "cpu": platform.processor() or platform.machine(), "ray": ray.__version__,
                           "workers": args.workers, "chunk_size": args.chunk_size, "datasets": {}}
    try:
        for name in args.datasets:
            rec = compare(name, args.workers, args.chunk_size)
            out["datasets"][name] = rec
            print(f"{name}: {rec['same']} / {rec['n_tasks']} tasks with the same hits and abstention "
                  f"(single {rec['single']['query_encoder']}, ray {rec['ray']['query_encoder']}; "
                  f"builds {rec['seconds']})", flush=True)
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    finally:
        ray.shutdown()
    return 0 if all(r["same"] == r["n_tasks"] for r in out["datasets"].values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
