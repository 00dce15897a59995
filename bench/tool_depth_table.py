"""The tool-search tables of docs/TOOLS.md, measured as shipped: R@k at k = 3/5/10/20/50, C@10 and
nDCG@10 with paired intervals, and issue 44's criterion.

    PYTHONPATH=. nice python bench/tool_depth_table.py [--metatool-repo PATH/TO/MetaTool]
        # prints Markdown, writes results/bench/tool_depth_table.json

For each tool dataset (bfcl, metatool's fixed 2,000-task subset, gorilla_hf, and with a MetaTool clone
the 497 two-tool tasks of metatool_multi):

- ``shipped``: what ``skillsight index`` builds for a tool catalogue (``tools.catalog.tool_index_config``:
  BM25 over every known task token, the ranking continued past the first 10 hits by RRF of the
  candidates' dense and lexical ranks) searched with the task vectors of the lookup-first cascade
  (``EvalContext(shipped=True)``, what ``skillsight lab eval`` measures);
- ``fused past 10``: the same index and vectors with ``continuation="fused"`` (Eq. 15 to the end:
  what shipped before the continuation);
- the ``skillsight eval`` baselines dense, BM25 and RRF of the two.

Means with percentile bootstrap 95 % intervals; paired differences (2,000 resamples over tasks, seed 0)
of ``shipped`` to the best baseline per metric. The criterion (issue 44): not significantly worse than
the best of dense, BM25 and RRF on R@10, nDCG@10, R@20, R@50 and C@10.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext, shipped_config  # noqa: E402
from skillsight_fast.lab.evaluation.tool_search import (  # noqa: E402
    DEPTH_RULE_METRICS,
    RULE_BASELINES,
    TABLE_METRICS,
    depth_metrics,
    fmt_diff,
    rule_check,
)
from skillsight_fast.metrics import DEPTH, bootstrap_diff, bootstrap_mean  # noqa: E402

sys.path.insert(0, str(ROOT / "experiments"))
from tool_depth_continuation import dataset  # noqa: E402  (the datasets, metatool_multi from a MetaTool clone)

DATASETS = ("bfcl", "metatool", "gorilla_hf")
SHIPPED, FUSED = "shipped", "fused past 10"
COLUMNS = ("R@3", "R@5", "R@10", "R@20", "R@50", "C@10", "nDCG@10")


def paired(a: Any, b: Any) -> dict[str, float]:
    return dict(zip(("diff", "low", "high"), bootstrap_diff(a, b)))


def run(name: str, metatool_repo: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    ds = dataset(name, metatool_repo)
    ctx = EvalContext(dataset=ds)  # shipped=True: the dataset kind's config, the cascade's task vectors
    index = ctx.index(shipped_config(ds))
    vectors = ctx.shipped_vectors(index)
    texts = ds.query_texts
    ranked = {SHIPPED: index.search_vectors(vectors, texts, DEPTH, explain=False).ids,
              FUSED: index.search_vectors(vectors, texts, DEPTH, explain=False, continuation="fused").ids}
    ranked |= {b: METHODS[b](ctx) for b in RULE_BASELINES}
    per = {m: depth_metrics(r, ds.gold) for m, r in ranked.items()}
    baselines = {b: per[b] for b in RULE_BASELINES}
    best = {c: max(RULE_BASELINES, key=lambda b: float(per[b][c].mean())) for c in TABLE_METRICS}
    return {
        "n_tools": len(ds.docs), "n_tasks": len(ds.queries),
        "multi_tool_tasks": int(sum(len(g) > 1 for g in ds.gold)),
        "index": {"continuation": index.decisions.continuation, "candidates": index.decisions.candidates,
                  "lexical_evidence": index.decisions.lexical_evidence,
                  "query_encoder": index.config.encoder.query_encoder},
        "means": {m: {c: [float(v[c].mean()), *bootstrap_mean(v[c])] for c in TABLE_METRICS}
                  for m, v in per.items()},
        "best_baseline": best,
        "paired": {m: {c: paired(per[m][c], per[best[c]][c]) for c in TABLE_METRICS}
                   for m in (SHIPPED, FUSED)},
        "shipped_vs_fused": {c: paired(per[SHIPPED][c], per[FUSED][c]) for c in TABLE_METRICS},
        "rule": {m: rule_check(per[m], baselines, DEPTH_RULE_METRICS) for m in (SHIPPED, FUSED)},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def markdown(out: dict[str, Any]) -> str:
    lines: list[str] = []
    for name, rec in out["datasets"].items():
        lines += [(f"\n**{name}** ({rec['n_tools']:,} tools, {rec['n_tasks']:,} tasks, "
                   f"{rec['multi_tool_tasks']} needing several tools)\n"),
                  "| method | " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * len(COLUMNS)]
        for m, v in rec["means"].items():
            lines.append(f"| {m} | " + " | ".join(
                f"{100 * v[c][0]:.1f} [{100 * v[c][1]:.1f}, {100 * v[c][2]:.1f}]" for c in COLUMNS) + " |")
        for m, p in rec["paired"].items():
            lines.append(f"| Δ {m} − best baseline | " + " | ".join(
                f"{fmt_diff(p[c])} ({rec['best_baseline'][c]})" for c in COLUMNS) + " |")
        lines.append(f"| Δ {SHIPPED} − {FUSED} | " + " | ".join(fmt_diff(rec["shipped_vs_fused"][c])
                                                                 for c in COLUMNS) + " |")
        verdict = {m: "passes" if r["pass"] else "FAILS (" + ", ".join(
            f"{c} {fmt_diff(r[c])} vs {r[c]['best']}" for c in DEPTH_RULE_METRICS if not r[c]["pass"]) + ")"
            for m, r in rec["rule"].items()}
        lines.append(f"\nCriterion ({', '.join(DEPTH_RULE_METRICS)} not significantly below the best of "
                     f"dense, BM25, RRF): {SHIPPED} {verdict[SHIPPED]}; {FUSED} {verdict[FUSED]}.")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metatool-repo", help="a clone of HowieHwong/MetaTool (adds metatool_multi)")
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated (default: %(default)s)")
    ap.add_argument("--json", default=str(ROOT / "results" / "bench" / "tool_depth_table.json"))
    args = ap.parse_args()
    names = [n for n in args.datasets.split(",") if n]
    if args.metatool_repo and "metatool_multi" not in names:
        names.append("metatool_multi")
    import numpy
    import onnxruntime

    command = "python bench/tool_depth_table.py" + (" --metatool-repo MetaTool" if args.metatool_repo else "")
    out: dict[str, Any] = {"command": command, "cpu": platform.processor() or platform.machine(),
        "versions": {"numpy": numpy.__version__, "onnxruntime": onnxruntime.__version__,
                     "python": platform.python_version()}, "datasets": {}}
    for name in names:
        out["datasets"][name] = run(name, args.metatool_repo)
        print(markdown({"datasets": {name: out["datasets"][name]}}), flush=True)
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(markdown(out))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
