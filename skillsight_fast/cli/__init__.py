"""The ``skillsight`` command line: argparse only; each handler calls the public API.

A leaf package: nothing in the library imports it. Each module here defines
``register(subparsers)`` (see ``COMMANDS``); heavy imports stay inside handlers so a one-shot
search starts fast. The research commands live under ``skillsight lab`` (``eval``, ``bench`` and
``analyze`` also answer at the top level); tuning and research knobs are settings, not options
(``skillsight -c KEY=VALUE COMMAND``, :mod:`skillsight_fast.cli.settings`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from skillsight_fast.cli.settings import SettingError, apply_settings
from skillsight_fast.errors import SkillsightError

#: Modules that add subcommands, in help order (each defines ``register(subparsers)``).
COMMANDS: tuple[str, ...] = (
    "skillsight_fast.cli.core", "skillsight_fast.cli.agents", "skillsight_fast.cli.screen",
    "skillsight_fast.cli.hooks", "skillsight_fast.cli.authors", "skillsight_fast.cli.lab",
)

#: The module that registers each command: a command given on the command line builds only its own
#: parser (a one-shot ``search`` imports none of the others; tests/cli/test_cli.py checks the table).
COMMAND_MODULES: dict[str, str] = {
    **dict.fromkeys(("index", "search", "info", "rescan", "warmup", "split"), "skillsight_fast.cli.core"),
    **dict.fromkeys(("serve", "calibrate", "update"), "skillsight_fast.cli.agents"),
    **dict.fromkeys(("screen", "scan"), "skillsight_fast.cli.screen"),
    **dict.fromkeys(("hook", "install"), "skillsight_fast.cli.hooks"),
    **dict.fromkeys(("doctor", "pin"), "skillsight_fast.cli.authors"),
    "lab": "skillsight_fast.cli.lab",
}

#: Research commands that also answer at the top level: ``skillsight eval`` is ``skillsight lab eval``.
LAB_ALIASES = frozenset({"eval", "bench", "analyze"})


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: every command, or with ``command`` (a key of :data:`COMMAND_MODULES`)
    only the commands of the module that defines it."""
    from skillsight_fast import __version__

    parser = argparse.ArgumentParser(
        prog="skillsight", description="Find the right skills for a task, in a millisecond, on a CPU.",
        epilog="eval, bench and analyze are short for lab eval, lab bench and lab analyze. "
               "A command's settings (tuning and research knobs) are listed in its --help and set with -c.",
    )
    parser.add_argument("--version", action="version", version=f"skillsight-fast {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress to stderr")
    parser.add_argument("-c", "--config", action="append", default=[], metavar="KEY=VALUE|FILE",
                        help="a setting of the command (see its --help), or a TOML/JSON file of them with "
                             "one table per command, e.g. [eval] (repeatable; later ones win)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in (COMMAND_MODULES[command],) if command in COMMAND_MODULES else COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``skillsight``; returns the exit code (0 ok, 1 error, 2 usage)."""
    args_in = list(sys.argv[1:] if argv is None else argv)
    if args_in[:1] == ["hook"]:  # a host's hook: never argparse's exit status 2, never a traceback
        from skillsight_fast.agents.hook import main as hook_main

        return hook_main(args_in[1:], hard_exit=argv is None)
    at = _command_index(args_in)
    if at is not None and args_in[at] == "search":  # a one-shot process (see _startup.py)
        from skillsight_fast._startup import one_blas_thread

        one_blas_thread()
    argv_in = lab_alias(args_in)
    at = _command_index(argv_in)
    asks_help = any(a in ("-h", "--help") for a in argv_in[:at])  # top-level help lists every command
    parser = build_parser(None if at is None or asks_help else argv_in[at])
    args = parser.parse_args(argv_in)
    if getattr(args, "quiet", False):  # -q: not even the kernels' compile lines (kernels/_notice.py)
        logging.getLogger("skillsight_fast.kernels").setLevel(logging.ERROR)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        apply_settings(args, args.config, getattr(args, "lab_command", None) or args.command)
        return int(args.func(args) or 0)
    except SettingError as exc:  # a usage error: status 2, as argparse's own
        print(f"skillsight: error: {exc}", file=sys.stderr)
        return 2
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



def _command_index(argv: list[str]) -> int | None:
    """Where the command is in ``argv`` (after ``-v`` and ``-c X``), or None."""
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        i += 2 if argv[i] in ("-c", "--config") else 1
    return i if i < len(argv) else None


def lab_alias(argv: list[str]) -> list[str]:
    """``[-v] [-c X] eval ...`` as ``[-v] [-c X] lab eval ...`` (the top-level names of lab commands)."""
    i = _command_index(argv)
    if i is not None and argv[i] in LAB_ALIASES:
        return [*argv[:i], "lab", *argv[i:]]
    return argv
