"""Client tool search with the OpenAI Agents SDK (``openai-agents``): its ``ToolSearchTool`` and
``function_tool(defer_loading=True)`` tools, its own ``Converter`` building the request, and a full
round through its ``OpenAIResponsesModel`` on a real ``AsyncOpenAI`` client over an
``httpx2.MockTransport`` that records the requests and plays back documented responses."""

from __future__ import annotations

import asyncio
import json

import pytest

pytestmark = pytest.mark.model


def _response(rid, output):
    return {"id": rid, "object": "response", "created_at": 1764000000, "status": "completed",
            "model": "gpt-5.4", "output": output, "parallel_tool_calls": True, "tool_choice": "auto",
            "tools": [], "error": None, "incomplete_details": None, "instructions": None, "metadata": {},
            "temperature": 1.0, "top_p": 1.0,
            "usage": {"input_tokens": 300, "output_tokens": 20, "total_tokens": 320,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}


def test_agents_sdk_round_with_client_tool_search(teacher):
    agents = pytest.importorskip("agents")
    openai = pytest.importorskip("openai")
    import httpx2
    from agents.models.interface import ModelTracing
    from agents.models.openai_responses import OpenAIResponsesModel

    from skillsight_fast.integrations.agent_apis.openai_agents import AgentsToolSearch

    @agents.function_tool(defer_loading=True)
    def get_weather(city: str) -> str:
        """Get the current weather for a city."""
        return f"Sunny in {city}"

    @agents.function_tool(defer_loading=True)
    def convert_currency(amount: float, source: str, target: str) -> float:
        """Convert an amount of money from one currency to another."""
        return amount

    @agents.function_tool
    def ask_user(question: str) -> str:
        """Ask the user a question."""
        return "yes"

    replies = [
        _response("resp_1", [{"type": "tool_search_call", "id": "tsc_1", "call_id": "call_ts1",
                              "execution": "client", "status": "completed",
                              "arguments": {"query": "weather forecast for a city"}}]),
        _response("resp_2", [{"type": "function_call", "id": "fc_1", "call_id": "call_f1",
                              "name": "get_weather",
                              "arguments": "{\"city\": \"Paris\"}", "status": "completed"}]),
    ]
    seen: list[dict] = []

    def handle(request):
        seen.append(json.loads(request.content))
        return httpx2.Response(200, json=replies[len(seen) - 1])

    client = openai.AsyncOpenAI(api_key="sk-test", max_retries=0,
                                http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handle)))
    model = OpenAIResponsesModel(model="gpt-5.4", openai_client=client)
    search = AgentsToolSearch(k=1, encoder=teacher, abstention=None)
    tools = search.tools([get_weather, convert_currency, ask_user])
    assert isinstance(tools[0], agents.ToolSearchTool) and tools[0].execution == "client"
    assert len(search.catalog.index) == 2  # the deferred two; ask_user stays loaded

    async def loop():
        items: list = [{"role": "user", "content": "What's the weather in Paris?"}]
        first = await model.get_response(None, items, agents.ModelSettings(), tools, None, [],
                                         ModelTracing.DISABLED)
        outputs = search.answer_response(first.output)
        items += [o.model_dump(exclude_none=True) for o in first.output] + outputs
        second = await model.get_response(None, items, agents.ModelSettings(), tools, None, [],
                                          ModelTracing.DISABLED)
        return outputs, second

    outputs, second = asyncio.run(loop())
    assert second.output[0].name == "get_weather"
    assert [t["name"] for t in outputs[0]["tools"]] == ["get_weather"]
    sent_first, sent_second = seen
    assert sent_first["tools"][0]["type"] == "tool_search" and sent_first["tools"][0]["execution"] == "client"
    assert {t["name"]: t.get("defer_loading") for t in sent_first["tools"][1:]} == {
        "get_weather": True, "convert_currency": True, "ask_user": None}
    answer = sent_second["input"][-1]
    assert answer["type"] == "tool_search_output" and answer["call_id"] == "call_ts1"
    assert answer["tools"][0]["name"] == "get_weather" and answer["tools"][0]["defer_loading"] is True


def test_agents_runner_leaves_client_tool_search_to_the_client():
    """Why the adapter answers the model's calls itself: the SDK's standard runner refuses them."""
    agents = pytest.importorskip("agents")
    import inspect

    from agents.run_internal import turn_resolution

    assert "Client-executed tool_search calls are not supported" in inspect.getsource(turn_resolution)
    assert "does not auto-execute client tool search calls" in (agents.ToolSearchTool.__doc__ or "")
