"""How many tasks keep no evidence token, and does a median-IDF fallback help them?

    python experiments/short_task_evidence.py                        # the five datasets in data/
    python experiments/short_task_evidence.py skillsbench,bfcl

Question. Q' (the evidence tokens, :meth:`SkillIndex.evidence_tokens`) drops the generic tokens T_g
(df >= 2 and IDF below Otsu's threshold). On skillsbench a token with df >= 18 of 3,434 is generic,
so a short task such as "merge two PDF files" can keep no evidence token and is ranked by the dense
side alone. What share of tasks has an empty Q' per dataset, and does a fallback help?

Declared rule (experiments/DECLARATIONS.md, fourth round, rule 4), no fitted constant: when Q'
would be empty, the lexical query is the task's known tokens whose IDF is above the corpus median
IDF. "IDF" is the index's idf(t) = ln((N + 1)/(df + 1)) + 1, the one T_g is cut from; "the corpus
median" is read two ways, both printed and both judged by the rule:

- ``median-vocab``: the median over the vocabulary (each distinct token once). Structurally, a
  task with empty Q' has only generic known tokens (IDF <= Otsu's tau), so this fallback is empty
  whenever the vocabulary median is above tau, which is what a Zipfian vocabulary gives (most
  tokens have df = 1). The table prints both values.
- ``median-occurrence``: the median over the corpus's token occurrences (each document-token
  incidence once, i.e. the df-weighted median), the IDF of a typical token of a typical document.

Everything else is the default index (Rule 1 decides SBC, BM25 over the evidence tokens, w = 0.25,
K = 300); only the lexical stage's query tokens change, through ``search_vectors(lexical_stage=)``.
Selection (declared): fit score (R@10 + nDCG@10)/2 on skillsbench, sra_theoremqa, bfcl; a variant
must be >= the default on all three and strictly higher on the mean; ties within 0.05 keep the
default. metatool and gorilla_hf are reported only.

Result (2026-12-03, about 1 min): empty Q' on skillsbench 2 of 73 tasks (2.7%), sra_theoremqa 102 of
747 (13.7%), bfcl 93 of 2,501 (3.7%; 12 have no known token at all), metatool 21 of 2,000 (1.1%),
gorilla_hf 2 of 834 (0.2%). The vocabulary median IDF is above Otsu's tau on all five (e.g.
skillsbench 8.45 against 6.20), so ``median-vocab`` changes no task: a tie, the default stays.
``median-occurrence`` (3.4 on the skill libraries) gives 2 / 95 / 79 / 0 / 2 tasks a lexical query and
PASSES the rule: fit scores 78.68 (=), 73.72 (+0.32), 83.44 (+0.11), mean 78.61 against 78.47;
sra_theoremqa +0.3 [+0.0, +0.7] R@10, +0.4 [+0.1, +0.8] nDCG@10; bfcl +0.1 [+0.0, +0.2] both;
confirm sets unchanged (metatool 81.0/66.5, gorilla_hf 44.1/27.4). It is not adopted: the
name + description vector of experiments/field_aware_scoring.py also passes with a higher mean
(79.32), and the declared rule takes the highest mean among passing variants (docs/ADAPTIVE.md,
"Fourth round").
"""

from __future__ import annotations

import sys

import numpy as np
from selection_rule import BASELINE, DEFAULT, Report, context, datasets

from skillsight_fast.metrics import DEPTH


def occurrence_median(idf: np.ndarray, df: np.ndarray) -> float:
    """Median of idf over token occurrences in documents (each token counted df times)."""
    order = np.argsort(idf, kind="stable")
    cum = np.cumsum(df[order].astype(np.int64))
    return float(idf[order][np.searchsorted(cum, cum[-1] / 2.0)])


def fallback_tokens(idx, texts: list[str], median: float) -> tuple[np.ndarray, np.ndarray]:
    """Q' per task, or, where Q' is empty, the known tokens with idf > ``median`` (CSR)."""
    ev_t, ev_p = idx.evidence_tokens(texts)
    all_t, all_p = idx.evidence_tokens(texts, exclude=np.zeros_like(idx.lexical.generic))
    out: list[np.ndarray] = []
    ptr = np.zeros(len(texts) + 1, np.int64)
    for i in range(len(texts)):
        toks = ev_t[ev_p[i] : ev_p[i + 1]]
        if toks.size == 0:
            known = all_t[all_p[i] : all_p[i + 1]]
            toks = known[idx.lexical.idf[known] > median]
        out.append(toks)
        ptr[i + 1] = ptr[i] + toks.size
    return (np.concatenate(out).astype(np.int32) if out else np.zeros(0, np.int32)), ptr


def main() -> None:
    report = Report()
    stats = [("| dataset | tasks | empty Q' | no known token | Otsu tau | median idf (vocab) | "
              "median idf (occurrence) | tasks changed (vocab / occurrence) |"),
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for name in datasets(sys.argv):
        ctx = context(name)
        ds = ctx.dataset
        idx = ctx.index(BASELINE)
        texts = ds.query_texts
        _ev_t, ev_p = idx.evidence_tokens(texts)
        _all_t, all_p = idx.evidence_tokens(texts, exclude=np.zeros_like(idx.lexical.generic))
        empty = np.diff(ev_p) == 0
        unknown = np.diff(all_p) == 0
        idf, df = idx.lexical.idf, idx.lexical.lexicon.df()
        tau = float(idf[idx.lexical.generic].max()) if idx.lexical.generic.any() else float("nan")
        medians = {"median-vocab": float(np.median(idf)), "median-occurrence": occurrence_median(idf, df)}
        report.add(name, DEFAULT, ctx.search(idx), ds.gold)
        changed = []
        for label, med in medians.items():
            terms, ptr = fallback_tokens(idx, texts, med)
            changed.append(int(((np.diff(ptr) > 0) & empty).sum()))

            def stage(cand: np.ndarray, _t: np.ndarray, _p: np.ndarray, terms=terms, ptr=ptr,
                      idx=idx) -> np.ndarray:
                return idx.lexical_scores(cand, terms, ptr)

            ids = idx.search_vectors(ctx.query_emb, texts, DEPTH, lexical_stage=stage, explain=False).ids
            report.add(name, f"fallback {label}", ids, ds.gold)
        stats.append(f"| {name} | {len(texts)} | {empty.sum()} ({100 * empty.mean():.1f}%) | {unknown.sum()} | "
                     f"{tau:.3f} | {medians['median-vocab']:.3f} | {medians['median-occurrence']:.3f} | "
                     f"{changed[0]} / {changed[1]} |")
    print("\n".join(stats))
    print()
    print(report.table())


if __name__ == "__main__":
    main()
