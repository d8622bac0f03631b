"""How close small talk comes to a registry: the reference search() measures every request against to decide
whether it needs a tool at all (search/confidence.py).

Cosines have a model-specific scale, run lower across languages than within one, and are higher in a registry
whose tools are written broadly. So a request's best cosine with the tools is never judged alone: it is compared
with the request's cosine with its nearest English small-talk sentence (search/small_talk.py), in the same space: tools
are described in English in every catalog measured, and both cosines deflate together when the request is in
another language. (The reference does not follow the registry's language: what one principal gets must not depend
on tools it may not see.) The difference, the
request's margin, must then beat what the bank's own requests reach against this registry: the
`SearchConfig.small_talk_quantile` of their margins, for English requests and for others separately (the models
differ: embed/ensemble.py). A bank request is measured without itself or its translation (its nearest reference
sentence), as an unseen request would be.

The bank is embedded once per model and process (the registry keeps its vectors in its store for the next process);
the bank's nearest tools are found once per registry version, its levels once per version and set of visible
tools. Example requests (search/examples.py) get levels of their own, from the bank's margins over the examples a
principal searches with: a request's cosine with another request runs higher than with a tool's description, for
small talk too, so judged by the tools' level every example would let small talk through.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from toolrag.embed.base import Embedder, embed_queries
from toolrag.embed.cache import cached_vectors
from toolrag.embed.language import looks_english
from toolrag.search.dense import dense_scores
from toolrag.search.index import Neighbours, SearchIndex
from toolrag.search.lexical import BoolArray, FloatArray, IntArray
from toolrag.search.small_talk import SMALL_TALK, SMALL_TALK_BY_LANGUAGE

NEAREST_TOOLS = 32  # kept per bank request: a principal's best visible tool is almost always among them
_CHUNK_TOOLS = 4096  # tools scored at once (bounds memory on large registries)


class FixedTextVectors(Protocol):
    """Fixed texts embedded as requests or as documents; the registry's version keeps them in its store, so a new
    process does not embed the bank again."""

    def __call__(self, embedder: Embedder, texts: Sequence[str], *, as_documents: bool) -> FloatArray: ...


def embed_fixed(embedder: Embedder, texts: Sequence[str], *, as_documents: bool) -> FloatArray:
    """Fixed texts embedded in batches, once per machine and model (embed/cache.py): a new registry reuses them."""

    def compute() -> FloatArray:
        if as_documents:
            return np.asarray(embedder.embed_documents(texts), dtype=np.float32)
        return embed_queries(embedder, texts)

    kind = "documents" if as_documents else "requests"
    vectors: FloatArray = cached_vectors(embedder.model_id, embedder.dimension, kind, texts, compute)
    return vectors


_BANK: dict[tuple[str, bool], FloatArray] = {}  # (model, as documents) -> vectors: the bank is embedded once
_BANK_LOCK = threading.Lock()


def _bank(embedder: Embedder, texts: list[str], vectors: FixedTextVectors, as_documents: bool) -> FloatArray:
    key = (f"{embedder.model_id}:{len(texts)}", as_documents)
    with _BANK_LOCK:
        if key not in _BANK:
            _BANK[key] = vectors(embedder, texts, as_documents=as_documents)
        return _BANK[key]


@dataclass(frozen=True)
class Levels:
    """The margin a request needs to count as a request for a tool, by the request's language: over its best tool
    text, and over its best example request (search/examples.py), whose level is what the bank reaches against the
    same examples (infinite when the principal searches with none)."""

    english: float
    other: float
    english_examples: float = math.inf
    other_examples: float = math.inf

    def for_request(self, english: bool) -> float:
        return self.english if english else self.other

    def for_examples(self, english: bool) -> float:
        return self.english_examples if english else self.other_examples


@dataclass(frozen=True)
class SmallTalkReference:
    """The small-talk bank as one registry version sees it."""

    sentences: FloatArray  # the bank's English sentences, embedded as tools are
    bank_requests: FloatArray  # the whole bank embedded as requests
    bank_english: BoolArray  # per bank request: whether it reads as English (its level's group)
    bank_reference: FloatArray  # per bank request: its nearest sentence, not counting itself or its translation
    neighbours: Neighbours  # per bank request: its nearest tools

    def nearest(self, request_vector: FloatArray) -> float:
        """The request's cosine with its nearest small-talk sentence."""
        return float((self.sentences @ request_vector).max())

    def levels(
        self, index: SearchIndex, visible: BoolArray | None, quantile: float, examples: IntArray | None = None
    ) -> Levels:
        """`examples`: the example requests the principal searches with (rows of `index.examples`)."""
        english, other = self._quantiles(self._best_visible(index, visible) - self.bank_reference, quantile)
        if index.examples is None or examples is None or not len(examples):
            return Levels(english, other)
        best = index.examples.best(self.bank_requests, examples)
        return Levels(english, other, *self._quantiles(best - self.bank_reference, quantile))

    def _quantiles(self, margins: FloatArray, quantile: float) -> tuple[float, float]:
        """(English, other languages)."""
        return (
            float(np.quantile(margins[self.bank_english], quantile)),
            float(np.quantile(margins[~self.bank_english], quantile)),
        )

    def _best_visible(self, index: SearchIndex, visible: BoolArray | None) -> FloatArray:
        """Each bank request's best cosine with a tool the principal sees: the first visible listed neighbour when
        no unlisted tool can beat it, else an exact scan."""
        positions, cosines, floor = self.neighbours.positions, self.neighbours.cosines, self.neighbours.floor
        listed = positions >= 0
        if visible is not None:
            listed &= visible[np.maximum(positions, 0)]
        first = listed.argmax(axis=1)
        best: FloatArray = cosines[np.arange(len(cosines)), first].astype(np.float32)
        exact = listed.any(axis=1) & (best >= floor)
        for row in np.flatnonzero(~exact).tolist():
            best[row] = dense_scores(index, self.bank_requests[row], visible).max()
        return best


