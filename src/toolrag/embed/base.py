"""The `Embedder` protocol: anything that turns texts into L2-normalized float32 vectors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from toolrag.errors import EmbeddingError

Vectors = npt.NDArray[np.float32]
ProgressCallback = Callable[[int], None]


@runtime_checkable
class Embedder(Protocol):
    """An embedding model. `model_id` names model and settings: vectors of different ids never mix."""

    @property
    def model_id(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def embed_documents(self, texts: Sequence[str]) -> Vectors: ...

    def embed_query(self, text: str) -> Vectors: ...


class DelegatingEmbedder:
    """Passes everything to another embedder: subclass it to add memory, counting or logging around a model."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> Vectors:
        return self.inner.embed_query(text)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return embed_queries(self.inner, texts)


def embed_queries(embedder: Embedder, texts: Sequence[str]) -> Vectors:
    """Many requests embedded at once where the model can (`embed_queries`), else one by one."""
    batch = getattr(embedder, "embed_queries", None)
    if batch is not None:
        return np.asarray(batch(texts), dtype=np.float32).reshape(len(texts), embedder.dimension)
    if not texts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    return np.vstack([embedder.embed_query(text) for text in texts]).astype(np.float32)


def normalized(vectors: npt.ArrayLike, expected_dimension: int, model_id: str) -> Vectors:
    """Check the shape of a model's output and scale every row to unit length."""
    array = np.asarray(vectors, dtype=np.float32)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2 or array.shape[1] != expected_dimension:
        raise EmbeddingError(f"{model_id} returned vectors of shape {array.shape}, expected (n, {expected_dimension})")
    if not np.all(np.isfinite(array)):
        raise EmbeddingError(f"{model_id} returned non-finite values")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(array / norms, dtype=np.float32)


def first_row(vectors: Vectors) -> Vectors:
    """The single vector of a one-text batch."""
    return np.asarray(vectors[0], dtype=np.float32)


def embed_in_batches(
    embedder: Embedder, texts: Sequence[str], batch_size: int = 64, progress: ProgressCallback | None = None
) -> Vectors:
    """Embed many texts a batch at a time, reporting how many are done after each batch."""
    if not texts:
        return np.zeros((0, embedder.dimension), dtype=np.float32)
    parts = []
    for start in range(0, len(texts), batch_size):
        batch = texts[start : start + batch_size]
        parts.append(embedder.embed_documents(batch))
        if progress is not None:
            progress(len(batch))
    return np.vstack(parts)
