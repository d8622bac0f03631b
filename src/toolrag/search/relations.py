"""Tools that need other tools: a search that returns a tool brings along what it requires (`Tool.requires`), so an
agent gets the whole set a task needs, not the one tool the request is about.

Prerequisites are walked depth first from each target, within a depth and a number of tools, and placed before the
tool that needs them: the order an agent calls them in. Only tools the principal may use are walked, added or
named: a requirement on a tool hidden from the principal is passed over as if it were not declared, and the tools
it requires in turn are not reached through it. Required tools come before optional ones when the budget is short.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from toolrag.model import Requirement
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray

MAX_DEPTH = 3  # prerequisites of prerequisites of prerequisites


@dataclass(frozen=True)
class Prerequisite:
    """A tool added to a set because another one in it needs it."""

    position: int
    needed_by: int  # the position of the tool that needs it
    requirement: Requirement


def with_prerequisites(
    index: SearchIndex, targets: Sequence[int], usable: BoolArray | None, budget: int
) -> list[tuple[int, Prerequisite | None]]:
    """`targets` (positions, in order) with the tools they require placed before each, at most `budget` tools in
    all; the targets are kept whatever the budget. Optional requirements are added only when every required one
    fits. Each entry: a position and why it is there (None: a target no tool of the set needs)."""
    required = _walk(index, targets, usable, budget, set(targets), optional=False)
    chosen = set(targets) | {p.position for p in required}
    optional = _walk(index, targets, usable, budget, chosen, optional=True)
    return _ordered(targets, [*required, *optional])


def _walk(
    index: SearchIndex,
    targets: Sequence[int],
    usable: BoolArray | None,
    budget: int,
    chosen: set[int],
    optional: bool,
) -> list[Prerequisite]:
    """What the set's tools need, breadth first so that a budget keeps the nearest: the required requirements, or
    with `optional` the optional ones. A tool already in `chosen` (which grows) is an edge; a new one is added only
    while the set is under `budget`."""
    found: list[Prerequisite] = []
    frontier, walked = list(targets), set(targets)
    for _ in range(MAX_DEPTH):
        following = []
        for position in frontier:
            for requirement in index.tools[position].requires:
                needed = _usable_position(index, requirement.tool, usable)
                # The required walk also keeps an optional edge to a tool already in the set: it orders the set.
                kept = requirement.optional == optional or (not optional and needed in chosen)
                if needed is None or not kept:
                    continue
                if needed not in chosen:
                    if len(chosen) >= budget:
                        continue
                    chosen.add(needed)
                found.append(Prerequisite(needed, position, requirement))
                if needed not in walked:
                    walked.add(needed)
                    following.append(needed)
        frontier = following
    return found


def _usable_position(index: SearchIndex, name: str, usable: BoolArray | None) -> int | None:
    position = index.by_name.get(name.lower())
    if position is None or index.names[position].lower() != name.lower():
        return None
    if usable is not None and not usable[position]:
        return None
    return position


def _ordered(targets: Sequence[int], edges: list[Prerequisite]) -> list[tuple[int, Prerequisite | None]]:
    """Each tool after the tools it needs, deepest first; a tool comes once, where it is first needed, with the
    first edge that reached it."""
    needs: dict[int, list[Prerequisite]] = {}
    reason: dict[int, Prerequisite] = {}
    for edge in edges:
        needs.setdefault(edge.needed_by, []).append(edge)
        reason.setdefault(edge.position, edge)
    placed: set[int] = set()
    ordered: list[tuple[int, Prerequisite | None]] = []

    def place(position: int) -> None:
        placed.add(position)
        for edge in needs.get(position, []):
            if edge.position not in placed:
                place(edge.position)
        ordered.append((position, reason.get(position)))

    for target in targets:
        if target not in placed:
            place(target)
    return ordered
