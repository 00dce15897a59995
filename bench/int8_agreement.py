"""Agreement of the int8 query/document encoder with the fp32 one, on real skill data.

    python bench/int8_agreement.py                       # data/skillsbench, 600 skills + all 73 tasks
    python bench/int8_agreement.py --data data/metatool --docs 199

Prints the cosine between the int8 and fp32 embedding of each text (mean, 1st percentile, min) and,
for dense retrieval over the sampled skills, how many of the fp32 top-10 the int8 top-10 keeps, and
the latency of one query encoding with each (p50 over the tasks, one thread).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from skillsight_fast.lab.evaluation.datasets import load_dataset
from skillsight_fast.models import load_encoder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/skillsbench")
    ap.add_argument("--docs", type=int, default=600, help="skills sampled from the corpus (seeded)")
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    args = ap.parse_args()

    ds = load_dataset(args.data)
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(len(ds.texts), size=min(args.docs, len(ds.texts)), replace=False))
    docs = [ds.texts[i] for i in rows]
    tasks = ds.query_texts
    fp32 = load_encoder(args.model, threads=1)
    int8 = load_encoder(args.model, int8=True, threads=1)

    out: dict[str, object] = {"data": args.data, "n_docs": len(docs), "n_tasks": len(tasks)}
    for name, texts in (("docs", docs), ("tasks", tasks)):
        a, b = fp32.encode(texts), int8.encode(texts)
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        out[f"cosine_{name}"] = {"mean": round(float(cos.mean()), 4),
                                 "p01": round(float(np.quantile(cos, 0.01)), 4),
                                 "min": round(float(cos.min()), 4)}
        if name == "docs":
            d32, d8 = a, b
        else:
            q32, q8 = a, b
    top32 = np.argsort(-(q32 @ d32.T), axis=1)[:, :10]
    top8 = np.argsort(-(q8 @ d8.T), axis=1)[:, :10]
    out["top10_overlap"] = round(float(np.mean([len(set(x) & set(y)) / 10 for x, y in zip(top32, top8)])), 4)
    for name, enc in (("fp32", fp32), ("int8", int8)):
        enc.encode(tasks[:1])
        times = []
        for t in tasks:
            t0 = time.perf_counter()
            enc.encode([t])
            times.append(time.perf_counter() - t0)
        out[f"encode_p50_ms_{name}"] = round(1000 * float(np.median(times)), 1)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
