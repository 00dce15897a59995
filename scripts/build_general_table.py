"""Build the general fitted query table (package data) from public text on this machine plus the bundled
library (data/skillsbench).

Sources (all offline; licences in skillsight_fast/data/general_query_table/NOTICE.md):
- the one-line descriptions of the manual pages installed here (``apropos -l .``: Debian packages' manual
  pages, each under its package's licence);
- the first paragraph of the docstrings of the Python standard library and of the packages installed in
  the running interpreter (each under its own licence; this package's own files are skipped);
- the summaries and description paragraphs of the installed distributions' metadata (PyPI packages);
- the bundled library's training texts (:func:`skillsight_fast.models.fitted.training_pieces`, name +
  description, whole texts).
Optionally (``--tasks``) one task-like text per man-page line and per docstring line, made by a fixed
template ("How do I ...?", "Can you help me ...?", "I need to ...", cycled by a hash of the line).
Never a query of any evaluation set.

The teacher is the int8 task graph: one pass over every text gives the text's vector and the sums of
its token states (the contextual prior of the table); the table is then fitted with the regression
objective (no background basis: it serves every library) by
:func:`skillsight_fast.models.fitted.fit_query_table`.

Run: python scripts/build_general_table.py --out DIR [--tasks] [--cache DIR]
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import logging
import re
import subprocess
import sys
import sysconfig
import time
from importlib import metadata
from pathlib import Path

import numpy as np

logger = logging.getLogger("build_general_table")
ROOT = Path(__file__).resolve().parents[1]
PIECE_CHARS = 400
TEMPLATES = ("How do I {}?", "Can you help me {}?", "I need to {}.")


def _h(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")


def _clean(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()[:PIECE_CHARS]


def man_lines() -> list[tuple[str, str]]:
    """(name, description) of every installed manual page (``apropos -l .``)."""
    try:
        out = subprocess.run(["apropos", "-l", "."], capture_output=True, text=True, check=False).stdout
    except OSError:
        return []
    rows = []
    for line in out.splitlines():
        m = re.match(r"^(\S+) \([^)]*\)\s+- (.+)$", line)
        if m and len(m.group(2).split()) >= 3:
            rows.append((m.group(1), _clean(m.group(2))))
    return rows


def docstring_lines(max_files: int = 20000) -> list[str]:
    """First paragraphs (>= 4 words) of module, class and function docstrings of the standard library and
    the installed packages (skipping this package and tests)."""
    roots = {Path(sysconfig.get_paths()["stdlib"]), Path(sysconfig.get_paths()["purelib"])}
    files: list[Path] = []
    for r in sorted(roots):
        files.extend(p for p in sorted(r.rglob("*.py"))
                     if "skillsight" not in str(p) and "/test" not in str(p)
                     and "site-packages/pip/" not in str(p))
    out: list[str] = []
    for p in files[:max_files]:
        try:
            tree = ast.parse(p.read_text(encoding="utf-8", errors="replace"))
        except (SyntaxError, ValueError, OSError, RecursionError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    para = _clean(doc.split("\n\n")[0])
                    if len(para.split()) >= 4 and not para.startswith((">>>", ":", "..")):
                        out.append(para)
    return out


def metadata_lines() -> list[str]:
    """Summaries and prose paragraphs (>= 6 words, no code) of the installed distributions' metadata."""
    out = []
    for dist in metadata.distributions():
        md = dist.metadata
        if md is None or "skillsight" in (md.get("Name") or "").lower():
            continue
        if md.get("Summary"):
            out.append(_clean(md["Summary"]))
        body = md.get_payload() if hasattr(md, "get_payload") else ""
        for para in re.split(r"\n\s*\n", body or ""):
            para = _clean(re.sub(r"[#*`>|=_\[\]]+", " ", para))
            if len(para.split()) >= 6 and "{" not in para and "http" not in para:
                out.append(para)
    return out


def task_text(line: str) -> str:
    """One task-like text of a description line by a fixed template (chosen by the line's hash)."""
    s = line.rstrip(".!? ")
    s = s[:1].lower() + s[1:]
    return TEMPLATES[_h(line) % len(TEMPLATES)].format(s)


