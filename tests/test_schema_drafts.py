"""Schemas as real MCP servers write them: older JSON Schema drafts are accepted, validated under their own draft
and rendered for providers in the 2020-12 form."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from toolrag import Tool
from toolrag.catalog.files import load_catalog
from toolrag.errors import InvalidToolError
from toolrag.inject import render
from toolrag.model import Principal
from toolrag.runtime.gateway import CallResult, ToolGateway
from toolrag.runtime.messages import ToolCall

# The shape of PDF Reader's `read_pdf` in a public catalog of real MCP servers: draft-04, no `$schema`.
READ_PDF: dict[str, Any] = {
    "name": "pdf.read_pdf",
    "description": "Read the text of a PDF file, optionally a range of pages.",
    "input_schema": {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "first_page": {"type": "integer", "minimum": 0, "exclusiveMinimum": True},
            "last_page": {"type": "integer", "maximum": 5000, "exclusiveMaximum": False},
        },
        "required": ["path"],
    },
}
DRAFT_07_DEFINITIONS: dict[str, Any] = {
    "name": "shop.add_item",
    "description": "Add an item to the basket.",
    "input_schema": {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "definitions": {"sku": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]+$"}},
        "properties": {"sku": {"$ref": "#/definitions/sku"}, "quantity": {"type": "integer", "minimum": 1}},
        "required": ["sku"],
    },
}


def _call(tool: Tool, arguments: dict[str, Any]) -> CallResult:
    gateway = ToolGateway([tool], [], Principal(), lambda name: lambda **kwargs: "done")
    return asyncio.run(gateway.call(ToolCall("c1", tool.name, json.dumps(arguments)), set()))


def test_a_draft_04_schema_without_schema_keyword_is_accepted() -> None:
    tool = Tool.parse(READ_PDF)
    assert tool.input_schema["properties"]["first_page"]["exclusiveMinimum"] is True  # kept as the server wrote it


def test_arguments_are_validated_under_the_draft_the_schema_follows() -> None:
    pdf = Tool.parse(READ_PDF)
    assert _call(pdf, {"path": "a.pdf", "first_page": 1}).outcome == "ok"
    refused = _call(pdf, {"path": "a.pdf", "first_page": 0})  # draft-04: the minimum itself is excluded
    assert refused.outcome == "invalid_arguments" and "first_page" in refused.message.content
    assert _call(pdf, {"path": "a.pdf", "last_page": 5000}).outcome == "ok"  # exclusiveMaximum false: included
    shop = Tool.parse(DRAFT_07_DEFINITIONS)
    assert _call(shop, {"sku": "ABC-12"}).outcome == "ok"
    refused = _call(shop, {"sku": "abc"})  # through `$ref` into draft-07 `definitions`
    assert refused.outcome == "invalid_arguments" and "does not match" in refused.message.content


def test_a_declared_draft_is_the_one_that_counts() -> None:
    declared = {**READ_PDF, "input_schema": {**READ_PDF["input_schema"]}}
    declared["input_schema"]["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    with pytest.raises(
        InvalidToolError, match=r"invalid JSON Schema at properties/\w+/exclusiveM\w+: \w+ is not of type .number."
    ):
        Tool.parse(declared)


def test_a_schema_valid_in_no_draft_names_the_2020_12_problem() -> None:
    broken = {"name": "x.y", "description": "A tool.", "input_schema": {"type": "object", "properties": []}}
    with pytest.raises(InvalidToolError, match=r"invalid JSON Schema at properties: \[\] is not of type 'object'"):
        Tool.parse(broken)


@pytest.mark.parametrize("declared", [[], {}, 7, None, True])
def test_a_schema_keyword_that_is_no_string_is_refused_not_a_crash(declared: Any) -> None:
    """A hostile server's `"$schema": []` raised TypeError inside jsonschema (unhashable list): the whole
    listing failed to import instead of that one tool being refused (found by tests/test_fuzz.py)."""
    schema = {"$schema": declared, "type": "object"}
    with pytest.raises(InvalidToolError, match=r"invalid JSON Schema at \$schema: .* is not a string"):
        Tool.parse({"name": "x.y", "description": "A tool.", "input_schema": schema})
    with pytest.raises(InvalidToolError, match=r"output schema: invalid JSON Schema at \$schema"):
        Tool.parse({"name": "x.y", "description": "A tool.", "output_schema": schema})


@pytest.mark.parametrize("fmt", ["openai", "openai-responses", "anthropic", "gemini"])
def test_providers_receive_the_2020_12_form(fmt: str) -> None:
    rendered = json.dumps(render([Tool.parse(READ_PDF), Tool.parse(DRAFT_07_DEFINITIONS)], fmt))
    assert '"exclusiveMinimum": true' not in rendered and '"exclusiveMaximum": false' not in rendered
    assert "draft-07" not in rendered
    if fmt != "gemini":  # Gemini's schema subset has no exclusive bounds; the rest is as for the others
        assert '"first_page": {"type": "integer", "exclusiveMinimum": 0}' in rendered
        assert '"last_page": {"type": "integer", "maximum": 5000}' in rendered


def test_mcp_clients_receive_the_schema_as_written() -> None:
    (rendered,) = render([Tool.parse(READ_PDF)], "mcp")
    assert rendered["inputSchema"] == READ_PDF["input_schema"]


def test_a_catalog_with_older_drafts_imports_whole(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps({"tools": [READ_PDF, DRAFT_07_DEFINITIONS]}), encoding="utf-8")
    assert [tool.name for tool in load_catalog(path)] == ["pdf.read_pdf", "shop.add_item"]


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_a_schema_nested_without_end_is_refused_not_a_crash() -> None:
    """A hostile server's schema nested thousands deep overflowed Python's recursion (RecursionError, a failed
    sync for the whole server) instead of being refused on its own."""
    with pytest.raises(InvalidToolError, match="nested deeper than 64 levels"):
        Tool.parse({"name": "x.y", "description": "A tool.", "input_schema": _nested(5000)})
    with pytest.raises(InvalidToolError, match="output schema: nested deeper than 64 levels"):
        Tool.parse({"name": "x.y", "description": "A tool.", "output_schema": _nested(5000)})
    assert Tool.parse({"name": "x.y", "description": "A tool.", "input_schema": _nested(30)}).name == "x.y"


def test_the_importer_refuses_only_the_tool_with_the_bottomless_schema(tmp_path: Path) -> None:
    import mcp.types

    from toolrag import ToolRegistry
    from toolrag.mcp.config import GatewayConfig, ServerConfig
    from toolrag.mcp.importer import ToolImporter

    registry = ToolRegistry(tmp_path / "deep.db")
    importer = ToolImporter(registry, GatewayConfig(servers={"srv": ServerConfig(command="x")}))
    ordinary = {"type": "object", "properties": {"q": {"type": "string"}}}
    report = importer.apply(
        "srv",
        [
            mcp.types.Tool(name="deep_input", description="Look things up.", input_schema=_nested(5000)),
            mcp.types.Tool(
                name="deep_output", description="Look things up.", input_schema=ordinary, output_schema=_nested(5000)
            ),
            mcp.types.Tool(name="plain", description="Look things up.", input_schema=ordinary),
        ],
    )
    assert report.refused == ["srv.deep_input"] and sorted(report.imported) == ["srv.deep_output", "srv.plain"]
    assert registry.get("srv.deep_output").output_schema is None  # dropped, the tool kept


def test_the_importer_refuses_only_the_tool_whose_schema_keyword_is_no_string(tmp_path: Path) -> None:
    import mcp.types

    from toolrag import ToolRegistry
    from toolrag.mcp.config import GatewayConfig, ServerConfig
    from toolrag.mcp.importer import ToolImporter

    registry = ToolRegistry(tmp_path / "keyword.db")
    importer = ToolImporter(registry, GatewayConfig(servers={"srv": ServerConfig(command="x")}))
    ordinary = {"type": "object", "properties": {"q": {"type": "string"}}}
    report = importer.apply(
        "srv",
        [
            mcp.types.Tool(name="odd", description="Look things up.", input_schema={**ordinary, "$schema": []}),
            mcp.types.Tool(name="plain", description="Look things up.", input_schema=ordinary),
        ],
    )
    assert report.refused == ["srv.odd"] and report.imported == ["srv.plain"]
