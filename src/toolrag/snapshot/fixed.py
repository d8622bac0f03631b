"""Vectors a snapshot is built and searched with that are not the tools': the small-talk bank's (search/calibrate.py)
and the described groups' (search/groups.py).

The bank's vectors are kept in the store beside the tools' under a model key of their own, so they are embedded once
per model and registry, not once per process. A group's description vector is embedded once per text and model in
this process (a handful per registry) and handed to every snapshot that follows.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.errors import StoreError
from toolrag.search.calibrate import FixedTextVectors, bank_requests, embed_fixed
from toolrag.search.groups import group_text
from toolrag.search.index import text_hash
from toolrag.search.lexical import FloatArray
from toolrag.store.base import IndexModel, Store, Vector

FIXED_TEXTS_SUFFIX = "#fixed-texts"  # the model key of the small-talk bank's vectors


def stored_fixed_vectors(store: Store) -> FixedTextVectors:
    """Fixed texts embedded as requests or documents, read from and saved to `store` (search/calibrate.py)."""

    def vectors(embedder: Embedder, texts: Sequence[str], *, as_documents: bool) -> Vector:
        return _stored(store, embedder, texts, as_documents)

    return vectors


def stored_bank_requests(store: Store) -> Callable[[Embedder], FloatArray]:
    """The small-talk bank embedded as requests by a model, kept in `store`."""
    vectors = stored_fixed_vectors(store)
    return lambda embedder: bank_requests(embedder, vectors)


def _stored(store: Store, embedder: Embedder, texts: Sequence[str], as_documents: bool) -> Vector:
    kind = "document" if as_documents else "request"
    keys = [text_hash(f"{kind}\n{text}") for text in texts]
    # Under a model key of their own: a nearest-neighbour query of the tools' vectors must never meet them.
    fixed_model = IndexModel(f"{embedder.model_id}{FIXED_TEXTS_SUFFIX}", embedder.dimension)
    known = store.vectors(fixed_model.model_id, keys)
    missing = [(key, text) for key, text in zip(keys, texts, strict=True) if key not in known]
    if missing:
        vectors = embed_fixed(embedder, [text for _, text in missing], as_documents=as_documents)
        fresh = {key: vector for (key, _), vector in zip(missing, vectors, strict=True)}
        # A search waits at most a second for the store's write lock (another instance's import holds it while it
        # writes): a save that does not happen costs the next process one embedding.
        with contextlib.suppress(StoreError):  # nor can a registry this process may not write
            store.save_vectors(fixed_model, fresh, wait_seconds=1.0)
        known.update(fresh)
    return np.vstack([known[key] for key in keys]).astype(np.float32)


class GroupDescriptionVectors:
    """The described groups' description vectors for the snapshots of one registry, embedded once per text and
    model; only the current model's are kept."""

    def __init__(self, store: Store, embedder: Callable[[], Embedder]) -> None:
        self._store = store
        self._embedder = embedder
        self._model_id: str | None = None
        self._vectors: dict[str, Vector] = {}  # by text hash
        self._lock = threading.Lock()

    def __call__(self, model: IndexModel) -> dict[str, Vector]:
        texts = {name: group_text(name, text) for name, text in self._store.group_descriptions().items()}
        keys = {name: text_hash(text) for name, text in texts.items()}
        with self._lock:
            if self._model_id != model.model_id:
                self._model_id, self._vectors = model.model_id, {}
            known = dict(self._vectors)
        missing = [name for name, key in keys.items() if key not in known]
        if missing:
            vectors = self._embedder().embed_documents([texts[name] for name in missing])
            known.update(zip([keys[name] for name in missing], vectors, strict=True))
            with self._lock:
                if self._model_id == model.model_id:
                    self._vectors.update(known)
        return {name: known[key] for name, key in keys.items()}
