"""Several models in one vector space: the default embedder.

Each model gives every text a unit vector; a tool's vector is the models' vectors side by side, each scaled by the
square root of its document weight (so it has unit length). A request's vector is built the same way but with
weights that depend on its language, each divided by the square root of the document weight, so the dot product of
a request and a tool is the weighted mean of the models' cosines with the request's weights: an English request
leans on the English model, a request in another language on the multilingual ones, and a model that does not
serve the request's language is not even run. See docs/architecture.md for the measurements behind the weights.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from toolrag.embed.base import DelegatingEmbedder, Embedder, Vectors, embed_queries
from toolrag.embed.language import looks_english
from toolrag.embed.vector_cache import cached_documents
from toolrag.errors import EnsembleWeightsError


@dataclass(frozen=True)
class Member:
    """One model of an ensemble: its share of an English request's score and of any other language's."""

    embedder: Embedder
    english: float
    other: float

    @property
    def document(self) -> float:
        """Its share of a tool's vector: the larger of its two request shares."""
        return max(self.english, self.other)


class EnsembleEmbedder:
    def __init__(self, members: Sequence[Member]) -> None:
        if not members or any(m.english < 0 or m.other < 0 or m.document == 0 for m in members):
            raise EnsembleWeightsError(
                "an ensemble needs members with non-negative weights, each used by some language"
            )
        for side in ("english", "other"):
            if not math.isclose(sum(getattr(m, side) for m in members), 1.0):
                raise EnsembleWeightsError(f"the members' {side} weights must add up to 1")
        self.members = list(members)
        total = sum(m.document for m in self.members)
        self._document_scale = [math.sqrt(m.document / total) for m in self.members]

    @property
    def model_id(self) -> str:
        """Names the models and every weight: vectors of two differently weighted ensembles never mix."""
        parts = "+".join(m.embedder.model_id for m in self.members)
        weights = "/".join(f"{m.english:g}:{m.other:g}" for m in self.members)
        return f"{parts}@{weights}"

    @property
    def dimension(self) -> int:
        return sum(m.embedder.dimension for m in self.members)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        """Tools' texts; a text any registry on this machine embedded before is read back (embed/vector_cache.py)."""
        return cached_documents(self.model_id, self.dimension, texts, self._embed_documents)

    def _embed_documents(self, texts: Sequence[str]) -> Vectors:
        parts = [m.embedder.embed_documents(texts) * s for m, s in zip(self.members, self._document_scale, strict=True)]
        return np.ascontiguousarray(np.hstack(parts), dtype=np.float32)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Many requests at once, each member running its batch over the requests whose language it serves:
        the same vectors as `embed_query` one by one, in a fraction of the time."""
        english = np.array([looks_english(text) for text in texts], dtype=np.bool_)
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        start = 0
        for member, scale in zip(self.members, self._document_scale, strict=True):
            width = member.embedder.dimension
            for is_english, weight in ((True, member.english), (False, member.other)):
                rows = np.flatnonzero(english == is_english)
                if weight != 0 and len(rows):
                    vectors = embed_queries(member.embedder, [texts[int(i)] for i in rows])
                    out[rows, start : start + width] = vectors * (weight / scale)
            start += width
        return out

    def embed_query(self, text: str) -> Vectors:
        english = looks_english(text)
        parts = []
        for member, scale in zip(self.members, self._document_scale, strict=True):
            weight = member.english if english else member.other
            if weight == 0:  # the model does not serve this language: not run
                parts.append(np.zeros(member.embedder.dimension, dtype=np.float32))
            else:
                parts.append(member.embedder.embed_query(text) * (weight / scale))
        return np.concatenate(parts).astype(np.float32)


def model_cosines(embedder: Embedder, text: str, documents: Vectors) -> list[dict[str, float]]:
    """Each model's own cosine of a request with each embedded tool text (`documents`, rows of the index): what
    every member of an ensemble thinks, whichever the request's language weighs; for explanations. The request is
    embedded once per model, however many tools are explained."""
    while isinstance(embedder, DelegatingEmbedder):
        embedder = embedder.inner
    documents = np.atleast_2d(documents)
    if not isinstance(embedder, EnsembleEmbedder):
        cosines = documents @ embedder.embed_query(text)
        return [{embedder.model_id: float(cosine)} for cosine in cosines]
    rows: list[dict[str, float]] = [{} for _ in range(len(documents))]
    start = 0
    for member, scale in zip(embedder.members, embedder._document_scale, strict=True):
        width = member.embedder.dimension
        cosines = (documents[:, start : start + width] / scale) @ member.embedder.embed_query(text)
        for row, cosine in zip(rows, cosines, strict=True):
            row[member.embedder.model_id] = float(cosine)
        start += width
    return rows
