from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest

from toolrag import EmbeddingError
from toolrag.embed import (
    EnsembleEmbedder,
    Member,
    MiniLM,
    MultilingualE5,
    OpenAICompatibleEmbedder,
    UniversalSentenceEncoder,
    make_embedder,
)
from toolrag.embed.base import DelegatingEmbedder, Embedder, Vectors
from toolrag.embed.batching import QueryBatcher
from toolrag.embed.language import looks_english

from .conftest import json_http_server


def test_bundled_models_give_unit_vectors() -> None:
    for model in (UniversalSentenceEncoder(), MiniLM(), MultilingualE5()):
        vectors = model.embed_documents(["send an email", "weather forecast"])
        assert vectors.shape == (2, model.dimension) and vectors.dtype == np.float32
        assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
        query = model.embed_query("send an email")
        assert np.isclose(np.linalg.norm(query), 1.0, atol=1e-5) and float(query @ vectors[0]) > 0.8


class Counting(DelegatingEmbedder):
    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.queries = 0

    def embed_query(self, text: str) -> Vectors:
        self.queries += 1
        return self.inner.embed_query(text)


def test_the_ensemble_scores_the_weighted_mean_of_its_models_cosines_by_language() -> None:
    use, minilm, e5 = Counting(UniversalSentenceEncoder()), Counting(MiniLM()), Counting(MultilingualE5())
    ensemble = EnsembleEmbedder([Member(use, 0.5, 0.2), Member(minilm, 0.5, 0.0), Member(e5, 0.0, 0.8)])
    tool = "weather forecast for a city"
    doc = ensemble.embed_documents([tool])[0]
    assert np.isclose(np.linalg.norm(doc), 1.0, atol=1e-5)

    def cosine(member: Counting, request: str) -> float:
        return float(member.inner.embed_query(request) @ member.inner.embed_documents([tool])[0])

    english = "will it rain tomorrow in the city"
    expected = 0.5 * cosine(use, english) + 0.5 * cosine(minilm, english)
    assert float(ensemble.embed_query(english) @ doc) == pytest.approx(expected, abs=1e-5)
    assert e5.queries == 0  # a model with no share in English requests is not run for them
    ukrainian = "Чи буде завтра дощ?"
    expected = 0.2 * cosine(use, ukrainian) + 0.8 * cosine(e5, ukrainian)
    minilm_before = minilm.queries
    assert float(ensemble.embed_query(ukrainian) @ doc) == pytest.approx(expected, abs=1e-5)
    assert minilm.queries == minilm_before


@pytest.mark.parametrize(
    "members",
    [
        [],
        [Member(MiniLM(), 0.5, 0.5)],  # shares must add up to 1
        [Member(MiniLM(), 1.0, 0.0), Member(UniversalSentenceEncoder(), -0.1, 1.1)],
        [Member(MiniLM(), 1.0, 1.0), Member(UniversalSentenceEncoder(), 0.0, 0.0)],  # a member no language uses
    ],
)
def test_an_ensemble_with_impossible_weights_is_refused(members: list[Member]) -> None:
    with pytest.raises(ValueError):
        EnsembleEmbedder(members)


def test_the_default_names_every_model_and_weight() -> None:
    default = make_embedder("default")
    assert default.model_id == (
        "use-multilingual-v3+all-minilm-l6-v2-int8+multilingual-e5-small-q4@0.5:0.2/0.5:0/0:0.8"
    )
    assert default.dimension == 512 + 384 + 384
    assert make_embedder("use+minilm").model_id == "use-multilingual-v3+all-minilm-l6-v2-int8@0.5:1/0.5:0"


@pytest.mark.parametrize(
    ("text", "english"),
    [
        ("will it rain in Kyiv?", True),
        ("Wird es morgen in Berlin regnen?", False),
        ("明天会下雨吗", False),
        ("Чи буде дощ?", False),
        ("¿Puedes reservar una mesa?", False),
        ("calculator", True),
        ("Napisz wiersz o morzu", False),
        ("Deniz hakkında bir şiir yaz", False),
        ("¡Hasta luego!", False),
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


class SlowWords:
    """A model that takes a while per call (not per text), as real models nearly do for short requests."""

    model_id = "slow-words-4"
    dimension = 4

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls = 0
        self.fail_on = fail_on

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_queries(texts)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed_queries([text])[0]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls += 1
        time.sleep(0.02)
        if self.fail_on in texts:
            raise ValueError("the model failed")
        return np.array([[len(t), t.count("a"), t.count("e"), 1.0] for t in texts], dtype=np.float32)


def test_concurrent_requests_share_model_calls_and_each_gets_its_own_vector() -> None:
    model = SlowWords()
    batcher = QueryBatcher(model)
    texts = [f"request {'a' * i} {'e' * (i % 7)}" for i in range(40)]
    with ThreadPoolExecutor(40) as pool:
        vectors = list(pool.map(batcher.embed_query, texts))
    for text, vector in zip(texts, vectors, strict=True):
        assert np.array_equal(vector, SlowWords().embed_query(text))
    assert model.calls < 10  # 40 requests, a few model calls


def test_a_failed_batch_fails_its_requests_and_the_next_ones_run() -> None:
    batcher = QueryBatcher(SlowWords(fail_on="bad"))
    with ThreadPoolExecutor(8) as pool:
        outcomes = list(pool.map(lambda t: _outcome(batcher, t), ["bad", *[f"good {i}" for i in range(7)]]))
    assert outcomes[0] == "ValueError"
    assert batcher.embed_query("fine afterwards")[3] == 1.0  # the model is not left locked


def test_requests_beyond_the_queue_bound_are_refused_not_queued() -> None:
    batcher = QueryBatcher(SlowWords(), max_waiting=2)
    with ThreadPoolExecutor(12) as pool:
        outcomes = list(pool.map(lambda t: _outcome(batcher, t), [f"r{i}" for i in range(12)]))
    assert "EmbeddingError" in outcomes and "ok" in outcomes


def _outcome(batcher: QueryBatcher, text: str) -> str:
    try:
        batcher.embed_query(text)
    except Exception as error:
        return type(error).__name__
    return "ok"
