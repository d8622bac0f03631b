"""Deferred loading in the providers' own formats, with toolrag as the searcher.

Anthropic and OpenAI can hold tool definitions back (`defer_loading`) until a search loads them. The request then
carries the same tool list on every turn, so the provider's prompt cache survives, which pre-selection and
discovery (a different tool list per turn) break. Their own searches are keyword-level and know nothing of who is
asking; here the search is a client-executed tool that toolrag answers for the principal:

- Anthropic Messages: every visible tool with `defer_loading: true`, plus `search_tools`, a client tool whose result
  is `tool_reference` blocks naming the tools found.
- OpenAI Responses: a `tool_search` tool with `execution: "client"`, the tools as deferred functions (grouped into
  namespaces by their registry namespace), and a `tool_search_output` item carrying the found definitions.
- Gemini Interactions: a `tool_search` tool with `execution: "client"` named `search_tools`, the tools as functions
  with `defer_loading: true` (their first sentence as `short_description`, what the model reads before it
  searches), and a `function_result` step whose result is the found functions' definitions.

The tools given here must already be the principal's visible tools: nothing else is listed, referenced or loaded.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from toolrag.inject.formats import anthropic, for_providers, gemini, is_provider_name, openai_responses, provider_name
from toolrag.inject.told import NO_TOOL_AVAILABLE
from toolrag.model import Tool

SEARCH_DESCRIPTION = (
    "Search the tools you can use by what you want to do, in a sentence. The tools found become available to call. "
    "Search again with other words if none fits."
)
SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "description": "what you want to do, in a sentence"},
        "k": {"type": "integer", "minimum": 1, "maximum": 5, "description": "how many tools at most, default 3"},
    },
    "required": ["query"],
}
SEARCH_TOOL = Tool.parse(
    {"name": "search_tools", "description": SEARCH_DESCRIPTION, "input_schema": SEARCH_PARAMETERS, "source": "toolrag"}
)


# -- Anthropic ---------------------------------------------------------------------------------------------------


def anthropic_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """`search_tools` loaded, then every tool deferred, in name order so the list is the same on every turn."""
    deferred = [
        {**anthropic(tool), "defer_loading": True} for tool in sorted(for_providers(tools), key=lambda t: t.name)
    ]
    return [anthropic(SEARCH_TOOL), *deferred]


def anthropic_search_result(call_id: str, found: Sequence[str]) -> dict[str, Any]:
    """The `tool_result` answering `search_tools`: a `tool_reference` block per tool found (registry names)."""
    content: list[dict[str, Any]] | str = [{"type": "tool_reference", "tool_name": provider_name(n)} for n in found]
    return {"type": "tool_result", "tool_use_id": call_id, "content": content or NO_TOOL_AVAILABLE}


# -- OpenAI Responses ----------------------------------------------------------------------------------------------


def responses_tools(tools: Sequence[Tool], group_descriptions: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """The client-executed `tool_search`, then the tools deferred: namespaces first, then lone functions."""
    search = {
        "type": "tool_search",
        "execution": "client",
        "description": SEARCH_DESCRIPTION,
        "parameters": SEARCH_PARAMETERS,
    }
    return [search, *_deferred_functions(tools, group_descriptions or {}, defer=True)]


def responses_search_output(call_id: str, found: Sequence[Tool]) -> dict[str, Any]:
    """The `tool_search_output` item answering a client `tool_search_call`: the definitions of the tools found."""
    loaded = _deferred_functions(found, {}, defer=False)
    return {
        "type": "tool_search_output",
        "call_id": call_id,
        "execution": "client",
        "status": "completed",
        "tools": loaded,
    }


def namespace_of(name: str) -> tuple[str, str] | None:
    """(namespace, function) when a registry name renders as a function inside a namespace: `shop.track_shipment`
    -> (`shop`, `track_shipment`); None for names without a namespace or with parts providers do not accept."""
    namespace, dot, function = name.partition(".")
    if not dot or not is_provider_name(namespace) or not is_provider_name(function):
        return None
    return namespace, function


def _deferred_functions(
    tools: Sequence[Tool], group_descriptions: Mapping[str, str], defer: bool
) -> list[dict[str, Any]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    lone: list[dict[str, Any]] = []
    for tool in sorted(for_providers(tools), key=lambda t: t.name):
        function = openai_responses(tool)
        if defer:
            function["defer_loading"] = True
        parts = namespace_of(tool.name)
        if parts is None:
            lone.append(function)
        else:
            grouped[parts[0]].append({**function, "name": parts[1]})
    namespaces = [
        {
            "type": "namespace",
            "name": namespace,
            "description": group_descriptions.get(namespace) or _namespace_summary(namespace, functions),
            "tools": functions,
        }
        for namespace, functions in grouped.items()
    ]
    return [*namespaces, *lone]


def _namespace_summary(namespace: str, functions: Sequence[dict[str, Any]]) -> str:
    """What a namespace offers when its group has no description: its functions' names, which the model reads
    before it searches (the definitions stay deferred)."""
    names = ", ".join(f["name"] for f in functions[:20])
    more = f" and {len(functions) - 20} more" if len(functions) > 20 else ""
    return f"{namespace} tools: {names}{more}."


# -- Gemini Interactions -------------------------------------------------------------------------------------------


def gemini_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The client-executed `tool_search`, then every tool deferred, in name order so the list is the same on every
    turn."""
    search = {
        "type": "tool_search",
        "execution": "client",
        "name": SEARCH_TOOL.name,
        "description": SEARCH_DESCRIPTION,
        "parameters": SEARCH_PARAMETERS,
    }
    deferred = [
        {**gemini_function(tool), "defer_loading": True, "short_description": tool.purpose()}
        for tool in sorted(for_providers(tools), key=lambda t: t.name)
    ]
    return [search, *deferred]


def gemini_search_result(call_id: str, found: Sequence[Tool]) -> dict[str, Any]:
    """The `function_result` step answering `search_tools`: the definitions of the tools found, which the model
    may call from then on."""
    result: list[dict[str, Any]] | str = [gemini_function(tool) for tool in for_providers(found)]
    return {
        "type": "function_result",
        "call_id": call_id,
        "name": SEARCH_TOOL.name,
        "result": result or NO_TOOL_AVAILABLE,
    }


def gemini_function(tool: Tool) -> dict[str, Any]:
    """A function of the Interactions API: Gemini's declaration with its `type`."""
    return {"type": "function", **gemini(tool)}
