"""``skillsight screen``: list the skills the index-time prompt-injection screen flagged."""

from __future__ import annotations

import argparse

from skillsight_fast.cli._common import emit_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``screen`` (also answers to ``scan``, its name before 0.2)."""
    p = sub.add_parser("screen", aliases=["scan"],
                       help="list skills flagged by the prompt-injection screen (docs/SECURITY.md)")
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    p.add_argument("--json", action="store_true", help="one JSON object {n_skills, flagged: [...]}")
    p.set_defaults(func=cmd_screen)


def _safe(text: str) -> str:
    """Control characters (ESC sequences in a skill's name) shown as escapes, not sent to the terminal."""
    return "".join(c if c.isprintable() or c == " " else f"\\u{ord(c):04x}" for c in text)


def cmd_screen(args: argparse.Namespace) -> int:
    from skillsight_fast import SkillIndex

    index = SkillIndex.load(args.index)
    flagged = [{"id": m.id, "name": m.name, "path": m.path, "reasons": r}
               for m, r in zip(index.skills, index.state.flags) if r]
    if args.json:
        emit_json({"n_skills": len(index), "flagged": flagged})
        return 0
    print(f"{len(flagged)} of {len(index)} skills flagged (left out of hooks and proxies unless allowed)")
    for f in flagged:
        print(f"  {_safe(f['id'])}")
        for r in f["reasons"]:
            print(f"      {_safe(r)}")
    return 0
