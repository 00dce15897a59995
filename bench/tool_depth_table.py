"""The tool-search table of docs/TOOLS.md: R@k and Completeness@k at depth, with paired intervals.

    PYTHONPATH=. python bench/tool_depth_table.py   # prints Markdown, writes
                                                    # results/bench/tool_depth_table.json

For each tool dataset (bfcl, metatool's fixed 2,000-task subset, gorilla_hf): the index of a tool
catalogue (``tools.catalog.tool_index_config()``: the default with the BM25 side over every task
token), the library default (``IndexConfig()``: BM25 over the evidence tokens Q'), and the
``skillsight eval`` baselines BM25, dense and RRF. Metrics R@5/10/20/50, Completeness@5/10/20
(every gold tool in the top k) and nDCG@10, as means with percentile bootstrap 95 % intervals, and
the tool catalogue's paired differences to each other method (2,000 resamples, seed 0). Embeddings
come from the shared evaluation cache (all-MiniLM-L6-v2; tasks int8 as the default index does).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.config import IndexConfig  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext  # noqa: E402
from skillsight_fast.lab.evaluation.tool_search import (  # noqa: E402
    DEPTH_METRICS,
    RULE_BASELINES,
    RULE_METRICS,
    depth_metrics,
    rule_check,
)
from skillsight_fast.metrics import bootstrap_diff, bootstrap_mean  # noqa: E402
from skillsight_fast.tools.catalog import tool_index_config  # noqa: E402

DATASETS = ("bfcl", "metatool", "gorilla_hf")
TOOL, LIBRARY = "tool catalogue", "library default"


def main() -> int:
    out: dict = {}
    lines: list[str] = []
    for name in DATASETS:
        ds = load_dataset(ROOT / "data" / name)
        ctx = EvalContext(dataset=ds)
        per = {
            TOOL: depth_metrics(ctx.search(ctx.index(tool_index_config())), ds.gold),
            LIBRARY: depth_metrics(ctx.search(ctx.index(IndexConfig())), ds.gold),
        }
        per |= {b: depth_metrics(METHODS[b](ctx), ds.gold) for b in RULE_BASELINES}
        rec = {
            "n_tools": len(ds.docs),
            "n_tasks": len(ds.queries),
            "multi_tool_tasks": int(sum(len(g) > 1 for g in ds.gold)),
            "means": {
                m: {k: [float(v[k].mean()), *bootstrap_mean(v[k])] for k in DEPTH_METRICS}
                for m, v in per.items()
            },
            "paired": {
                o: {k: list(bootstrap_diff(per[TOOL][k], per[o][k])) for k in DEPTH_METRICS}
                for o in per
                if o != TOOL
            },
            "rule": rule_check(per[TOOL], {b: per[b] for b in RULE_BASELINES}),
            "rule_library_default": rule_check(per[LIBRARY], {b: per[b] for b in RULE_BASELINES}),
        }
        out[name] = rec
        lines.append(
            f"\n**{name}** ({len(ds.docs):,} tools, {len(ds.queries):,} tasks, "
            f"{rec['multi_tool_tasks']} needing several tools)\n"
        )
        lines.append("| method | " + " | ".join(DEPTH_METRICS) + " |")
        lines.append("|---|" + "---:|" * len(DEPTH_METRICS))
        for m in per:
            cells = [
                f"{100 * rec['means'][m][k][0]:.1f} [{100 * rec['means'][m][k][1]:.1f}, "
                f"{100 * rec['means'][m][k][2]:.1f}]"
                for k in DEPTH_METRICS
            ]
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        for o, diffs in rec["paired"].items():
            cells = [f"{100 * d[0]:+.1f} [{100 * d[1]:+.1f}, {100 * d[2]:+.1f}]" for d in diffs.values()]
            lines.append(f"| Δ tool catalogue − {o} | " + " | ".join(cells) + " |")
        verdict = "passes" if rec["rule"]["pass"] else "FAILS"
        lines.append(
            f"\nRule (not significantly worse than the best of dense, BM25, RRF on "
            f"{', '.join(RULE_METRICS)}): tool catalogue {verdict}; library default "
            f"{'passes' if rec['rule_library_default']['pass'] else 'fails'}."
        )
        print("\n".join(lines[-(len(per) * 2 + 3) :]), flush=True)
    (ROOT / "results" / "bench").mkdir(parents=True, exist_ok=True)
    (ROOT / "results" / "bench" / "tool_depth_table.json").write_text(
        json.dumps(out, indent=1) + "\n", encoding="utf-8"
    )
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
