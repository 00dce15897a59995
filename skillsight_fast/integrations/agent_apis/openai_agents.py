"""Client tool search for the OpenAI Agents SDK (extra ``openai-agents``).

The Agents SDK exposes the Responses API's tool search as ``ToolSearchTool``; with
``execution="client"`` the model's ``tool_search_call`` is the client's to answer, and the SDK's
standard ``Runner`` does not do it (it raises ``ModelBehaviorError``: "Handle the tool_search_call
yourself and return a matching tool_search_output item"). :class:`AgentsToolSearch` is that answer
for a loop that calls the SDK's model directly (``OpenAIResponsesModel.get_response``): it gives the
``ToolSearchTool`` to add next to the agent's deferred tools (``function_tool(...,
defer_loading=True)``, namespaces, hosted MCP servers), indexes those tools as the SDK sends them
(its own ``Converter``), and answers each ``tool_search_call`` of a ``ModelResponse``.

Examples
--------
>>> from agents import ModelSettings, function_tool                               # doctest: +SKIP
>>> from agents.models.interface import ModelTracing                              # doctest: +SKIP
>>> search = AgentsToolSearch(k=5)
>>> tools = search.tools(my_function_tools)  # ToolSearchTool first; indexed now  # doctest: +SKIP
>>> items = [{"role": "user", "content": "What's the weather in Paris?"}]
>>> reply = await model.get_response(None, items, ModelSettings(), tools, None, [],
...                                  ModelTracing.DISABLED)                       # doctest: +SKIP
>>> items += ([o.model_dump(exclude_none=True) for o in reply.output]
...           + search.answer_response(reply))                                       # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.integrations import require
from skillsight_fast.integrations.agent_apis.catalog import QUERY_SCHEMA, SEARCH_DESCRIPTION, ToolCatalog
from skillsight_fast.integrations.agent_apis.openai_api import OpenAIToolSearch
from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT


class AgentsToolSearch:
    """Client tool search for the Agents SDK's tools (see the module docstring).

    Parameters
    ----------
    k, encoder, config, tool_text, abstention, catalog
        See :class:`~skillsight_fast.integrations.agent_apis.openai_api.OpenAIToolSearch`.
    """

    def __init__(self, k: int = 5, *, encoder: Any = None, config: Any = None,
                 tool_text: str = DEFAULT_TOOL_TEXT, abstention: Abstention | str | None = "index",
                 catalog: ToolCatalog | None = None) -> None:
        self.responses = OpenAIToolSearch(k, encoder=encoder, config=config, tool_text=tool_text,
                                          abstention=abstention, catalog=catalog)

    @property
    def catalog(self) -> ToolCatalog:
        """The catalogue searched."""
        return self.responses.catalog

    def tool_search_tool(self) -> Any:
        """The SDK's ``ToolSearchTool``, executed by this client."""
        agents = require("agents", "openai-agents")
        return agents.ToolSearchTool(description=SEARCH_DESCRIPTION, execution="client",
                                     parameters=QUERY_SCHEMA)

    def tools(self, tools: Iterable[Any]) -> list[Any]:
        """``[ToolSearchTool, *tools]`` for the model call; the deferred ones among ``tools`` are
        indexed as the SDK's ``Converter`` turns them into Responses tools (a namespace's
        functions, hosted MCP servers, function tools with ``defer_loading=True``).

        Raises
        ------
        SkillFormatError
            No deferred tool to search.
        """
        require("agents", "openai-agents")
        from agents.models.openai_responses import Converter

        out = [self.tool_search_tool(), *tools]
        converted = Converter.convert_tools(out, handoffs=[]).tools
        deferred = []
        for t in converted:
            if t.get("type") == "namespace":
                members = [m for m in t.get("tools", []) if m.get("defer_loading")]
                if members:
                    deferred.append({**t, "tools": members})
            elif t.get("type") in ("function", "mcp") and t.get("defer_loading"):
                deferred.append(t)
        self.responses.tools(deferred)
        return out

    def answer(self, call: Any) -> dict[str, Any]:
        """The ``tool_search_output`` item for one ``tool_search_call`` (the raw item, its dict, or
        the SDK's ``ToolSearchCallItem``)."""
        raw = getattr(call, "raw_item", call)
        return self.responses.answer(raw)

    def answer_response(self, response: Any) -> list[dict[str, Any]]:
        """The ``tool_search_output`` items for every client ``tool_search_call`` of a
        ``ModelResponse`` (its ``output``) or a list of output items."""
        return self.responses.answer_response(response)
