"""Tools that need other tools: a search that returns a tool brings along what it requires (`Tool.requires`), so an
agent gets the whole set a task needs, not the one tool the request is about.

Each retrieved tool comes with its whole required closure (as deep as declared, nearest first) before the next
one's, likeliest first, then optional requirements, within a room of tools and prompt tokens (`Room`); what does not
fit is named, for the agent to ask for. Prerequisites are placed before the tool that needs them: the order an
agent calls them in. Only tools the principal may use are walked, added or named: a requirement on a tool hidden
from the principal is passed over as if it were not declared, and the tools it requires in turn are not reached
through it.

What a tool's requirements name is resolved to positions once per snapshot (`requirements`, kept in the snapshot's
derived state, search/derived.py); which of them a principal may use is checked per search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from toolrag.model import Requirement
from toolrag.search.derived import Slot
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray

# Tools of one closure walked at most: far more than any set takes (limits.MAX_SET_TOOLS), so what is left to ask
# for can be said, and a cycle or a huge declared graph costs a bounded walk.
MAX_CLOSURE = 64
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
    """A set in the order to call it: each position with the requirement that placed it (None: retrieved), every
    requirement between two tools of the set, and per target what it requires that did not fit (nearest first)."""

    entries: list[tuple[int, Prerequisite | None]]
    edges: list[Prerequisite]
    left: dict[int, list[int]] = field(default_factory=dict)


@dataclass
class Room:
    """What a set may still take: `closure_tools` at most with the targets' required closures, `extra_tools` with
    optional requirements, and `tokens` of full definitions for what is added (`cost(position)`; None: not
    counted). The targets always stay, and count from their turn on (or when an earlier target's closure reaches
    them), their tokens never counted: a less likely target comes after the likelier one's closure, even past
    `closure_tools`."""

    closure_tools: int
    extra_tools: int
    tokens: int | None = None
    cost: Callable[[int], int] = lambda position: 0
    taken: int = 0
    spent: int = 0

    def fits(self, positions: Sequence[int], closure: bool) -> bool:
        limit = self.closure_tools if closure else self.extra_tools
        if self.taken + len(positions) > limit:
            return False
        return self.tokens is None or self.spent + sum(self.cost(p) for p in positions) <= self.tokens

    def take(self, positions: Sequence[int], counted: bool = True) -> None:
        self.taken += len(positions)
        if self.tokens is not None and counted:
            self.spent += sum(self.cost(p) for p in positions)


def with_prerequisites(
    index: SearchIndex,
    targets: Sequence[int],
    usable: BoolArray | None,
    room: Room,
    requires: Requires | None = None,
) -> SetPlan:
    """`targets` (positions, likeliest first; all kept) with what they require, within `room`: each target's whole
    required closure (as deep as declared, nearest first) before the next target's, so the tool a request is most
    likely about arrives with its chain before anything else spends the room; then the optional requirements, each
    with its own closure. What a target requires and does not fit is left to ask for (`SetPlan.left`).
    `requires`: what a tool requires (None: what it declares)."""
    requires = requires or (lambda position: requirements(index, position))
    chosen: dict[int, None] = {}
    retrieved = set(targets)
    left: dict[int, list[int]] = {}
    for target in targets:
        if target not in chosen:  # what was retrieved is delivered whatever it costs, counted as it comes: a less
            chosen[target] = None  # likely target takes no room the likelier one's closure needs
            room.take([target], counted=False)
        missing = [p for p in _closure(requires, target, usable) if p not in chosen]
        fitting = 0
        while fitting < len(missing) and (missing[fitting] in retrieved or room.fits([missing[fitting]], closure=True)):
            room.take([missing[fitting]], counted=missing[fitting] not in retrieved)  # a retrieved one comes anyway
            chosen[missing[fitting]] = None
            fitting += 1
        if fitting < len(missing):
            left[target] = missing[fitting:]
    for position in list(chosen):
        for named, requirement in requires(position):
            needed = _usable(named, usable)
            if not requirement.optional or needed is None or needed in chosen:
                continue
            whole = [needed, *(p for p in _closure(requires, needed, usable) if p not in chosen)]
            if room.fits(whole, closure=False):
                room.take(whole)
                chosen.update(dict.fromkeys(whole))
    edges = [
        Prerequisite(needed, position, requirement)
        for position in chosen
        for named, requirement in requires(position)
        if (needed := _usable(named, usable)) is not None and needed in chosen
    ]
    return SetPlan(_ordered(targets, edges), edges, left)


def closure_edges(requires: Requires, start: int, usable: BoolArray | None) -> list[Prerequisite]:
    """What `start` requires and what that requires, required edges only, breadth first (the nearest first), each
    tool once with the requirement that first reached it (a cycle is walked once), at most MAX_CLOSURE tools."""
    seen = {start}
    found: list[Prerequisite] = []
    frontier = [start]
    while frontier and len(found) < MAX_CLOSURE:
        following = []
        for position in frontier:
            for named, requirement in requires(position):
                needed = _usable(named, usable)
                if needed is None or requirement.optional or needed in seen:
                    continue
                seen.add(needed)
                found.append(Prerequisite(needed, position, requirement))
                following.append(needed)
        frontier = following
    return found[:MAX_CLOSURE]


def _closure(requires: Requires, start: int, usable: BoolArray | None) -> list[int]:
    return [edge.position for edge in closure_edges(requires, start, usable)]


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
