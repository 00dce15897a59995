"""Subcommands for skill authors: ``doctor`` (why a skill is not found) and ``pin``."""

from __future__ import annotations

import argparse

from skillsight_fast.cli._common import emit_json, non_negative_int, positive_int
from skillsight_fast.cli.settings import settle


def register(sub: argparse._SubParsersAction) -> None:
    """Add doctor and pin."""
    p = sub.add_parser("doctor", help="check a library: self-retrieval, confusable pairs, duplicates, listing budget")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("-k", type=positive_int, default=10, help="depth of the self-retrieval search (default 10)")
    p.add_argument("--limit", type=non_negative_int, default=10, metavar="N", help="findings shown per check (default 10)")
    p.add_argument("--json", action="store_true", help="the whole report as one JSON object")
    p.set_defaults(func=cmd_doctor)
    settle(p, "doctor", ["-k", "--limit"])

    p = sub.add_parser("pin", help="pin skills: every search returns them first")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("ids", nargs="*", metavar="ID", help="skill ids to pin (added to the pins, in order)")
    p.add_argument("--remove", action="append", default=[], metavar="ID", help="unpin a skill (repeatable)")
    p.add_argument("--clear", action="store_true", help="unpin every skill first")
    p.set_defaults(func=cmd_pin)


def cmd_doctor(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex
    from skillsight_fast.authoring.doctor import diagnose, format_report
    index = SkillIndex.load(args.index)
    report = diagnose(index, k=args.k)
    if args.json:
        emit_json(report.to_dict())
    else:
        print(format_report(report, limit=args.limit))
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex
    from skillsight_fast.engine.update import index_write_lock

    with index_write_lock(args.index):  # load to save: an update meanwhile would undo the pins
        index = SkillIndex.load(args.index)
        pins = [] if args.clear else list(index.pins)
        pins = [p for p in pins if p not in set(args.remove)]
        index.pins = pins + [p for p in args.ids if p not in pins]  # SkillsightError on an unknown id
        if args.ids or args.remove or args.clear:
            index.save(args.index)
    print("pinned: " + (", ".join(index.pins) if index.pins else "(none)"))
    return 0
