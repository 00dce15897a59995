"""Write a synthetic scale-up of the skillsbench index to disk, to try a large library end to end.

The real skillsbench corpus (+ skill pool) is indexed from the cached MiniLM embeddings, grown to
``--size`` skills (skillsight_fast.lab.benchmark.synthetic.scale_up: seeded noisy copies of the real
rows, a resampled lexicon), given the scan ``--scan`` and saved. The index records the real
encoder's checksum, so it answers real queries::

    python bench/build_synthetic.py --size 1000000 --scan int8 -o /tmp/idx-1m   # ~3 min, ~4 GB on disk
    skillsight -c mmap=true search -i /tmp/idx-1m "extract the tables of a PDF report"
    skillsight -c mmap=true serve -i /tmp/idx-1m ...
    skillsight rescan -i /tmp/idx-1m --scan ivf                                 # same index, IVF scan
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--scan", default="auto", choices=("exact", "int8", "binary", "ivf", "auto"))
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.lab.benchmark.synthetic import scale_up
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.lab.evaluation.methods import EvalContext

    t0 = time.perf_counter()
    ds = load_dataset(ROOT / "data" / "skillsbench")
    ctx = EvalContext(ds)
    base = SkillIndex.from_embeddings(ds.docs, ctx.doc_emb, lexicon=ctx.lexicon, model_id=ctx.enc.model_id,
                                      model_checksum=ctx.enc.checksum)
    index, _ = scale_up(base, args.size, seed=args.seed) if args.size > len(base) else (base, None)
    del base
    scan = index.rebuild_scan(args.scan)
    index.save(args.output)
    print(f"{args.output}: {len(index):,} skills, scan {scan.kind} {scan.params()}, "
          f"{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