def bank_requests(embedder: Embedder, vectors: FixedTextVectors = embed_fixed) -> FloatArray:
    """The whole bank embedded as requests (once per model and process)."""
    return _bank(embedder, SMALL_TALK, vectors, as_documents=False)


def small_talk_reference(
    index: SearchIndex, embedder: Embedder, vectors: FixedTextVectors = embed_fixed
) -> SmallTalkReference | None:
    """The reference for one registry version (None when it has no tools)."""
    if index.live_count == 0:
        return None
    sentences = _bank(embedder, SMALL_TALK_BY_LANGUAGE["en"], vectors, as_documents=True)
    requests = bank_requests(embedder, vectors)
    similarities = np.sort(requests @ sentences.T, axis=1)
    return SmallTalkReference(
        sentences=sentences,
        bank_requests=requests,
        bank_english=np.array([looks_english(text) for text in SMALL_TALK], dtype=np.bool_),
        bank_reference=similarities[:, -2],
        neighbours=index.neighbours or nearest_tools(index, requests),
    )


def nearest_tools(index: SearchIndex, requests: FloatArray) -> Neighbours:
    """Each request's NEAREST_TOOLS best live tools and their cosines, best first, scanning the tool vectors in
    chunks that end on tool boundaries (a tool's rows are contiguous: its description, then its aliases)."""
    best_positions = np.zeros((len(requests), 0), dtype=np.int64)
    best_cosines = np.zeros((len(requests), 0), dtype=np.float32)
    row_tool = index.vectors.row_tool
    starts = np.flatnonzero(np.r_[True, row_tool[1:] != row_tool[:-1]])  # first row of each tool
    for first_tool in range(0, index.size, _CHUNK_TOOLS):
        tools = starts[first_tool : first_tool + _CHUNK_TOOLS]
        end = starts[first_tool + len(tools)] if first_tool + len(tools) < index.size else len(row_tool)
        per_tool = np.maximum.reduceat(
            requests @ index.vectors.span(int(tools[0]), int(end)).T, tools - tools[0], axis=1
        )
        chunk = first_tool + np.arange(len(tools))
        if index.live is not None:
            per_tool[:, ~index.live[chunk]] = -np.inf
        best_positions, best_cosines = _keep_best(
            np.concatenate([best_positions, np.broadcast_to(chunk, per_tool.shape)], axis=1),
            np.concatenate([best_cosines, per_tool], axis=1),
        )
    complete = np.full(len(requests), -np.inf, dtype=np.float32)
    if index.live_count > NEAREST_TOOLS:  # tools beyond the list are no nearer than its last
        complete = best_cosines[:, -1].astype(np.float32)
    return _neighbours(best_positions, best_cosines, complete)


def updated_neighbours(
    neighbours: Neighbours, index: SearchIndex, gone: Sequence[int], first_new: int, requests: FloatArray
) -> Neighbours:
    """`neighbours` after the tools at `gone` left and the tools from position `first_new` on joined, without
    scanning the others: a listed tool that left frees its slot, a joining tool is listed if near enough. The floor
    stays: a tool pushed off the list is below every listed one, so it never hides behind a listed tool."""
    positions, cosines = neighbours.positions.copy(), neighbours.cosines.copy()
    left = np.isin(positions, np.asarray(gone, dtype=np.int64))
    positions[left], cosines[left] = -1, -np.inf
    row_tool = index.vectors.row_tool
    first_row = int(np.searchsorted(row_tool, first_new))
    if first_row < len(row_tool):
        joined = row_tool[first_row:]
        starts = np.flatnonzero(np.r_[True, joined[1:] != joined[:-1]])
        per_tool = np.maximum.reduceat(requests @ index.vectors.span(first_row, len(row_tool)).T, starts, axis=1)
        positions = np.concatenate([positions, np.broadcast_to(joined[starts], per_tool.shape)], axis=1)
        cosines = np.concatenate([cosines, per_tool], axis=1)
    positions, cosines = _keep_best(positions, cosines)
    return _neighbours(positions, cosines, neighbours.floor)


def _keep_best(positions: IntArray, cosines: FloatArray) -> tuple[IntArray, FloatArray]:
    """The NEAREST_TOOLS best columns of each row, best first."""
    order = np.argsort(-cosines, axis=1, kind="stable")[:, :NEAREST_TOOLS]
    return np.take_along_axis(positions, order, axis=1), np.take_along_axis(cosines, order, axis=1)


def _neighbours(positions: IntArray, cosines: FloatArray, floor: FloatArray) -> Neighbours:
    empty = ~np.isfinite(cosines)
    return Neighbours(
        np.where(empty, -1, positions).astype(np.int64), cosines.astype(np.float32), floor.astype(np.float32)
    )
