"""Does continuing the ranking with RRF of the index's own lists hold tool search at every depth?

Question (issue 44)
    Measured as shipped (the tool catalogue's config, ``tools.catalog.tool_index_config``, with the
    tasks through the lookup-first cascade), the fused ranking (Eq. 15 over the candidate set) can
    fall below reciprocal rank fusion (RRF) of dense and BM25 deeper in the list (R@20, R@50) and on
    bfcl's nDCG@10. A tool-search proxy or an LLM that reads 20-50 tools meets that depth. Does a
    ranking that keeps the fused head and continues with RRF of the index's own dense and lexical
    lists (``engine.depth.head_then_rrf``) hold at every depth, without losing the head?

Variants (declared 08:22 UTC, 5 Dec 2026, before any run of this file; simplest first)
    ``shipped``           what ships today (the reference; Eq. 15 over the candidate set C).
    ``head10+rrf-cand``   positions 1-10 from ``shipped``; the rest of C in the order of RRF(rank by
                          s⊥, rank by the index's lexical side) over C. Everything it reads is already
                          computed by a search today (the cheapest to wire).
    ``head10+rrf``        positions 1-10 from ``shipped``; the rest of the union of the s⊥ list (C, in
                          s⊥ order) and the index's lexical side's top L over the *whole* catalogue
                          (L = |C|), in RRF order: the fusion continued past the candidate set.
    ``rrf-index``         RRF of those two lists from position 1 (no fused head).
    H = 10 is not fitted: it is the depth of the headline metrics (R@10, nDCG@10, Completeness@10)
    and of the lists an agent reads first. RRF's k = 60 (Cormack et al. 2009) everywhere. The
    lexical side is the index's own (BM25 over every known task token for a tool catalogue, over the
    evidence tokens Q' for a skill library), the dense side s⊥; the tasks' vectors are the shipped
    path's (``EvalContext.shipped_vectors``).

Adoption rule (declared before the run)
    Metrics M = R@10, nDCG@10, R@20, R@50, Completeness@10. "Not worse than X" = the paired bootstrap
    95 % interval (2,000 resamples, seed 0) of (variant − X) reaches 0, on every metric of M.
    Baselines: the ``skillsight eval`` methods dense, BM25 and RRF; "best" = the highest mean, per metric.
    1. Fit set for tool catalogues: bfcl. A variant qualifies when it is not worse than the best
       baseline and not worse than ``shipped``. The skill fit sets (skillsbench, sra_theoremqa) are
       run and reported (not worse than ``shipped``?), but the change is scoped to tool catalogues
       (the issue asks the skill datasets unchanged), so they do not enter the choice; they run
       only with ``--skills`` (amended 08:34, before any run: the machine's load made their
       encoding the longest part).
    2. If ``shipped`` qualifies and no other variant does, nothing changes. Among qualifying
       variants other than ``shipped`` the one with the highest bfcl mean of R@20 and R@50 wins; a
       simpler one (order above) whose bfcl R@50 interval against the winner contains 0 takes its
       place. If ``shipped`` qualifies, a variant replaces it only if it is also strictly higher on
       bfcl R@50 (point estimate).
    3. Confirm sets (looked at only for ``shipped`` and the chosen variant): metatool (its fixed
       2,000-task subset), gorilla_hf and metatool_multi (497 two-tool tasks, read from a clone of
       HowieHwong/MetaTool at the commit of data/metatool). The chosen variant is adopted for tool
       catalogues only if it is not worse than the best baseline on all three.
    Reported for every variant, not part of the rule: the depths k in 1..50 at which its R@k is
    significantly below RRF's (the "every depth" of the issue).

Result (08:46-09:18 UTC, 5 Dec 2026, load 17-23 on two cores; results/experiments/tool_depth_continuation.json)
    Adopted by the rule: ``head10+rrf-cand``, for tool catalogues. On bfcl what ships fails the
    criterion (R@50 -0.5 [-0.9, -0.1] against RRF); ``head10+rrf-cand`` passes it (R@50 -0.3
    [-0.7, +0.0], R@20 +0.6 [+0.1, +1.2], nDCG@10 -0.2 [-0.9, +0.6], R@10 +1.7 [+0.7, +2.6], C@10
    +1.5 [+0.5, +2.6], all against RRF) and is not worse than shipped (R@20 +0.7 [+0.2, +1.2], R@50
    +0.1 [-0.2, +0.4]; positions 1-10 identical). ``head10+rrf`` (past the candidate set) is
    better at depth (R@20 +0.9 [+0.3, +1.4], R@50 +0.3 [-0.0, +0.7] vs shipped) but its R@50 interval
    against the simpler one contains 0, so the simpler one takes its place, as declared.
    ``rrf-index`` fails (nDCG@10 -0.7 [-1.3, -0.1] vs RRF). Confirm sets: the chosen variant passes
    the criterion on metatool (best baseline dense), gorilla_hf (RRF) and metatool_multi (dense), so
    it is adopted. Disclosed: on the confirm sets it is *below* shipped at depth 20 (point estimates
    metatool 85.6 vs 87.2, gorilla_hf 56.7 vs 57.9, metatool_multi 85.6 vs 86.3; the rule compared
    the confirm sets with the baselines only), where BM25 is weak (metatool BM25 R@10 51.6), so the
    RRF continuation promotes weak lexical matches. Wired (same day): a tool catalogue's index
    records ``continuation="rrf"`` and ``SkillIndex.search`` / ``ShardedIndex.search`` apply it
    (``engine.result.continued_result``); ``bench/tool_depth_table.py`` measures it as shipped and
    gives the same numbers as this variant. "Every depth": depths k in 1..50 where R@k is
    significantly below RRF's on bfcl: shipped 1, 2, 32, 34-37, 46-50; head10+rrf-cand 1, 2, 35-40,
    48; head10+rrf 1, 2; none on the other sets. k = 1, 2 is the fused head (R@1/R@2), which no
    variant here changes.

Run
    PYTHONPATH=. nice python experiments/tool_depth_continuation.py --metatool-repo PATH/TO/MetaTool
    [--out results/experiments/tool_depth_continuation.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from skillsight_fast.engine.depth import head_then_rrf  # noqa: E402
from skillsight_fast.engine.lexical_candidates import add_lexical_candidates  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import Dataset, load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import METHODS, EvalContext, shipped_config  # noqa: E402
from skillsight_fast.lab.evaluation.tool_search import (  # noqa: E402
    DEPTH_RULE_METRICS,
    RULE_BASELINES,
    TABLE_METRICS,
    curve_losses,
    depth_metrics,
    fmt_diff,
    not_worse,
    recall_curve,
    rule_check,
)
from skillsight_fast.metrics import DEPTH, bootstrap_diff, bootstrap_mean  # noqa: E402

FIT_TOOLS, FIT_SKILLS = ("bfcl",), ("skillsbench", "sra_theoremqa")
CONFIRM = ("metatool", "gorilla_hf", "metatool_multi")
VARIANTS = ("shipped", "head10+rrf-cand", "head10+rrf", "rrf-index")  # simplest first
HEAD = 10


def lists(ctx: EvalContext, index: Any, vectors: np.ndarray) -> dict[str, np.ndarray]:
    """The shipped ranking, the candidate set in s⊥ order, the lexical order within it, and the
    lexical side's top |C| over the whole catalogue (ids best first, -1 padding)."""
    texts = ctx.dataset.query_texts
    d = index.decisions
    # what shipped when this ran: the fused order to the end (the index now continues by RRF itself)
    shipped = index.search_vectors(vectors, texts, DEPTH, explain=False, continuation="fused").ids
    q_perp = index.remove_background(vectors)
    cand, s_dense = index.dense_candidates(q_perp, max(d.candidates, DEPTH))
    if d.lexical_candidates:
        cand, s_dense = add_lexical_candidates(index, q_perp, *index.evidence_tokens(texts), cand,
                                               d.lexical_candidates)
    if d.lexical == "bm25" and d.lexical_evidence == "all":
        terms, ptr = index.evidence_tokens(texts, exclude=index.lexical.stopword_flags)
    else:
        terms, ptr = index.evidence_tokens(texts)
    n_docs = len(index)
    dense_order = np.where(cand >= 0, cand, -1)
    order = np.argsort(-np.where(cand >= 0, s_dense, -np.inf), axis=1, kind="stable")
    dense_list = np.take_along_axis(dense_order, order, axis=1)
    s_lex_c = index.lexical_scores(cand, terms, ptr, side=d.lexical)
    lo = np.argsort(-np.where(cand >= 0, s_lex_c, -np.inf), axis=1, kind="stable")
    lex_cand = np.take_along_axis(cand, lo, axis=1)
    lex_cand = np.where(np.take_along_axis(s_lex_c, lo, axis=1) > 0, lex_cand, -1)  # no score, no rank
    every = np.broadcast_to(np.arange(n_docs, dtype=np.int64), (len(texts), n_docs))
    s_all = index.lexical_scores(np.ascontiguousarray(every), terms, ptr, side=d.lexical)
    depth = cand.shape[1]
    top = np.argsort(-s_all, axis=1, kind="stable")[:, :depth]
    lex_all = np.where(np.take_along_axis(s_all, top, axis=1) > 0, top, -1)
    return {"shipped": shipped, "dense": dense_list, "lex_cand": lex_cand, "lex_all": lex_all}


