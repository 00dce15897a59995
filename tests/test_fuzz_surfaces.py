"""Fuzz runs (hypothesis) of the surfaces hostile input reaches: hook stdin and warm-server answers,
install inputs, MCP resource URIs, OpenAPI specs (parsed and as YAML text), and proxy upstream
answers. Each is bounded in time (a fixed number of examples, a few seconds); the property is
always the same: a clear error of the project's own class or a bounded answer, nothing else."""

from __future__ import annotations

import io
import json
import socket
import tempfile
import threading
from pathlib import Path

import pytest
from fakes import HashEncoder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skillsight_fast import SkillIndex
from skillsight_fast.errors import SkillFormatError, SkillsightError

FUZZ = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
JSONISH = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5), st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=30,
)


def _deep(n: int, leaf: str = "1") -> str:
    return "[" * n + leaf + "]" * n


HOSTILE_TEXT = st.one_of(
    st.text(max_size=300),
    st.binary(max_size=300).map(lambda b: b.decode("latin-1")),
    JSONISH.map(json.dumps),
    st.integers(1, 5000).map(_deep),
    st.sampled_from(
        [
            '{"a": 1e400}',
            '{"a": -1e400, "b": 1E+999}',
            "NaN",
            '{"a": Infinity}',
            "\ufeff{}",
            '{"hooks": []}',
            '{"hooks": {"UserPromptSubmit": {}}}',
            '{"mcpServers": 5}',
            "[]",
            '"x"',
            '{"a": ' + "1" * 5000 + "}",
            "{" * 100,
            '{"a": "\\ud800"}',
        ]
    ),
)


# ---------------------------------------------------------------------- hook stdin and answers


@FUZZ
@given(HOSTILE_TEXT, st.one_of(st.none(), HOSTILE_TEXT, JSONISH))
def test_hook_stdin_never_breaks_the_host(tmp_path, text, prompt):
    from skillsight_fast.agents.hook import main

    payloads = [text, json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": prompt})]
    for payload in payloads:
        out = io.StringIO()
        assert (
            main(
                ["claude-code", "-i", str(tmp_path / "none"), "--no-cold"],
                stdin=io.StringIO(payload),
                stdout=out,
            )
            == 0
        )
        assert out.getvalue() == ""  # no server, no cold search: nothing, whatever the input


HITS = st.lists(
    st.one_of(
        JSONISH,
        st.fixed_dictionaries(
            {"id": st.text(max_size=50)},
            optional={
                "name": JSONISH,
                "path": JSONISH,
                "uri": JSONISH,
                "description": st.one_of(JSONISH, st.text(max_size=3000)),
                "evidence": JSONISH,
            },
        ),
    ),
    max_size=30,
)


@FUZZ
@given(st.one_of(JSONISH, st.fixed_dictionaries({"hits": st.one_of(HITS, JSONISH)})))
def test_any_answer_gives_a_bounded_context(answer):
    from skillsight_fast.agents.hook import MAX_HITS, format_context
    from skillsight_fast.agents.hosts import HOSTS

    ctx = format_context(answer if isinstance(answer, dict) else {"hits": answer})
    assert isinstance(ctx, str) and len(ctx.splitlines()) <= MAX_HITS + 1 and len(ctx) < 20_000
    if ctx:
        json.loads(HOSTS["claude-code"].hook_output(ctx))


@pytest.fixture(scope="module")
def raw_server():
    """A loopback TCP server that answers each connection with the next queued bytes."""
    queue: list[bytes] = []
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(queue.pop(0) if queue else b"")
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}", queue
    srv.close()


@FUZZ
@given(
    st.one_of(
        st.binary(max_size=500),
        JSONISH.map(lambda o: b"HTTP/1.1 200 OK\r\nX-Skillsight-Proof: 00\r\n\r\n" + json.dumps(o).encode()),
    )
)
def test_warm_server_answers_are_refused_unless_proven(raw_server, raw):
    from skillsight_fast.agents.endpoint import new_secret
    from skillsight_fast.agents.hook import post_json

    url, queue = raw_server
    queue.append(raw)
    with pytest.raises((OSError, ValueError)):  # no answer here carries a valid proof
        post_json(url, "/search", {"task": "x", "k": 1}, 2.0, secret=new_secret())


# ---------------------------------------------------------------------- install inputs


@FUZZ
@given(HOSTILE_TEXT)
def test_install_merges_or_refuses_and_what_it_writes_is_strict_json(text):
    from skillsight_fast.agents.hosts import ClaudeCode

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        (root / "idx").mkdir()
        (root / "idx" / "manifest.json").write_text("{}")
        (root / ".claude").mkdir()
        (root / ".claude" / "settings.json").write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            changes = ClaudeCode().plan(root / "idx", scope="project", project=root)
        except SkillsightError as exc:
            assert "\n" not in str(exc).strip()
            return
        for ch in changes:
            data = json.loads(ch.new, parse_constant=lambda c: pytest.fail(f"{c} written"))
            assert isinstance(data, dict)


