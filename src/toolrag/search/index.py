"""An immutable in-memory snapshot of the active tools: lexical postings, vector matrix, visibility facts.

Snapshots are rebuilt from the store when its generation moves; per-tool work (tokenizing, loading vectors) is
kept between snapshots by content hash, so a change to one tool re-does the work for that tool only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from toolrag.embed.base import Embedder
from toolrag.errors import ToolragError
from toolrag.model import Tool
from toolrag.search.groups import group_of
from toolrag.search.lexical import LexicalIndex
from toolrag.search.text import dense_texts, lexical_text, split_identifier, tokenize
from toolrag.store.base import Vector


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PreparedTool:
    """What the index needs of one tool, computed once per content hash."""

    tool: Tool
    tokens: list[str]
    vectors: npt.NDArray[np.float32]  # one row per dense text (description, then aliases)
    text_hashes: list[str]  # of those texts, row for row


@dataclass(frozen=True)
class ToolGroups:
    """Which group each tool belongs to (-1: none), and the groups' description vectors (NaN rows: none)."""

    names: list[str]
    of_tool: npt.NDArray[np.int64]
    descriptions: npt.NDArray[np.float32]
    described: bool

    @classmethod
    def build(cls, tools: list[Tool], vectors: dict[str, Vector], dimension: int) -> ToolGroups:
        keys = [group_of(tool) for tool in tools]
        names = sorted({key for key in keys if key is not None})
        number = {name: i for i, name in enumerate(names)}
        of_tool = np.array([-1 if key is None else number[key] for key in keys], dtype=np.int64)
        descriptions = np.full((len(names), dimension), np.nan, dtype=np.float32)
        for name, vector in vectors.items():
            if name in number:
                descriptions[number[name]] = vector
        return cls(names, of_tool, descriptions, any(name in number for name in vectors))

    def description_cosines(self, query_vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """One cosine per group with the request; NaN for groups without a description."""
        if not self.described:
            return np.full(len(self.names), np.nan, dtype=np.float32)
        return np.asarray(self.descriptions @ query_vector, dtype=np.float32)


@dataclass(frozen=True)
class SearchIndex:
    generation: int
    tools: list[Tool]
    lexical: LexicalIndex
    matrix: npt.NDArray[np.float32]
    row_tool: npt.NDArray[np.int64]
    restricted: npt.NDArray[np.int64]  # positions of tools with scopes or tenant lists
    by_name: dict[str, int] = field(default_factory=dict)
    row_of_text: dict[str, int] = field(default_factory=dict)  # text hash -> matrix row
    embedder: Embedder | None = None  # the model whose vectors these are: requests are embedded with it
    groups: ToolGroups | None = None

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
        lexical = LexicalIndex.build([p.tokens for p in prepared])
        blocks = [p.vectors for p in prepared]
        matrix = np.vstack(blocks) if blocks else np.zeros((0, dimension), dtype=np.float32)
        if matrix.shape[1] != dimension:
            raise ToolragError(f"stored vectors have {matrix.shape[1]} dimensions, the model has {dimension}")
        row_tool = np.repeat(np.arange(len(prepared), dtype=np.int64), [len(b) for b in blocks])
        restricted = np.array([i for i, t in enumerate(tools) if t.scopes or t.tenants], dtype=np.int64)
        by_name: dict[str, int] = {}
        for position, tool in enumerate(tools):
            by_name[tool.name.lower()] = position
            by_name.setdefault(split_identifier(tool.name).lower(), position)
        hashes = [key for p in prepared for key in p.text_hashes]
        row_of_text = {key: row for row, key in enumerate(hashes)}
        matrix = np.ascontiguousarray(matrix)
        groups = ToolGroups.build(tools, group_vectors or {}, dimension)
        return cls(generation, tools, lexical, matrix, row_tool, restricted, by_name, row_of_text, embedder, groups)

    @property
    def size(self) -> int:
        return len(self.tools)

    def has_aliases(self) -> bool:
        return len(self.row_tool) != len(self.tools)


def prepare(tool: Tool, vectors: dict[str, Vector]) -> PreparedTool:
    """Tokens and vector rows of one tool; raises if a vector is missing (the store is then out of date)."""
    keys = [text_hash(text) for text in dense_texts(tool)]
    missing = [key for key in keys if key not in vectors]
    if missing:
        raise ToolragError(f"tool {tool.name!r} has no embedding for the current model: rebuild the index")
    rows = np.vstack([vectors[key] for key in keys]).astype(np.float32)
    return PreparedTool(tool, tokenize(lexical_text(tool)), rows, keys)
