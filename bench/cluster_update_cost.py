"""What recomputing a sharded library's statistics costs, against the update that keeps its basis.

A synthetic library of ``--size`` rows is grown from the real skillsbench index (its cached MiniLM
embeddings; skillsight_fast.lab.benchmark.synthetic: replicated real rows with perturbed vectors and
resampled terms). On it, each phase of a recompute of the library-wide statistics is timed once:

* **lexical**: df, IDF, Otsu's threshold, the generic tokens, LEC weights (``LexicalState.build``) and
  the BM25 idf and mean length;
* **basis**: the background basis estimated as a build does (``fresh_basis``: token directions over the
  postings, then the SVD), and the drift rule against the kept basis (``basis_drift``);
* **directions kept**: what an update of shard folders does instead (skillsight_fast.cluster.drift): the
  sums behind the token directions once over the postings (``directions_summed``: the first update of
  a layout), then moved by the rows an update changes, 0.1 % and 1 % of the rows, all in one shard
  (``directions_moved_*``: every later update; read from that shard's folder and the index), checked
  against the sums they started from (the same rows taken out and put back);
* **project**: every row's background-removed vector under the new basis (``DenseState.build``);
* **int8**: the int8 scan's codes of every row;
* **write one shard**: one shard folder of ``size / shards`` rows written (what a recompute writes
  ``shards`` times, and an update that keeps the basis writes once per touched shard).

Numbers go to results/bench/cluster_update_cost.json with the machine's load. Run::

    nice python bench/cluster_update_cost.py --size 1000000 --shards 4
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "bench" / "cluster_update_cost.json"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1_000_000)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    from skillsight_fast.cluster.drift import moved_sums, summed
    from skillsight_fast.cluster.layout import write_shard
    from skillsight_fast.cluster.update import background_directions, basis_drift, fresh_basis
    from skillsight_fast.config import IndexConfig
    from skillsight_fast.engine.background import index_background_terms
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.engine.scan import build_scan
    from skillsight_fast.engine.state import DenseState, LexicalState, SkillMeta
    from skillsight_fast.lab.benchmark.synthetic import scale_up
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.lab.evaluation.methods import EvalContext

    ds = load_dataset(ROOT / "data" / "skillsbench")
    ctx = EvalContext(ds)
    real = SkillIndex.from_embeddings([SkillMeta.of(s) for s in ds.docs], ctx.doc_emb,
                                      IndexConfig(query_encoder="transformer", scan="int8"),
                                      lexicon=ctx.lexicon, model_id=ctx.enc.model_id)
    t0 = time.perf_counter()
    index, _ = scale_up(real, args.size, seed=0)
    grow_s = time.perf_counter() - t0
    cfg = index.config
    emb = np.asarray(index.dense.embeddings, np.float32)
    times: dict[str, float] = {}
    clock = [time.perf_counter()]

    def lap(name: str) -> None:
        now = time.perf_counter()
        times[name] = round(now - clock[0], 3)
        clock[0] = now

    lex = index.lexical.lexicon
    state, _ = LexicalState.build(lex, beta=cfg.scoring.beta, otsu_weighted=cfg.background.otsu_weighted)
    lap("lexical")
    _ = state.bm25
    lap("bm25")
    directions = background_directions(index)
    n_directions = int(directions[0].shape[0])
    lap("basis_directions")
    terms = index_background_terms(index)
    same_ids = np.arange(len(lex.vocab), dtype=np.int32)
    kept = summed(index, same_ids, terms)
    lap("directions_summed")
    summed_error = float(np.abs(kept.directions()[0] - directions[0]).max())
    basis = fresh_basis(index, directions)
    del directions
    lap("basis_svd")
    drift = basis_drift(index.dense.basis, basis)
    lap("drift_rule")
    r = index.dense.basis.shape[0]
    dense = DenseState.build(emb, basis[:r], index.dense.singular_values,
                             renormalize=cfg.background.renormalize)
    lap("project")
    build_scan("int8", dense.embeddings_perp, config=cfg)
    del dense
    lap("int8")
    rows = args.size // args.shards
    moved_error = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        write_shard(Path(tmp) / "shard-000", index, 0, rows, library="bench")
        lap("write_one_shard")
        plan = {"shards": [{"folder": "shard-000", "start": 0, "stop": rows}]}
        rng = np.random.default_rng(0)
        for frac in (0.001, 0.01):  # rows changed in shard 0: out of the kept sums, then back in
            changed = np.zeros(len(index), bool)
            changed[rng.choice(rows, int(args.size * frac), replace=False)] = True
            clock[0] = time.perf_counter()
            moved = moved_sums(kept, index, Path(tmp), plan, changed, changed, same_ids, len(same_ids), terms)
            lap(f"directions_moved_{frac:g}")
            moved_error[f"{frac:g}"] = float(np.abs(moved.directions()[0] - kept.directions()[0]).max())
    times["basis"] = round(times["basis_directions"] + times["basis_svd"], 3)
    recompute = sum(times[k] for k in ("lexical", "bm25", "basis", "drift_rule", "project", "int8"))
    keep = sum(times[k] for k in ("lexical", "bm25", "basis", "drift_rule", "write_one_shard"))
    moved_keep = sum(times[k] for k in ("lexical", "bm25", "directions_moved_0.01", "basis_svd", "drift_rule",
                                        "write_one_shard"))
    out = {
        "size": args.size, "shards": args.shards, "rows_per_shard": rows, "grow_s": round(grow_s, 1),
        "vocab": len(lex.vocab), "nnz": int(lex.doc_indptr[-1]), "rank": int(r),
        "background_directions": n_directions, "drift_synthetic": round(drift, 4),
        "phases_s": times,
        "recompute_statistics_s": round(recompute, 2),
        "recompute_with_every_shard_written_s": round(recompute + args.shards * times["write_one_shard"], 2),
        "keep_basis_one_shard_written_s": round(keep, 2),
        "keep_basis_moved_directions_one_shard_written_s": round(moved_keep, 2),
        "directions_summed_max_error": summed_error,
        "directions_moved_max_error": moved_error,
        "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "load_after": round(os.getloadavg()[0], 2),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1))
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
