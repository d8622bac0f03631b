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
tools.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.embed.language import looks_english
from toolrag.search.dense import dense_scores
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray, FloatArray, IntArray
from toolrag.search.small_talk import SMALL_TALK, SMALL_TALK_BY_LANGUAGE

NEAREST_TOOLS = 32  # kept per bank request: a principal's best visible tool is almost always among them
_CHUNK_TOOLS = 4096  # tools scored at once (bounds memory on large registries)


class FixedTextVectors(Protocol):
    """Fixed texts embedded as requests or as documents; the registry's version keeps them in its store, so a new
    process does not embed the bank again."""

    def __call__(self, embedder: Embedder, texts: Sequence[str], *, as_documents: bool) -> FloatArray: ...


def embed_fixed(embedder: Embedder, texts: Sequence[str], *, as_documents: bool) -> FloatArray:
    if as_documents:
        return np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    return np.vstack([embedder.embed_query(text) for text in texts]).astype(np.float32)


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
    """The margin a request needs to count as a request for a tool, by the request's language."""

    english: float
    other: float

    def for_request(self, english: bool) -> float:
        return self.english if english else self.other


@dataclass(frozen=True)
class SmallTalkReference:
    """The small-talk bank as one registry version sees it."""

    sentences: FloatArray  # the bank's English sentences, embedded as tools are
    bank_requests: FloatArray  # the whole bank embedded as requests
    bank_english: BoolArray  # per bank request: whether it reads as English (its level's group)
    bank_reference: FloatArray  # per bank request: its nearest sentence, not counting itself or its translation
    nearest_positions: IntArray  # per bank request: its nearest tools, nearest first
    nearest_cosines: FloatArray

    def nearest(self, request_vector: FloatArray) -> float:
        """The request's cosine with its nearest small-talk sentence."""
        return float((self.sentences @ request_vector).max())

    def levels(self, index: SearchIndex, visible: BoolArray | None, quantile: float) -> Levels:
        best = self._best_visible(index, visible)
        margins = best - self.bank_reference
        return Levels(
            english=float(np.quantile(margins[self.bank_english], quantile)),
            other=float(np.quantile(margins[~self.bank_english], quantile)),
        )

    def _best_visible(self, index: SearchIndex, visible: BoolArray | None) -> FloatArray:
        if visible is None:
            return self.nearest_cosines[:, 0].copy()
        best = np.empty(len(self.bank_requests), dtype=np.float32)
        for row, (positions, cosines) in enumerate(zip(self.nearest_positions, self.nearest_cosines, strict=True)):
            seen = np.flatnonzero(visible[positions])
            if len(seen):
                best[row] = cosines[seen[0]]
            else:  # the principal sees none of the bank request's nearest tools: score the ones it sees
                best[row] = dense_scores(index, self.bank_requests[row], visible).max()
        return best


def small_talk_reference(
    index: SearchIndex, embedder: Embedder, vectors: FixedTextVectors = embed_fixed
) -> SmallTalkReference | None:
    """The reference for one registry version (None when it has no tools)."""
    if index.size == 0:
        return None
    sentences = _bank(embedder, SMALL_TALK_BY_LANGUAGE["en"], vectors, as_documents=True)
    requests = _bank(embedder, SMALL_TALK, vectors, as_documents=False)
    similarities = np.sort(requests @ sentences.T, axis=1)
    positions, cosines = _nearest_tools(index, requests)
    return SmallTalkReference(
        sentences=sentences,
        bank_requests=requests,
        bank_english=np.array([looks_english(text) for text in SMALL_TALK], dtype=np.bool_),
        bank_reference=similarities[:, -2],
        nearest_positions=positions,
        nearest_cosines=cosines,
    )


def _nearest_tools(index: SearchIndex, requests: FloatArray) -> tuple[IntArray, FloatArray]:
    """Each request's NEAREST_TOOLS best tools and their cosines, best first, scanning the tool vectors in chunks
    that end on tool boundaries (a tool's rows are contiguous: its description, then its aliases)."""
    keep = min(NEAREST_TOOLS, index.size)
    best_positions = np.zeros((len(requests), 0), dtype=np.int64)
    best_cosines = np.zeros((len(requests), 0), dtype=np.float32)
    starts = np.flatnonzero(np.r_[True, index.row_tool[1:] != index.row_tool[:-1]])  # first row of each tool
    for first_tool in range(0, index.size, _CHUNK_TOOLS):
        tools = starts[first_tool : first_tool + _CHUNK_TOOLS]
        end = starts[first_tool + len(tools)] if first_tool + len(tools) < index.size else len(index.row_tool)
        rows = requests @ index.matrix[tools[0] : end].T
        per_tool = np.maximum.reduceat(rows, tools - tools[0], axis=1)
        chunk = np.broadcast_to(first_tool + np.arange(len(tools)), per_tool.shape)
        positions = np.concatenate([best_positions, chunk], axis=1)
        cosines = np.concatenate([best_cosines, per_tool], axis=1)
        top = np.argpartition(-cosines, keep - 1, axis=1)[:, :keep] if cosines.shape[1] > keep else None
        if top is not None:
            positions = np.take_along_axis(positions, top, axis=1)
            cosines = np.take_along_axis(cosines, top, axis=1)
        order = np.argsort(-cosines, axis=1, kind="stable")
        best_positions = np.take_along_axis(positions, order, axis=1)
        best_cosines = np.take_along_axis(cosines, order, axis=1)
    return best_positions, best_cosines.astype(np.float32)
