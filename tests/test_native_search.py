"""Provider-native deferred loading with toolrag as the searcher, through the official SDK clients against a local
server answering recorded payloads: Anthropic's `defer_loading` + `tool_reference`, OpenAI Responses' client
`tool_search`, Gemini Interactions' client `tool_search`. The tool list is the same on every turn; hidden tools are
never listed, referenced or run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import MessageParam, ToolResultBlockParam, ToolUnionParam
from google import genai
from google.genai import interactions as gemini_types
from openai.types.responses import ResponseInputItemParam, ToolParam
from pydantic import TypeAdapter

from toolrag import ToolRegistry
from toolrag.errors import ToolragError
from toolrag.inject.told import NO_TOOL_AVAILABLE
from toolrag.runtime import Agent, ListSink, ScriptedModel, SecurityEvent
from toolrag.runtime.native import DeferredTools
from toolrag.runtime.providers import AnthropicModel, GeminiInteractionsModel, OpenAIChatModel, OpenAIResponsesModel

from .conftest import RETRIEVAL, CountingEmbedder, Recorder
from .test_providers import RESPONSES_ANSWER, anthropic_message, response
from .test_runtime import BILLING, SEEN, TOOLS, USER

REFUND = {"payment_id": "pay_7"}


@pytest.fixture
def registry(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    reg = ToolRegistry(tmp_path / "native.db", embedder, RETRIEVAL)
    reg.register(*TOOLS)
    return reg


def tool_use(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return anthropic_message([{"type": "tool_use", "id": call_id, "name": name, "input": arguments}], "tool_use")


def assert_same_prefix(bodies: list[dict[str, Any]], *keys: str) -> None:
    """The condition for prompt caching: system and tools byte-identical on every turn."""
    prefixes = {json.dumps([body.get(key) for key in keys], sort_keys=True) for body in bodies}
    assert len(prefixes) == 1


def test_anthropic_loads_what_toolrag_finds(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [
        tool_use("toolu_1", "search_tools", {"query": "refund a payment to the customer's card"}),
        tool_use("toolu_2", "billing__refund", REFUND),
        anthropic_message([{"type": "text", "text": "Refunded pay_7."}], "end_turn"),
    ]
    client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
    agent = Agent(registry, AnthropicModel(client, "claude-test-model"), BILLING, mode="native", system="Be brief.")
    result = agent.run("Refund payment pay_7")
    assert result.text == "Refunded pay_7." and result.tools_called == ["search_tools", "billing.refund"]
    assert SEEN["refunded"] == "pay_7"
    bodies = [body for _, body, _ in recorder.requests]
    assert_same_prefix(bodies, "system", "tools")
    tools = bodies[0]["tools"]
    TypeAdapter(list[ToolUnionParam]).validate_python(tools)
    assert tools[0]["name"] == "search_tools" and "defer_loading" not in tools[0]
    assert all(t["defer_loading"] is True for t in tools[1:]) and "billing__refund" in {t["name"] for t in tools}
    messages = bodies[1]["messages"]
    TypeAdapter(list[MessageParam]).validate_python(messages)
    (answer,) = messages[-1]["content"]
    assert answer["tool_use_id"] == "toolu_1"
    assert {"type": "tool_reference", "tool_name": "billing__refund"} in answer["content"]


def test_anthropic_never_references_a_hidden_tool(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [
        tool_use("toolu_1", "search_tools", {"query": "refund a payment to the customer's card"}),
        tool_use("toolu_2", "search_tools", {"query": "compose a sonnet about autumn leaves"}),
        tool_use("toolu_3", "billing__refund", REFUND),  # a model guessing the name of a tool it was never given
        anthropic_message([{"type": "text", "text": "I cannot refund payments."}], "end_turn"),
    ]
    client = anthropic.Anthropic(base_url=url, api_key="test", max_retries=0)
    events = ListSink()
    model = AnthropicModel(client, "claude-test-model")
    result = Agent(registry, model, USER, mode="native", events=events).run("Refund payment pay_7")
    assert result.text == "I cannot refund payments."
    raws = [raw for _, _, raw in recorder.requests]
    assert all("billing__refund" not in raw for raw in raws[:3])  # neither listed nor referenced
    final = recorder.requests[-1][1]["messages"]
    searched, nothing, refused = (message["content"][0] for message in final[2::2])
    TypeAdapter(ToolResultBlockParam).validate_python(searched)
    assert all(block["type"] == "tool_reference" for block in searched["content"])
    assert nothing["content"] == NO_TOOL_AVAILABLE
    assert refused["is_error"] is True and "billing.refund" not in refused["content"]
    assert any(isinstance(event, SecurityEvent) and event.tool == "billing.refund" for event in events.events)


def tool_search_call(call_id: str, query: str) -> dict[str, Any]:
    item = {"type": "tool_search_call", "id": f"ts_{call_id}", "call_id": call_id, "execution": "client"}
    return response([{**item, "arguments": {"query": query}, "status": "completed"}])


def function_call(call_id: str, namespace: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    item = {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id, "namespace": namespace, "name": name}
    return response([{**item, "arguments": json.dumps(arguments), "status": "completed"}])


def test_openai_responses_client_tool_search(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [
        tool_search_call("call_s1", "refund a payment to the customer's card"),
        tool_search_call("call_s2", "compose a sonnet about autumn leaves"),
        function_call("call_f1", "billing", "refund", REFUND),
        RESPONSES_ANSWER,
    ]
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="test", max_retries=0)
    agent = Agent(registry, OpenAIResponsesModel(client, "gpt-5.4"), BILLING, mode="native", system="Be brief.")
    result = agent.run("Refund payment pay_7")
    assert result.text == "Refunded pay_7." and result.tools_called[-1] == "billing.refund"
    bodies = [body for _, body, _ in recorder.requests]
    assert_same_prefix(bodies, "instructions", "tools")
    tools = bodies[0]["tools"]
    TypeAdapter(list[ToolParam]).validate_python(tools)
    assert tools[0] == {**tools[0], "type": "tool_search", "execution": "client"}
    billing = next(t for t in tools if t.get("name") == "billing")
    assert billing["type"] == "namespace" and billing["tools"][0]["defer_loading"] is True
    items = bodies[-1]["input"]
    TypeAdapter(list[ResponseInputItemParam]).validate_python(items)
    outputs = [item for item in items if item.get("type") == "tool_search_output"]
    assert [o["call_id"] for o in outputs] == ["call_s1", "call_s2"]
    after_nothing = items[items.index(outputs[1]) + 1]  # the sonnet's search loads nothing, and says so
    assert outputs[1]["tools"] == [] and after_nothing == {"role": "developer", "content": NO_TOOL_AVAILABLE}
    (loaded,) = [t for t in outputs[0]["tools"] if t["name"] == "billing"]
    assert loaded["tools"][0]["name"] == "refund" and "defer_loading" not in loaded["tools"][0]
    assert outputs[1]["tools"] == []  # a search that finds nothing loads nothing
    replayed = next(item for item in items if item.get("type") == "function_call")
    assert (replayed["namespace"], replayed["name"]) == ("billing", "refund")


def test_openai_responses_hides_what_the_principal_may_not_use(registry: ToolRegistry) -> None:
    native = DeferredTools(registry, USER)
    listed = json.dumps(native.openai_tools())
    assert "refund" not in listed and '"util"' in listed
    answer = native.answer_openai("call_1", {"query": "refund a payment to the customer's card"})
    assert "refund" not in json.dumps(answer)
    refused = asyncio.run(native.call("billing.refund", REFUND))
    assert refused.outcome == "unknown_tool"  # answered as for a tool that does not exist
    assert refused.message.content == "Error: no tool named 'billing.refund' is available"


def test_own_loop_helpers_give_sdk_valid_blocks(registry: ToolRegistry) -> None:
    native = DeferredTools(registry, BILLING)
    TypeAdapter(list[ToolUnionParam]).validate_python(native.anthropic_tools())
    TypeAdapter(list[ToolParam]).validate_python(native.openai_tools())
    block = native.answer_anthropic("toolu_1", {"query": "refund a payment to the customer's card"})
    TypeAdapter(ToolResultBlockParam).validate_python(block)
    assert {"type": "tool_reference", "tool_name": "billing__refund"} in block["content"]
    bad = native.answer_anthropic("toolu_2", {"k": 2})
    assert bad["is_error"] is True and "query" in bad["content"]
    output = native.answer_openai("call_1", json.dumps({"query": "refund a payment to the customer's card"}))
    TypeAdapter(ResponseInputItemParam).validate_python(output)
    done = asyncio.run(native.call("billing.refund", REFUND))
    assert done.outcome == "ok" and done.message.content == "refunded pay_7"


def interaction(*steps: dict[str, Any], text: str = "") -> dict[str, Any]:
    if text:
        steps = (*steps, {"type": "model_output", "content": [{"type": "text", "text": text}]})
    status = "requires_action" if any(step["type"] == "function_call" for step in steps) else "completed"
    return {"id": f"interactions/{len(steps)}", "status": status, "steps": list(steps)}


def gemini_call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return interaction({"type": "function_call", "id": call_id, "name": name, "arguments": arguments})


def gemini_client(url: str) -> genai.Client:
    return genai.Client(api_key="test", http_options={"base_url": url})


def gemini_step(step: dict[str, Any]) -> Any:
    """The step as the SDK reads it: an unknown shape would parse as `UnknownStep`."""
    return TypeAdapter(gemini_types.Step).validate_python(step)


def test_gemini_interactions_loads_what_toolrag_finds(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [
        gemini_call("fc_1", "search_tools", {"query": "refund a payment to the customer's card"}),
        gemini_call("fc_2", "search_tools", {"query": "compose a sonnet about autumn leaves"}),
        gemini_call("fc_3", "billing__refund", REFUND),
        interaction(text="Refunded pay_7."),
    ]
    model = GeminiInteractionsModel(gemini_client(url), "gemini-3-flash")
    agent = Agent(registry, model, BILLING, mode="native", system="Be brief.")
    result = agent.run("Refund payment pay_7")
    assert result.text == "Refunded pay_7." and result.tools_called == [
        "search_tools",
        "search_tools",
        "billing.refund",
    ]
    assert SEEN["refunded"] == "pay_7"
    paths = {path for path, _, _ in recorder.requests}
    assert paths == {"/v1/interactions"}
    bodies = [body for _, body, _ in recorder.requests]
    assert_same_prefix(bodies, "system_instruction", "tools")
    tools = [TypeAdapter(gemini_types.Tool).validate_python(tool) for tool in bodies[0]["tools"]]
    assert isinstance(tools[0], gemini_types.ToolSearch) and tools[0].execution == "client"
    assert all(isinstance(t, gemini_types.Function) and t.defer_loading for t in tools[1:])
    refund = next(t for t in tools[1:] if t.name == "billing__refund")
    assert refund.short_description and refund.parameters["required"] == ["payment_id"]
    steps = [gemini_step(step) for step in bodies[-1]["input"]]
    found, nothing = (s for s in steps if isinstance(s, gemini_types.FunctionResultStep) and s.name == "search_tools")
    assert found.call_id == "fc_1" and found.result[0].name == "billing__refund"
    assert all(isinstance(f, gemini_types.Function) and not f.defer_loading for f in found.result)
    assert nothing.result == NO_TOOL_AVAILABLE  # a search that finds nothing loads nothing
    refunded = steps[-1]
    assert isinstance(refunded, gemini_types.FunctionResultStep) and refunded.result == "refunded pay_7"


def test_gemini_never_lists_or_loads_a_hidden_tool(server: tuple[str, Recorder], registry: ToolRegistry) -> None:
    url, recorder = server
    recorder.answers = [
        gemini_call("fc_1", "search_tools", {"query": "refund a payment to the customer's card"}),
        gemini_call("fc_2", "billing__refund", REFUND),  # a model guessing the name of a tool it was never given
        interaction(text="I cannot refund payments."),
    ]
    model = GeminiInteractionsModel(gemini_client(url), "gemini-3-flash")
    result = Agent(registry, model, USER, mode="native").run("Refund payment pay_7")
    assert result.text == "I cannot refund payments."
    raws = [raw for _, _, raw in recorder.requests]
    assert all("billing__refund" not in raw for raw in raws[:2])  # neither listed nor loaded
    refused = gemini_step(recorder.requests[-1][1]["input"][-1])
    assert refused.is_error is True and "billing.refund" not in refused.result
    native = DeferredTools(registry, USER)
    assert "refund" not in json.dumps(native.gemini_tools())
    assert "refund" not in json.dumps(native.answer_gemini("fc_1", {"query": "refund a payment to the card"}))


def test_gemini_own_loop_helpers_give_sdk_valid_steps(registry: ToolRegistry) -> None:
    native = DeferredTools(registry, BILLING)
    for tool in native.gemini_tools():
        assert not getattr(TypeAdapter(gemini_types.Tool).validate_python(tool), "is_unknown", False)
    answer = gemini_step(native.answer_gemini("fc_1", {"query": "refund a payment to the customer's card"}))
    assert isinstance(answer, gemini_types.FunctionResultStep) and answer.call_id == "fc_1"
    assert "billing__refund" in [function.name for function in answer.result]
    bad = gemini_step(native.answer_gemini("fc_2", {"k": 2}))
    assert bad.is_error is True and "query" in bad.result


def test_native_mode_needs_a_provider_that_defers_tools(registry: ToolRegistry) -> None:
    with pytest.raises(ToolragError, match="mode='native' needs a provider that loads tools on demand"):
        Agent(registry, ScriptedModel([]), BILLING, mode="native")
    with pytest.raises(ToolragError, match="mode='native'"):
        Agent(registry, OpenAIChatModel(openai.OpenAI(api_key="test"), "m"), BILLING, mode="native")
