"""Does the body beyond the first 256 tokens help when a skill is scored by its best chunk?

    python experiments/chunk_max_dense.py                            # bfcl, skillsbench, gorilla_hf, metatool, sra_theoremqa
    python experiments/chunk_max_dense.py skillsbench,bfcl

Question. The document vector sees only the first 256 MiniLM tokens of a skill's text (name,
description, hints, the start of the body). Long skills say more further down. A mean of chunk
vectors was measured and dropped earlier; does the chunk-level *max* help?

Declared variant (experiments/DECLARATIONS.md, fourth round, rule 2): up to 8 chunks of 256 tokens
per skill; a skill's dense score is the max over its chunks. Chunk 0 (the head) is the default
document vector itself. The text is cut with MiniLM's own tokenizer (no truncation) into runs of
254 word-piece tokens (256 with [CLS]/[SEP], exactly the head's budget), each boundary moved back to
the start of its word, chunks 1..7 cut from the text at those offsets and encoded by the bundled
MiniLM; only skills longer than 254 tokens get extra chunks. Extra chunk vectors are cached
(evaluation cache kind ``chunk256``, per-text sha256 shards, so the skill pool shared by skillsbench
and sra_theoremqa is encoded once). Every chunk vector is background-removed like a document
vector (the index's ``remove_background``); the candidate stage is replaced
(``search_vectors(dense_stage=)``) by: s(d) = max over chunks c of d of q_perp . c_perp, top K by s.
Rule 1 reads the default document vectors (unchanged); the lexical side, weight and K are the
default's.

Also reported: memory (bytes of the extra chunk matrix, float32, plus its int32 owner array) and
latency (p50 over 200 tasks, one task per call, one thread: OMP/OpenBLAS/numba threads set to 1 at
the top of this script) of the default exact candidate stage and of the chunk-max stage, with the
load average of the (shared, loaded) machine.

Selection (declared): fit score (R@10 + nDCG@10)/2 on skillsbench, sra_theoremqa, bfcl; a variant
must be >= the default on all three and strictly higher on the mean; ties within 0.05 keep the
default. metatool and gorilla_hf are reported only.

Result (2026-12-03; encoding the 20,536 distinct extra chunks took about 50 min on the loaded machine, 2 min
once cached): chunk max FAILS on every fit set.

| variant | skillsbench | sra_theoremqa | bfcl | metatool | gorilla_hf | fit mean |
|---|---|---|---|---|---|---:|
| default | 80.5 / 76.8 (78.68) | 81.1 / 65.7 (73.40) | 90.0 / 76.6 (83.33) | 81.0 / 66.5 | 44.1 / 27.4 | 78.47 |
| chunk max (8 x 256) | 76.9 / 72.8 (74.87) | 79.0 / 63.1 (71.06) | 89.9 / 76.4 (83.13) | 81.0 / 66.5 | 40.0 / 25.3 | 76.35 |

Intervals (R@10; nDCG@10): skillsbench -3.6 [-8.6, +0.9]; -4.0 [-8.6, +0.1], sra_theoremqa
-2.1 [-4.3, -0.1]; -2.5 [-3.8, -1.3], bfcl -0.2 [-0.6, +0.3]; -0.2 [-0.6, +0.2], gorilla_hf
-4.1 [-6.6, -1.7]; -2.1 [-3.4, -0.8]; metatool has no skill over 254 tokens (no change). Cost:
extra chunks 18,540 (skillsbench, 3,377 of 3,434 skills), 18,335 (sra_theoremqa), 326 (bfcl), 1,245
(gorilla_hf): 28.6 / 28.2 / 0.5 / 1.9 MB, 5.4x / 5.0x / 0.23x / 1.3x the document matrix. Candidate
stage p50, one task, one thread: skillsbench 7.70 ms against 0.20 ms for the index's exact scan
(the chunk stage is a NumPy product over 6.4x the rows, the default a Numba kernel), whole search
8.29 against 0.53 ms; bfcl 0.14 / 0.12 ms; load average about 5 on 2 cores (a 1M build and other
work were running), so the times are indicative only. Body chunks of skill libraries are mostly
code and procedure text: their best chunk wins on generic overlap and pulls unrelated skills up.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"  # latency is one query on one thread (before numpy/numba load)

import itertools  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from selection_rule import BASELINE, DEFAULT, FIT, Report, context, datasets, top_depth  # noqa: E402

from skillsight_fast.limits import MAX_ENCODE_CHARS  # noqa: E402
from skillsight_fast.metrics import DEPTH  # noqa: E402
from skillsight_fast.models.tokenizer import load_tokenizer  # noqa: E402

MAX_CHUNKS = 8
ORDER = ("bfcl", "skillsbench", "gorilla_hf", "metatool", "sra_theoremqa")  # sra_theoremqa last (declared)
ENCODE_BATCH = 512  # cache shards are written per batch, so an interrupted run keeps its work


def chunk_texts(tokenizer, text: str, span: int) -> list[str]:
    """Chunks 1..MAX_CHUNKS-1 of ``text`` (chunk 0, the head, is the document vector)."""
    text = text[:MAX_ENCODE_CHARS]
    enc = tokenizer.encode(text, add_special_tokens=False)
    toks, offs = enc.tokens, enc.offsets
    n = len(toks)
    if n <= span:
        return []
    bounds = [0]
    for j in range(1, MAX_CHUNKS + 1):
        b = min(n, bounds[-1] + span)
        while 0 < b < n and toks[b].startswith("##") and b > bounds[-1] + 1:
            b -= 1  # never cut inside a word
        bounds.append(b)
        if b >= n:
            break
    out = []
    for a, b in itertools.pairwise(bounds[1:]):
        if b > a:
            out.append(text[offs[a][0] : offs[b - 1][1]])
    return out[: MAX_CHUNKS - 1]


def encode_chunks(ctx, texts: list[str]) -> np.ndarray:
    for start in range(0, len(texts), ENCODE_BATCH):
        ctx.embeddings("chunk256", texts[start : start + ENCODE_BATCH])
        print(f"    chunks encoded {min(len(texts), start + ENCODE_BATCH)} / {len(texts)}", flush=True)
    return ctx.embeddings("chunk256", texts) if texts else np.zeros((0, ctx.doc_emb.shape[1]), np.float32)


def chunk_max_stage(idx, c_perp: np.ndarray, owner: np.ndarray):
    """Dense stage (q_perp, depth) -> (ids, s): top depth by the max over each skill's chunks."""
    d_perp = idx.dense.embeddings_perp
    starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]]) if owner.size else np.zeros(0, np.int64)
    owners = owner[starts] if owner.size else owner

    def stage(q_perp: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
        s = q_perp @ d_perp.T
        if owner.size:
            sc = np.maximum.reduceat(q_perp @ c_perp.T, starts, axis=1)
            s[:, owners] = np.maximum(s[:, owners], sc)
        return top_depth(s, depth)

    return stage


def p50_ms(fn, q: np.ndarray) -> float:
    fn(q[:1])
    times = []
    for i in range(q.shape[0]):
        t0 = time.perf_counter()
        fn(q[i : i + 1])
        times.append(time.perf_counter() - t0)
    return 1000 * float(np.median(times))


def main() -> None:
    names = datasets(sys.argv) if len(sys.argv) > 1 else list(ORDER)
    report = Report()
    costs = [("| dataset | skills | skills > 254 tokens | extra chunks | extra bytes | default stage p50 ms | "
              "chunk-max stage p50 ms | search p50 ms default / chunk-max | load average |"),
             "|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for name in names:
        ctx = context(name)
        ds = ctx.dataset
        idx = ctx.index(BASELINE)
        span = ctx.enc.max_length - 2
        tokenizer = load_tokenizer(Path(ctx.enc.onnx_path).parent, max_length=ctx.enc.max_length)
        tokenizer.no_truncation()
        tokenizer.no_padding()
        texts: list[str] = []
        owner_list: list[int] = []
        for row, d in enumerate(ds.docs):
            extra = chunk_texts(tokenizer, d.text, span)
            texts += extra
            owner_list += [row] * len(extra)
        owner = np.asarray(owner_list, np.int64)
        print(f"  {name}: {len(texts)} extra chunks for {len(set(owner_list))} of {len(ds.docs)} skills", flush=True)
        c_perp = idx.remove_background(encode_chunks(ctx, texts)) if texts else np.zeros((0, idx.stats.dim), np.float32)
        stage = chunk_max_stage(idx, c_perp, owner)
        report.add(name, DEFAULT, ctx.search(idx), ds.gold)
        ids = idx.search_vectors(ctx.query_emb, ds.query_texts, DEPTH, dense_stage=stage, explain=False).ids
        report.add(name, "chunk max (8 x 256)", ids, ds.gold)
        q = np.ascontiguousarray(idx.remove_background(ctx.query_emb[:200]))
        k = idx.decisions.candidates
        t_def = p50_ms(lambda x, idx=idx, k=k: idx.dense_candidates(x, k), q)
        t_chk = p50_ms(lambda x, stage=stage, k=k: stage(x, k), q)
        qe, qt = ctx.query_emb[:200], ds.query_texts[:200]
        s_def = p50_ms(lambda x, idx=idx, qt=qt: idx.search_vectors(x, qt[:1], 10, explain=False), qe)
        s_chk = p50_ms(lambda x, idx=idx, qt=qt, stage=stage:
                       idx.search_vectors(x, qt[:1], 10, dense_stage=stage, explain=False), qe)
        extra_bytes = c_perp.nbytes + owner.size * 4
        load = " ".join(f"{x:.2f}" for x in os.getloadavg())
        costs.append(f"| {name} | {len(ds.docs)} | {len(set(owner_list))} | {len(texts)} | "
                     f"{extra_bytes / 1e6:.1f} MB ({extra_bytes / (len(ds.docs) * idx.stats.dim * 4):.2f}x the matrix) | "
                     f"{t_def:.2f} | {t_chk:.2f} | {s_def:.2f} / {s_chk:.2f} | {load} |")
        print(costs[-1], flush=True)
    print()
    print("\n".join(costs))
    print()
    print(report.table())
    missing = [d for d in FIT if d not in names]
    if missing:
        print(f"\nnot run: {missing} (the verdict needs all three fit sets)")


if __name__ == "__main__":
    main()
