"""The lexical analyzer: lower-cased word tokens, as METHOD.md step 1."""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[a-z0-9_]+")
_DEFAULT_TOKEN = re.compile(r"(?<![a-z0-9_])[a-z0-9_]{2,40}(?![a-z0-9_])")


def analyze(text: str, min_len: int = 2, max_len: int = 40) -> list[str]:
    """Lower-case ``text`` and return its tokens matching ``[a-z0-9_]+`` of length min_len..max_len.

    Examples
    --------
    >>> analyze("Use this skill to parse PDF files, e.g. report_2024.pdf")
    ['use', 'this', 'skill', 'to', 'parse', 'pdf', 'files', 'report_2024', 'pdf']
    """
    if min_len == 2 and max_len == 40:  # one regex pass, same tokens as the filter below
        return _DEFAULT_TOKEN.findall(text.lower())
    return [t for t in _TOKEN.findall(text.lower()) if min_len <= len(t) <= max_len]


def unique_tokens(text: str, min_len: int = 2, max_len: int = 40) -> list[str]:
    """Distinct tokens of ``text`` in order of first appearance."""
    return list(dict.fromkeys(analyze(text, min_len, max_len)))
