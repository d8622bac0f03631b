"""OpenAI Chat Completions, and every server that speaks it (Ollama, vLLM, llama.cpp server, LM Studio, ...)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from toolrag.errors import ToolragError
from toolrag.inject.formats import render
from toolrag.model import Tool
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.providers.base import ProviderModel

if TYPE_CHECKING:
    from openai import AsyncOpenAI, OpenAI
    from openai.types.chat import ChatCompletion


def to_openai_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    converted: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "tool":
            converted.append({"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.content})
        elif message.role == "assistant":
            item: dict[str, Any] = {"role": "assistant", "content": message.content or None}
            if message.tool_calls:
                item["tool_calls"] = [
                    {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                    for c in message.tool_calls
                ]
            converted.append(item)
        else:
            converted.append({"role": message.role, "content": message.content})
    return converted


def from_openai_completion(completion: ChatCompletion) -> Message:
    choice = completion.choices[0].message
    calls = tuple(
        ToolCall(call.id, call.function.name, call.function.arguments or "{}")
        for call in choice.tool_calls or []
        if call.type == "function"
    )
    return Message("assistant", choice.content or "", calls)


class OpenAIChatModel(ProviderModel):
    """Give it an `openai.OpenAI` or `openai.AsyncOpenAI` client (any OpenAI-compatible `base_url`)."""

    def __init__(self, client: OpenAI | AsyncOpenAI, model: str, **parameters: Any) -> None:
        super().__init__(client, model, **parameters)

    def request(self, messages: Sequence[Message], tools: Sequence[Tool], deferred: bool = False) -> dict[str, Any]:
        if deferred:
            raise ToolragError("Chat Completions cannot defer tools: use OpenAIResponsesModel for mode='native'")
        request: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages), **self.parameters}
        if tools:
            request["tools"] = render(tools, "openai")
        return request

    def endpoint(self) -> Callable[..., Any]:
        return cast(Callable[..., Any], self.client.chat.completions.create)

    def parse(self, answer: Any) -> Message:
        return from_openai_completion(answer)
