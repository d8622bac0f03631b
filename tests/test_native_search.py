"""Provider-native deferred loading with toolrag as the searcher, through the official SDK clients against a local
server answering recorded payloads: Anthropic's `defer_loading` + `tool_reference`, OpenAI Responses' client
`tool_search`. The tool list is the same on every turn; hidden tools are never listed, referenced or run."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from anthropic.types import MessageParam, ToolResultBlockParam, ToolUnionParam
from openai.types.responses import ResponseInputItemParam, ToolParam
from pydantic import TypeAdapter

from toolrag import ToolRegistry
from toolrag.errors import ToolragError
from toolrag.inject.deferred import NOTHING_FOUND
from toolrag.runtime import Agent, ListSink, ScriptedModel, SecurityEvent
from toolrag.runtime.native import DeferredTools
from toolrag.runtime.providers import AnthropicModel, OpenAIChatModel, OpenAIResponsesModel

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
    assert nothing["content"] == NOTHING_FOUND
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


def test_native_mode_needs_a_provider_that_defers_tools(registry: ToolRegistry) -> None:
    with pytest.raises(ToolragError, match="mode='native' needs a provider that loads tools on demand"):
        Agent(registry, ScriptedModel([]), BILLING, mode="native")
    with pytest.raises(ToolragError, match="mode='native'"):
        Agent(registry, OpenAIChatModel(openai.OpenAI(api_key="test"), "m"), BILLING, mode="native")
