"""Build throughput and memory: streaming builds of synthetic libraries, Ray with 1 and 2 workers,
the transformer's own rate, and the 16-machine / 10M-skill estimate (docs/BUILD.md).

Synthetic skills are generated text: words drawn from the unigram distribution of the real
skill pool (data/skill_pool, its name/description/body tokens with their counts), a name, a
15-word description and a 120-word body per skill, and one unique token per skill (its id), so
the vocabulary grows with the library as real names do. They are written once to a JSONL file
and read back by the build like any source.

Each measured build is a separate ``skillsight index`` process (the real command line); its wall
time and peak RSS (``ru_maxrss`` of the child, from ``wait4``) are recorded. The cheap encoder
is the static model2vec-format table distilled from MiniLM (skillsight_fast/models/static.py,
``--static DIR``), standing in for the transformer; the transformer's own rate is measured
separately on real skills (``encoder``).

Run (each step appends to --out, default results/bench/build_scale.json)::

    python bench/build_scale.py stream --sizes 100000 1000000 \\
        --static ~/.cache/skillsight-fast/static/all-MiniLM-L6-v2-static
    python bench/build_scale.py memory --size 100000 --static DIR      # in-memory build, for comparison
    python bench/build_scale.py ray --size 5000 --chunk 1000 --workers 1 2 --static DIR
    python bench/build_scale.py ray-transformer --size 96 --chunk 16 --workers 1 2
    python bench/build_scale.py encoder --size 64 --static DIR
    python bench/build_scale.py ray-shards --size 20000 --shards 4 --static DIR   # folders by the workers
    python bench/build_scale.py estimate                                # the 10M plan from the above
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
POOL = ROOT / "data" / "skill_pool" / "corpus.jsonl.gz"
WORK = Path(os.environ.get("SKILLSIGHT_BENCH_DIR", tempfile.gettempdir())) / "skillsight-build-bench"


def unigram() -> tuple[np.ndarray, np.ndarray]:
    """Words of the real skill pool and their probabilities."""
    import re

    counts: Counter[str] = Counter()
    with gzip.open(POOL, "rt", encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            text = f"{r['name']} {r['description']} {r['body']}".lower()
            counts.update(re.findall(r"[a-z][a-z0-9_]{1,20}", text))
    words = np.array(sorted(counts), dtype=object)
    p = np.array([counts[w] for w in words], np.float64)
    return words, p / p.sum()


def generate(n: int, path: Path, seed: int = 0) -> Path:
    """Write ``n`` synthetic skills as JSONL (once; reused when the file exists)."""
    if path.is_file():
        return path
    words, p = unigram()
    rng = np.random.default_rng(seed)
    tmp = path.with_suffix(".tmp")
    block = 20000
    with open(tmp, "w", encoding="utf-8") as fh:
        for a in range(0, n, block):
            b = min(n, a + block)
            draw = words[rng.choice(len(words), size=(b - a, 137), p=p)]
            for j, row in zip(range(a, b), draw):
                name = f"{row[0]}-{row[1]}"
                rec = {"id": f"s{j}", "name": name, "description": " ".join(row[2:17]) + ".",
                       "body": f"# {name} s{j}\n\n" + " ".join(row[17:])}
                fh.write(json.dumps(rec) + "\n")
    tmp.rename(path)
    return path


def run_cli(args: list[str]) -> dict:
    """Run ``skillsight <args> --json -q`` as a child: its summary, wall time, and memory.

    ``peak_rss_mb`` is the child's ``ru_maxrss`` (call this once per fresh process: RUSAGE_CHILDREN
    is the maximum over all children); ``peak_anon_mb`` / ``peak_file_mb`` are the largest
    RssAnon / RssFile seen in /proc every 0.2 s (file-backed pages are the memory-mapped
    embeddings and page cache, which the kernel can drop).
    """
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "skillsight_fast.cli", *args, "--json", "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = {"RssAnon": 0, "RssFile": 0}
    out_parts: list[bytes] = []
    import threading

    reader = threading.Thread(target=lambda: out_parts.append(proc.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    while proc.poll() is None:
        try:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                key, _, value = line.partition(":")
                if key in peak:
                    peak[key] = max(peak[key], int(value.split()[0]))
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    reader.join()
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode()  # type: ignore[union-attr]
    if proc.returncode:
        raise SystemExit(f"skillsight {' '.join(args)} failed:\n{err[-3000:]}")
    summary = json.loads(b"".join(out_parts).decode().strip().splitlines()[-1])
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"wall_s": round(wall, 2), "n_skills": summary["n_skills"], "vocab": summary["vocab_size"],
            "peak_rss_mb": round(rss / 1024, 1), "peak_anon_mb": round(peak["RssAnon"] / 1024, 1),
            "peak_file_mb": round(peak["RssFile"] / 1024, 1), "scan": summary["scan"],
            "command": "skillsight " + " ".join(args)}


def save(out: Path, key: str, value: dict) -> None:
    data = json.loads(out.read_text()) if out.is_file() else {}
    value = {**value, "load_avg_1m_after": round(os.getloadavg()[0], 2), "cpus": os.cpu_count(),
             "when_utc": time.strftime("%Y-%m-%dT%H:%MZ", time.gmtime())}
    data[key] = value
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps({key: value}, indent=2))


def cmd_stream(a: argparse.Namespace) -> None:
    for n in a.sizes:
        src = generate(n, WORK / f"synthetic-{n}.jsonl")
        # one child per size, started from a fresh interpreter so ru_maxrss is this build's
        res = json.loads(subprocess.run(
            [sys.executable, __file__, "_one", "--static", a.static, "--", str(src), "-o",
             str(WORK / f"idx-{n}"), "--stream", "--model", a.static, *a.extra],
            check=True, stdout=subprocess.PIPE, text=True).stdout.strip().splitlines()[-1])  # stderr shown
        save(a.out, f"stream_{n}", {**res, "skills_per_s": round(n / res["wall_s"], 1),
                                    "encoder": "static (model2vec-format MiniLM table)"})


def cmd_memory(a: argparse.Namespace) -> None:
    n = a.size
    src = generate(n, WORK / f"synthetic-{n}.jsonl")
    res = json.loads(subprocess.run(
        [sys.executable, __file__, "_one", "--static", a.static, "--", str(src), "-o",
         str(WORK / f"idx-mem-{n}"), "--model", a.static], check=True, capture_output=True,
        text=True).stdout.strip().splitlines()[-1])
    save(a.out, f"in_memory_{n}", {**res, "skills_per_s": round(n / res["wall_s"], 1)})


def cmd_one(a: argparse.Namespace) -> None:
    settings = ["-c", "stream=true"] if "--stream" in a.rest else []  # a setting of index (skillsight -c)
    print(json.dumps(run_cli([*settings, "index", *[x for x in a.rest if x != "--stream"]])))


def _ray_rates(n: int, workers: list[int], factory, src: Path, chunk: int) -> dict:
    import ray

    from skillsight_fast.config import IndexConfig
    from skillsight_fast.indexing.ray import ray_build
    from skillsight_fast.library.skills import LoadReport, iter_skills

    t0 = time.perf_counter()
    ray.init(address="local", num_cpus=max(workers), include_dashboard=False, log_to_driver=False)
    startup = time.perf_counter() - t0
    out: dict = {"ray_init_s": round(startup, 2), "n_skills": n, "chunk": chunk}
    try:
        for w in workers:
            marks: list[tuple[float, int]] = []
            t1 = time.perf_counter()
            index = ray_build(iter_skills([src], LoadReport()), factory, IndexConfig(), workers=w,
                              chunk_size=chunk,
                              on_chunk=lambda done, marks=marks: marks.append((time.perf_counter(), done)))
            total = time.perf_counter() - t1
            # steady rate: from the first shard back to the last (actor start-up and the model load
            # before the first shard, and the final assembly, excluded)
            (ta, da), (tb, db) = marks[0], marks[-1]
            steady = (db - da) / (tb - ta) if tb > ta else float("nan")
            out[f"workers_{w}"] = {"total_s": round(total, 2), "skills_per_s": round(n / total, 2),
                                   "steady_skills_per_s": round(steady, 2),
                                   "finish_s": round(total - (tb - t1), 2), "n": len(index)}
    finally:
        ray.shutdown()
    return out


def cmd_ray(a: argparse.Namespace) -> None:
    import functools

    from skillsight_fast.models import load_encoder

    src = generate(a.size, WORK / f"synthetic-{a.size}.jsonl")
    res = _ray_rates(a.size, a.workers, functools.partial(load_encoder, a.static, threads=1), src, a.chunk)
    save(a.out, f"ray_static_{a.size}", {**res, "encoder": "static"})


def cmd_ray_transformer(a: argparse.Namespace) -> None:
    import functools

    from skillsight_fast.config import DEFAULT_MODEL
    from skillsight_fast.models import load_encoder

    src = real_skills(a.size)
    factory = functools.partial(load_encoder, DEFAULT_MODEL, threads=1)
    res = _ray_rates(a.size, a.workers, factory, src, a.chunk)
    save(a.out, f"ray_transformer_{a.size}",
         {**res, "encoder": DEFAULT_MODEL, "texts": "real skills (skill_pool)"})


def real_skills(n: int) -> Path:
    """The first n real skills of the pool as a JSONL file."""
    path = WORK / f"real-{n}.jsonl"
    if not path.is_file():
        WORK.mkdir(parents=True, exist_ok=True)
        with gzip.open(POOL, "rt", encoding="utf-8") as fh:
            lines = [next(fh) for _ in range(n)]
        path.write_text("".join(lines), encoding="utf-8")
    return path


def cmd_encoder(a: argparse.Namespace) -> None:
    from skillsight_fast.config import DEFAULT_MODEL
    from skillsight_fast.library.skills import load_skills
    from skillsight_fast.models import load_encoder

    skills = load_skills([real_skills(a.size)]).skills
    synth = load_skills([generate(20000, WORK / "synthetic-20000.jsonl")]).skills[: a.size]
    out = {"n": a.size}
    for threads in (1, 2):
        enc = load_encoder(DEFAULT_MODEL, threads=threads)
        enc.encode([s.text for s in skills[:8]])  # warm
        for label, texts in (("real", [s.text for s in skills]), ("synthetic", [s.text for s in synth])):
            t0 = time.perf_counter()
            enc.encode(texts)
            dt = time.perf_counter() - t0
            out[f"{label}_threads_{threads}_skills_per_s"] = round(len(texts) / dt, 2)
    if a.static:
        enc = load_encoder(a.static)
        t0 = time.perf_counter()
        enc.encode([s.text for s in synth])
        out["static_synthetic_skills_per_s"] = round(len(synth) / (time.perf_counter() - t0), 1)
    save(a.out, "encoder", out)


def cmd_estimate(a: argparse.Namespace) -> None:
    data = json.loads(a.out.read_text())
    rt = data.get("ray_transformer_" + str(a.transformer_size)) or next(
        v for k, v in data.items() if k.startswith("ray_transformer_"))
    per_worker = rt["workers_1"]["steady_skills_per_s"]
    two = rt.get("workers_2", {}).get("steady_skills_per_s")
    machines, cores, n = a.machines, a.cores, a.n
    cluster_rate = per_worker * machines * cores
    # the driver adds every shard and assembles the index alone: its rate bounds the cluster's
    big = max((v for k, v in data.items() if k.startswith("stream_")), key=lambda v: v["n_skills"])
    enc = data.get("encoder", {})
    static_rate = enc.get("static_synthetic_skills_per_s")
    est = {
        "per_worker_skills_per_s": per_worker, "two_workers_skills_per_s": two,
        "machines": machines, "workers_per_machine": cores, "n_skills": n,
        "encode_hours": round(n / cluster_rate / 3600, 2),
        "driver_note": (f"the streaming build of {big['n_skills']} skills with the static encoder ran at "
                        f"{big['skills_per_s']} skills/s end to end on one machine; the driver's share "
                        "(reading, adding shards, assembling) is at most that rate's inverse per skill"),
        "driver_hours_upper_bound": round(n / big["skills_per_s"] / 3600, 2),
        "static_encoder_skills_per_s": static_rate,
    }
    save(a.out, f"estimate_{n}_{machines}x{cores}", est)


def cmd_ray_shards(a: argparse.Namespace) -> None:
    """Shard folders written by the Ray build's tasks against a Ray build, save and ``split``: the same
    library, both orders run twice in one Ray session (ABBA), the wall time of each step, and whether the
    two ways give the same folders (every array's SHA-256)."""
    import functools
    import shutil

    import ray

    from skillsight_fast.cluster.build import ShardFolders
    from skillsight_fast.cluster.layout import read_folder, split_index
    from skillsight_fast.config import IndexConfig, ScanConfig
    from skillsight_fast.indexing.ray import ray_build
    from skillsight_fast.library.skills import LoadReport, iter_skills
    from skillsight_fast.models import load_encoder

    src = generate(a.size, WORK / f"synthetic-{a.size}.jsonl")
    factory = functools.partial(load_encoder, a.static, threads=1)
    query = load_encoder(a.static)
    cfg = IndexConfig(scan=ScanConfig(a.scan))
    ray.init(address="local", num_cpus=a.workers, include_dashboard=False, log_to_driver=False)
    runs: dict[str, list[dict]] = {"workers_write": [], "split_after": []}
    digests: dict[str, list] = {}
    try:
        for way in ("workers_write", "split_after", "split_after", "workers_write"):
            out = WORK / f"ray-shards-{way}"
            shutil.rmtree(out, ignore_errors=True)
            shutil.rmtree(Path(f"{out}.shards"), ignore_errors=True)
            folders = ShardFolders(f"{out}.shards", a.shards) if way == "workers_write" else None
            t0 = time.perf_counter()
            index = ray_build(iter_skills([src], LoadReport()), factory, cfg, workers=a.workers,
                              chunk_size=a.chunk, query_encoder=query, write_folders=folders)
            t1 = time.perf_counter()
            index.save(out)
            t2 = time.perf_counter()
            if folders is not None:
                layout = folders.commit(out)
                writers = [w["seconds"] for w in folders.written]
            else:
                layout, writers = split_index(out, f"{out}.shards", a.shards), []
            t3 = time.perf_counter()
            runs[way].append({"build_s": round(t1 - t0, 2), "save_s": round(t2 - t1, 2),
                              "split_or_commit_s": round(t3 - t2, 2), "total_s": round(t3 - t0, 2),
                              "writer_task_s": writers})
            digests[way] = [read_folder(Path(f"{out}.shards") / e["folder"])[0]["arrays"]
                            for e in layout["shards"]]
            del index
    finally:
        ray.shutdown()
    med = {way: {k: float(np.median([r[k] for r in rs])) for k in ("build_s", "save_s", "split_or_commit_s",
                                                                     "total_s")} for way, rs in runs.items()}
    save(a.out, f"ray_shards_{a.size}", {"n_skills": a.size, "shards": a.shards, "workers": a.workers,
                                         "chunk": a.chunk, "scan": a.scan, "encoder": "static", "runs": runs,
                                         "median": med,
                                         "same_folders": digests["workers_write"] == digests["split_after"]})


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "bench" / "build_scale.json")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("stream")
    s.add_argument("--sizes", type=int, nargs="+", default=[100000])
    s.add_argument("--static", required=True)
    s.add_argument("extra", nargs="*")
    s.set_defaults(func=cmd_stream)
    s = sub.add_parser("memory")
    s.add_argument("--size", type=int, default=100000)
    s.add_argument("--static", required=True)
    s.set_defaults(func=cmd_memory)
    s = sub.add_parser("_one")
    s.add_argument("--static")
    s.add_argument("rest", nargs="*")
    s.set_defaults(func=cmd_one)
    for name, func in (("ray", cmd_ray), ("ray-transformer", cmd_ray_transformer)):
        s = sub.add_parser(name)
        s.add_argument("--size", type=int, default=5000 if name == "ray" else 96)
        s.add_argument("--workers", type=int, nargs="+", default=[1, 2])
        s.add_argument("--chunk", type=int, default=1000 if name == "ray" else 16)
        s.add_argument("--static")
        s.set_defaults(func=func)
    s = sub.add_parser("ray-shards")
    s.add_argument("--size", type=int, default=20000)
    s.add_argument("--shards", type=int, default=4)
    s.add_argument("--workers", type=int, default=2)
    s.add_argument("--chunk", type=int, default=1000)
    s.add_argument("--scan", default="int8")
    s.add_argument("--static", required=True)
    s.set_defaults(func=cmd_ray_shards)
    s = sub.add_parser("encoder")
    s.add_argument("--size", type=int, default=64)
    s.add_argument("--static")
    s.set_defaults(func=cmd_encoder)
    s = sub.add_parser("estimate")
    s.add_argument("--n", type=int, default=10_000_000)
    s.add_argument("--machines", type=int, default=16)
    s.add_argument("--cores", type=int, default=2, help="workers per machine (this machine: 2 cores)")
    s.add_argument("--transformer-size", type=int, default=96)
    s.set_defaults(func=cmd_estimate)
    a = p.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    a.func(a)


if __name__ == "__main__":
    main()
