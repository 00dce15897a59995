"""Question: does a general fitted query table (fitted once on public text plus the bundled library, shipped as
package data) bring the fitted tier within the issue's rule, used alone or as the start and prior of the
per-library fit? And do task-like training texts or hashed bigrams help the fit?

The fitted tier (experiments/fitted_query_table.py) loses 4.9 R@10 points on average over the fit sets and
16.2 on metatool against fp32 transformer tasks. Its table covers only the tokens the library uses (a task
word a 199-tool library never says is skipped), and it is fitted on pieces of skills, which are not
task-like. Declared before running.

General table (scripts/build_general_table.py; skillsight_fast/models/general.py): texts, never a query
of any evaluation set: the one-line descriptions of the installed manual pages (name: description and
description alone), the first paragraphs of the docstrings of the Python standard library and the
installed packages (30,000, a fixed hash sample), the installed distributions' summaries and description
paragraphs, and the bundled library's (data/skillsbench) training texts as an index build makes them.
Teacher: the int8 task graph, one pass giving each text's vector and the token-state sums (the contextual
prior over the general corpus). Fit: regression (``mse``) without a background basis (it serves every
library), 1,000 Adam steps of 2,048 texts, FitConfig's other defaults. Two general tables: ``general``
(those texts) and ``general+tasks`` (plus one templated task-like text per man-page line and per docstring
of half the sample: "How do I ...?", "Can you help me ...?", "I need to ...").

Arms (default skillsight index over fp32 skills; reference: fp32 transformer tasks; one set of constants
for every dataset; the per-library fits all use objective mse+kl as the adopted fitted tier, and the
library-scaled batch ``epochs=14`` of item 3 of the issue: at the bundled library that is today's
1,024-text batch):
  - ``general``, ``general+tasks``: the general table alone, no per-library fit (what a tiny or brand-new
    library would get);
  - ``fitted-scaled``: today's fitted tier (contextual prior) with the scaled batch (the reference for the
    arms below; today's 300 x 1,024 fit is results/experiments/fitted_query_table.json's ``fit-cos+kl+w``);
  - ``fitted-gstart``: the per-library fit started from and pulled toward the general table (the better of
    the two by mean loss over the fit sets): general rows for every token it covers, the library's
    contextual rows (rescaled) for the rest; tokens the library never uses keep their general rows;
  - ``fitted-gfill``: the library's contextual rows for its tokens, general rows for every other token;
  - ``fitted-gstart+tasks``: ``fitted-gstart`` with two more templated task-like texts per skill
    ("Can you help me <description>?", "I need to <description> (<name>)");
  - ``fitted-gstart+bigrams``: ``fitted-gstart`` plus a hashed bigram table (2^15 buckets, zero start,
    pulled toward zero) added to the pooled vector of consecutive word pieces, fitted with the rest.

Measured: R@10 and nDCG@10 with the paired bootstrap 95% interval of each difference to fp32 transformer
tasks (2,000 resamples, seed 0) on skillsbench, sra_theoremqa, bfcl (fit sets), metatool (2,000-query
subset), gorilla_hf; fit seconds per arm.

Adoption rule (issue 29, unchanged): an arm that loses <= 1 R@10 point on average over the fit sets and
<= 3 on every shared dataset meets the rule (the lead then decides the default). Separately, the general
table is shipped and becomes the fitted tier's start if ``fitted-gstart`` (or ``fitted-gfill``) has a
lower mean loss over the fit sets than ``fitted-scaled`` and no shared dataset loses more than 1 point
against it; ``general`` is used directly for a tiny library if it beats ``fitted-scaled`` on metatool (the
smallest library, 199 tools). Task-like texts and bigrams are adopted only if they lower the mean loss over
the fit sets by more than 0.3 points with no dataset more than 1 point worse.

Result (23:31-23:56 UTC, 4 Dec 2026, load 5-9 from other jobs; results/experiments/general_fitted_table.json). General
corpus: 3,068 man-page descriptions + 5,189 "name: description" lines, 30,000 docstring paragraphs, 3,931
metadata paragraphs, the bundled library's 22,246 training texts (64,431 texts; +18,068 task-like texts
for ``general+tasks``); one int8 pass 770 s, fit 88-110 s; 14,260 token rows. R@10 / nDCG@10 in %, in
brackets the R@10 difference to fp32 transformer tasks with its paired bootstrap 95% interval (2,000
resamples, seed 0); metatool on its 2,000-query subset; the general tables as stored (int8 rows):

| task encoder | skillsbench | sra_theoremqa | bfcl | metatool | gorilla_hf | mean loss, fit sets | worst loss |
|---|---:|---:|---:|---:|---:|---:|---:|
| transformer (fp32) | 82.1 / 77.7 | 80.9 / 66.6 | 91.2 / 77.4 | 82.0 / 67.0 | 43.9 / 28.2 | 0 | 0 |
| contextual | 75.3 / 70.1 (-6.9 [-12.6, -2.3]) | 68.9 / 53.5 (-11.9 [-14.5, -9.2]) | 90.9 / 76.3 (-0.3 [-1.3, +0.7]) | 62.7 / 50.0 (-19.2 [-21.2, -17.3]) | 29.6 / 19.2 (-14.3 [-17.5, -11.3]) | 6.4 | 19.2 |
| general | 78.0 / 73.5 (-4.1 [-9.4, +0.3]) | 65.9 / 51.2 (-15.0 [-17.7, -12.3]) | 88.2 / 74.6 (-3.0 [-4.1, -2.0]) | 76.6 / 61.3 (-5.3 [-6.8, -4.0]) | 38.8 / 24.5 (-5.0 [-7.6, -2.8]) | 7.4 | 15.0 |
| general+tasks | 78.3 / 74.6 (-3.8 [-8.6, +0.3]) | 65.1 / 50.4 (-15.8 [-18.6, -13.0]) | 88.1 / 74.5 (-3.2 [-4.2, -2.2]) | 76.5 / 61.0 (-5.4 [-6.8, -4.0]) | 39.8 / 24.9 (-4.1 [-6.5, -1.8]) | 7.6 | 15.8 |
| fitted-scaled | 77.9 / 73.9 (-4.2 [-9.6, -0.2]) | 70.1 / 56.2 (-10.7 [-13.1, -8.3]) | 91.6 / 77.6 (+0.3 [-0.5, +1.3]) | 66.5 / 53.1 (-15.4 [-17.3, -13.6]) | 36.8 / 24.5 (-7.1 [-9.7, -4.6]) | 4.9 | 15.4 |
| fitted-gstart | 77.1 / 73.2 (-5.0 [-10.4, -0.8]) | 70.4 / 55.9 (-10.4 [-12.9, -8.0]) | 91.0 / 77.4 (-0.2 [-1.1, +0.7]) | 76.3 / 60.4 (-5.7 [-7.1, -4.2]) | 39.2 / 25.1 (-4.7 [-7.3, -2.0]) | 5.2 | 10.4 |
| fitted-gfill | 77.5 / 74.3 (-4.6 [-9.9, -0.5]) | 70.5 / 56.3 (-10.3 [-12.9, -7.8]) | 91.3 / 77.9 (+0.1 [-0.8, +1.0]) | 74.3 / 58.2 (-7.6 [-9.2, -6.2]) | 36.9 / 24.3 (-7.0 [-9.4, -4.6]) | 4.9 | 10.3 |
| fitted-gstart+tasks | 77.4 / 73.6 (-4.8 [-10.0, -0.5]) | 70.1 / 55.1 (-10.7 [-13.1, -8.3]) | 91.1 / 77.7 (-0.2 [-1.1, +0.7]) | 75.9 / 60.0 (-6.0 [-7.5, -4.6]) | 39.1 / 25.0 (-4.8 [-7.3, -2.2]) | 5.2 | 10.7 |
| fitted-gstart+bigrams | 76.6 / 73.7 (-5.5 [-10.7, -1.2]) | 71.2 / 56.5 (-9.6 [-11.9, -7.2]) | 91.1 / 77.5 (-0.1 [-1.0, +0.8]) | 76.3 / 60.9 (-5.6 [-7.1, -4.2]) | 39.1 / 25.4 (-4.8 [-7.6, -2.2]) | 5.1 | 9.6 |

(fitted-gfill's mean over the fit sets is 4.93 against fitted-scaled's 4.87.) **No arm meets the issue's
rule** (<= 1 point over the fit sets, <= 3 on every dataset): every arm loses 9.6-15.8 on sra_theoremqa.
By the rules declared above:
- The general table as the *start* of the per-library fit is **not adopted**: fitted-gstart 5.2 and
  fitted-gfill 4.93 over the fit sets against fitted-scaled's 4.87 (not lower; every difference within
  the intervals). It is the confirm sets that it helps: metatool -15.4 -> -5.7, gorilla_hf -7.1 -> -4.7,
  worst dataset 15.4 -> 10.4. Reported for the lead; the rule keeps the contextual start.
- The general table *alone* beats fitted-scaled on metatool (-5.3 against -15.4): **adopted for small
  libraries**. Below ``GENERAL_DIRECT_BELOW = 500`` skills the fitted tier stores the shipped general table
  as it is, with no fit (a round number below the smallest fit set, bfcl's 1,437, where the general table
  alone loses 3.0 and the fit gains 0.3; not tuned: gorilla_hf's 936, where it would also have gained 2.1,
  stays fitted). As shipped, the fitted tier gives skillsbench -4.2, sra_theoremqa -10.7, bfcl +0.3
  (fitted), metatool -5.3 (general), gorilla_hf -7.1 (fitted): mean over the fit sets 4.9 as before, worst
  dataset 10.7 instead of 16.2.
- Task-like texts are **dropped**: in the general table +0.2 worse over the fit sets (7.6 against 7.4), in
  the per-library fit no change (5.2 against 5.2); they help gorilla_hf by 0.9 and hurt sra_theoremqa by
  0.8, within the intervals. Templated questions built from descriptions are still descriptions.
- Hashed bigrams are **dropped**: 5.1 against 5.2 over the fit sets (0.13 lower, the rule asks 0.3),
  -5.5 against -5.0 on skillsbench, -9.6 against -10.4 on sra_theoremqa; they double the fit time on
  small libraries (metatool 0.8 -> 5.8 s) and need a second table at search.
- The library-scaled batch (epochs=14) keeps the accuracy of the fixed 300 x 1,024 fit
  (results/experiments/fitted_query_table.json ``fit-cos+kl+w``: skillsbench -4.2, sra_theoremqa -10.7, bfcl +0.1,
  metatool -16.2, gorilla_hf -7.0) and is adopted (``DEFAULT_FIT``).
Build cost as shipped (scaled batch; general table alone below 500 skills), ``python
experiments/fitted_query_table.py --build-cost N --rounds R --json results/experiments/general_fitted_table_build_N.json``,
default and fitted builds interleaved, 4-5 Dec 2026, load 3-5:
- 3,434 skills (the bundled library, 1 round): default 287.5 s, fitted 264.6 s (load fell in between); in
  the fitted build the pieces' int8 encode 32.3 s and the fit 16.8 s: **the fit adds 49 s, 0.23x** the
  fitted build's other phases (215.5 s, the same transformer pass as the default build). Before: 128 s,
  0.54x.
- 600 skills (2 rounds, the fit path): default 47.6 / 49.7 s, fitted 52.9 / 68.8 s; pieces' encode 8.8 /
  11.0 s, fit 4.4 / 3.8 s: **the fit adds 13-15 s, 0.28-0.30x** the default build (before: 2.4x and 8.2x,
  the fit alone 20 and 65 s).
- 300 skills (1 round, the general table, no fit): default 12.4 s, fitted 11.0 s (no added phase).
Fit seconds per arm (one process, load 5-9): fitted-scaled 87 / 28 / 18 / 0.7 / 3.4 s on skillsbench /
sra_theoremqa / bfcl / metatool / gorilla_hf; fitted-gstart 66 / 71 / 21 / 0.8 / 3.9 s.

Run: python experiments/general_fitted_table.py --general DIR [--general-tasks DIR] [--json FILE]
"""

