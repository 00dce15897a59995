"""Orchestration of ``skillsight bench``: corpora, models, sizes, report, table and plot."""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

REPORT_KEYS = ("cpu", "threads", "sizes")
SIZE_KEYS = ("n_docs", "dim", "dtype", "p50_ms", "floor_ms")


def report_schema_keys() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(top-level keys, per-size keys, stage keys) of the ``--json`` report."""
    from skillsight_fast.benchmark.runner import STAGES

    return REPORT_KEYS, SIZE_KEYS, STAGES


def _read_queries(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line)["text"] for line in fh if line.strip()]


def _base_index(args: argparse.Namespace, encoder) -> Any:
    from skillsight_fast import SkillIndex
    from skillsight_fast.models import cache_root

    if args.index:
        return SkillIndex.load(args.index, verify=False)
    tag = "-".join(Path(s).name for s in args.corpus)
    cache = cache_root() / "bench" / f"{tag}-{getattr(encoder, 'checksum', 'nomodel')[:12]}"
    if (cache / "manifest.json").exists():
        return SkillIndex.load(cache, verify=False)
    if encoder is None:
        raise SystemExit("skillsight bench --no-model needs --index DIR (a prebuilt index)")
    from skillsight_fast.skills import load_skills

    print(f"building the index of {' '.join(args.corpus)} once (cached in {cache})", file=sys.stderr)
    index = SkillIndex.build(load_skills(args.corpus).skills, encoder)
    index.save(cache)
    return index


def _doc_texts(index, sources: Sequence[str]) -> list[str]:
    """Text of each real row (full skill text when the sources load, else name + description)."""
    texts = [f"{m.name}\n{m.description}" for m in index.skills]
    try:
        from skillsight_fast.skills import load_skills

        by_id = {s.id: s.text for s in load_skills(list(sources)).skills}
        texts = [by_id.get(m.id, t) for m, t in zip(index.skills, texts)]
    except Exception as exc:  # sources missing or unreadable: fall back to the metadata
        logger.warning("cannot read the corpus texts (%s); reranking name + description", exc)
    return texts


def run_benchmark(
    base,
    query_texts: Sequence[str],
    sizes: Sequence[int | str],
    *,
    encoder=None,
    cross_encoder=None,
    doc_texts: Sequence[str] | None = None,
    reps: int = 30,
    rerank_reps: int = 3,
    rerank_pairs: int = 100,
    compressed_from: int = 500_000,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    checkpoint: str | Path | None = None,
) -> dict[str, Any]:
    """Run every arm at every size; returns the full report (``sizes[*].detail`` included).

    Parameters
    ----------
    base : SkillIndex
        The real corpus (its encoder, if any, is replaced by ``encoder``).
    query_texts : sequence of str
    sizes : sequence of int or "real"
        Library sizes; numbers above the real size are synthetic scale-ups (``synthetic.scale_up``).
    encoder, cross_encoder : optional
        Query encoder (``encode``) and reranker (``score``); None skips the encode, end-to-end and
        rerank arms (their entries are null).
    """
    from skillsight_fast.benchmark.runner import bench_size, cpu_name, load_average
    from skillsight_fast.benchmark.synthetic import scale_up

    say = progress or (lambda msg: None)
    texts = list(query_texts)
    if encoder is not None:
        base._encoder = encoder
        qv = encoder.encode(texts)
    else:  # no model: queries are seeded perturbations of document vectors
        rng = np.random.default_rng(seed)
        src = rng.integers(0, len(base), len(texts))
        qv = base.embeddings[src] + rng.standard_normal((len(texts), base.stats.dim)).astype(np.float32) * 0.05
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    doc_texts = list(doc_texts) if doc_texts is not None else [f"{m.name}\n{m.description}" for m in base.skills]
    all_threads = os.cpu_count() or 1
    bw_buffer = np.ones(1 << 26, np.float32)  # 256 MB, far beyond the last-level cache
    report: dict[str, Any] = {"cpu": cpu_name(), "threads": 1, "sizes": []}
    meta: dict[str, Any] = {"all_threads": all_threads, "load_start": load_average(), "versions": _versions(),
                            "encoder": getattr(encoder, "model_id", None),
                            "reranker": None if cross_encoder is None else {
                                "trained": bool(getattr(cross_encoder, "trained", True)),
                                "architecture": getattr(cross_encoder, "architecture", "?"),
                                "max_length": getattr(cross_encoder, "max_length", None),
                                "depth": 100}}
    rerank_cost: float | None = None  # the cross-encoder's seconds per query, measured once per run
    for size in sizes:
        n = len(base) if size == "real" else int(size)
        t0 = time.perf_counter()
        if n == len(base):
            index, src = base, np.arange(n)
        else:
            index, src = scale_up(base, n, seed=seed)
            if encoder is not None:
                index._encoder = encoder
        build_s = time.perf_counter() - t0
        say(f"size {n}: corpus ready in {build_s:.1f} s (load {load_average():.2f}); timing")
        entries = bench_size(
            index, texts, qv, lambda j, src=src: doc_texts[int(src[j])],
            encoder=encoder, cross_encoder=cross_encoder, reps=reps if n < 500_000 else max(5, reps // 3),
            rerank_reps=rerank_reps, rerank_pairs=rerank_pairs, rerank_cost=rerank_cost, compressed=n >= compressed_from, approximate=n >= compressed_from,
            all_threads=all_threads, bandwidth_buffer=bw_buffer,
        )
        rr = entries[0]["detail"].get("rerank", {})
        if rerank_cost is None and "cross_encoder_s" in rr:
            rerank_cost = rr["cross_encoder_s"]
        for e in entries:
            e.setdefault("detail", {})["synthetic"] = n != len(base)
            e["detail"]["corpus_build_s"] = round(build_s, 1)
        report["sizes"].extend(entries)
        say(format_table({"sizes": entries}))
        if checkpoint is not None:  # a long run keeps what it measured if a later size fails
            Path(checkpoint).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
        del index
    meta["load_end"] = load_average()
    report["meta"] = meta
    return report


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": sys.version.split()[0]}
    for pkg in ("skillsight-fast", "numpy", "numba", "onnxruntime", "faiss-cpu", "bm25s"):
        try:
            out[pkg] = md.version(pkg)
        except md.PackageNotFoundError:
            pass
    return out


def public_report(report: dict[str, Any]) -> dict[str, Any]:
    """The ``--json`` schema only: {cpu, threads, sizes: [{n_docs, dim, dtype, p50_ms, floor_ms}]}."""
    return {"cpu": report["cpu"], "threads": report["threads"],
            "sizes": [{k: e[k] for k in SIZE_KEYS} for e in report["sizes"]]}


def _fmt(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x:.3f}" if x < 10 else f"{x:.1f}" if x < 1000 else f"{x:,.0f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "-"
    r = a / b
    return f"{r:,.0f}×" if r >= 100 else f"{r:.2f}×"


def format_table(report: dict[str, Any]) -> str:
    """Markdown speed table: p50 ms per stage and size, the ratios the targets use."""
    from skillsight_fast.benchmark.runner import STAGES

    head = ["skills", "dtype", *STAGES, "floor", "scan/floor", "scoring/faiss", "lex_all/bm25s",
            "rerank/scoring", "rerank/e2e"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for e in report["sizes"]:
        p = e["p50_ms"]
        extra = e.get("detail", {}).get("extra_p50_ms", {})
        cells = [f"{e['n_docs']:,}", e["dtype"], *(_fmt(p[s]) for s in STAGES), _fmt(e["floor_ms"]),
                 _ratio(p["dense_topk"], e["floor_ms"]), _ratio(p["scoring"], p["faiss_flat"]),
                 _ratio(extra.get("lexical_all"), p["bm25s"]), _ratio(p["dense_rerank"], p["scoring"]),
                 _ratio(p["dense_rerank"], p["end_to_end"])]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(report: dict[str, Any], out: str | Path) -> None:
    """Log-log p50 latency against library size for the main arms and the bandwidth floor."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - optional extra
        raise SystemExit("the plot needs matplotlib: pip install 'skillsight-fast[plot]'") from exc
    rows = [e for e in report["sizes"] if e["dtype"] == "float32"]
    n = [e["n_docs"] for e in rows]
    fig, ax = plt.subplots(figsize=(10, 5))
    series = [("scoring", "SkillSight scoring", "o-"), ("end_to_end", "SkillSight end to end (with encoding)", "o--"),
              ("dense_topk", "dense scan + top-K", "s-"), ("faiss_flat", "faiss IndexFlatIP", "^-"),
              ("bm25s", "bm25s", "v-"), ("dense_rerank", "Dense + Reranker (top-100)", "D-")]
    for key, label, style in series:
        ys = [e["p50_ms"][key] for e in rows]
        if all(y is not None for y in ys):
            ax.plot(n, ys, style, label=label)
    ax.plot(n, [e["floor_ms"] for e in rows], "k:", label="memory-bandwidth floor (float32 scan)")
    int8 = [e for e in report["sizes"] if e["dtype"] == "int8"]
    if int8:
        ax.plot([e["n_docs"] for e in int8], [e["p50_ms"]["scoring"] for e in int8], "*", ms=12,
                label="SkillSight scoring, int8 scan + exact re-score")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("skills in the library")
    ax.set_ylabel("p50 latency per query, ms (1 thread)")
    ax.set_title(f"skillsight bench — {report['cpu']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)  # outside: no data hidden
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)


