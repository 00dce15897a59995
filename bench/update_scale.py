"""Cost of ``skillsight update`` on a large library with a small share of skills changed.

A library of N skills is grown from the real skillsbench corpus (+ skill pool): row j copies the
text of real skill j mod N0 and appends a line naming it ("variant j") and a few seeded words of
the real vocabulary, so every skill has its own content hash. The index is built once with a
cheap deterministic hashing encoder standing in for the transformer (tests/support/fakes.py; the
transformer's cost per re-encoded skill is reported separately: ~0.15 s per skill on this machine,
docs/SPEED.md). Then ``--changed`` of the skills get a new body and :func:`update_index` runs; the
report gives its phases (load, hash comparison, encoding, statistics, save) and how many skills the
encoder saw.

With ``--shards N`` the index is split into N shard folders (``skillsight split``) and the update is
the shard-folder update (:func:`~skillsight_fast.cluster.update.update_layout`), run twice on two
different draws of ``--changed``: the first sums the drift rule's token directions over the postings
and keeps them, the second moves the kept sums by its own rows (skillsight_fast.cluster.drift). The
report gives each update's phases, shards rewritten and drift (the check against a full rebuild is left
to tests/cluster/test_shard_drift.py then).

Run::

    python bench/update_scale.py --size 100000 --changed 0.01 [--scan exact|int8|ivf] [--shards 4]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "support"))


def library(n: int, seed: int = 0):
    from skillsight_fast.files import read_jsonl
    from skillsight_fast.library.skills import Skill

    recs = read_jsonl(ROOT / "data" / "skill_pool" / "corpus.jsonl.gz")
    vocab = sorted({w for r in recs[:300] for w in r["description"].lower().split() if w.isalpha()})
    rng = np.random.default_rng(seed)
    words = rng.integers(0, len(vocab), (n, 6))
    out = []
    for j in range(n):
        r = recs[j % len(recs)]
        extra = " ".join(vocab[w] for w in words[j])
        out.append(Skill(id=f"s{j}", name=f"{r['name']} {j}", description=r["description"],
                         body=f"{r['body']}\nvariant {j}: {extra}", path=f"/lib/s{j}/SKILL.md"))
    return out


class CountingEncoder:
    """The hashing encoder of the tests, counting the texts it encodes."""

    def __init__(self, dim: int) -> None:
        from fakes import HashEncoder

        self.inner = HashEncoder(dim=dim)
        self.dim, self.model_id, self.checksum = dim, self.inner.model_id, self.inner.checksum
        self.texts = 0
        self.seconds = 0.0

    def encode(self, texts):
        t0 = time.perf_counter()
        self.texts += len(texts)
        out = self.inner.encode(texts)
        self.seconds += time.perf_counter() - t0
        return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=100_000)
    p.add_argument("--changed", type=float, default=0.01)
    p.add_argument("--scan", default="exact")
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--shards", type=int, default=0,
                   help="split into N shard folders; two shard-folder updates")
    p.add_argument("--profile", action="store_true", help="print the update's top functions")
    p.add_argument("--json", metavar="OUT")
    args = p.parse_args()
    from skillsight_fast import IndexConfig, SkillIndex
    from skillsight_fast.engine.update import update_index

    t0 = time.perf_counter()
    skills = library(args.size)
    enc = CountingEncoder(args.dim)
    index = SkillIndex.build(skills, enc, IndexConfig(model="hash-test", scan=args.scan))
    tmp = Path(tempfile.mkdtemp(prefix="update-scale-"))
    index.save(tmp / "idx")
    build_s = time.perf_counter() - t0
    del index
    if args.shards:
        return sharded(args, skills, tmp, build_s)
    rng = np.random.default_rng(1)
    changed = np.sort(rng.choice(args.size, round(args.changed * args.size), replace=False))
    new = edited(skills, changed)
    enc2 = CountingEncoder(args.dim)
    prof = cProfile.Profile() if args.profile else None
    t1 = time.perf_counter()
    if prof:
        prof.enable()
    report = update_index(tmp / "idx", new, encoder=enc2)
    if prof:
        prof.disable()
    update_s = time.perf_counter() - t1
    # the result must equal a full rebuild with the same encoder
    full = SkillIndex.build(new, CountingEncoder(args.dim), IndexConfig(model="hash-test", scan=args.scan))
    upd = SkillIndex.load(tmp / "idx")
    same = bool(np.array_equal(full.dense.embeddings, upd.dense.embeddings)
                and full.lexical.lexicon.vocab == upd.lexical.lexicon.vocab
                and np.array_equal(full.lexical.lexicon.doc_terms, upd.lexical.lexicon.doc_terms)
                and np.array_equal(full.lexical.lexicon.post_docs, upd.lexical.lexicon.post_docs)
                and np.allclose(full.dense.embeddings_perp, upd.dense.embeddings_perp, atol=1e-5)
                and full.state.flags == upd.state.flags)
    result = {"n_skills": args.size, "changed": len(changed), "scan": args.scan, "encoded": report.encoded,
             "encoder_texts": enc2.texts, "encoder_s": round(enc2.seconds, 2),
             "update_s": round(update_s, 2),
              "phases_s": report.to_dict().get("phases", {}), "first_build_s": round(build_s, 1),
              "equals_full_rebuild": same}
    print(json.dumps(result, indent=1))
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


def edited(skills, changed):
    """``skills`` with the bodies of rows ``changed`` changed."""
    from skillsight_fast.library.skills import Skill

    new = list(skills)
    for j in changed.tolist():
        s = new[j]
        new[j] = Skill(id=s.id, name=s.name, description=s.description,
                       body=s.body + "\nchanged: now also csv", path=s.path)
    return new


def sharded(args, skills, tmp: Path, build_s: float) -> int:
    """Split into ``args.shards`` folders, then two shard-folder updates of ``args.changed`` each."""
    import os

    from skillsight_fast.cluster.layout import split_index
    from skillsight_fast.cluster.update import update_layout

    t0 = time.perf_counter()
    split_index(tmp / "idx", tmp / "L", args.shards)
    split_s = time.perf_counter() - t0
    rng = np.random.default_rng(1)
    n = round(args.changed * args.size)
    draws = rng.choice(args.size, 2 * n, replace=False)
    new, updates = list(skills), []
    for k in range(2):
        new = edited(new, np.sort(draws[k * n:(k + 1) * n]))
        enc = CountingEncoder(args.dim)
        t1 = time.perf_counter()
        out = update_layout(tmp / "idx", tmp / "L", new, encoder=enc)
        updates.append({"seconds": round(time.perf_counter() - t1, 2), "directions": out["directions"],
                        "drift": out["drift"], "recomputed": out["recomputed"], "rewritten": out["rewritten"],
                        "kept": out["kept"], "phases_s": out["phases"], "encoder_texts": enc.texts,
                        "update_phases_s": out["update"].get("phases", {}),
                        "load": round(os.getloadavg()[0], 2)})
    result = {"n_skills": args.size, "changed": n, "scan": args.scan, "shards": args.shards,
              "first_build_s": round(build_s, 1), "split_s": round(split_s, 2), "updates": updates}
    print(json.dumps(result, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
