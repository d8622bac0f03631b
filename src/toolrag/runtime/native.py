"""Provider-native deferred loading for users who run their own loop (the `Agent` does this with mode="native").

    native = DeferredTools(registry, principal)
    response = client.messages.create(model=..., messages=messages, tools=native.anthropic_tools())
    for block in response.content:
        if block.type == "tool_use" and native.is_search(block.name):
            results.append(native.answer_anthropic(block.id, block.input))   # tool_reference blocks
        elif block.type == "tool_use":
            results.append(await native.call(block.id, block.name, block.input))  # through the gateway

OpenAI Responses: `openai_tools()` for the request, `answer_openai(item.call_id, item.arguments)` for each
`tool_search_call` item with `execution == "client"`, `call(...)` for function calls. Every list, reference and
call covers the principal's visible tools only, and every call passes the execution gateway.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from toolrag.errors import ToolragError
from toolrag.inject.deferred import (
    SEARCH_TOOL,
    anthropic_search_result,
    anthropic_tools,
    responses_search_output,
    responses_tools,
)
from toolrag.jsontext import loads
from toolrag.model import Principal, SearchResult
from toolrag.registry import ToolRegistry
from toolrag.runtime.gateway import CallResult, ExecutionPolicy, ToolGateway
from toolrag.runtime.messages import ToolCall

MAX_FOUND = 5


def find(
    registry: ToolRegistry, principal: Principal, arguments: Mapping[str, Any] | str, session: str | None = None
) -> list[SearchResult]:
    """Run a model's tool search (`{"query": ..., "k": ...}`) for the principal; k is kept within 1-5."""
    try:
        parsed = loads(arguments or "{}") if isinstance(arguments, str) else dict(arguments)
        query = str(parsed["query"])
        k = int(parsed.get("k", 3))
    except (ValueError, KeyError, TypeError):
        raise ToolragError('a tool search takes {"query": "...", "k": 3}') from None
    return registry.search(query, principal, max(1, min(k, MAX_FOUND)), session=session)


class DeferredTools:
    """The tool list to send with deferred loading, and the answers to the model's tool searches, for one
    principal of one registry."""

    def __init__(
        self,
        registry: ToolRegistry,
        principal: Principal | None = None,
        policy: ExecutionPolicy | None = None,
        session: str | None = None,
    ) -> None:
        self.registry = registry
        self.principal = principal or Principal.anonymous()
        self.session = session
        self.loaded: set[str] = set()  # what the searches found: the tools the model was offered
        visible, hidden = registry.partition(self.principal)
        self.gateway = ToolGateway(visible, hidden, self.principal, registry.function, None, policy, registry.usage)

    @staticmethod
    def is_search(name: str) -> bool:
        return name == SEARCH_TOOL.name

    def anthropic_tools(self) -> list[dict[str, Any]]:
        return anthropic_tools(list(self.gateway.tools.values()))

    def openai_tools(self) -> list[dict[str, Any]]:
        return responses_tools(list(self.gateway.tools.values()), self.registry.group_descriptions())

    def answer_anthropic(self, call_id: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """The `tool_result` block for a `search_tools` call: references to the tools found, or an error text."""
        try:
            found = find(self.registry, self.principal, arguments, self.session)
        except ToolragError as exc:
            return {"type": "tool_result", "tool_use_id": call_id, "content": str(exc), "is_error": True}
        self.loaded.update(r.name for r in found)
        return anthropic_search_result(call_id, [r.name for r in found])

    def answer_openai(self, call_id: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
        """The `tool_search_output` item for a client `tool_search_call`: the definitions of the tools found
        (none for arguments that are not a search)."""
        try:
            found = find(self.registry, self.principal, arguments, self.session)
        except ToolragError:
            found = []
        self.loaded.update(r.name for r in found)
        return responses_search_output(call_id, [self.gateway.tools[r.name] for r in found])

    async def call(self, call_id: str, name: str, arguments: Mapping[str, Any] | str) -> CallResult:
        """Run a call of a loaded tool through the execution gateway (permissions, validation, timeout, log)."""
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        return await self.gateway.call(ToolCall(call_id, name, raw), self.loaded, self.session)
