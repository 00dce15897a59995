"""Markdown tables of evaluation results (``skillsight eval --markdown``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def results_markdown(objs: list[dict[str, Any]]) -> str:
    """Main table: one block per dataset, R@1 / R@10 / nDCG@10 / MRR@10 per method."""
    out = []
    names = [o["dataset"] for o in objs]
    methods: list[str] = []
    for o in objs:
        methods += [m for m in o["results"] if m not in methods]
    out.append("### R@10 / nDCG@10 (%) per dataset\n")
    out.append("| method | " + " | ".join(names) + " |")
    out.append("|---|" + "---:|" * len(names))
    for m in methods:
        cells = []
        for o in objs:
            r = o["results"].get(m)
            cells.append(f"{_pct(r['recall@10'])} / {_pct(r['ndcg@10'])}" if r else "–")
        label = m
        rr = [o.get("notes", {}).get(m) for o in objs if o.get("notes", {}).get(m)]
        if rr and not rr[0].get("trained", True):
            label = f"{m} (untrained head, first {rr[0]['n_queries']} queries: not meaningful)"
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")
    for o in objs:
        out.append(f"### {o['dataset']} ({o['n_docs']:,} docs, {o['n_queries']:,} queries)\n")
        out.append("| method | R@1 | R@10 | R@50 | nDCG@10 | MRR@10 | Hit@10 | Compl@10 | R@10 95% CI | n queries | s |")
        out.append("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
        for m, r in o["results"].items():
            ci = o.get("ci", {}).get(m, {}).get("recall@10")
            ci_s = f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""
            out.append(f"| {m} | {_pct(r['recall@1'])} | {_pct(r['recall@10'])} | {_pct(r['recall@50'])} | "
                       f"{_pct(r['ndcg@10'])} | {_pct(r['mrr@10'])} | {_pct(r['hit@10'])} | "
                       f"{_pct(r['completeness@10']) if 'completeness@10' in r else '–'} | {ci_s} | "
                       f"{o.get('n_queries_by_method', {}).get(m, o['n_queries'])} | {o.get('seconds', {}).get(m, '')} |")
        paired = o.get("paired", {})
        if paired:
            out.append("\nPaired bootstrap (2,000 resamples over queries, seeded), difference in points [95% CI]:\n")
            out.append("| comparison | ΔR@10 | ΔnDCG@10 |")
            out.append("|---|---|---|")
            for name, v in paired.items():
                cells = [f"{100*v[k]['diff']:+.1f} [{100*v[k]['low']:+.1f}, {100*v[k]['high']:+.1f}]"
                         for k in ("recall@10", "ndcg@10")]
                out.append(f"| {name} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out) + "\n"


def ablation_markdown(abl: dict[str, Any]) -> str:
    """One table per ablation axis: R@10 / nDCG@10 per dataset and setting."""
    out = []
    for axis, block in abl.get("axes", {}).items():
        if not block.get("results"):
            continue  # e.g. the chunk axis when run without --chunks
        out.append(f"### {axis}\n")
        if block.get("note"):
            out.append(block["note"] + "\n")
        datasets = list(block["results"])
        settings: list[str] = []
        for d in datasets:
            settings += [s for s in block["results"][d] if s not in settings]
        out.append("| setting | " + " | ".join(datasets) + " |")
        out.append("|---|" + "---:|" * len(datasets))
        for s in settings:
            cells = []
            for d in datasets:
                r = block["results"][d].get(s)
                cells.append(f"{_pct(r['recall@10'])} / {_pct(r['ndcg@10'])}" if r else "–")
            out.append(f"| {s} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out) + "\n"


def write_markdown(objs: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("# Evaluation results\n\n" + results_markdown(objs))


NOTES = """## Notes (read before quoting numbers)

- **Encoder**: all-MiniLM-L6-v2 (fp32 ONNX, first 256 tokens of `name\\ndescription\\nbody`) for every
  dense method; the paper used Qwen3-Embedding-0.6B, so absolute numbers are not comparable to it.
- **Proxy data**: sra_theoremqa uses TheoremQA definitions as gold skills and the shared skill pool
  as distractors (not SRA-Bench's corpus); skillsbench has only 73 queries (95% intervals of about
  ±9 points); metatool uses the fixed 2,000-query subset (`--all-queries` for all 20,544).
- **dense+rerank**: the cross-encoder has the ms-marco-MiniLM-L-6-v2 architecture built from the
  all-MiniLM-L6-v2 weights with an **untrained, seeded 1-logit head**: no trained cross-encoder is
  obtainable offline. Its row is **not meaningful for quality**, only a check that the code path runs
  (and a cost reference: ~0.1–0.2 s per pair on 2 cores). It is scored on the first 10 queries only.
  `--cross-encoder PATH` evaluates a real one.
- **skillsight** is the adaptive default (docs/ADAPTIVE.md: SBC by Rule 1, Eq. 15 weight 0.25, BM25
  with term frequencies over the evidence tokens as the lexical side); **skillsight-paper** is the
  method as written in METHOD.md (unweighted Otsu, effective rank, LEC, Eq. 15 with weight 1, K = 300).
