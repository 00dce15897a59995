"""Helpers shared by the subcommands: JSON lines on stdout, the abstention flags, argument types."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def emit_json(obj: Any) -> None:
    """One JSON object per line on stdout, flushed (``serve --json`` signals readiness with it)."""
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def add_abstention_args(p: argparse.ArgumentParser) -> None:
    """``--min-score`` / ``--min-cosine``, shared by ``search`` and ``serve``."""
    p.add_argument("--min-score", type=_min_score_arg, default=None, metavar="S",
                   help="no hits for a task whose best fused score is below S ('none': off; default: the "
                        "index's calibration, if any)")
    p.add_argument("--min-cosine", type=_min_score_arg, default=None, metavar="C",
                   help="no hits for a task whose best raw cosine q.d is below C (overrides --min-score "
                        "and the calibration)")


def _min_score_arg(value: str) -> float:
    from skillsight_fast.engine.abstention import parse_min_score

    try:
        return parse_min_score(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _integer(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None


def positive_int(value: str) -> int:
    """argparse type: an integer >= 1 (``--max-queries -5`` is a usage error, not a silent empty run)."""
    number = _integer(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def non_negative_int(value: str) -> int:
    """argparse type: an integer >= 0."""
    number = _integer(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {number}")
    return number


def port_number(value: str) -> int:
    """argparse type: a TCP port, 0..65535 (0 picks a free one)."""
    number = _integer(value)
    if not 0 <= number <= 65535:
        raise argparse.ArgumentTypeError(f"a port is 0..65535, got {number}")
    return number


def fraction(value: str) -> float:
    """argparse type: a number from 0 to 1 (NaN refused)."""
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
    if not 0.0 <= number <= 1.0:  # also False for NaN
        raise argparse.ArgumentTypeError(f"must be from 0 to 1, got {value}")
    return number
