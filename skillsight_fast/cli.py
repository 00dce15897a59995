"""The ``skillsight`` command line: argparse only; each handler calls the public API.

Subcommands from other modules register themselves through ``register(subparsers)`` (see
``EXTENSIONS``); heavy imports stay inside handlers so a one-shot search starts fast.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import sys
import time
from collections.abc import Sequence
from typing import Any

from skillsight_fast.config import LEXICAL_SIDES
from skillsight_fast.errors import SkillsightError

#: Modules that add subcommands (each defines ``register(subparsers)``).
EXTENSIONS: tuple[str, ...] = ("skillsight_fast.agent_cli", "skillsight_fast.evaluation.cli", "skillsight_fast.benchmark")

EXAMPLE_TASK = "Extract the tables from a PDF report and save them as CSV files"


def emit_json(obj: Any) -> None:
    """One JSON object per line on stdout, flushed (``serve --json`` signals readiness with it)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _add_index(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="index skill libraries (SKILL.md trees, .jsonl files, dataset folders)")
    p.add_argument("sources", nargs="+", metavar="SOURCE")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="index folder to write")
    p.add_argument("--model", default="all-MiniLM-L6-v2", help="encoder name, model folder or .onnx file")
    p.add_argument("--int8", action="store_true", help="use the int8-quantised encoder")
    p.add_argument("--strict", action="store_true", help="fail on the first broken skill instead of skipping it")
    p.add_argument("--paper", action="store_true",
                   help="the method exactly as the paper writes it (no adaptive rules: SBC always, LEC, weight 1)")
    p.add_argument("--lexical", choices=LEXICAL_SIDES, default=None,
                   help="lexical side fused with the dense score (default: bm25, or lec with --paper)")
    p.add_argument("--json", action="store_true", help="print a JSON summary")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress or warnings")
    p.set_defaults(func=cmd_index)


def cmd_index(args: argparse.Namespace) -> int:
    from skillsight_fast import IndexConfig, SkillIndex
    from skillsight_fast.models import load_encoder
    from skillsight_fast.skills import load_skills

    t0 = time.perf_counter()
    report = load_skills(args.sources, strict=args.strict)
    for problem in report.problems:
        if not args.quiet:
            print(f"skipped {problem}", file=sys.stderr)
    config = IndexConfig(model=args.model, int8=args.int8, adaptive=not args.paper, lexical=args.lexical)
    encoder = load_encoder(args.model, int8=args.int8)
    from skillsight_fast.progress import ProgressEncoder, progress_enabled

    if progress_enabled(args.quiet):
        encoder = ProgressEncoder(encoder, desc=f"encoding {len(report.skills)} skills")
    index = SkillIndex.build(report.skills, encoder, config)
    index.save(args.output)
    summary = {
        "output": str(args.output), "n_skills": len(index), "skipped": [str(p) for p in report.problems],
        "seconds": round(time.perf_counter() - t0, 2), **index.stats.to_dict(),
    }
    if args.json:
        emit_json(summary)
    elif not args.quiet:
        print(f"indexed {len(index)} skills into {args.output} in {summary['seconds']} s "
              f"(rank r = {index.stats.rank}, |T_g| = {index.stats.n_generic}, "
              f"{len(report.problems)} skipped)")
    return 0


