"""Tool retrieval for ``langgraph-bigtool`` (extra ``bigtool``).

``langgraph_bigtool.create_agent(llm, tool_registry, retrieve_tools_function=...)`` lets the agent
search a registry of LangChain tools; :func:`make_retrieve_tools` gives it a function that searches
a skillsight index of that registry (ids = the registry's keys), and :func:`registry_skills` turns
the registry into the skills to index.

Examples
--------
>>> from langgraph_bigtool import create_agent                                      # doctest: +SKIP
>>> from skillsight_fast import SkillIndex
>>> from skillsight_fast.integrations.bigtool import make_retrieve_tools, registry_skills
>>> index = SkillIndex.build(registry_skills(tool_registry))                      # doctest: +SKIP
>>> agent = create_agent(llm, tool_registry,
...                      retrieve_tools_function=make_retrieve_tools(index, k=3)).compile()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from skillsight_fast.engine.abstention import Abstention
from skillsight_fast.integrations import as_index, hits, require
from skillsight_fast.library.skills import Skill
from skillsight_fast.tools.catalog import DEFAULT_TOOL_TEXT, Tool, tool_body, tool_skill


def registry_skills(registry: Mapping[str, Any], text: str = DEFAULT_TOOL_TEXT) -> list[Skill]:
    """The skills of a ``{id: LangChain tool}`` registry, each with its registry key as id.

    The tool text is the one MCP tools get (:func:`~skillsight_fast.tools.catalog.tool_skill`): name,
    description and, by default, the whole argument schema.
    """
    require("langchain_core.tools", "bigtool")
    out = []
    for key, tool in registry.items():
        schema = tool.get_input_schema().model_json_schema() if hasattr(tool, "get_input_schema") else {}
        skill = tool_skill(Tool(server="registry", name=str(tool.name),
                                description=str(tool.description or ""), input_schema=schema), text)
        out.append(Skill(id=str(key), name=skill.name, description=skill.description,
                         body=tool_body(schema, text)))
    return out


def make_retrieve_tools(index: Any, k: int = 3, *, abstention: Abstention | None = None,
                        registry: Mapping[str, Any] | None = None,
                        **knobs: Any) -> Callable[[str], list[str]]:
    """A ``retrieve_tools(query) -> list of tool ids`` function for ``create_agent``.

    Parameters
    ----------
    index : SkillIndex or path
        Its ids must be the registry's keys (:func:`registry_skills` builds such skills).
    k : int
        Tools per query.
    abstention : Abstention, optional
        A rejected query gets no tools.
    registry : mapping, optional
        When given, ids that are not in it are dropped (an index built for a larger registry).
    **knobs
        Per-call search knobs passed to ``find_skills``.
    """
    index = as_index(index)
    keep = set(registry) if registry is not None else None

    def retrieve_tools(query: str) -> list[str]:
        """Retrieve the tools to use for a task, given a search query describing it."""
        return [h.id for h in hits(index, query, k, abstention, knobs) if keep is None or h.id in keep]

    return retrieve_tools
