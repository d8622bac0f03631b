"""What checking one value can cost under a schema, worked out once, when the schema is registered.

A schema's size does not bound its cost: references may share subschemas (only cycles are refused, refs.py), so a
1 KB schema of `anyOf`s whose branches refer to the next level twice applies 2^depth subschemas to one value.
Expanding references and in-place applicators gives the real figure, memoized over the reference graph (linear in
the schema's size for each level of the arguments): the steps one value `level` levels deep can cost, in the unit
the validators' budget counts (validation.py). A value has one key or index, so of the subschemas that descend by
name (`properties/NAME`, `prefixItems/I`) only the costliest name counts, besides those that apply to any part
(`items`, `additionalProperties`, ...): an upper bound that does not add up a schema's hundred properties.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from toolrag.schemas.refs import Path, SchemaGraph

MAX_ARGUMENT_DEPTH = 32  # of nested objects and arrays in arguments (schemas/arguments.py refuses deeper ones)
# Keywords that walk their whole value at each application (in-place applicators do not: each subschema they
# apply costs its own steps, counted where it is applied).
_WALKING = {"properties", "required", "dependentRequired", "dependentSchemas", "dependencies", "type"}


def keyword_steps(keyword: str, value: Any) -> int:
    """The steps one application of a keyword costs: one, plus one per entry of the list or map it walks and per
    name of the lists in that map (`dependentRequired`: 33,000 names under one key were charged 2 steps)."""
    if keyword in _WALKING and isinstance(value, list | dict):
        names = sum(len(item) for item in value.values() if isinstance(item, list)) if isinstance(value, dict) else 0
        return 1 + len(value) + names
    return 1


def node_steps(node: Any) -> int:
    """The steps applying one subschema costs (its keywords; a boolean schema: one)."""
    if not isinstance(node, dict):
        return 1
    return sum(keyword_steps(keyword, value) for keyword, value in node.items())


@dataclass(frozen=True)
class Expansion:
    """The costliest value a schema can be given: `steps` for one value `level` levels deep, which enters the
    subschema at `where` (the costliest way down)."""

    steps: int
    level: int
    where: Path


def expansion(schema: dict[str, Any], graph: SchemaGraph, cap: int) -> Expansion:
    """The costliest level of `schema` (see Expansion), levels worked out until one costs more than `cap`. Counts
    are exact (Python's integers: 2^1000 is 126 bytes)."""
    own = {path: node_steps(_at(schema, path)) for path in graph.order}
    costs: list[dict[Path, int]] = []  # per level: what a value that many levels below a subschema's value costs
    seen: set[tuple[int, ...]] = set()
    for level in range(MAX_ARGUMENT_DEPTH + 1):
        below = costs[-1] if costs else {}
        cost: dict[Path, int] = {}
        for path in reversed(graph.order):  # what a subschema applies in place comes first
            entering = own[path] if level == 0 else _descending(graph.descending.get(path, ()), below)
            cost[path] = entering + sum(cost[child] for child in graph.in_place.get(path, ()))
        costs.append(cost)
        figures = tuple(cost.values())
        # a level is worked out from the one above alone: once one repeats (a recursive schema), so do the next
        if not cost[()] or cost[()] > cap or figures in seen:
            break
        seen.add(figures)
    level = max(range(len(costs)), key=lambda number: costs[number][()])
    return Expansion(costs[level][()], level, _costliest_way(graph, costs, level))


def _descending(children: Any, below: dict[Path, int]) -> int:
    """What a value one level down costs through these descending subschemas: all of those that apply to any
    part, and the costliest name's."""
    by_name: defaultdict[object, int] = defaultdict(int)
    anywhere = 0
    for child in children:
        if _named(child):
            by_name[child[-1]] += below[child]
        else:
            anywhere += below[child]
    return anywhere + max(by_name.values(), default=0)


def _named(child: Path) -> bool:
    """Whether a descending subschema applies to one property or item only (properties/NAME, prefixItems/I)."""
    return (len(child) >= 2 and child[-2] in ("properties", "prefixItems")) or isinstance(child[-1], int)


def _costliest_way(graph: SchemaGraph, costs: list[dict[Path, int]], level: int) -> Path:
    """The subschema the costliest value enters: from the root, at each level the costliest descending subschema
    of those applied in place."""
    where: Path = ()
    for below in range(level - 1, -1, -1):
        applied = _in_place_closure(graph, where)
        where = max(
            (child for path in applied for child in graph.descending.get(path, ())),
            key=lambda child: costs[below][child],
        )
    return where


def _in_place_closure(graph: SchemaGraph, start: Path) -> set[Path]:
    seen = {start}
    pending = [start]
    while pending:
        for child in graph.in_place.get(pending.pop(), ()):
            if child not in seen:
                seen.add(child)
                pending.append(child)
    return seen


def _at(schema: Any, path: Path) -> Any:
    node = schema
    for part in path:
        node = node[part]
    return node
