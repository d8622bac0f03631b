"""References in tool schemas (`$ref`), checked when a tool is registered: local, resolvable, and without cycles.

A schema is untrusted: a `$ref` to a URL would make the server fetch it (jsonschema retrieves remote references on
its own), and a reference cycle that never descends into the argument (`{"$ref": "#"}` at the root, or two
definitions that refer to each other through `allOf`) recurses forever. So every reference must point inside the
schema itself (`#/...`, `#anchor`, or the root's own `$id`), at a schema, and the references and in-place
applicators (allOf, anyOf, oneOf, not, if/then/else, dependentSchemas) must not form a cycle. A recursive schema
that descends (a tree whose `children` items refer back to the node) is fine: every turn consumes a level of the
argument, whose depth is bounded.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from toolrag.schemas.drafts import DATA_KEYWORDS

Path = tuple[str | int, ...]

# Keywords whose value is a subschema applied to the same value (in place), or a list or map of them.
_IN_PLACE = {"not", "if", "then", "else"}
_IN_PLACE_LISTS = {"allOf", "anyOf", "oneOf"}
_IN_PLACE_MAPS = {"dependentSchemas", "dependencies"}  # draft-07's `dependencies` also holds lists of names
# Keywords whose subschemas apply to a part of the value (they descend into it).
_DESCENDING = {
    "items",
    "additionalItems",
    "additionalProperties",
    "propertyNames",
    "contains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
}
_DESCENDING_LISTS = {"prefixItems"}
_DESCENDING_MAPS = {"properties", "patternProperties"}
_DEFINITIONS = {"$defs", "definitions"}
_REFERENCES = ("$ref", "$dynamicRef", "$recursiveRef")


class BadReference(ValueError):
    """A reference that would be fetched, that resolves to nothing, or that takes part in a cycle."""


@dataclass
class SchemaGraph:
    """The subschemas reachable from the root, each with those it applies to the same value (`in_place`: in-place
    applicators and reference targets, one entry per occurrence) and to parts of the value (`descending`).
    `order` lists them so that every subschema comes before those it applies in place (a topological order)."""

    in_place: dict[Path, list[Path]] = field(default_factory=dict)
    descending: dict[Path, list[Path]] = field(default_factory=dict)  # properties/NAME, items, prefixItems/I, ...
    order: list[Path] = field(default_factory=list)


def check_references(schema: dict[str, Any]) -> SchemaGraph:
    """Raise BadReference unless every reference of `schema` is local and resolvable and none is part of a cycle
    that applies in place; the graph of its subschemas otherwise."""
    root_id = schema.get("$id") if isinstance(schema.get("$id"), str) else None
    anchors = _anchors(schema)
    graph = SchemaGraph()
    edges = graph.in_place
    pending: list[Path] = [()]
    while pending:
        path = pending.pop()
        if path in edges:
            continue
        node = _at(schema, path)
        edges[path] = []
        graph.descending[path] = []
        if not isinstance(node, dict):
            continue
        if path and any(isinstance(node.get(key), str) for key in ("$id", "id")) and _has_reference(node):
            raise BadReference(
                f"{_where(path)}: references inside an embedded schema with its own $id are not supported"
            )
        for kind, child in _children(node, path):
            if kind == "in place":
                edges[path].append(child)
            elif kind == "descends":
                graph.descending[path].append(child)
            pending.append(child)
        for key in _REFERENCES:
            reference = node.get(key)
            if reference is None:
                continue
            if not isinstance(reference, str):
                raise BadReference(f"{_where(path)}: {key} must be a string")
            target = _target(schema, reference, anchors, root_id, path, key)
            edges[path].append(target)
            pending.append(target)
    graph.order = _refuse_cycles(edges)
    return graph


def _anchors(schema: dict[str, Any]) -> dict[str, Path]:
    """Where each `$anchor` (and `$dynamicAnchor`) of the document is. A name two subschemas declare is refused:
    the validator resolves it to one of them and the checks at registration would read the other (a 2^22 tree
    behind a duplicate anchor was costed at 4 steps, and a cycle through one passed)."""
    found: dict[str, Path] = {}
    stack: list[tuple[Path, Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key in ("$anchor", "$dynamicAnchor"):
                name = node.get(key)
                if isinstance(name, str) and found.setdefault(name, path) != path:
                    raise BadReference(
                        f"{_where(path)}: the anchor {name[:80]!r} is declared at {_where(found[name])} too"
                    )
            stack.extend(((*path, key), value) for key, value in node.items() if key not in DATA_KEYWORDS)
        elif isinstance(node, list):
            stack.extend(((*path, i), value) for i, value in enumerate(node))
    return found


def _target(
    schema: dict[str, Any], reference: str, anchors: dict[str, Path], root_id: str | None, path: Path, key: str
) -> Path:
    base, hash_sign, fragment = reference.partition("#")
    if base and base != root_id:
        raise BadReference(
            f"{_where(path)}: {key} {reference[:120]!r} points outside the schema (only '#/...' references are"
            " resolved; nothing is ever fetched)"
        )
    if not hash_sign or not fragment:
        return ()
    if not fragment.startswith("/"):
        if fragment not in anchors:
            raise BadReference(f"{_where(path)}: {key} {reference[:120]!r} names no anchor of the schema")
        return anchors[fragment]
    target: list[str | int] = []
    node: Any = schema
    for token in fragment[1:].split("/"):
        part = unquote(token).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
            target.append(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
            target.append(int(part))
        else:
            raise BadReference(f"{_where(path)}: {key} {reference[:120]!r} resolves to nothing in the schema")
    if not isinstance(node, dict | bool):
        raise BadReference(f"{_where(path)}: {key} {reference[:120]!r} does not point at a schema")
    return tuple(target)


def _children(node: dict[str, Any], path: Path) -> Iterator[tuple[str, Path]]:
    """("in place" or "descends", path) of each subschema of a schema object."""
    for key, value in node.items():
        if key in _IN_PLACE or key in _DESCENDING or key in _DEFINITIONS:
            if key in _DEFINITIONS and isinstance(value, dict):
                yield from (("definition", (*path, key, name)) for name in value)
            elif isinstance(value, dict | bool):
                yield ("in place" if key in _IN_PLACE else "descends", (*path, key))
            elif key == "items" and isinstance(value, list):  # draft-04 to 2019-09 tuple form
                yield from (("descends", (*path, key, i)) for i in range(len(value)))
        elif key in _IN_PLACE_LISTS | _DESCENDING_LISTS and isinstance(value, list):
            kind = "in place" if key in _IN_PLACE_LISTS else "descends"
            yield from ((kind, (*path, key, i)) for i in range(len(value)))
        elif key in _IN_PLACE_MAPS | _DESCENDING_MAPS and isinstance(value, dict):
            kind = "in place" if key in _IN_PLACE_MAPS else "descends"
            yield from ((kind, (*path, key, name)) for name in value)


def _refuse_cycles(edges: dict[Path, list[Path]]) -> list[Path]:
    """Depth-first search over the in-place edges (references included), without recursion; the subschemas in
    topological order (each before those it applies in place)."""
    finished: list[Path] = []
    state: dict[Path, int] = {}  # 1: on the current path, 2: done
    for start in edges:
        if state.get(start):
            continue
        stack: list[tuple[Path, Iterator[Path]]] = [(start, iter(edges.get(start, [])))]
        state[start] = 1
        while stack:
            path, following = stack[-1]
            step = next(following, None)
            if step is None:
                state[path] = 2
                finished.append(path)
                stack.pop()
            elif state.get(step) == 1:
                raise BadReference(f"{_where(step)}: a reference cycle that never descends into the value")
            elif not state.get(step):
                state[step] = 1
                stack.append((step, iter(edges.get(step, []))))
    finished.reverse()
    return finished


def _has_reference(node: dict[str, Any]) -> bool:
    stack: list[Any] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if any(key in item for key in _REFERENCES):
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _at(schema: Any, path: Path) -> Any:
    node = schema
    for part in path:
        node = node[part]
    return node


def _where(path: Path) -> str:
    return "/".join(str(part) for part in path) or "(root)"
