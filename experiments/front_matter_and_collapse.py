"""Do the extra front-matter fields, and the duplicate collapse, change retrieval accuracy?

Question 1: when ``when_to_use``, ``triggers``, ``examples`` and ``tags`` (and the other keys
:data:`skillsight_fast.library.skills.FRONT_MATTER_KEYS` reads) join the indexed text, as
``skillsight index`` now does, does R@10 / nDCG@10 / MRR@10 move on the shared datasets whose
corpora carry such fields (skillsbench and sra_theoremqa, each with the skill_pool distractors)?
The vendored corpora keep only name/description/body, so each record's original SKILL.md is read
at the commit its dataset's meta.json pins, from local git clones of the source repositories
(as experiments/count_front_matter_fields.py does).

Question 2: when ``find_skills`` folds copies of a skill (same name up to case and punctuation, or
embedding cosine >= 0.95) into one hit, what happens to the same metrics? Two readings: *strict*
(only the hits count, so the gold skill must be the hit, not a copy listed under it) and *with
copies* (a gold skill listed as a copy of a hit counts as found at that hit's rank).

Selection rule: none. Both variants are fixed in advance (the text layout of Skill.text, the
0.95 of find.DUPLICATE_COSINE); nothing is tuned here. The differences are paired over queries,
with 95% bootstrap intervals (2,000 resamples, seed 0).

Usage::

    python experiments/front_matter_and_collapse.py --repos DIR [--json OUT]

DIR holds one git clone per source repository, named ``owner+name`` (``DIR/owner+name/repo`` or
``DIR/owner+name``). Embeddings are cached (the evaluation cache), so only the changed texts are
encoded.

Result: see docs/AUTHORS.md ("What the extra fields and the collapse do to accuracy").
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from skillsight_fast.agents.find import collapse_rows  # noqa: E402
from skillsight_fast.lab.evaluation.datasets import load_dataset  # noqa: E402
from skillsight_fast.lab.evaluation.methods import EvalContext  # noqa: E402
from skillsight_fast.library.skills import Skill, front_matter_fields  # noqa: E402
from skillsight_fast.metrics import bootstrap_diff, per_query  # noqa: E402

DATA = ROOT / "data"
DATASETS = ("skillsbench", "sra_theoremqa")
METRICS = ("recall@10", "ndcg@10", "mrr@10")
K = 10


def _git_dir(root: Path, repo: str) -> Path:
    base = root / repo.replace("/", "+")
    return base / "repo" if (base / "repo").exists() else base


def _front_matter(text: str) -> dict | None:
    import yaml

    lines = text.removeprefix("\ufeff").splitlines(keepends=True)
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


def original_front_matter(repos: Path) -> dict[str, dict]:
    """id -> the front matter of the record's original SKILL.md at its pinned commit."""
    out: dict[str, dict] = {}
    for ds in ("skill_pool", "skillsbench", "sra_theoremqa"):
        meta = json.loads((DATA / ds / "meta.json").read_text())
        commits = {s["repo"]: s["commit"] for s in meta["sources"]}
        by_repo: dict[str, list[tuple[str, str]]] = {}
        with gzip.open(DATA / ds / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                repo, _, path = str(rec.get("source", "")).partition(":")
                if repo in commits and path.endswith(".md"):
                    by_repo.setdefault(repo, []).append((rec["id"], path))
        for repo, items in by_repo.items():
            git = _git_dir(repos, repo)
            if not git.exists():
                print(f"missing clone of {repo}", file=sys.stderr)
                continue
            batch = "".join(f"{commits[repo]}:{p}\n" for _, p in items).encode()
            buf = subprocess.run(["git", "-C", str(git), "cat-file", "--batch"], input=batch,
                                 capture_output=True, check=True).stdout
            pos = 0
            for rid, _ in items:
                nl = buf.index(b"\n", pos)
                header = buf[pos:nl].decode()
                pos = nl + 1
                if header.endswith("missing"):
                    continue
                size = int(header.split()[2])
                fm = _front_matter(buf[pos : pos + size].decode("utf-8", "replace"))
                pos += size + 1
                if fm is not None:
                    out[rid] = fm
    return out


def ranked(index, ctx, depth: int) -> np.ndarray:
    res = index.search_vectors(ctx.query_emb, ctx.dataset.query_texts, depth, explain=False)
    return res.ids


def collapsed(index, ids: np.ndarray) -> np.ndarray:
    """Top-K rows after the collapse (strict: only the hits themselves)."""
    out = np.full((ids.shape[0], K), -1, np.int64)
    for i, row in enumerate(ids):
        for r, (j, _) in enumerate(collapse_rows(index, row.tolist())[:K]):
            out[i, r] = j
    return out


def scores_with_copies(index, ids: np.ndarray, gold) -> dict[str, np.ndarray]:
    """per_query metrics where a group counts as its first gold member (if any)."""
    out = np.full((ids.shape[0], K), -1, np.int64)
    for i, row in enumerate(ids):
        for r, (j, copies) in enumerate(collapse_rows(index, row.tolist())[:K]):
            members = [j, *copies]
            hit = next((m for m in members if m in gold[i]), j)
            out[i, r] = hit
    return per_query(out, gold)


def run(repos: Path) -> dict:
    fm = original_front_matter(repos)
    print(f"front matter read for {len(fm)} records", file=sys.stderr)
    results: dict = {"n_front_matter": len(fm), "datasets": {}}
    for name in DATASETS:
        ds = load_dataset(DATA / name)
        ctx = EvalContext(ds)
        gold = ds.gold
        base_index = ctx.index()
        base_ids = ranked(base_index, ctx, 4 * K)
        base = per_query(base_ids[:, :K], gold)

        fields = [front_matter_fields(fm.get(d.id, {})) for d in ds.docs]
        with_fields = [Skill(d.id, d.name, d.description, d.body, **f) for d, f in zip(ds.docs, fields)]
        texts = [s.text for s in with_fields]
        changed = sum(t != o for t, o in zip(texts, ds.texts))
        gold_rows = sorted({g for gs in gold for g in gs})
        gold_changed = sum(texts[g] != ds.texts[g] for g in gold_rows)
        emb = ctx.embeddings("doc", texts)
        from skillsight_fast.config import IndexConfig
        from skillsight_fast.engine.index import SkillIndex

        fm_index = SkillIndex.from_embeddings(with_fields, emb, IndexConfig(), texts=texts,
                                              model_id=ctx.enc.model_id, model_checksum="", encoder=ctx.enc)
        fm_ids = ranked(fm_index, ctx, K)
        fm_per = per_query(fm_ids, gold)

        strict = per_query(collapsed(base_index, base_ids), gold)
        copies = scores_with_copies(base_index, base_ids, gold)
        block = {"n_docs": len(ds.docs), "n_queries": len(ds.queries), "docs_changed": changed,
                 "gold_docs": len(gold_rows), "gold_docs_changed": gold_changed, "metrics": {}}
        for m in METRICS:
            row = {"baseline": float(base[m].mean())}
            for label, per in (("front_matter", fm_per), ("collapse_strict", strict), ("collapse_with_copies", copies)):
                d, lo, hi = bootstrap_diff(per[m], base[m], n_boot=2000, seed=0)
                row[label] = float(per[m].mean())
                row[label + "_diff"] = [d, lo, hi]
            block["metrics"][m] = row
        results["datasets"][name] = block
        print(json.dumps({name: block}, indent=1), file=sys.stderr)
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repos", type=Path, required=True)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    out = run(args.repos)
    text = json.dumps(out, indent=1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
