"""Can a library choose its own search setting from pseudo-queries built out of its own skills?

    python experiments/pseudo_query_self_calibration.py                  # the five datasets in data/
    python experiments/pseudo_query_self_calibration.py skillsbench,bfcl
    python experiments/pseudo_query_self_calibration.py --json grid.json   # also every setting's numbers
    python experiments/pseudo_query_self_calibration.py --time skillsbench  # what it would cost a build
    python experiments/pseudo_query_self_calibration.py --base current      # on today's default (information)

Question (issue 19, item 2). At build time, without labels, each library makes up to 200
pseudo-queries from itself: the description of a skill with >= 5 description tokens (analyzer
tokens), the skills chosen by a seeded hash (sha256 of ``"<seed>:<id>"``, ascending, seed 0), and
the answer is that skill. For the trial the description is removed from that skill's document: its
dense vector is the MiniLM encoding of the document without the description (every verbatim
occurrence of it, so a body that repeats the description, as in sra_theoremqa and metatool, loses
it too), and its lexical row (BM25 term frequencies and length) is that text's. Each pseudo-query
is scored leave-one-out: only its own skill is stripped, the rest of the library is unchanged
(corpus statistics, T_g, background basis, BM25 idf and avgdl are the library's). The
pseudo-queries' R@10 chooses among the declared grid

    background removal {rule 1 (today's adaptive decision), off, on}
    x lexical weight {0.1, 0.25, 0.5}
    x lexical side {BM25 over the evidence tokens Q', BM25 over all known query tokens}
    x candidate depth K {100, 300}

(36 settings; ties: the current default setting rule 1 / 0.25 / BM25-ev / 300, else the first in
that order). Everything goes through the index's public stages and per-call knobs of
``search_vectors``: the stripped skill enters through ``dense_stage=`` / ``lexical_stage=`` (the
index's own ``dense_candidates`` / ``lexical_scores`` plus that one row's score), BM25 over all known
tokens through ``lexical_stage=`` with ``evidence_tokens(exclude=all False)``, on/off through two
indexes over the same embeddings (``from_embeddings(basis=, decisions=)``).

Declared selection rule (experiments/DECLARATIONS.md, fourth round, written before any run): fit
sets skillsbench, sra_theoremqa, bfcl; fit score = (R@10 + nDCG@10)/2 over the real queries. The
self-calibration replaces the default only if its fit score is >= the default's on all three fit
sets and its mean over the three is strictly higher; all three within 0.05 is a tie (default kept).
metatool and gorilla_hf are confirm sets, reported as they come, never used to choose.

Prints, per dataset (all five): the setting real-label R@10 would pick and the one the
pseudo-queries pick, the real R@10 / nDCG@10 of each and of the default, the gap; then the fit
score of the self-calibrated choice vs the default, and vs the best of dense / bm25 / rrf, with
paired bootstrap 95% intervals (2000 resamples, seed 0) over the real queries; then, for information,
how stable the pick is over 1000 resamples of the pseudo-queries. In %.
Embeddings come from the evaluation cache (``skillsight eval`` fills it; the stripped documents and
the pseudo-queries are encoded once and cached there as kinds ``pseudo-doc`` / ``pseudo-query``).

Result (2026-12-03, MiniLM, the vendored data/): FAILS the selection rule, default unchanged. Fit
scores default 78.68 / 73.40 / 83.33 (mean 78.47), self-calibrated 77.07 / 74.42 / 83.19 (mean 78.23)
on skillsbench / sra_theoremqa / bfcl; confirm sets metatool 71.41 vs 73.78, gorilla_hf 29.97 vs 35.76.
The pseudo-queries pick the label-optimal setting on sra_theoremqa only (R@10 gaps 2.92 / 0.00 / 2.01 /
2.90 / 9.59 on the five); on the fit sets every setting scores 92.5-96.5 pseudo R@10, and on metatool
and gorilla_hf they ask for background removal where real tasks lose by it. Tables and discussion:
docs/ADAPTIVE.md ("Fourth round, rule 1").

The default compared against is the one of the declaration (``--base declared``: one text vector, as
when rule 1 was declared and run). Rule 3(b) of the same round later made the text + name/description
vector the default; ``--base current`` reruns on top of it (the stripped skill's second vector is then
its name alone): 78.23 / 74.66 / 84.12 against 79.89 / 73.75 / 84.31, still a fail.
"""

from __future__ import annotations

import hashlib
import sys
from collections import Counter
from itertools import product
from pathlib import Path

import numpy as np

