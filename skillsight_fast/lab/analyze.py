"""The paper's analysis of an index, as PNG plots and a one-page Markdown report.

Plots (written by :func:`write_report` into the output folder):

``energy.png``
    Background energy e_B(v) = ‖Bᵀv‖² of documents vs queries: documents carry more background.
``recall_depth.png``
    Gold recall@k against depth k (log scale) for raw dense, SBC only (s⊥) and SkillSight.
``rank_share.png``
    Share of the corpus ranked ahead of the best gold skill, (rank − 1)/N · 100, as a CDF.
``score_split.png``
    qᵀd = qᵀBBᵀd (background part) + q⊥ᵀd⊥ (task part) for the gold skill, the hardest
    non-gold skill and a random skill.

Without labelled queries, the skills' own descriptions are used as queries (each one's gold is its
own skill), which still shows how much background the documents share.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from skillsight_fast.errors import SkillsightError, install_hint

if TYPE_CHECKING:
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.library.queries import Task

logger = logging.getLogger(__name__)

METHODS = ("dense", "sbc", "skillsight")
LABELS = {"dense": "dense (qᵀd)", "sbc": "SBC only (q⊥ᵀd⊥)", "skillsight": "SkillSight (SBC + LEC)"}
COLORS = {"dense": "#888888", "sbc": "#4C72B0", "skillsight": "#C44E52"}


def description_queries(index: SkillIndex, limit: int = 500, seed: int = 0) -> list[Task]:
    """The skills' descriptions as queries (gold = the skill itself), a seeded sample."""
    from skillsight_fast.engine.abstention import sample
    from skillsight_fast.library.queries import Task

    qs = [Task(m.id, m.description, (m.id,)) for m in index.skills if m.description.strip()]
    return sample(qs, limit, seed)


def gold_ranks(index: SkillIndex, q: np.ndarray, texts: Sequence[str], gold_rows: list[np.ndarray],
               batch: int = 128) -> dict[str, list[np.ndarray]]:
    """1-based rank of every gold skill of every query, per method.

    SkillSight ranks the candidate set (top-K by s⊥) by the fused score; a gold skill outside it
    keeps its s⊥ rank (which is > K), i.e. the tail is in s⊥ order.
    """
    d, d_perp = np.asarray(index.dense.embeddings), np.asarray(index.dense.embeddings_perp)
    n_docs = len(index)
    kc = min(n_docs, index.decisions.candidates)
    q_perp = index.remove_background(q)
    out: dict[str, list[np.ndarray]] = {m: [] for m in METHODS}
    for start in range(0, len(texts), batch):
        stop = min(start + batch, len(texts))
        raw = q[start:stop] @ d.T
        perp = q_perp[start:stop] @ d_perp.T
        fused = index.search_vectors(q[start:stop], list(texts[start:stop]), kc, explain=False)
        for i in range(stop - start):
            g = gold_rows[start + i]
            for name, s in (("dense", raw[i]), ("sbc", perp[i])):
                out[name].append(1 + (s[None, :] > s[g][:, None]).sum(axis=1))
            pos = {int(j): r + 1 for r, j in enumerate(fused.ids[i].tolist()) if j >= 0}
            sbc = out["sbc"][-1]
            out["skillsight"].append(np.array([pos.get(int(j), int(r)) for j, r in zip(g, sbc)]))
    return out


def _recall_curve(ranks: list[np.ndarray], depths: np.ndarray) -> np.ndarray:
    return np.array([np.mean([np.mean(r <= k) for r in ranks]) for k in depths])


