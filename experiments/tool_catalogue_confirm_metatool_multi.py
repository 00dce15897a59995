"""Does the tool catalogue's index hold on tasks that need two tools, on a set nothing here has seen?

Question
    Tool catalogues are indexed with ``tools.catalog.tool_index_config()`` (the BM25 side over
    every task token), a scope chosen after the numbers of
    experiments/bm25_evidence_without_generic_mask.py. Only bfcl (a fit set) has tasks that need
    several tools. MetaTool's multi-tool tasks (``dataset/data/multi_tool_query_golden.json``,
    497 tasks each naming two of the same 199 plugins as data/metatool) were held out of the
    shared datasets and never run here. Does the tool catalogue's index meet issue 32's criterion
    there, and is it not worse than the library default?

Data
    HowieHwong/MetaTool at commit 35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb (MIT, the commit of
    data/metatool), read from a local clone (``--repo``); nothing of it is copied into this
    repository. Documents: data/metatool's corpus (the 199 plugin descriptions). Tasks: each
    record's query, gold = its tools; tasks whose tools are not all in the corpus are dropped
    (counted); identical query texts are merged (gold = union).

Adoption rule (declared before the run; this is a confirmation, nothing is chosen here)
    The tool catalogue's configuration is confirmed if on these tasks it is (i) not significantly
    worse than the best of dense, BM25 and RRF on R@10, nDCG@10, R@50 and Completeness@10, and
    (ii) not significantly worse than the library default (``IndexConfig()``) on the same four
    (paired bootstrap 95 %, 2,000 resamples, seed 0: the interval of the difference reaches 0).
    If either fails, the note says so and tool catalogues should go back to the library default.

Result (results/experiments/tool_catalogue_confirm_metatool_multi.json): confirmed.
    497 tasks (none dropped or merged), each needing two tools. Against the best baseline the tool
    catalogue's index is ahead on all four: R@10 +5.5 [+3.8, +7.3] (dense), nDCG@10 +5.7 [+3.9,
    +7.7] (RRF), R@50 +1.8 [+0.8, +2.9] (dense), Completeness@10 +8.5 [+5.4, +11.5] (dense); against
    the library default it is not significantly different: R@10 -0.7 [-2.2, +0.8], nDCG@10 -0.4
    [-1.4, +0.6], R@50 +0.4 [-0.1, +0.9], C@10 +0.0 [-2.6, +2.4] (RRF trails dense here: BM25 alone
    reaches C@10 15.3). Table in docs/TOOLS.md.

Run
    PYTHONPATH=. python experiments/tool_catalogue_confirm_metatool_multi.py --repo PATH/TO/MetaTool
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.config import IndexConfig  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import Dataset, EvalQuery, load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext  # noqa: E402
from skillsight_fast.lab.evaluation.tool_search import (  # noqa: E402
    DEPTH_METRICS,
    RULE_BASELINES,
    RULE_METRICS,
    depth_metrics,
    fmt_diff,
    not_worse,
    rule_check,
)
from skillsight_fast.metrics import bootstrap_diff, bootstrap_mean  # noqa: E402
from skillsight_fast.tools.catalog import tool_index_config  # noqa: E402

COMMIT = "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb"


def multi_tool_dataset(repo: Path) -> tuple[Dataset, dict[str, int]]:
    base = load_dataset(ROOT / "data" / "metatool")
    row = {d.id.removeprefix("metatool:"): i for i, d in enumerate(base.docs)}
    records = json.loads(
        (repo / "dataset" / "data" / "multi_tool_query_golden.json").read_text(encoding="utf-8")
    )
    merged: dict[str, set[int]] = {}
    dropped = 0
    for rec in records:
        tools = rec.get("tool") or []
        if not tools or any(t not in row for t in tools):
            dropped += 1
            continue
        merged.setdefault(" ".join(str(rec["query"]).split()), set()).update(row[t] for t in tools)
    queries = [
        EvalQuery(id=f"metatool-multi:q{i:04d}", text=q, gold=frozenset(g))
        for i, (q, g) in enumerate(merged.items())
    ]
    ds = Dataset(
        name="metatool_multi",
        docs=base.docs,
        queries=queries,
        meta={"source": f"HowieHwong/MetaTool@{COMMIT}:dataset/data/multi_tool_query_golden.json"},
    )
    return ds, {
        "records": len(records),
        "dropped": dropped,
        "tasks": len(queries),
        "merged": len(records) - dropped - len(queries),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repo", required=True, help="a clone of HowieHwong/MetaTool at the commit above")
    ap.add_argument("--out", default=str(ROOT / "results" / "experiments" / "tool_catalogue_confirm_metatool_multi.json"))
    args = ap.parse_args()
    ds, counts = multi_tool_dataset(Path(args.repo))
    print(counts, flush=True)
    ctx = EvalContext(dataset=ds)
    per = {
        "tool catalogue": depth_metrics(ctx.search(ctx.index(tool_index_config())), ds.gold),
        "library default": depth_metrics(ctx.search(ctx.index(IndexConfig())), ds.gold),
    }
    per |= {b: depth_metrics(METHODS[b](ctx), ds.gold) for b in RULE_BASELINES}
    res: dict[str, Any] = {
        "counts": counts,
        "means": {
            m: {k: [float(v[k].mean()), *bootstrap_mean(v[k])] for k in DEPTH_METRICS} for m, v in per.items()
        },
        "paired": {
            o: {k: list(bootstrap_diff(per["tool catalogue"][k], per[o][k])) for k in DEPTH_METRICS}
            for o in per
            if o != "tool catalogue"
        },
    }
    res["vs_best_baseline"] = rule_check(per["tool catalogue"], {b: per[b] for b in RULE_BASELINES})
    res["vs_library_default"] = not_worse(per["tool catalogue"], per["library default"])
    res["library_default_vs_best_baseline"] = rule_check(
        per["library default"], {b: per[b] for b in RULE_BASELINES}
    )
    res["confirmed"] = bool(res["vs_best_baseline"]["pass"] and res["vs_library_default"]["pass"])
    print("method           " + "  ".join(f"{k:>7}" for k in DEPTH_METRICS))
    for m, v in per.items():
        print(f"{m:<16} " + "  ".join(f"{100 * v[k].mean():7.1f}" for k in DEPTH_METRICS))
    for key in ("vs_best_baseline", "vs_library_default", "library_default_vs_best_baseline"):
        rec = res[key]
        print(
            f"{key:<34} pass={rec['pass']}  "
            + "  ".join(
                f"{m} {fmt_diff(rec[m])}" + (f" ({rec[m]['best']})" if "best" in rec[m] else "")
                for m in RULE_METRICS
            )
        )
    print(f"confirmed: {res['confirmed']}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