def rank_variants(ls: dict[str, np.ndarray], variants: tuple[str, ...]) -> dict[str, np.ndarray]:
    out = {}
    for v in variants:
        if v == "shipped":
            out[v] = ls["shipped"]
        elif v == "head10+rrf-cand":
            out[v] = head_then_rrf(ls["shipped"], ls["dense"], ls["lex_cand"], DEPTH, HEAD)
        elif v == "head10+rrf":
            out[v] = head_then_rrf(ls["shipped"], ls["dense"], ls["lex_all"], DEPTH, HEAD)
        elif v == "rrf-index":
            out[v] = head_then_rrf(ls["shipped"], ls["dense"], ls["lex_all"], DEPTH, 0)
        else:
            raise ValueError(v)
    return out


def dataset(name: str, metatool_repo: str | None) -> Dataset:
    if name == "metatool_multi":
        if not metatool_repo:
            raise SystemExit("metatool_multi needs --metatool-repo (a clone of HowieHwong/MetaTool)")
        sys.path.insert(0, str(ROOT / "experiments"))
        from tool_catalogue_confirm_metatool_multi import multi_tool_dataset

        ds, _ = multi_tool_dataset(Path(metatool_repo))
        ds.meta = {**load_dataset(ROOT / "data" / "metatool").meta, "name": "metatool_multi"}
        return ds
    return load_dataset(ROOT / "data" / name)


