"""Question: what does each query encoder tier cost in accuracy on every shared dataset, against
transformer queries, in the default skillsight?

Declared before running: tiers ``transformer`` (fp32 MiniLM, the default when this ran), ``transformer-int8``
(the dynamically int8-quantised MiniLM on the task side only, documents fp32: ``eval --query-int8``),
``static-mapped`` and ``static`` (docs/ENCODERS.md). Datasets: the five shared ones (skillsbench,
sra_theoremqa, bfcl; metatool on its 2,000-query subset; gorilla_hf), every query. Reported: R@10 and
nDCG@10 of ``skillsight`` per tier, the paired bootstrap 95% interval of each difference to the
transformer (2,000 resamples, seed 0), and the mean R@10 loss over the three fit sets. Rule of the
issue: the default query encoder changes only for a faster tier within 0.5 R@10 of the transformer on
every fit set; otherwise the fastest tier within 2 points is the documented option.

Each number equals ``skillsight -c methods=skillsight eval --data data/NAME`` with ``--query-int8``,
``--query-encoder static-mapped`` or ``--query-encoder static`` (or ``--no-query-int8``, for the
transformer). The result made ``transformer-int8`` the default (tasks int8, skills fp32).

Result: docs/ENCODERS.md, "Accuracy of the tiers on every shared dataset".

Run: python experiments/query_encoder_tiers.py [--json results/experiments/query_encoder_tiers.json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from skillsight_fast.lab.evaluation.datasets import FIT_DATASETS, SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext
from skillsight_fast.metrics import bootstrap_diff, per_query

DATA_ROOT = Path(__file__).parents[1] / "data"
TIERS = {  # name -> EvalContext arguments
    "transformer": {"query_int8": False},
    "transformer-int8": {"query_int8": True},
    "static-mapped": {"query_encoder": "static-mapped"},
    "static": {"query_encoder": "static"},
}
METRICS = ("recall@10", "ndcg@10")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args()
    out: dict[str, dict[str, dict[str, object]]] = {}
    for name in SHARED_DATASETS:
        ds = load_dataset(DATA_ROOT / name)
        base = None
        out[name] = {}
        for tier, kwargs in TIERS.items():
            ctx = EvalContext(ds, **kwargs)  # type: ignore[arg-type]
            per = per_query(METHODS["skillsight"](ctx), ds.gold)
            row: dict[str, object] = {m: 100 * float(per[m].mean()) for m in METRICS}
            if base is None:
                base = per
            else:
                for m in METRICS:
                    d, lo, hi = bootstrap_diff(per[m], base[m], n_boot=args.bootstrap, seed=0)
                    row[f"{m}_diff"] = [100 * d, 100 * lo, 100 * hi]
            out[name][tier] = row
            print(f"{name:<14} {tier:<17} R@10 {row['recall@10']:5.1f}  nDCG@10 {row['ndcg@10']:5.1f}"
                  + ("" if "recall@10_diff" not in row else
                     "  R@10 {:+.1f} [{:+.1f}, {:+.1f}]".format(*row["recall@10_diff"])), flush=True)  # type: ignore[str-format]
    print("\n| query encoder | " + " | ".join(SHARED_DATASETS) + " | mean R@10 loss, fit sets |")
    print("|---|" + "---:|" * (len(SHARED_DATASETS) + 1))
    for tier in TIERS:
        cells = []
        for name in SHARED_DATASETS:
            row = out[name][tier]
            cell = f"{row['recall@10']:.1f} / {row['ndcg@10']:.1f}"
            if "recall@10_diff" in row:
                cell += " ({:+.1f} [{:+.1f}, {:+.1f}])".format(*row["recall@10_diff"])  # type: ignore[str-format]
            cells.append(cell)
        loss = float(np.mean([-out[n][tier].get("recall@10_diff", [0.0])[0] for n in FIT_DATASETS]))  # type: ignore[index]
        print(f"| {tier} | " + " | ".join(cells) + f" | {round(loss, 1) + 0.0:.1f} |")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