def run_from_args(args: argparse.Namespace) -> int:
    """Entry point of ``skillsight bench``."""
    t_start = time.perf_counter()
    from skillsight_fast.benchmark import DEFAULT_SIZES, QUICK_SIZES

    sizes = args.sizes or list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    reps = args.reps or (10 if args.quick else 40)
    rerank_reps = args.rerank_reps or (1 if args.quick else 3)
    encoder = cross = None
    if not args.no_model:
        from skillsight_fast.models import load_encoder
        from skillsight_fast.models.cross_encoder import load_cross_encoder

        encoder = load_encoder(threads=1)
        cross = load_cross_encoder(threads=1)
    base = _base_index(args, encoder)
    qfile = Path(args.queries) if args.queries else Path(args.corpus[0]) / "queries.jsonl.gz"
    queries = _read_queries(qfile) if qfile.exists() else [s.description or s.name for s in base.skills[:64]]
    if args.quick:
        queries = queries[:16]
    doc_texts = None if args.no_model else _doc_texts(base, args.corpus)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    report = run_benchmark(base, queries, [s if s == "real" else int(s) for s in sizes], encoder=encoder,
                           cross_encoder=cross, doc_texts=doc_texts, reps=reps, rerank_reps=rerank_reps,
                           rerank_pairs=10 if args.quick else 100,
                           compressed_from=args.compressed_from, seed=args.seed, progress=say,
                           checkpoint=args.details)
    report["meta"]["wall_s"] = round(time.perf_counter() - t_start, 1)
    report["meta"]["command"] = "skillsight " + " ".join(sys.argv[1:]) if sys.argv else ""
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(public_report(report), indent=1) + "\n", encoding="utf-8")
    if args.details:
        Path(args.details).parent.mkdir(parents=True, exist_ok=True)
        Path(args.details).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    if args.plot:
        plot(report, args.plot)
    print(format_table(report))
    if cross is not None and not getattr(cross, "trained", True):
        print("note: Dense + Reranker uses the ms-marco-MiniLM-L-6-v2 architecture with the bundled "
              "all-MiniLM-L6-v2 weights and an untrained head: its latency is real, its scores are not.")
    print(f"cpu {report['cpu']}; 1 thread per query; bandwidth floor from a streaming read in the same run; "
          f"wall {report['meta']['wall_s']} s")
    return 0
