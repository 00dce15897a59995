"""Tools as skills: the indexed tool text, server configurations, and the tool-search metrics."""

from __future__ import annotations

import json

import numpy as np
import pytest

from skillsight_fast.errors import SkillFormatError
from skillsight_fast.lab.evaluation.datasets import Dataset, EvalQuery
from skillsight_fast.lab.evaluation.tool_search import has_schemas, summarise, tool_docs, tool_metrics
from skillsight_fast.library.skills import Skill
from skillsight_fast.metrics import completeness_at_k, hit_at_k
from skillsight_fast.tools.catalog import (
    Tool,
    params_text,
    parse_mcp_config,
    parse_server_arg,
    tool_body,
    tool_skill,
)

TIME_SCHEMA = {"type": "object", "required": ["timezone"], "properties": {
    "timezone": {"type": "string", "description": "IANA timezone name, e.g. 'Asia/Tokyo'"},
    "opts": {"type": "object", "properties": {"dst": {"type": ["boolean", "null"], "title": "DST"}}}}}


def test_tool_skill_id_and_texts():
    tool = Tool("time", "get_current_time", "Get current time in a specific timezone", "Current time",
                TIME_SCHEMA)
    for text, expect in (("description", ""), ("params", "timezone (string): IANA"),
                         ("schema", '"required": [\n  "timezone"')):
        s = tool_skill(tool, text)
        assert s.id == "time/get_current_time" and s.name == "get_current_time"
        assert s.description == "Current time. Get current time in a specific timezone"
        assert (expect in s.body) if expect else s.body == ""
    assert params_text(TIME_SCHEMA).splitlines() == [
        "timezone (string): IANA timezone name, e.g. 'Asia/Tokyo'", "opts (object)",
        "opts.dst (boolean|null): DST"]
    assert tool_skill(tool).body == tool_body(TIME_SCHEMA, "schema")  # the measured default
    with pytest.raises(SkillFormatError, match="unknown tool text"):
        tool_body(TIME_SCHEMA, "everything")


def test_server_arguments_and_host_config():
    c = parse_server_arg("git=mcp-server-git --repository '/tmp/a b'")
    assert (c.name, c.command, c.args) == ("git", "mcp-server-git", ("--repository", "/tmp/a b"))
    assert parse_server_arg("http://127.0.0.1:9000/mcp").url == "http://127.0.0.1:9000/mcp"
    assert parse_server_arg("uvx mcp-server-time").name == ""
    with pytest.raises(SkillFormatError):
        parse_server_arg("   ")
    servers = parse_mcp_config({"mcpServers": {
        "time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"], "env": {"A": "1"}},
        "remote": {"url": "http://127.0.0.1:9/mcp"}, "off": {"command": "x", "disabled": True}}})
    assert [(s.name, s.command, s.args, dict(s.env), s.url) for s in servers] == [
        ("time", "mcp-server-time", ("--local-timezone", "UTC"), {"A": "1"}, ""),
        ("remote", "", (), {}, "http://127.0.0.1:9/mcp")]
    for bad in ({}, {"mcpServers": {"x": {}}}, {"mcpServers": {"x": {"command": "c", "args": "a"}}},
                {"mcpServers": {"a/b": {"command": "c"}}}):
        with pytest.raises(SkillFormatError):
            parse_mcp_config(bad)


