"""Whether index sources are a catalogue of tools, so ``skillsight index`` gives them the tool config.

``skillsight index --mcp`` / ``--openapi`` index tools with ``tool_index_config()``; a file or a
dataset folder of tools given as SOURCE should get the same. :func:`is_tool_catalogue` says so
when every source is one of:

* a dataset folder (``meta.json`` + ``corpus.jsonl.gz``) whose ``meta.json`` ``kind`` is ``tools``
  or ``apis`` (bfcl, metatool, gorilla_hf);
* a ``.jsonl``/``.jsonl.gz`` file whose first records (up to :data:`SNIFF_RECORDS`) all carry a
  tool's fields: a schema (``inputSchema``, ``input_schema``, ``parameters``) as a key, or a body
  that is a JSON object holding one (``parameters``, ``properties``, ``api_arguments``,
  ``inputSchema``).

Anything else (SKILL.md trees, prose JSONL, unreadable sources) is a skill library: the sources'
own reader reports their problems later, this check never raises.
"""

from __future__ import annotations

import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: ``meta.json`` kinds of tool datasets.
TOOL_KINDS = frozenset({"tools", "apis"})
#: Keys that mark a record (or a record's JSON body) as a tool.
SCHEMA_KEYS = ("inputSchema", "input_schema", "parameters", "properties", "api_arguments")
#: Records read from the head of a JSONL file to decide.
SNIFF_RECORDS = 50
#: Largest meta.json read (bytes).
MAX_META_BYTES = 1 << 20


def _record_is_tool(rec: Any) -> bool:
    if not isinstance(rec, dict):
        return False
    if any(isinstance(rec.get(k), (dict, list, str)) and rec.get(k) for k in SCHEMA_KEYS[:3]):
        return True
    body = rec.get("body")
    if isinstance(body, str) and body.lstrip().startswith("{"):
        try:
            inner = json.loads(body)
        except ValueError:
            return False
        return isinstance(inner, dict) and any(k in inner for k in SCHEMA_KEYS)
    return False


def _jsonl_is_tools(path: Path) -> bool:
    from skillsight_fast.files import iter_lines

    seen = 0
    try:
        for _, line in iter_lines(path):
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
                return False
            if not _record_is_tool(rec):
                return False
            seen += 1
            if seen >= SNIFF_RECORDS:
                break
    # unreadable: its reader reports it
    except (OSError, UnicodeDecodeError, EOFError, ValueError, zlib.error):
        return False
    return seen > 0


def _dataset_kind(path: Path) -> str | None:
    from skillsight_fast.errors import SkillsightError
    from skillsight_fast.limits import load_json, read_regular_file

    try:
        raw = read_regular_file(path / "meta.json", MAX_META_BYTES, error=SkillsightError, what="meta.json")
        meta = load_json(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw,
                         error=SkillsightError, what=str(path / "meta.json"))
    except (OSError, SkillsightError, ValueError):
        return None
    kind = meta.get("kind") if isinstance(meta, dict) else None
    return kind if isinstance(kind, str) else None


def is_tool_catalogue(sources: Sequence[str | os.PathLike[str]]) -> bool:
    """Whether every source is a catalogue of tools (see the module docstring); False for none.

    Examples
    --------
    >>> is_tool_catalogue([])
    False
    """
    if not sources:
        return False
    for src in sources:
        path = Path(src).expanduser()
        if path.is_dir() and (path / "meta.json").is_file() and (path / "corpus.jsonl.gz").is_file():
            if _dataset_kind(path) not in TOOL_KINDS:
                return False
        elif path.is_file() and path.name.endswith((".jsonl", ".jsonl.gz")):
            if not _jsonl_is_tools(path):
                return False
        else:
            return False
    return True
