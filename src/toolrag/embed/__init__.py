"""Embedding models behind one protocol. Only this package loads models."""

from __future__ import annotations

from toolrag.embed.base import Embedder, Vectors, embed_in_batches, normalized
from toolrag.embed.ensemble import EnsembleEmbedder
from toolrag.embed.minilm import MiniLM
from toolrag.embed.openai_compat import OpenAICompatibleEmbedder
from toolrag.embed.use import UniversalSentenceEncoder

DEFAULT_EMBEDDER = "default"
EMBEDDER_NAMES = ("default", "use", "minilm", "openai:MODEL[@BASE_URL]")


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
    "make_embedder",
    "normalized",
]
