"""Client-side tool search for the OpenAI Responses API (extra ``openai``).

A Responses request may hold a ``{"type": "tool_search", "execution": "client"}`` tool next to
function tools, namespaces and MCP servers marked ``defer_loading: true``. The model then emits a
``tool_search_call`` item with the arguments of the tool's ``parameters``; the client answers
with a ``tool_search_output`` item (same ``call_id``) whose ``tools`` are the definitions it
loads. This module is that client, answering from a skillsight index of the deferred tools.

What is searched, and what an answer holds for a hit:

* a function tool: the function's definition;
* a function inside a namespace: the namespace with the functions of it that fit (in rank order;
  the namespace sits where its best function ranks);
* an MCP server (``type: "mcp"``): searched by its label and ``server_description``; a hit loads
  the server's definition.

Examples
--------
>>> from openai import OpenAI                                                     # doctest: +SKIP
>>> from skillsight_fast.integrations.agent_apis.openai_api import OpenAIToolSearch
>>> search = OpenAIToolSearch(k=5)
>>> tools = search.tools(my_functions)       # deferred, plus the client tool_search   # doctest: +SKIP
>>> items = [{"role": "user", "content": "What's the weather in Paris?"}]
>>> response = client.responses.create(model=MODEL, input=items, tools=tools)   # doctest: +SKIP
>>> items += [o.model_dump(exclude_none=True) for o in response.output]          # doctest: +SKIP
>>> items += search.answer_response(response)                                    # doctest: +SKIP
>>> response = client.responses.create(model=MODEL, input=items, tools=tools)   # doctest: +SKIP
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.errors import QueryError, SkillsightError
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

#: The fields of a Responses function tool; others an MCP tool carries (``inputSchema``, ``title``,
#: ``annotations``, ...) are not sent, its ``inputSchema`` becomes ``parameters``.
FUNCTION_KEYS = frozenset({"type", "name", "description", "parameters", "strict", "defer_loading",
                           "allowed_callers", "output_schema"})
#: Tool types searched (and deferred); any other tool is passed through as given.
SEARCHED_TYPES = ("function", "namespace", "mcp")



def _arguments(call: Any) -> Mapping[str, Any]:
    """The arguments of a ``tool_search_call`` (an object, or its JSON text)."""
    args = field_of(call, "arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            raise QueryError("the tool search arguments are not JSON") from None
    if not isinstance(args, Mapping):
        raise QueryError("the tool search arguments must be an object with a 'query'")
    return args


def _function(fields: Mapping[str, Any]) -> dict[str, Any]:
    """A function tool's definition as the Responses API takes it, deferred."""
    out = {k: v for k, v in fields.items() if k in FUNCTION_KEYS}
    if "parameters" not in out and schema_of(fields):
        out["parameters"] = schema_of(fields)
    out["defer_loading"] = True
    return out


