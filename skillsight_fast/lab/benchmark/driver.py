"""Orchestration of ``skillsight bench``: corpora, models, sizes, report, table and plot."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from skillsight_fast.config import MAPPED_TIERS
from skillsight_fast.errors import SkillsightError, install_hint

logger = logging.getLogger(__name__)

REPORT_KEYS = ("cpu", "threads", "sizes")
SIZE_KEYS = ("n_docs", "dim", "dtype", "p50_ms", "floor_ms", "tiers")
#: Query encoder tiers timed besides the transformer (docs/ENCODERS.md).
STATIC_TIERS = ("static-mapped", "static")


def report_schema_keys() -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(top-level keys, per-size keys, stage keys) of the ``--json`` report."""
    from skillsight_fast.lab.benchmark.runner import STAGES

    return REPORT_KEYS, SIZE_KEYS, STAGES


def _base_index(args: argparse.Namespace, encoder) -> Any:
    from skillsight_fast import IndexConfig, SkillIndex
    from skillsight_fast.models import cache_root

    if args.index:
        return SkillIndex.load(args.index, verify=False)
    tag = "-".join(Path(s).name for s in args.corpus)
    cache = cache_root() / "bench" / f"{tag}-{getattr(encoder, 'checksum', 'nomodel')[:12]}"
    if (cache / "manifest.json").exists():
        return SkillIndex.load(cache, verify=False)
    if encoder is None:
        raise SystemExit("skillsight bench --no-model needs --index DIR (a prebuilt index)")
    from skillsight_fast.library.skills import load_skills

    print(f"building the index of {' '.join(args.corpus)} once (cached in {cache})", file=sys.stderr)
    # the transformer tier: every other tier is timed as a view of its arrays (tier_views)
    index = SkillIndex.build(load_skills(args.corpus).skills, encoder, IndexConfig(query_encoder="transformer"))
    index.save(cache)
    return index


