"""Bounded JSON parsing (skillsight_fast/limits.py): the nesting guard."""

from __future__ import annotations

import json

import pytest

from skillsight_fast.errors import IndexFormatError
from skillsight_fast.limits import load_json


def nested(depth: int, leaf: object = 1) -> object:
    obj = leaf
    for i in range(depth - 1):
        obj = [obj] if i % 2 else {"k": obj}
    return [obj]  # ``depth`` containers


@pytest.mark.parametrize("depth", [1, 5, 32])
def test_depth_at_the_limit_passes(depth):
    doc = json.dumps(["a", 1, nested(depth - 1) if depth > 1 else 2, "b"])
    assert load_json(doc, error=IndexFormatError, what="x", max_depth=depth) == json.loads(doc)


def test_deep_container_among_scalars_is_refused():
    doc = json.dumps(["s"] * 1000 + [nested(40)] + list(range(1000)))
    with pytest.raises(IndexFormatError, match="x:"):
        load_json(doc, error=IndexFormatError, what="x", max_depth=32)
    doc = json.dumps({"a": 1, "b": {"c": nested(40)}})
    with pytest.raises(IndexFormatError):
        load_json(doc, error=IndexFormatError, what="x", max_depth=32)


def test_wide_flat_documents_pass():
    vocab = [f"t{i}" for i in range(100_000)]
    assert load_json(json.dumps(vocab), error=IndexFormatError, what="vocab", max_depth=2) == vocab
