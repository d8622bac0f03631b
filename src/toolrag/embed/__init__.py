"""Embedding models behind one protocol. Only this package loads models."""

from __future__ import annotations

import threading

from toolrag._version import __version__
from toolrag.embed.base import Embedder, Vectors, embed_in_batches, normalized
from toolrag.embed.ensemble import EnsembleEmbedder
from toolrag.embed.minilm import MiniLM
from toolrag.embed.openai_compat import OpenAICompatibleEmbedder
from toolrag.embed.use import UniversalSentenceEncoder

DEFAULT_EMBEDDER = "default"
EMBEDDER_NAMES = ("auto", "default", "use", "minilm", "openai:MODEL[@BASE_URL]")
_NAMES_BY_MODEL_ID = {
    "use-multilingual-v3+all-minilm-l6-v2-int8@0.5": "default",
    "use-multilingual-v3": "use",
    "all-minilm-l6-v2-int8": "minilm",
}
# Models of earlier toolrag versions that no built-in embedder produces any more.
_RETIRED = {
    "use-multilingual-v3+all-minilm-l6-v2@0.5": "default",
    "all-minilm-l6-v2": "minilm",
}


def embedder_name_for(model_id: str) -> str:
    """The embedder name that produces vectors of `model_id` (what `auto` uses for an indexed registry)."""
    if model_id in _NAMES_BY_MODEL_ID:
        return _NAMES_BY_MODEL_ID[model_id]
    if model_id in _RETIRED:
        raise ValueError(
            f"this registry was indexed with {model_id}, the float32 MiniLM of toolrag 0.1, which toolrag "
            f"{__version__} replaced by its int8 twin: re-embed it once with "
            f"`toolrag index rebuild --embedder {_RETIRED[model_id]}` (it keeps serving until the switch)"
        )
    if model_id.startswith("openai-compatible:"):
        model, _, base_url = model_id.removeprefix("openai-compatible:").partition("@")
        return f"openai:{model}@{base_url}"
    raise ValueError(f"this registry was indexed with {model_id!r}, which no built-in embedder produces")


_BUILT_IN: dict[str, Embedder] = {}
_BUILT_IN_LOCK = threading.RLock()


def make_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    """An embedder by name: `default` (USE multilingual + MiniLM), `use`, `minilm`, or `openai:MODEL[@BASE_URL]`.

    The built-in models are loaded once per process, however many registries use them (they are thread-safe)."""
    if name in ("default", "use", "minilm"):
        with _BUILT_IN_LOCK:
            if name not in _BUILT_IN:
                _BUILT_IN[name] = _built_in(name)
            return _BUILT_IN[name]
    if name.startswith("openai:"):
        model, _, base_url = name.removeprefix("openai:").partition("@")
        return OpenAICompatibleEmbedder(model, base_url or "https://api.openai.com/v1")
    raise ValueError(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDER_NAMES)}")


def _built_in(name: str) -> Embedder:
    if name == "use":
        return UniversalSentenceEncoder()
    if name == "minilm":
        return MiniLM()
    return EnsembleEmbedder(make_embedder("use"), make_embedder("minilm"))


__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "EnsembleEmbedder",
    "MiniLM",
    "OpenAICompatibleEmbedder",
    "UniversalSentenceEncoder",
    "Vectors",
    "embed_in_batches",
    "embedder_name_for",
    "make_embedder",
    "normalized",
]
