"""Example requests as views of their tools (search/examples.py), per tenant; and `explain`, the one
implementation behind the CLI, the API and the console's playground."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from toolrag import InvalidToolError, Principal, ToolRegistry
from toolrag.access import Grant
from toolrag.cli.app import app
from toolrag.eval import evaluate, load_benchmark
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig

from .conftest import RETRIEVAL, CountingEmbedder, make_tool
from .test_api import serving
from .test_eval import bench

ACME, GLOBEX = Principal(user="ann", tenant="acme"), Principal(user="gus", tenant="globex")
REQUEST = "what a gloomy day it is"  # small talk here (evidence -0.13, no boundary case) until an example


@pytest.fixture
def registry(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    built = ToolRegistry(tmp_path / "examples.db", embedder, RETRIEVAL)
    built.register_many(
        [
            make_tool("weather.forecast", "Weather forecast for the next days for a city."),
            make_tool("shop.track_order", "Track where a customer's order or parcel is."),
            make_tool("hr.payslip", "Show an employee's payslip for a month.", tenants=["acme"]),
            make_tool("mail.send", "Send an email to someone."),
        ]
    )
    return built


def ranking(registry: ToolRegistry, principal: Principal, request: str = REQUEST) -> list[tuple[str, float]]:
    return [(r.name, r.score) for r in registry.rank(request, principal)]


def test_an_example_finds_its_tool_for_its_tenant_and_moves_no_other_tenants_ranking(registry: ToolRegistry) -> None:
    assert registry.search(REQUEST, ACME) == []
    globex_before = ranking(registry, GLOBEX)
    registry.examples.add("weather.forecast", REQUEST, tenant="acme", edited_by="ops")
    found = registry.search(REQUEST, ACME)
    assert found[0].name == "weather.forecast" and found[0].signals.dense == pytest.approx(1.0, abs=1e-3)
    assert registry.search(REQUEST, GLOBEX) == []
    assert ranking(registry, GLOBEX) == globex_before  # not a score moved
    assert registry.get("weather.forecast").version == 2
    assert registry.store.audit_log(5, "weather.forecast")[0].detail == "examples"


def test_an_example_of_every_tenant_serves_all_and_can_be_turned_off(registry: ToolRegistry) -> None:
    registry.examples.add("weather.forecast", REQUEST)
    assert registry.search(REQUEST, GLOBEX)[0].name == "weather.forecast"
    assert registry.search(REQUEST, Principal.anonymous())[0].name == "weather.forecast"
    registry.retriever.use_config(registry.config.model_copy(update={"example_views": False}))
    assert registry.search(REQUEST, GLOBEX) == []


def test_an_example_of_a_hidden_tool_changes_nothing_for_who_cannot_use_it(registry: ToolRegistry) -> None:
    before = ranking(registry, GLOBEX, "show my payslip")
    registry.examples.add("hr.payslip", "show my payslip", tenant="acme")
    assert "hr.payslip" not in [name for name, _ in ranking(registry, GLOBEX, "show my payslip")]
    assert ranking(registry, GLOBEX, "show my payslip") == before
    with pytest.raises(InvalidToolError, match="tenant 'globex', who may not use the tool"):
        registry.examples.add("hr.payslip", "my salary", tenant="globex")


@pytest.mark.parametrize("mode", ["dense", "hybrid"])
def test_a_miss_fixed_by_an_example_stays_fixed_against_a_tool_described_like_the_request(
    tmp_path: Path, embedder: CountingEmbedder, mode: str
) -> None:
    """The operator's example is the request itself: its tool comes first even when a rival's own text is close to
    the request (cosine 0.80) and the example's tool's own text is far from it (0.02). Its own text may reorder it
    only among tools raised about as high (search/examples.py `ranking_cosines`)."""
    registry = ToolRegistry(tmp_path / f"{mode}.db", embedder, RETRIEVAL.model_copy(update={"mode": mode}))
    registry.register_many(
        [
            make_tool("weather.rain", "Will it rain in a city tomorrow"),
            make_tool("travel.packing", "Suggest what to pack in a suitcase for a trip."),
            make_tool("mail.send", "Send an email to someone."),
        ]
    )
    request = "will it rain in Paris tomorrow"
    assert registry.rank(request, ACME)[0].name == "weather.rain"
    registry.examples.add("travel.packing", request, tenant="acme")
    first, second = registry.rank(request, ACME)[:2]
    assert (first.name, second.name) == ("travel.packing", "weather.rain")
    assert first.score - second.score > 0.2


def test_examples_are_checked_kept_once_and_removed_by_name(registry: ToolRegistry) -> None:
    with pytest.raises(InvalidToolError, match=r"examples\.0\.text: .*must not be blank"):
        registry.examples.add("mail.send", "   ")
    with pytest.raises(InvalidToolError, match="at most 1000 characters"):
        registry.examples.add("mail.send", "x" * 1001)
    registry.examples.add("mail.send", "write to  Bob")
    assert registry.examples.add("mail.send", "Write to Bob").examples == registry.get("mail.send").examples
    assert [e.text for e in registry.get("mail.send").examples] == ["write to Bob"]
    with pytest.raises(InvalidToolError, match="no example request 'write to Bob' for tenant 'acme'"):
        registry.examples.remove("mail.send", "write to Bob", tenant="acme")
    assert registry.examples.remove("mail.send", "write to bob").examples == []


def test_a_logged_request_that_led_to_a_call_can_be_promoted(registry: ToolRegistry) -> None:
    from toolrag.store.usage import CallRecord, RetrievalRecord

    registry.store.usage.record(
        [RetrievalRecord("h", (), "what  a gloomy day  it is", "s1", "ann@acme", tenant="acme")],
        [CallRecord("weather.forecast", "ok", 1.0, False, "s1", "ann@acme", "acme")],
    )
    assert registry.examples.promotable("weather.forecast") == [("acme", REQUEST)]
    registry.examples.add("weather.forecast", REQUEST, "acme", source="usage")
    assert registry.examples.promotable("weather.forecast") == []
    assert registry.get("weather.forecast").examples[0].source == "usage"


def test_explain_says_why_each_tool_was_cut_and_tells_operators_what_is_hidden(registry: ToolRegistry) -> None:
    quiet = registry.explain(REQUEST, GLOBEX)
    assert quiet.delivered == [] and not quiet.needs_tool and "small talk" in quiet.decision
    assert quiet.ranking[0].name == "weather.forecast" and "small talk" in (quiet.ranking[0].cut or "")
    assert set(quiet.ranking[0].model_cosines) == {m.embedder.model_id for m in registry.embedder.inner.members}  # type: ignore[attr-defined]
    found = registry.explain("track my parcel", GLOBEX, k=1, reveal_hidden=True)
    assert found.delivered == ["shop.track_order"] and found.ranking[0].matched_words == ["parcel", "track"]
    assert found.ranking[1].cut == "ranked below the 1 tools returned at most"
    assert [(h.name, h.hidden_by) for h in registry.explain("my payslip", GLOBEX, reveal_hidden=True).hidden] == [
        ("hr.payslip", "tenants acme only")
    ]
    assert registry.explain("my payslip", GLOBEX).hidden == []
    registry.examples.add("weather.forecast", REQUEST, "globex")
    fixed = registry.explain(REQUEST, GLOBEX)
    assert fixed.delivered[0] == "weather.forecast" and fixed.ranking[0].example == REQUEST


def test_toolrag_explain_prints_the_ranking_and_the_hidden_tools(registry: ToolRegistry) -> None:
    store = str(registry.store.path)  # type: ignore[attr-defined]
    result = CliRunner().invoke(app, ["explain", "my payslip", "--store", store, "--tenant", "globex", "--json"])
    assert result.exit_code == 0, result.output
    explained = json.loads(result.stdout)
    assert explained["hidden"][0]["name"] == "hr.payslip" and explained["ranking"][0]["rank"] == 1
    table = CliRunner().invoke(app, ["explain", "track my parcel", "--store", store], env={"COLUMNS": "160"})
    assert "decision:" in table.stdout and "shop.track_order" in table.stdout and "MiniLM" in table.stdout
    empty = CliRunner().invoke(app, ["explain", " ", "--store", store])
    assert empty.exit_code == 1 and "the request is empty" in empty.stderr


def test_toolrag_tools_examples_add_list_and_remove(registry: ToolRegistry) -> None:
    store = str(registry.store.path)  # type: ignore[attr-defined]
    added = CliRunner().invoke(app, ["tools", "add-example", "weather.forecast", REQUEST, "--store", store])
    assert added.exit_code == 0 and "1 example request, now version 2" in added.stdout
    listed = CliRunner().invoke(app, ["tools", "examples", "weather.forecast", "--store", store, "--json"])
    assert json.loads(listed.stdout)["examples"][0]["text"] == REQUEST
    wrong = CliRunner().invoke(app, ["tools", "remove-example", "weather.forecast", "nope", "--store", store])
    assert wrong.exit_code == 1 and "no example request 'nope'" in wrong.stderr


ADMIN, ACME_READER = "examples-admin-0123456", "examples-acme-reader-01"


@pytest.fixture
def api(registry: ToolRegistry) -> Iterator[str]:
    config = ApiConfig(
        tokens={
            "ops": Grant(token=ADMIN, role="admin", scopes=["*"]),
            "acme": Grant(token=ACME_READER, role="reader", tenant="acme"),
        }
    )
    with serving(create_app(registry, config)) as url:
        yield url


def post(url: str, path: str, token: str, body: object) -> httpx.Response:
    return httpx.post(url + path, json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def test_the_api_explains_for_the_token_and_keeps_other_tenants_examples_private(api: str) -> None:
    own = post(api, "/explain", ACME_READER, {"query": "my payslip"})
    assert own.status_code == 200 and own.json()["ranking"][0]["name"] == "hr.payslip" and own.json()["hidden"] == []
    other = post(api, "/explain", ACME_READER, {"query": "my payslip", "principal": {"tenant": "globex"}})
    assert other.status_code == 403 and "needs admin" in other.json()["detail"]
    as_globex = post(api, "/explain", ADMIN, {"query": "my payslip", "principal": {"tenant": "globex"}}).json()
    assert as_globex["hidden"][0] == {
        "name": "hr.payslip",
        "cosine": as_globex["hidden"][0]["cosine"],
        "hidden_by": "tenants acme only",
    }
    assert post(api, "/tools/mail.send/examples", ACME_READER, {"text": "write to Bob"}).status_code == 403
    for text, tenant in (("write to Bob", "acme"), ("globex: mail the board", "globex")):
        assert post(api, "/tools/mail.send/examples", ADMIN, {"text": text, "tenant": tenant}).status_code == 200
    headers = {"Authorization": f"Bearer {ACME_READER}"}
    seen = httpx.get(f"{api}/tools/mail.send", headers=headers).json()
    assert [e["text"] for e in seen["examples"]] == ["write to Bob"]
    history = httpx.get(f"{api}/tools/mail.send/history", headers=headers).text
    assert "mail the board" not in history
    removed = post(api, "/tools/mail.send/examples/remove", ADMIN, {"text": "write to Bob", "tenant": "acme"})
    assert [e["text"] for e in removed.json()["examples"]] == ["globex: mail the board"]


def test_eval_measures_the_gain_of_examples_on_the_requests_left(tmp_path: Path, embedder: CountingEmbedder) -> None:
    report = evaluate(load_benchmark(bench(tmp_path / "b")), embedder, example_share=0.5).as_json()
    assert report["examples"] >= 1 and report["n_queries"] == 2
    assert set(report["modes"]) == {"hybrid", "hybrid, examples off"}
    gain = report["versus"]["hybrid, examples off"]["delivered_hit"]
    assert gain["n"] == 2 and gain["low"] <= gain["difference"] <= gain["high"]