from skillsight_fast.config import BM25_B, BM25_K1, IndexConfig
from skillsight_fast.engine.analyzer import analyze
from skillsight_fast.engine.index import SkillIndex
from skillsight_fast.lab.evaluation.datasets import FIT_DATASETS, SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext, paper_config, run_bm25, run_dense, run_rrf
from skillsight_fast.library.skills import Skill, namedesc_text
from skillsight_fast.metrics import bootstrap_diff, per_query

DATA = Path(__file__).resolve().parent.parent / "data"

MAX_PSEUDO = 200
MIN_DESCRIPTION_TOKENS = 5
SEED = 0
BACKGROUNDS = ("rule1", "off", "on")
WEIGHTS = (0.25, 0.1, 0.5)  # the default first: the order breaks ties after the default
SIDES = ("bm25-ev", "bm25-all")
DEPTHS = (300, 100)
DEFAULT = ("rule1", 0.25, "bm25-ev", 300)
GRID = [s for s in product(BACKGROUNDS, WEIGHTS, SIDES, DEPTHS)]
assert GRID[0] == DEFAULT and len(GRID) == 36
K = 10
RESAMPLES = 1000
#: The default the declared comparison ran against (one text vector; the default when rule 1 was
#: declared and run), and today's (the text + name/description vector of fourth-round rule 3(b)).
BASES = {"declared": IndexConfig(document_vector="text"), "current": IndexConfig()}


def pseudo_rows(docs: list[Skill], seed: int = SEED, limit: int = MAX_PSEUDO) -> list[int]:
    """Rows of the pseudo-query skills: >= 5 description tokens, the ``limit`` smallest seeded hashes."""
    eligible = [i for i, d in enumerate(docs) if len(analyze(d.description)) >= MIN_DESCRIPTION_TOKENS]
    key = {i: hashlib.sha256(f"{seed}:{docs[i].id}".encode()).hexdigest() for i in eligible}
    return sorted(eligible, key=lambda i: (key[i], i))[:limit]


def stripped_text(skill: Skill) -> str:
    """The skill's indexed text with its description removed (every verbatim occurrence)."""
    desc, body = skill.description, skill.body
    if desc in body:
        body = body.replace(desc, " ")
    elif desc in " ".join(body.split()):  # the description is whitespace-normalised
        body = " ".join(body.split()).replace(desc, " ")
    hints = skill.hints
    return f"{skill.name}\n{hints}\n{body}" if hints else f"{skill.name}\n{body}"


def setting_name(s: tuple) -> str:
    bg, w, side, k = s
    return f"{'rule 1' if bg == 'rule1' else bg} / w={w:g} / {side} / K={k}"


