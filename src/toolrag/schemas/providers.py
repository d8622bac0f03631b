"""What the model providers refuse in a tool's input schema, beyond JSON Schema itself.

One schema a provider refuses fails the whole request (Anthropic answers 400 for every request whose tool list
holds it: "input_schema does not support oneOf, allOf, or anyOf at the top level"), so such a tool never reaches a
provider. What can be repaired is repaired when rendering (`sendable`): a schema with no `type` gets `"type":
"object"`, and `anyOf` / `oneOf` / `allOf` at the top level over object shapes becomes one object with the
properties of all of them (the gateway still validates arguments against the tool's own schema, so nothing the
tool refuses gets through). What cannot (`provider_problems`: property names outside Anthropic's
`^[a-zA-Z0-9_.-]{1,64}$`, a combinator over shapes that are not inline objects) is left out of provider requests
(inject/formats.py), and the MCP importer quarantines the tool with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

PROPERTY_NAME = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
COMBINATORS = ("anyOf", "oneOf", "allOf")
_SHOWN = 3  # names quoted in a problem; the rest are counted


def sendable(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema as providers take it, repaired where that loses no argument the tool accepts."""
    repaired = schema if "type" in schema else {"type": "object", **schema}
    combined = [key for key in COMBINATORS if key in repaired]
    shapes = [shape for key in combined for shape in repaired[key] if isinstance(repaired[key], list)]
    if not combined or not all(_inline_object(shape) for shape in shapes):
        return repaired
    merged = {key: value for key, value in repaired.items() if key not in COMBINATORS}
    properties = dict(merged.get("properties") or {})
    for shape in shapes:
        properties.update(
            {name: value for name, value in shape.get("properties", {}).items() if name not in properties}
        )
    merged["properties"] = properties
    required = _required_of(repaired, combined)
    if required:
        merged["required"] = required
    else:
        merged.pop("required", None)
    return merged


def provider_problems(schema: dict[str, Any]) -> list[str]:
    """Why providers would refuse `schema` as a tool's input schema once repaired; empty when they take it."""
    repaired = sendable(schema)
    problems = []
    if repaired.get("type") != "object":
        problems.append(f"the top level must be an object schema, not {repaired.get('type')!r}")
    left = [key for key in COMBINATORS if key in repaired]
    if left:
        problems.append(f"{', '.join(left)} at the top level over shapes that are not inline objects")
    bad = list(dict.fromkeys(_refused_names(repaired)))
    if bad:
        shown = ", ".join(repr(name[:40]) for name in bad[:_SHOWN])
        more = f" and {len(bad) - _SHOWN} more" if len(bad) > _SHOWN else ""
        problems.append(f"property names providers refuse (letters, digits, _ . - only, up to 64): {shown}{more}")
    return problems


def _inline_object(shape: Any) -> bool:
    return (
        isinstance(shape, dict)
        and shape.get("type", "object") == "object"
        and "$ref" not in shape
        and isinstance(shape.get("properties", {}), dict)
        and not any(key in shape for key in COMBINATORS)
    )


def _required_of(schema: dict[str, Any], combined: list[str]) -> list[str]:
    """What every accepted argument object holds: the top level's required names, those of every `allOf` shape,
    and those all shapes of an `anyOf` / `oneOf` share."""
    required = list(schema.get("required") or [])
    for key in combined:
        lists = [set(shape.get("required") or []) for shape in schema[key]]
        names = set.union(*lists) if key == "allOf" else set.intersection(*lists) if lists else set()
        required += sorted(names - set(required))
    return required


def _refused_names(node: Any) -> Iterator[str]:
    """Property names providers refuse, in the schema and its subschemas (not in `default`, `examples` or `enum`
    values, which are data; schemas are depth-bounded at registration)."""
    if not isinstance(node, dict):
        return
    properties = node.get("properties")
    if isinstance(properties, dict):
        yield from (name for name in properties if not PROPERTY_NAME.fullmatch(name))
    for child in _subschemas(node):
        yield from _refused_names(child)


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_VALUES = ("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames")


def _subschemas(node: dict[str, Any]) -> Iterator[Any]:
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            yield from node[key].values()
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            yield from node[key]
    for key in _SCHEMA_VALUES:
        value = node.get(key)
        yield from value if isinstance(value, list) else [value]