def _add_search(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("search", help="find the skills for a task")
    p.add_argument("task", nargs="+", help="task description (several tasks: one result each)")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("-k", type=int, default=5, help="number of hits (default 5)")
    p.add_argument("--json", action="store_true", help="one JSON object per task")
    p.add_argument("--explain", action="store_true", help="show score components and evidence tokens")
    p.add_argument("--mmap", action="store_true", help="memory-map the index instead of reading it")
    add_abstention_args(p)
    p.set_defaults(func=cmd_search)


def add_abstention_args(p: argparse.ArgumentParser) -> None:
    """``--min-score`` / ``--min-cosine``, shared by ``search`` and ``serve``."""
    p.add_argument("--min-score", type=_min_score_arg, default=None, metavar="S",
                   help="no hits for a task whose best fused score is below S ('none': off; default: the "
                        "index's calibration, if any)")
    p.add_argument("--min-cosine", type=_min_score_arg, default=None, metavar="C",
                   help="no hits for a task whose best raw cosine q.d is below C (overrides --min-score "
                        "and the calibration)")


def _min_score_arg(value: str) -> float:
    from skillsight_fast.calibrate import parse_min_score

    try:
        return parse_min_score(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def hits_of(index: Any, result: Any, row: int) -> list[dict[str, Any]]:
    """JSON-able hits of one result row (the CLI and the servers build their answers from these)."""
    hits = []
    for j, rank in zip(result.ids[row].tolist(), range(result.ids.shape[1])):
        if j < 0:
            continue
        meta = index.skills[j]
        hits.append({
            "id": meta.id, "name": meta.name, "score": float(result.scores[row, rank]),
            "dense": float(result.dense[row, rank]), "lexical": float(result.lexical[row, rank]),
            "evidence": result.evidence[row][rank] if result.evidence else [],
            "description": meta.description, "path": meta.path,
        })
    return hits


def cmd_search(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex
    from skillsight_fast._startup import without_scipy_probe
    from skillsight_fast.calibrate import hit_cosines, resolve_abstention, task_passes

    # validated and cleaned once (lone surrogates from undecodable argv bytes become U+FFFD, printable)
    args.task = SkillIndex.check_queries(args.task)
    index = SkillIndex.load(args.index, mmap=args.mmap)
    vectors = index.encode_queries(args.task)
    with without_scipy_probe():  # a one-shot process: skip Numba's BLAS probe (see _startup.py)
        result = index.search_vectors(vectors, args.task, args.k)
    rule = resolve_abstention(args.index, args.min_score, args.min_cosine)
    passes = task_passes(result, hit_cosines(index, vectors, result.ids), rule)
    for row, task in enumerate(args.task):
        hits = hits_of(index, result, row) if passes[row] else []
        if args.json:
            emit_json({"query": task, "hits": [{k: h[k] for k in ("id", "name", "score", "dense", "lexical",
                                                                  "evidence")} for h in hits]})
            continue
        print(f"task: {task}")
        for rank, h in enumerate(hits, 1):
            print(f"{rank:>3}. {h['name']}  [{h['id']}]  score {h['score']:.3f}")
            desc = h["description"]
            print(f"     {desc[:117] + '...' if len(desc) > 120 else desc}")
            if args.explain:
                print(f"     dense {h['dense']:.3f}  lexical {h['lexical']:.3f}  "
                      f"evidence: {', '.join(h['evidence']) or '-'}")
        if not hits:
            print("  (no hits)" if rule is None else
                  f"  (no skill fits: the best hit's {rule.signal} is below {rule.threshold:.4f})")
    return 0


def _add_info(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("info", help="describe an index")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)


def cmd_info(args: argparse.Namespace) -> int:
    from pathlib import Path

    from skillsight_fast.io import read_manifest

    m = read_manifest(Path(args.index))
    info = {"index": str(args.index), "format_version": m["format_version"],
            "package_version": m["package_version"], "n_skills": m["n_skills"], "model": m["model"],
            "stats": m["stats"], "config": m["config"]}
    if args.json:
        emit_json(info)
        return 0
    s = info["stats"]
    print(f"index {args.index}: {m['n_skills']} skills, format v{m['format_version']}")
    print(f"model {m['model']['id']} (dim {m['model']['dim']}, sha256 {m['model']['checksum'][:12]})")
    print(f"vocabulary {s['vocab_size']} terms; generic |T_g| = {s['n_generic']} (Otsu tau = {s['otsu_tau']:.3f})")
    print(f"background rank r = {s['rank']} (effective rank {s['effective_rank']})")
    print("config " + ", ".join(f"{k}={v}" for k, v in m["config"].items()))
    return 0


def _add_warmup(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("warmup", help="compile the kernels and export the default encoder once")
    p.add_argument("--model", default="all-MiniLM-L6-v2")
    p.add_argument("--int8", action="store_true")
    p.set_defaults(func=cmd_warmup)


def cmd_warmup(args: argparse.Namespace) -> int:
    from skillsight_fast.kernels.warmup import warmup_kernels
    from skillsight_fast.models import load_encoder

    t0 = time.perf_counter()
    warmup_kernels()
    encoder = load_encoder(args.model, int8=args.int8)
    encoder.encode(["warm up"])
    print(f"kernels compiled and encoder {encoder.model_id} ready in {time.perf_counter() - t0:.1f} s")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The full argument parser, core commands plus registered extensions."""
    from skillsight_fast import __version__

    parser = argparse.ArgumentParser(
        prog="skillsight", description="Find the right skills for a task, in a millisecond, on a CPU."
    )
    parser.add_argument("--version", action="version", version=f"skillsight-fast {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_add_index, _add_search, _add_info, _add_warmup):
        add(sub)
    for name in EXTENSIONS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``skillsight``; returns the exit code (0 ok, 1 error, 2 usage)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args) or 0)
    except SkillsightError as exc:
        print(f"skillsight: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("skillsight: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except OSError as exc:  # unwritable output folder, disk full, ...: a message, not a traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"skillsight: error: {exc.strerror or exc}{where}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