class Library:
    """One library's three background variants and its pseudo-query trial."""

    def __init__(self, ctx: EvalContext, base: IndexConfig) -> None:
        ds = ctx.dataset
        self.ctx = ctx
        self.default = ctx.index(base)
        namedesc = base.settled(can_fit=False).encoder.document_vector == "text+namedesc"
        paper = ctx.index(paper_config())
        basis, sv = paper.dense.basis, paper.dense.singular_values
        empty = np.zeros((0, basis.shape[1]), np.float32)
        self.indexes: dict[str, SkillIndex] = {}
        for bg in ("on", "off"):
            on = bg == "on"
            if on == self.default.decisions.background:
                self.indexes[bg] = self.default
            else:
                self.indexes[bg] = SkillIndex.from_embeddings(
                    ds.docs, ctx.doc_emb, base, lexicon=ctx.lexicon, model_id=ctx.enc.model_id,
                    basis=(basis if on else empty, sv), namedesc=ctx.namedesc_emb if namedesc else None,
                    decisions=self.default.decisions.replace(background=on))
            assert self.indexes[bg].decisions.document_vector == base.settled(can_fit=False).encoder.document_vector
        self.indexes["rule1"] = self.default
        # pseudo-queries
        self.rows = np.asarray(pseudo_rows(ds.docs), np.int64)
        docs = [ds.docs[i] for i in self.rows]
        self.p_texts = [d.description for d in docs]
        strip = [stripped_text(d) for d in docs]
        self.p_vecs = ctx.embeddings("pseudo-query", self.p_texts) if docs else None
        self.s_vecs = ctx.embeddings("pseudo-doc", strip) if docs else None
        # text+namedesc: the stripped skill's second vector is its name + (removed) description
        self.nd_vecs = (ctx.embeddings("pseudo-namedesc", [namedesc_text(d.name, "") for d in docs])
                        if docs and namedesc else None)
        ids = ctx.lexicon.term_ids
        cfg = self.default.config
        self.s_counts = []
        for t in strip:
            c = Counter(analyze(t, cfg.analyzer.min_token_len, cfg.analyzer.max_token_len))
            self.s_counts.append(({ids[w]: n for w, n in c.items() if w in ids}, sum(c.values())))
        self.p_gold = [frozenset([int(r)]) for r in self.rows]

    # ---------------------------------------------------------------- the trial's swapped stages
    def trial_dense(self, idx: SkillIndex):
        """dense_candidates of the library; each pseudo-query's own skill scored by its stripped vector."""
        s_perp = idx.remove_background(self.s_vecs)
        if self.nd_vecs is not None:  # the scored matrix is (e⊥ + e_nd⊥)/2 (DenseState.build)
            s_perp = (0.5 * (s_perp + idx.remove_background(self.nd_vecs))).astype(np.float32)

        def stage(q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
            cand, s = idx.dense_candidates(q_perp, depth)
            own = np.einsum("ij,ij->i", q_perp, s_perp)
            out_c = np.full(cand.shape, -1, np.int64)
            out_s = np.full(cand.shape, -np.inf, np.float32)
            for i, g in enumerate(self.rows):
                keep = (cand[i] != g) & (cand[i] >= 0)
                c = np.append(cand[i][keep], g)
                v = np.append(s[i][keep], own[i]).astype(np.float32)
                order = np.argsort(-v, kind="stable")[: cand.shape[1]]
                out_c[i, : order.size], out_s[i, : order.size] = c[order], v[order]
            return out_c, out_s

        return stage

    def trial_lexical(self, idx: SkillIndex, all_tokens: np.ndarray | None):
        """lexical_scores (BM25) of the library, each pseudo-query's own skill scored on its stripped row."""
        idf, avgdl = idx.lexical.bm25
        fixed = None if all_tokens is None else idx.evidence_tokens(self.p_texts, exclude=all_tokens)

        def stage(cand: np.ndarray, terms: np.ndarray, ptr: np.ndarray) -> np.ndarray:
            terms, ptr = fixed or (terms, ptr)
            out = idx.lexical_scores(cand, terms, ptr, side="bm25")
            for i, g in enumerate(self.rows):
                tf, dl = self.s_counts[i]
                norm = BM25_K1 * (1 - BM25_B + BM25_B * dl / avgdl)
                score = 0.0
                for t in terms[ptr[i] : ptr[i + 1]].tolist():
                    f = tf.get(t, 0)
                    if f:
                        score += float(idf[t]) * f * (BM25_K1 + 1) / (f + norm)
                out[i][cand[i] == g] = score
            return out

        return stage

    # ---------------------------------------------------------------- one setting
    def rank(self, setting: tuple, pseudo: bool) -> np.ndarray:
        bg, w, side, k = setting
        idx = self.indexes[bg]
        all_tokens = np.zeros_like(idx.lexical.generic) if side == "bm25-all" else None
        if pseudo:
            return idx.search_vectors(self.p_vecs, self.p_texts, K, candidates=k, lexical_weight=w,
                                      lexical="bm25", dense_stage=self.trial_dense(idx),
                                      lexical_stage=self.trial_lexical(idx, all_tokens), explain=False).ids
        ctx = self.ctx
        stage = None
        if all_tokens is not None:
            at, ap = idx.evidence_tokens(ctx.dataset.query_texts, exclude=all_tokens)
            stage = lambda c, t, p: idx.lexical_scores(c, at, ap, side="bm25")  # noqa: E731
        return idx.search_vectors(ctx.query_emb, ctx.dataset.query_texts, K, candidates=k, lexical_weight=w,
                                  lexical="bm25", lexical_stage=stage, explain=False).ids


def pick(scores: dict[tuple, float]) -> tuple:
    """Highest R@10; the default on a tie with the best, else the first in grid order."""
    best = max(scores.values())
    if scores[DEFAULT] >= best - 1e-12:
        return DEFAULT
    return next(s for s in GRID if scores[s] >= best - 1e-12)


def fit_vec(ids: np.ndarray, gold) -> dict[str, np.ndarray]:
    pq = per_query(ids, gold)
    return {"r": pq["recall@10"], "n": pq["ndcg@10"], "fit": (pq["recall@10"] + pq["ndcg@10"]) / 2}


def ci(a: np.ndarray, b: np.ndarray) -> str:
    d, lo, hi = bootstrap_diff(a, b, n_boot=2000, seed=0)
    return f"{100 * d:+.2f} [{100 * lo:+.2f}, {100 * hi:+.2f}]"


def run(name: str, base: IndexConfig) -> dict:
    ctx = EvalContext(load_dataset(DATA / name))
    lib = Library(ctx, base)
    gold = ctx.dataset.gold
    real = {s: fit_vec(lib.rank(s, False), gold) for s in GRID}
    real_r = {s: float(v["r"].mean()) for s, v in real.items()}
    if len(lib.rows):
        pseudo_q = {s: fit_vec(lib.rank(s, True), lib.p_gold)["r"] for s in GRID}
        pseudo_r = {s: float(v.mean()) for s, v in pseudo_q.items()}
        chosen = pick(pseudo_r)
    else:
        pseudo_q, pseudo_r, chosen = {}, {}, DEFAULT
    label = pick(real_r)
    base = {"dense": run_dense(ctx), "bm25": run_bm25(ctx), "rrf": run_rrf(ctx)}
    base = {m: fit_vec(ids[:, :K], gold) for m, ids in base.items()}
    return {"name": name, "lib": lib, "real": real, "real_r": real_r, "pseudo_r": pseudo_r,
            "pseudo_q": pseudo_q,
            "chosen": chosen, "label": label, "base": base,
            "rule1": "on" if lib.default.decisions.background else "off"}


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation (average ranks for ties)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def pct(v: dict[str, np.ndarray]) -> str:
    return f"{100 * v['r'].mean():.2f} / {100 * v['n'].mean():.2f}"


def main() -> None:
    args = sys.argv[1:]
    json_path = None
    if "--json" in args:
        j = args.index("--json")
        json_path = args[j + 1]
        del args[j : j + 2]
    base = BASES["declared"]
    if "--base" in args:
        j = args.index("--base")
        base = BASES[args[j + 1]]
        del args[j : j + 2]
    names = args[-1].split(",") if args and not args[-1].startswith("--") else list(SHARED_DATASETS)
    if "--time" in args:
        for name in names:
            timing(name, base)
        return
    out = []
    print("\n### Agreement: the setting real labels pick vs the one the pseudo-queries pick "
          "(R@10 / nDCG@10, %)\n")
    print("| dataset | Rule 1 | pseudo-queries | default (real) | label pick | its real | pseudo pick "
          "| its real | its pseudo R@10 (default's) | R@10 gap label - pseudo | Spearman pseudo vs real R@10 "
          "(36 settings) |")
    print("|---" * 11 + "|")
    for name in names:
        r = run(name, base)
        out.append(r)
        real, lab, cho = r["real"], r["label"], r["chosen"]
        pr = r["pseudo_r"]
        pseudo_cell = f"{100 * pr[cho]:.1f} ({100 * pr[DEFAULT]:.1f})" if pr else "n/a"
        gap = 100 * (r["real_r"][lab] - r["real_r"][cho])
        rho = spearman([pr[s] for s in GRID], [r["real_r"][s] for s in GRID]) if pr else float("nan")
        print(f"| {name} | {r['rule1']} | {len(r['lib'].rows)} | {pct(real[DEFAULT])} | {setting_name(lab)} "
              f"| {pct(real[lab])} | {setting_name(cho)} | {pct(real[cho])} | {pseudo_cell} | {gap:.2f} "
              f"| {rho:+.2f} |", flush=True)
    print("\n### Fit score (R@10 + nDCG@10)/2 of the self-calibrated choice, "
          "paired bootstrap 95% intervals (%)\n")
    print("| dataset | default | self-calibrated | minus default | best baseline (fit) | minus best: fit "
          "| R@10 minus best R@10 baseline | nDCG@10 minus best nDCG@10 baseline |")
    print("|---" * 8 + "|")
    for r in out:
        d, c, base = r["real"][DEFAULT], r["real"][r["chosen"]], r["base"]
        bf = max(base, key=lambda m: base[m]["fit"].mean())
        br = max(base, key=lambda m: base[m]["r"].mean())
        bn = max(base, key=lambda m: base[m]["n"].mean())
        print(f"| {r['name']} | {100 * d['fit'].mean():.2f} | {100 * c['fit'].mean():.2f} "
              f"| {ci(c['fit'], d['fit'])} "
              f"| {bf} {100 * base[bf]['fit'].mean():.2f} | {ci(c['fit'], base[bf]['fit'])} "
              f"| {br}: {ci(c['r'], base[br]['r'])} | {bn}: {ci(c['n'], base[bn]['n'])} |")
    if json_path:
        import json

        grid = {r["name"]: [{"setting": setting_name(s), "pseudo_recall@10": r["pseudo_r"].get(s),
                             "recall@10": float(r["real"][s]["r"].mean()),
                             "ndcg@10": float(r["real"][s]["n"].mean())} for s in GRID] for r in out}
        Path(json_path).write_text(json.dumps(grid, indent=1))
    fit = [r for r in out if r["name"] in FIT_DATASETS]
    if len(fit) == len(FIT_DATASETS):
        d = np.array([r["real"][DEFAULT]["fit"].mean() for r in fit]) * 100
        c = np.array([r["real"][r["chosen"]]["fit"].mean() for r in fit]) * 100
        tie = bool(np.all(np.abs(c - d) <= 0.05))
        passes = bool(np.all(c >= d) and c.mean() > d.mean() and not tie)
        print(f"\nSelection rule on {', '.join(FIT_DATASETS)}: default {np.round(d, 2).tolist()} "
              f"(mean {d.mean():.2f}), "
              f"self-calibrated {np.round(c, 2).tolist()} (mean {c.mean():.2f}): "
              f"{'PASSES' if passes else 'tie, default kept' if tie else 'FAILS'}")
    stability(out)


def timing(name: str, base: IndexConfig) -> None:
    """Wall time of what a build would add: encoding the pseudo-queries and the stripped documents
    (fresh, not from the cache), and scoring the 36 settings on the pseudo-queries."""
    import os
    import time

    ctx = EvalContext(load_dataset(DATA / name))
    lib = Library(ctx, base)
    docs = [ctx.dataset.docs[i] for i in lib.rows]
    enc = ctx.enc
    enc.encode(["warm up"])
    lib.rank(DEFAULT, True)  # compiles the kernels (cached on disk after the first run)
    t0 = time.perf_counter()
    enc.encode([d.description for d in docs])
    t1 = time.perf_counter()
    enc.encode([stripped_text(d) for d in docs])
    t2 = time.perf_counter()
    for s in GRID:
        lib.rank(s, True)
    t3 = time.perf_counter()
    print(f"{name}: {len(docs)} pseudo-queries; encode descriptions {t1 - t0:.1f} s, stripped documents "
          f"{t2 - t1:.1f} s, 36 settings {t3 - t2:.1f} s (load average {os.getloadavg()[0]:.2f})")


def stability(out: list[dict], n_resamples: int = RESAMPLES) -> None:
    """How much the pick depends on which pseudo-queries were drawn (information, not a selection input).

    The pseudo-queries of each library are resampled with replacement (seed 0); each resample picks a
    setting by the same rule, scored on the real queries. The last column applies the selection rule
    to the three fit sets' picks of the same resample index.
    """
    print(f"\n### Stability of the pick over {n_resamples} resamples of the pseudo-queries (information)\n")
    print("| dataset | resamples picking the default | distinct picks | most frequent pick (share) "
          "| real fit of the pick minus default: mean [2.5%, 97.5%] | share >= default |")
    print("|---" * 6 + "|")
    deltas: dict[str, np.ndarray] = {}
    for r in out:
        pq = r["pseudo_q"]
        if not pq:
            continue
        rng = np.random.default_rng(0)
        mat = np.stack([pq[s] for s in GRID])  # (36, n)
        fit = np.array([r["real"][s]["fit"].mean() for s in GRID]) * 100
        picks = []
        for _ in range(n_resamples):
            rows = rng.integers(0, mat.shape[1], mat.shape[1])
            picks.append(GRID.index(pick(dict(zip(GRID, mat[:, rows].mean(1))))))
        picks_a = np.array(picks)
        d = fit[picks_a] - fit[0]
        deltas[r["name"]] = d
        top, cnt = Counter(picks).most_common(1)[0]
        lo, hi = np.quantile(d, [0.025, 0.975])
        print(f"| {r['name']} | {np.mean(picks_a == 0):.1%} | {len(set(picks))} | {setting_name(GRID[top])} "
              f"({cnt / n_resamples:.0%}) | {d.mean():+.2f} [{lo:+.2f}, {hi:+.2f}] | {np.mean(d >= 0):.1%} |")
    if all(n in deltas for n in FIT_DATASETS):
        dm = np.stack([deltas[n] for n in FIT_DATASETS])  # (3, B), fit minus default
        tie = np.all(np.abs(dm) <= 0.05, axis=0)
        passes = np.all(dm >= 0, axis=0) & (dm.mean(0) > 0) & ~tie
        print(f"\nResamples in which the self-calibration would pass the selection rule: {passes.mean():.1%}")


if __name__ == "__main__":
    main()
