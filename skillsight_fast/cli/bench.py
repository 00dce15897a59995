"""``skillsight bench``: the argument parser; the work is in :mod:`skillsight_fast.lab.benchmark`."""

from __future__ import annotations

import argparse

from skillsight_fast.cli._common import non_negative_int, positive_int
from skillsight_fast.cli.settings import settle
from skillsight_fast.lab.benchmark import DEFAULT_SIZES, QUICK_SIZES


def register(sub: argparse._SubParsersAction) -> None:
    """Add the ``bench`` subcommand (under ``lab``)."""
    p = sub.add_parser("bench", help="measure kernel and end-to-end speed (docs/SPEED.md)")
    p.add_argument("--sizes", nargs="+", default=None, metavar="N",
                   help="library sizes: 'real' (the corpus itself) or a number of skills "
                        f"(synthetic scale-up); default {' '.join(DEFAULT_SIZES)}")
    p.add_argument("--quick", action="store_true", help=f"sizes {' '.join(QUICK_SIZES)}, few repetitions (< 1 min)")
    p.add_argument("--json", metavar="OUT", help="write the report (schema in docs/SPEED.md)")
    p.add_argument("--details", metavar="OUT", help="write the full report (p95, throughput, recall, load)")
    p.add_argument("--plot", metavar="OUT.png", help="write the scaling plot")
    p.add_argument("-i", "--index", metavar="DIR", help="prebuilt index of the real corpus (else built and cached)")
    p.add_argument("--corpus", nargs="+", default=["data/skillsbench"], metavar="SOURCE",
                   help="skill sources of the real corpus (default data/skillsbench)")
    p.add_argument("--queries", metavar="FILE", help="queries .jsonl(.gz) with a 'text' field "
                   "(default: queries.jsonl.gz beside the first corpus source)")
    p.add_argument("--reps", type=positive_int, default=None, help="timed repetitions per arm")
    p.add_argument("--rerank-reps", type=non_negative_int, default=None, help="timed Dense + Reranker queries per size")
    p.add_argument("--compressed-from", type=positive_int, default=500_000, metavar="N",
                   help="also time the int8 scan and a faiss IVF candidate stage from N skills on")
    p.add_argument("--no-model", action="store_true",
                   help="no encoder or cross-encoder: skip the encode, end-to-end and rerank arms")
    p.add_argument("--static-model", metavar="DIR", default=None,
                   help="model2vec folder of the static tiers (default: distilled from the encoder, cached)")
    p.add_argument("--seed", type=int, default=0, help="seed of the synthetic scale-up and the queries")
    p.set_defaults(func=cmd_bench)
    settle(p, "bench", ["--sizes", "--details", "--plot", "--index", "--corpus", "--queries", "--reps",
                        "--rerank-reps", "--compressed-from", "--no-model", "--static-model", "--seed"])


def cmd_bench(args: argparse.Namespace) -> int:
    """Handler of ``skillsight bench``."""
    from skillsight_fast.lab.benchmark.driver import run_from_args

    return run_from_args(args)
