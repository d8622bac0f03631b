"""An immutable in-memory snapshot of the active tools: lexical postings, vector rows, visibility facts.

A snapshot is built from the store once (or mapped from a file, snapshot/files.py), then follows the store a change
at a time: `SearchIndex.changed` tombstones the positions of changed tools and appends their new versions, sharing
every unchanged array with the snapshot before it, and `compacted` folds the tombstones and the appended segments
away once they grow. Searches over a changed snapshot return what a snapshot built afresh returns (a property test
compares them); snapshot/ owns when each happens.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import overload

import numpy as np
import numpy.typing as npt

from toolrag.embed.base import Embedder
from toolrag.errors import ToolragError
from toolrag.model import Tool
from toolrag.search.ann import GraphSlot
from toolrag.search.derived import Derived
from toolrag.search.examples import ExampleViews
from toolrag.search.groups import group_of
from toolrag.search.lexical import BoolArray, FloatArray, IntArray, LexicalIndex
from toolrag.search.text import dense_texts, embedded_texts, lexical_text, split_identifier, tenant_views, tokenize
from toolrag.store.base import Vector

_LINEAGES = itertools.count()
_SERIALS = itertools.count()
MAX_SEGMENTS = 8  # appended vector blocks and postings segments kept apart before they are merged into one
_WORD = re.compile(r"[^\W\d_]{4,}", re.UNICODE)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def texts_by_hash(tools: Sequence[Tool]) -> dict[str, str]:
    """Every text the dense index embeds for these tools, by hash (the key of its vector in the store)."""
    return {text_hash(text): text for tool in tools for text in embedded_texts(tool)}


def surface_words(tool: Tool) -> set[str]:
    """The words of a tool's names, category, aliases and description, as written (typo expansion's vocabulary)."""
    names = (split_identifier(tool.name), split_identifier(tool.category or ""))
    return {w.lower() for text in (*names, *tool.aliases, tool.description) for w in _WORD.findall(text)}


@dataclass(frozen=True)
class PreparedTool:
    """What the index needs of one tool."""

    tool: Tool
    tokens: list[str]
    vectors: npt.NDArray[np.float32]  # one row per dense text (description, then aliases)
    examples: npt.NDArray[np.float32]  # one row per tenant view: example request, tenant description (text.py)


def prepare(tool: Tool, vectors: dict[str, Vector]) -> PreparedTool:
    """Tokens and vector rows of one tool; raises if a vector is missing (the store is then out of date)."""
    keys = [text_hash(text) for text in embedded_texts(tool)]
    missing = [key for key in keys if key not in vectors]
    if missing:
        raise ToolragError(f"tool {tool.name!r} has no embedding for the current model: rebuild the index")
    rows = np.vstack([vectors[key] for key in keys]).astype(np.float32)
    main = len(dense_texts(tool))
    return PreparedTool(tool, tokenize(lexical_text(tool)), rows[:main], rows[main:])


def example_views(prepared: Sequence[PreparedTool], first: int, dimension: int) -> ExampleViews:
    """The tenant views (example requests, tenants' descriptions) of `prepared`, the tools at positions `first`,
    `first + 1`, ..."""
    tenants = [[tenant for tenant, _ in tenant_views(p.tool)] for p in prepared]
    own = [[not e.task for e in p.tool.examples] + [True] * len(p.tool.tenant_descriptions) for p in prepared]
    return ExampleViews.of([p.examples for p in prepared], tenants, own, first, dimension)


class ToolTable(Sequence[Tool]):
    """The snapshot's tools by position. The first `base_size` come from `load` (a snapshot file's tools are
    parsed when first read, not on open), the rest were appended as objects."""

    def __init__(self, base_size: int, load: Callable[[int], Tool], appended: tuple[Tool, ...] = ()) -> None:
        self._base_size = base_size
        self._load = load
        self._appended = appended

    @classmethod
    def of(cls, tools: Sequence[Tool]) -> ToolTable:
        held = list(tools)
        return cls(len(held), held.__getitem__)

    def with_appended(self, tools: Sequence[Tool]) -> ToolTable:
        return ToolTable(self._base_size, self._load, (*self._appended, *tools))

    def __len__(self) -> int:
        return self._base_size + len(self._appended)

    @overload
    def __getitem__(self, position: int) -> Tool: ...
    @overload
    def __getitem__(self, position: slice) -> Sequence[Tool]: ...
    def __getitem__(self, position: int | slice) -> Tool | Sequence[Tool]:
        if isinstance(position, slice):
            return [self[i] for i in range(len(self))[position]]
        if position < 0:
            position += len(self)
        if not 0 <= position < len(self):
            raise IndexError(position)
        if position < self._base_size:
            return self._load(position)
        return self._appended[position - self._base_size]

    def __iter__(self) -> Iterator[Tool]:
        return (self[i] for i in range(len(self)))


@dataclass(frozen=True)
class VectorRows:
    """Every tool's vectors: a base block (possibly a read-only map of a snapshot file) and the blocks appended
    since. `row_tool[r]` is the position of row r's tool; a tool's rows are contiguous (description, then aliases)."""

    blocks: tuple[FloatArray, ...]
    row_tool: IntArray

    @classmethod
    def of(
        cls, blocks: Sequence[FloatArray], rows_per_tool: Sequence[int], dimension: int, first: int = 0
    ) -> VectorRows:
        matrix = np.vstack(blocks) if blocks else np.zeros((0, dimension), dtype=np.float32)
        if matrix.shape[1] != dimension:
            raise ToolragError(f"stored vectors have {matrix.shape[1]} dimensions, the model has {dimension}")
        row_tool = np.repeat(np.arange(first, first + len(rows_per_tool), dtype=np.int64), rows_per_tool)
        return cls((np.ascontiguousarray(matrix, dtype=np.float32),), row_tool)

    @property
    def count(self) -> int:
        return len(self.row_tool)

    def scores(self, vector: FloatArray) -> FloatArray:
        """The dot product of every row with `vector`."""
        if len(self.blocks) == 1:
            return np.asarray(self.blocks[0] @ vector, dtype=np.float32)
        return np.concatenate([block @ vector for block in self.blocks]).astype(np.float32)

    def span(self, start: int, end: int) -> FloatArray:
        """Rows start..end-1 as one array (a view when they sit in one block)."""
        pieces, offset = [], 0
        for block in self.blocks:
            lo, hi = max(start - offset, 0), min(end - offset, len(block))
            if lo < hi:
                pieces.append(block[lo:hi])
            offset += len(block)
        if len(pieces) == 1:
            return pieces[0]
        return np.vstack(pieces) if pieces else np.zeros((0, self.blocks[0].shape[1]), dtype=np.float32)

    def rows_of(self, positions: IntArray) -> IntArray:
        """The rows of the tools at `positions`, found by bisection: a tool's rows are contiguous and tools come in
        the order of their positions (a changed tool gets a new position at the end)."""
        starts = np.searchsorted(self.row_tool, positions, side="left")
        counts = np.searchsorted(self.row_tool, positions, side="right") - starts
        before = np.cumsum(counts) - counts  # rows of the earlier positions in the answer
        return (np.repeat(starts - before, counts) + np.arange(int(counts.sum()))).astype(np.int64)

    def take(self, rows: IntArray) -> FloatArray:
        if len(self.blocks) == 1:
            return self.blocks[0][rows]
        ends = np.cumsum([len(block) for block in self.blocks])
        which = np.searchsorted(ends, rows, side="right")
        out = np.empty((len(rows), self.blocks[0].shape[1]), dtype=np.float32)
        for number, block in enumerate(self.blocks):
            chosen = which == number
            if chosen.any():
                out[chosen] = block[rows[chosen] - (ends[number] - len(block))]
        return out

    def appended(self, rows: FloatArray, row_tool: IntArray) -> VectorRows:
        blocks = (*self.blocks, rows)
        if len(blocks) > MAX_SEGMENTS + 1:
            blocks = (blocks[0], np.vstack(blocks[1:]))
        return VectorRows(blocks, np.concatenate([self.row_tool, row_tool]))

    def compacted(self, keep: BoolArray, renumber: IntArray) -> VectorRows:
        """The rows of kept tools, their tools moved to `renumber[old position]` (which keeps their order)."""
        rows = keep[self.row_tool]
        matrix = np.vstack([block[rows[offset : offset + len(block)]] for block, offset in self._offsets()])
        return VectorRows((np.ascontiguousarray(matrix),), renumber[self.row_tool[rows]])

    def _offsets(self) -> list[tuple[FloatArray, int]]:
        found, offset = [], 0
        for block in self.blocks:
            found.append((block, offset))
            offset += len(block)
        return found


@dataclass(frozen=True)
class ToolGroups:
    """Which group each tool belongs to (-1: none), and the groups' description vectors (NaN rows: none)."""

    names: list[str]
    of_tool: npt.NDArray[np.int64]
    descriptions: npt.NDArray[np.float32]
    described: bool

    @classmethod
    def build(cls, keys: Sequence[str | None], vectors: dict[str, Vector], dimension: int) -> ToolGroups:
        """`keys`: each position's group (search/groups.py `group_of`)."""
        names = sorted({key for key in keys if key is not None})
        number = {name: i for i, name in enumerate(names)}
        of_tool = np.array([-1 if key is None else number[key] for key in keys], dtype=np.int64)
        return cls.with_descriptions(names, of_tool, vectors, dimension)

    @classmethod
    def with_descriptions(
        cls, names: list[str], of_tool: IntArray, vectors: dict[str, Vector], dimension: int
    ) -> ToolGroups:
        number = {name: i for i, name in enumerate(names)}
        descriptions = np.full((len(names), dimension), np.nan, dtype=np.float32)
        for name, vector in vectors.items():
            if name in number:
                descriptions[number[name]] = vector
        return cls(names, of_tool, descriptions, any(name in number for name in vectors))

    def appended(self, keys: Sequence[str | None], vectors: dict[str, Vector], dimension: int) -> ToolGroups:
        names = list(self.names)
        number = {name: i for i, name in enumerate(names)}
        for key in keys:
            if key is not None and key not in number:
                number[key] = len(names)
                names.append(key)
        ids = np.array([-1 if key is None else number[key] for key in keys], dtype=np.int64)
        return self.with_descriptions(names, np.concatenate([self.of_tool, ids]), vectors, dimension)

    def description_cosines(self, query_vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """One cosine per group with the request; NaN for groups without a description."""
        if not self.described:
            return np.full(len(self.names), np.nan, dtype=np.float32)
        return np.asarray(self.descriptions @ query_vector, dtype=np.float32)


@dataclass(frozen=True)
class Restriction:
    """What a tool asks of a principal beyond its name: scopes it must hold, tenants it must belong to."""

    scopes: tuple[str, ...]
    tenants: tuple[str, ...]


@dataclass(frozen=True)
class Neighbours:
    """Fixed requests' nearest tools (the small-talk bank's: search/calibrate.py), kept with the snapshot so a
    change does not rescan every tool: per request its nearest positions (-1: an empty slot) and cosines, best
    first, and `floor`, a bound on the cosine of every live tool not listed."""

    positions: IntArray
    cosines: FloatArray
    floor: FloatArray


@dataclass(frozen=True)
class SearchIndex:
    generation: int
    tools: ToolTable
    names: list[str]
    categories: list[str | None]
    lexical: LexicalIndex
    vectors: VectorRows
    restricted: IntArray  # positions of tools with scopes or tenant lists
    restrictions: list[Restriction]  # aligned with `restricted`
    words: Counter[str]  # surface words of the live tools, with how many tools use each
    live: BoolArray | None = None  # None: every position holds a live tool
    by_name: dict[str, int] = field(default_factory=dict)
    embedder: Embedder | None = None  # the model whose vectors these are: requests are embedded with it
    groups: ToolGroups | None = None
    neighbours: Neighbours | None = None
    examples: ExampleViews | None = None  # None: no tool has example requests
    dimension: int = 0
    base_size: int = 0  # positions in the base segment; the rest were appended since
    # Snapshots derived from one another by `changed` share a lineage: their positions mean the same tools.
    lineage: int = field(default_factory=lambda: next(_LINEAGES))
    graph: GraphSlot = field(default_factory=GraphSlot)  # the base rows' approximate index, once built
    # Unique to this object in this process, copies by `replace` included: the query cache's keys hold it. Neither
    # the generation (a snapshot opened anew keeps it) nor `id()` (a freed snapshot's address is given to the next)
    # tells two snapshots apart.
    serial: int = field(init=False, default_factory=lambda: next(_SERIALS), compare=False, repr=False)
    # What is derived from this snapshot (search/derived.py): created with it, fresh in a copy by `replace`.
    derived: Derived = field(init=False, default_factory=Derived, compare=False, repr=False)

    @classmethod
    def build(
        cls,
        generation: int,
        prepared: list[PreparedTool],
        dimension: int,
        embedder: Embedder | None = None,
        group_vectors: dict[str, Vector] | None = None,
    ) -> SearchIndex:
        """`group_vectors`: the description vectors of described groups (search/groups.py), by group name."""
        tools = [p.tool for p in prepared]
        vectors = VectorRows.of([p.vectors for p in prepared], [len(p.vectors) for p in prepared], dimension)
        restricted = [i for i, t in enumerate(tools) if t.scopes or t.tenants]
        return cls(
            generation=generation,
            tools=ToolTable.of(tools),
            names=[t.name for t in tools],
            categories=[t.category for t in tools],
            lexical=LexicalIndex.build([p.tokens for p in prepared]),
            vectors=vectors,
            restricted=np.array(restricted, dtype=np.int64),
            restrictions=[_restriction(tools[i]) for i in restricted],
            words=Counter(word for tool in tools for word in surface_words(tool)),
            by_name=name_keys([t.name for t in tools], range(len(tools))),
            embedder=embedder,
            groups=ToolGroups.build([group_of(t) for t in tools], group_vectors or {}, dimension),
            examples=example_views(prepared, 0, dimension),
            dimension=dimension,
            base_size=len(tools),
        )

    @property
    def size(self) -> int:
        """Positions, live or not: the length of every per-tool array."""
        return len(self.names)

    @property
    def live_count(self) -> int:
        return self.size if self.live is None else int(self.live.sum())

    def has_aliases(self) -> bool:
        return self.vectors.count != self.size

    def position_named(self, name: str) -> int | None:
        """The live position of the tool named `name` in any case (names are unique regardless of case)."""
        position = self.by_name.get(name.lower())
        if position is None or self.names[position].lower() != name.lower():
            return None
        return position

    def position_of(self, name: str) -> int | None:
        """The live position of the tool named exactly `name`."""
        position = self.by_name.get(name.lower())
        if position is None or self.names[position] != name:
            return None
        return position

    # -- following the store --------------------------------------------------------------------------------------

    def changed(
        self,
        generation: int,
        changed: Sequence[Tool],
        prepared: Sequence[PreparedTool],
        group_vectors: dict[str, Vector],
    ) -> SearchIndex:
        """This snapshot after `changed` (every tool written since, active or not): their old positions become
        tombstones, `prepared` (the active ones) are appended. Unchanged arrays are shared, not copied."""
        gone = [p for p in (self.position_of(tool.name) for tool in changed) if p is not None]
        live = np.ones(self.size, dtype=np.bool_) if self.live is None else self.live.copy()
        live[gone] = False
        words = self.words.copy()
        for position in gone:
            words.subtract(surface_words(self.tools[position]))
        tools = [p.tool for p in prepared]
        for tool in tools:
            words.update(surface_words(tool))
        first = self.size
        new_restricted = [first + i for i, t in enumerate(tools) if t.scopes or t.tenants]
        names = [*self.names, *(t.name for t in tools)]
        by_name = dict(self.by_name)
        for position in gone:
            for key in (self.names[position].lower(), split_identifier(self.names[position]).lower()):
                if by_name.get(key) == position:
                    del by_name[key]
        by_name.update({k: v for k, v in name_keys(names, range(first, len(names))).items() if k not in by_name})
        by_name.update({t.name.lower(): first + i for i, t in enumerate(tools)})
        rows = [len(p.vectors) for p in prepared]
        dimension = self.dimension
        appended = VectorRows.of([p.vectors for p in prepared], rows, dimension, first)
        groups = self.groups or ToolGroups.build([], {}, dimension)
        return SearchIndex(
            generation=generation,
            tools=self.tools.with_appended(tools),
            names=names,
            categories=[*self.categories, *(t.category for t in tools)],
            lexical=self.lexical.appended([p.tokens for p in prepared], MAX_SEGMENTS) if tools else self.lexical,
            vectors=self.vectors.appended(appended.blocks[0], appended.row_tool) if tools else self.vectors,
            restricted=np.concatenate([self.restricted, np.array(new_restricted, dtype=np.int64)]),
            restrictions=[*self.restrictions, *(_restriction(tools[p - first]) for p in new_restricted)],
            words=+words,
            live=np.concatenate([live, np.ones(len(tools), dtype=np.bool_)]),
            by_name=by_name,
            embedder=self.embedder,
            groups=groups.appended([group_of(t) for t in tools], group_vectors, dimension),
            neighbours=self.neighbours,
            examples=(self.examples or ExampleViews.empty(dimension)).appended(
                example_views(prepared, first, dimension)
            ),
            dimension=dimension,
            base_size=self.base_size,
            lineage=self.lineage,
            graph=self.graph,
        )

    def tombstones(self) -> int:
        return 0 if self.live is None else self.size - int(self.live.sum())

    def appended_count(self) -> int:
        """Positions appended since the last build or compaction."""
        return self.size - self.base_size

    def compacted(self) -> SearchIndex:
        """The same snapshot without tombstones, in one segment: live tools keep their order."""
        keep = np.ones(self.size, dtype=np.bool_) if self.live is None else self.live
        renumber = np.cumsum(keep) - 1
        kept = np.flatnonzero(keep).tolist()
        restricted_kept = [i for i, p in enumerate(self.restricted.tolist()) if keep[p]]
        names = [self.names[p] for p in kept]
        groups = self.groups
        if groups is not None:
            groups = ToolGroups(groups.names, groups.of_tool[keep], groups.descriptions, groups.described)
        neighbours = self.neighbours
        if neighbours is not None:
            slots = neighbours.positions
            moved = np.where(slots >= 0, renumber[np.maximum(slots, 0)], -1)
            neighbours = Neighbours(moved, neighbours.cosines, neighbours.floor)
        tools = self.tools
        return SearchIndex(
            generation=self.generation,
            tools=ToolTable(len(kept), lambda position: tools[kept[position]]),
            names=names,
            categories=[self.categories[p] for p in kept],
            lexical=self.lexical.compacted(keep, renumber),
            vectors=self.vectors.compacted(keep, renumber),
            restricted=renumber[self.restricted[restricted_kept]] if restricted_kept else np.zeros(0, np.int64),
            restrictions=[self.restrictions[i] for i in restricted_kept],
            words=self.words,
            live=None,
            by_name=name_keys(names, sorted(range(len(names)), key=names.__getitem__)),
            embedder=self.embedder,
            groups=groups,
            neighbours=neighbours,
            examples=self.examples.compacted(keep, renumber) if self.examples is not None else None,
            dimension=self.dimension,
            base_size=len(kept),
        )


def name_keys(names: Sequence[str], positions: Sequence[int] | range) -> dict[str, int]:
    """Lookup keys of tools by name: the lowercased name, and its words (`get_weather` -> `get weather`) for the
    first tool in `positions` order that has them."""
    by_name: dict[str, int] = {}
    for position in positions:
        by_name.setdefault(split_identifier(names[position]).lower(), position)
    for position in positions:
        by_name[names[position].lower()] = position
    return by_name


def _restriction(tool: Tool) -> Restriction:
    return Restriction(tuple(sorted(tool.scopes)), tuple(sorted(tool.tenants)))
