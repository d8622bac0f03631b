"""The `Store` protocol: durable tools, their history and their vectors. Only `store/` speaks SQL."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import numpy.typing as npt

from toolrag.model import Tool

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class IndexModel:
    """The embedding model an index was built with."""

    model_id: str
    dimension: int


@dataclass
class UpsertReport:
    """What an upsert did, by tool name."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def changed(self) -> int:
        return len(self.added) + len(self.updated)


class Store(Protocol):
    """Durable registry state. Every write method is one transaction: it happens whole or not at all."""

    def upsert(self, tools: Sequence[Tool], vectors: dict[str, Vector], model: IndexModel) -> UpsertReport:
        """Insert or update tools and save the vectors (keyed by text hash) for `model`, atomically.

        A tool whose definition changed gets the next version; an unchanged tool is left alone.
        """
        ...

    def save_vectors(self, model: IndexModel, vectors: dict[str, Vector]) -> None:
        """Keep vectors of any model (keyed by text hash) without changing which model the index uses."""
        ...

    def switch_model(self, model: IndexModel) -> None:
        """Make `model` the index's model and drop other models' vectors, in one transaction."""
        ...

    def get(self, name: str) -> Tool | None: ...

    def tools(self, include_inactive: bool = False) -> list[Tool]: ...

    def changed_since(self, generation: int) -> list[Tool]:
        """Tools (active or not) written after `generation`."""
        ...

    def history(self, name: str) -> list[Tool]: ...

    def vectors(self, model_id: str, text_hashes: Iterable[str]) -> dict[str, Vector]: ...

    def index_model(self) -> IndexModel | None: ...

    def generation(self) -> int:
        """A counter that grows with every committed write: equal generations mean equal registries."""
        ...

    def close(self) -> None: ...