# ruff: noqa: B023  (the per-dataset helpers are closures used only within their own loop iteration)
from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.lab.evaluation.cache import EmbeddingCache
from skillsight_fast.lab.evaluation.datasets import FIT_DATASETS, SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.library.skills import namedesc_text
from skillsight_fast.metrics import DEPTH, bootstrap_diff, per_query
from skillsight_fast.models import load_encoder
from skillsight_fast.models.contextual import ContextualEncoder
from skillsight_fast.models.fitted import (
    Bags,
    FitConfig,
    bags_of_slots,
    encode_bags,
    fit_query_table,
    training_pieces,
)
from skillsight_fast.models.general import load_general_table, merge_prior
from skillsight_fast.models.static import load_static_encoder

DATA_ROOT = Path(__file__).parents[1] / "data"
FIT = FitConfig(objective="mse+kl", epochs=14.0)
BIGRAM_BUCKETS = 1 << 15
METRICS = ("recall@10", "ndcg@10")


def token_rows(static, texts: list[str], cls: int, sep: int, max_length: int = 256) -> list[np.ndarray]:
    """What the lookup pools: [CLS], the first max_length - 2 word pieces, [SEP]."""
    return [np.concatenate([[cls], ids[: max_length - 2], [sep]]) for ids in static.tokenize(texts)]


