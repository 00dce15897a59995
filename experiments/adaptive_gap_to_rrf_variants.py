"""Six pre-declared attempts to close the gap to RRF on gorilla_hf, each chosen on the fit sets.

    python experiments/adaptive_gap_to_rrf_variants.py                       # all three, the four datasets in data/
    python experiments/adaptive_gap_to_rrf_variants.py sbc-off skillsbench,sra_theoremqa

Each experiment was declared (grid and selection rule) before it was run on metatool or gorilla_hf;
docs/ADAPTIVE.md ("Tried and dropped") has the declarations and the tables this prints. Embeddings come
from the evaluation cache (``skillsight eval`` fills it). Everything scores through the index's public
stages (``remove_background``, ``dense_candidates``, ``evidence_tokens``, ``lexical_scores``, ``fuse``);
a variant replaces one stage's input or output, never the kernels.

``sbc-off``
    Which lexical side and weight complement a raw-cosine dense side (the branch Rule 1 takes when it
    switches SBC off)? Fitted on the fit sets with the dense side forced to raw cosine. Grid: lexical
    side {lec, bm25-ev, bm25-all} x w in {0.25, 0.5, 1}. Also printed on the name + description corpora
    of the fit sets (``short``), for information.
``prf``
    Dense pseudo-relevance feedback (Rocchio) on the default's dense side:
    q' = unit(q + beta * mean of the top-m documents of the first pass), m in {3, 10}, beta in {0.5, 1}.
``mix``
    unit(full + name/description) document vectors with Rule 1 read on the full-text vectors, so the
    representation change cannot flip the decision (the flip is what dropped the mix in round one).
``local-idf``
    BM25 whose idf is counted inside the K = 300 dense candidates (the set Eq. 15 re-ranks) instead of
    the corpus, over {evidence tokens Q', all known query tokens} x w in {0.25, 0.5}.
``fallback``
    Per query, the evidence support (LEC-weighted share of Q' found in the dense top-10; 0 for an
    empty Q'). Below 0.5 the lexical query falls back to all known query tokens. (A) w = 0.25 for every
    query; (B) w = 0.5 for the fallback queries.
``coherence``
    Splits T_g into boilerplate and topical tokens by the coherence of the documents containing each
    token, kappa_t = (df_t ||g_t||^2 - 1) / (df_t - 1) (mean pairwise cosine; g_t is the token
    direction the background estimate already computes), with an Otsu threshold over T_g. Only the
    boilerplate part is dropped from the lexical query; BM25 x w in {0.25, 0.5}, and LEC at w = 0.25.

Selection rule of all six (the one Rule 3 used): fit score = mean over skillsbench and sra_theoremqa
of (R@10 + nDCG@10) / 2; a variant replaces the default only if it is at least as good on *both* fit sets.
Prints R@10 / nDCG@10 in %.

Result: none of the six passes the fit-set rule, so the default is unchanged; the coherence split
of T_g ties the fit sets within 0.04 R@10 and stays below RRF on gorilla_hf R@10 (docs/ADAPTIVE.md).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.engine.background import BM25_B, BM25_K1
from skillsight_fast.engine.scan import build_scan
from skillsight_fast.lab.evaluation.datasets import SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import DEPTH, evaluate

DATA = Path(__file__).resolve().parent.parent / "data"



def namedesc_emb(ctx: EvalContext) -> np.ndarray:
    """Embedding of ``name + "\\n" + description`` only (a second, cheap document vector; cached)."""
    return ctx.embeddings("namedesc", [f"{d.name}\n{d.description}" for d in ctx.dataset.docs])

def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def fmt(r: dict[str, float]) -> str:
    return f"{100 * r['recall@10']:.1f} / {100 * r['ndcg@10']:.1f}"


def lexical_sides(idx, texts: list[str], cand: np.ndarray) -> dict[str, np.ndarray]:
    """LEC, BM25 over the evidence tokens (the default) and BM25 over all known query tokens."""
    ev_t, ev_p = idx.evidence_tokens(texts)
    all_t, all_p = idx.evidence_tokens(texts, exclude=np.zeros_like(idx.lexical.generic))
    return {
        "lec": idx.lexical_scores(cand, ev_t, ev_p, side="lec"),
        "bm25-ev": idx.lexical_scores(cand, ev_t, ev_p, side="bm25"),
        "bm25-all": idx.lexical_scores(cand, all_t, all_p, side="bm25"),
    }


def sbc_off(ctx: EvalContext, short: bool = False) -> list[str]:
    ds = ctx.dataset
    docs = namedesc_emb(ctx) if short else ctx.doc_emb
    idx = ctx.index(IndexConfig(), embeddings=docs) if short else ctx.index(IndexConfig())
    assert idx.decisions.lexical == "bm25"
    kc = min(len(idx), idx.config.scoring.candidates)
    # raw cosine (SBC forced off): the exact candidate stage over the raw document matrix
    cand, s_dense = build_scan("exact", np.ascontiguousarray(docs)).candidates(ctx.query_emb, kc)
    sides = lexical_sides(idx, ds.query_texts, cand)
    row = [f"{'on' if idx.decisions.background else 'off'}", fmt(evaluate(cand[:, :DEPTH], ds.gold))]
    for s_lex in sides.values():
        for w in (0.25, 0.5, 1.0):
            ids, _, _ = idx.fuse(cand, s_dense, s_lex, DEPTH, fusion="eq15", lexical_weight=w)
            row.append(fmt(evaluate(ids, ds.gold)))
    return row


def prf(ctx: EvalContext) -> list[str]:
    ds = ctx.dataset
    idx = ctx.index(IndexConfig())
    q = idx.remove_background(ctx.query_emb)
    qt, qp = idx.evidence_tokens(ds.query_texts)
    kc = min(len(idx), idx.decisions.candidates)

    def run(qv: np.ndarray) -> str:
        cand, s = idx.dense_candidates(np.ascontiguousarray(qv, np.float32), kc)
        ids, _, _ = idx.fuse(cand, s, idx.lexical_scores(cand, qt, qp), DEPTH)
        return fmt(evaluate(ids, ds.gold))

    row = [run(q)]
    first, _ = idx.dense_candidates(q, 10)
    for m in (3, 10):
        feedback = idx.dense.embeddings_perp[first[:, :m]].mean(1)
        row += [run(unit(q + beta * feedback)) for beta in (0.5, 1.0)]
    return row


def mix(ctx: EvalContext) -> list[str]:
    ds = ctx.dataset
    base = ctx.index(IndexConfig())
    on = base.decisions.background
    vectors = unit(ctx.doc_emb + namedesc_emb(ctx))
    mixed = ctx.index(IndexConfig() if on else IndexConfig(rank=0), embeddings=vectors)
    return [f"{'on' if on else 'off'}", fmt(evaluate(ctx.search(base), ds.gold)),
            fmt(evaluate(ctx.search(mixed), ds.gold))]


def candidate_tf(idx) -> Any:
    """Term frequencies as a scipy CSC matrix (N, V), float64."""
    import scipy.sparse as sp

    lex = idx.lexical.lexicon
    rows = np.repeat(np.arange(len(idx)), np.diff(lex.doc_indptr))
    return sp.csr_matrix((lex.doc_tf.astype(np.float64), (rows, lex.doc_terms)),
                         shape=(len(idx), len(lex.vocab))).tocsc()


def default_candidates(ctx: EvalContext, idx) -> tuple[np.ndarray, np.ndarray]:
    return idx.dense_candidates(idx.remove_background(ctx.query_emb), min(len(idx), idx.decisions.candidates))


def local_idf(ctx: EvalContext) -> list[str]:
    ds = ctx.dataset
    idx = ctx.index(IndexConfig())
    lex = idx.lexical.lexicon
    tf = candidate_tf(idx)
    dl = lex.doc_len.astype(np.float64)
    avgdl, k1, b = idx.lexical.bm25[1], BM25_K1, BM25_B  # the index's own BM25 constants
    cand, s = default_candidates(ctx, idx)
    row = [fmt(evaluate(ctx.search(idx), ds.gold))]
    for exclude in (idx.lexical.generic, np.zeros_like(idx.lexical.generic)):
        qt, qp = idx.evidence_tokens(ds.query_texts, exclude=exclude)
        s_lex = np.zeros(cand.shape, np.float32)
        for i in range(len(ds.queries)):
            toks = qt[qp[i] : qp[i + 1]]
            c = cand[i][cand[i] >= 0]
            if toks.size == 0 or c.size == 0:
                continue
            m = tf[:, toks][c].toarray()  # (K, |q|)
            df_c = (m > 0).sum(0)
            idf_c = np.log(1 + (c.size - df_c + 0.5) / (df_c + 0.5))
            norm = k1 * (1 - b + b * dl[c] / avgdl)
            s_lex[i, : c.size] = ((m * (k1 + 1) / (m + norm[:, None])) * idf_c).sum(1)
        for w in (0.25, 0.5):
            row.append(fmt(evaluate(idx.fuse(cand, s, s_lex, DEPTH, fusion="eq15", lexical_weight=w)[0], ds.gold)))
    return row


def fallback(ctx: EvalContext) -> list[str]:
    ds = ctx.dataset
    idx = ctx.index(IndexConfig())
    present = candidate_tf(idx) > 0
    cand, s = default_candidates(ctx, idx)
    ev_t, ev_p = idx.evidence_tokens(ds.query_texts)
    all_t, all_p = idx.evidence_tokens(ds.query_texts, exclude=np.zeros_like(idx.lexical.generic))
    support = np.zeros(len(ds.queries))
    for i in range(len(ds.queries)):
        toks = ev_t[ev_p[i] : ev_p[i + 1]]
        if toks.size:
            hit = present[:, toks][cand[i, :10]].toarray().any(0)
            support[i] = (idx.lexical.weights[toks] * hit).sum() / idx.lexical.weights[toks].sum()
    falls = support < 0.5
    s_lex = np.where(falls[:, None], idx.lexical_scores(cand, all_t, all_p), idx.lexical_scores(cand, ev_t, ev_p))
    a = idx.fuse(cand, s, s_lex, DEPTH, fusion="eq15", lexical_weight=0.25)[0]
    b = np.where(falls[:, None], idx.fuse(cand, s, s_lex, DEPTH, fusion="eq15", lexical_weight=0.5)[0], a)
    return [f"{support.mean():.2f}", f"{falls.mean():.2f}", fmt(evaluate(ctx.search(idx), ds.gold)),
            fmt(evaluate(a, ds.gold)), fmt(evaluate(b, ds.gold))]


def coherence(ctx: EvalContext) -> list[str]:
    from skillsight_fast.engine.background import otsu_threshold
    from skillsight_fast.kernels import token_directions

    ds = ctx.dataset
    idx = ctx.index(IndexConfig())
    lex = idx.lexical.lexicon
    tg = np.flatnonzero(idx.lexical.generic)
    g = token_directions(tg, lex.post_indptr, lex.post_docs, ctx.doc_emb).astype(np.float64)
    df = lex.df()[tg].astype(np.float64)
    kappa = (df * (g * g).sum(1) - 1) / (df - 1)
    boilerplate = np.zeros_like(idx.lexical.generic)
    boilerplate[tg[kappa <= otsu_threshold(kappa)]] = True
    cand, s = default_candidates(ctx, idx)
    qt, qp = idx.evidence_tokens(ds.query_texts, exclude=boilerplate)
    bm25 = idx.lexical_scores(cand, qt, qp, side="bm25")
    lec = idx.lexical_scores(cand, qt, qp, side="lec")
    row = [f"{tg.size} / {int(boilerplate.sum())}", fmt(evaluate(ctx.search(idx), ds.gold))]
    for w in (0.25, 0.5):
        row.append(fmt(evaluate(idx.fuse(cand, s, bm25, DEPTH, fusion="eq15", lexical_weight=w)[0], ds.gold)))
    row.append(fmt(evaluate(idx.fuse(cand, s, lec, DEPTH, fusion="eq15", lexical_weight=0.25)[0], ds.gold)))
    return row


HEADERS = {
    "sbc-off": ["Rule 1 would say (forced off here)", "dense"]
    + [f"{s} w={w}" for s in ("lec", "bm25-ev", "bm25-all") for w in (0.25, 0.5, 1)],
    "prf": ["default"] + [f"m={m} β={b}" for m in (3, 10) for b in (0.5, 1)],
    "mix": ["Rule 1 on the full text", "default (full text)", "unit(full + name/desc)"],
    "local-idf": ["default"] + [f"local {q} w={w}" for q in ("Q'", "all") for w in (0.25, 0.5)],
    "fallback": ["mean support", "fallback share", "default", "(A) w=0.25", "(B) w=0.5 on fallback"],
    "coherence": ["T_g size / boilerplate", "default", "bm25 w=0.25", "bm25 w=0.5", "lec w=0.25"],
}
RUNNERS = {"prf": prf, "mix": mix, "local-idf": local_idf, "fallback": fallback, "coherence": coherence}


def main() -> None:
    exps = sys.argv[1].split(",") if len(sys.argv) > 1 else list(HEADERS)
    names = sys.argv[2].split(",") if len(sys.argv) > 2 else list(SHARED_DATASETS)
    for exp in exps:
        print(f"\n### {exp}\n\n| dataset | " + " | ".join(HEADERS[exp]) + " |")
        print("|---" * (len(HEADERS[exp]) + 1) + "|")
        for name in names:
            ctx = EvalContext(load_dataset(DATA / name))
            if exp == "sbc-off":
                print(f"| {name} | " + " | ".join(sbc_off(ctx)) + " |", flush=True)
                if name in ("skillsbench", "sra_theoremqa"):
                    import dataclasses

                    short = dataclasses.replace(ctx.dataset, docs=[dataclasses.replace(d, body="")
                                                                   for d in ctx.dataset.docs])
                    print(f"| {name} (name + description) | " + " | ".join(sbc_off(EvalContext(short), True))
                          + " |", flush=True)
            else:
                print(f"| {name} | " + " | ".join(RUNNERS[exp](ctx)) + " |", flush=True)


if __name__ == "__main__":
    main()