def test_completeness_needs_every_gold_tool():
    ranked = np.array([[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [9, 8, 7, 6, 5, -1]])
    gold = [frozenset({0, 4}), frozenset({0, 9}), frozenset()]
    assert completeness_at_k(ranked, gold, 5).tolist() == [1.0, 0.0, 0.0]
    assert hit_at_k(ranked, gold, 5).tolist() == [1.0, 0.0, 0.0]
    assert completeness_at_k(ranked, gold, 6).tolist() == [1.0, 0.0, 0.0]
    per = tool_metrics(ranked, gold)
    out = summarise({"skillsight": per, "bm25": tool_metrics(ranked[:, ::-1], gold)}, n_boot=200)
    assert set(out["methods"]["skillsight"]) == {"hit@1", "hit@5", "complete@5"}
    assert "skillsight - bm25" in out["paired"]


def test_tool_docs_rewrites_bfcl_and_gorilla_records():
    bfcl = Skill("bfcl:f", "f", "Do f.", json.dumps({"name": "f", "parameters": {
        "type": "dict", "properties": {"x": {"type": "integer", "description": "the x"}}}}))
    gorilla = Skill("g:0", "m", "A model.",
                    json.dumps({"api_call": "M()", "api_arguments": ["inputs", "mask"]}))
    plain = Skill("metatool:a", "a", "Plain tool.", "Plain tool.")
    ds = Dataset("t", [bfcl, gorilla, plain], [EvalQuery("q", "x", frozenset({0}))])
    assert has_schemas(ds)
    params = tool_docs(ds, "params").docs
    assert [d.body for d in params] == ["x (integer): the x", "inputs\nmask", ""]
    assert [d.body for d in tool_docs(ds, "description").docs] == ["", "", ""]
    assert [d.body for d in tool_docs(ds, "schema").docs] == [bfcl.body, gorilla.body, ""]
    assert not has_schemas(Dataset("m", [plain], []))


def test_same_tool_name_on_two_servers_is_never_folded_as_a_copy():
    """find_skills' duplicate collapse folds copies of a skill, not two servers' tools of one name."""
    from fakes import HashEncoder

    from skillsight_fast import SkillIndex
    from skillsight_fast.agents.find import find_skills, tool_server
    from skillsight_fast.library.skills import Skill
    from skillsight_fast.tools.catalog import Tool, tool_skill

    schema = {"type": "object", "properties": {"query": {"type": "string", "description": "Words to find"}}}
    tools = [Tool(server=s, name="search", description="Search the documents for words", input_schema=schema)
             for s in ("docs", "wiki")]
    skills = [tool_skill(t) for t in tools] + [
        Skill(id="lib/search", name="search", description="Search the documents for words", body="x"),
        Skill(id="copy/search", name="search", description="Search the documents for words", body="x",
              path="/skills/copy/search/SKILL.md"),
        Skill(id="tz", name="timezones", description="Convert times between time zones", body="y")]
    assert [tool_server(m) for m in SkillIndex.build(skills, HashEncoder()).skills] == [
        "docs", "wiki", "lib", None, None]
    index = SkillIndex.build(skills, HashEncoder())
    hits = find_skills(index, ["search the documents for words"], 5)[0].hits
    ids = [h.id for h in hits]
    # both servers' tools are hits of their own; a library copy of the same name is still folded
    assert "docs/search" in ids and "wiki/search" in ids
    assert "copy/search" not in ids
    folded = {c for h in hits for c in h.copies}
    assert "copy/search" in folded and not {"docs/search", "wiki/search"} & folded


def test_tool_index_config_scores_every_task_token_and_keeps_a_choice():
    from skillsight_fast import IndexConfig
    from skillsight_fast.engine.state import Decisions
    from skillsight_fast.tools.catalog import tool_index_config

    # skill libraries keep Q'
    assert IndexConfig().settled(can_fit=False).scoring.lexical_evidence == "masked"
    assert tool_index_config().settled(can_fit=False).scoring.lexical_evidence == "all"
    assert tool_index_config(IndexConfig(lexical_evidence="masked")).scoring.lexical_evidence == "masked"
    assert tool_index_config(IndexConfig(int8=True)).encoder.int8
    d = Decisions.of_config(tool_index_config())
    assert Decisions.from_dict(d.to_dict()).lexical_evidence == "all"
    old = {k: v for k, v in d.to_dict().items() if k != "lexical_evidence"}  # a manifest from before
    assert Decisions.from_dict(old).lexical_evidence == "masked"
    with pytest.raises(ValueError, match="lexical_evidence"):
        IndexConfig(lexical_evidence="some")
