"""Timing harness of ``skillsight bench``: per-stage latency, baselines side by side, throughput.

Every arm is timed one query at a time on one thread, the arms interleaved round-robin within each
repetition (so background load hits all arms alike), after one untimed warm-up call of each arm
(JIT compilation and first-touch page faults stay outside the timed part). Latencies are medians
(p50) and 95th percentiles in milliseconds.
"""

from __future__ import annotations

import logging
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from skillsight_fast.engine.background import BM25_B, BM25_K1, bm25_idf
from skillsight_fast.engine.lexical_candidates import lexical_scores_all
from skillsight_fast.kernels.bandwidth import stream_read as _stream_read

logger = logging.getLogger(__name__)

#: Stage names of the JSON report (``p50_ms``), in table order.
STAGES = ("encode", "project", "dense_topk", "lexical", "fuse_topk", "scoring", "end_to_end",
          "faiss_flat", "bm25s", "dense_rerank", "tinybert_rerank")
#: Candidates scanned by the dense + reranker baseline.
RERANK_DEPTH = 100
#: Tiers also timed on short tasks (tool and API catalogue tasks): the float32 reference, the int8
#: transformer, the lookup alone and the default cascade (with and without the int8 scan).
SHORT_TIERS = ("transformer", "transformer-int8", "fitted", "cascade", "cascade+int8")


def cpu_name() -> str:
    """CPU model string (from /proc/cpuinfo on Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def load_average() -> float:
    """1-minute load average (0.0 when unavailable)."""
    try:
        return float(os.getloadavg()[0])
    except OSError:
        return 0.0


@dataclass
class Timings:
    """Per-arm lists of seconds."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, seconds: float) -> None:
        self.samples.setdefault(name, []).append(seconds)

    def p(self, name: str, q: float) -> float | None:
        s = self.samples.get(name)
        return float(np.percentile(s, q) * 1e3) if s else None


def time_round_robin(arms: dict[str, Callable[[int], Any]], reps: int, timings: Timings) -> None:
    """Warm each arm once, then run ``reps`` rounds calling every arm with the round number."""
    for f in arms.values():
        f(0)
    for r in range(reps):
        for name, f in arms.items():
            t0 = time.perf_counter()
            f(r)
            timings.add(name, time.perf_counter() - t0)


def bm25_retriever(index, k1: float = BM25_K1, b: float = BM25_B):
    """A ``bm25s.BM25`` over the index's own lexicon (binary tf, Lucene idf), built directly.

    Using the same token sets as SkillSight's lexicon keeps the comparison about the scoring kernel,
    not the tokeniser; the eager score matrix is what ``bm25s.BM25.index`` would compute with tf = 1.
    k1 and b are the index's own BM25 constants (the eval's bm25 baseline uses them too).
    """
    import bm25s

    lex = index.lexical.lexicon
    n = len(index)
    idf = bm25_idf(lex.df(), n)
    dl = np.diff(lex.doc_indptr).astype(np.float64)
    norm = 1.0 / (1.0 + k1 * (1.0 - b + b * dl / max(dl.mean(), 1.0)))
    term_of_posting = np.repeat(np.arange(idf.shape[0], dtype=np.int32), np.diff(lex.post_indptr))
    data = idf[term_of_posting]  # bm25s "lucene": idf · tf / (tf + k1 (1 - b + b dl/avgdl))
    del term_of_posting
    data *= norm.astype(np.float32)[lex.post_docs]
    retriever = bm25s.BM25(k1=k1, b=b)
    retriever.scores = {"data": data, "indices": lex.post_docs.astype(np.int32),
                        "indptr": lex.post_indptr.astype(np.int64), "num_docs": n}
    retriever.vocab_dict = {}
    retriever.nonoccurrence_array = None
    return retriever


def _recall(found: np.ndarray, exact: np.ndarray) -> float:
    out = []
    for f, e in zip(found.tolist(), exact.tolist()):
        e = {x for x in e if x >= 0}
        if e:
            out.append(len(e & {x for x in f if x >= 0}) / len(e))
    return float(np.mean(out)) if out else float("nan")


