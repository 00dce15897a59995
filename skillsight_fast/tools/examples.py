"""Example values out of a tool's indexed schema, so that a tool's name and purpose carry its match.

A parameter's example (``"examples": ["Asia/Tokyo"]``, ``"example_code": "..."``, or a clause
"E.g. strategy, family, party" inside a description) says what a value may look like, not what
the tool does; indexed as text, it lets a task that mentions the value (Tokyo) reach a tool whose
purpose is something else. :func:`strip_examples` returns the schema without them; the rest of
the schema (names, types, descriptions, ``default``, ``enum``, ``required``) is kept as it is.

experiments/schema_example_values.py measures it on every tool dataset (docs/TOOLS.md).
"""

from __future__ import annotations

import re
from typing import Any

#: Keys whose values are illustrations (JSON Schema's ``examples``, OpenAPI's ``example``/
#: ``examples``, an API record's ``example_code``); removed wherever they appear.
EXAMPLE_KEYS = frozenset({"example", "examples", "example_code"})
#: A clause that gives examples inside prose: from "e.g." / "for example" / "for instance" to the end
#: of its sentence (or of the text); a parenthesised one including its brackets.
_PAREN = re.compile(r"\s*\((?:e\.g\.|eg\.|for example|for instance)[^)]*\)", re.IGNORECASE)
_CLAUSE = re.compile(r"[,;:]?\s*\b(?:e\.g\.|eg\.|for example|for instance)(?:[^.]|\.(?=\S))*(?:\.|$)",
                     re.IGNORECASE)


def strip_example_clauses(text: str) -> str:
    """``text`` without its example clauses (see the module docstring); whitespace tidied.

    Examples
    --------
    >>> strip_example_clauses("The preferred category. E.g. strategy, family, party etc. Required.")
    'The preferred category. Required.'
    >>> strip_example_clauses("A time zone (e.g. Asia/Tokyo) of the city")
    'A time zone of the city'
    """
    out = _CLAUSE.sub(lambda m: "." if m.group(0).rstrip().endswith(".") and m.group(0)[:1] in ",;:" else "",
                      _PAREN.sub("", text))
    return re.sub(r"\s+([.,;:])", r"\1", re.sub(r"\s{2,}", " ", out)).strip()


def strip_examples(schema: Any) -> Any:
    """A copy of a JSON schema (or API record) without example values.

    Keys in :data:`EXAMPLE_KEYS` are dropped at every level and example clauses are cut from every
    ``description`` string; everything else is returned unchanged (lists and other values copied).

    Examples
    --------
    >>> strip_examples({"type": "object", "properties": {"tz": {"type": "string",
    ...     "description": "IANA time zone, e.g. Asia/Tokyo", "examples": ["Asia/Tokyo"]}}})
    {'type': 'object', 'properties': {'tz': {'type': 'string', 'description': 'IANA time zone'}}}
    """
    if isinstance(schema, dict):
        out = {}
        for key, value in schema.items():
            if key in EXAMPLE_KEYS:
                continue
            if key == "description" and isinstance(value, str):
                out[key] = strip_example_clauses(value)
            elif key == "properties" and isinstance(value, dict):  # parameter names, not keywords
                out[key] = {name: strip_examples(sub) for name, sub in value.items()}
            else:
                out[key] = strip_examples(value)
        return out
    if isinstance(schema, list):
        return [strip_examples(v) for v in schema]
    return schema
