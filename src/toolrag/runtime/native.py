"""Provider-native deferred loading for users who run their own loop (the `Agent` does this with mode="native").

    native = DeferredTools(registry, principal)
    response = client.messages.create(model=..., messages=messages, tools=native.anthropic_tools())
    for block in response.content:
        if block.type == "tool_use" and native.is_search(block.name):
            results.append(native.answer_anthropic(block.id, block.input))   # tool_reference blocks
        elif block.type == "tool_use":
            result = await native.call(block.name, block.input, block.id)   # through the gateway

OpenAI Responses: `openai_tools()` for the request, `answer_openai(item.call_id, item.arguments)` for each
`tool_search_call` item with `execution == "client"`, `call(...)` for function calls. Gemini Interactions:
`gemini_tools()` for the request, `answer_gemini(step.id, step.arguments)` for each `function_call` step named
`search_tools`. Every list, reference and call covers the principal's visible tools only, and every call passes the
execution gateway.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolrag.errors import ToolragError
from toolrag.inject.deferred import (
    SEARCH_TOOL,
    anthropic_search_result,
    anthropic_tools,
    gemini_search_result,
    gemini_tools,
    responses_search_output,
    responses_tools,
)
from toolrag.inject.formats import for_providers
from toolrag.runtime.toolbox import Toolbox


class DeferredTools(Toolbox):
    """The tool list to send with deferred loading, and the answers to the model's tool searches."""

    @staticmethod
    def is_search(name: str) -> bool:
        return name == SEARCH_TOOL.name

    def anthropic_tools(self) -> list[dict[str, Any]]:
        return anthropic_tools(list(self.tools.values()))

    def openai_tools(self) -> list[dict[str, Any]]:
        return responses_tools(list(self.tools.values()), self.registry.group_descriptions())

    def gemini_tools(self) -> list[dict[str, Any]]:
        return gemini_tools(list(self.tools.values()))

    def answer_anthropic(self, call_id: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """The `tool_result` block for a `search_tools` call: references to the tools found, or an error text."""
        try:
            found = self.find(arguments)
        except ToolragError as exc:
            return {"type": "tool_result", "tool_use_id": call_id, "content": str(exc), "is_error": True}
        return anthropic_search_result(call_id, [tool.name for tool in for_providers(found)])

    def answer_openai(self, call_id: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """The `tool_search_output` item for a client `tool_search_call`: the definitions of the tools found
        (none for arguments that are not a search)."""
        try:
            found = self.find(arguments)
        except ToolragError:
            found = []
        return responses_search_output(call_id, found)

    def answer_gemini(self, call_id: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """The `function_result` step for a `search_tools` call: the definitions of the tools found, or an error."""
        try:
            found = self.find(arguments)
        except ToolragError as exc:
            return {
                "type": "function_result",
                "call_id": call_id,
                "name": SEARCH_TOOL.name,
                "result": str(exc),
                "is_error": True,
            }
        return gemini_search_result(call_id, found)
