"""Which text of a tool should be indexed: its description, its parameters too, or its whole schema?

Question
    A tool indexed from an MCP server or an OpenAPI file has a name, a description and an input
    schema. Does tool search find the right tool more often when the indexed text
    (``name + description + body``) has as body (a) nothing, (b) the parameters' names, types and
    descriptions (one line each), or (c) the whole input schema as JSON?

Selection rule (declared before the run)
    Measured with skillsight (the default index), BM25 and dense on the tool datasets whose
    documents carry schemas: bfcl (JSON function schemas) and gorilla_hf (API records; its
    "params" are the ``api_arguments`` names, its "schema" the whole record). metatool has
    descriptions only, so its three variants are the same text and it is reported once as a
    check. The default tool text is the variant with the highest skillsight Hit@5 averaged over
    bfcl and gorilla_hf; a variant whose paired Hit@5 interval against the winner contains 0 on
    both datasets is a tie, and a tie goes to the shorter text (description < params < schema).

Result (all-MiniLM-L6-v2, paired bootstrap 95 % intervals, 2,000 resamples)
    The whole schema wins on both datasets with schemas. Skillsight Hit@5, mean over bfcl and
    gorilla_hf: description 0.523, params 0.559, schema 0.594. Paired Hit@5 differences to
    schema: bfcl description -0.104 [-0.118, -0.091], params -0.042 [-0.053, -0.031];
    gorilla_hf description -0.038 [-0.064, -0.016], params -0.029 [-0.053, -0.005]. No tie, so
    the default tool text is ``schema`` (skillsight_fast.tools.catalog.DEFAULT_TOOL_TEXT). Full
    numbers: results/experiments/tool_text_variants.json and docs/TOOLS.md.

Run
    PYTHONPATH=. python experiments/tool_text_variants.py [--out results/experiments/tool_text_variants.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.lab.evaluation.datasets import load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.tool_search import (  # noqa: E402
    TOOL_METHODS,
    has_schemas,
    run_methods,
    summarise,
    tool_docs,
)
from skillsight_fast.metrics import bootstrap_diff  # noqa: E402
from skillsight_fast.tools.catalog import TOOL_TEXTS  # noqa: E402


def dataset_path(name: str) -> Path:
    """The vendored copy under data/, else the shared datasets folder."""
    for root in (ROOT / "data", Path("/work/shared/datasets")):
        if (root / name / "meta.json").is_file():
            return root / name
    raise SystemExit(f"dataset {name} not found under data/ or /work/shared/datasets")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--datasets", default="bfcl,gorilla_hf,metatool")
    ap.add_argument("--out", default=str(ROOT / "results" / "experiments" / "tool_text_variants.json"))
    args = ap.parse_args()
    results: dict = {}
    per_all: dict = {}
    for name in args.datasets.split(","):
        base = load_dataset(dataset_path(name))
        variants = TOOL_TEXTS if has_schemas(base) else ("description",)
        for text in variants:
            ds = tool_docs(base, text)
            per = run_methods(ds, TOOL_METHODS)
            per_all[(name, text)] = per
            results.setdefault(name, {})[text] = summarise(per) | {
                "n_queries": len(ds.queries), "n_tools": len(ds.docs),
                "mean_chars": float(np.mean([len(d.text) for d in ds.docs]))}
            row = results[name][text]["methods"]
            print(f"{name:<11} {text:<12} " + "  ".join(
                f"{m} H@1 {row[m]['hit@1']['mean']:.3f} H@5 {row[m]['hit@5']['mean']:.3f} "
                f"C@5 {row[m]['complete@5']['mean']:.3f}" for m in TOOL_METHODS), flush=True)
    # the declared rule: skillsight Hit@5 averaged over the datasets with schemas
    schema_sets = [n for n in results if len(results[n]) == len(TOOL_TEXTS)]
    mean_h5 = {t: float(np.mean([results[n][t]["methods"]["skillsight"]["hit@5"]["mean"] for n in schema_sets]))
               for t in TOOL_TEXTS} if schema_sets else {}
    choice = None
    if mean_h5:
        best = max(mean_h5, key=mean_h5.get)
        ties = []
        for t in TOOL_TEXTS:  # shortest first
            diffs = (bootstrap_diff(per_all[(n, t)]["skillsight"]["hit@5"],
                                    per_all[(n, best)]["skillsight"]["hit@5"]) for n in schema_sets)
            tied = all(d[1] <= 0 <= d[2] for d in diffs)
            if t == best or tied:
                ties.append(t)
        choice = ties[0]
        results["_selection"] = {"mean_skillsight_hit@5": mean_h5, "best": best, "tied_with_best": ties,
                                 "chosen": choice}
        print(f"selection: mean skillsight Hit@5 {mean_h5}; best {best}; tied {ties}; chosen {choice}")
        for n in schema_sets:
            for t in TOOL_TEXTS:
                if t != choice:
                    d = bootstrap_diff(per_all[(n, t)]["skillsight"]["hit@5"],
                                       per_all[(n, choice)]["skillsight"]["hit@5"])
                    results["_selection"].setdefault("paired_vs_chosen", {}).setdefault(n, {})[t] = d
                    print(f"  {n}: {t} - {choice} Hit@5 {d[0]:+.3f} [{d[1]:+.3f}, {d[2]:+.3f}]")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
