"""tools.kind: which index sources are catalogues of tools (they get the tool catalogue's config)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from skillsight_fast.tools.kind import is_tool_catalogue

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.mark.parametrize("name, tools", [("bfcl", True), ("metatool", True), ("gorilla_hf", True),
                                         ("skillsbench", False), ("personal", False)])
def test_vendored_datasets_by_their_kind(name, tools):
    assert is_tool_catalogue([DATA / name]) is tools


def _jsonl(path: Path, rows) -> Path:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wt", encoding="utf-8") as fh:
        for r in rows:
            fh.write((r if isinstance(r, str) else json.dumps(r)) + "\n")
    return path


def test_jsonl_of_tools_by_a_schema_key_or_a_json_body(tmp_path):
    schema = {"type": "object", "properties": {"tz": {"type": "string"}}}
    keyed = _jsonl(tmp_path / "a.jsonl", [{"id": "t/a", "name": "a", "inputSchema": schema}])
    body = _jsonl(tmp_path / "b.jsonl.gz",
                  [{"id": "b", "name": "b", "body": json.dumps({"parameters": schema})}])
    assert is_tool_catalogue([keyed]) and is_tool_catalogue([body]) and is_tool_catalogue([keyed, body])


def test_skills_prose_mixed_and_broken_sources_are_not_tools(tmp_path):
    prose = _jsonl(tmp_path / "p.jsonl", [{"id": "p", "name": "p", "body": "# Use this skill\nwhen..."}])
    tool = _jsonl(tmp_path / "t.jsonl", [{"id": "t", "name": "t", "parameters": {"type": "object"}}])
    mixed = _jsonl(tmp_path / "m.jsonl",
                   [{"id": "t", "name": "t", "parameters": {}}, {"id": "p", "name": "p"}])
    broken = _jsonl(tmp_path / "x.jsonl", ["{not json"])
    bad_gz = tmp_path / "y.jsonl.gz"
    bad_gz.write_bytes(b"not gzip at all")
    folder = tmp_path / "skills"
    folder.mkdir()
    assert not is_tool_catalogue([])
    for sources in ([prose], [tool, prose], [mixed], [broken], [bad_gz], [folder],
                    [tmp_path / "missing.jsonl"]):
        assert not is_tool_catalogue(sources)
