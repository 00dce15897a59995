"""Does mixing the name + description embedding into the document vector help?

    python experiments/namedesc_document_vector.py                          # the four datasets in data/
    python experiments/namedesc_document_vector.py skillsbench,sra_theoremqa

For each dataset, the default `skillsight` index and raw dense retrieval are evaluated with three
document vectors: the full text (name, description, body; the default), unit(full + name/description)
(equal weights, nothing fitted), and name + description alone. Embeddings come from the evaluation
cache (`skillsight eval` fills it). Prints R@10 / nDCG@10 in %, and whether Rule 1 turned SBC on.

Selection rule (declared before the confirm sets): adopt the mix only if it is at least as good as the
full text on both fit sets (skillsbench, sra_theoremqa) on R@10.
Result: +0.1 R@10 on the fit sets, but it flips Rule 1 on gorilla_hf (SBC on), which loses there;
dropped (docs/ADAPTIVE.md, "Tried and dropped").
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from skillsight_fast.config import IndexConfig
from skillsight_fast.lab.evaluation.datasets import SHARED_DATASETS, load_dataset
from skillsight_fast.lab.evaluation.methods import EvalContext
from skillsight_fast.metrics import DEPTH, evaluate, topk_from_scores

DATA = Path(__file__).resolve().parent.parent / "data"



def namedesc_emb(ctx: EvalContext) -> np.ndarray:
    """Embedding of ``name + "\\n" + description`` only (a second, cheap document vector; cached)."""
    return ctx.embeddings("namedesc", [f"{d.name}\n{d.description}" for d in ctx.dataset.docs])

def unit(x: np.ndarray) -> np.ndarray:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def main() -> None:
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(SHARED_DATASETS)
    print("| dataset | document vector | skillsight R@10 / nDCG@10 | dense R@10 / nDCG@10 | SBC on |")
    print("|---|---|---|---|---|")
    for name in names:
        ds = load_dataset(DATA / name)
        ctx = EvalContext(ds)
        full, nd = ctx.doc_emb, namedesc_emb(ctx)
        for label, emb in (("full text", full), ("unit(full + name/desc)", unit(full + nd)), ("name/desc", nd)):
            idx = ctx.index(IndexConfig(), embeddings=emb)
            r = evaluate(ctx.search(idx), ds.gold)
            d = evaluate(topk_from_scores(ctx.query_emb @ emb.T, DEPTH, tiebreak=ctx.tiebreak), ds.gold)
            print(f"| {name} | {label} | {100 * r['recall@10']:.1f} / {100 * r['ndcg@10']:.1f} | "
                  f"{100 * d['recall@10']:.1f} / {100 * d['ndcg@10']:.1f} | {idx.decisions.background} |", flush=True)


if __name__ == "__main__":
    main()
