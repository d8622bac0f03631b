"""Embedding models behind one protocol. Only this package loads models."""

from __future__ import annotations

from toolrag.embed.base import Embedder, Vectors, embed_in_batches, normalized
from toolrag.embed.ensemble import EnsembleEmbedder
from toolrag.embed.minilm import MiniLM
from toolrag.embed.openai_compat import OpenAICompatibleEmbedder
from toolrag.embed.use import UniversalSentenceEncoder

DEFAULT_EMBEDDER = "default"
EMBEDDER_NAMES = ("auto", "default", "use", "minilm", "openai:MODEL[@BASE_URL]")
_NAMES_BY_MODEL_ID = {
    "use-multilingual-v3+all-minilm-l6-v2@0.5": "default",
    "use-multilingual-v3": "use",
    "all-minilm-l6-v2": "minilm",
}


def embedder_name_for(model_id: str) -> str:
    """The embedder name that produces vectors of `model_id` (what `auto` uses for an indexed registry)."""
    if model_id in _NAMES_BY_MODEL_ID:
        return _NAMES_BY_MODEL_ID[model_id]
    if model_id.startswith("openai-compatible:"):
        model, _, base_url = model_id.removeprefix("openai-compatible:").partition("@")
        return f"openai:{model}@{base_url}"
    raise ValueError(f"this registry was indexed with {model_id!r}, which no built-in embedder produces")


def make_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    """An embedder by name: `default` (USE multilingual + MiniLM), `use`, `minilm`, or `openai:MODEL[@BASE_URL]`."""
    if name == "default":
        return EnsembleEmbedder(UniversalSentenceEncoder(), MiniLM())
    if name == "use":
        return UniversalSentenceEncoder()
    if name == "minilm":
        return MiniLM()
    if name.startswith("openai:"):
        model, _, base_url = name.removeprefix("openai:").partition("@")
        return OpenAICompatibleEmbedder(model, base_url or "https://api.openai.com/v1")
    raise ValueError(f"unknown embedder {name!r}: choose one of {', '.join(EMBEDDER_NAMES)}")


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
