"""A similarity threshold that means the same across registries and embedding models.

Cosines have a model-specific scale, and a registry whose tools are written broadly attracts unrelated requests
more than one whose tools are narrow. Calibration measures both: it embeds a bank of requests that need no tool
(small talk and general questions, in several languages), takes each one's best cosine against the registry's
tools, and sets the threshold just above what most of them reach. It is recomputed when the registry changes;
the bank is embedded once per model.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.search.dense import dense_scores
from toolrag.search.index import SearchIndex
from toolrag.search.lexical import FloatArray

NO_TOOL_REQUESTS = [
    "hello, how are you today?",
    "thanks, that was helpful",
    "tell me a joke",
    "what is the meaning of life?",
    "who are you?",
    "good morning!",
    "I am bored",
    "can you write me a short poem about autumn?",
    "what do you think about love?",
    "explain the theory of relativity in simple words",
    "why is the sky blue?",
    "how many legs does a spider have?",
    "what is the capital of France?",
    "recommend a good philosophy book",
    "what's your favourite colour?",
    "summarize the plot of Hamlet",
    "ok, never mind",
    "let's talk about something else",
    "Hallo, wie geht es dir?",
    "Erzähl mir einen Witz",
    "Warum ist der Himmel blau?",
    "Привіт, як справи?",
    "Розкажи анекдот",
    "Чому небо блакитне?",
    "你好，你今天怎么样？",
    "给我讲个笑话",
    "天空为什么是蓝色的？",
    "Hola, ¿qué tal?",
    "Cuéntame un chiste",
    "Bonjour, comment ça va ?",
]


# (model, texts) -> the texts embedded as requests; the registry's version keeps them in its store, so a new
# process does not embed the bank again.
QueryVectors = Callable[[Embedder, Sequence[str]], FloatArray]
_BANK_VECTORS: dict[str, FloatArray] = {}
_BANK_LOCK = threading.Lock()


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> FloatArray:
    return np.vstack([embedder.embed_query(text) for text in texts]).astype(np.float32)


def bank_vectors(embedder: Embedder, query_vectors: QueryVectors = embed_queries) -> FloatArray:
    """The no-tool requests embedded as queries, once per model (they do not depend on the registry)."""
    with _BANK_LOCK:
        if embedder.model_id not in _BANK_VECTORS:
            _BANK_VECTORS[embedder.model_id] = query_vectors(embedder, NO_TOOL_REQUESTS)
        return _BANK_VECTORS[embedder.model_id]


def calibrated_similarity(
    index: SearchIndex,
    embedder: Embedder,
    quantile: float,
    floor: float,
    ceiling: float,
    query_vectors: QueryVectors = embed_queries,
) -> float:
    """The `quantile` of the no-tool requests' best cosines, kept within [floor, ceiling]."""
    if index.size == 0:
        return ceiling
    best = [float(dense_scores(index, vector, None).max()) for vector in bank_vectors(embedder, query_vectors)]
    return float(np.clip(np.quantile(best, quantile), floor, ceiling))