def extra_tasks(docs) -> list[tuple[str, int]]:
    """Two more templated task-like texts per skill (arm ``+tasks``)."""
    out = []
    for row, d in enumerate(docs):
        parts = [p.strip() for p in re.split(r"(?<=[.!?])\s+|\n+", d.description or "") if len(p.split()) >= 3]
        if not parts:
            continue
        s = parts[0].rstrip(".!? ")
        s = s[:1].lower() + s[1:]
        words = re.sub(r"[-_/]+", " ", d.name).strip()
        out.append((f"Can you help me {s}?", row))
        out.append((f"I need to {s} ({words})" if words else f"I need to {s}", row))
    return out


def with_bigrams(rows: list[np.ndarray], slot_of: np.ndarray, m: int) -> Bags:
    """Bags of the token slots plus hashed bigram slots ``m + hash(a, b) % BIGRAM_BUCKETS`` of consecutive
    word pieces (special tokens excluded)."""
    out = []
    for ids in rows:
        ids = np.asarray(ids, np.int64)
        inner = ids[1:-1]
        big = (inner[:-1] * 1000003 + inner[1:]) % BIGRAM_BUCKETS + len(slot_of) if inner.size > 1 else inner[:0]
        out.append(np.concatenate([ids, big]))
    ext = np.concatenate([slot_of, m + np.arange(BIGRAM_BUCKETS)])
    return bags_of_slots(out, ext)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--general", required=True, help="folder of the general table (scripts/build_general_table.py)")
    ap.add_argument("--general-tasks", help="folder of the general+tasks table")
    ap.add_argument("--datasets", nargs="+", default=list(SHARED_DATASETS))
    ap.add_argument("--arms", nargs="*", default=["fitted-scaled", "fitted-gstart", "fitted-gfill",
                                                  "fitted-gstart+tasks", "fitted-gstart+bigrams"])
    ap.add_argument("--start", choices=["general", "general+tasks"], default=None,
                    help="the general table the per-library arms start from (default: the better one over "
                         "the fit sets, read from --json when present, else general)")
    ap.add_argument("--bootstrap", type=int, default=2000)
    args = ap.parse_args()
    enc = load_encoder()
    qenc = load_encoder(int8=True)
    out: dict[str, dict] = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).is_file() else {}
    generals = {"general": load_general_table(args.general)}
    if args.general_tasks:
        generals["general+tasks"] = load_general_table(args.general_tasks)
    start = args.start or "general"
    if args.start is None and all(n in out and "general+tasks" in out[n] for n in FIT_DATASETS):
        loss = {g: np.mean([-out[n][g]["recall@10_diff"][0] for n in FIT_DATASETS]) for g in ("general", "general+tasks")}
        start = min(loss, key=loss.get)
    print("per-library arms start from", start, flush=True)
    for name in args.datasets:
        ds = load_dataset(DATA_ROOT / name)
        ctx = EvalContext(ds, query_int8=False, encoder=enc)
        mapped_ctx = EvalContext(ds, query_int8=None, query_encoder="static-mapped", encoder=enc)
        static = load_static_encoder(mapped_ctx.query_model)
        vocab = static.tokenizer.get_vocab()
        cls, sep = vocab["[CLS]"], vocab["[SEP]"]
        n_vocab = max(vocab.values()) + 1
        meta: dict[str, object] = {}
        ids, ctx_table = ctx.contextual_table
        index = ctx.index(IndexConfig())
        basis, docs_perp = index.dense.basis, index.dense.embeddings_perp
        pieces, owner = training_pieces(ds.docs)
        store = EmbeddingCache(ctx.cache, f"{qenc.model_id}-int8", qenc.checksum, "fitpiece")
        piece_emb = store.get(pieces, qenc.encode)
        nd_texts = [namedesc_text(d.name, d.description) for d in ds.docs]
        texts = pieces + nd_texts + list(ds.texts)
        targets = np.vstack([piece_emb, ctx.namedesc_emb, ctx.doc_emb]).astype(np.float32)
        owners = np.concatenate([owner, np.arange(len(ds.docs)), np.arange(len(ds.docs))])
        extra = extra_tasks(ds.docs)
        extra_texts = [t for t, _ in extra]
        extra_emb = store.get(extra_texts, qenc.encode) if extra_texts else np.zeros((0, targets.shape[1]), np.float32)
        extra_owner = np.asarray([r for _, r in extra], np.int64)
        rows_train = token_rows(static, texts, cls, sep)
        rows_extra = token_rows(static, extra_texts, cls, sep) if extra_texts else []
        meta.update(n_train=len(texts), n_extra_tasks=len(extra_texts), table_rows=int(ids.size))
        mapped = dict(zip(ds.query_texts, mapped_ctx.query_emb))
        def fallback(ts, mapped=mapped):
            return np.stack([mapped[t] for t in ts])
        qtexts = list(ds.query_texts)

        def lookup(t_ids: np.ndarray, table: np.ndarray) -> ContextualEncoder:
            return ContextualEncoder(static, t_ids, table, fallback=fallback, max_length=256)

        res_ds: dict[str, dict] = {"_meta": meta}
        base: dict[str, np.ndarray] = {}

        def score(arm: str, qv: np.ndarray) -> None:
            ranked = index.search_vectors(qv, qtexts, DEPTH, explain=False).ids
            per = per_query(ranked, ds.gold)
            row: dict[str, object] = {m: 100 * float(per[m].mean()) for m in METRICS}
            if not base:
                base.update(per)
            else:
                for m in METRICS:
                    row[f"{m}_diff"] = [100 * x for x in bootstrap_diff(per[m], base[m], n_boot=args.bootstrap, seed=0)]
            res_ds[arm] = row
            diff = row.get("recall@10_diff")
            print(f"{name:14s} {arm:22s} R@10 {row['recall@10']:5.1f} nDCG@10 {row['ndcg@10']:5.1f}"
                  + (f"  R@10 {diff[0]:+.1f} [{diff[1]:+.1f}, {diff[2]:+.1f}]" if diff else ""), flush=True)

        def fit(t_ids: np.ndarray, prior: np.ndarray, bigrams: bool = False, tasks: bool = False):
            slot_of = np.full(n_vocab, -1, np.int64)
            slot_of[t_ids] = np.arange(t_ids.size)
            rows = rows_train + (rows_extra if tasks else [])
            tg = np.vstack([targets, extra_emb]) if tasks else targets
            ow = np.concatenate([owners, extra_owner]) if tasks else owners
            if bigrams:
                bags = with_bigrams(rows, slot_of, t_ids.size)
                prior = np.vstack([prior, np.zeros((BIGRAM_BUCKETS, prior.shape[1]), np.float32)])
            else:
                bags = bags_of_slots(rows, slot_of)
            res = fit_query_table(bags, tg, prior, basis, docs_perp=docs_perp, owner=ow, config=FIT)
            return res, slot_of

        score("transformer", ctx.query_emb)
        score("contextual", lookup(ids, ctx_table).encode(qtexts))
        for g, (g_ids, g_table) in generals.items():
            score(g, lookup(g_ids, g_table).encode(qtexts))
        g_ids, g_table = generals[start]
        meta["start"] = start
        for arm in args.arms:
            t0 = time.perf_counter()
            if arm == "fitted-scaled":
                t_ids, prior = ids, ctx_table
            elif arm == "fitted-gfill":
                only = ~np.isin(g_ids, ids)
                lib_norm = float(np.median(np.linalg.norm(ctx_table, axis=1)))
                g_norm = float(np.median(np.linalg.norm(g_table, axis=1)))
                t_ids = np.concatenate([ids, g_ids[only]])
                prior = np.vstack([ctx_table, g_table[only] * (lib_norm / g_norm)])
                order = np.argsort(t_ids)
                t_ids, prior = t_ids[order].astype(np.int32), np.ascontiguousarray(prior[order], np.float32)
            else:
                t_ids, prior = merge_prior(ids, ctx_table, g_ids, g_table)
            res, slot_of = fit(t_ids, prior, bigrams=arm.endswith("+bigrams"), tasks=arm.endswith("+tasks"))
            meta[f"{arm}_fit_s"] = round(res.seconds, 1)
            meta[f"{arm}_wall_s"] = round(time.perf_counter() - t0, 1)
            meta[f"{arm}_loss_first_last"] = [round(float(np.mean(res.history[:10])), 4),
                                              round(float(np.mean(res.history[-10:])), 4)]
            if arm.endswith("+bigrams"):
                qv = encode_bags(with_bigrams(token_rows(static, qtexts, cls, sep), slot_of, t_ids.size), res.table)
                empty = np.linalg.norm(qv, axis=1) == 0
                if empty.any():
                    qv[empty] = fallback([qtexts[i] for i in np.flatnonzero(empty)])
            else:
                qv = lookup(t_ids, res.table).encode(qtexts)
            score(arm, qv)
        print(name, json.dumps(meta), flush=True)
        out[name] = res_ds
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1) + "\n")
    fit_sets = [n for n in FIT_DATASETS if n in out]
    arms = sorted({a for n in out for a in out[n] if not a.startswith("_") and a != "transformer"})
    for arm in arms:
        losses = [-out[n][arm]["recall@10_diff"][0] for n in fit_sets if arm in out[n]]
        worst = [-out[n][arm]["recall@10_diff"][0] for n in out if arm in out[n]]
        if losses:
            print(f"{arm}: mean R@10 loss over the fit sets {np.mean(losses):.2f} "
                  f"({', '.join(f'{x:.1f}' for x in losses)}); worst over {len(worst)} sets {max(worst):.1f}")


if __name__ == "__main__":
    main()
