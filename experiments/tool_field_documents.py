"""Is a tool found more often when its fields are embedded separately, each with its own background?

Question
    Today a tool is one text (name, description, the whole input schema as JSON) with one vector
    (plus the name + description vector of the default ``text+namedesc`` document vector), and the
    background removed is the corpus's. Tool schemas carry their own boilerplate (JSON types,
    "properties", "required"). ScaleMCP embeds each field separately and averages. Does a dense side
    built from separate fields (name split into words, description, parameters), each centred on
    its own field's corpus mean (its background), beat today's single text?

Fields (per tool)
    ``name``: the name split on ``_``, ``-``, ``.``, ``/`` and camelCase; ``description``;
    ``params``: one line per parameter ``name: description`` (catalog.params_text without types),
    empty for metatool (no schemas), so metatool uses name and description only.
    Field vector background: the field's mean vector over the corpus is subtracted from the field
    vectors and from the task vector compared with them, then both are renormalised.

Variants (declared before the run; the lexical side and Eq. 15 unchanged)
    ``single``          today's default index (reference).
    ``fields``          dense score = mean over the tool's non-empty fields of the centred cosines.
    ``single+fields``   dense score = mean of today's s⊥ and the ``fields`` score.
    Candidates: the top 300 (the index's K) by the variant's dense score; fused with Eq. 15.

Adoption rule (declared before the run)
    A variant replaces today's tool text only if on bfcl (fit) it is not significantly worse than
    ``single`` on R@10, nDCG@10, R@50 and Completeness@10 (paired bootstrap 95 %, 2,000 resamples,
    seed 0) and significantly better on at least one, and on metatool and gorilla_hf (confirm) not
    significantly worse than ``single`` on the same four. Of two that pass, the higher bfcl R@10.
    Skill corpora are not tool catalogues; they keep their text either way.

Result (results/experiments/tool_field_documents.json): not adopted.
    ``fields`` alone loses on every tool set where it differs: metatool R@10 -1.8 [-2.8, -0.8],
    gorilla_hf R@10 -9.7 [-12.5, -6.7], R@50 -11.3 [-14.0, -8.8] (its "parameters" are argument
    names only, and its description field repeats the record); bfcl R@10 -0.6 [-1.4, +0.2], R@50
    +0.4 [+0.0, +0.8]. ``single+fields`` helps bfcl (nDCG@10 +0.7 [+0.2, +1.2], C@10 +0.8 [+0.0,
    +1.4], R@10 +0.4 [-0.2, +1.0]: not significantly better on R@10) but loses gorilla_hf (nDCG@10
    -2.0 [-3.1, -0.8], R@50 -2.6 [-4.3, -1.0]). Today's single text (with its name + description
    vector) stays. The lexical side by field was not tried (see bm25_evidence_without_generic_mask.py
    for the lexical background of tool schemas).

Run
    PYTHONPATH=. python experiments/tool_field_documents.py [--out results/experiments/tool_field_documents.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.config import IndexConfig  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import Dataset, load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import EvalContext  # noqa: E402
from skillsight_fast.lab.evaluation.tool_search import (  # noqa: E402
    DEPTH_METRICS,
    RULE_METRICS,
    _record_schema,
    depth_metrics,
    fmt_diff,
    not_worse,
)
from skillsight_fast.metrics import DEPTH  # noqa: E402
from skillsight_fast.tools.catalog import iter_params  # noqa: E402

VARIANTS = ("single", "fields", "single+fields")
FIELDS = ("name", "description", "params")


def field_texts(ds: Dataset) -> dict[str, list[str]]:
    from experiments.tool_server_signal import split_name

    out: dict[str, list[str]] = {f: [] for f in FIELDS}
    for d in ds.docs:
        out["name"].append(split_name(d.name))
        out["description"].append(" ".join(d.description.split()))
        schema, has = _record_schema(d)
        lines = (
            [f"{split_name(n)}: {desc}" if desc else split_name(n) for n, _, desc in iter_params(schema)]
            if has
            else []
        )
        out["params"].append("\n".join(lines))
    return out


def centred(v: np.ndarray, mean: np.ndarray) -> np.ndarray:
    x = v - mean
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(n > 0, n, 1)).astype(np.float32)


def field_scores(ctx: EvalContext, q: np.ndarray) -> np.ndarray:
    """Mean over non-empty fields of the centred cosines, float32 (n, N)."""
    texts = field_texts(ctx.dataset)
    total = np.zeros((q.shape[0], len(ctx.dataset.docs)), np.float64)
    count = np.zeros(len(ctx.dataset.docs), np.float64)
    for f in FIELDS:
        present = np.array([bool(t.strip()) for t in texts[f]])
        if not present.any():
            continue
        emb = ctx.embeddings(f"field-{f}", [t if t.strip() else " " for t in texts[f]])
        mean = emb[present].mean(0, keepdims=True)
        s = centred(q, mean) @ centred(emb, mean).T
        total += np.where(present[None, :], s, 0.0)
        count += present
    return (total / np.maximum(count, 1)[None, :]).astype(np.float32)


def dataset_path(name: str) -> Path:
    for root in (ROOT / "data", Path("/work/shared/datasets")):
        if (root / name / "meta.json").is_file():
            return root / name
    raise SystemExit(f"dataset {name} not found")


def run(name: str) -> dict[str, dict[str, np.ndarray]]:
    ds = load_dataset(dataset_path(name))
    ctx = EvalContext(dataset=ds)
    index = ctx.index(IndexConfig())
    q = ctx.task_vectors(index.config)
    fs = field_scores(ctx, q)
    per = {"single": depth_metrics(ctx.search(index), ds.gold)}
    k_cand = index.decisions.candidates

    def stage(mix: bool):
        def dense_stage(q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
            s = fs
            if mix:
                full_ids, full_s = index.dense_candidates(q_perp, len(index))
                single = np.zeros_like(fs)
                np.put_along_axis(single, full_ids, full_s, 1)
                s = 0.5 * (single + fs)
            kk = min(max(depth, k_cand), s.shape[1])
            ids = np.argsort(-s, axis=1, kind="stable")[:, :kk]
            return ids.astype(np.int64), np.take_along_axis(s, ids, 1).astype(np.float32)

        return dense_stage

    for v, mix in (("fields", False), ("single+fields", True)):
        ranked = index.search_vectors(q, ds.query_texts, DEPTH, dense_stage=stage(mix), explain=False).ids
        per[v] = depth_metrics(ranked, ds.gold)
    print(f"{name}:  " + "  ".join(f"{m:>8}" for m in DEPTH_METRICS))
    for meth, vals in per.items():
        print(f"  {meth:<14}" + "  ".join(f"{100 * vals[m].mean():8.1f}" for m in DEPTH_METRICS), flush=True)
    return per


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "experiments" / "tool_field_documents.json"))
    args = ap.parse_args()
    per = {n: run(n) for n in ("bfcl", "metatool", "gorilla_hf")}
    rec: dict[str, Any] = {}
    for v in VARIANTS[1:]:
        r = {n: not_worse(per[n][v], per[n]["single"]) for n in per}
        better = any(r["bfcl"][m]["low"] > 0 for m in RULE_METRICS)
        r["adopt"] = bool(r["bfcl"]["pass"] and better and r["metatool"]["pass"] and r["gorilla_hf"]["pass"])
        rec[v] = r
        for n in per:
            print(
                f"{n} {v} - single: " + "  ".join(f"{m} {fmt_diff(r[n][m])}" for m in RULE_METRICS),
                flush=True,
            )
    passing = [v for v in VARIANTS[1:] if rec[v]["adopt"]]
    adopted = max(passing, key=lambda v: per["bfcl"][v]["R@10"].mean()) if passing else None
    print(f"adopted: {adopted}")
    out = {
        "rule": rec,
        "adopted": adopted,
        "means": {
            n: {v: {m: float(x[m].mean()) for m in DEPTH_METRICS} for v, x in p.items()}
            for n, p in per.items()
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
