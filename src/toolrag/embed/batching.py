"""Concurrent requests embedded together: what a server does with many clients (`toolrag api serve`, the MCP
gateway).

A model embeds a batch of texts for much less than the sum of its texts one at a time (one pass through the
weights, the cores kept busy), so requests that arrive while the model is busy wait for it and then go through in
one batch. Nothing waits on purpose: a request that finds the model idle is embedded at once, so one client sees
the latency it had, and batches form only when requests queue anyway. The queue is bounded: beyond `max_waiting`
requests a new one is refused (EmbeddingError) instead of growing the server's memory and everyone's latency.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field

from toolrag.embed.base import DelegatingEmbedder, Embedder, Vectors, embed_queries
from toolrag.errors import EmbeddingError

MAX_BATCH = 32
MAX_WAITING = 2048


@dataclass
class _Waiting:
    text: str
    wake: threading.Event = field(default_factory=threading.Event)  # set when done, or when made the leader
    lead: bool = False
    vector: Vectors | None = None
    error: BaseException | None = None

    @property
    def finished(self) -> bool:
        return self.vector is not None or self.error is not None


class QueryBatcher(DelegatingEmbedder):
    """`embed_query` from many threads, run in batches by one caller at a time (the leader), which embeds what is
    waiting, its own request among it, then hands the model to the oldest caller still waiting."""

    def __init__(self, inner: Embedder, max_batch: int = MAX_BATCH, max_waiting: int = MAX_WAITING) -> None:
        super().__init__(inner)
        self.max_batch = max_batch
        self.max_waiting = max_waiting
        self._waiting: deque[_Waiting] = deque()
        self._lock = threading.Lock()
        self._leading = False
        self.batches = 0  # how many model calls served requests (for benchmarks and tests)

    def embed_query(self, text: str) -> Vectors:
        mine = _Waiting(text)
        with self._lock:
            if len(self._waiting) >= self.max_waiting:
                raise EmbeddingError(f"{self.max_waiting} requests are waiting for the embedding model: try again")
            self._waiting.append(mine)
            if not self._leading:
                self._leading = mine.lead = True
        while not mine.finished:
            if mine.lead:
                self._lead(mine)
            else:
                mine.wake.wait()
                mine.wake.clear()
        if mine.error is not None:
            raise mine.error
        assert mine.vector is not None
        return mine.vector

    def _lead(self, mine: _Waiting) -> None:
        try:
            while not mine.finished:  # the queue is first come, first served: this caller's turn comes
                with self._lock:
                    batch = [self._waiting.popleft() for _ in range(min(self.max_batch, len(self._waiting)))]
                self._embed(batch)
        finally:
            with self._lock:
                if self._waiting:
                    self._waiting[0].lead = True
                    self._waiting[0].wake.set()
                else:
                    self._leading = False

    def _embed(self, batch: list[_Waiting]) -> None:
        self.batches += 1
        try:
            vectors = embed_queries(self.inner, [waiting.text for waiting in batch])
        except Exception as error:  # every request of the batch fails as it would have alone
            for waiting in batch:
                waiting.error = error
                waiting.wake.set()
            return
        for waiting, vector in zip(batch, vectors, strict=True):
            waiting.vector = vector
            waiting.wake.set()
