"""What checking one value can cost under a schema, worked out once, when the schema is registered.

A schema's size does not bound its cost: references may share subschemas (only cycles are refused, refs.py), so a
1 KB schema of `anyOf`s whose branches refer to the next level twice applies 2^depth subschemas to one value.
Counting walks instead of nodes gives the real figure: how many times each subschema can be applied to one value
`level` levels deep in the arguments, with references and in-place applicators expanded (memoized over the
reference graph: linear in the schema's size per level). Each application costs its keywords' steps, the unit the
validators' budget counts in (validation.py), so the figure bounds the steps one value can take.
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
    """The steps one application of a keyword costs: one, plus one per entry of the list or map it walks."""
    if keyword in _WALKING and isinstance(value, list | dict):
        return 1 + len(value)
    return 1


def node_steps(node: Any) -> int:
    """The steps applying one subschema costs (its keywords; a boolean schema: one)."""
    if not isinstance(node, dict):
        return 1
    return sum(keyword_steps(keyword, value) for keyword, value in node.items())


@dataclass(frozen=True)
class Expansion:
    """The costliest value a schema can be given: `steps` for one value `level` levels deep, where the subschema
    at `where` is applied `times` times (the one applied most often)."""

    steps: int
    level: int
    where: Path
    times: int


def expansion(schema: dict[str, Any], graph: SchemaGraph, cap: int) -> Expansion:
    """The costliest level of `schema` (see Expansion), counting stopped once past `cap` (the figures are then a
    lower bound above it: enough to refuse, and no arithmetic on 2^1000)."""
    nodes = {path: _at(schema, path) for path in graph.order}
    own = {path: node_steps(node) for path, node in nodes.items()}
    costliest = Expansion(0, 0, (), 0)
    entering: dict[Path, int] = {(): 1}  # how many times each subschema is entered at this level
    for level in range(MAX_ARGUMENT_DEPTH + 1):
        applied = _expanded(entering, graph, cap)
        steps = min(sum(times * own[path] for path, times in applied.items()), cap + 1)
        if steps > costliest.steps:
            where, times = max(applied.items(), key=lambda item: item[1])
            costliest = Expansion(steps, level, where, times)
        if steps > cap:
            break
        entering = defaultdict(int)
        for path, times in applied.items():
            for child in graph.descending.get(path, ()):
                entering[child] = min(entering[child] + times, cap + 1)
        if not entering:
            break
    return costliest


def _expanded(entering: dict[Path, int], graph: SchemaGraph, cap: int) -> dict[Path, int]:
    """How many times each subschema applies to a value entering `entering`'s subschemas: the walks along in-place
    edges, summed in topological order (each subschema's count is final before it passes it on)."""
    applied: defaultdict[Path, int] = defaultdict(int, entering)
    for path in graph.order:
        times = applied.get(path)
        if not times:
            continue
        for child in graph.in_place.get(path, ()):
            applied[child] = min(applied[child] + times, cap + 1)
    return dict(applied)


def _at(schema: Any, path: Path) -> Any:
    node = schema
    for part in path:
        node = node[part]
    return node
