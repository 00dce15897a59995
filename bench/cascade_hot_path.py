"""Per-task latency of a cascade index's lookup path: one long task searched again and again.

The index's cascade threshold is set to -10 for the run, so the fitted table answers every task of at least
``lookup_min_pieces`` word pieces (the task below has more); what is timed is ``SkillIndex.search`` of one
task, warm, p50 and p10 over the repetitions. Used to check that a change to the cascade's own code
(``engine/index.py: cascade_search``) costs nothing on the path most long tasks take.

Run: python bench/cascade_hot_path.py -i IDX [--reps 2000]   (IDX: built by ``skillsight index``, the default)
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import numpy as np

from skillsight_fast import SkillIndex

TASK = ("I have a quarterly sales spreadsheet exported as CSV with columns for region, month and revenue; "
        "I need a line chart per region saved as PNG files so I can paste them into the board deck tomorrow "
        "morning, and the axis labels should be readable and the legend outside the plot area please. ") * 2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-i", "--index", required=True)
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    base = SkillIndex.load(args.index)
    if not base.cascade.on:
        raise SystemExit(f"{args.index} is not a cascade index "
                         f"(built with --query-encoder {base.config.encoder.query_encoder})")
    always = dataclasses.replace(base.cascade, fallback_below=-10.0)
    index = SkillIndex(dataclasses.replace(base.state, cascade=always))
    for _ in range(50):  # warm: kernels loaded, tables paged in
        index.search([TASK], k=5)
    times = []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        index.search([TASK], k=5)
        times.append(time.perf_counter() - t0)
    print(f"lookup-answered long task, {len(index)} skills, {args.reps} searches: "
          f"p50 {1e3 * np.median(times):.4f} ms, p10 {1e3 * np.percentile(times, 10):.4f} ms")


if __name__ == "__main__":
    main()
