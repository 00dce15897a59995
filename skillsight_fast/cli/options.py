"""The options the ``skillsight`` command line offers, counted (issue 38: at most ``MAX_OPTIONS``).

``python -m skillsight_fast.cli.options`` prints them command by command; tests/cli/test_settings.py
holds the total. A module of its own: it builds the parser, which imports :mod:`.settings`.
"""

from __future__ import annotations

import argparse

from skillsight_fast.cli import build_parser
from skillsight_fast.cli.settings import MAX_OPTIONS


def _parsers(parser: argparse.ArgumentParser, name: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every parser under ``parser``, each once (an alias is the same parser), with its command name."""
    out = [(name, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for sub_name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    out += _parsers(sub, f"{name} {sub_name}".strip())
    return out


def option_counts(parser: argparse.ArgumentParser | None = None) -> dict[str, list[str]]:
    """The option groups of every command ("" = before the command), help and --version excluded.

    One option group is one action: ``-o/--output`` is one, ``--query-int8/--no-query-int8`` is one.
    """
    counts: dict[str, list[str]] = {}
    for name, p in _parsers(parser or build_parser()):
        opts = [a.option_strings[-1] for a in p._actions if a.option_strings
                and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]
        if opts or name:
            counts[name] = opts
    return counts


def main() -> None:
    """Print the option count of every command and the total."""
    counts = option_counts()
    for name, opts in counts.items():
        print(f"{name or '(before the command)':<22}{len(opts):>3}  {' '.join(opts)}")
    print(f"{'total':<22}{sum(map(len, counts.values())):>3}  (at most {MAX_OPTIONS})")


if __name__ == "__main__":
    main()
