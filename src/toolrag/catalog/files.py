"""Catalog files: a JSON array (or `{"tools": [...]}`), JSON Lines, or YAML, of tool definitions.

Besides toolrag's own field names, common spellings are accepted: `parameters` / `inputSchema` for the input
schema (OpenAI and MCP), and the `{"id", "name", "description", "parameters", "category"}` lines of the
benchmark format, whose unique `id` becomes the tool name. Every entry is validated before any is returned,
so a bad entry fails the whole file with its position named, and nothing is imported.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolrag.errors import CatalogError, InvalidToolError
from toolrag.jsontext import loads
from toolrag.model import SYNC_FIELDS, SYNCED_SOURCE_PREFIX, Tool, check_schema_depth

_SCHEMA_KEYS = ("input_schema", "inputSchema", "parameters")
_IGNORED_KEYS = ("id", "relevant")


MAX_YAML_VALUES = 1_000_000  # values a YAML catalog may stand for, its aliases followed


def load_catalog(path: str | Path, source: str = "file", lenient: bool = False) -> list[Tool]:
    """Read and validate a catalog file. `lenient` repairs language-specific schema types (see `repair_schema`)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CatalogError(f"{path}: no such file", path=path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"{path}: cannot read: {exc}", path=path) from None
    entries = _parse(path, text)
    tools = []
    for number, entry in entries:
        try:
            tools.append(tool_from_entry(entry, source, lenient))
        except InvalidToolError as exc:
            line = number if path.suffix.lower() == ".jsonl" else None
            raise CatalogError(f"{path}: entry {number}: {exc}", path=path, line=line) from None
    names = [t.name for t in tools]
    if len(set(names)) != len(names):
        duplicate = next(n for n in names if names.count(n) > 1)
        raise CatalogError(f"{path}: tool name {duplicate!r} appears more than once", path=path)
    return tools


def _parse(path: Path, text: str) -> list[tuple[int, Any]]:
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return _parse_lines(path, text)
    data = _parse_yaml(path, text) if suffix in (".yaml", ".yml") else _parse_json(path, text)
    if isinstance(data, dict) and "tools" in data:
        data = data["tools"]
    if not isinstance(data, list):
        raise CatalogError(f"{path}: expected a list of tools (or an object with a 'tools' list)", path=path)
    return list(enumerate(data, 1))


def _parse_lines(path: Path, text: str) -> list[tuple[int, Any]]:
    entries = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            entries.append((number, loads(line)))
        except json.JSONDecodeError as exc:
            where = f"line {number} column {exc.colno}"
            raise CatalogError(f"{path}: invalid JSON at {where}: {exc.msg}", path=path, line=number) from None
    return entries


def _parse_json(path: Path, text: str) -> Any:
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        suffix = path.suffix.lower()
        if suffix not in (".json", ""):  # a .csv or .txt that is not JSON either: name the formats
            raise CatalogError(
                f"{path}: a catalog is JSON (.json), JSON Lines (.jsonl) or YAML (.yaml, .yml), and this {suffix}"
                " file is none of them",
                path=path,
            ) from None
        where = f"line {exc.lineno} column {exc.colno}"
        raise CatalogError(f"{path}: invalid JSON at {where}: {exc.msg}", path=path, line=exc.lineno) from None


def _parse_yaml(path: Path, text: str) -> Any:
    """YAML's own message spans several lines (the context, a copy of the line, a caret): one line is enough. Aliases
    are followed only as far as MAX_YAML_VALUES values: a few hundred bytes of anchors, each a list of ten aliases of
    the one before, stand for billions of values, which the checks after loading walk one by one."""
    import yaml

    loader: yaml.SafeLoader | None = None
    try:
        loader = yaml.SafeLoader(text)  # reads the text's characters at once: a control character is an error here
        node = loader.get_single_node()
        if node is None:
            return None
        if _values_in(node, {}, set()) > MAX_YAML_VALUES:
            raise CatalogError(
                f"{path}: its YAML aliases stand for more than {MAX_YAML_VALUES:,} values, or for themselves: refused",
                path=path,
            )
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        if mark is None:
            raise CatalogError(f"{path}: invalid YAML: {exc.problem or exc.context}", path=path) from None
        where, problem = f"line {mark.line + 1} column {mark.column + 1}", exc.problem or exc.context
        raise CatalogError(f"{path}: invalid YAML at {where}: {problem}", path=path, line=mark.line + 1) from None
    except yaml.YAMLError as exc:
        raise CatalogError(f"{path}: invalid YAML: {' '.join(str(exc).split())}", path=path) from None
    except RecursionError:
        raise CatalogError(f"{path}: invalid YAML: nested too deeply", path=path) from None
    finally:
        if loader is not None:
            loader.dispose()


