"""Peak memory (RSS) of indexing huge SKILL.md files and of searching with huge queries.

Each case runs in a fresh child process (the real ``skillsight index`` command with the real
default model, or a small search script), and its peak RSS is read from the kernel with
``os.wait4`` (``ru_maxrss``), so no case inherits another's memory. The SKILL.md files are real
skill text: the bodies of the bundled library (data/skillsbench) concatenated, in a different
order per file, up to the requested size (3.4 MB by default, under the 4 MB limit).

    python bench/index_rss.py                     # 1 small skill, 1 and 4 skills of 3.4 MB; 100 queries
    python bench/index_rss.py --files 4 --mb 3.4 --json results/bench/index_rss.json

Before the character budget (skillsight_fast/limits.py, 32,768 characters per text) the issue
measured 1.0 GB for one 3.4 MB skill, 3.8 GB for four, and 0.9 GB for 100 queries of 99,999
characters.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "data" / "skillsbench" / "corpus.jsonl.gz"


def real_text(n_bytes: int, seed: int) -> str:
    """About ``n_bytes`` of real skill bodies, rotated by ``seed`` so files differ."""
    with gzip.open(CORPUS, "rt", encoding="utf-8") as fh:
        bodies = [json.loads(line).get("body", "") for line in fh]
    bodies = [b for b in bodies if b]
    start = (seed * 7919) % len(bodies)
    parts: list[str] = []
    size = 0
    i = start
    while size < n_bytes:
        body = bodies[i % len(bodies)]
        parts.append(body)
        size += len(body.encode("utf-8")) + 2
        i += 1
    return "\n\n".join(parts).encode("utf-8")[:n_bytes].decode("utf-8", "ignore")


def write_library(folder: Path, n_files: int, n_bytes: int) -> Path:
    for i in range(n_files):
        skill = folder / f"huge-{i}"
        skill.mkdir(parents=True)
        head = (f"---\nname: huge-{i}\ndescription: A very long skill number {i} made of real skill "
                "text.\n---\n")
        (skill / "SKILL.md").write_text(head + real_text(n_bytes - len(head), i), encoding="utf-8")
    return folder


def peak_rss(argv: list[str]) -> dict[str, Any]:
    """Run ``argv`` as a child; its exit code, wall seconds and peak RSS (MB) from ``wait4``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read().decode("utf-8", "replace")
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    scale = 1024 if sys.platform != "darwin" else 1  # ru_maxrss is KB on Linux, bytes on macOS
    return {"exit": proc.returncode, "seconds": round(time.perf_counter() - t0, 2),
            "peak_rss_mb": round(usage.ru_maxrss * scale / 1e6, 1), "stderr": err.strip()[-300:]}


SEARCH = """
import sys
from skillsight_fast import SkillIndex
index = SkillIndex.load(sys.argv[1])
n, chars = int(sys.argv[2]), int(sys.argv[3])
words = ("merge pdf pages tables csv clean columns docker deploy image git rebase branch stl mesh "
         "volume email draft reply sql join postgres resize png").split()
text = " ".join(words[i % len(words)] for i in range(chars))[:chars]
queries = [text[i:] + text[:i] for i in range(n)]
result = index.search(queries, 5)
assert result.ids.shape == (n, 5)
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=4, help="huge skills in the big case (default 4)")
    ap.add_argument("--mb", type=float, default=3.4, help="size of each huge SKILL.md in MB (default 3.4)")
    ap.add_argument("--queries", type=int, default=100, help="queries in the search case (default 100)")
    ap.add_argument("--query-chars", type=int, default=99_999, help="characters per query (default 99,999)")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON")
    args = ap.parse_args(argv)

    cli = [sys.executable, "-m", "skillsight_fast.cli"]
    n_bytes = int(args.mb * 1e6)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="skillsight-rss-") as tmp:
        base = Path(tmp)
        small = base / "small"
        (small / "tiny").mkdir(parents=True)
        (small / "tiny" / "SKILL.md").write_text(
            "---\nname: tiny\ndescription: Merge PDF files.\n---\nUse pypdf.\n")
        one = write_library(base / "one", 1, n_bytes)
        many = write_library(base / "many", args.files, n_bytes)
        cases = [
            ("index: 1 small skill (model load + build)",
             cli + ["index", str(small), "-o", str(base / "i0"), "-q"]),
            (f"index: 1 skill of {args.mb} MB", cli + ["index", str(one), "-o", str(base / "i1"), "-q"]),
            (f"index: {args.files} skills of {args.mb} MB",
             cli + ["index", str(many), "-o", str(base / "i4"), "-q"]),
        ]
        for name, cmd in cases:
            rows.append({"case": name} | peak_rss(cmd))
        rows.append({"case": "search: 1 query of 9 characters (model load + search)"}
                    | peak_rss([sys.executable, "-c", SEARCH, str(base / "i0"), "1", "9"]))
        rows.append({"case": f"search: {args.queries} queries of 1,500 characters (256 tokens each)"}
                    | peak_rss([sys.executable, "-c", SEARCH, str(base / "i0"), str(args.queries), "1500"]))
        rows.append({"case": f"search: {args.queries} queries of {args.query_chars:,} characters"}
                    | peak_rss([sys.executable, "-c", SEARCH, str(base / "i0"), str(args.queries),
                                str(args.query_chars)]))
    base_index, base_search = rows[0]["peak_rss_mb"], rows[3]["peak_rss_mb"]
    print(f"{'case':<62} {'exit':>4} {'seconds':>8} {'peak RSS MB':>12} {'over baseline':>14}")
    for i, row in enumerate(rows):
        baseline = base_index if i < 3 else base_search
        row["over_baseline_mb"] = round(row["peak_rss_mb"] - baseline, 1)
        print(f"{row['case']:<62} {row['exit']:>4} {row['seconds']:>8} {row['peak_rss_mb']:>12} "
              f"{row['over_baseline_mb']:>14}")
        if row["exit"] != 0:
            print(f"   stderr: {row['stderr']}")
    if args.json:
        out = {"machine": platform.platform(), "python": platform.python_version(), "rows": rows,
               "args": vars(args)}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0 if all(r["exit"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
