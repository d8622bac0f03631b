from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolrag import CatalogError, InvalidToolError, ToolContext, load_catalog, tool
from toolrag.catalog.decorator import context_parameter, tool_from_callable


def test_tool_from_type_hints_and_docstring() -> None:
    @tool(scopes=["weather:read"], aliases=["is it raining"])
    def get_weather(city: str, days: int = 1, units: str = "metric", ctx: ToolContext | None = None) -> str:
        """Weather forecast for a city.

        More detail that stays in the description.

        Args:
            city: City name, e.g. Kyiv.
            days: How many days,
                from 1 to 14.
            units: metric or imperial.

        Returns:
            A text forecast.
        """
        return "sunny"

    spec = get_weather.__toolrag_tool__
    assert spec.name == "get_weather"
    assert spec.description == "Weather forecast for a city.\n\nMore detail that stays in the description."
    assert spec.scopes == ["weather:read"] and spec.aliases == ["is it raining"]
    assert spec.input_schema == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name, e.g. Kyiv."},
            "days": {"type": "integer", "description": "How many days, from 1 to 14.", "default": 1},
            "units": {"type": "string", "description": "metric or imperial.", "default": "metric"},
        },
        "required": ["city"],
    }
    assert context_parameter(get_weather) == "ctx"
    assert get_weather("Kyiv") == "sunny"  # still an ordinary function


def test_context_is_hidden_from_the_schema() -> None:
    def whoami(ctx: ToolContext) -> str:
        """Tell who is asking."""
        return ctx.user or ""

    spec = tool_from_callable(whoami)
    assert spec.input_schema == {"type": "object", "properties": {}}
    assert "ToolContext" not in json.dumps(spec.model_dump(mode="json"))


def test_callable_with_a_bad_name_is_refused() -> None:
    def fine() -> None:
        """Fine."""

    with pytest.raises(InvalidToolError, match="invalid tool name"):
        tool_from_callable(fine, name="not fine")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_json_jsonl_and_yaml_catalogs(tmp_path: Path) -> None:
    as_json = write(
        tmp_path,
        "c.json",
        json.dumps(
            {"tools": [{"name": "a.one", "description": "First.", "parameters": {"type": "object", "properties": {}}}]}
        ),
    )
    as_jsonl = write(tmp_path, "c.jsonl", '{"name": "b", "description": "Second.", "inputSchema": null}\n\n')
    as_yaml = write(tmp_path, "c.yaml", "- name: c\n  description: Third.\n  scopes: [x:read]\n")
    assert [t.name for t in load_catalog(as_json)] == ["a.one"]
    assert [t.name for t in load_catalog(as_jsonl)] == ["b"]
    assert load_catalog(as_yaml)[0].scopes == ["x:read"]


def test_yaml_aliases_that_stand_for_billions_of_values_are_refused(tmp_path: Path) -> None:
    """An attacker's review: 551 bytes of anchors, each a list of ten aliases of the one before, took 47 s and 1.6 GB
    before being refused (the schema was walked as if expanded), and a level more would have needed 8 GB. Aliases
    are now counted as they are followed; a catalog that shares a schema part by an alias still loads."""
    levels = ['      x0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    levels += [f"      x{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 10)]
    head = "- name: bomb\n  description: A tool.\n  input_schema:\n    type: object\n    properties:\n"
    bomb = write(tmp_path, "bomb.yaml", head + "\n".join(levels) + "\n")
    with pytest.raises(CatalogError, match="aliases stand for more than 1,000,000 values"):
        load_catalog(bomb)
    itself = write(tmp_path, "itself.yaml", "- &me\n  name: loop\n  description: A tool.\n  loop: *me\n")
    with pytest.raises(CatalogError, match="or for themselves"):
        load_catalog(itself)
    shared = "- name: a\n  description: A.\n  parameters: &p {type: object, properties: {q: {type: string}}}\n"
    shared += "- name: b\n  description: B.\n  parameters: *p\n"
    assert [t.input_schema for t in load_catalog(write(tmp_path, "shared.yaml", shared))][1]["properties"] == {
        "q": {"type": "string"}
    }


def test_benchmark_format_uses_the_unique_id(tmp_path: Path) -> None:
    line = {"id": "srv2.read_file", "name": "read_file", "description": "Read.", "parameters": None, "category": None}
    tools = load_catalog(write(tmp_path, "tools.jsonl", json.dumps(line)))
    assert tools[0].name == "srv2.read_file"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[{"name": "ok", "description": "Fine."}, {"name": "bad name", "description": "x"}]', "entry 2"),
        ('[{"name": "a", "description": "x"}, {"name": "a", "description": "y"}]', "more than once"),
        ('{"name": "a"', "invalid JSON at line 1"),
        ('"just a string"', "expected a list"),
        ('[{"name": "a", "description": "x", "parameters": {"type": "object", "required": "city"}}]', "JSON Schema"),
    ],
)
def test_bad_catalogs_fail_whole_with_a_named_problem(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(CatalogError, match=message):
        load_catalog(write(tmp_path, "bad.json", text))


def test_missing_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(CatalogError, match="no such file"):
        load_catalog(tmp_path / "nope.json")
    path = tmp_path / "latin1.json"
    path.write_bytes(b'[{"name": "a", "description": "caf\xe9"}]')
    with pytest.raises(CatalogError, match="cannot read"):
        load_catalog(path)


def test_lenient_import_repairs_foreign_type_names(tmp_path: Path) -> None:
    schema = {
        "type": "dict",
        "properties": {
            "name": {"type": "String"},
            "value": {"type": "any"},
            "items": {"type": "ArrayList", "items": {"type": "float"}},
        },
    }
    path = write(tmp_path, "java.json", json.dumps([{"name": "j", "description": "Java tool.", "parameters": schema}]))
    with pytest.raises(CatalogError):
        load_catalog(path)
    repaired = load_catalog(path, lenient=True)[0].input_schema
    assert repaired == {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "value": {},
            "items": {"type": "array", "items": {"type": "number"}},
        },
    }


def test_bundled_example_catalog_is_valid() -> None:
    from toolrag.cli.quickstart import example_catalog_path

    tools = load_catalog(str(example_catalog_path()))
    assert len(tools) >= 190
    assert len({t.category for t in tools}) >= 40
    assert any(t.tenants for t in tools) and any(t.scopes for t in tools) and any(t.aliases for t in tools)
