"""Tool definitions in each provider's wire format.

Providers read JSON Schema 2020-12, so the schemas they get are upgraded from older drafts (`to_2020_12`); MCP
clients get the schema as the server wrote it.

Providers restrict tool names to `[a-zA-Z0-9_-]{1,64}`; registry names may contain dots (namespaces) and be
128 characters long. `provider_name` maps a registry name to a valid, stable and collision-free provider name;
the runtime maps it back when the model calls the tool.

A schema a provider refuses fails the whole request, so providers get each schema repaired where that is safe,
and a tool whose schema cannot be (schemas/providers.py) is left out of what they get, with a warning.
"""

from __future__ import annotations

import copy
import hashlib
import logging
import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from toolrag.model import Tool
from toolrag.schemas.drafts import to_2020_12
from toolrag.schemas.providers import provider_problems, sendable

log = logging.getLogger(__name__)

Format = Literal["openai", "openai-responses", "anthropic", "mcp", "gemini"]
_PROVIDER_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# JSON Schema keywords Gemini's OpenAPI-subset Schema does not accept.
_GEMINI_DROPPED = {"$schema", "$id", "$defs", "definitions", "additionalProperties", "$ref", "const", "examples"}


def is_provider_name(name: str) -> bool:
    return bool(_PROVIDER_NAME.fullmatch(name))


def provider_name(name: str) -> str:
    """`github.create_issue` -> `github__create_issue`. Names over 64 characters, and names that already hold
    `__` (which `a.b` and `a__b` would otherwise share), keep a hash suffix, so no two names map to one."""
    safe = name.replace(".", "__")
    if _PROVIDER_NAME.fullmatch(safe) and "__" not in name:
        return safe
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]  # a model's name may hold one
    return f"{safe[:55]}_{digest}"


def provider_schema(tool: Tool) -> dict[str, Any]:
    """The tool's input schema as providers take it: JSON Schema 2020-12, repaired where that is safe."""
    return sendable(to_2020_12(tool.input_schema))


def for_providers(tools: Sequence[Tool]) -> list[Tool]:
    """The tools whose schemas providers take; each one left out is logged with the reason."""
    kept = []
    for tool in tools:
        problems = provider_problems(to_2020_12(tool.input_schema))
        if problems:
            log.warning("tool %r left out of the provider request: %s", tool.name, "; ".join(problems))
        else:
            kept.append(tool)
    return kept


def openai_chat(tool: Tool) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": provider_name(tool.name),
            "description": tool.description,
            "parameters": provider_schema(tool),
        },
    }


def openai_responses(tool: Tool) -> dict[str, Any]:
    return {
        "type": "function",
        "name": provider_name(tool.name),
        "description": tool.description,
        "parameters": provider_schema(tool),
        "strict": False,
    }


def anthropic(tool: Tool) -> dict[str, Any]:
    return {
        "name": provider_name(tool.name),
        "description": tool.description,
        "input_schema": provider_schema(tool),
    }


def mcp(tool: Tool) -> dict[str, Any]:
    """An MCP `Tool`. MCP allows dots in names, so the registry name is kept as it is."""
    definition = {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
    if tool.output_schema is not None:
        definition["outputSchema"] = tool.output_schema
    if tool.annotations is not None:
        definition["annotations"] = tool.annotations
    return definition


def gemini(tool: Tool) -> dict[str, Any]:
    declaration: dict[str, Any] = {"name": provider_name(tool.name), "description": tool.description}
    if tool.input_schema.get("properties"):
        declaration["parameters"] = _gemini_schema(provider_schema(tool))
    return declaration


def _gemini_schema(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_gemini_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned = {}
    for key, value in schema.items():
        if key in _GEMINI_DROPPED:
            continue
        if key == "properties" and isinstance(value, dict):
            cleaned[key] = {name: _gemini_schema(prop) for name, prop in value.items()}
        else:
            cleaned[key] = _gemini_schema(copy.deepcopy(value))
    return cleaned


FORMATS: dict[str, Callable[[Tool], dict[str, Any]]] = {
    "openai": openai_chat,
    "openai-responses": openai_responses,
    "anthropic": anthropic,
    "mcp": mcp,
    "gemini": gemini,
}


def render(tools: Sequence[Tool], fmt: str = "openai") -> list[dict[str, Any]]:
    try:
        renderer = FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}") from None
    return [renderer(tool) for tool in (tools if fmt == "mcp" else for_providers(tools))]
