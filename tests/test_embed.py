from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from toolrag import EmbeddingError
from toolrag.embed import EnsembleEmbedder, MiniLM, OpenAICompatibleEmbedder, UniversalSentenceEncoder, make_embedder
from toolrag.embed.language import looks_english

from .conftest import json_http_server


def test_bundled_models_give_unit_vectors() -> None:
    for model in (UniversalSentenceEncoder(), MiniLM()):
        vectors = model.embed_documents(["send an email", "weather forecast"])
        assert vectors.shape == (2, model.dimension) and vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        assert np.allclose(model.embed_query("send an email"), vectors[0], atol=1e-5)


def test_ensemble_scores_are_a_mean_of_cosines_and_other_languages_use_the_multilingual_model() -> None:
    use, minilm = UniversalSentenceEncoder(), MiniLM()
    ensemble = EnsembleEmbedder(use, minilm)
    doc = ensemble.embed_documents(["weather forecast for a city"])[0]
    english = "will it rain tomorrow in the city"
    expected = 0.5 * float(
        use.embed_query(english) @ use.embed_documents(["weather forecast for a city"])[0]
    ) + 0.5 * float(minilm.embed_query(english) @ minilm.embed_documents(["weather forecast for a city"])[0])
    assert float(ensemble.embed_query(english) @ doc) == pytest.approx(expected, abs=1e-5)
    german = "Wird es morgen regnen?"
    only_use = float(use.embed_query(german) @ use.embed_documents(["weather forecast for a city"])[0])
    assert float(ensemble.embed_query(german) @ doc) == pytest.approx(only_use, abs=1e-5)


@pytest.mark.parametrize(
    ("text", "english"),
    [
        ("will it rain in Kyiv?", True),
        ("Wird es morgen in Berlin regnen?", False),
        ("明天会下雨吗", False),
        ("Чи буде дощ?", False),
        ("¿Puedes reservar una mesa?", False),
        ("calculator", True),
    ],
)
def test_language_guess(text: str, english: bool) -> None:
    assert looks_english(text) is english


def test_unknown_embedder_name() -> None:
    with pytest.raises(ValueError, match="unknown embedder 'bert'"):
        make_embedder("bert")


def _embeddings(path: str, body: dict[str, Any], raw: str) -> tuple[int, Any]:
    """The OpenAI embeddings protocol, answering in reverse order as some servers do."""
    if body["model"] == "broken":
        return 500, "model crashed"
    data = [{"index": i, "embedding": [float(len(text)), 1.0, float(i)]} for i, text in enumerate(body["input"])]
    return 200, {"data": list(reversed(data)), "model": body["model"]}


@pytest.fixture
def server_url() -> Iterator[str]:
    with json_http_server(_embeddings) as url:
        yield f"{url}/v1"


def test_openai_compatible_client(server_url: str) -> None:
    model = OpenAICompatibleEmbedder("tiny", base_url=server_url)
    assert model.dimension == 3
    vectors = model.embed_documents(["ab", "abcd"])
    expected = np.array([[2, 1, 0], [4, 1, 1]], dtype=np.float32)
    assert np.allclose(vectors, expected / np.linalg.norm(expected, axis=1, keepdims=True))
    assert model.model_id == f"openai-compatible:tiny@{server_url}"


def test_openai_compatible_errors_are_clear(server_url: str) -> None:
    with pytest.raises(EmbeddingError, match="answered 500: model crashed"):
        OpenAICompatibleEmbedder("broken", base_url=server_url).embed_documents(["x"])
    with pytest.raises(EmbeddingError, match="failed"):
        OpenAICompatibleEmbedder("tiny", base_url="http://127.0.0.1:9/v1", timeout=2).embed_documents(["x"])
