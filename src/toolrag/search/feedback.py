"""A per-registry score adjustment learned from usage: requests like ones after which a tool was called favour it.

The usage log pairs each successful call with the request that led to it (`UsageTables.called_after`). Those
requests are embedded once; a new request then looks up its nearest remembered requests, and each tool gains
`weight * (similarity - floor) / (1 - floor)` for its most similar one above the floor. Off by default
(`SearchConfig.usage_weight = 0`): it learns whatever users did, so measure it on your own log first
(`toolrag eval --replay-share`, docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import FloatArray, IntArray


@dataclass(frozen=True)
class UsageMemory:
    """Remembered (request vector, tool) pairs, for one embedding model."""

    model_id: str
    vectors: FloatArray  # one row per remembered request
    tools: list[str]  # the tool called after each

    @classmethod
    def learn(cls, pairs: Sequence[tuple[str, str]], embedder: Embedder) -> UsageMemory:
        """From (tool, request) pairs; each distinct pair is embedded once."""
        unique = list(dict.fromkeys((tool, " ".join(request.split())) for tool, request in pairs))
        unique = [(tool, request) for tool, request in unique if request]
        if not unique:
            return cls(embedder.model_id, np.zeros((0, embedder.dimension), dtype=np.float32), [])
        vectors = np.vstack([_unit(embedder.embed_query(request)) for _, request in unique]).astype(np.float32)
        return cls(embedder.model_id, vectors, [tool for tool, _ in unique])

    @property
    def size(self) -> int:
        return len(self.tools)

    def adjustment(
        self, index: SearchIndex, query_vector: FloatArray, candidates: IntArray, floor: float, weight: float
    ) -> FloatArray:
        """What each candidate gains, aligned with `candidates`."""
        gains = np.zeros(len(candidates), dtype=np.float32)
        if not self.size or weight <= 0:
            return gains
        similarities = self.vectors @ _unit(query_vector)
        close = np.flatnonzero(similarities > floor)
        if not len(close):
            return gains
        slot = {int(position): i for i, position in enumerate(candidates.tolist())}
        for row in close[np.argsort(-similarities[close])]:
            i = slot.get(index.by_name.get(self.tools[row].lower(), -1))
            if i is not None and gains[i] == 0:
                gains[i] = weight * (float(similarities[row]) - floor) / (1.0 - floor)
        return gains


def _unit(vector: FloatArray) -> FloatArray:
    """Request vectors of an ensemble are weighted per language, not of unit length (embed/ensemble.py); two
    requests compare by cosine."""
    norm = float(np.linalg.norm(vector))
    return (vector / norm if norm > 0 else vector).astype(np.float32)
