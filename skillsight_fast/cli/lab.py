"""``skillsight lab``: the research commands (eval, bench, analyze), apart from the product's.

``skillsight eval``, ``bench`` and ``analyze`` answer too (``cli.LAB_ALIASES``). Their knobs are
settings (``skillsight -c KEY=VALUE lab eval ...``, :mod:`skillsight_fast.cli.settings`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from skillsight_fast.cli._common import emit_json, positive_int
from skillsight_fast.cli.settings import settle


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``lab`` and its commands."""
    from skillsight_fast.cli import bench, evaluate

    p = sub.add_parser("lab", help="research: eval (retrieval quality), bench (speed), analyze (the paper's report)")
    lab = p.add_subparsers(dest="lab_command", required=True, metavar="COMMAND")
    evaluate.register(lab)
    bench.register(lab)
    _add_analyze(lab)


def _add_analyze(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("analyze", help="plots and a report: background energy, recall vs depth, score split")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("--data", metavar="QUERIES",
                   help="labelled queries (dataset folder or .jsonl(.gz)); default: the skills' descriptions")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="folder for the PNGs and report.md")
    p.add_argument("--max-queries", type=positive_int, default=2000, help="queries sampled at most")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument("-q", "--quiet", action="store_true", help="print nothing")
    p.set_defaults(func=cmd_analyze)
    settle(p, "analyze", ["--data", "--max-queries", "--json", "--quiet"])


def cmd_analyze(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex
    from skillsight_fast.lab.analyze import write_report
    from skillsight_fast.library.queries import read_queries

    index = SkillIndex.load(args.index)
    queries = read_queries(args.data) if args.data else None
    title = Path(args.data).name if args.data else ""
    summary = write_report(index, queries, args.output, title=title, max_queries=args.max_queries)
    if args.json:
        emit_json(summary)
    elif not args.quiet:
        rec = summary["recall"]
        print(f"wrote {', '.join(summary['plots'])} and report.md to {args.output} "
              f"({summary['n_queries']} queries, {summary['seconds']} s)")
        for m, vals in rec.items():
            print(f"  {m:<10} " + "  ".join(f"{k} {v:.1f}" for k, v in vals.items())
                  + f"  ahead-of-gold {summary['share_ahead_mean'][m]:.2f}%")
    return 0
