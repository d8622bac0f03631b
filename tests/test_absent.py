"""Issue 49, a tool or none: when no tool here serves a request (the catalog lacks it, or hides it from who asks),
search hands over nothing, or a tool at a confidence that says so; a hidden tool looks exactly like an absent one;
and every way in tells the model to say so to the user (search/cut.py, search/confidence.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.inject.told import NO_TOOL_AVAILABLE, NO_TOOL_OFFERED
from toolrag.runtime import Agent, ScriptedModel
from toolrag.runtime.messages import Message, ToolCall
from toolrag.search.confidence import Signals, feature_matrix
from toolrag.search.cut import Ranked, choose

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder, make_tool

GARDEN = [
    make_tool("garden.soil_moisture", "Read the soil moisture sensor of a garden bed, in percent."),
    make_tool("garden.sprinkler_on", "Turn the garden sprinkler on for a number of minutes."),
    make_tool("lights.dim", "Dim the living room lights to a brightness level."),
    make_tool("door.lock", "Lock the front door."),
]
HIDDEN = "garden.sprinkler_on"
REQUESTS = [
    "water the lawn for 10 minutes",
    "Полий газон десять хвилин",
    "will it rain in Lviv tomorrow?",
    "tell me a joke",
    "qwertyuiop zxcv",
    HIDDEN,
    "garden.*",
    "sprinklr",  # typos: the second chance's vocabulary is the principal's own
    "i need the sprinkelr",
]


def _registry(folder: Path, embedder: CountingEmbedder, tools: list[Any]) -> ToolRegistry:
    registry = ToolRegistry(folder / "r.db", embedder, RETRIEVAL)
    registry.register_many(tools)
    return registry


def test_a_hidden_tool_looks_exactly_like_an_absent_one(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """Item 4: the same tools, scores, signals, explanation and token counts whether the catalog holds the tool
    and hides it from the principal, or does not hold it at all."""
    holds = _registry(tmp_path / "holds", embedder, [*SAMPLE_TOOLS, *GARDEN])
    lacks = _registry(tmp_path / "lacks", embedder, [*SAMPLE_TOOLS, *(t for t in GARDEN if t.name != HIDDEN)])
    denied = Principal(deny_tools=frozenset({HIDDEN}))
    told_apart = []
    for request in REQUESTS:
        hidden = holds.search(request, denied)
        absent = lacks.search(request, Principal.anonymous())
        if [(r.name, r.score, r.signals) for r in hidden] != [(r.name, r.score, r.signals) for r in absent]:
            told_apart.append(("search", request))
        if holds.explain(request, denied).model_dump() != lacks.explain(request, Principal.anonymous()).model_dump():
            told_apart.append(("explain", request))
        if holds.select(request, denied).injected_tokens != lacks.select(request).injected_tokens:
            told_apart.append(("select", request))
    assert told_apart == []
    assert holds.catalog_tokens(denied) == lacks.catalog_tokens(Principal.anonymous())
    assert HIDDEN in {r.name for r in holds.search("water the lawn for 10 minutes")}  # present, it is found


# The README's figures (Quick start): a guest's requests the example catalog has no tool for, or hides.
README_FIGURES = [
    ("refund the last payment", "finance.loan_calculator", 0.32),  # 0.64 before issue 49
    ("book a meeting room for tomorrow", "video.transcribe_recording", 0.26),  # 0.59
    ("qwertyuiop zxcv", "utils.qr_code", 0.17),  # 0.51
]
MASH = [
    "qwertyuiop zxcv", "asdf jkl; qwer", "zxcvbnm", "hjkl hjkl", "qazwsx edc", "poiuytrewq", "mnbvcxz lkj",
    "aaaaaa bbbb", "jfjfjfjf", "sdfghjkl", "wasd wasd wasd", "ghfjdksla", "xcvb nmlk", "rtyu fghj", "ppp ooo iii",
]  # fmt: skip


def test_the_quick_starts_guest_gets_little_where_nothing_serves(quickstart: tuple[Path, dict[str, Any]]) -> None:
    """The issue's cases: a guest may not refund, and the example catalog books no rooms; an agent handed
    `finance.loan_calculator` at 0.64 acted on it. Each now comes well below an even guess (the issue's bar, 0.3, is
    missed by the first: docs/benchmarks.md "A tool or none"); keyboard mash mostly gets nothing (the closest to
    the small-talk decision, `sdfghjkl`, is 0.007 below it: a thousand times what other CPUs' kernels move)."""
    registry = ToolRegistry(quickstart[0])
    guest = Principal(user="guest")
    for request, name, score in README_FIGURES:
        found = registry.search(request, guest)
        assert found and found[0].name == name and abs(found[0].score - score) < 0.05, (request, found[:1])
    given = [request for request in MASH if registry.search(request, guest)]
    assert given == ["qwertyuiop zxcv"]


def test_the_tools_a_request_is_about_still_come(quickstart: tuple[Path, dict[str, Any]]) -> None:
    """The other side: requests the example catalog serves keep their tool, at a confidence above the floor."""
    registry = ToolRegistry(quickstart[0])
    guest = Principal(user="guest")
    for request, expected in [
        ("Where is my package? It should have arrived yesterday.", "shop.track_shipment"),
        ("Wo ist mein Paket?", "shop.track_shipment"),
        ("我的包裹在哪里？", "shop.track_shipment"),
    ]:
        found = registry.search(request, guest)
        assert found and found[0].name == expected
        assert found[0].score >= registry.config.no_tool_below + 0.1, (request, found[0].score)


def test_explain_names_the_nearest_tool_and_why_it_was_not_enough(tmp_path: Path, embedder: CountingEmbedder) -> None:
    strict = RETRIEVAL.model_copy(update={"no_tool_below": 0.99})
    registry = ToolRegistry(tmp_path / "r.db", embedder, strict)
    registry.register_many(GARDEN)
    assert registry.search("water the lawn for 10 minutes") == []
    explained = registry.explain("water the lawn for 10 minutes", Principal.anonymous())
    assert explained.decision.startswith(f"no tool here serves the request: the nearest, {HIDDEN}, is ")
    assert "below no_tool_below 0.99" in explained.decision and "lawn" in explained.decision
    assert explained.ranking[0].cut is not None and "no_tool_below" in explained.ranking[0].cut
    assert "50% of the requests for a tool find none here" in explained.meaning


def test_the_expected_share_of_absent_requests_moves_every_score_one_way(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """`absent_share`: a registry expected to lack more of what it is asked for shows lower probabilities, in the
    same order."""
    registry = _registry(tmp_path, embedder, [*SAMPLE_TOOLS, *GARDEN])
    request = "water the lawn for 10 minutes"
    scores = {}
    for share in (0.2, 0.5, 0.8):
        registry.retriever.use_config(RETRIEVAL.model_copy(update={"absent_share": share, "no_tool_below": 0.0}))
        scores[share] = [(r.name, r.score) for r in registry.search(request)]
    assert [name for name, _ in scores[0.2]][:1] == [name for name, _ in scores[0.8]][:1] == [HIDDEN]
    assert scores[0.2][0][1] > scores[0.5][0][1] > scores[0.8][0][1]
    for share in (0.0, 1.0, 1.5):
        with pytest.raises(ValidationError, match="absent_share"):
            SearchConfig(absent_share=share)


def test_the_floor_keeps_what_was_asked_for_and_does_not_depend_on_k() -> None:
    """Below the floor nothing comes but a tool the request named or a rule routed it to (a routed tool that is not
    the likeliest was dropped with the rest); and the floor reads every candidate, not the first k by fused score
    (k=1 gave nothing where k=2 gave a tool at 0.13)."""
    config = SearchConfig(no_tool_below=0.1)
    plain, routed = Ranked(0, 0.9, 0.5, 0.0), Ranked(1, 0.5, 0.4, 0.0, routed_category="billing")
    assert [c.item.position for c in choose([plain, routed], [0.07, 0.02], True, config, 3)] == [1]
    assert choose([plain, routed], [0.07, 0.02], True, config, 3, floored=False)  # steps are not floored
    first, likelier = Ranked(0, 0.9, 0.5, 0.0), Ranked(1, 0.8, 0.6, 0.0)
    for k in (1, 2):
        assert choose([first, likelier], [0.05, 0.13], True, config, k), k


def test_what_the_relevance_model_reads_survives_a_round_trip() -> None:
    signals = Signals(0.1, True, (0.8, 0.6, 0.5))
    again = Signals.from_json(signals.to_json())
    assert again == signals
    assert (feature_matrix(again) == feature_matrix(signals)).all()


def _calls(call_id: str, name: str, arguments: dict[str, Any]) -> Message:
    return Message("assistant", "", (ToolCall(call_id, name, json.dumps(arguments)),))


def test_the_agent_tells_the_model_no_tool_is_available(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """Item 5: discovery answers a search that found nothing with the sentence; pre-selection, offering no tool,
    tells the model beside the request (in the system text: providers take it at the start only)."""
    registry = _registry(tmp_path, embedder, GARDEN)
    model = ScriptedModel([_calls("f1", "find_tools", {"query": "tell me a joke"}), Message("assistant", "Sorry.")])
    result = Agent(registry, model, Principal.anonymous(), mode="discover").run("tell me a joke")
    assert [m.content for m in result.messages if m.role == "tool"] == [NO_TOOL_AVAILABLE]

    model = ScriptedModel([Message("assistant", "No tool for that, sorry."), Message("assistant", "Done.")])
    agent = Agent(registry, model, Principal.anonymous(), system="Be brief.")
    agent.run("tell me a joke")
    shown = model.requests[0].messages
    assert shown[0].role == "system" and shown[0].content == f"Be brief.\n\n{NO_TOOL_OFFERED}"
    assert [m.role for m in shown] == ["system", "user"]
    agent.run("turn the sprinkler on for ten minutes")
    assert NO_TOOL_OFFERED not in model.requests[1].messages[0].content and model.requests[1].tools


def test_reading_a_hidden_tool_does_the_work_of_reading_an_absent_one(
    tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attacker's review timed GET /tools/NAME: a hidden tool's row was read from the store and parsed before it
    was found hidden, an absent name missed at once, and a tool with a large schema took a millisecond longer. Now
    the snapshot answers both alike and the store is read only for a tool the caller may see."""
    import httpx

    from toolrag.server.app import create_app

    from .test_api import ACME_READER, api_config, serving

    secret = make_tool("crm.globex_plan", "Globex's merger plan. " * 200, tenants=["globex"])
    registry = _registry(tmp_path, embedder, [*SAMPLE_TOOLS, secret])
    read: list[str] = []
    get = registry.get
    monkeypatch.setattr(registry, "get", lambda name, *args, **kwargs: read.append(name) or get(name, *args, **kwargs))
    headers = {"Authorization": f"Bearer {ACME_READER}"}
    with serving(create_app(registry, api_config())) as url:
        answers = {
            name: [httpx.get(f"{url}/tools/{name}{path}", headers=headers).json() for path in ("", "/history")]
            for name in ("crm.globex_plan", "crm.never_written")
        }
        assert httpx.get(f"{url}/tools/{SAMPLE_TOOLS[0].name}", headers=headers).status_code == 200
    assert read == [SAMPLE_TOOLS[0].name]  # neither the hidden tool's row nor an absent one's was looked for
    hidden, absent = answers["crm.globex_plan"], answers["crm.never_written"]
    assert [a["detail"].replace("globex_plan", "X") for a in hidden] == [
        a["detail"].replace("never_written", "X") for a in absent
    ]
    registry.close()
