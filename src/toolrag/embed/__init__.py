"""Embedding models behind one protocol. Only this package loads models."""

from __future__ import annotations

import threading

from toolrag._version import __version__
from toolrag.embed.base import Embedder, Vectors, embed_in_batches, normalized
from toolrag.embed.e5 import MultilingualE5
from toolrag.embed.e5 import available as e5_available
from toolrag.embed.ensemble import EnsembleEmbedder, Member
from toolrag.embed.minilm import MiniLM
from toolrag.embed.openai_compat import OpenAICompatibleEmbedder
from toolrag.embed.use import UniversalSentenceEncoder
from toolrag.errors import UnknownEmbedderError, UnknownModelError

DEFAULT_EMBEDDER = "default"
EMBEDDER_NAMES = ("auto", "default", "use+minilm", "use", "minilm", "e5", "openai:MODEL[@BASE_URL]")
# Shares of each model in an English request's score and in another language's (embed/ensemble.py): MiniLM
# understands English only; multilingual-e5-small understands Ukrainian and about 100 languages, but embeds
# requests 4x slower than the others, so English requests, which MiniLM and USE serve well, do not wait for it.
DEFAULT_WEIGHTS = {"use": (0.5, 0.2), "minilm": (0.5, 0.0), "e5": (0.0, 0.8)}
WITHOUT_E5_WEIGHTS = {"use": (0.5, 1.0), "minilm": (0.5, 0.0)}
_NAMES_BY_MODEL_ID = {
    "use-multilingual-v3+all-minilm-l6-v2-int8+multilingual-e5-small-q4@0.5:0.2/0.5:0/0:0.8": "default",
    "use-multilingual-v3+all-minilm-l6-v2-int8@0.5:1/0.5:0": "use+minilm",
    "use-multilingual-v3": "use",
    "all-minilm-l6-v2-int8": "minilm",
    "multilingual-e5-small-q4": "e5",
}
# Models of earlier toolrag versions that no built-in embedder produces any more.
_RETIRED = {
    "use-multilingual-v3+all-minilm-l6-v2@0.5": "default",
    "use-multilingual-v3+all-minilm-l6-v2-int8@0.5": "default",
    "all-minilm-l6-v2": "minilm",
}


def embedder_name_for(model_id: str) -> str:
    """The embedder name that produces vectors of `model_id` (what `auto` uses for an indexed registry)."""
    if model_id in _NAMES_BY_MODEL_ID:
        return _NAMES_BY_MODEL_ID[model_id]
    if model_id in _RETIRED:
        raise UnknownModelError(
            f"this registry was indexed with {model_id}, a model of an earlier toolrag that toolrag {__version__} "
            f"replaced: re-embed it once with `toolrag index rebuild --embedder {_RETIRED[model_id]}` (it keeps "
            f"serving until the switch)",
            model_id=model_id,
            replacement=_RETIRED[model_id],
        )
    if model_id.startswith("openai-compatible:"):
        model, _, base_url = model_id.removeprefix("openai-compatible:").partition("@")
        return f"openai:{model}@{base_url}"
    raise UnknownModelError(
        f"this registry was indexed with {model_id!r}, which no built-in embedder produces", model_id=model_id
    )


_BUILT_IN: dict[str, Embedder] = {}
_BUILT_IN_LOCK = threading.RLock()


def make_embedder(name: str = DEFAULT_EMBEDDER) -> Embedder:
    """An embedder by name: `default` (USE multilingual + MiniLM + multilingual-e5-small where its wheel exists),
    `use+minilm`, `use`, `minilm`, `e5`, or `openai:MODEL[@BASE_URL]`.

    The built-in models are loaded once per process, however many registries use them (they are thread-safe)."""
    if name in ("default", "use+minilm", "use", "minilm", "e5"):
        with _BUILT_IN_LOCK:
            if name not in _BUILT_IN:
                _BUILT_IN[name] = _built_in(name)
            return _BUILT_IN[name]
    if name.startswith("openai:"):
        model, _, base_url = name.removeprefix("openai:").partition("@")
        return OpenAICompatibleEmbedder(model, base_url or "https://api.openai.com/v1")
    raise UnknownEmbedderError(name, EMBEDDER_NAMES)


def _built_in(name: str) -> Embedder:
    if name == "use":
        return UniversalSentenceEncoder()
    if name == "minilm":
        return MiniLM()
    if name == "e5":
        return MultilingualE5()
    weights = DEFAULT_WEIGHTS if name == "default" and e5_available() else WITHOUT_E5_WEIGHTS
    return EnsembleEmbedder([Member(make_embedder(model), *shares) for model, shares in weights.items()])


__all__ = [
    "DEFAULT_EMBEDDER",
    "Embedder",
    "EnsembleEmbedder",
    "Member",
    "MiniLM",
    "MultilingualE5",
    "OpenAICompatibleEmbedder",
    "UniversalSentenceEncoder",
    "Vectors",
    "embed_in_batches",
    "embedder_name_for",
    "make_embedder",
    "normalized",
]


def current_cache_keys() -> set[str]:
    """The model cache entries this installation's built-in models use (`toolrag cache prune` keeps them)."""
    from toolrag.embed import e5, minilm, use

    keys = set()
    for module in (use, minilm, e5):
        try:
            keys.add(module.cache_key())
        except (ImportError, OSError, KeyError):  # a model not installed here has no entry to keep
            continue
    return keys
