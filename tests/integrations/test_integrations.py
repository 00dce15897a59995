"""The framework adapters against the installed libraries: LangChain, LlamaIndex, langgraph-bigtool."""

from __future__ import annotations

import pytest
from fakes import HashEncoder, toy_skills


@pytest.fixture(scope="module")
def index():
    from skillsight_fast import SkillIndex

    return SkillIndex.build(toy_skills(), HashEncoder())


def _expected(index, query, k=3):
    from skillsight_fast.agents.find import find_skills

    return find_skills(index, [query], k)[0].hits


def test_langchain_retriever(index):
    pytest.importorskip("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever

    from skillsight_fast.engine.abstention import Abstention
    from skillsight_fast.integrations.langchain_retriever import SkillsightRetriever

    retriever = SkillsightRetriever(index=index, k=3)
    assert isinstance(retriever, BaseRetriever)
    query = "merge and split pdf pages"
    docs = retriever.invoke(query)
    want = _expected(index, query)
    assert all(isinstance(d, Document) for d in docs)
    assert [d.id for d in docs] == [h.id for h in want] and docs[0].id == "pdf-tools"
    assert docs[0].metadata["score"] == want[0].score and docs[0].metadata["rank"] == 1
    assert "pdf" in docs[0].metadata["evidence"]
    assert docs[0].page_content.startswith("pdf-tools\n")
    with_body = SkillsightRetriever(index=index, k=1, include_body=True).invoke(query)[0]
    assert "extract tables" in with_body.page_content
    assert SkillsightRetriever(index=index, abstention=Abstention("cosine", 2.0)).invoke(query) == []


def test_llamaindex_retriever(index):
    pytest.importorskip("llama_index.core")
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import NodeWithScore

    from skillsight_fast.integrations.llamaindex_retriever import SkillsightRetriever

    retriever = SkillsightRetriever(index, k=3)
    assert isinstance(retriever, BaseRetriever)
    query = "docker container image deploy"
    nodes = retriever.retrieve(query)
    want = _expected(index, query)
    assert all(isinstance(n, NodeWithScore) for n in nodes)
    assert [n.node.id_ for n in nodes] == [h.id for h in want] and nodes[0].node.id_ == "docker-deploy"
    assert nodes[0].score == pytest.approx(want[0].score)
    assert nodes[0].node.metadata["evidence"] and nodes[0].node.get_content().startswith("docker-deploy")


def test_bigtool_agent_selects_the_retrieved_tools():
    pytest.importorskip("langgraph_bigtool")
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.tools import StructuredTool
    from langgraph_bigtool import create_agent

    from skillsight_fast import SkillIndex
    from skillsight_fast.integrations.bigtool import make_retrieve_tools, registry_skills

    def get_current_time(timezone: str) -> str:
        """Get the current time in a timezone (IANA name)."""
        return f"12:00 in {timezone}"

    def convert_currency(amount: float, source: str, target: str) -> float:
        """Convert an amount of money from one currency to another."""
        return amount

    def word_count(text: str) -> int:
        """Count the words of a text."""
        return len(text.split())

    registry = {f"tool_{i}": StructuredTool.from_function(f)
                for i, f in enumerate([get_current_time, convert_currency, word_count])}
    skills = registry_skills(registry)
    assert [s.id for s in skills] == list(registry) and "timezone" in skills[0].body
    index = SkillIndex.build(skills, HashEncoder())
    retrieve = make_retrieve_tools(index, k=1, registry=registry)
    assert retrieve("convert money between currency units") == ["tool_1"]

    class ToolCallingFake(FakeMessagesListChatModel):  # the only stand-in: no LLM runs offline
        def bind_tools(self, tools, **kwargs):
            return self

    llm = ToolCallingFake(responses=[
        AIMessage(content="", tool_calls=[{"name": "retrieve_tools", "id": "c1",
                                           "args": {"query": "what time is it in a timezone"}}]),
        AIMessage(content="done"),
    ])
    agent = create_agent(llm, registry, retrieve_tools_function=retrieve).compile()
    state = agent.invoke({"messages": [HumanMessage("What time is it in Tokyo?")]})
    assert state["selected_tool_ids"] == ["tool_0"]
    assert state["messages"][-1].content == "done"


def test_missing_framework_names_the_extra(monkeypatch):
    import sys

    from skillsight_fast.errors import SkillsightError
    from skillsight_fast.integrations import require

    monkeypatch.setitem(sys.modules, "llama_index.core.retrievers", None)  # as if not installed
    with pytest.raises(SkillsightError, match=r"\(the \[llamaindex\] extra\)|'\.\[llamaindex\]'"):
        require("llama_index.core.retrievers", "llamaindex")
