"""OpenAI Responses API."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from toolrag.inject.deferred import namespace_of, responses_search_output, responses_tools
from toolrag.inject.formats import render
from toolrag.jsontext import loads
from toolrag.model import Tool
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.providers.base import ProviderModel

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI
    from openai.types.responses import Response


def to_responses_input(
    messages: Sequence[Message], catalog: Mapping[str, Tool] | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """(instructions, input items): system messages become the instructions. `catalog`: the tools a tool search
    may load, by registry name (its answers carry their definitions)."""
    instructions = "\n".join(m.content for m in messages if m.role == "system") or None
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            items.append(_tool_output(message, catalog or {}))
            if message.loaded == () and message.content:  # a search that loads nothing: its answer in words
                items.append({"role": "developer", "content": message.content})
        elif message.role == "assistant":
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            items.extend(_call_item(c) for c in message.tool_calls)
        elif message.role == "user":
            items.append({"role": "user", "content": message.content})
    return instructions, items


def _tool_output(message: Message, catalog: Mapping[str, Tool]) -> dict[str, Any]:
    call_id = message.tool_call_id or ""
    if message.loaded is not None:
        return responses_search_output(call_id, [catalog[name] for name in message.loaded if name in catalog])
    return {"type": "function_call_output", "call_id": call_id, "output": message.content}


def _call_item(call: ToolCall) -> dict[str, Any]:
    if call.kind == "tool_search":
        arguments = loads(call.arguments or "{}")
        return {"type": "tool_search_call", "call_id": call.id, "arguments": arguments, "execution": "client"}
    item = {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments}
    parts = namespace_of(call.name)  # a provider name has no dot: a dotted one came from a namespace
    if parts is not None:
        item |= {"namespace": parts[0], "name": parts[1]}
    return item


def from_response(response: Response) -> Message:
    calls: list[ToolCall] = []
    for item in response.output:
        if item.type == "function_call":
            name = f"{item.namespace}.{item.name}" if item.namespace else item.name
            calls.append(ToolCall(item.call_id, name, item.arguments or "{}"))
        elif item.type == "tool_search_call" and item.execution == "client":
            arguments = json.dumps(item.arguments, ensure_ascii=False)
            calls.append(ToolCall(item.call_id or item.id, "tool_search", arguments, kind="tool_search"))
    return Message("assistant", response.output_text or "", tuple(calls))


class OpenAIResponsesModel(ProviderModel):
    defers_tools = True

    def __init__(self, client: OpenAI | AsyncOpenAI, model: str, **parameters: Any) -> None:
        super().__init__(client, model, **parameters)

    def request(self, messages: Sequence[Message], tools: Sequence[Tool], deferred: bool = False) -> dict[str, Any]:
        instructions, items = to_responses_input(messages, {tool.name: tool for tool in tools})
        request: dict[str, Any] = {"model": self.model, "input": items, **self.parameters}
        if instructions:
            request["instructions"] = instructions
        if deferred:
            request["tools"] = responses_tools(tools)
        elif tools:
            request["tools"] = render(tools, "openai-responses")
        return request

    def endpoint(self) -> Callable[..., Any]:
        return cast(Callable[..., Any], self.client.responses.create)

    def parse(self, answer: Any) -> Message:
        return from_response(answer)
