from __future__ import annotations

from collections.abc import Iterator, Sequence
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
from toolrag.embed.ensemble import model_cosines
from toolrag.embed.language import guess_language, looks_english

from .conftest import flooding, json_http_server


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


@pytest.mark.parametrize(
    ("text", "lang"),
    [
        ("Thanks a lot!", "en"),
        ("Kupiłem rower i w końcu dojeżdżam nim do pracy!", "pl"),
        ("¡Hasta luego!", "es"),
        ("Merci beaucoup pour ton aide", "fr"),
        ("Danke schön, das ist nett", "de"),
        ("Дякую, це чудово", "uk"),
        ("Спасибо большое", "ru"),
        ("谢谢你", "zh"),
        ("ありがとう、助かりました", "ja"),
        ("감사합니다", "ko"),
        ("12345 !!!", "und"),
    ],
)
def test_a_request_language_is_guessed_for_reports(text: str, lang: str) -> None:
    assert guess_language(text) == lang


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


def test_an_embeddings_endpoint_that_floods_its_answer_is_cut_off() -> None:
    """The endpoint is often a local server: one that answers 256 MB for one text is read no further than what its
    vectors need (before, every search read all of it into memory)."""
    offered = 256 * 1024 * 1024
    with flooding(offered) as (url, written):
        with pytest.raises(EmbeddingError, match=r"answered over 524,288 bytes, more than 1 vector\(s\) need"):
            OpenAICompatibleEmbedder("tiny", base_url=f"{url}/v1").embed_documents(["x"])
        sent = written()
    assert sent and max(sent) < offered // 8, sent


def test_an_embeddings_endpoint_that_compresses_its_answer_is_refused_unread() -> None:
    """A few kB of a compressed answer can unpack to gigabytes before any count of bytes sees them: the answer is
    asked for uncompressed, and one compressed anyway is refused."""
    with flooding(64 * 1024 * 1024, {"Content-Encoding": "zstd"}) as (url, written):
        with pytest.raises(EmbeddingError, match="compressed its answer though asked not to"):
            OpenAICompatibleEmbedder("tiny", base_url=f"{url}/v1").embed_documents(["x"])
        sent = written()
    assert sent and max(sent) < 16 * 1024 * 1024, sent


class _Axis:
    """A tiny model: every text is the unit vector of one axis; counts the requests it embeds."""

    def __init__(self, name: str, axis: int) -> None:
        self.model_id, self.dimension, self.axis, self.queries = name, 2, axis, 0

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.zeros((len(texts), 2), np.float32)
        vectors[:, self.axis] = 1.0
        return vectors

    def embed_query(self, text: str) -> np.ndarray:
        self.queries += 1
        return self.embed_documents([text])[0]


def test_explaining_many_tools_embeds_the_request_once_per_model() -> None:
    first, second = _Axis("a", 0), _Axis("b", 1)
    ensemble = EnsembleEmbedder([Member(first, 0.5, 0.5), Member(second, 0.5, 0.5)])
    documents = ensemble.embed_documents([f"tool {i}" for i in range(10)])
    cosines = model_cosines(ensemble, "a request", documents)
    assert (first.queries, second.queries) == (1, 1)
    assert len(cosines) == 10 and cosines[0] == pytest.approx({"a": 1.0, "b": 1.0})
