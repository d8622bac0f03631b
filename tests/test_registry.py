from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from toolrag import CatalogError, EmbeddingError, ModelMismatchError, Principal, ToolNotFoundError, ToolRegistry
from toolrag.embed import UniversalSentenceEncoder

from .conftest import SAMPLE_TOOLS, CountingEmbedder, make_tool

ADMIN = Principal(tenant="acme", scopes=frozenset({"*"}))


def test_register_callables_and_search(registry: ToolRegistry) -> None:
    def send_invoice(customer: str, amount: float) -> str:
        """Send an invoice to a customer for an amount of money."""
        return f"invoice for {customer}"

    registry.register(send_invoice, *SAMPLE_TOOLS)
    assert registry.function("send_invoice") is send_invoice
    names = [r.name for r in registry.search("bill the customer 100 euros", ADMIN)]
    assert names[0] == "send_invoice"


def test_unchanged_tools_are_never_embedded_again(registry: ToolRegistry, embedder: CountingEmbedder) -> None:
    registry.register_many(SAMPLE_TOOLS)
    first_round = len(embedder.embedded)
    assert first_round == sum(1 + len(t.aliases) for t in SAMPLE_TOOLS)
    report = registry.register_many(SAMPLE_TOOLS)
    assert report.changed == 0 and len(embedder.embedded) == first_round
    edited = SAMPLE_TOOLS[1].model_copy(update={"description": "Live exchange rate between two currencies."})
    report = registry.register_many([edited])
    assert report.updated == ["finance.exchange_rate"]
    assert embedder.embedded[first_round:] == [
        "finance exchange rate: Live exchange rate between two currencies. Parameters: base, quote."
    ]
    assert registry.get("finance.exchange_rate").version == 2


def test_scope_change_bumps_the_version_without_embedding(registry: ToolRegistry, embedder: CountingEmbedder) -> None:
    registry.register_many(SAMPLE_TOOLS)
    before = len(embedder.embedded)
    registry.register_many([SAMPLE_TOOLS[0].model_copy(update={"scopes": ["weather:read"]})])
    assert len(embedder.embedded) == before
    assert registry.get("weather.forecast").version == 2


def test_failed_import_leaves_the_registry_unchanged(registry: ToolRegistry, tmp_path: Path) -> None:
    registry.register_many(SAMPLE_TOOLS)
    before = [(t.name, t.version) for t in registry.tools()]
    generation = registry.store.generation()
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps(
            [
                {"name": "new.tool", "description": "New."},
                {"name": "weather.forecast", "description": "Changed."},
                {"name": "broken", "description": "x", "input_schema": {"type": 5}},
            ]
        )
    )
    with pytest.raises(CatalogError, match="entry 3"):
        registry.import_file(bad)
    assert [(t.name, t.version) for t in registry.tools()] == before
    assert registry.store.generation() == generation


class FailingEmbedder(CountingEmbedder):
    """Fails on the second batch, as a remote embedding server might half-way through an import."""

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        if self.embedded:
            raise EmbeddingError("embedding server went away")
        return super().embed_documents(texts)


def test_embedding_failure_midway_writes_nothing(store_url: str, embedder: CountingEmbedder) -> None:
    failing = FailingEmbedder(embedder.inner, embedder.memory)
    registry = ToolRegistry(store_url, failing)
    many = [make_tool(f"t{i}", f"Tool number {i} does task {i}.") for i in range(100)]
    with pytest.raises(EmbeddingError):
        registry.register_many(many)
    assert registry.tools() == [] and registry.store.generation() == 0


def test_search_with_another_model_is_refused(store_url: str, embedder: CountingEmbedder) -> None:
    ToolRegistry(store_url, embedder).register_many(SAMPLE_TOOLS)
    other = ToolRegistry(store_url, UniversalSentenceEncoder())
    with pytest.raises(ModelMismatchError, match=r"indexed with .*toolrag index rebuild"):
        other.search("weather in Kyiv")
    with pytest.raises(ModelMismatchError):
        other.register_many([make_tool("x", "X.")])


