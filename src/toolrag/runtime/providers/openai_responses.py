"""OpenAI Responses API."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from toolrag.inject.formats import render
from toolrag.model import Tool
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.providers.base import ProviderModel

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI
    from openai.types.responses import Response


def to_responses_input(messages: Sequence[Message]) -> tuple[str | None, list[dict[str, Any]]]:
    """(instructions, input items): system messages become the instructions."""
    instructions = "\n".join(m.content for m in messages if m.role == "system") or None
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            items.append(
                {"type": "function_call_output", "call_id": message.tool_call_id or "", "output": message.content}
            )
        elif message.role == "assistant":
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            items.extend(
                {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                for c in message.tool_calls
            )
        elif message.role == "user":
            items.append({"role": "user", "content": message.content})
    return instructions, items


def from_response(response: Response) -> Message:
    calls = tuple(
        ToolCall(item.call_id, item.name, item.arguments or "{}")
        for item in response.output
        if item.type == "function_call"
    )
    return Message("assistant", response.output_text or "", calls)


class OpenAIResponsesModel(ProviderModel):
    def __init__(self, client: OpenAI | AsyncOpenAI, model: str, **parameters: Any) -> None:
        super().__init__(client, model, **parameters)

    def request(self, messages: Sequence[Message], tools: Sequence[Tool]) -> dict[str, Any]:
        instructions, items = to_responses_input(messages)
        request: dict[str, Any] = {"model": self.model, "input": items, **self.parameters}
        if instructions:
            request["instructions"] = instructions
        if tools:
            request["tools"] = render(tools, "openai-responses")
        return request

    def endpoint(self) -> Callable[..., Any]:
        return cast(Callable[..., Any], self.client.responses.create)

    def parse(self, answer: Any) -> Message:
        return from_response(answer)
