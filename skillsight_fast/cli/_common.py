"""Helpers shared by the subcommands: JSON lines on stdout and the abstention flags."""

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
    from skillsight_fast.calibrate import parse_min_score

    try:
        return parse_min_score(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
