"""Schemas the model providers refuse never reach them: repaired where no argument the tool accepts is lost, left
out (and quarantined when an MCP server lists them) where not. One refused schema fails a whole provider request."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import mcp.types as types
import pytest

from toolrag import Tool, ToolRegistry
from toolrag.inject import render
from toolrag.inject.deferred import anthropic_tools, gemini_tools, responses_tools
from toolrag.mcp.config import GatewayConfig, ServerConfig
from toolrag.mcp.importer import ToolImporter
from toolrag.schemas.providers import provider_problems, sendable

from .conftest import CountingEmbedder

EITHER_ID_OR_PATH = {
    "type": "object",
    "properties": {"ref": {"type": "string"}},
    "oneOf": [
        {"properties": {"id": {"type": "string"}}, "required": ["id", "ref"]},
        {"properties": {"path": {"type": "string"}}, "required": ["path", "ref"]},
    ],
}
SPACED_NAMES = {"type": "object", "properties": {"user name": {"type": "string"}, "ok": {"type": "string"}}}
FINE = Tool.parse({"name": "util.echo", "description": "Echo a text back.", "input_schema": {"properties": {}}})
EITHER = Tool.parse(
    {"name": "files.open", "description": "Open a file by id or path.", "input_schema": EITHER_ID_OR_PATH}
)
SPACED = Tool.parse({"name": "crm.find_user", "description": "Find a user by name.", "input_schema": SPACED_NAMES})
PROVIDER_FORMATS = ["openai", "openai-responses", "anthropic", "gemini"]


def test_a_top_level_one_of_over_objects_becomes_one_object() -> None:
    repaired = sendable(EITHER_ID_OR_PATH)
    assert not {"oneOf", "anyOf", "allOf"} & repaired.keys()
    assert repaired["properties"].keys() == {"ref", "id", "path"}
    assert repaired["required"] == ["ref"]  # what every accepted argument object holds
    assert provider_problems(EITHER_ID_OR_PATH) == []
    assert EITHER.input_schema == EITHER_ID_OR_PATH  # the gateway still validates against the tool's own schema


def test_all_of_requires_what_each_shape_requires() -> None:
    schema = {"allOf": [{"properties": {"a": {}}, "required": ["a"]}, {"properties": {"b": {}}, "required": ["b"]}]}
    assert sendable(schema) == {"type": "object", "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}


def test_what_cannot_be_repaired_is_named() -> None:
    by_reference = {"type": "object", "anyOf": [{"$ref": "#/$defs/a"}], "$defs": {"a": {"type": "object"}}}
    assert provider_problems(by_reference) == ["anyOf at the top level over shapes that are not inline objects"]
    nested = {"type": "object", "properties": {"filter": {"type": "object", "properties": {"a/b": {}}}}}
    (problem,) = provider_problems(nested)
    assert "'a/b'" in problem
    data_only = {"type": "object", "properties": {"x": {"default": {"properties": {"not a schema": 1}}}}}
    assert provider_problems(data_only) == []  # a default is data, not a schema


@pytest.mark.parametrize("fmt", PROVIDER_FORMATS)
def test_providers_never_get_a_schema_they_refuse(fmt: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="toolrag.inject.formats"):
        rendered = json.dumps(render([FINE, EITHER, SPACED], fmt))
    assert "user name" not in rendered and "oneOf" not in rendered and "files__open" in rendered
    assert "'crm.find_user' left out of the provider request: property names" in caplog.text
    assert '"type": "object"' in rendered  # a schema without a type gets one


def test_mcp_clients_get_the_schema_as_written() -> None:
    assert "user name" in json.dumps(render([SPACED], "mcp"))


def test_deferred_lists_leave_out_what_providers_refuse() -> None:
    for listed in (anthropic_tools([FINE, SPACED]), responses_tools([FINE, SPACED]), gemini_tools([FINE, SPACED])):
        text = json.dumps(listed)
        assert "find_user" not in text and "echo" in text


def test_an_mcp_tool_providers_refuse_is_quarantined_with_the_reason(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    registry = ToolRegistry(tmp_path / "q.db", embedder)
    importer = ToolImporter(registry, GatewayConfig(servers={"crm": ServerConfig(command="x")}))
    listed = [
        types.Tool(name="find_user", description="Find a user by name.", inputSchema=SPACED_NAMES),
        types.Tool(name="open", description="Open a file by id or path.", inputSchema=EITHER_ID_OR_PATH),
    ]
    report = importer.apply("crm", listed)
    assert report.imported == ["crm.open"] and report.quarantined == ["crm.find_user"]
    (pin,) = [pin for pin in registry.store.pins("crm") if pin.quarantined]
    assert any(f.startswith("input schema providers refuse: property names") for f in pin.findings)
    registry.close()