def write_report(index: SkillIndex, queries: Sequence[Task] | None, out_dir: str | Path, *,
                 title: str = "", max_queries: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Write the plots and ``report.md`` into ``out_dir`` and return the numbers.

    Parameters
    ----------
    index : SkillIndex
    queries : sequence of Task, optional
        Labelled queries; None uses the skills' descriptions (see :func:`description_queries`).
    out_dir : path
    title : str
        Name of the data in titles and the report.
    max_queries : int
        A seeded sample of at most this many queries is analysed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SkillsightError("the analysis report needs matplotlib: "
                              + install_hint("plot")) from None
    from skillsight_fast.engine.abstention import sample

    t0 = time.perf_counter()
    out = Path(out_dir).expanduser()
    out.mkdir(parents=True, exist_ok=True)
    source = title or "data"
    if queries is None:
        queries = description_queries(index, min(max_queries, 500), seed)
        source = "skill descriptions as queries"
    row_of = {m.id: i for i, m in enumerate(index.skills)}
    kept = [(qq, np.array(sorted({row_of[g] for g in qq.gold if g in row_of}), np.int64))
            for qq in sample(list(queries), max_queries, seed)]
    kept = [(qq, g) for qq, g in kept if g.size]
    if not kept:
        raise SkillsightError("none of the queries has a gold skill in this index (wrong --data?)")
    texts = [qq.text for qq, _ in kept]
    gold = [g for _, g in kept]
    q = index.encode(texts)
    n_docs = len(index)
    basis = np.asarray(index.dense.basis, np.float32)
    d = np.asarray(index.dense.embeddings, np.float32)

    # background energy e_B(v) = ‖Bᵀv‖² (the coordinates are reused by the score split below)
    qb = q @ basis.T
    db = d @ basis.T
    e_docs = (db ** 2).sum(axis=1)
    e_q = (qb ** 2).sum(axis=1)

    # ranks, recall vs depth, share ahead
    ranks = gold_ranks(index, q, texts, gold)
    depths = np.unique(np.round(np.logspace(0, np.log10(n_docs), 40)).astype(int))
    curves = {m: _recall_curve(ranks[m], depths) for m in METHODS}
    best = {m: np.array([r.min() for r in ranks[m]]) for m in METHODS}
    share = {m: (best[m] - 1) / n_docs * 100 for m in METHODS}

    # score split for gold, hardest negative and a random skill
    rng = np.random.default_rng(seed)
    q_perp = q - qb @ basis  # the score split is of the un-renormalised projection
    d_perp = d - db @ basis
    parts: dict[str, tuple[list[float], list[float]]] = {"gold": ([], []), "hardest non-gold": ([], []),
                                                         "random": ([], [])}
    for i, g in enumerate(gold):
        raw = d @ q[i]
        g_best = int(g[np.argmax(raw[g])])
        raw[g] = -np.inf  # raw is this query's own array: mask the gold skills in place
        neg = int(np.argmax(raw)) if n_docs > g.size else g_best
        rnd = int(rng.integers(n_docs))
        for name, j in (("gold", g_best), ("hardest non-gold", neg), ("random", rnd)):
            parts[name][0].append(float(qb[i] @ db[j]))
            parts[name][1].append(float(q_perp[i] @ d_perp[j]))

    rank = int(basis.shape[0])
    plt.rcParams.update({"figure.dpi": 110, "axes.spines.top": False, "axes.spines.right": False})
    # energy.png
    fig, ax = plt.subplots(figsize=(6.4, 4))
    bins = np.linspace(0, max(float(e_docs.max(initial=0)), float(e_q.max(initial=0)), 1e-6), 40)
    ax.hist(e_docs, bins=bins, alpha=0.6, density=True, label=f"documents (mean {e_docs.mean():.3f})",
            color="#C44E52")
    ax.hist(e_q, bins=bins, alpha=0.6, density=True, label=f"queries (mean {e_q.mean():.3f})", color="#4C72B0")
    ax.set_xlabel(f"background energy ‖Bᵀv‖²  (r = {rank})")
    ax.set_ylabel("density")
    ax.set_title(f"Background energy: documents vs queries\n{source}, N = {n_docs}")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out / "energy.png")
    plt.close(fig)
    # recall_depth.png
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for m in METHODS:
        ax.plot(depths, curves[m] * 100, label=LABELS[m], color=COLORS[m], lw=2)
    ax.set_xscale("log")
    ax.set_xlabel("depth k (log scale)")
    ax.set_ylabel("gold recall@k (%)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3, which="both")
    ax.set_title(f"Gold recall vs depth\n{source}, {len(texts)} queries, N = {n_docs}")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "recall_depth.png")
    plt.close(fig)
    # rank_share.png
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for m in METHODS:
        s = np.sort(share[m])
        ax.step(np.concatenate([[0.0], s]), np.arange(0, s.size + 1) / s.size * 100, where="post",
                color=COLORS[m], lw=2, label=f"{LABELS[m]}: mean {s.mean():.2f}%")
    ax.set_xscale("symlog", linthresh=100 / n_docs)  # linear up to one skill ahead, log beyond
    ax.set_xlim(left=0)
    ax.set_xlabel("share of the corpus ranked ahead of the best gold skill (%)")
    ax.set_ylabel("queries (%)")
    ax.grid(alpha=0.3, which="both")
    ax.set_title("How much of the corpus outranks the gold skill (CDF)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out / "rank_share.png")
    plt.close(fig)
    # score_split.png
    fig, ax = plt.subplots(figsize=(6.4, 4))
    names = list(parts)
    x = np.arange(len(names))
    bg = [np.mean(parts[n][0]) for n in names]
    task = [np.mean(parts[n][1]) for n in names]
    ax.bar(x, bg, 0.6, label="background part qᵀBBᵀd", color="#BBBBBB")
    ax.bar(x, task, 0.6, bottom=np.where(np.array(task) >= 0, bg, 0), label="task part q⊥ᵀd⊥", color="#C44E52")
    for i in range(len(names)):
        ax.text(x[i], bg[i] + max(task[i], 0) + 0.01, f"{bg[i] + task[i]:.3f}", ha="center", fontsize=9)
    ax.set_xticks(x, names)
    ax.set_ylabel("mean dense score qᵀd")
    ax.set_title("Dense score = background part + task part")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out / "score_split.png")
    plt.close(fig)

    def at(m: str, k: int) -> float:
        return float(_recall_curve(ranks[m], np.array([k]))[0] * 100)

    summary: dict[str, Any] = {
        "data": source, "n_queries": len(texts), "n_docs": n_docs, "rank": rank,
        "n_generic": index.stats.n_generic,
        "energy": {"documents_mean": float(e_docs.mean()), "queries_mean": float(e_q.mean())},
        "recall": {m: {f"R@{k}": at(m, k) for k in (1, 10, 100) if k <= n_docs} for m in METHODS},
        "share_ahead_mean": {m: float(share[m].mean()) for m in METHODS},
        "score_split": {n: {"background": float(np.mean(parts[n][0])), "task": float(np.mean(parts[n][1]))}
                        for n in names},
        "plots": ["energy.png", "recall_depth.png", "rank_share.png", "score_split.png"],
        "output": str(out),
    }
    summary["seconds"] = round(time.perf_counter() - t0, 2)
    (out / "report.md").write_text(_report(summary), encoding="utf-8")
    return summary


