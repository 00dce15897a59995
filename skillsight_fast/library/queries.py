"""Reading labelled and unlabelled queries: dataset folders, JSONL files, plain text lists."""

from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from skillsight_fast.errors import SkillFormatError
from skillsight_fast.files import iter_lines
from skillsight_fast.limits import clean_text, load_json


@dataclass(frozen=True)
class Task:
    """One task text from a query file and the ids of the skills that answer it (``calibrate``, ``analyze``).

    Not :class:`skillsight_fast.lab.evaluation.datasets.EvalQuery`, which names its gold documents by
    their row in a loaded corpus; a task names them by skill id, so it outlives any one index.

    Attributes
    ----------
    id : str
        The record's ``id`` (or ``FILE:LINE`` when it has none).
    text : str
        The task text.
    gold : tuple of str
        Ids of the skills that answer it; empty when unlabelled.
    """

    id: str
    text: str
    gold: tuple[str, ...] = field(default_factory=tuple)


def read_queries(source: str | os.PathLike[str], limit: int | None = None) -> list[Task]:
    """Queries of a dataset folder (``queries.jsonl.gz``), a ``.jsonl(.gz)`` file or a ``.txt`` list.

    A ``.txt`` file holds one unlabelled task per line; blank lines and lines starting with ``#``
    are ignored. JSONL records are ``{"id", "text", "gold": [...]}``.

    Parameters
    ----------
    source : path
    limit : int, optional
        Keep only the first ``limit`` queries (in file order).

    Raises
    ------
    SkillFormatError
        Missing or unreadable file, or a malformed record.
    """
    path = Path(source).expanduser()
    if path.is_dir():
        path = path / "queries.jsonl.gz"
    if not path.is_file():
        raise SkillFormatError(f"{path}: no such query file (give a dataset folder, .jsonl(.gz) or .txt)")
    out: list[Task] = []
    try:
        if path.suffix == ".txt":
            for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
                line = line.strip()
                if line and not line.startswith("#"):
                    out.append(Task(f"{path.stem}:{i}", line))
        else:
            for lineno, line in iter_lines(path):
                rec = load_json(line, error=SkillFormatError, what=f"{path}:{lineno}")
                if not isinstance(rec, dict) or not isinstance(rec.get("text"), str):
                    raise SkillFormatError(f"{path}:{lineno}: a query record needs a string 'text'")
                gold = rec.get("gold")
                if gold is None:
                    gold = []
                if not isinstance(gold, list) or not all(isinstance(g, (str, int)) and not isinstance(g, bool)
                                                         for g in gold):
                    raise SkillFormatError(f"{path}:{lineno}: 'gold' must be a list of skill ids, "
                                           f"got {json.dumps(gold)[:60]}")
                qid = rec.get("id", f"{path.stem}:{lineno}")
                if not isinstance(qid, (str, int)) or isinstance(qid, bool):
                    raise SkillFormatError(
                        f"{path}:{lineno}: 'id' must be a string, got {json.dumps(qid)[:60]}")
                out.append(Task(clean_text(str(qid)), clean_text(rec["text"]),
                                tuple(clean_text(str(g)) for g in gold)))
                if limit is not None and len(out) >= limit:
                    break
    except (OSError, UnicodeDecodeError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise SkillFormatError(f"{path}: cannot read queries ({exc})") from None
    return out[:limit] if limit is not None else out
