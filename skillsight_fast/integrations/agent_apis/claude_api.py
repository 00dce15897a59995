"""Client-side tool search for the Claude Messages API (extra ``anthropic``).

The Messages API loads a tool marked ``defer_loading: true`` only when a tool search returns it.
The search may be the developer's own tool: the model calls it (a ``tool_use`` block) and the
client answers with a ``tool_result`` whose content is ``{"type": "tool_reference", "tool_name":
...}`` blocks; the API then expands each reference into that tool's definition. This module is
that search tool, answered from a skillsight index of the request's tools.

Examples
--------
>>> import anthropic                                                             # doctest: +SKIP
>>> from skillsight_fast.integrations.agent_apis.claude_api import ClaudeToolSearch
>>> search = ClaudeToolSearch(k=5)
>>> tools = search.tools(my_tools)           # every tool deferred, plus the search tool  # doctest: +SKIP
>>> messages = [{"role": "user", "content": "What's the weather in Paris?"}]
>>> reply = client.messages.create(model=MODEL, max_tokens=1024, tools=tools,
...                                messages=messages)                            # doctest: +SKIP
>>> results = search.answer_message(reply)   # one tool_result per search call   # doctest: +SKIP
>>> messages += [{"role": "assistant", "content": reply.content},
...              {"role": "user", "content": results}]                           # doctest: +SKIP
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import SkillsightError
from skillsight_fast.integrations.agent_apis.catalog import (
    QUERY_SCHEMA,
    SEARCH_DESCRIPTION,
    ClientToolSearch,
    Entry,
    ToolCatalog,
    as_mapping,
    field_of,
    make_entry,
    schema_of,
)
from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT

logger = logging.getLogger(__name__)

#: The search tool's default name.
SEARCH_TOOL_NAME = "search_tools"
#: The fields of a Messages API custom tool (``ToolParam``); others an MCP tool carries
#: (``inputSchema``, ``title``, ``annotations``, ``_meta``, ...) are not sent.
TOOL_PARAM_KEYS = frozenset({"name", "description", "input_schema", "type", "cache_control", "defer_loading",
                             "strict", "input_examples", "allowed_callers", "eager_input_streaming"})
#: The text of a search result with no tool (the API expects content in a tool_result).
NOTHING_FITS = ("No tool fits this search. Continue without one, or search again describing the task "
                "differently.")



class ClaudeToolSearch(ClientToolSearch):
    """The client-side search tool of a Messages API request.

    Parameters
    ----------
    k : int
        Most tools one search returns.
    name : str
        The search tool's name in ``tools`` and in the model's ``tool_use`` blocks.
    keep_loaded : sequence of str
        Tools sent without ``defer_loading`` (always in the model's context, never searched).
    encoder, config, tool_text, abstention
        See :class:`~skillsight_fast.integrations.agent_apis.catalog.ToolCatalog`.
    catalog : ToolCatalog, optional
        A catalogue to search instead of a new one (then ``k`` and the settings above are its own):
        two adapters given one catalogue and the same tools share one index.
    """

    def __init__(self, k: int = 5, *, name: str = SEARCH_TOOL_NAME, keep_loaded: Sequence[str] = (),
                 encoder: Any = None, config: Any = None, tool_text: str = DEFAULT_TOOL_TEXT,
                 abstention: Abstention | str | None = "index", catalog: ToolCatalog | None = None) -> None:
        super().__init__(k, keep_loaded=keep_loaded, encoder=encoder, config=config, tool_text=tool_text,
                         abstention=abstention, catalog=catalog)
        self.name = name

    def definition(self) -> dict[str, Any]:
        """The search tool, as a ``ToolParam`` for ``tools`` (never deferred)."""
        return {"name": self.name, "description": SEARCH_DESCRIPTION, "input_schema": QUERY_SCHEMA}

    def tools(self, tools: Iterable[Any]) -> list[dict[str, Any]]:
        """The ``tools`` of the request: the search tool, then each tool with ``defer_loading: true``.

        ``tools`` may hold ``ToolParam`` dicts (``name``, ``description``, ``input_schema``), MCP
        ``Tool`` objects or dicts (``inputSchema``), or anything with those attributes. Anthropic's
        own tools (a ``type`` other than ``custom``: web search, code execution, ...) and the
        names in ``keep_loaded`` are passed through as given and not searched. The searched tools
        are indexed now: the same tools as the last request reuse its index.

        Raises
        ------
        SkillFormatError
            A tool without a name, two tools of one name, or no tool to defer.
        """
        out: list[dict[str, Any]] = [self.definition()]
        entries: list[Entry] = []
        for raw in tools:
            fields = as_mapping(raw)
            kind = fields.get("type")
            if kind not in (None, "custom") or fields.get("name") in self.keep_loaded:
                out.append(dict(fields))
                continue
            if fields.get("name") == self.name:
                raise SkillsightError(f"a tool is named {self.name!r}, the search tool's name: "
                                      "give the search tool another name")
            definition = {k: v for k, v in fields.items() if k in TOOL_PARAM_KEYS}
            definition["input_schema"] = schema_of(fields) or {"type": "object", "properties": {}}
            if isinstance(fields.get("title"), str) and "description" not in definition:
                definition["description"] = fields["title"]
            definition["defer_loading"] = True
            entries.append(make_entry(fields, definition))
            out.append(definition)
        self.toolset = self.catalog.use(entries)
        return out

    def references(self, query: Any) -> list[dict[str, Any]]:
        """The ``tool_reference`` blocks of the tools that fit ``query``, best first (none: [])."""
        return [{"type": "tool_reference", "tool_name": e.tool.name} for e in self._tools().search(query)]

    def answer(self, tool_use: Any) -> dict[str, Any]:
        """The ``tool_result`` block answering one ``tool_use`` of the search tool.

        ``tool_use`` is the SDK's ``ToolUseBlock`` or its dict. The content is the
        ``tool_reference`` blocks of the tools that fit, or one text block saying none does; a bad
        query gets an ``is_error`` result saying why (the model can try again).
        """
        tool_use_id = field_of(tool_use, "id")
        args = field_of(tool_use, "input")
        query = args.get("query") if isinstance(args, Mapping) else None
        try:
            refs = self.references(query)
        except SkillsightError as exc:
            return {"type": "tool_result", "tool_use_id": tool_use_id, "is_error": True,
                    "content": [{"type": "text", "text": f"tool search failed: {exc}"}]}
        content = refs or [{"type": "text", "text": NOTHING_FITS}]
        return {"type": "tool_result", "tool_use_id": tool_use_id, "content": content}

    def answer_message(self, message: Any) -> list[dict[str, Any]]:
        """The ``tool_result`` blocks for every call of the search tool in an assistant message
        (the SDK's ``Message``, its dict, or a list of content blocks), in order."""
        blocks = field_of(message, "content") if not isinstance(message, list) else message
        return [self.answer(b) for b in blocks or []
                if field_of(b, "type") == "tool_use" and field_of(b, "name") == self.name]
