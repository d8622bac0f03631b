"""A client for any OpenAI-compatible `/v1/embeddings` endpoint: OpenAI, Ollama, vLLM, TEI, llama.cpp server. Its
answer is asked for uncompressed and read no further than MAX_EMBEDDING_ANSWER_BYTES_PER_TEXT for each text asked
for, within the timeout: the endpoint is often a local server, and one that is broken or hostile must not fill the
memory of every search (a compressed answer is refused: a few kB of it can unpack to gigabytes)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from toolrag.embed.base import Vectors, first_row, normalized
from toolrag.errors import EmbeddingError
from toolrag.limits import MAX_EMBEDDING_ANSWER_BYTES_PER_TEXT, UNCOMPRESSED, read_at_most, uncompressed

if TYPE_CHECKING:
    import httpx


class OpenAICompatibleEmbedder:
    """Embeds through HTTP. The dimension is learned from the first answer unless given."""

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        dimension: int | None = None,
        timeout: float = 60.0,
        client: httpx.Client | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if client is None:
            import httpx  # only this embedder talks HTTP: others never load it

            client = httpx.Client(timeout=timeout, headers=headers)
        self._client = client
        self._timeout = timeout
        self._dimension = dimension

    @property
    def model_id(self) -> str:
        return f"openai-compatible:{self.model}@{self.base_url}"

    @property
    def dimension(self) -> int:
        if self._dimension is None:
            self._dimension = len(self._request(["dimension probe"])[0])
        return self._dimension

    def _request(self, texts: Sequence[str]) -> list[list[float]]:
        import httpx

        url = f"{self.base_url}/embeddings"
        cap = MAX_EMBEDDING_ANSWER_BYTES_PER_TEXT * (len(texts) + 1)
        asked = {"model": self.model, "input": list(texts)}
        try:
            with self._client.stream("POST", url, json=asked, headers=UNCOMPRESSED) as response:
                compressed = not uncompressed(response.headers.get("Content-Encoding"))
                body = None if compressed else read_at_most(response.iter_raw(), cap, self._timeout)
        except httpx.HTTPError as exc:
            raise EmbeddingError(f"embedding request to {url} failed: {exc}") from exc
        if compressed:
            raise EmbeddingError(f"embedding endpoint {url} compressed its answer though asked not to: refused")
        if body is None:
            raise EmbeddingError(
                f"embedding endpoint {url} answered over {cap:,} bytes, more than {len(texts)} vector(s) need,"
                f" or took over {self._timeout:.0f} s"
            )
        if response.status_code != 200:
            text = body[:300].decode(errors="replace")
            raise EmbeddingError(f"embedding endpoint {url} answered {response.status_code}: {text}")
        try:
            items: list[dict[str, Any]] = json.loads(body)["data"]
            ordered = sorted(items, key=lambda item: int(item.get("index", 0)))
            vectors = [list(item["embedding"]) for item in ordered]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise EmbeddingError(f"embedding endpoint {url} sent an answer without data[].embedding") from exc
        if len(vectors) != len(texts):
            raise EmbeddingError(f"embedding endpoint {url} returned {len(vectors)} vectors for {len(texts)} texts")
        return vectors

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        vectors = self._request(texts)
        if self._dimension is None:
            self._dimension = len(vectors[0])
        return normalized(vectors, self._dimension, self.model_id)

    def embed_query(self, text: str) -> Vectors:
        return first_row(self.embed_documents([text]))