def _values_in(node: Any, counted: dict[int, int], open_nodes: set[int]) -> int:
    """How many values `node` stands for with its aliases followed (each node counted once, then reused);
    MAX_YAML_VALUES + 1 for a node that contains itself."""
    key = id(node)
    if key in counted:
        return counted[key]
    if key in open_nodes:
        return MAX_YAML_VALUES + 1
    open_nodes.add(key)
    children = node.value if isinstance(node.value, list) else []
    items = [part for child in children for part in (child if isinstance(child, tuple) else (child,))]
    total = 1
    for item in items:
        total += _values_in(item, counted, open_nodes)
        if total > MAX_YAML_VALUES:
            break
    open_nodes.discard(key)
    counted[key] = total
    return total


def tool_from_entry(entry: Any, source: str = "file", lenient: bool = False) -> Tool:
    """One catalog entry -> Tool, accepting the common spellings of the schema field."""
    if not isinstance(entry, dict):
        raise InvalidToolError(f"expected an object, got {type(entry).__name__}")
    if synced := sorted(key for key in SYNC_FIELDS if entry.get(key)):
        # A forged source value would go live unreviewed when an admin returns the field to its source's value.
        raise InvalidToolError(f"{', '.join(synced)}: written by MCP syncs only, never by a catalog")
    if str(entry.get("source", "")).startswith(SYNCED_SOURCE_PREFIX):
        # Nor may a catalog pass its tool off as an MCP server's, whose values syncs record as the source's.
        raise InvalidToolError(f"source {entry['source']!r}: written by MCP syncs only, never by a catalog")
    data = {k: v for k, v in entry.items() if k not in _IGNORED_KEYS and k not in _SCHEMA_KEYS}
    if "id" in entry and "name" in entry and entry["id"] != entry["name"]:
        data["name"] = entry["id"]  # benchmark format: ids are unique, names need not be
    schema = next((entry[k] for k in _SCHEMA_KEYS if k in entry), None)
    if schema is not None:
        data["input_schema"] = repair_schema(schema, str(data.get("name", "?"))) if lenient else schema
    data.setdefault("source", source)
    return Tool.parse(data)


_TYPE_SPELLINGS = {
    "str": "string",
    "String": "string",
    "char": "string",
    "text": "string",
    "int": "integer",
    "Integer": "integer",
    "long": "integer",
    "Long": "integer",
    "short": "integer",
    "float": "number",
    "double": "number",
    "Float": "number",
    "Double": "number",
    "Number": "number",
    "bool": "boolean",
    "Boolean": "boolean",
    "dict": "object",
    "Object": "object",
    "HashMap": "object",
    "Map": "object",
    "list": "array",
    "tuple": "array",
    "Array": "array",
    "ArrayList": "array",
    "List": "array",
    "Set": "array",
}
_JSON_TYPES = {"string", "integer", "number", "boolean", "object", "array", "null"}


def repair_schema(schema: Any, tool_name: str = "?", what: str = "input schema") -> Any:
    """Map language-specific type names (`String`, `dict`, `float`, `HashMap`) to JSON Schema types and drop
    types JSON Schema does not know (`any`), so catalogs written for other function-calling dialects import.
    A schema nested deeper than any real one is refused first (InvalidToolError), before the recursion reads it."""
    check_schema_depth(schema, tool_name, what)
    return _repaired(schema)


def _repaired(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_repaired(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    repaired = {key: _repaired(value) for key, value in schema.items()}
    kind = repaired.get("type")
    if isinstance(kind, str) and kind not in _JSON_TYPES:
        mapped = _TYPE_SPELLINGS.get(kind)
        if mapped is None:
            del repaired["type"]
        else:
            repaired["type"] = mapped
    return repaired