def run_dataset(name: str, variants: tuple[str, ...], metatool_repo: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    ds = dataset(name, metatool_repo)
    ctx = EvalContext(dataset=ds)
    ranked = {b: METHODS[b](ctx) for b in RULE_BASELINES}
    index = ctx.index(shipped_config(ds))
    vectors = ctx.shipped_vectors(index)
    ranked |= rank_variants(lists(ctx, index, vectors), variants)
    per = {m: depth_metrics(r, ds.gold) for m, r in ranked.items()}
    curves = {m: recall_curve(r, ds.gold) for m, r in ranked.items()}
    print(f"  {name}: {len(ds.queries)} tasks, {len(ds.docs)} docs, K = {index.decisions.candidates}, "
          f"cascade {ctx.notes.get('cascade')}, {time.perf_counter() - t0:.0f} s", flush=True)
    return {"per": per, "curves": curves, "n_tasks": len(ds.queries), "n_docs": len(ds.docs),
            "multi": int(sum(len(g) > 1 for g in ds.gold)), "cascade": ctx.notes.get("cascade"),
            "candidates": int(index.decisions.candidates)}


def table(name: str, per: dict[str, dict[str, np.ndarray]]) -> list[str]:
    lines = [f"{name}: " + " ".join(f"{m:>7}" for m in TABLE_METRICS)]
    for meth, vals in per.items():
        lines.append(f"  {meth:<16}" + " ".join(f"{100 * vals[m].mean():7.1f}" for m in TABLE_METRICS))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--metatool-repo", help="a clone of HowieHwong/MetaTool (for metatool_multi)")
    ap.add_argument("--out", default=str(ROOT / "results" / "experiments" / "tool_depth_continuation.json"))
    ap.add_argument("--skills", action="store_true", help="also run the skill fit sets (reported only)")
    args = ap.parse_args()
    skills = FIT_SKILLS if args.skills else ()
    res: dict[str, Any] = {"variants": VARIANTS, "head": HEAD, "fit": {}, "confirm": {}, "means": {},
                           "curve_losses_vs_rrf": {}, "datasets": {}}
    runs: dict[str, Any] = {}
    for n in FIT_TOOLS + skills:
        runs[n] = run_dataset(n, VARIANTS, args.metatool_repo)
        print("\n".join(table(n, runs[n]["per"])), flush=True)
    bfcl = runs["bfcl"]["per"]
    rule: dict[str, Any] = {}
    for v in VARIANTS:
        rec = {"vs_best_baseline": rule_check(bfcl[v], {b: bfcl[b] for b in RULE_BASELINES}, DEPTH_RULE_METRICS),
               "vs_shipped": not_worse(bfcl[v], bfcl["shipped"], DEPTH_RULE_METRICS)}
        rec["pass"] = rec["vs_best_baseline"]["pass"] and rec["vs_shipped"]["pass"]
        rec["skills_vs_shipped"] = {n: not_worse(runs[n]["per"][v], runs[n]["per"]["shipped"], DEPTH_RULE_METRICS)
                                    for n in skills}
        rule[v] = rec
        print(f"{v:<16} qualifies={rec['pass']}  bfcl vs best: " + "  ".join(
            f"{m} {fmt_diff(rec['vs_best_baseline'][m])} ({rec['vs_best_baseline'][m]['best']})"
            for m in DEPTH_RULE_METRICS), flush=True)
        print(f"{'':<16} vs shipped: " + "  ".join(f"{m} {fmt_diff(rec['vs_shipped'][m])}" for m in DEPTH_RULE_METRICS))
        for n in skills:
            r = rec["skills_vs_shipped"][n]
            print(f"{'':<16} {n} vs shipped: " + "  ".join(f"{m} {fmt_diff(r[m])}" for m in DEPTH_RULE_METRICS))
    res["fit"]["rule"] = rule
    others = [v for v in VARIANTS[1:] if rule[v]["pass"]]
    chosen: str | None = "shipped" if rule["shipped"]["pass"] else None
    if others:
        def depth_mean(v: str) -> float:
            return float((bfcl[v]["R@20"].mean() + bfcl[v]["R@50"].mean()) / 2)

        best = max(others, key=depth_mean)
        for v in others:  # simplest first
            d = bootstrap_diff(bfcl[v]["R@50"], bfcl[best]["R@50"])
            if v == best or d[1] <= 0 <= d[2]:
                best = v
                break
        if chosen is None or bfcl[best]["R@50"].mean() > bfcl["shipped"]["R@50"].mean():
            chosen = best
    res["chosen"] = chosen
    print(f"chosen on bfcl: {chosen}", flush=True)
    look = tuple(dict.fromkeys(["shipped", *([chosen] if chosen else [])]))
    for n in CONFIRM:
        runs[n] = run_dataset(n, look, args.metatool_repo)
        print("\n".join(table(n, runs[n]["per"])), flush=True)
        per = runs[n]["per"]
        res["confirm"][n] = {v: rule_check(per[v], {b: per[b] for b in RULE_BASELINES}, DEPTH_RULE_METRICS)
                             for v in look}
        for v, rec in res["confirm"][n].items():
            print(f"  {n} {v:<16} pass={rec['pass']}  " + "  ".join(
                f"{m} {fmt_diff(rec[m])} ({rec[m]['best']})" for m in DEPTH_RULE_METRICS), flush=True)
    adopted = bool(chosen and chosen != "shipped" and all(res["confirm"][n][chosen]["pass"] for n in CONFIRM))
    res["adopted"] = chosen if adopted else None
    print(f"adopted for tool catalogues: {res['adopted']}", flush=True)
    for n, r in runs.items():
        res["datasets"][n] = {k: r[k] for k in ("n_tasks", "n_docs", "multi", "cascade", "candidates")}
        res["means"][n] = {m: {k: [float(v[k].mean()), *bootstrap_mean(v[k])] for k in TABLE_METRICS}
                           for m, v in r["per"].items()}
        res["curve_losses_vs_rrf"][n] = {m: curve_losses(c, r["curves"]["rrf"]) for m, c in r["curves"].items()
                                         if m not in RULE_BASELINES}
        print(f"  {n}: depths where R@k is significantly below RRF: {res['curve_losses_vs_rrf'][n]}")
    res["paired_vs_baselines"] = {
        n: {v: {b: {m: dict(zip(("diff", "low", "high"), bootstrap_diff(r["per"][v][m], r["per"][b][m])))
                    for m in TABLE_METRICS} for b in RULE_BASELINES}
            for v in r["per"] if v not in RULE_BASELINES}
        for n, r in runs.items()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print(markdown(res))
    print(f"wrote {args.out}")
    return 0


def markdown(res: dict[str, Any]) -> str:
    """The depth tables of docs/TOOLS.md from the result JSON (means with 95 % intervals, then the
    paired differences of each SkillSight row to RRF)."""
    cols = ("R@3", "R@5", "R@10", "R@20", "R@50", "C@10", "nDCG@10")
    out: list[str] = []
    for n, means in res["means"].items():
        d = res["datasets"][n]
        out += [f"\n**{n}** ({d['n_docs']:,} tools, {d['n_tasks']:,} tasks, {d['multi']} needing several tools)\n",
                "| method | " + " | ".join(cols) + " |", "|---|" + "---:|" * len(cols)]
        for m, v in means.items():
            out.append(f"| {m} | " + " | ".join(f"{100 * v[c][0]:.1f} [{100 * v[c][1]:.1f}, {100 * v[c][2]:.1f}]"
                                                 for c in cols) + " |")
        for m, p in res["paired_vs_baselines"][n].items():
            out.append(f"| Δ {m} − rrf | " + " | ".join(fmt_diff(p["rrf"][c]) for c in cols) + " |")
    return "\n".join(out)


if __name__ == "__main__":
    raise SystemExit(main())