# ---------------------------------------------------------------------- MCP resource URIs


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    from skill_files import write_skill

    from skillsight_fast.agents.live import LiveIndex as Catalog
    from skillsight_fast.library.skills import load_skills

    root = tmp_path_factory.mktemp("uris")
    for rel in ("pdf", "team/csv", "a b/%41"):
        write_skill(root / "lib", rel, name=rel.replace("/", "-").replace(" ", "-"), description="A skill.")
    (root / "lib" / "pdf" / "notes.txt").write_text("notes")
    report = load_skills([root / "lib"])
    index = SkillIndex.build(report.skills, HashEncoder())
    index.state.roots = report.roots
    return Catalog.of(index, None, root / "idx")


URI_PARTS = st.sampled_from(
    [
        "pdf",
        "team",
        "csv",
        "a%20b",
        "%2541",
        "..",
        ".",
        "",
        "SKILL.md",
        "notes.txt",
        "%2F",
        "%00",
        "~",
        "\\",
        "?",
        "#",
        "%",
        "%zz",
        "/etc/passwd",
        "a" * 50,
    ]
)


@FUZZ
@given(
    st.one_of(
        st.text(max_size=200),
        st.lists(URI_PARTS, max_size=40).map(lambda p: "skill://" + "/".join(p)),
        st.integers(1, 20_000).map(lambda n: "skill://" + "/".join(["x"] * n)),
    )
)
def test_resource_uris_resolve_inside_the_library_or_are_refused(catalog, uri):
    from skillsight_fast.agents.live import SkillFileError, UnknownSkillError

    try:
        sid, rel = catalog.parse_uri(uri)
    except UnknownSkillError as exc:
        assert len(str(exc)) < 600
        return
    assert sid in catalog.row_of
    try:
        data, _, real = catalog.skill_file(sid, rel)
    except (SkillFileError, UnknownSkillError):
        return
    assert Path(real).is_relative_to(Path(catalog.folder(sid)).resolve()) and len(data) <= 1 << 20


# ---------------------------------------------------------------------- OpenAPI specs


SPEC = st.fixed_dictionaries(
    {
        "openapi": st.sampled_from(["3.0.0", "3.1.0", 3, "2.0"]),
        "paths": st.one_of(
            JSONISH,
            st.dictionaries(
                st.text(max_size=20),
                st.dictionaries(st.sampled_from(["get", "post", "parameters", "$ref"]), JSONISH, max_size=3),
                max_size=4,
            ),
        ),
    },
    optional={"components": JSONISH},
)


@FUZZ
@given(st.one_of(JSONISH, SPEC))
def test_any_parsed_spec_gives_tools_or_a_clear_error(spec):
    from skillsight_fast.tools.openapi import openapi_tools

    try:
        tools = openapi_tools(spec, "api")
    except SkillFormatError:
        return
    assert tools and all(len(t.description) < 40_000 for t in tools)


@FUZZ
@given(
    st.one_of(
        st.text(max_size=400),
        st.lists(
            st.sampled_from(
                [
                    "a: &a [1, 2]\n",
                    "b: *a\n",
                    "c: [*a, *a, *a]\n",
                    "- ",
                    "? ",
                    "!!python/object:os.system\n",
                    "x: !!binary zz\n",
                    "&r [*r]\n",
                    "{",
                    "}",
                    "[",
                    "]",
                    ": ",
                    "\t",
                    "'",
                    '"',
                    "d: 2001-13-01\n",
                    "e: 1e400\n",
                ]
            ),
            max_size=40,
        ).map("".join),
    )
)
def test_any_yaml_text_loads_or_gives_a_clear_error(text):
    from skillsight_fast.limits import load_yaml

    try:
        load_yaml(text, error=SkillFormatError, what="fuzz")
    except SkillFormatError as exc:
        assert str(exc).startswith("fuzz:") and "\n" not in str(exc)


# ---------------------------------------------------------------------- proxy upstream answers


TOOL = st.one_of(
    JSONISH,
    st.fixed_dictionaries(
        {"name": JSONISH},
        optional={
            "description": st.one_of(JSONISH, st.text(max_size=10_000)),
            "title": JSONISH,
            "inputSchema": st.one_of(
                JSONISH, st.integers(1, 300).map(lambda n: json.loads('{"a": ' * n + "1" + "}" * n))
            ),
        },
    ),
)


@FUZZ
@given(
    st.one_of(
        HOSTILE_TEXT,
        st.lists(TOOL, max_size=10).map(
            lambda tools: json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}})
        ),
        JSONISH.map(lambda r: json.dumps({"jsonrpc": "2.0", "id": 7, "result": r})),
    )
)
def test_any_upstream_line_becomes_a_message_or_an_error_value(line):
    pytest.importorskip("mcp")
    from skillsight_fast.tools import guard

    out = guard.parse_line(line)
    if isinstance(out, Exception):
        return
    result = getattr(out.message, "result", None)
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        for tool in result["tools"]:
            assert isinstance(tool["name"], str)
            assert len(tool.get("description") or "") <= guard.MAX_DESCRIPTION_CHARS
