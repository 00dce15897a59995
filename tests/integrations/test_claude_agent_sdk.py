"""The Claude Agent SDK adapters against the installed ``claude-agent-sdk``: the prompt-hook callback
answers exactly what ``skillsight hook claude-code`` prints for the same index and prompt, the SDK's
own types take it, and the in-process MCP server answers ``find_skills`` / ``search_tools`` over
the MCP SDK's in-memory client (the transport the Agent SDK connects it with)."""

from __future__ import annotations

import asyncio
import gzip
import json
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.model
REPO = Path(__file__).resolve().parents[2]
OFF_TOPIC = "What should I cook tonight with leftover rice, two eggs and some spinach?"


@pytest.fixture(scope="module")
def skill_index(tmp_path_factory, teacher):
    """(index folder, tasks): the gold skills of 8 SkillsBench tasks as SKILL.md folders, indexed."""
    from skillsight_fast import SkillIndex
    from skillsight_fast.library.skills import load_skills

    data = REPO / "data" / "skillsbench"
    with gzip.open(data / "corpus.jsonl.gz", "rt", encoding="utf-8") as fh:
        docs = {d["id"]: d for d in map(json.loads, fh)}
    with gzip.open(data / "queries.jsonl.gz", "rt", encoding="utf-8") as fh:
        tasks = [json.loads(line) for _, line in zip(range(8), fh)]
    root = tmp_path_factory.mktemp("sdk")
    for sid in sorted({g for t in tasks for g in t["gold"]}):
        doc = docs[sid]
        folder = root / "lib" / sid.split(":", 1)[1]
        folder.mkdir(parents=True)
        meta = yaml.safe_dump({"name": doc["name"], "description": doc["description"]}, width=1_000_000)
        (folder / "SKILL.md").write_text(f"---\n{meta}---\n{doc['body']}", encoding="utf-8")
    index = SkillIndex.build(load_skills([root / "lib"]).skills, teacher)
    index.save(root / "idx")
    return root / "idx", [t["text"] for t in tasks]


def _payload(prompt):
    return {"session_id": "s1", "transcript_path": "/tmp/t.jsonl", "cwd": "/tmp",
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit", "prompt": prompt}


def test_prompt_hook_answers_as_the_command_line_hook(skill_index):
    sdk = pytest.importorskip("claude_agent_sdk")
    from skillsight_fast.agents.hook import answer_prompt
    from skillsight_fast.integrations.agent_apis.claude_agent_sdk import prompt_hook

    folder, tasks = skill_index
    hook = prompt_hook(folder, k=3, budget=120)  # a shared CI machine; the default is 5 s
    sdk.HookMatcher(hooks=[hook])  # the SDK's own container takes it
    answered = 0
    for prompt in [*tasks, OFF_TOPIC]:
        got = asyncio.run(hook(_payload(prompt), None, {"signal": None}))
        line = answer_prompt(str(folder), json.dumps(_payload(prompt)), k=3, budget=120, server_timeout=0)
        assert got == (json.loads(line) if line else {}), prompt
        if got:  # the SDK's TypedDicts (typing.TypedDict: pydantic cannot validate them on 3.11)
            assert set(got) <= set(sdk.types.SyncHookJSONOutput.__annotations__)
            specific = sdk.types.UserPromptSubmitHookSpecificOutput
            hook_output = got["hookSpecificOutput"]
            assert specific.__required_keys__ <= set(hook_output) <= set(specific.__annotations__)
            assert hook_output["additionalContext"].startswith("Skills from the local skill library")
            answered += 1
    assert answered >= len(tasks) // 2
    assert asyncio.run(hook(_payload(OFF_TOPIC), None, {"signal": None})) == {}


def test_prompt_hook_never_raises(skill_index):
    from skillsight_fast.integrations.agent_apis.claude_agent_sdk import prompt_hook

    folder, _ = skill_index
    hook = prompt_hook(folder, budget=1e-6)
    for bad in [None, "text", {"hook_event_name": "Stop", "prompt": "x"}, {"prompt": 7}, {"prompt": "  "},
                _payload("\ud800 merge two PDF files"), _payload("x" * 1_000_000), _payload("merge PDFs")]:
        assert asyncio.run(hook(bad, None, None)) == {}


def test_sdk_mcp_server_finds_skills_and_tools(skill_index, teacher, tmp_path):
    sdk = pytest.importorskip("claude_agent_sdk")
    mcp = pytest.importorskip("mcp")
    from skillsight_fast import SkillIndex
    from skillsight_fast.integrations.agent_apis.claude_agent_sdk import skillsight_server
    from skillsight_fast.tools.catalog import Tool, tool_index_config, tool_skill

    folder, tasks = skill_index
    tools = [Tool("time", "get_current_time", "Get the current time in a timezone (IANA name).",
                  input_schema={"type": "object", "properties": {"timezone": {"type": "string"}}}),
             Tool("time", "convert_time", "Convert a time between two timezones."),
             Tool("git", "git_status", "Show the working tree status of a git repository."),
             Tool("git", "git_commit", "Record changes to the repository with a message.")]
    tool_index = SkillIndex.build([tool_skill(t) for t in tools], teacher, tool_index_config())
    config = skillsight_server(skills=folder, tools=tool_index)
    options = sdk.ClaudeAgentOptions(mcp_servers={"skillsight": config},
                                      allowed_tools=["mcp__skillsight__find_skills"])
    assert options.mcp_servers["skillsight"]["type"] == "sdk"

    async def session():
        async with mcp.Client(config["instance"]) as client:
            listed = await client.list_tools()
            skills = await client.call_tool("find_skills", {"task": tasks[0], "k": 2})
            found = await client.call_tool("search_tools", {"task": "what time is it in Tokyo?", "k": 2})
            bad = await client.call_tool("find_skills", {"task": "   "})
            return listed, skills, found, bad

    listed, skills, found, bad = asyncio.run(session())
    assert sorted(t.name for t in listed.tools) == ["find_skills", "search_tools"]
    answer = json.loads(skills.content[0].text)
    assert answer["hits"] and answer["hits"][0]["uri"].startswith("skill://")
    tools_found = json.loads(found.content[0].text)["hits"]
    assert tools_found and {h["id"] for h in tools_found} <= {"time/get_current_time", "time/convert_time"}
    assert bad.is_error and "empty query" in bad.content[0].text


def test_a_loaded_index_keeps_the_rule_it_derived(skill_index):
    """An index object given to the server (not a folder) is searched with its own derived rule."""
    from skillsight_fast import SkillIndex
    from skillsight_fast.engine.abstention import Abstention
    from skillsight_fast.integrations.agent_apis.claude_agent_sdk import _load

    loaded = SkillIndex.load(skill_index[0])
    assert loaded.state.abstention is not None
    _, rule = _load(loaded)
    assert rule is not None and rule.to_dict() == Abstention.of_rule(loaded.state.abstention).to_dict()
