"""Which SKILL.md front-matter fields do the shared skill corpora use beyond name and description?

Question: before extra front-matter fields (tags, triggers, when_to_use, ...) are allowed to take part
in retrieval, how many skills of data/skill_pool and data/skillsbench actually carry each field?
The vendored corpora keep only name/description/body, so this reads every corpus record's original
SKILL.md at the commit its dataset's meta.json pins, from local git clones of the source repositories.

Selection rule: none (a count, no fitted constant).

Usage::

    python experiments/count_front_matter_fields.py --repos DIR [--json OUT]

DIR holds one bare or normal git clone per source repository, named ``owner+name`` (``DIR/owner+name/repo``
or ``DIR/owner+name``), each containing the pinned commit.

Result (Dec 2026, all 3,475 records found at their pinned commits): see docs/FRONT_MATTER.md.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
from pathlib import Path

import yaml

from skillsight_fast.files import read_jsonl

DATA = Path(__file__).resolve().parent.parent / "data"
DATASETS = ("skill_pool", "skillsbench")


def _git_dir(root: Path, repo: str) -> Path:
    base = root / repo.replace("/", "+")
    return base / "repo" if (base / "repo").exists() else base


def _front_matter(text: str) -> dict | None:
    text = text.removeprefix("\ufeff")
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return None
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        return None
    try:
        meta = yaml.safe_load("".join(lines[1:end]))
    except (yaml.YAMLError, ValueError, TypeError):
        return None
    return meta if isinstance(meta, dict) else None


def count(repos: Path) -> dict:
    commits: dict[str, str] = {}
    for ds in DATASETS:
        for src in json.loads((DATA / ds / "meta.json").read_text())["sources"]:
            commits[src["repo"]] = src["commit"]
    out: dict = {"n_records": 0, "n_found": 0, "fields": {}}
    for ds in DATASETS:
        docs = read_jsonl(DATA / ds / "corpus.jsonl.gz")
        by_repo: dict[str, list] = collections.defaultdict(list)
        for d in docs:
            repo, path = d["source"].split(":", 1)
            by_repo[repo].append(path)
        counts: collections.Counter = collections.Counter()
        found = 0
        for repo, paths in by_repo.items():
            git = _git_dir(repos, repo)
            req = "".join(f"{commits[repo]}:{p}\n" for p in paths).encode()
            buf = subprocess.run(["git", "-C", str(git), "cat-file", "--batch"], input=req,
                                 capture_output=True, check=True).stdout
            pos = 0
            for _ in paths:
                nl = buf.index(b"\n", pos)
                header = buf[pos:nl].decode()
                pos = nl + 1
                if header.endswith("missing"):
                    continue
                size = int(header.split()[2])
                meta = _front_matter(buf[pos:pos + size].decode("utf-8", "replace"))
                pos += size + 1
                found += 1
                for key, value in (meta or {}).items():
                    counts[str(key)] += 1
                    if isinstance(value, dict):
                        for sub in value:
                            counts[f"{key}.{sub}"] += 1
        out["n_records"] += len(docs)
        out["n_found"] += found
        out["fields"][ds] = {"n_docs": len(docs), "n_found": found, "counts": dict(counts.most_common())}
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repos", required=True, type=Path)
    p.add_argument("--json", type=Path)
    args = p.parse_args()
    result = count(args.repos)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{result['n_found']} of {result['n_records']} records read at their pinned commits")
    for ds, r in result["fields"].items():
        print(f"{ds} ({r['n_docs']} docs)")
        for key, c in r["counts"].items():
            if c >= 3:
                print(f"  {key:<32}{c:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