- Ties in score-based rankings (LEC, BM25, TF-IDF, SPLADE, RRF) are broken by a seeded shuffle, never
  by corpus order (the gold documents come first in the composed corpora).
"""


def _chunk_sentence(abl: dict[str, Any]) -> str:
    """What the head-vs-chunk-mean axis showed, or that it was not run."""
    block = abl.get("axes", {}).get("doc embedding", {})
    if not block.get("results"):
        return ("The head-vs-chunk-mean document embedding axis is implemented (`--ablations --chunks`) but was "
                "not run here (it encodes up to 8x the corpus, ~1 h on 2 shared cores).")
    res = block["results"]
    wins = [d for d, r in res.items() if len(r) == 2 and
            list(r.values())[1]["recall@10"] > next(iter(r.values()))["recall@10"]]
    counts = [v.get("mean_chunks") for r in res.values() for v in r.values() if v.get("mean_chunks")]
    per_doc = f"; {min(counts):.1f}–{max(counts):.1f} chunks per document on average here" if counts else ""
    verdict = ("the chunk mean wins on " + ", ".join(wins)) if wins else "the chunk mean loses on every dataset run"
    return ("Document embedding (head = the first 256 tokens, the default, vs the mean of the embeddings of up "
            f"to 8 consecutive 256-token chunks{per_doc}): {verdict}, so the "
            "head is kept.")


def compose(eval_json: Path, ablations_json: Path | None, extra_json: list[Path], out: Path, command: str) -> None:
    """docs/RESULTS.md from the raw JSON outputs in results/."""
    import json

    data = json.loads(eval_json.read_text())
    objs = data.get("datasets", [data])
    for extra in extra_json:  # rows of methods run separately (e.g. splade), merged by dataset
        if not extra.is_file():
            continue
        e = json.loads(extra.read_text())
        for eo in e.get("datasets", [e]):
            for o in objs:
                if o["dataset"] == eo["dataset"]:
                    for key in ("results", "n_queries_by_method", "ci", "seconds"):
                        o.setdefault(key, {}).update(eo.get(key, {}))
    parts = ["# Evaluation results\n", f"Regenerate everything: `{command}`\n", NOTES, "## Main table\n",
             results_markdown(objs)]
    stats_rows = ["## Statistics behind the adaptive rules (per dataset)\n",
                  ("| dataset | generic share g | doc background energy e_D | query background energy e_Q | "
                   "SBC applied | lexical side | lexical weight | paper r | size of T_g |"),
                  "|---|---:|---:|---:|---|---|---:|---:|---:|"]
    for o in objs:
        a = o.get("stats", {}).get("adaptive")
        p = o.get("stats", {}).get("paper_index", {})
        if a:
            stats_rows.append(f"| {o['dataset']} | {a['generic_share']:.3f} | {a['doc_background_energy']:.3f} | "
                              f"{a.get('query_background_energy', float('nan')):.3f} | {a['decisions']['background']} | "
                              f"{a['decisions']['lexical']} | {a['decisions']['lexical_weight']} | {p.get('rank', '')} | "
                              f"{p.get('n_generic', '')} |")
    parts.append("\n".join(stats_rows) + "\n")
    if ablations_json and ablations_json.is_file():
        abl = json.loads(ablations_json.read_text())
        parts.append("## Ablations (paper method, one axis changed at a time; R@10 / nDCG@10, %)\n")
        parts.append(ablation_markdown(abl))
        rows = ["### Defaults chosen on the fit datasets (mean R@10 over " + ", ".join(abl["fit_datasets"]) + ")\n",
                "| axis | paper setting | best setting |", "|---|---|---|"]
        for axis, c in abl["chosen"].items():
            rows.append(f"| {axis} | {c['paper_setting']} | {c['setting']} |")
        parts.append("\n".join(rows) + "\n")
        parts.append(
            "With 73 (skillsbench) and 747 (sra_theoremqa) queries most of these differences are inside the "
            "bootstrap noise (±9 and ±3 R@10 points). The one effect consistent on both fit datasets is that the "
            "paper's lexical weight is too high for MiniLM (Eq. 15 w = 0.5, convex α = 0.2–0.3 and RRF all beat "
            "w = 1 on both), and K = 1000 is worse than 300. The adaptive default takes the first finding "
            "(w = 0.25, docs/ADAPTIVE.md), fuses BM25 with term frequencies over the evidence tokens "
            "instead of LEC (chosen on the same two fit datasets, docs/ADAPTIVE.md), and keeps every other "
            "paper setting. " + _chunk_sentence(abl) + "\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts))


if __name__ == "__main__":  # pragma: no cover
    import sys

    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("results/eval")
    compose(root / "eval.json", root / "ablations.json", [root / "eval-splade.json"], Path("docs/RESULTS.md"),
            "bash bench/run_eval.sh")
