"""Subcommands that put skillsight where agents live: the prompt hook and the host installer.

``skillsight hook claude-code`` is dispatched by :func:`skillsight_fast.cli.main` straight to
:func:`skillsight_fast.agents.hook.main` (before argparse, which exits with status 2 on bad arguments:
Claude Code would block the user's prompt on that status); it is registered here for ``--help``.
"""

from __future__ import annotations

import argparse
import sys

from skillsight_fast.agents.hook_options import HOOK_OPTIONS, add_hook_args
from skillsight_fast.agents.hosts import HOSTS
from skillsight_fast.cli._common import emit_json


def register(sub: argparse._SubParsersAction) -> None:
    """Add hook and install to the ``skillsight`` parser."""
    p = sub.add_parser("hook", help="prompt hook for an agent host: the skills that fit the prompt, or nothing")
    add_hook_args(p, HOSTS)
    p.set_defaults(func=cmd_hook)

    p = sub.add_parser("install", help="put the prompt hook and the MCP server where an agent host reads them")
    p.add_argument("host", choices=sorted(HOSTS))
    p.add_argument("-i", "--index", required=True, metavar="DIR")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--user", dest="scope", action="store_const", const="user",
                       help="your own settings, every project (default): Claude Code ~/.claude/settings.json and "
                            "~/.claude.json; Gemini CLI ~/.gemini/settings.json")
    scope.add_argument("--local", dest="scope", action="store_const", const="local",
                       help="Claude Code, this project, uncommitted: .claude/settings.local.json and this "
                            "project's entry of ~/.claude.json")
    scope.add_argument("--project", dest="scope", action="store_const", const="project",
                       help="the team's files of this project: .claude/settings.json and .mcp.json (Claude Code), "
                            ".gemini/settings.json (Gemini CLI)")
    scope.add_argument("--plugin", nargs="?", const="", default=None, metavar="DIR",
                       help="Claude Code: write a plugin (hook + MCP server) in a local marketplace folder "
                            "(default ~/.skillsight/claude-plugin) to add with /plugin")
    p.add_argument("--dir", default=".", metavar="PROJECT", help="the project root for --local/--project (default: .)")
    p.add_argument("--no-hook", action="store_true", help="do not install the prompt hook")
    p.add_argument("--no-mcp", action="store_true", help="do not install the MCP server")
    p.add_argument("--watch", action="store_true", help="start the MCP server with --watch (live catalog)")
    p.add_argument("--dry-run", action="store_true", help="print the unified diff; write nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_install, scope=None)


def cmd_hook(args: argparse.Namespace) -> int:  # pragma: no cover - main() dispatches before argparse
    from skillsight_fast.agents.hook import main
    from skillsight_fast.agents.hook_options import hook_argv

    return main(hook_argv(args.host, args.index, **{o.dest: getattr(args, o.dest) for o in HOOK_OPTIONS
                                                      if o.dest != "index"}))


def cmd_install(args: argparse.Namespace) -> int:
    from skillsight_fast.agents.hosts import get_host, plan_install
    from skillsight_fast.agents.install import apply

    changes = plan_install(args.host, args.index, scope=args.scope or "user", plugin=args.plugin,
                           project=args.dir, hook=not args.no_hook, mcp=not args.no_mcp, watch=args.watch)
    written = [] if args.dry_run else apply(changes)
    note = None if args.plugin is not None else get_host(args.host).portability_note(
        args.scope or "user", args.index, args.dir)
    if note and not args.json:
        print(note, file=sys.stderr)
    if args.json:
        emit_json({"dry_run": args.dry_run, "files": [
            {"path": str(c.path), "changed": c.changed, "diff": c.diff()} for c in changes],
            "written": [str(p) for p in written], "note": note})
        return 0
    for c in changes:
        if args.dry_run:
            sys.stdout.write(c.diff() if c.changed else f"# {c.path}: already up to date\n")
        else:
            print(f"{'created' if c.old is None else 'updated' if c.changed else 'unchanged'} {c.path}")
    if not args.dry_run and (any(c.changed for c in changes) or args.plugin is not None):
        print(get_host(args.host).next_steps(changes, args.plugin))
    return 0