def _report(s: dict[str, Any]) -> str:
    rows = "\n".join(
        f"| {LABELS[m]} | " + " | ".join(f"{v:.1f}" for v in s["recall"][m].values())
        + f" | {s['share_ahead_mean'][m]:.2f} |" for m in METHODS
    )
    ks = " | ".join(s["recall"]["dense"].keys())
    split = "\n".join(f"| {n} | {v['background']:.3f} | {v['task']:.3f} | {v['background'] + v['task']:.3f} |"
                      for n, v in s["score_split"].items())
    e = s["energy"]
    return f"""# SkillSight analysis: {s['data']}

{s['n_queries']} queries against {s['n_docs']} skills; background subspace of rank r = {s['rank']} from
|T_g| = {s['n_generic']} generic tokens.

## Retrieval

| method | {ks} | corpus ranked ahead of gold (%) |
|---|{'---|' * len(s['recall']['dense'])}---|
{rows}

![recall vs depth](recall_depth.png) ![share ahead](rank_share.png)

## Background

Mean background energy ‖Bᵀv‖²: documents {e['documents_mean']:.3f}, queries {e['queries_mean']:.3f}
(ratio {e['documents_mean'] / max(e['queries_mean'], 1e-12):.2f}).

| pair | background part | task part | dense score |
|---|---|---|---|
{split}

![energy](energy.png) ![score split](score_split.png)
"""