def bench_size(
    index,
    query_texts: Sequence[str],
    query_vectors: np.ndarray,
    doc_text: Callable[[int], str],
    *,
    encoder=None,
    cross_encoder=None,
    tinybert=None,
    tiers: dict[str, Any] | None = None,
    reps: int = 30,
    rerank_reps: int = 3,
    rerank_pairs: int = RERANK_DEPTH,
    rerank_cost: float | None = None,
    tinybert_cost: float | None = None,
    k: int = 10,
    compressed: bool = False,
    approximate: bool = False,
    batch: int = 64,
    all_threads: int = 2,
    bandwidth_buffer: np.ndarray | None = None,
    int8_scan: Any = None,
    short_texts: Sequence[str] | None = None,
    rerank_variants: dict[str, Any] | None = None,
    variant_costs: dict[str, float] | None = None,
) -> list[dict[str, Any]]:
    """Time every arm on one index; returns one report entry (two with ``compressed``).

    ``tiers`` maps a query-encoder tier name to a view of ``index`` searching with that tier
    (:func:`skillsight_fast.lab.benchmark.driver.tier_views`); each gets an ``encode`` arm
    (``SkillIndex.encode`` of one task) and an ``end_to_end`` arm (``SkillIndex.search``). The
    transformer tier is the ``encode`` / ``end_to_end`` stages. ``tinybert`` is a second reranker
    (the ms-marco-TinyBERT-L-2-v2 architecture) timed like ``cross_encoder``. ``int8_scan``: an
    :class:`~skillsight_fast.engine.scan.Int8Scan` over the index's matrix, built by the caller (the
    ``compressed`` arms use it instead of building their own).

    ``short_texts``: short tasks (tool and API catalogue tasks) timed end to end, one at a time, on
    the tiers of :data:`SHORT_TIERS` beside the long ``query_texts`` (``tiers[*].short_end_to_end``,
    ``_p90``, ``_mean``). ``rerank_variants``: more rerankers (name to a cross-encoder: int8, two
    threads, 256 tokens, ...) timed like ``cross_encoder`` over the same 100 candidates
    (``detail.rerank_variants``); ``variant_costs`` (name to seconds per task) reuses a measurement.
    """
    import faiss

    from skillsight_fast.kernels import n_threads, single_thread

    faiss.omp_set_num_threads(1)
    n_docs, dim = index.dense.embeddings_perp.shape
    kc = min(n_docs, max(index.decisions.candidates, k))
    nq = len(query_texts)
    texts = list(query_texts)
    qv = np.ascontiguousarray(query_vectors, dtype=np.float32)
    perp = index.dense.embeddings_perp
    lex = index.lexical.lexicon
    flat = faiss.IndexFlatIP(dim)
    flat.add(index.dense.embeddings)
    retriever = bm25_retriever(index)
    no_exclusion = np.zeros(len(lex.vocab), bool)  # bm25s sees every query token
    bm25_ids = [[int(t) for t in lex.query_terms([q], no_exclusion)[0]] or [0] for q in texts]
    _ = lex.term_ids
    qp_all = index.remove_background(qv)
    timings = Timings()
    bw_buf = bandwidth_buffer if bandwidth_buffer is not None else np.ones(1 << 26, np.float32)
    perp_flat = perp.reshape(-1)
    state: dict[str, Any] = {}

    def q_of(r: int) -> int:
        return r % nq

    def a_project(r: int) -> None:
        i = q_of(r)
        state["qp"] = index.remove_background(qv[i : i + 1])

    def a_dense(r: int) -> None:
        i = q_of(r)
        state["cand"], state["sd"] = index.dense_candidates(qp_all[i : i + 1], kc)

    def a_lexical(r: int) -> None:
        i = q_of(r)
        terms, ptr = index.evidence_tokens([texts[i]])
        state["sl"] = index.lexical_scores(state["cand"], terms, ptr)  # LEC or BM25, as the index fuses

    def a_fuse(r: int) -> None:
        index.fuse(state["cand"], state["sd"], state["sl"], k)

    def a_scoring(r: int) -> None:
        i = q_of(r)
        index.search_vectors(qv[i : i + 1], [texts[i]], k, explain=False)

    def a_faiss(r: int) -> None:
        i = q_of(r)
        flat.search(qv[i : i + 1], k)

    def a_bm25(r: int) -> None:
        retriever._get_top_k_results(bm25_ids[q_of(r)], k=k, backend="numba", sorted=True)

    def a_lexical_all(r: int) -> None:
        i = q_of(r)
        s = lexical_scores_all(index, *index.evidence_tokens([texts[i]]))[0]
        top = np.argpartition(-s, min(k, n_docs - 1))[:k]
        top[np.argsort(-s[top], kind="stable")]

    def a_stream(r: int) -> None:
        _stream_read(perp_flat)

    def a_bandwidth(r: int) -> None:
        _stream_read(bw_buf)

    arms: dict[str, Callable[[int], Any]] = {
        "project": a_project, "dense_topk": a_dense, "lexical": a_lexical, "fuse_topk": a_fuse,
        "scoring": a_scoring, "faiss_flat": a_faiss, "bm25s": a_bm25, "lexical_all": a_lexical_all,
        "stream_same_matrix": a_stream, "bandwidth": a_bandwidth,
    }
    if encoder is not None:
        def a_encode(r: int) -> None:
            encoder.encode([texts[q_of(r)]])

        def a_end_to_end(r: int) -> None:
            index.search([texts[q_of(r)]], k)

        arms = {"encode": a_encode, **arms, "end_to_end": a_end_to_end}
    for tier_name, view in (tiers or {}).items():
        def a_tier_encode(r: int, view: Any = view) -> None:
            view.encode([texts[q_of(r)]])

        def a_tier_e2e(r: int, view: Any = view) -> None:
            view.search([texts[q_of(r)]], k)

        arms[f"encode@{tier_name}"] = a_tier_encode
        arms[f"end_to_end@{tier_name}"] = a_tier_e2e
    shorts = list(short_texts or [])
    if shorts:
        def short_arm(view: Any) -> Callable[[int], None]:
            def arm(r: int) -> None:
                view.search([shorts[r % len(shorts)]], k)

            return arm

        if encoder is not None:
            arms["end_to_end_short@transformer"] = short_arm(index)
        for tier_name, view in (tiers or {}).items():
            if tier_name in SHORT_TIERS:
                arms[f"end_to_end_short@{tier_name}"] = short_arm(view)
    scan8 = ivf_scan = None

    def scoring_with(scan: Any) -> Callable[[int], None]:
        """The scoring arm with another candidate scan as the dense stage of the call."""
        def arm(r: int) -> None:
            i = q_of(r)
            index.search_vectors(qv[i : i + 1], [texts[i]], k, explain=False, dense_stage=scan.candidates)

        return arm

    if compressed or int8_scan is not None:  # the index's own scan objects (skillsight_fast.engine.scan)
        from skillsight_fast.engine.scan import Int8Scan

        scan8 = int8_scan if int8_scan is not None else Int8Scan.build(perp)

        def a_dense_int8(r: int) -> None:
            i = q_of(r)
            state["cand8"], state["sd8"] = scan8.candidates(qp_all[i : i + 1], kc)

        a_scoring_int8 = scoring_with(scan8)

        arms.update(dense_topk_int8=a_dense_int8, scoring_int8=a_scoring_int8)
    if approximate:
        from skillsight_fast.engine.scan import IvfScan

        with n_threads(all_threads):
            faiss.omp_set_num_threads(all_threads)
            ivf_scan = IvfScan.build(perp, config=index.config)
            state["ivf_build_s"] = ivf_scan.train_seconds
            faiss.omp_set_num_threads(1)

        a_scoring_ivf = scoring_with(ivf_scan)

        arms["scoring_ivf"] = a_scoring_ivf
        default_nprobe = ivf_scan.nprobe
        for nprobe in sorted({8, 32, default_nprobe}):
            def a_ivf(r: int, nprobe: int = nprobe) -> None:
                i = q_of(r)
                ivf_scan.nprobe = nprobe
                try:
                    ivf_scan.candidates(qp_all[i : i + 1], kc)
                finally:
                    ivf_scan.nprobe = default_nprobe

            arms[f"ivf_nprobe{nprobe}"] = a_ivf

    load_before = load_average()
    with single_thread():
        time_round_robin(arms, reps, timings)
    load_after = load_average()

    rerank: dict[str, Any] = {}
    costs = dict(variant_costs or {})
    rerankers = [(name, ce, cost) for name, ce, cost in (("dense_rerank", cross_encoder, rerank_cost),
                                                         ("tinybert_rerank", tinybert, tinybert_cost),
                                                         *((f"rerank@{v}", ce, costs.get(v))
                                                           for v, ce in (rerank_variants or {}).items()))
                 if ce is not None]
    if rerankers and all(cost is not None for _, _, cost in rerankers):
        # the cross-encoder part does not depend on the library size: reuse the run's measurement
        # of it and time the size-dependent part (dense top-100 through faiss) here
        def a_top100(r: int) -> None:
            i = q_of(r)
            flat.search(qv[i : i + 1], RERANK_DEPTH)

        with single_thread():
            time_round_robin({"faiss_top100": a_top100}, reps, timings)
        for name, _, cost in rerankers:
            timings.samples[name] = [t + cost for t in timings.samples["faiss_top100"]]
            rerank[f"{name}_cross_encoder_s_reused"] = cost
    elif rerankers:
        def rerank_arm(name: str, ce: Any) -> Callable[[int], None]:
            def arm(r: int) -> None:
                i = q_of(r)
                _, top = flat.search(qv[i : i + 1], RERANK_DEPTH)
                docs = [doc_text(int(j)) for j in top[0] if j >= 0][:rerank_pairs]
                t0 = time.perf_counter()
                scores = ce.score(texts[i], docs)
                state.setdefault(f"ce_s_{name}", []).append((time.perf_counter() - t0) * RERANK_DEPTH / len(docs))
                top[0][np.argsort(-scores, kind="stable")[:k]]

            return arm

        with single_thread():
            time_round_robin({name: rerank_arm(name, ce) for name, ce, _ in rerankers}, rerank_reps, timings)
        rerank["pairs_scored"] = rerank_pairs
        for name, _, _ in rerankers:
            if rerank_pairs < RERANK_DEPTH:  # quick mode: scale the cross-encoder part to 100 pairs
                timings.samples[name] = [t * RERANK_DEPTH / rerank_pairs for t in timings.samples[name]]
            ce_s = state[f"ce_s_{name}"]
            rerank["cross_encoder_s" if name == "dense_rerank" else f"{name}_cross_encoder_s"] = float(
                np.median(ce_s[1:] or ce_s))
    variants_out: dict[str, Any] = {}
    for v, ce in (rerank_variants or {}).items():
        describe = getattr(ce, "describe", None)
        variants_out[v] = {**(describe() if callable(describe) else {}), "p50_ms": round(timings.p(f"rerank@{v}", 50), 2),
                           "cross_encoder_s": rerank.get(f"rerank@{v}_cross_encoder_s",
                                                         rerank.get(f"rerank@{v}_cross_encoder_s_reused"))}

    bandwidth = bw_buf.nbytes / np.median(timings.samples["bandwidth"]) / 1e9
    matrix_bytes = perp.nbytes
    floor_ms = matrix_bytes / (bandwidth * 1e9) * 1e3

    # batched throughput (queries / second) on one thread and on all threads
    nb = min(batch, nq)
    reps_b = 3 if n_docs < 500_000 else 1
    bq = qv[:nb]
    btexts = texts[:nb]
    throughput: dict[str, dict[str, float]] = {}
    bqp = index.remove_background(bq)
    bcand, bsd = index.dense_candidates(bqp, kc)
    bsl = index.lexical_scores(bcand, *index.evidence_tokens(btexts))
    batch_arms: dict[str, Callable[[], Any]] = {
        "project": lambda: index.remove_background(bq),
        "dense_topk": lambda: index.dense_candidates(bqp, kc),
        "lexical": lambda: index.lexical_scores(bcand, *index.evidence_tokens(btexts)),
        "fuse_topk": lambda: index.fuse(bcand, bsd, bsl, k),
        "scoring": lambda: index.search_vectors(bq, btexts, k, explain=False),
        "faiss_flat": lambda: flat.search(bq, k),
    }
    if encoder is not None:
        batch_arms["encode"] = lambda: encoder.encode(btexts)
    for threads in sorted({1, all_threads}):
        row: dict[str, float] = {}
        with n_threads(threads):
            faiss.omp_set_num_threads(threads)
            for name, f in batch_arms.items():
                if name == "encode" and threads != 1:
                    continue
                f()
                ts = []
                for _ in range(reps_b):
                    t0 = time.perf_counter()
                    f()
                    ts.append(time.perf_counter() - t0)
                row[name] = round(nb / float(np.median(ts)), 1)
            faiss.omp_set_num_threads(1)
        throughput[str(threads)] = row

    def p50(name: str) -> float | None:
        v = timings.p(name, 50)
        return None if v is None else round(v, 4)

    def p95(name: str) -> float | None:
        v = timings.p(name, 95)
        return None if v is None else round(v, 4)

    base_p50 = {s: p50(s) for s in STAGES}
    detail_common = {
        "p95_ms": {s: p95(s) for s in STAGES},
        "extra_p50_ms": {name: p50(name) for name in timings.samples if name not in STAGES},
        "rerank_variants": variants_out,
        "short_tasks": len(shorts),
        "bandwidth_GBps": round(bandwidth, 2), "matrix_MB": round(matrix_bytes / 1e6, 1),
        "throughput_qps": throughput, "batch": nb, "reps": reps, "rerank_reps": rerank_reps if cross_encoder else 0,
        "load_before": round(load_before, 2), "load_after": round(load_after, 2),
        "k": k, "candidates": kc, "rerank": rerank, "vocab_size": len(lex.vocab),
        "n_generic": int(index.lexical.generic.sum()),
        "mean_terms_per_doc": round(float(np.diff(lex.doc_indptr).mean()), 1),
    }
    if scan8 is not None:  # the int8 scan alone against its own memory floor (its codes and scales)
        floor8 = scan8.nbytes() / (bandwidth * 1e9) * 1e3
        scan8_p50 = p50("dense_topk_int8")
        detail_common["int8_scan"] = {
            "dense_topk_ms": scan8_p50, "scoring_ms": p50("scoring_int8"), "floor_ms": float(f"{floor8:.4g}"),
            "scan_over_floor": None if scan8_p50 is None else round(scan8_p50 / floor8, 3),
            "matrix_MB": round(scan8.nbytes() / 1e6, 1), "oversample": scan8.oversample}
    def spread(arm: str, prefix: str) -> dict[str, float | None]:
        """p90 and mean of an arm's samples (a cascade's tasks take one of two paths: they tell the rest)."""
        e2e = timings.samples.get(arm) or []
        return {f"{prefix}_p90": None if not e2e else round(timings.p(arm, 90), 4),
                f"{prefix}_mean": None if not e2e else round(1000 * float(np.mean(e2e)), 4)}

    def short(tier_name: str) -> dict[str, float | None]:
        arm = f"end_to_end_short@{tier_name}"
        return {"short_end_to_end": p50(arm), **spread(arm, "short_end_to_end")} if arm in timings.samples else {}

    tier_p50: dict[str, dict[str, float | None]] = {}
    if encoder is not None:
        tier_p50["transformer"] = {"encode": base_p50["encode"], "end_to_end": base_p50["end_to_end"],
                                   **spread("end_to_end", "end_to_end"), **short("transformer")}
    for tier_name in tiers or {}:
        tier_p50[tier_name] = {"encode": p50(f"encode@{tier_name}"), "end_to_end": p50(f"end_to_end@{tier_name}"),
                               **spread(f"end_to_end@{tier_name}", "end_to_end"), **short(tier_name)}
    entries = [{"n_docs": n_docs, "dim": dim, "dtype": "float32", "p50_ms": base_p50,
                "floor_ms": float(f"{floor_ms:.4g}"), "tiers": tier_p50, "detail": detail_common}]
    if compressed:
        exact_ids, _ = index.dense_candidates(qp_all, kc)
        with n_threads(all_threads):
            ids8, _ = scan8.candidates(qp_all, kc)
        p8 = dict(base_p50)
        p8["dense_topk"] = p50("dense_topk_int8")
        p8["scoring"] = p50("scoring_int8")
        if base_p50["end_to_end"] is not None and base_p50["scoring"] is not None:
            p8["end_to_end"] = round(base_p50["end_to_end"] - base_p50["scoring"] + p8["scoring"], 4)
        for name in ("dense_rerank", "tinybert_rerank"):
            if base_p50[name] is not None:
                p8[name] = base_p50[name]
        shift = (p8["scoring"] - base_p50["scoring"]) if p8["scoring"] is not None and base_p50["scoring"] else None
        tiers8 = {name: dict(t) if name.endswith("+int8") else  # timed with the int8 scan already
                  {"encode": t["encode"], "end_to_end": None if t["end_to_end"] is None or shift is None
                   else round(t["end_to_end"] + shift, 4)} for name, t in tier_p50.items()}
        int8_bytes = scan8.nbytes()
        entries.append({"n_docs": n_docs, "dim": dim, "dtype": "int8", "p50_ms": p8, "tiers": tiers8,
                        "floor_ms": float(f"{int8_bytes / (bandwidth * 1e9) * 1e3:.4g}"),
                        "detail": {"recall_at_K_vs_exact": round(_recall(ids8, exact_ids), 4),
                                   "oversample": scan8.oversample, "matrix_MB": round(int8_bytes / 1e6, 1),
                                   "end_to_end_note": "end_to_end = float32 end_to_end - scoring + scoring_int8"}})
        if ivf_scan is not None:
            rec = {}
            default_nprobe = ivf_scan.nprobe
            probes = sorted({8, 32, default_nprobe})
            for nprobe in probes:
                ivf_scan.nprobe = nprobe
                ids_ivf, _ = ivf_scan.candidates(qp_all, kc)
                rec[f"nprobe{nprobe}"] = round(_recall(ids_ivf, exact_ids), 4)
            ivf_scan.nprobe = default_nprobe
            entries[0]["detail"]["ivf"] = {"nlist": ivf_scan.nlist, "nprobe": ivf_scan.nprobe,
                                           "recall_at_K_vs_exact": rec,
                                           "build_s": round(state["ivf_build_s"] or 0.0, 1),
                                           "scoring_p50_ms": p50("scoring_ivf"),
                                           "p50_ms": {f"nprobe{p}": p50(f"ivf_nprobe{p}") for p in probes}}
    return entries
