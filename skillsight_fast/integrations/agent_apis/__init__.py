"""Client-side tool search for the model APIs and agent SDKs (docs/AGENT_APIS.md).

The Claude Messages API and the OpenAI Responses API both let a client answer the model's tool
search: the developer sends every tool with ``defer_loading: true`` plus a search tool of their
own, and answers each search call with the tools that fit. These modules are that answer, from a
skillsight index of the developer's tools:

* :mod:`~.catalog`: :class:`~.catalog.ToolCatalog`, the shared part: tools in any of the shapes
  the SDKs use (plain dicts, the SDKs' typed params, MCP tools), one index per distinct list of
  tools (reused while the list is the same, rebuilt when it changes), the query a model writes
  turned into a search, and the one find use case
  (:func:`skillsight_fast.agents.find.find_skills`) deciding the hits and the abstention;
* :mod:`~.claude_api`: ``tool_reference`` blocks in a ``tool_result`` (extra ``anthropic``);
* :mod:`~.openai_api`: a client-executed ``tool_search`` answered by ``tool_search_output``
  (extra ``openai``);
* :mod:`~.openai_agents`: the same for the OpenAI Agents SDK's ``ToolSearchTool`` (extra
  ``openai-agents``);
* :mod:`~.claude_agent_sdk`: a ``UserPromptSubmit`` hook callback and an in-process SDK MCP server
  (extra ``claude-agent-sdk``).

Nothing here imports an SDK at module level; each adapter checks for its package where it is used.
"""
