"""Each injection format is checked against the provider SDK's own types."""

from __future__ import annotations

from typing import Any

import anthropic.types
import mcp.types
import openai.types.chat
import openai.types.responses
import pytest
from google.genai import types as genai_types
from pydantic import BaseModel, TypeAdapter

from toolrag import Tool
from toolrag.inject import count_tokens, provider_name, render, tools_tokens

TOOLS = [
    Tool.parse(
        {
            "name": "github.create_issue",
            "description": "Open a new issue in a GitHub repository.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "description": "owner/name"},
                    "labels": {"type": "array", "items": {"type": "string"}},
                    "meta": {"type": "object", "additionalProperties": {"type": "string"}},
                },
                "required": ["repo"],
                "additionalProperties": False,
            },
        }
    ),
    Tool.parse({"name": "ping", "description": "Check that the service answers."}),
    Tool.parse({"name": "x" * 128, "description": "A tool with the longest name allowed."}),
]


def matches_typed_dict(typed_dict: Any, item: dict[str, Any]) -> None:
    """Valid for the SDK's request TypedDict, and no key the SDK does not know."""
    TypeAdapter(typed_dict).validate_python(item)
    assert set(item) <= set(typed_dict.__annotations__)


def round_trip(model: type[BaseModel], item: dict[str, Any]) -> None:
    parsed = model.model_validate(item)
    assert parsed.model_dump(mode="json", by_alias=True, exclude_unset=True) == item


def test_openai_chat_completions() -> None:
    for item in render(TOOLS, "openai"):
        matches_typed_dict(openai.types.chat.ChatCompletionFunctionToolParam, item)
        round_trip(openai.types.chat.ChatCompletionFunctionTool, item)


def test_openai_responses() -> None:
    for item in render(TOOLS, "openai-responses"):
        matches_typed_dict(openai.types.responses.FunctionToolParam, item)
        round_trip(openai.types.responses.FunctionTool, item)


def test_anthropic_messages() -> None:
    for item in render(TOOLS, "anthropic"):
        matches_typed_dict(anthropic.types.ToolParam, item)
        assert set(item) == {"name", "description", "input_schema"}


def test_mcp_tools_keep_the_registry_name() -> None:
    items = render(TOOLS, "mcp")
    for item in items:
        round_trip(mcp.types.Tool, item)
    assert mcp.types.Tool.model_validate(items[0]).name == "github.create_issue"


def test_gemini_function_declarations() -> None:
    items = render(TOOLS, "gemini")
    for item in items:
        genai_types.FunctionDeclaration.model_validate(item)
    assert "additionalProperties" not in str(items[0])
    assert "parameters" not in items[1]  # Gemini wants no parameters for a tool without any


def test_provider_names_are_valid_stable_and_distinct() -> None:
    assert provider_name("github.create_issue") == "github__create_issue"
    long_a, long_b = provider_name("a" * 100), provider_name("a" * 99 + "b")
    assert len(long_a) <= 64 and long_a != long_b and long_a == provider_name("a" * 100)


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown format 'cohere'"):
        render(TOOLS, "cohere")


def test_token_counts_use_a_real_tokenizer() -> None:
    assert count_tokens("Hello world") == 2
    one = render(TOOLS[:1], "openai")
    assert tools_tokens(one) == count_tokens(
        '{"type":"function","function":{"name":"github__create_issue",'
        '"description":"Open a new issue in a GitHub repository.",'
        '"parameters":' + __import__("json").dumps(TOOLS[0].input_schema, separators=(",", ":")) + "}}"
    )
    assert tools_tokens(render(TOOLS, "openai")) > tools_tokens(one)
