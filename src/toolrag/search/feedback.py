"""A per-tenant score adjustment learned from usage: requests like ones after which a tool was called favour it.

The usage log pairs each successful call with the request that led to it in the same session of the same caller
(`UsageTables.called_after`). Those requests are embedded once; a new request then looks up its nearest remembered
requests of its own tenant (a tenant's requests never move another tenant's ranking, nor reach it; a caller without
a tenant learns from its own requests only, told apart by identity, `Principal.caller`), and each tool
gains `weight * (similarity - floor) / (1 - floor)` for its most similar one above the floor. Off by default
(`SearchConfig.usage_weight = 0`): it learns whatever users did, so measure it on your own log first
(`toolrag eval --replay-share`, docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.limits import MAX_REQUEST_CHARS
from toolrag.model import utc_now
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import FloatArray, IntArray
from toolrag.search.request import searched_text
from toolrag.store.base import Store
from toolrag.store.usage import UsedRequest

# Whose usage a remembered request is: ("tenant", its tenant) or, without a tenant, ("caller", its caller's
# identity; None for records logged before callers were, which nobody learns from).
Learner = tuple[str, str | None]


def learner_of(tenant: str | None, caller: str | None) -> Learner:
    return ("tenant", tenant) if tenant else ("caller", caller)


@dataclass(frozen=True)
class UsageMemory:
    """Remembered (request vector, tool) pairs of each tenant and tenantless caller, for one embedding model."""

    model_id: str
    vectors: FloatArray  # one row per remembered request
    tools: list[str]  # the tool called after each
    learners: list[Learner]  # whose request each is

    @classmethod
    def from_log(cls, store: Store, days: int, embedder: Embedder) -> UsageMemory:
        """Learned from the usage log's successful calls of the last `days`."""
        return cls.learn(store.usage.called_after(utc_now() - timedelta(days=days)), embedder)

    @classmethod
    def learn(cls, used: Sequence[UsedRequest], embedder: Embedder) -> UsageMemory:
        """From the usage log's requests followed by a successful call; each distinct one is embedded once."""
        # Read as search reads a request (cut to its limit in the letters the models read): the log keeps 8,000
        # characters as written, and one of characters that stand for many cost seconds to embed.
        triples = (
            (learner_of(u.tenant, u.caller), u.tool, searched_text(u.request, MAX_REQUEST_CHARS).text) for u in used
        )
        unique = [(learner, tool, request) for learner, tool, request in dict.fromkeys(triples) if request]
        if not unique:
            return cls(embedder.model_id, np.zeros((0, embedder.dimension), dtype=np.float32), [], [])
        vectors = np.vstack([_unit(embedder.embed_query(request)) for *_, request in unique]).astype(np.float32)
        return cls(embedder.model_id, vectors, [tool for _, tool, _ in unique], [learner for learner, *_ in unique])

    @property
    def size(self) -> int:
        return len(self.tools)

    def adjustment(
        self,
        index: SearchIndex,
        query_vector: FloatArray,
        candidates: IntArray,
        floor: float,
        weight: float,
        learner: Learner,
    ) -> FloatArray:
        """What each candidate gains for a request of `learner` (`learner_of`), aligned with `candidates`."""
        gains = np.zeros(len(candidates), dtype=np.float32)
        if not self.size or weight <= 0:
            return gains
        similarities = self.vectors @ _unit(query_vector)
        mine = np.fromiter((owner == learner for owner in self.learners), dtype=bool, count=self.size)
        close = np.flatnonzero((similarities > floor) & mine)
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
