"""An MCP request with a lone surrogate escape gets an answer (skillsight_fast/agents/stdin_filter.py).

The SDK parses request lines with pydantic-core, which calls ``"\\ud800"`` invalid JSON and drops
the line without answering. The real MCP server runs here in a subprocess on real stdio (the
test hashing encoder instead of the model), driven with raw JSON-RPC lines.
"""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from fakes import HashEncoder
from hypothesis import given, settings
from hypothesis import strategies as st
from skill_files import write_skill

from skillsight_fast import SkillIndex
from skillsight_fast.agents.stdin_filter import fix_lone_surrogate_escapes
from skillsight_fast.library.skills import load_skills
from skillsight_fast.limits import clean_text

HERE = Path(__file__).parents[1] / "support"


@pytest.mark.parametrize("text,expected", [
    (rb'"a \ud800 b"', rb'"a \ufffd b"'),
    (rb'"\uDBFF"', rb'"\ufffd"'),
    (rb'"\udc00"', rb'"\ufffd"'),
    (rb'"\ud800\ud800\udc00"', rb'"\ufffd\ud800\udc00"'),  # a lone high, then a pair
    (rb'"\ud83d\ude00"', rb'"\ud83d\ude00"'),  # a pair is kept
    (rb'"\\ud800"', rb'"\\ud800"'),  # an escaped backslash, then text
    (rb'"\\\ud800"', rb'"\\\ufffd"'),  # an escaped backslash, then an escape
    (rb'"\u00e9 plain"', rb'"\u00e9 plain"'),
], ids=["high", "high-upper", "low", "high-then-pair", "pair", "escaped-backslash", "backslash-then-escape",
        "plain"])
def test_fix_lone_surrogate_escapes(text, expected):
    assert fix_lone_surrogate_escapes(text) == expected


def one_replacement_each(text: str) -> str:
    """``text`` with each lone surrogate replaced by one U+FFFD (what the filter's escape decodes to)."""
    return re.sub("[\ud800-\udfff]", "\ufffd", text)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),  # surrogates
                          st.sampled_from(["\\", "\\u", "u", "d800", "\U0001F600", "a", '"'])), max_size=12))
def test_fixed_json_parses_to_the_text_with_surrogates_replaced(parts):
    text = "".join(parts)
    line = json.dumps({"task": text}).encode("ascii")  # ensure_ascii: every surrogate becomes an escape
    fixed = fix_lone_surrogate_escapes(line)
    # Python's parser joins an escaped pair (even of two "lone" ones side by side) and keeps the rest
    assert json.loads(fixed)["task"] == one_replacement_each(json.loads(line)["task"])
    assert clean_text(json.loads(fixed)["task"]) == json.loads(fixed)["task"]  # nothing left to clean


SERVER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from fakes import HashEncoder
    from skillsight_fast import SkillIndex
    from skillsight_fast.agents.mcp import run_mcp
    from skillsight_fast.agents.service import SkillService
    service = SkillService({idx!r}, index=SkillIndex.load({idx!r}, encoder=HashEncoder()))
    service.warm()
    run_mcp(service)
""")


def test_mcp_request_with_a_lone_surrogate_is_answered(tmp_path):
    pytest.importorskip("mcp")
    for name, body in {"pdf": "merge pdf pages", "csv": "csv rows columns"}.items():
        write_skill(tmp_path / "lib", name, name=name, description=f"{name} skill.", body=body)
    SkillIndex.build(load_skills([tmp_path / "lib"]).skills, HashEncoder()).save(tmp_path / "idx")
    proc = subprocess.Popen([sys.executable, "-c", SERVER.format(tests=str(HERE), idx=str(tmp_path / "idx"))],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=os.environ | {"PYTHONPATH": os.pathsep.join(sys.path)})
    buffer = b""

    def send(obj_or_line):
        line = obj_or_line if isinstance(obj_or_line, bytes) else json.dumps(obj_or_line).encode()
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()

    def answer(timeout=30.0):
        nonlocal buffer
        deadline = time.monotonic() + timeout
        while b"\n" not in buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                return None
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            buffer += chunk
        line, _, buffer = buffer.partition(b"\n")
        return json.loads(line)

    def call(i, task_json):
        return (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"find_skills",'
                b'"arguments":{"task":"%s","k":1}}}' % (i, task_json))

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert answer()["id"] == 1
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        cases = {2: rb"merge \ud800 pdf", 3: rb"merge pdf \udfff", 4: rb"merge pdf \ud83d\ude00",
                 5: rb"merge pdf \\ud800", 6: rb"merge pdf"}
        for i, task in cases.items():
            send(call(i, task))
            got = answer()
            assert got is not None, f"no answer to request {i} ({task!r})"
            assert got["id"] == i and "result" in got, got
            out = json.loads(got["result"]["content"][0]["text"])
            assert out["query"] == one_replacement_each(json.loads(b'"' + task + b'"'))
            assert out["hits"][0]["id"] == "pdf"
    finally:
        proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()
