"""Tools that need other tools: a search that returns a tool brings along what it requires (`Tool.requires`), so an
agent gets the whole set a task needs, not the one tool the request is about.

Prerequisites are walked depth first from each target, within a depth and a number of tools, and placed before the
tool that needs them: the order an agent calls them in. Only tools the principal may use are walked, added or
named: a requirement on a tool hidden from the principal is passed over as if it were not declared, and the tools
it requires in turn are not reached through it. Required tools come before optional ones when the budget is short.

What a tool's requirements name is resolved to positions once per snapshot (`requirements`, kept in the snapshot's
derived state, search/derived.py); which of them a principal may use is checked per search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from toolrag.model import Requirement
from toolrag.search.derived import Slot
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray

MAX_DEPTH = 3  # prerequisites of prerequisites of prerequisites
Resolved = tuple[tuple[int | None, Requirement], ...]  # each requirement with its tool's live position (None: none)
# What a tool (by position) requires: its declared requirements by default; the pipeline adds the inferred ones
# (search/inferred.py), already resolved to producers the principal may use.
Requires = Callable[[int], Resolved]
# Per snapshot and position of the tool that requires; as many as the snapshot has tools that were asked about.
REQUIREMENTS: Slot[Resolved] = Slot("declared requirements by position", max_keys=None)


def requirements(index: SearchIndex, position: int) -> Resolved:
    """The requirements the tool at `position` declares (`Tool.requires`), each with the live position of the tool
    it names, resolved once per snapshot."""

    def resolve() -> Resolved:
        return tuple((index.position_named(r.tool), r) for r in index.tools[position].requires)

    return index.derived.get(REQUIREMENTS, position, resolve)


@dataclass(frozen=True)
class Prerequisite:
    """One tool of a set needing another: `needed_by` requires `position`."""

    position: int
    needed_by: int
    requirement: Requirement


@dataclass(frozen=True)
class SetPlan:
    """A set in the order to call it: each position with the requirement that placed it (None: retrieved), and
    every requirement between two tools of the set."""

    entries: list[tuple[int, Prerequisite | None]]
    edges: list[Prerequisite]


def with_prerequisites(
    index: SearchIndex,
    targets: Sequence[int],
    usable: BoolArray | None,
    budget: int,
    requires: Requires | None = None,
) -> SetPlan:
    """`targets` (positions, in order) with what they require, at most `budget` tools in all (the targets are kept
    whatever the budget): first the required tools, then, room left, the optional ones with what they require;
    each level breadth first, taking the targets' requirements in turn, so one long list does not use up the
    budget. `requires`: what a tool requires (None: what it declares)."""
    requires = requires or (lambda position: requirements(index, position))
    chosen = dict.fromkeys(targets)
    for with_optional in (False, True):
        frontier = list(chosen)
        for _ in range(MAX_DEPTH):
            frontier = _next_level(index, requires, frontier, usable, budget, chosen, with_optional)
    edges = [
        Prerequisite(needed, position, requirement)
        for position in chosen
        for named, requirement in requires(position)
        if (needed := _usable(named, usable)) is not None and needed in chosen
    ]
    return SetPlan(_ordered(targets, edges), edges)


def _next_level(
    index: SearchIndex,
    requires_of: Requires,
    frontier: list[int],
    usable: BoolArray | None,
    budget: int,
    chosen: dict[int, None],
    with_optional: bool,
) -> list[int]:
    """The tools the frontier's requirements add to `chosen` (in place), taken in turn across the frontier."""
    added: list[int] = []
    lists = [requires_of(position) for position in frontier]
    for rank in range(max((len(requires) for requires in lists), default=0)):
        for requires in lists:
            if rank >= len(requires) or len(chosen) >= budget:
                continue
            named, requirement = requires[rank]
            needed = _usable(named, usable)
            if needed is None or needed in chosen or (requirement.optional and not with_optional):
                continue
            chosen[needed] = None
            added.append(needed)
    return added


def _usable(position: int | None, usable: BoolArray | None) -> int | None:
    return None if position is None or (usable is not None and not usable[position]) else position


def _ordered(targets: Sequence[int], edges: list[Prerequisite]) -> list[tuple[int, Prerequisite | None]]:
    """Each tool after the tools it needs, deepest first; a tool comes once, where it is first needed, with the
    requirement that placed it there. A target placed before a tool that needs it (it was retrieved itself) says so
    too, so an agent knows why to call it first. In a cycle the tool met again is not placed twice, nor said to be
    needed."""
    needs: dict[int, list[Prerequisite]] = {}
    needed_by: dict[int, list[Prerequisite]] = {}
    for edge in edges:
        needs.setdefault(edge.needed_by, []).append(edge)
        needed_by.setdefault(edge.position, []).append(edge)
    placed: set[int] = set()
    ordered: list[tuple[int, Prerequisite | None]] = []

    def place(position: int, via: Prerequisite | None) -> None:
        placed.add(position)
        for edge in needs.get(position, []):
            if edge.position not in placed:
                place(edge.position, edge)
        later = [edge for edge in needed_by.get(position, []) if edge.needed_by not in placed]
        later.sort(key=lambda edge: edge.requirement.optional)  # a requirement says more than an option
        ordered.append((position, via or next(iter(later), None)))

    for target in targets:
        if target not in placed:
            place(target, None)
    return ordered
