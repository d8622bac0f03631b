"""Gemini Interactions API (`client.interactions.create` of the `google-genai` SDK).

The conversation is sent whole on every turn (no `previous_interaction_id`), as for the other adapters, so the
runtime's history stays the one source of truth: user text as `user_input` steps, the model's answers as
`model_output` and `function_call` steps, tool results as `function_result` steps.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from toolrag.inject.deferred import gemini_function, gemini_search_result, gemini_tools
from toolrag.inject.formats import for_providers
from toolrag.jsontext import loads
from toolrag.model import Tool
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.providers.base import ProviderModel

if TYPE_CHECKING:
    from google.genai import Client
    from google.genai.interactions import Interaction


def to_interaction_steps(
    messages: Sequence[Message], catalog: Mapping[str, Tool] | None = None
) -> tuple[str | None, list[dict[str, Any]]]:
    """(system instruction, input steps). `catalog`: the tools a tool search may load, by registry name (its
    answers carry their definitions)."""
    system = "\n".join(m.content for m in messages if m.role == "system") or None
    steps: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "user":
            steps.append({"type": "user_input", "content": [_text(message.content)]})
        elif message.role == "assistant":
            if message.content:
                steps.append({"type": "model_output", "content": [_text(message.content)]})
            steps.extend(_call_step(call) for call in message.tool_calls)
        elif message.role == "tool":
            steps.append(_result_step(message, catalog or {}))
    return system, steps


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _call_step(call: ToolCall) -> dict[str, Any]:
    try:
        arguments = loads(call.arguments or "{}")
    except json.JSONDecodeError:
        arguments = {}
    return {"type": "function_call", "id": call.id, "name": call.name, "arguments": arguments}


def _result_step(message: Message, catalog: Mapping[str, Tool]) -> dict[str, Any]:
    call_id = message.tool_call_id or ""
    if message.loaded is not None:
        return gemini_search_result(call_id, [catalog[name] for name in message.loaded if name in catalog])
    return {"type": "function_result", "call_id": call_id, "result": message.content, "is_error": message.is_error}


def from_interaction(interaction: Interaction) -> Message:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for step in interaction.steps or []:
        if step.type == "function_call":
            calls.append(ToolCall(step.id, step.name, json.dumps(step.arguments, ensure_ascii=False)))
        elif step.type == "model_output":
            texts.extend(part.text for part in step.content or [] if part.type == "text")
    return Message("assistant", "".join(texts) or interaction.output_text or "", tuple(calls))


class GeminiInteractionsModel(ProviderModel):
    """`GeminiInteractionsModel(genai.Client(), "gemini-3-flash")`; the sync client's `.aio` for async use."""

    defers_tools = True

    def __init__(self, client: Client | Any, model: str, **parameters: Any) -> None:
        super().__init__(client, model, **parameters)

    def request(self, messages: Sequence[Message], tools: Sequence[Tool], deferred: bool = False) -> dict[str, Any]:
        system, steps = to_interaction_steps(messages, {tool.name: tool for tool in tools})
        request: dict[str, Any] = {"model": self.model, "input": steps, **self.parameters}
        if system:
            request["system_instruction"] = system
        if deferred:
            request["tools"] = gemini_tools(tools)
        elif tools:
            request["tools"] = [gemini_function(tool) for tool in for_providers(tools)]
        return request

    def endpoint(self) -> Callable[..., Any]:
        return cast(Callable[..., Any], self.client.interactions.create)

    def parse(self, answer: Any) -> Message:
        return from_interaction(answer)
