"""Anthropic Messages API."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any, cast

from toolrag.inject.deferred import anthropic_search_result, anthropic_tools
from toolrag.inject.formats import for_providers, render
from toolrag.jsontext import loads
from toolrag.model import Tool
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.providers.base import ProviderModel

if TYPE_CHECKING:
    from anthropic import Anthropic, AsyncAnthropic
    from anthropic.types import Message as AnthropicMessage


def to_anthropic_messages(
    messages: Sequence[Message], loadable: Collection[str] | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """(system, messages): tool results travel in a user message, consecutive results in the same one.
    `loadable`: the tools a tool search may reference (those in the request's deferred list)."""
    system = "\n".join(m.content for m in messages if m.role == "system") or None
    converted: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            block = {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
                "is_error": message.is_error,
            }
            if message.loaded is not None:
                loaded = [name for name in message.loaded if loadable is None or name in loadable]
                block = anthropic_search_result(message.tool_call_id or "", loaded)
            previous = converted[-1] if converted else None
            if previous and previous["role"] == "user" and isinstance(previous["content"], list):
                previous["content"].append(block)
            else:
                converted.append({"role": "user", "content": [block]})
        elif message.role == "assistant":
            content: list[dict[str, Any]] = [{"type": "text", "text": message.content}] if message.content else []
            content.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": _input(c.arguments)}
                for c in message.tool_calls
            )
            converted.append({"role": "assistant", "content": content})
        elif message.role == "user":
            converted.append({"role": "user", "content": message.content})
    return system, converted


def _input(arguments: str) -> Any:
    try:
        return loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}


def from_anthropic_message(message: AnthropicMessage) -> Message:
    text = "".join(block.text for block in message.content if block.type == "text")
    calls = tuple(
        ToolCall(block.id, block.name, json.dumps(block.input, ensure_ascii=False))
        for block in message.content
        if block.type == "tool_use"
    )
    return Message("assistant", text, calls)


class AnthropicModel(ProviderModel):
    defers_tools = True

    def __init__(
        self, client: Anthropic | AsyncAnthropic, model: str, max_tokens: int = 1024, **parameters: Any
    ) -> None:
        super().__init__(client, model, max_tokens=max_tokens, **parameters)

    def request(self, messages: Sequence[Message], tools: Sequence[Tool], deferred: bool = False) -> dict[str, Any]:
        system, converted = to_anthropic_messages(messages, {tool.name for tool in for_providers(tools)})
        request: dict[str, Any] = {"model": self.model, "messages": converted, **self.parameters}
        if system:
            request["system"] = system
        if deferred:
            request["tools"] = anthropic_tools(tools)
        elif tools:
            request["tools"] = render(tools, "anthropic")
        return request

    def endpoint(self) -> Callable[..., Any]:
        return cast(Callable[..., Any], self.client.messages.create)

    def parse(self, answer: Any) -> Message:
        return from_anthropic_message(answer)
