"""Two models in one vector space: the default embedder.

Each model's unit vector is scaled by sqrt(weight) and the parts are concatenated, so the dot product of a query
and a document is the weighted mean of the models' cosines. The query side can drop a model per request: an
English-only model scores a German request poorly, so for requests that do not look English its share goes to
the multilingual model. See docs/benchmarks.md for the measurements behind this design.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from toolrag.embed.base import Embedder, Vectors, first_row
from toolrag.embed.language import looks_english


class EnsembleEmbedder:
    """A multilingual model plus an English model; English-only for requests that look English."""

    def __init__(self, multilingual: Embedder, english: Embedder, english_weight: float = 0.5) -> None:
        if not 0.0 <= english_weight <= 1.0:
            raise ValueError("english_weight must be in [0, 1]")
        self.multilingual = multilingual
        self.english = english
        self.english_weight = english_weight

    @property
    def model_id(self) -> str:
        return f"{self.multilingual.model_id}+{self.english.model_id}@{self.english_weight:g}"

    @property
    def dimension(self) -> int:
        return self.multilingual.dimension + self.english.dimension

    def _join(self, multilingual: Vectors, english: Vectors, english_weight: float) -> Vectors:
        joined = np.hstack([multilingual * math.sqrt(1.0 - english_weight), english * math.sqrt(english_weight)])
        return np.ascontiguousarray(joined, dtype=np.float32)

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self._join(
            self.multilingual.embed_documents(texts), self.english.embed_documents(texts), self.english_weight
        )

    def embed_query(self, text: str) -> Vectors:
        multilingual = self.multilingual.embed_query(text)[None, :]
        if looks_english(text):
            english = self.english.embed_query(text)[None, :]
            return first_row(self._join(multilingual, english, self.english_weight))
        # The query part is scaled so the dot product is the multilingual cosine itself, on the same scale as the
        # weighted mean of cosines an English request gets.
        scaled = multilingual[0] / math.sqrt(1.0 - self.english_weight)
        return np.concatenate([scaled, np.zeros(self.english.dimension, dtype=np.float32)]).astype(np.float32)
