from __future__ import annotations

from pathlib import Path

import pytest

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.search.cache import QueryCache
from toolrag.search.text import split_identifier, tokenize

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder, make_tool

ADMIN = Principal(tenant="acme", scopes=frozenset({"*"}))


@pytest.fixture
def catalog(registry: ToolRegistry) -> ToolRegistry:
    registry.register_many(SAMPLE_TOOLS)
    return registry


def configured(tmp_path: Path, embedder: CountingEmbedder, **settings: object) -> ToolRegistry:
    config = RETRIEVAL.model_copy(update=settings)
    registry = ToolRegistry(tmp_path / "c.db", embedder, config)
    registry.register_many(SAMPLE_TOOLS)
    return registry


def test_tokenizer_splits_identifiers_stems_and_handles_cjk() -> None:
    assert split_identifier("getCurrentWeather") == "get Current Weather"
    assert split_identifier("github.create_issue") == "github create issue"
    assert tokenize("Refunding payments for HTTPServer") == ["refund", "payment", "http", "server"]
    assert tokenize("查询天气") == ["查", "询", "天", "气", "查询", "询天", "天气"]


def test_contractions_and_function_words_match_nothing() -> None:
    # "it's" and "I'm" left a stray "s" and "m", and "if"/"any"/"some" were words: each matched unrelated tools.
    assert tokenize("Can you tell me if it's going to rain this weekend?") == ["tell", "go", "rain", "weekend"]
    assert tokenize("I'm in the mood for some Italian food, any ideas?") == ["mood", "italian", "food", "idea"]
    assert tokenize("I can't log in, it won't load and the user\u2019s key isn't valid") == [
        "not",
        "log",
        "not",
        "load",
        "user",
        "key",
        "not",
        "valid",
    ]


def test_results_carry_scores_and_their_reasons(catalog: ToolRegistry) -> None:
    results = catalog.search("will it rain in Lviv tomorrow?", ADMIN)
    assert results[0].name == "weather.forecast"
    top = results[0]
    assert 0.0 <= top.score <= 1.0 and top.signals.dense > 0.45
    assert top.card.purpose.startswith("Weather forecast")
    assert all(0.0 <= r.score <= 1.0 for r in catalog.rank("rain", ADMIN))


@pytest.mark.parametrize(
    "request_text",
    [
        "Wird es morgen in Berlin regnen?",
        "Чи буде завтра дощ у Львові?",
        "明天北京会下雨吗？",
        "¿Lloverá mañana en Madrid?",
    ],
)
def test_requests_in_other_languages_find_english_tools(catalog: ToolRegistry, request_text: str) -> None:
    assert catalog.rank(request_text, ADMIN)[0].name == "weather.forecast"


def test_nothing_relevant_gives_no_tools(catalog: ToolRegistry) -> None:
    assert catalog.search("tell me a joke", ADMIN) == []
    assert catalog.search("   ", ADMIN) == []
    assert catalog.select("hello there", ADMIN).tools == []


def test_a_request_naming_a_tool_finds_it(catalog: ToolRegistry) -> None:
    result = catalog.search("call calendar.create_event please", ADMIN)[0]
    assert result.name == "calendar.create_event" and result.signals.name_match and result.signals.fused == 1.0
    assert catalog.search("email.send", ADMIN)[0].name == "email.send"


def test_k_bounds_and_adaptive_cut(catalog: ToolRegistry) -> None:
    assert len(catalog.search("payments", ADMIN, k=1)) == 1
    results = catalog.search("where is my package", ADMIN, k=5)
    assert results[0].name == "shop.track_shipment"
    assert all(r.score >= catalog.config.min_confidence for r in results[1:])
    assert [r.score for r in results] == sorted((r.score for r in results), reverse=True)
    with pytest.raises(ValueError):
        SearchConfig(k=6)


def test_always_include_respects_visibility(tmp_path: Path, embedder: CountingEmbedder) -> None:
    registry = configured(tmp_path, embedder, always_include=["email.send", "hr.update_salary"])
    names = [r.name for r in registry.search("will it rain tomorrow", Principal())]
    assert names[0] == "weather.forecast" and "email.send" in names and "hr.update_salary" not in names
    assert [r.name for r in registry.search("will it rain tomorrow", ADMIN)][-1] == "hr.update_salary"


def test_always_include_names_a_tool_in_any_case_and_adds_it_once(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """A name configured in another case was looked up in lower case but compared as written: the tool came twice."""
    registry = configured(tmp_path, embedder, always_include=["Weather.Forecast", "EMAIL.send", "email.SEND"])
    names = [r.name for r in registry.search("will it rain tomorrow", Principal())]
    assert names.count("weather.forecast") == 1 and names.count("email.send") == 1


def test_category_routing_boost_and_filter(tmp_path: Path, embedder: CountingEmbedder) -> None:
    routes = {"billing": ["money back", "Rückerstattung", "退款"]}
    boosted = configured(tmp_path, embedder, routes=routes)
    result = boosted.search("Ich möchte eine Rückerstattung", ADMIN)[0]
    assert result.name == "payments.refund_payment" and result.signals.routed_category == "billing"
    filtered = ToolRegistry(tmp_path / "c.db", embedder, SearchConfig(routes=routes, route_mode="filter"))
    assert {r.name for r in filtered.rank("我要退款", ADMIN)} == {"payments.refund_payment", "payments.list_payments"}


def test_query_cache_is_bounded_and_expires() -> None:
    now = [0.0]
    cache: QueryCache[int] = QueryCache(max_entries=2, ttl_seconds=10, clock=lambda: now[0])
    cache.put("a", 1)
    cache.put("b", 2)
    cache.put("c", 3)
    assert cache.get("a") is None and cache.get("c") == 3 and len(cache) == 2
    now[0] = 11
    assert cache.get("c") is None


def test_the_small_talk_reference_is_measured_once_per_registry_version(registry: ToolRegistry) -> None:
    registry.register_many(SAMPLE_TOOLS)
    anyone = Principal(scopes=frozenset({"*"}), tenant="acme")
    assert registry.search("will it rain tomorrow in Lviv", anyone)[0].name == "weather.forecast"
    reference = registry.retriever.decide.small_talk(registry.snapshot())
    assert registry.search("tell me a joke", anyone) == []
    assert registry.retriever.decide.small_talk(registry.snapshot()) is reference
    registry.register(make_tool("notes.add", "Add a note to the notebook."))
    assert registry.retriever.decide.small_talk(registry.snapshot()) is not reference
