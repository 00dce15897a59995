"""The Claude Agent SDK (Python): the prompt hook as a callback, and an in-process MCP server
(extra ``claude-agent-sdk``).

* :func:`prompt_hook`: a ``UserPromptSubmit`` hook callback that adds the skills fitting the
  prompt to the agent's context, exactly as ``skillsight hook claude-code`` does (the same search:
  the index's abstention rule cut per hit; the same text: every field bounded and each line passed
  through the injection screen, :func:`skillsight_fast.agents.hook.format_context`; nothing when
  no skill fits). It never raises and never blocks the prompt: any error, or a search past its
  time budget, adds nothing.
* :func:`skillsight_server`: ``create_sdk_mcp_server`` with ``find_skills`` (a skill index) and
  ``search_tools`` (a tool-catalogue index, ``skillsight index --mcp``/``--openapi``), run in the
  application's own process.

Examples
--------
>>> from claude_agent_sdk import ClaudeAgentOptions, HookMatcher, query           # doctest: +SKIP
>>> from skillsight_fast.integrations.agent_apis.claude_agent_sdk import prompt_hook, skillsight_server
>>> options = ClaudeAgentOptions(
...     hooks={"UserPromptSubmit": [HookMatcher(hooks=[prompt_hook("~/.skillsight/index")])]},
...     mcp_servers={"skillsight": skillsight_server(skills="~/.skillsight/index")},
...     allowed_tools=["mcp__skillsight__find_skills"])                            # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from skillsight_fast.agents.find import find_skills
from skillsight_fast.agents.hook import EVENT, MAX_PROMPT_CHARS, format_context
from skillsight_fast.agents.live import skill_uri
from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import SkillsightError
from skillsight_fast.integrations import as_index, require

logger = logging.getLogger(__name__)

#: Most hits one ``find_skills`` / ``search_tools`` call of the SDK server returns.
MAX_K = 20


def _load(index: Any) -> tuple[Any, Abstention | None]:
    """A loaded index and the rule its hook applies: for a folder, the index's ``calibration.json``
    or the rule derived at build (:func:`~skillsight_fast.engine.abstention.resolve_abstention`, as
    the command-line hook); for a loaded index, the derived rule."""
    from skillsight_fast.engine.abstention import resolve_abstention

    if isinstance(index, (str, Path)):
        folder = os.path.expanduser(str(index))
        return as_index(folder), resolve_abstention(folder)
    loaded = as_index(index)
    return loaded, Abstention.of_rule(loaded.state.abstention)


def prompt_answer(index: Any, prompt: str, k: int, rule: Abstention | None,
                  lock: threading.Lock | None = None) -> dict[str, Any]:
    """The hook's answer for one prompt: :func:`find_skills` cut per hit, with each hit's
    ``skill://`` URI (what ``skillsight hook`` gets from its in-process search)."""
    answer = find_skills(index, [prompt], k, abstention=rule, cut="hit", lock=lock)[0]
    out = answer.to_dict(digits=4)
    for hit in out["hits"]:
        hit["uri"] = skill_uri(hit["id"])
    return out