def test_cache_is_invalidated_by_any_change(registry: ToolRegistry) -> None:
    registry.register_many(SAMPLE_TOOLS)
    query = "send a message to my colleague by mail"
    assert registry.search(query)[0].name == "email.send"
    assert registry.retriever.cache.get  # the second identical search is a cache hit
    hits = registry.retriever.cache.hits
    registry.search(query)
    assert registry.retriever.cache.hits == hits + 1
    registry.register_many([SAMPLE_TOOLS[5].model_copy(update={"active": False})])
    assert "email.send" not in [r.name for r in registry.search(query)]


def test_changes_from_another_process_are_seen(store_url: str, embedder: CountingEmbedder) -> None:
    reader = ToolRegistry(store_url, embedder)
    writer = ToolRegistry(store_url, embedder)
    writer.register_many(SAMPLE_TOOLS[:2])
    assert reader.search("exchange rate dollar euro")[0].name == "finance.exchange_rate"
    writer.register_many([make_tool("crypto.price", "Current price of bitcoin and other cryptocurrencies.")])
    # PostgreSQL announces the change (LISTEN/NOTIFY) instead of being asked on every search: it arrives within
    # milliseconds, not at once.
    deadline = time.monotonic() + 5
    while reader.generation != writer.generation and time.monotonic() < deadline:
        time.sleep(0.01)
    assert reader.search("bitcoin price")[0].name == "crypto.price"


def test_get_and_schemas_of_unknown_or_hidden_tools(registry: ToolRegistry) -> None:
    registry.register_many(SAMPLE_TOOLS)
    with pytest.raises(ToolNotFoundError, match="no tool named 'nope'"):
        registry.get("nope")
    with pytest.raises(ToolNotFoundError, match=r"payments\.refund_payment"):
        registry.schemas(["payments.refund_payment"], Principal())
    assert registry.schemas(["payments.refund_payment"], ADMIN)[0]["function"]["name"] == "payments__refund_payment"


def test_duplicate_names_in_one_call_are_refused(registry: ToolRegistry) -> None:
    with pytest.raises(ValueError, match="more than once"):
        registry.register_many([SAMPLE_TOOLS[0], SAMPLE_TOOLS[0]])


class InterruptedEmbedder(CountingEmbedder):
    """Stops after a number of batches, as a killed process would."""

    def __init__(self, inner, memory, batches: int) -> None:  # type: ignore[no-untyped-def]
        super().__init__(inner, memory)
        self.batches = batches

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        if self.batches == 0:
            raise KeyboardInterrupt
        self.batches -= 1
        return super().embed_documents(texts)


def test_rebuild_for_another_model_resumes_and_switches(store_url: str, embedder: CountingEmbedder) -> None:
    path = store_url  # every registry is closed when done: on PostgreSQL each holds connections until then
    with ToolRegistry(path, embedder) as first:
        first.register_many(SAMPLE_TOOLS)
    use_memory: dict[str, object] = {}
    interrupted = InterruptedEmbedder(UniversalSentenceEncoder(), use_memory, batches=1)  # type: ignore[arg-type]
    with ToolRegistry(path, interrupted) as rebuilding, pytest.raises(KeyboardInterrupt):
        rebuilding.rebuild(batch_size=4)
    # The old model still serves while the new index is incomplete.
    with ToolRegistry(path, embedder) as old:
        assert old.search("will it rain tomorrow")[0].name == "weather.forecast"
    resumed = CountingEmbedder(UniversalSentenceEncoder(), use_memory)  # type: ignore[arg-type]
    with ToolRegistry(path, resumed) as registry:
        total = sum(1 + len(t.aliases) for t in SAMPLE_TOOLS)
        assert registry.texts_to_rebuild() == total - 4
        assert registry.rebuild(batch_size=4) == total - 4
        assert registry.search("will it rain tomorrow")[0].name == "weather.forecast"
    with ToolRegistry(path, embedder) as stale, pytest.raises(ModelMismatchError):
        stale.search("will it rain tomorrow")


def test_a_failed_register_keeps_no_function(registry: ToolRegistry) -> None:
    def good(city: str) -> str:
        """Weather for a city."""
        return city

    with pytest.raises(ValueError, match="more than once"):
        registry.register(good, good)
    assert registry.function("good") is None and registry.tools() == []