def tier_views(index, static=None, query_map: np.ndarray | None = None, int8_encoder=None,
               contextual: tuple[np.ndarray, np.ndarray] | None = None, int8_scan=None,
               fitted: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """Views of ``index`` that search with each other tier (the arrays are shared, not copied).

    ``transformer-int8`` (with ``int8_encoder``): the index searching with int8 task vectors, its
    skills float32 (what ``skillsight index`` builds by default). ``static-mapped`` (with
    ``static`` and ``query_map``): the index with ``query_map`` and ``static`` as its query encoder
    (what ``skillsight index --query-encoder static-mapped`` builds). ``static``: the static model
    as the query encoder of the same arrays. A real static index holds static document vectors of
    the same shape; the scan, the lexical side and the fusion cost the same whatever the values, so
    the latency is that tier's, while its accuracy is measured on real static indexes (ENCODERS.md).
    ``contextual`` (with ``static``, ``query_map`` and the token table ``contextual``): the
    static-mapped view plus the table (what ``--query-encoder contextual`` builds). ``fitted`` (with
    ``static``, ``query_map`` and the fitted table ``fitted``): the same with the fitted table (what
    ``--query-encoder fitted`` builds; :mod:`skillsight_fast.models.fitted`). ``cascade`` (with
    ``fitted`` and ``int8_encoder``): the fitted view with the lookup-first cascade, its transformer
    ``int8_encoder`` (what ``skillsight index`` builds by default: ``--query-encoder auto``).
    With ``int8_scan`` (an :class:`~skillsight_fast.engine.scan.Int8Scan` built over the index's
    background-removed matrix, outside any timing), ``static-mapped+int8``, ``contextual+int8`` and
    ``static+int8`` are the same tiers with that scan as the dense candidate stage (``--scan int8``).
    """
    from skillsight_fast import SkillIndex
    from skillsight_fast.engine.state import ModelInfo

    st = index.state
    views: dict[str, Any] = {}
    if int8_encoder is not None:
        views["transformer-int8"] = SkillIndex(dataclasses.replace(st, config=st.config.replace(query_int8=True)),
                                               index.encoders.attached, int8_encoder)
    if static is not None and query_map is not None:
        folder = str(getattr(static, "folder", "") or static.model_id)
        mapped = dataclasses.replace(
            st, config=st.config.replace(query_encoder="static-mapped", query_model=folder, query_int8=None),
            dense=dataclasses.replace(st.dense, query_map=query_map),
            model=dataclasses.replace(st.model, query_id=static.model_id, query_checksum=static.checksum))
        plain = dataclasses.replace(st, config=st.config.replace(query_encoder="static", model=folder,
                                                                 query_model=folder, query_int8=None),
                                    model=ModelInfo(static.model_id, static.checksum))
        views |= {"static-mapped": SkillIndex(mapped, index.encoders.attached, static), "static": SkillIndex(plain, static)}
        for tier, table in (("contextual", contextual), ("fitted", fitted)):
            if table is None:
                continue
            ids, vectors = table
            ctx = dataclasses.replace(
                mapped, config=mapped.config.replace(query_encoder=tier),
                dense=dataclasses.replace(mapped.dense, query_table_ids=np.ascontiguousarray(ids, np.int32),
                                          query_table=np.ascontiguousarray(vectors, np.float32)))
            views[tier] = SkillIndex(ctx, index.encoders.attached, static)
        if "fitted" in views and int8_encoder is not None:  # the default: the lookup-first cascade
            from skillsight_fast.engine.cascade import DEFAULT_CASCADE

            cascade = SkillIndex(dataclasses.replace(views["fitted"].state, cascade=DEFAULT_CASCADE),
                                 index.encoders.attached, static)
            cascade.encoders.fallback_encoder = int8_encoder
            views["cascade"] = cascade
        if int8_scan is not None:
            if int8_scan.docs is not st.dense.embeddings_perp:
                raise ValueError("the int8 scan must be built over the index's background-removed matrix")
            for name, view in list(views.items()):
                if name == "transformer-int8":
                    continue
                s8 = dataclasses.replace(view.state, scan=int8_scan, config=view.state.config.replace(
                    scan="int8", int8_oversample=int8_scan.oversample))
                views[f"{name}+int8"] = SkillIndex(s8, view.encoders.attached, view.encoders.attached_query)
                if view.cascade.on:
                    views[f"{name}+int8"].encoders.fallback_encoder = view.encoders.fallback_encoder
    return views


def default_tier(n_docs: int, config: Any = None) -> tuple[str, str]:
    """(tier name, scan) of the default configuration at ``n_docs`` skills: the query encoder an index
    built with ``config`` (default: ``IndexConfig()``, what ``skillsight index`` builds) searches with,
    named as in :func:`tier_views` (``transformer-int8`` for int8 tasks), and the scan it resolves to."""
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.engine.scan import resolve_scan

    # settled as an in-memory build with the transformer settles it (auto: the lookup-first cascade)
    cfg = (config if config is not None else IndexConfig()).settled(can_fit=True)
    name = cfg.encoder.query_encoder
    if name == "transformer":
        name = "transformer-int8" if cfg.encoder.query_int8 else "transformer"
    elif name == "fitted" and (config is None or config.encoder.query_encoder == "auto"):  # auto's lookup tier: the cascade
        name = "cascade"
    return name, resolve_scan(cfg.scan.kind, n_docs)


def add_default_tier(entries: list[dict[str, Any]], config: Any = None) -> None:
    """Add ``tiers.default`` to each entry of one size (in place): the timings of the default
    configuration (:func:`default_tier`) at that size, ``{"tier", "scan", "encode", "end_to_end"}``.

    ``exact``: the float32 entry's timings of that tier. ``int8``: its ``+int8`` view when timed, else
    the int8 entry's (the float32 end to end shifted by the int8 scan's scoring). ``ivf``: the float32
    end to end shifted by the IVF scoring (``detail.ivf``). A tier not timed (no model) has null timings.
    """
    if not entries:
        return
    name, scan = default_tier(int(entries[0]["n_docs"]), config)
    by_dtype = {e["dtype"]: e for e in entries}
    f32 = by_dtype.get("float32", entries[0])
    tiers32 = f32.get("tiers") or {}
    src: dict[str, Any] | None = None
    if scan == "exact":
        src = tiers32.get(name)
    elif scan == "int8":
        src = tiers32.get(f"{name}+int8") or (by_dtype.get("int8", {}).get("tiers") or {}).get(name)
    elif scan == "ivf" and tiers32.get(name):
        ivf = f32.get("detail", {}).get("ivf", {}).get("scoring_p50_ms")
        e2e, scoring = tiers32[name].get("end_to_end"), f32["p50_ms"].get("scoring")
        shifted = None if None in (ivf, e2e, scoring) else round(e2e - scoring + ivf, 4)
        src = {"encode": tiers32[name].get("encode"), "end_to_end": shifted}
    default = {"tier": name, "scan": scan, "encode": None, "end_to_end": None, **(src or {})}
    for e in entries:
        e.setdefault("tiers", {})["default"] = dict(default)


def cached_fitted_table(base, sources: Sequence[str], contextual: tuple[np.ndarray, np.ndarray], static,
                        int8_encoder, folder: Path) -> tuple[np.ndarray, np.ndarray] | None:
    """The fitted tier's table of the bench corpus (what ``--query-encoder fitted`` builds over
    ``base``), kept in ``folder``; None when the corpus's skills do not load (no texts to fit on)."""
    from skillsight_fast.errors import SkillsightError
    from skillsight_fast.files import atomic_output
    from skillsight_fast.library.skills import load_skills, namedesc_text
    from skillsight_fast.models.fitted import fit_library_table, library_training_set

    ids_file, vec_file = folder / "ids.npy", folder / "vectors.npy"
    if ids_file.is_file() and vec_file.is_file():
        return np.load(ids_file, allow_pickle=False), np.load(vec_file, allow_pickle=False)
    try:
        by_id = {s.id: s for s in load_skills(list(sources)).skills}
        skills = [by_id[m.id] for m in base.skills]
    except (OSError, KeyError, SkillsightError) as exc:  # sources missing or unreadable, ids that differ
        logger.warning("cannot read the corpus's skills (%s); the fitted tier is not timed", exc)
        return None
    texts = [s.text for s in skills]
    all_texts, targets, owner = library_training_set(
        skills, texts, base.dense.embeddings, [namedesc_text(s.name, s.description) for s in skills], base.dense.namedesc,
        int8_encoder)
    ids, res = fit_library_table(contextual[0], contextual[1], int8_encoder.tokenize, all_texts, targets, owner,
                                 base.dense.basis, base.dense.embeddings_perp,
                                 drop=[static.unk_id] if static.unk_id is not None else [])
    folder.mkdir(parents=True, exist_ok=True)
    for path, arr in ((vec_file, res.table), (ids_file, ids)):  # ids last: they mark the pair complete
        with atomic_output(path, suffix=".npy") as tmp:
            np.save(tmp, arr, allow_pickle=False)
    return ids, res.table


def _doc_texts(index, sources: Sequence[str]) -> list[str]:
    """Text of each real row (full skill text when the sources load, else name + description)."""
    texts = [f"{m.name}\n{m.description}" for m in index.skills]
    try:
        from skillsight_fast.library.skills import load_skills

        by_id = {s.id: s.text for s in load_skills(list(sources)).skills}
        texts = [by_id.get(m.id, t) for m, t in zip(index.skills, texts)]
    except (OSError, ValueError, SkillsightError) as exc:  # sources missing or unreadable: the metadata
        logger.warning("cannot read the corpus texts (%s); reranking name + description", exc)
    return texts


#: The tool and API catalogues whose tasks are the bench's short tasks (their ``queries.jsonl.gz``).
SHORT_DATASETS = ("bfcl", "metatool", "gorilla_hf")


def short_tasks(data_root: str | Path, names: Sequence[str] = SHORT_DATASETS, per_dataset: int = 64,
                seed: int = 0) -> list[str]:
    """Short tasks for the bench: ``per_dataset`` tasks drawn (seeded) from each catalogue's task file
    under ``data_root``, interleaved (task i comes from catalogue i mod 3), so any number of
    repetitions samples the catalogues alike. A catalogue without its file is skipped."""
    from skillsight_fast.library.queries import read_queries

    rng = np.random.default_rng(seed)
    lists = []
    for name in names:
        qfile = Path(data_root) / name / "queries.jsonl.gz"
        if not qfile.is_file():
            logger.warning("no %s: its short tasks are not timed", qfile)
            continue
        texts = [t.text for t in read_queries(qfile)]
        pick = rng.permutation(len(texts))[:per_dataset]
        lists.append([texts[i] for i in sorted(pick.tolist())])
    return [lst[i] for i in range(max((len(x) for x in lists), default=0)) for lst in lists if i < len(lst)]


def reranker_variants(threads: int) -> dict[str, Any]:
    """The reranker as a CPU user would run it, beside the reference (MiniLM-L6, float32, 512 tokens,
    one thread, batches of 16 pairs sorted by length): int8 (onnxruntime dynamic quantisation), then
    on ``threads`` cores, then at 256 tokens; TinyBERT-L-2 int8 on ``threads`` cores at 256 tokens."""
    from skillsight_fast.lab.baselines.cross_encoder import load_cross_encoder, load_tinybert_reranker

    return {"minilm int8 512 1t": load_cross_encoder(threads=1, int8=True),
            f"minilm int8 512 {threads}t": load_cross_encoder(threads=threads, int8=True),
            f"minilm int8 256 {threads}t": load_cross_encoder(threads=threads, int8=True, max_length=256),
            f"tinybert int8 256 {threads}t": load_tinybert_reranker(threads=threads, int8=True, max_length=256)}


def run_benchmark(
    base,
    query_texts: Sequence[str],
    sizes: Sequence[int | str],
    *,
    encoder=None,
    cross_encoder=None,
    tinybert=None,
    static=None,
    int8_encoder=None,
    contextual: tuple[np.ndarray, np.ndarray] | None = None,
    fitted: tuple[np.ndarray, np.ndarray] | None = None,
    doc_texts: Sequence[str] | None = None,
    reps: int = 30,
    rerank_reps: int = 3,
    rerank_pairs: int = 100,
    compressed_from: int = 500_000,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    checkpoint: str | Path | None = None,
    short_texts: Sequence[str] | None = None,
    rerank_variants: dict[str, Any] | None = None,
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
    tinybert : optional
        A second reranker (the ms-marco-TinyBERT-L-2-v2 architecture), ``p50_ms.tinybert_rerank``.
    static : StaticEncoder, optional
        Times the static tiers (``tiers`` of each size); the static-mapped map is fitted on the
        real corpus's ``doc_texts`` onto ``base``'s embeddings, as an index build does.
    int8_encoder : OnnxEncoder, optional
        The int8-quantised task encoder: times the ``transformer-int8`` tier (the default index's
        task side). ``encode``, ``end_to_end`` and the ``transformer`` tier stay float32 tasks.
    contextual : (int32 (m,), float32 (m, d)), optional
        The real corpus's contextual token table: times the ``contextual`` tier (with ``static``).
    fitted : (int32 (m,), float32 (m, d)), optional
        The real corpus's fitted table (:func:`cached_fitted_table`): times the ``fitted`` tier.
    short_texts : sequence of str, optional
        Short tasks (tool and API catalogue tasks, :func:`short_tasks`) timed beside ``query_texts``
        on the tiers of :data:`~skillsight_fast.lab.benchmark.runner.SHORT_TIERS`.
    rerank_variants : dict, optional
        More rerankers by name (:func:`reranker_variants`), timed like ``cross_encoder`` once per run.
    """
    from skillsight_fast.engine.cascade import NO_CASCADE
    from skillsight_fast.lab.benchmark.runner import bench_size, cpu_name, load_average
    from skillsight_fast.lab.benchmark.synthetic import scale_up

    say = progress or (lambda msg: None)
    texts = list(query_texts)
    # the float32 transformer is the reference arm (encode, end_to_end); int8 tasks are a tier
    st = base.state
    if st.config.encoder.query_encoder in MAPPED_TIERS:  # a lookup tier's index (the cascade): its transformer arrays
        st = dataclasses.replace(
            st, config=st.config.replace(query_encoder="transformer", query_model=None), cascade=NO_CASCADE,
            dense=dataclasses.replace(st.dense, query_map=None, query_table=None, query_table_ids=None))
    base.state = dataclasses.replace(st, config=st.config.replace(query_int8=False))
    base.encoders.reset_query()
    if encoder is not None:
        base.encoders.attach(encoder, check=False)
        qv = encoder.encode(texts)
    else:  # no model: queries are seeded perturbations of document vectors
        rng = np.random.default_rng(seed)
        src = rng.integers(0, len(base), len(texts))
        qv = base.dense.embeddings[src] + rng.standard_normal((len(texts), base.stats.dim)).astype(np.float32) * 0.05
        qv /= np.linalg.norm(qv, axis=1, keepdims=True)
    doc_texts = list(doc_texts) if doc_texts is not None else [f"{m.name}\n{m.description}" for m in base.skills]
    query_map = None
    if static is not None:
        from skillsight_fast.lab.evaluation.cache import EmbeddingCache
        from skillsight_fast.models import cache_root
        from skillsight_fast.models.static import fit_query_map

        t0 = time.perf_counter()  # the skills' static vectors are cached per text (a rerun fits in ~0.1 s)
        s_docs = EmbeddingCache(cache_root(), static.model_id, static.checksum, "doc").get(doc_texts, static.encode)
        query_map = fit_query_map(s_docs, base.dense.embeddings)
        say(f"static-mapped: map fitted on {len(doc_texts)} skill texts in {time.perf_counter() - t0:.1f} s")
    all_threads = os.cpu_count() or 1
    bw_buffer = np.ones(1 << 26, np.float32)  # 256 MB, far beyond the last-level cache
    report: dict[str, Any] = {"cpu": cpu_name(), "threads": 1, "sizes": []}
    meta: dict[str, Any] = {"all_threads": all_threads, "load_start": load_average(), "versions": _versions(),
                            "encoder": getattr(encoder, "model_id", None),
                            "reranker": None if cross_encoder is None else {
                                "trained": bool(getattr(cross_encoder, "trained", True)),
                                "architecture": getattr(cross_encoder, "architecture", "?"),
                                "max_length": getattr(cross_encoder, "max_length", None),
                                "depth": 100},
                            "tinybert": None if tinybert is None else {
                                "trained": bool(getattr(tinybert, "trained", True)),
                                "architecture": getattr(tinybert, "architecture", "?"),
                                "max_length": getattr(tinybert, "max_length", None), "depth": 100},
                            "short_tasks": len(short_texts or []),
                            "static_encoder": getattr(static, "model_id", None),
                            "int8_task_encoder": None if int8_encoder is None else str(int8_encoder.onnx_path.name)}
    rerank_cost: float | None = None  # the cross-encoder's seconds per query, measured once per run
    tinybert_cost: float | None = None
    variant_costs: dict[str, float] = {}
    for size in sizes:
        n = len(base) if size == "real" else int(size)
        t0 = time.perf_counter()
        if n == len(base):
            index, src = base, np.arange(n)
        else:
            index, src = scale_up(base, n, seed=seed)
            if encoder is not None:
                index.encoders.attach(encoder, check=False)
        build_s = time.perf_counter() - t0
        scan8 = None
        if static is not None or n >= compressed_from:  # built once per size, outside any timing
            from skillsight_fast.engine.scan import Int8Scan

            scan8 = Int8Scan.build(index.dense.embeddings_perp, config=index.config)
        say(f"size {n}: corpus ready in {build_s:.1f} s (load {load_average():.2f}); timing")
        entries = bench_size(
            index, texts, qv, lambda j, src=src: doc_texts[int(src[j])],
            encoder=encoder, cross_encoder=cross_encoder, tinybert=tinybert,
            tiers=tier_views(index, static, query_map, int8_encoder, contextual, int8_scan=scan8,
                             fitted=fitted) or None,
            int8_scan=scan8,
            reps=reps if n < 500_000 else max(5, reps // 3),
            rerank_reps=rerank_reps, rerank_pairs=rerank_pairs, rerank_cost=rerank_cost,
            tinybert_cost=tinybert_cost, compressed=n >= compressed_from, approximate=n >= compressed_from,
            all_threads=all_threads, bandwidth_buffer=bw_buffer, short_texts=short_texts,
            rerank_variants=rerank_variants, variant_costs=variant_costs or None,
        )
        rr = entries[0]["detail"].get("rerank", {})
        if rerank_cost is None and "cross_encoder_s" in rr:
            rerank_cost = rr["cross_encoder_s"]
        if tinybert_cost is None and "tinybert_rerank_cross_encoder_s" in rr:
            tinybert_cost = rr["tinybert_rerank_cross_encoder_s"]
        for v in rerank_variants or {}:  # measured at the first size, reused at the others
            if v not in variant_costs and f"rerank@{v}_cross_encoder_s" in rr:
                variant_costs[v] = rr[f"rerank@{v}_cross_encoder_s"]
        add_default_tier(entries)
        for e in entries:
            e.setdefault("detail", {})["synthetic"] = n != len(base)
            e["detail"]["corpus_build_s"] = round(build_s, 1)
        report["sizes"].extend(entries)
        del scan8
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
            "sizes": [{k: e.get(k, {}) if k == "tiers" else e[k] for k in SIZE_KEYS} for e in report["sizes"]]}


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
    from skillsight_fast.lab.benchmark.runner import STAGES

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
    tier_rows = [(e, name, t) for e in report["sizes"] for name, t in (e.get("tiers") or {}).items()]
    if tier_rows:
        lines += ["", ("| skills | dtype | query encoder | encode | long e2e p50 / p90 / mean | short e2e p50 / p90 / mean "
                       "| Dense + Reranker (MiniLM-L6 fp32 512 1t) / long e2e p50 | Dense + TinyBERT-L-2 (fp32 512 1t) / "
                       "long e2e p50 |"), "|---|---|---|---|---|---|---|---|"]
        for e, name, t in tier_rows:
            p = e["p50_ms"]
            if name == "default":
                name = f"default ({t.get('tier')}, {t.get('scan')} scan)"
            lines.append(f"| {e['n_docs']:,} | {e['dtype']} | {name} | {_fmt(t['encode'])} | {_spread(t, 'end_to_end')} "
                         f"| {_spread(t, 'short_end_to_end')} "
                         f"| {_ratio(p['dense_rerank'], t['end_to_end'])} | {_ratio(p['tinybert_rerank'], t['end_to_end'])} |")
    base_rows = [(e, name, b) for e in report["sizes"] if e["dtype"] == "float32"
                 for name, b in _baselines(e).items()]
    if base_rows:
        lines += ["", ("| skills | baseline (dense top-100 + reranker) | p50 ms | / default long mean "
                       "| / default short mean |"), "|---|---|---|---|---|"]
        for e, name, ms in base_rows:
            d = (e.get("tiers") or {}).get("default") or {}
            lines.append(f"| {e['n_docs']:,} | {name} | {_fmt(ms)} | {_ratio(ms, d.get('end_to_end_mean'))} "
                         f"| {_ratio(ms, d.get('short_end_to_end_mean'))} |")
    return "\n".join(lines)


def _spread(t: dict[str, Any], key: str) -> str:
    """``p50 / p90 / mean`` of one tier's timings (``-`` for what was not timed)."""
    if t.get(key) is None:
        return "-"
    return " / ".join(_fmt(t.get(k)) for k in (key, f"{key}_p90", f"{key}_mean"))


def _baselines(entry: dict[str, Any]) -> dict[str, float]:
    """Every reranker baseline of one size entry, by a name that says how it ran, with its p50 ms:
    the reference and TinyBERT arms, then ``detail.rerank_variants`` (dense top-100 included: each
    variant's reranker cost plus the same faiss top-100 as the reference)."""
    p = entry["p50_ms"]
    out = {"MiniLM-L6 fp32 512 tokens 1 thread (reference)": p.get("dense_rerank"),
           "TinyBERT-L-2 fp32 512 tokens 1 thread": p.get("tinybert_rerank")}
    for name, v in (entry.get("detail", {}).get("rerank_variants") or {}).items():
        out[name] = v.get("p50_ms")
    return {k: v for k, v in out.items() if v is not None}


def plot(report: dict[str, Any], out: str | Path) -> None:
    """Log-log p50 latency against library size for the main arms and the bandwidth floor."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - optional extra
        raise SystemExit("the plot needs matplotlib: " + install_hint("plot")) from exc
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
    from skillsight_fast.lab.benchmark import DEFAULT_SIZES, QUICK_SIZES
    from skillsight_fast.library.queries import read_queries

    sizes = args.sizes or list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    reps = args.reps or (10 if args.quick else 40)
    rerank_reps = args.rerank_reps or (1 if args.quick else 3)
    encoder = cross = tinybert = static = int8_encoder = contextual = fitted = None
    variants: dict[str, Any] = {}
    shorts: list[str] = []
    if not args.no_model:
        from skillsight_fast.lab.baselines.cross_encoder import load_cross_encoder, load_tinybert_reranker
        from skillsight_fast.models import load_encoder
        from skillsight_fast.models.distill import resolve_static_model
        from skillsight_fast.models.static import load_static_encoder

        encoder = load_encoder(threads=1)
        int8_encoder = load_encoder(threads=1, int8=True)
        cross = load_cross_encoder(threads=1)
        tinybert = load_tinybert_reranker(threads=1)
        static = load_static_encoder(resolve_static_model(args.static_model, encoder.model_id, teacher=encoder))
        variants = reranker_variants(os.cpu_count() or 1)
        shorts = short_tasks(Path(args.corpus[0]).parent, per_dataset=8 if args.quick else 64, seed=args.seed)
    base = _base_index(args, encoder)
    qfile = Path(args.queries) if args.queries else Path(args.corpus[0]) / "queries.jsonl.gz"
    queries = [t.text for t in read_queries(qfile)] if qfile.exists() else [s.description or s.name for s in base.skills[:64]]
    if args.quick:
        queries = queries[:16]
    doc_texts = None if args.no_model else _doc_texts(base, args.corpus)
    if doc_texts is not None:
        from skillsight_fast.lab.evaluation.cache import texts_sha
        from skillsight_fast.models import cache_root
        from skillsight_fast.models.contextual import cached_contextual_table

        t0 = time.perf_counter()  # the token table of the contextual tier: one pass, every thread, cached
        tag = f"contextual-{encoder.checksum[:12]}-{texts_sha(doc_texts)[:16]}"
        contextual = cached_contextual_table(load_encoder(), doc_texts, cache_root() / "bench" / tag)
        print(f"contextual: token table of {len(doc_texts)} skill texts ready in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        t0 = time.perf_counter()  # the fitted tier's table: pieces through the int8 graph and the fit, cached
        fitted = cached_fitted_table(base, args.corpus, contextual, static, int8_encoder,
                                     cache_root() / "bench" / f"fitted-{tag}")
        if fitted is not None:
            print(f"fitted: table fitted on the skills' texts, ready in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr)

    def say(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    report = run_benchmark(base, queries, [s if s == "real" else int(s) for s in sizes], encoder=encoder,
                           cross_encoder=cross, tinybert=tinybert, static=static, int8_encoder=int8_encoder,
                           contextual=contextual, fitted=fitted, doc_texts=doc_texts, reps=reps,
                           rerank_reps=rerank_reps,
                           rerank_pairs=10 if args.quick else 100,
                           compressed_from=args.compressed_from, seed=args.seed, progress=say,
                           checkpoint=args.details, short_texts=shorts, rerank_variants=variants)
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
    if tinybert is not None and not getattr(tinybert, "trained", True):
        print("note: Dense + TinyBERT-L-2 is the ms-marco-TinyBERT-L-2-v2 architecture (FlashRank's default) with "
              "seeded random weights (no trained copy offline): its latency is real, its scores are not.")
    if static is not None:
        print("note: the static tier is timed on the same arrays with the static model as query encoder "
              "(a static index has the same shapes); its accuracy is in docs/ENCODERS.md.")
    print(f"cpu {report['cpu']}; 1 thread per query; bandwidth floor from a streaming read in the same run; "
          f"wall {report['meta']['wall_s']} s")
    return 0
