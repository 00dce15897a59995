"""Question (issue 42, item 2): can the lookup answer short tasks (under 64 word pieces) when a gate
computed from lookups alone says it is sure, within the issue's accuracy budget?

Today's default (experiments/lookup_first_transformer_fallback.py, round 2) sends every task of fewer than
64 word pieces to the int8 transformer: the tasks of the tool and API catalogues (median 24-27 pieces) never
take the lookup, so the default costs what int8 transformer tasks cost on them (~6 ms, against ~2 ms for
the lookup path at 26,000 skills). Round 1 of that experiment showed why the length gate exists: the fused
top-1 score alone (tau 0.45) lets the lookup answer 83% of metatool's and 80% of gorilla_hf's tasks and
loses 10.3 and 5.0 R@10 points there. This experiment asks whether a stricter gate, or one that asks two
independent lookups to agree, keeps that loss within budget while still answering a useful share.

Declared before the run (09:55 UTC, 5 Dec 2026; no result of these gates on any dataset was seen):

Arms. Long tasks (>= 64 word pieces, [CLS] and [SEP] counted) keep round 2's decision (fitted lookup if its
fused top-1 >= 0.45, else int8 transformer). A short task is answered by the fitted lookup when its gate
holds and by the int8 transformer otherwise. Gates, all from lookups only (no transformer pass):
- ``score-T``: the fitted lookup's fused top-1 score >= T, T in {0.45, 0.55, 0.65, 0.75};
- ``agree-T``: ``score-T`` and the fitted lookup and the static-mapped lookup (a second, independent table:
  model2vec distilled from MiniLM, mapped by least squares) put the same skill first.

Measured per dataset: R@10 and nDCG@10 of each arm with the paired bootstrap 95% interval of its R@10
difference to fp32 transformer tasks (2,000 resamples, seed 0), and the share of short tasks the lookup answers.

Selection and adoption rule. On the fit sets only (skillsbench, sra_theoremqa, bfcl) a gate qualifies if its
mean R@10 loss against fp32 transformer tasks is <= 0.5 point and no fit set loses more than 1.0; among those
the one with the largest mean share of short tasks answered is selected (ties: the stricter gate). It is
adopted (a short-task gate in engine/cascade.Cascade, described in the report) only if on each confirm set
(metatool, gorilla_hf) it also loses <= 1.0 R@10 point and answers >= 25% of the short tasks over the
confirm sets (below that the mean saving, ~share x 4 ms, is under 1 ms and not worth a second rule).
Otherwise nothing changes.

Result, partial (10:07-10:18 UTC, 5 Dec 2026, load 17-25 from other jobs; run in the order bfcl, gorilla_hf,
metatool, sra_theoremqa, skillsbench; results/experiments/short_task_lookup_gate.json holds each dataset as it
finished). R@10 difference to fp32 transformer tasks [paired bootstrap 95%], share of short tasks answered:

| gate | bfcl (fit) | metatool (confirm) | gorilla_hf (confirm) |
|---|---|---|---|
| default (no short gate) | +0.0 [-0.4, +0.4], 0.00 | -0.2 [-0.6, +0.1], 0.00 | +0.4 [-0.8, +1.6], 0.00 |
| score-0.45 | +0.0 [-0.4, +0.4], 0.47 | -1.4 [-2.2, -0.5], 0.61 | -5.2 [-7.6, -2.8], 0.86 |
| agree-0.45 | +0.0 [-0.4, +0.4], 0.41 | -1.1 [-1.8, -0.4], 0.45 | -1.2 [-2.6, +0.4], 0.22 |
| score-0.55 | +0.0 [-0.4, +0.4], 0.28 | -0.5 [-1.1, +0.0], 0.36 | -3.1 [-5.0, -1.2], 0.52 |
| agree-0.55 | +0.0 [-0.4, +0.4], 0.25 | -0.5 [-1.1, -0.1], 0.30 | -0.5 [-1.8, +0.8], 0.18 |
| score-0.65 | +0.0 [-0.4, +0.4], 0.14 | -0.4 [-0.8, +0.1], 0.19 | +0.0 [-1.4, +1.3], 0.20 |
| agree-0.65 | +0.0 [-0.4, +0.4], 0.13 | -0.4 [-0.8, +0.1], 0.18 | +0.1 [-1.2, +1.4], 0.11 |
| score-0.75 | +0.0 [-0.4, +0.4], 0.06 | -0.3 [-0.7, +0.1], 0.08 | +0.4 [-0.8, +1.6], 0.06 |
| agree-0.75 | +0.0 [-0.4, +0.4], 0.05 | -0.3 [-0.7, +0.1], 0.08 | +0.4 [-0.8, +1.6], 0.04 |

sra_theoremqa and skillsbench (the other two fit sets) had not finished by the deadline, so the selection
step is not complete. The verdict does not depend on them: every gate that keeps both confirm sets within
1.0 point (score-0.55 fails gorilla_hf; agree-0.55, score-/agree-0.65, -0.75 pass) answers under 25% of their
short tasks (at best agree-0.55, (0.30 + 0.18) / 2 = 0.24), and the gates answering more lose 1.1-5.2 points
on a confirm set. **Not adopted**: nothing changes in engine/ or models/. What it shows: on bfcl a sure lookup
answers half of the short tasks with no loss, but the same score means less over a small catalogue of short
tool descriptions (gorilla_hf's 0.45 gate answers 86% and loses 5.2); agreement with a second lookup removes
most of that loss (-5.2 -> -1.2 at 0.45) at the cost of most of the share. A gate that reaches the issue's
2 ms mean on short tasks would need to answer ~90% of them within budget; none here is near.

Run: python experiments/short_task_lookup_gate.py [--datasets NAME ...] [--json FILE]
(results/experiments/short_task_lookup_gate.json)
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.lab.evaluation.datasets import FIT_DATASETS, SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import DEPTH, bootstrap_diff, per_query
from skillsight_fast.models import load_encoder

DATA_ROOT = Path(__file__).parents[1] / "data"
TAU_LONG = 0.45
MIN_PIECES = 64
THRESHOLDS = (0.45, 0.55, 0.65, 0.75)
CONFIRM_SHARE = 0.25
METRICS = ("recall@10", "ndcg@10")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--datasets", nargs="+", default=list(SHARED_DATASETS))
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args()
    enc = load_encoder()
    out: dict[str, dict] = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).is_file() else {}
    for name in args.datasets:
        ds = load_dataset(DATA_ROOT / name)
        ctx = EvalContext(ds, query_int8=False, encoder=enc)
        fctx = EvalContext(ds, query_int8=None, query_encoder="fitted", encoder=enc)
        mctx = EvalContext(ds, query_int8=None, query_encoder="static-mapped", encoder=enc)
        index = ctx.index(IndexConfig())
        q = list(ds.query_texts)
        ref = index.search_vectors(ctx.query_emb, q, DEPTH, explain=False)
        t8 = index.search_vectors(ctx.int8_query_emb, q, DEPTH, explain=False)
        lk = index.search_vectors(fctx.query_emb, q, DEPTH, explain=False)
        mp = index.search_vectors(mctx.query_emb, q, DEPTH, explain=False)
        pieces = np.array([len(ids) for ids in enc.tokenize(q)])  # [CLS] and [SEP] included
        short = pieces < MIN_PIECES
        top = lk.scores[:, 0]
        agree = lk.ids[:, 0] == mp.ids[:, 0]
        long_exit = ~short & (top >= TAU_LONG)
        gates = {"default": np.zeros(len(q), bool)}
        for t in THRESHOLDS:
            gates[f"score-{t:.2f}"] = short & (top >= t)
            gates[f"agree-{t:.2f}"] = short & (top >= t) & agree
        base = per_query(ref.ids, ds.gold)
        row: dict[str, object] = {"n_queries": len(q), "short_tasks": int(short.sum()),
                                  "median_pieces": float(np.median(pieces))}
        for arm, gate in gates.items():
            exit_ = long_exit | gate
            per = per_query(np.where(exit_[:, None], lk.ids, t8.ids), ds.gold)
            cell: dict[str, object] = {m: 100 * float(per[m].mean()) for m in METRICS}
            cell["recall@10_diff"] = [100 * x for x in bootstrap_diff(per["recall@10"], base["recall@10"],
                                                                      n_boot=args.bootstrap, seed=0)]
            cell["short_share"] = round(float(gate[short].mean()) if short.any() else 0.0, 4)
            row[arm] = cell
            d = cell["recall@10_diff"]
            print(f"{name:14s} {arm:11s} R@10 {cell['recall@10']:5.1f} nDCG@10 {cell['ndcg@10']:5.1f} "
                  f"diff {d[0]:+.1f} [{d[1]:+.1f}, {d[2]:+.1f}] short answered {cell['short_share']:.2f}", flush=True)
        out[name] = row
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    report(out)


def report(out: dict[str, dict]) -> None:
    """Apply the declared rule to what was measured."""
    fit = [n for n in FIT_DATASETS if n in out]
    confirm = [n for n in out if n not in FIT_DATASETS]
    arms = [a for a in next(iter(out.values())) if a.startswith(("score-", "agree-"))] if out else []
    best = None
    for arm in arms:
        losses = [-out[n][arm]["recall@10_diff"][0] for n in fit]
        share = float(np.mean([out[n][arm]["short_share"] for n in fit])) if fit else 0.0
        ok = bool(fit) and np.mean(losses) <= 0.5 and max(losses) <= 1.0
        print(f"{arm}: fit mean loss {np.mean(losses):.2f}, worst {max(losses):.1f}, short share {share:.2f}"
              f" -> {'qualifies' if ok else 'fails'}")
        if ok and (best is None or share > best[1]):
            best = (arm, share)
    if best is None:
        print("no gate qualifies on the fit sets: nothing adopted")
        return
    arm = best[0]
    c_losses = {n: -out[n][arm]["recall@10_diff"][0] for n in confirm}
    c_share = float(np.mean([out[n][arm]["short_share"] for n in confirm])) if confirm else 0.0
    adopted = bool(confirm) and max(c_losses.values()) <= 1.0 and c_share >= CONFIRM_SHARE
    print(f"selected {arm}; confirm losses {c_losses}, short share {c_share:.2f} -> "
          f"{'ADOPTED' if adopted else 'not adopted'}")


if __name__ == "__main__":
    main()
