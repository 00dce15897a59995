"""Write a synthetic scale-up of the skillsbench index to disk, to try a large library end to end.

The real skillsbench corpus (+ skill pool) is indexed from the cached MiniLM embeddings, grown to
``--size`` skills (skillsight_fast.lab.benchmark.synthetic.scale_up: seeded noisy copies of the real
rows, a resampled lexicon), given the scan ``--scan`` and saved. The index records the real
encoder's checksum, so it answers real queries::

    python bench/build_synthetic.py --size 1000000 --scan int8 -o /tmp/idx-1m   # ~2 min idle, 7.5 GB on disk
    skillsight -c mmap=true search -i /tmp/idx-1m "extract the tables of a PDF report"
    skillsight -c mmap=true serve -i /tmp/idx-1m ...
    skillsight rescan -i /tmp/idx-1m --scan ivf                                 # same index, IVF scan

The largest arrays are built in memory-mapped scratch files beside the output (unlinked at once:
nothing stays behind), and the scan is built once, the one asked for. ``--json`` records the build's
time and memory: the peak resident set (``ru_maxrss``, what ``/usr/bin/time -v`` reports) and, sampled
every 0.2 s, the peaks of its anonymous part (RssAnon: memory the process owns) and its file-backed
part (RssFile: mapped pages, page cache the kernel may drop)::

    nice python bench/build_synthetic.py --size 2000000 --scan binary -o /tmp/idx-2m \
        --json results/bench/cluster_shards_2m_build.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rss_mb() -> dict[str, float]:
    """This process's RssAnon and RssFile now, in MB."""
    out = {"anon": 0.0, "file": 0.0}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("RssAnon:", "RssFile:")):
                out[line[3:7].lower()] = int(line.split()[1]) / 1024
    return out


class PeakSampler(threading.Thread):
    """Samples RssAnon and RssFile every ``every`` seconds and keeps their peaks (Linux)."""

    def __init__(self, every: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.every, self.peak, self.stop = every, {"anon": 0.0, "file": 0.0}, threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for k, v in rss_mb().items():
                self.peak[k] = max(self.peak[k], v)
            self.stop.wait(self.every)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=1_000_000)
    p.add_argument("--scan", default="auto", choices=("exact", "int8", "binary", "ivf", "auto"))
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="write the build's time and memory peaks here")
    args = p.parse_args()
    sampler = PeakSampler()
    if os.path.exists("/proc/self/status"):
        sampler.start()
    from skillsight_fast.engine.index import SkillIndex
    from skillsight_fast.lab.benchmark.synthetic import scale_up
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.lab.evaluation.methods import EvalContext

    t0 = time.perf_counter()
    ds = load_dataset(ROOT / "data" / "skillsbench")
    ctx = EvalContext(ds)
    base = SkillIndex.from_embeddings(ds.docs, ctx.doc_emb, lexicon=ctx.lexicon, model_id=ctx.enc.model_id,
                                      model_checksum=ctx.enc.checksum)
    out = Path(args.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    if args.size > len(base):  # scratch arrays beside the output: same disk, and not the RAM of a tmpfs
        index, _ = scale_up(base, args.size, seed=args.seed, scan=args.scan, workdir=out.parent)
    else:
        index = base
        index.rebuild_scan(args.scan)
    del base, ctx, ds
    t_built = time.perf_counter() - t0
    index.save(out)
    seconds = time.perf_counter() - t0
    scan = index.scan
    print(f"{out}: {len(index):,} skills, scan {scan.kind} {scan.params()}, {seconds:.0f} s")
    if args.json:
        sampler.stop.set()
        report = {"size": len(index), "scan": scan.kind, "seed": args.seed, "output": str(out),
                  "build_s": round(t_built, 1), "total_s": round(seconds, 1),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "peak_rss_anon_mb": round(sampler.peak["anon"], 1),
                  "peak_rss_file_mb": round(sampler.peak["file"], 1),
                  "folder_mb": round(sum(f.stat().st_size for f in out.iterdir()) / 2**20, 1),
                  "load_average_end": list(os.getloadavg()), "cpus": os.cpu_count()}
        Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
