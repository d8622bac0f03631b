"""Requests with several intents: split at explicit markers, retrieved per part, merged fairly."""

from __future__ import annotations

import pytest

from toolrag import Principal, SearchConfig, Tool, ToolRegistry
from toolrag.search.intents import split_intents

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder


@pytest.mark.parametrize(
    ("request_text", "parts"),
    [
        ("what is the weather in Kyiv and what is the dollar exchange rate?", 2),
        ("Is it going to rain today and can you provide any news updates about local flooding?", 2),
        ("Find the paper, summarize it, then email it to my team", 2),
        ("Wie wird das Wetter morgen in Berlin und wie steht der Dollar?", 2),
        ("Яка погода в Києві і який курс долара?", 2),
        ("北京明天天气怎么样，然后告诉我美元汇率", 2),
        ("Check the stock of blue mugs. Then order fifty more. Finally, email the supplier about it.", 3),
        ("First, book a table for two. Next, find a taxi to the restaurant. Also, check the weather there.", 3),
        ("Erstelle eine Rechnung für Anna. Danach schicke sie per E-Mail an sie.", 2),
        ("Call Dr. Smith at 3.5 p.m. about the U.S. Open tickets.", 1),
        ("Give me the thyroid readings in ng/dL. Finally, obtain the treatment plan for patient DEF789.", 2),
        ("Look up the status of order ABC. Then email the customer about the delay.", 2),
        ("Ask J. Smith about the invoice", 1),
        ("Book a hotel in ST. Louis near ACME CORP. Headquarters for Friday", 1),
        ("Find the area of a triangle with a base of 10 units and height of 5 units.", 1),
        ("Can you find me a job in a city that is close to affordable houses?", 1),
        ("and", 1),
        ("", 1),
    ],
)
def test_requests_are_split_only_at_explicit_markers(request_text: str, parts: int) -> None:
    assert len(split_intents(request_text)) == parts


def test_a_task_of_many_steps_is_not_cut_at_three() -> None:
    steps = ". ".join(f"Then do task number {n} of the list" for n in range(1, 7))
    assert len(split_intents(steps)) == 6


def test_each_intent_gets_its_tool(tmp_path, embedder: CountingEmbedder) -> None:  # type: ignore[no-untyped-def]
    registry = ToolRegistry(tmp_path / "i.db", embedder, RETRIEVAL)
    registry.register_many(SAMPLE_TOOLS)
    anyone = Principal(scopes=frozenset({"*"}), tenant="acme")
    request = "will it rain in Kyiv tomorrow and what is the exchange rate of the dollar to the euro?"
    assert {"weather.forecast", "finance.exchange_rate"} <= {r.name for r in registry.search(request, anyone, k=2)}
    single = ToolRegistry(registry.store, embedder, SearchConfig(multi_intent=False, inject_all_below_tokens=0))
    assert len(single.search(request, anyone, k=2)) <= 2  # without the split, k bounds the whole request


def test_a_set_follows_the_steps_and_keeps_every_steps_best_first() -> None:
    from toolrag.search.cut import Chosen, Ranked
    from toolrag.search.steps import tools_of_steps

    def chosen(*positions: int) -> list[Chosen]:
        return [Chosen(Ranked(p, 1.0, 0.5, 0.5), 0.9) for p in positions]

    whole, first, second = chosen(7, 1), chosen(1, 2), chosen(3, 4)
    assert [c.item.position for c in tools_of_steps(whole, [first, second], 8)] == [7, 1, 2, 3, 4]
    # Short of room, every step keeps its likeliest before any keeps its second.
    assert [c.item.position for c in tools_of_steps(whole, [first, second], 3)] == [7, 1, 3]
    assert [c.item.position for c in tools_of_steps(chosen(3), [first, second], 8)] == [1, 2, 3, 4]


def test_every_step_brings_its_tool_and_the_cache_tells_cases_apart(tmp_path, embedder: CountingEmbedder) -> None:  # type: ignore[no-untyped-def]
    """The review of issue 32's sets: a step whose best cosine is weak lost its tool, and the cache key lowercased
    the request while steps are told apart by capitals after full stops."""
    from toolrag import Tool

    registry = ToolRegistry(tmp_path / "s.db", embedder, RETRIEVAL)
    registry.register_many(
        [
            Tool(name="check_stock", description="How many units of a product are in stock."),
            Tool(name="order_product", description="Place a purchase order for a product with a supplier."),
            Tool(name="email_supplier", description="Send an e-mail to a supplier."),
            Tool(name="weather", description="Weather forecast for a city."),
        ]
    )
    anyone = Principal()
    request = "Check the stock of blue mugs. Order fifty more mugs. Email the supplier about the delivery."
    lower = [r.name for r in registry.search(request.lower(), anyone)]
    steps = [r.name for r in registry.search(request, anyone)]
    assert steps == ["check_stock", "order_product", "email_supplier"]
    assert [r.name for r in registry.search(request.lower(), anyone)] == lower


