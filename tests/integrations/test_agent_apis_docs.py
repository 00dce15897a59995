"""docs/AGENT_APIS.md's examples run as written, each SDK's client pointed (``ANTHROPIC_BASE_URL``,
``OPENAI_BASE_URL``) at a local HTTP server that records every request and answers with responses
shaped as the APIs' documentation shows: the model's search call first, then a call of a found tool."""

from __future__ import annotations

import contextlib
import http.server
import io
import json
import re
import threading
from pathlib import Path

import pytest

pytestmark = pytest.mark.model
ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "AGENT_APIS.md"
USAGE = {"input_tokens": 900, "output_tokens": 40}


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


class Stub:
    """A loopback HTTP server answering each POST with the next reply, recording the bodies."""

    def __init__(self, replies):
        self.replies, self.seen = list(replies), []
        stub = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                stub.seen.append((self.path, json.loads(body)))
                data = json.dumps(stub.replies.pop(0)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def run(code: str, monkeypatch) -> str:
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(DOC), "exec"), {"__name__": "__doc_example__"})  # noqa: S102 - the doc's own code
    return out.getvalue()


def _message(content):
    return {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": content, "stop_reason": "tool_use", "stop_sequence": None, "usage": USAGE}


def _response(output):
    return {"id": "resp_1", "object": "response", "created_at": 1764000000, "status": "completed",
            "model": "gpt-5.4", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
            "usage": {"input_tokens": 300, "output_tokens": 20, "total_tokens": 320,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


OPENAI_REPLIES = [
    _response([{"type": "tool_search_call", "id": "tsc_1", "call_id": "call_ts1", "execution": "client",
                "status": "completed", "arguments": {"query": "current weather in a city"}}]),
    _response([{"type": "function_call", "id": "fc_1", "call_id": "call_f1", "name": "get_weather",
                "arguments": "{\"city\": \"Paris\"}", "status": "completed"}]),
]


def test_claude_example_with_500_deferred_tools(monkeypatch):
    pytest.importorskip("anthropic")
    stub = Stub([
        _message([{"type": "tool_use", "id": "toolu_1", "name": "search_tools",
                   "input": {"query": "current weather conditions in a city"}}]),
        _message([{"type": "tool_use", "id": "toolu_2", "name": "OpenWeatherMap_get_current_weather",
                   "input": {"location": "Boston, MA", "units": "imperial"}}]),
    ])
    monkeypatch.setenv("ANTHROPIC_BASE_URL", stub.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    try:
        printed = run(examples()[0], monkeypatch)
    finally:
        stub.close()
    assert printed.startswith("501 ")
    (path1, first), (path2, second) = stub.seen
    assert path1 == path2 == "/v1/messages"
    assert len(first["tools"]) == 501 and first["tools"][0]["name"] == "search_tools"
    assert all(t["defer_loading"] for t in first["tools"][1:])
    result = second["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    names = [b["tool_name"] for b in result["content"] if b["type"] == "tool_reference"]
    assert names and all("eather" in n for n in names[:1])


def test_openai_example(monkeypatch):
    pytest.importorskip("openai")
    stub = Stub(OPENAI_REPLIES)
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    try:
        printed = run(examples()[1], monkeypatch)
    finally:
        stub.close()
    assert printed.strip() == "['function_call']"
    (path1, first), (_, second) = stub.seen
    assert path1 == "/v1/responses" and first["tools"][0]["type"] == "tool_search"
    answer = second["input"][-1]
    assert answer["type"] == "tool_search_output" and answer["call_id"] == "call_ts1"
    assert answer["tools"][0]["name"] == "get_weather"


def test_agents_sdk_example(monkeypatch):
    pytest.importorskip("agents")
    stub = Stub(OPENAI_REPLIES)
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    try:
        printed = run(examples()[2], monkeypatch)
    finally:
        stub.close()
    assert printed.strip() == "['function_call']"
    answer = stub.seen[1][1]["input"][-1]
    assert answer["type"] == "tool_search_output" and answer["tools"][0]["name"] == "get_weather"


def test_claude_agent_sdk_example(monkeypatch):
    pytest.importorskip("claude_agent_sdk")
    printed = run(examples()[3], monkeypatch)
    assert printed.strip() in ("[] ['skillsight']", "['hookSpecificOutput'] ['skillsight']")