def general_corpus(tasks: bool, max_docstrings: int = 30000) -> dict[str, list[str]]:
    """The public texts by source (deduplicated, deterministic order and sample)."""
    man = man_lines()
    man_desc = list(dict.fromkeys(d for _, d in man))
    man_nd = list(dict.fromkeys(f"{n}: {d}" for n, d in man))
    docs = list(dict.fromkeys(docstring_lines()))
    docs = sorted(docs, key=_h)[:max_docstrings]
    meta = list(dict.fromkeys(metadata_lines()))
    out = {"man": man_desc, "man_namedesc": man_nd, "docstrings": docs, "metadata": meta}
    if tasks:
        out["man_tasks"] = [task_text(d) for d in man_desc]
        out["docstring_tasks"] = [task_text(d) for d in docs[: len(docs) // 2]]
    return out


def library_texts() -> tuple[list[str], list[str]]:
    """The bundled library's training texts: pieces + name/description + whole texts (as an index build
    fits), and the whole texts alone."""
    from skillsight_fast.lab.evaluation.datasets import load_dataset
    from skillsight_fast.library.skills import namedesc_text
    from skillsight_fast.models.fitted import training_pieces

    ds = load_dataset(ROOT / "data" / "skillsbench")
    pieces, _ = training_pieces(ds.docs)
    return pieces + [namedesc_text(d.name, d.description) for d in ds.docs] + list(ds.texts), list(ds.texts)


def encode_corpus(texts: list[str], cache: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Teacher vectors (int8 task graph) and token-state sums of ``texts`` from one pass, cached in
    ``cache`` by the texts' hash."""
    from skillsight_fast.models import load_encoder
    from skillsight_fast.models.contextual import encode_with_token_sums

    key = hashlib.sha256("\n\x00".join(texts).encode()).hexdigest()[:16]
    folder = cache / f"general-{key}"
    files = [folder / f for f in ("emb.npy", "sums.npy", "counts.npy")]
    if all(f.is_file() for f in files):
        return tuple(np.load(f) for f in files)  # type: ignore[return-value]
    enc = load_encoder(int8=True, batch_size=64)
    t0 = time.perf_counter()
    emb_parts, sums, counts = [], None, None
    step = 8192
    for lo in range(0, len(texts), step):
        e, s, c = encode_with_token_sums(enc, texts[lo:lo + step])
        emb_parts.append(e)
        sums = s if sums is None else sums + s
        counts = c if counts is None else counts + c
        logger.info("encoded %d / %d texts, %.0f s", min(lo + step, len(texts)), len(texts),
                    time.perf_counter() - t0)
    out = [np.vstack(emb_parts).astype(np.float32), sums, counts]
    folder.mkdir(parents=True, exist_ok=True)
    for f, a in zip(files, out):
        np.save(f, a, allow_pickle=False)
    return tuple(out)  # type: ignore[return-value]


def build(out: Path, tasks: bool, cache: Path, steps: int = 1000) -> dict:
    """Gather, encode, fit and save; returns the build's notes.

    The texts are always encoded with the task-like ones (one pass, cached); without ``tasks`` the fit
    leaves them out (their token states stay in the contextual prior).
    """
    from skillsight_fast.models import load_encoder
    from skillsight_fast.models.contextual import contextual_table
    from skillsight_fast.models.fitted import FitConfig, fit_library_table
    from skillsight_fast.models.general import save_general_table

    corpus_file = cache / "general-corpus.json"
    if corpus_file.is_file():
        corpus = json.loads(corpus_file.read_text())
    else:
        corpus = general_corpus(True)
        cache.mkdir(parents=True, exist_ok=True)
        corpus_file.write_text(json.dumps(corpus))
    lib, _ = library_texts()
    texts = list(dict.fromkeys(t for t in [t for src in corpus.values() for t in src] + lib if t.strip()))
    task_set = set(corpus["man_tasks"]) | set(corpus["docstring_tasks"])
    keep = np.array([tasks or t not in task_set for t in texts])
    notes: dict = {"sources": {k: len(v) for k, v in corpus.items() if tasks or not k.endswith("_tasks")},
                   "library_texts": len(lib), "texts": int(keep.sum()), "tasks": tasks}
    logger.info("general corpus: %s", notes)
    t0 = time.perf_counter()
    emb, sums, counts = encode_corpus(texts, cache)
    notes["encode_s"] = round(time.perf_counter() - t0, 1)
    ids, prior = contextual_table(sums, counts)
    enc = load_encoder(int8=True)
    cfg = FitConfig(objective="mse", steps=steps, batch=2048)
    basis = np.zeros((0, emb.shape[1]), np.float32)
    fit_texts = [t for t, k in zip(texts, keep) if k]
    ids, res = fit_library_table(ids, prior, enc.tokenize, fit_texts, emb[keep], np.full(len(fit_texts), -1),
                                 basis, np.zeros((0, emb.shape[1]), np.float32), config=cfg,
                                 drop=[enc._tokenizer.token_to_id("[UNK]")])
    notes.update(model_id=enc.model_id, checksum=enc.checksum, fit_s=round(res.seconds, 1),
                 rows=int(ids.size),
                 steps=steps,
                 loss_first_last=[round(float(np.mean(res.history[:20])), 4),
                                  round(float(np.mean(res.history[-20:])), 4)])
    save_general_table(out, ids, res.table, notes)
    logger.info("general table: %s", json.dumps(notes))
    return notes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--tasks", action="store_true", help="fit on the task-like templated texts too")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "skillsight-fast" / "experiments")
    args = ap.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    build(args.out, args.tasks, args.cache, args.steps)


if __name__ == "__main__":
    sys.exit(main())