def prompt_hook(index: Any, *, k: int = 3, budget: float = 5.0,
                abstention: Abstention | None | str = "index") -> Callable[..., Awaitable[dict[str, Any]]]:
    """A ``UserPromptSubmit`` hook callback for ``HookMatcher(hooks=[...])``.

    Parameters
    ----------
    index : SkillIndex or path
        Loaded once, here.
    k : int
        Most skills added (1..20).
    budget : float
        Seconds one prompt's search may take; past it the hook adds nothing. The index runs its
        NumPy stages (as the command-line hook's in-process search) and the encoder is loaded
        here, so the first prompt pays no compile or load.
    abstention : Abstention, ``"index"`` or None
        ``"index"``: the rule the command-line hook applies (see :func:`_load`); None: always the
        ``k`` best.

    Returns
    -------
    callable
        ``async (input_data, tool_use_id, context) -> dict``: ``{"hookSpecificOutput":
        {"hookEventName": "UserPromptSubmit", "additionalContext": ...}}``, or ``{}``.
    """
    loaded, rule = _load(index)
    if abstention != "index":
        rule = abstention if isinstance(abstention, Abstention) or abstention is None else rule
    k = max(1, min(int(k), 20))
    lock = threading.Lock()
    # as the command-line hook: the NumPy stages (no Numba compile inside a prompt's budget), and
    # the encoder loaded now rather than in the first prompt's
    loaded.engine = "numpy"
    find_skills(loaded, ["warm up"], 1, abstention=None, collapse=False)

    async def skillsight_prompt_hook(input_data: Any, tool_use_id: Any = None,
                                     context: Any = None) -> dict[str, Any]:
        try:
            if not isinstance(input_data, dict) or input_data.get("hook_event_name", EVENT) != EVENT:
                return {}
            prompt = input_data.get("prompt")
            if not isinstance(prompt, str) or not prompt.strip():
                return {}
            text = prompt.strip()[:MAX_PROMPT_CHARS]
            answer = await asyncio.wait_for(asyncio.to_thread(prompt_answer, loaded, text, k, rule, lock),
                                            budget)
            added = format_context(answer)
        except Exception as exc:  # noqa: BLE001 - a hook must never break its host
            logger.info("skillsight prompt hook: no answer (%s: %s)", type(exc).__name__, exc)
            return {}
        if not added:
            return {}
        return {"hookSpecificOutput": {"hookEventName": EVENT, "additionalContext": added}}

    return skillsight_prompt_hook


def _text(obj: Any) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": json.dumps(obj, ensure_ascii=False)}]}


def _error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "is_error": True}


def skillsight_server(*, skills: Any = None, tools: Any = None, name: str = "skillsight") -> Any:
    """An in-process SDK MCP server (``create_sdk_mcp_server``) for ``ClaudeAgentOptions.mcp_servers``.

    Parameters
    ----------
    skills : SkillIndex or path, optional
        A skill index: the server has ``find_skills(task, k)`` (the skills that fit, best first, with
        their ``skill://`` URIs and paths; none when no skill fits).
    tools : SkillIndex or path, optional
        A tool-catalogue index (ids ``server/tool``): the server has ``search_tools(task, k)`` (the
        tools that fit, cut per hit, two servers' tools never folded together, as the proxy).
    name : str
        The server's name.

    Raises
    ------
    SkillsightError
        Neither index given, or the SDK is not installed.
    """
    sdk = require("claude_agent_sdk", "claude-agent-sdk")
    if skills is None and tools is None:
        raise SkillsightError("skillsight_server needs a skill index (skills=) or a tool index (tools=)")
    lock = threading.Lock()
    defs = []
    schema = {"type": "object", "properties": {
        "task": {"type": "string", "description": "The task, in the user's words."},
        "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "description": "Most results (default 5)."}},
        "required": ["task"]}

    def run(index: Any, rule: Abstention | None, task: Any, k: Any, as_tools: bool) -> dict[str, Any]:
        kk = k if isinstance(k, int) and not isinstance(k, bool) else 5
        answer = find_skills(index, [task], max(1, min(kk, MAX_K)), abstention=rule, lock=lock,
                             cut="hit", collapse=not as_tools)[0]
        out = answer.to_dict(digits=4)
        if not as_tools:
            for hit in out["hits"]:
                hit["uri"] = skill_uri(hit["id"])
        return out

    def tool(tool_name: str, description: str, source: Any, as_tools: bool) -> Any:
        index, rule = _load(source)

        async def answer(args: dict[str, Any]) -> dict[str, Any]:
            try:
                found = await asyncio.to_thread(run, index, rule, args.get("task"), args.get("k"), as_tools)
                return _text(found)
            except SkillsightError as exc:
                return _error(str(exc))

        return sdk.tool(tool_name, description, schema)(answer)

    if skills is not None:
        defs.append(tool("find_skills", "Find the agent skills that fit a task, best first; an empty list "
                         "means no skill fits. Read a skill's SKILL.md (its path or skill:// URI) before "
                         "following it.", skills, False))
    if tools is not None:
        defs.append(tool("search_tools", "Search a catalogue of tools (MCP servers, APIs) for the ones that "
                         "fit a task, best first; an empty list means none fits.", tools, True))
    return sdk.create_sdk_mcp_server(name=name, tools=defs)