class OpenAIToolSearch(ClientToolSearch):
    """The client-executed ``tool_search`` of a Responses API request.

    Parameters
    ----------
    k : int
        Most tools (functions or MCP servers) one search loads.
    keep_loaded : sequence of str
        Function names, namespace names or MCP server labels sent without ``defer_loading``
        (always loaded, never searched).
    encoder, config, tool_text, abstention
        See :class:`~skillsight_fast.integrations.agent_apis.catalog.ToolCatalog`.
    catalog : ToolCatalog, optional
        A catalogue to search instead of a new one (then ``k`` and the settings above are its own):
        two adapters given one catalogue and the same tools share one index.
    """

    def __init__(self, k: int = 5, *, keep_loaded: Sequence[str] = (), encoder: Any = None,
                 config: Any = None, tool_text: str = DEFAULT_TOOL_TEXT,
                 abstention: Abstention | str | None = "index", catalog: ToolCatalog | None = None) -> None:
        super().__init__(k, keep_loaded=keep_loaded, encoder=encoder, config=config, tool_text=tool_text,
                         abstention=abstention, catalog=catalog)

    def definition(self) -> dict[str, Any]:
        """The ``tool_search`` tool executed by this client (a ``ToolSearchToolParam``)."""
        return {"type": "tool_search", "execution": "client", "description": SEARCH_DESCRIPTION,
                "parameters": QUERY_SCHEMA}

    def tools(self, tools: Iterable[Any]) -> list[dict[str, Any]]:
        """The request's ``tools``: the client ``tool_search``, then each tool, deferred.

        Function tools (``type: "function"``; the SDK's params, dicts, or objects with ``name``,
        ``description`` and ``parameters``), the functions of each namespace, and MCP servers get
        ``defer_loading: true`` and are indexed now (the same tools as the last request reuse its
        index). Other tools (web search, code interpreter, ...) and ``keep_loaded`` are passed
        through as given.

        Raises
        ------
        SkillFormatError
            A tool without a name, two tools of one name, or nothing to defer.
        """
        out: list[dict[str, Any]] = [self.definition()]
        entries: list[Entry] = []
        for raw in tools:
            fields = dict(as_mapping(raw))
            kind = fields.setdefault("type", "function")
            label = fields.get("server_label") if kind == "mcp" else fields.get("name")
            if kind == "tool_search":
                raise SkillsightError("the request already has a tool_search tool: leave it out")
            if kind not in SEARCHED_TYPES or label in self.keep_loaded:
                out.append(fields)
                continue
            if kind == "function":  # indexed as listed (an MCP tool's title too), sent as the API takes it
                definition = _function(fields)
                entries.append(make_entry(fields, ("function", definition)))
                fields = definition
            elif kind == "mcp":
                fields["defer_loading"] = True
                desc = fields.get("server_description") or ""
                entries.append(make_entry({"name": label, "description": desc}, ("mcp", fields),
                                          group="mcp"))
            else:  # a namespace: each function of it is searched, and deferred
                members = [dict(as_mapping(t)) for t in fields.get("tools") or []]
                for i, m in enumerate(members):
                    if m.setdefault("type", "function") == "function":
                        members[i] = _function(m)
                        entries.append(make_entry(m, ("namespace", fields, members[i]), group=f"ns:{label}"))
                fields["tools"] = members
            out.append(fields)
        self.toolset = self.catalog.use(entries)
        return out

    def loaded(self, query: Any) -> list[dict[str, Any]]:
        """The tool definitions one search loads (see the module docstring), best first."""
        out: list[dict[str, Any]] = []
        namespaces: dict[int, dict[str, Any]] = {}
        for e in self._tools().search(query):
            kind = e.definition[0]
            if kind != "namespace":
                out.append(e.definition[1])
                continue
            ns, member = e.definition[1], e.definition[2]
            if id(ns) not in namespaces:
                namespaces[id(ns)] = {**ns, "tools": []}
                out.append(namespaces[id(ns)])
            namespaces[id(ns)]["tools"].append(member)
        return out

    def answer(self, call: Any) -> dict[str, Any]:
        """The ``tool_search_output`` item answering one ``tool_search_call`` (the SDK's
        ``ResponseToolSearchCall`` or its dict). No fitting tool, or a bad query, loads nothing."""
        call_id = field_of(call, "call_id") or field_of(call, "id")
        try:
            tools = self.loaded(_arguments(call).get("query"))
        except SkillsightError:
            tools = []
        return {"type": "tool_search_output", "call_id": call_id, "execution": "client",
                "status": "completed", "tools": tools}

    def answer_response(self, response: Any) -> list[dict[str, Any]]:
        """The ``tool_search_output`` items for every client ``tool_search_call`` of a response
        (the SDK's ``Response``, its dict, or a list of output items), in order."""
        items = response if isinstance(response, list) else field_of(response, "output")
        return [self.answer(item) for item in items or []
                if field_of(item, "type") == "tool_search_call" and field_of(item, "execution") != "server"]