CONTEXT_TOOLS = [
    ("gift_ideas", "Suggest birthday and holiday gift ideas for someone, based on what they like."),
    ("recipe_search", "Find cooking and baking recipes by ingredient or dish."),
    ("party_planner", "Plan a party: guest list, invitations, venue and schedule."),
    ("kitchen_store", "Buy kitchen appliances and cookware online."),
    ("job_search", "Search job openings by role and location."),
    ("commute_time", "Estimate the commute time between two places."),
    ("salary_data", "Typical salary ranges for a job title in a city."),
    ("photo_editor", "Retouch photos: smooth skin, remove blemishes, apply filters."),
    ("product_search", "Search products in online shops and compare prices."),
]


@pytest.mark.parametrize(
    "request_text",
    [
        "I need birthday gift ideas for my mum, her birthday is soon. She loves spending time in the kitchen.",
        "I'm looking for marketing jobs in Los Angeles. Any salary is fine, but I don't want a long commute.",
        "Ich suche eine Stelle im Marketing in Berlin. Das Gehalt ist mir egal, der Arbeitsweg soll kurz sein.",
        "Je cherche un emploi dans le marketing à Lyon. Le salaire m'importe peu.",
    ],
)
def test_a_request_read_as_steps_keeps_what_it_gets_read_whole(
    tmp_path, embedder: CountingEmbedder, request_text: str
) -> None:  # type: ignore[no-untyped-def]
    """A sentence of context ("Any salary is fine") reads as a step of its own; the tools the whole request's
    ranking delivers must still come, the steps' only add to them (the job search was lost when a set took only the
    whole request's likeliest)."""
    from toolrag.search.cut import choose

    registry = ToolRegistry(tmp_path / "c.db", embedder, RETRIEVAL)
    registry.register_many([Tool(name=name, description=text) for name, text in CONTEXT_TOOLS])
    anyone = Principal()
    assert len(registry.explain(request_text, anyone).steps) > 1
    retriever = registry.retriever
    found = retriever.candidates(request_text, anyone)
    whole = choose(found.items, retriever.probabilities(found), found.needs_tool, registry.config, registry.config.k)
    expected = {registry.retriever.snapshot().names[chosen.item.position] for chosen in whole}
    delivered = {result.name for result in registry.search(request_text, anyone)}
    assert expected <= delivered


TRAVEL = [
    Tool(name="search_flights", description="Search flight offers between two airports on a date."),
    Tool(
        name="book_flight",
        description="Book a flight offer for a passenger.",
        requires=[{"tool": "search_flights", "parameter": "offer_id"}],
    ),
    Tool(name="search_hotels", description="Search hotel offers in a city for given dates."),
    Tool(
        name="book_hotel",
        description="Book a hotel room offer.",
        requires=[{"tool": "search_hotels", "parameter": "offer_id"}],
    ),
    Tool(
        name="corporate_flight_booker",
        description="Book a flight offer for a passenger with corporate rates.",
        requires=["search_flights"],
    ),
    Tool(name="weather", description="Weather forecast for a city."),
]


@pytest.mark.parametrize("budget", [3, 4, 8])
def test_what_the_whole_request_adds_comes_last_and_never_displaces_a_prerequisite(
    tmp_path, embedder: CountingEmbedder, budget: int
) -> None:  # type: ignore[no-untyped-def]
    """The review of the change above: the whole request's less likely tools led the set and, short of room, pushed
    out a prerequisite of a step's tool (book_flight without search_flights)."""
    config = SearchConfig(inject_all_below_tokens=0, max_set_tools=budget)
    registry = ToolRegistry(tmp_path / "t.db", embedder, config)
    registry.register_many(TRAVEL)
    request = "Book me a flight to Rome for Friday. Then book a hotel near the Colosseum."
    names = [result.name for result in registry.search(request, Principal())]
    # Each step's tool comes whole, whatever max_set_tools (issue 52: the closure is bounded by prompt tokens);
    # what the whole request adds comes after, and only within max_set_tools.
    assert names[:4] == ["search_flights", "book_flight", "search_hotels", "book_hotel"]
    assert len(names) <= max(budget, 4)
    for tool in TRAVEL:
        if tool.name in names:  # every tool of the set comes with, and after, what it requires
            assert all(r.tool in names[: names.index(tool.name)] for r in tool.requires if not r.optional)
