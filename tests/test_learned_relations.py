"""Relations learned from usage (search/learned.py) and an admin's verdicts on inferred and learned relations
(catalog/relations.py): what one tenant's sessions teach moves that tenant's results only, too little support
teaches nothing, a rejected relation stays rejected across re-inference and a confirmed one stays, and a tool the
principal may not use is never proposed, counted or named."""

from __future__ import annotations

import getpass
import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolrag import Principal, SearchConfig, Tool, ToolRegistry
from toolrag.cli.app import app
from toolrag.errors import InvalidToolError, ToolNotFoundError
from toolrag.model import Requirement, utc_now
from toolrag.monitor.config import ScheduleConfig
from toolrag.monitor.schedule import Scheduler, summary
from toolrag.search.learned import Thresholds, learn
from toolrag.search.learned_defaults import MIN_SESSIONS
from toolrag.store.usage import CallRecord, SessionCall

from .conftest import RETRIEVAL, CountingEmbedder, make_tool
from .test_inferred import catalog as playlist_catalog
from .test_production import WallClock

runner = CliRunner()
RELATED = RETRIEVAL.model_copy(update={"k": 1, "related_tools": True})
ACME = Principal(user="ann", tenant="acme")
GLOBEX = Principal(user="gus", tenant="globex")


def shop() -> list[Tool]:
    return [
        make_tool("orders.search", "Find a customer's orders by date, status or product."),
        make_tool("orders.refund", "Refund an order to the customer's card."),
        make_tool("orders.audit", "Audit trail of an order, for admins.", scopes=["admin"]),
        make_tool("orders.globex_export", "Export orders to Globex's ledger.", tenants=["globex"]),
        make_tool("weather.forecast", "Weather forecast for the next days for a city."),
    ]


def sessions(*flows: tuple[str, ...], tenant: str = "acme", first: int = 0) -> list[CallRecord]:
    """One session per flow, each of another caller of `tenant`, its tools called in order."""
    return [
        CallRecord(tool, "ok", 5.0, True, f"{tenant}-s{first + n}", f"user{n}@{tenant}", tenant, caller=f"u{n}")
        for n, flow in enumerate(flows)
        for tool in flow
    ]


@pytest.fixture
def shop_registry(store_url: str, embedder: CountingEmbedder) -> Iterator[ToolRegistry]:
    with ToolRegistry(store_url, embedder, RELATED) as registry:
        registry.register_many(shop())
        yield registry


def test_sessions_teach_a_related_tool_to_their_tenant_only(shop_registry: ToolRegistry) -> None:
    flows = [("orders.search", "orders.refund")] * 6 + [("orders.search", "weather.forecast")] * 2
    shop_registry.store.usage.record([], sessions(*flows))
    request = "find the order I placed last week"
    assert [r.name for r in shop_registry.search(request, ACME)] == ["orders.search"]  # nothing learned yet
    run = shop_registry.relations.learn()
    assert run.calls == 16
    assert [(r.learner, r.tool, r.related, r.support, r.sessions) for r in run.relations] == [
        ("tenant:acme", "orders.search", "orders.refund", 6, 8)  # 2 of 8 sessions chose the forecast: too few
    ]
    acme = shop_registry.search(request, ACME)
    assert [r.name for r in acme] == ["orders.search", "orders.refund"]
    assert acme[1].signals.related_to == "orders.search"
    assert acme[1].signals.related_why == (
        "related: 6 of 8 acme sessions that called orders.search called orders.refund next"
    )
    assert [r.name for r in shop_registry.search(request, GLOBEX)] == ["orders.search"]  # acme's usage only
    explained = shop_registry.explain(request, ACME, 1)
    assert explained.related == {"orders.refund": acme[1].signals.related_why}
    assert shop_registry.store.audit_log(1)[0].action == "relations_learned"


def test_an_admins_console_trials_teach_nothing(shop_registry: ToolRegistry) -> None:
    """Trying tools from the console is not an agent's session: it is left out of learning, as of the health figures."""
    trials = [replace(call, origin="console") for call in sessions(*[("orders.search", "orders.refund")] * 6)]
    shop_registry.store.usage.record([], trials)
    assert shop_registry.relations.learn().relations == []


def test_related_tools_are_off_by_default_and_need_the_requests_ranking(
    shop_registry: ToolRegistry, embedder: CountingEmbedder
) -> None:
    shop_registry.store.usage.record([], sessions(*[("orders.search", "orders.refund")] * 6))
    shop_registry.relations.learn()
    assert SearchConfig().related_tools is False
    off = ToolRegistry(shop_registry.store, embedder, RETRIEVAL.model_copy(update={"k": 1}))
    assert [r.name for r in off.search("find the order I placed last week", ACME)] == ["orders.search"]
    # A related tool is never a reason by itself: a request that gets no tool gets none.
    assert shop_registry.search("hello, how are you today?", ACME) == []


def test_too_little_support_teaches_nothing_and_a_looping_agent_is_one_session() -> None:
    tools = shop()
    few = [
        SessionCall(f"s{n}", "acme", f"u{n}", tool)
        for n in range(MIN_SESSIONS - 1)
        for tool in ("orders.search", "orders.refund")
    ]
    assert learn(few, tools) == []
    looping = [
        SessionCall("s1", "acme", "bot", tool) for _ in range(100) for tool in ("orders.search", "orders.refund")
    ]
    assert learn(looping, tools) == []  # 199 pairs, one session
    enough = few + [SessionCall("s9", "acme", "u9", t) for t in ("orders.search", "orders.refund")]
    assert [(r.tool, r.related, r.support) for r in learn(enough, tools)] == [("orders.search", "orders.refund", 5)]
    # Retries of one tool are one call: search, search, refund is search then refund.
    retried = [
        SessionCall(f"s{n}", "acme", f"u{n}", t) for n in range(5) for t in ("orders.search",) * 3 + ("orders.refund",)
    ]
    assert [r.support for r in learn(retried, tools)] == [5]
    weak = enough + [SessionCall(f"w{n}", "acme", "u", "orders.search") for n in range(20)]  # 5 of 25: below 0.3
    assert learn(weak, tools) == []
    assert learn(weak, tools, thresholds=Thresholds(min_strength=0.2))[0].strength == 0.2


def test_a_tool_the_principal_may_not_use_is_never_proposed_counted_or_named(
    shop_registry: ToolRegistry,
) -> None:
    flows = [("orders.search", "orders.audit")] * 6 + [("orders.search", "orders.globex_export")] * 6
    shop_registry.store.usage.record([], sessions(*flows))
    learned = shop_registry.relations.learn().relations
    # acme may not see globex's tool at all: its calls (refused or not) teach nothing about it.
    assert [(r.related, r.support) for r in learned] == [("orders.audit", 6)]
    request = "find the order I placed last week"
    for principal in (ACME, GLOBEX):  # ann has no admin scope; globex learned nothing
        found = shop_registry.search(request, principal)
        assert all("orders.audit" not in r.model_dump_json() for r in found)
        assert "orders.audit" not in shop_registry.explain(request, principal, 1).model_dump_json()
        listed = shop_registry.relations.of("orders.search", principal.can_use)
        assert all("orders.audit" not in r.model_dump_json() for r in listed)
    admin = Principal(user="ann", tenant="acme", scopes=frozenset({"admin"}))
    assert [r.name for r in shop_registry.search(request, admin)] == ["orders.search", "orders.audit"]


def test_issue48_r4_5_one_caller_cannot_teach_its_tenant_a_relation(shop_registry: ToolRegistry) -> None:
    """Sessions are named by the client: one caller minting six sessions is still one caller, and what a relation
    teaches applies to its whole tenant. Support must come from `min_callers` distinct callers of the tenant."""
    minted = [
        CallRecord(tool, "ok", 5.0, True, f"minted-{n}", "mallory@acme", "acme", caller='["rule","mallory"]')
        for n in range(6)
        for tool in ("orders.search", "orders.refund")
    ]
    shop_registry.store.usage.record([], minted)
    assert shop_registry.relations.learn().relations == []
    assert [r.name for r in shop_registry.search("find the order I placed last week", ACME)] == ["orders.search"]
    # Three callers' sessions do: what each caller's own sessions count stays the support.
    shop_registry.store.usage.record([], sessions(*[("orders.search", "orders.refund")] * 2))
    [learned] = shop_registry.relations.learn().relations
    assert (learned.learner, learned.support, learned.sessions) == ("tenant:acme", 8, 8)
    # A caller of no tenant learns for itself only: its own sessions are enough.
    alone = [SessionCall(f"s{n}", None, "bot", tool) for n in range(5) for tool in ("orders.search", "orders.refund")]
    assert [(r.learner, r.support) for r in learn(alone, shop())] == [("caller:bot", 5)]


def test_issue48_r4_5_one_tenants_flood_does_not_push_anothers_history_out(shop_registry: ToolRegistry) -> None:
    """The window of the latest calls is each learner's: globex calling a thousand times after acme's sessions
    leaves acme's window whole, and globex's own is still bounded."""
    old = utc_now() - timedelta(hours=1)
    acme = [replace(call, at=old) for call in sessions(*[("orders.search", "orders.refund")] * 6)]
    flood = [
        CallRecord("weather.forecast", "ok", 5.0, True, f"flood-{n}", f"g{n}@globex", "globex", caller=f"g{n}")
        for n in range(1000)
    ]
    shop_registry.store.usage.record([], acme + flood)
    run = shop_registry.relations.learn(max_calls=100)
    assert run.calls == 12 + 100
    assert [(r.learner, r.tool, r.related, r.support) for r in run.relations] == [
        ("tenant:acme", "orders.search", "orders.refund", 6)
    ]


@pytest.fixture
def playlists(store_url: str, embedder: CountingEmbedder) -> Iterator[ToolRegistry]:
    config = RETRIEVAL.model_copy(update={"k": 1, "infer_requirements": True})
    with ToolRegistry(store_url, embedder, config) as registry:
        registry.register_many(playlist_catalog())
        yield registry


PLAY = "play my playlist"
ANYONE = Principal(scopes=frozenset({"*"}))


def test_a_rejected_inferred_relation_does_not_come_back_after_reindexing(
    playlists: ToolRegistry, embedder: CountingEmbedder
) -> None:
    assert "find_playlists" in [r.name for r in playlists.search(PLAY, ANYONE)]
    verdict = playlists.relations.decide("play_playlist", "find_playlists", "rejected", "root")
    assert (verdict.kind, verdict.parameter) == ("requires", "playlistId")
    found = [r.name for r in playlists.search(PLAY, ANYONE)]
    assert "find_playlists" not in found and found[-1] == "play_playlist"  # the next producer may stand in
    playlists.rebuild()
    changed = playlist_catalog()[0].model_copy(update={"description": "Search playlists by title or owner."})
    playlists.register(changed)  # inference scores find_playlists again
    again = ToolRegistry(playlists.store, embedder, playlists.config)
    assert "find_playlists" not in [r.name for r in again.search(PLAY, ANYONE)]
    listed = again.relations.of("play_playlist", lambda _: True)
    assert [(r.other, r.source, r.rejected) for r in listed if r.other == "find_playlists"] == [
        ("find_playlists", "inferred", True)
    ]
    assert again.store.audit_log(5, tool="play_playlist")[0].action == "relation_rejected"
    assert again.relations.lift("play_playlist", "find_playlists", "root") == 1
    assert "find_playlists" in [r.name for r in again.search(PLAY, ANYONE)]


def test_a_confirmed_inferred_relation_is_as_strong_as_declared_and_survives_reinference(
    playlists: ToolRegistry, embedder: CountingEmbedder
) -> None:
    playlists.relations.decide("play_playlist", "find_playlists", "confirmed", "root")
    # find_playlists no longer says what it returns: inference finds nothing, the confirmation stands ...
    bare = playlist_catalog()[0].model_copy(update={"output_schema": None})
    playlists.register(bare)
    assert all(
        e.producer != "find_playlists" for e in playlists.retriever.inferred(playlists.snapshot()).of("play_playlist")
    )
    # ... with inference off too, as a declared requirement would.
    off = ToolRegistry(playlists.store, embedder, RETRIEVAL.model_copy(update={"k": 1}))
    found = off.search(PLAY, ANYONE)
    assert [r.name for r in found] == ["find_playlists", "play_playlist"]
    assert found[0].needed_as() == "needed by play_playlist for `playlistId`"
    relation = next(r for r in off.relations.of("play_playlist", lambda _: True) if r.other == "find_playlists")
    assert (relation.source, relation.strength, relation.kind) == ("confirmed", 1.0, "requires")
    hidden = Principal(tenant="acme")
    off.register(bare.model_copy(update={"tenants": ["globex"]}))
    assert all("find_playlists" not in r.model_dump_json() for r in off.search(PLAY, hidden))


def test_a_verdict_needs_a_relation_the_registry_found(playlists: ToolRegistry) -> None:
    with pytest.raises(InvalidToolError, match="no inferred or learned relation from get_weather to find_playlists"):
        playlists.relations.decide("get_weather", "find_playlists", "confirmed", "root")
    with pytest.raises(ToolNotFoundError):
        playlists.relations.decide("play_playlist", "no_such_tool", "rejected", "root")
    playlists.register(playlist_catalog()[1].model_copy(update={"requires": [Requirement(tool="find_playlists")]}))
    with pytest.raises(InvalidToolError, match="declares it requires find_playlists"):
        playlists.relations.decide("play_playlist", "find_playlists", "rejected", "root")


def test_a_pair_with_an_inferred_requirement_and_a_learned_relation_is_judged_one_kind_at_a_time(
    playlists: ToolRegistry,
) -> None:
    """Sessions that call play_playlist then find_playlists teach a related pair that inference also links:
    `kind` says which of the two a verdict or a lift is about."""
    calls = sessions(*[("play_playlist", "find_playlists")] * 6)
    playlists.store.usage.record([], calls)
    assert [(r.tool, r.related) for r in playlists.relations.learn().relations] == [("play_playlist", "find_playlists")]
    requirement = playlists.relations.decide("play_playlist", "find_playlists", "rejected", "root")
    assert requirement.kind == "requires"  # without a kind: the inferred requirement
    related = playlists.relations.decide("play_playlist", "find_playlists", "confirmed", "root", "related")
    assert (related.kind, related.verdict) == ("related", "confirmed")
    verdicts = {(v.kind, v.verdict) for v in playlists.store.relations.verdicts()}
    assert verdicts == {("requires", "rejected"), ("related", "confirmed")}
    assert playlists.relations.lift("play_playlist", "find_playlists", "root", "related") == 1
    assert [(v.kind, v.verdict) for v in playlists.store.relations.verdicts()] == [("requires", "rejected")]
    assert playlists.store.audit_log(1)[0].detail == "related play_playlist -> find_playlists"
    with pytest.raises(InvalidToolError, match="no learned relation from get_weather to play_playlist"):
        playlists.relations.decide("get_weather", "play_playlist", "confirmed", "root", "related")
    with pytest.raises(InvalidToolError, match="no inferred requirement from find_playlists to play_playlist"):
        playlists.relations.decide("find_playlists", "play_playlist", "confirmed", "root", "requires")


def test_a_rejected_learned_relation_is_not_learned_again(tmp_path: Path, embedder: CountingEmbedder) -> None:
    with ToolRegistry(tmp_path / "r.db", embedder, RELATED) as registry:
        registry.register_many(shop())
        registry.store.usage.record([], sessions(*[("orders.search", "orders.refund")] * 6))
        registry.relations.learn()
        assert registry.relations.decide("orders.search", "orders.refund", "rejected", "root").kind == "related"
        assert registry.relations.learn().relations == []
        assert [r.name for r in registry.search("find the order I placed last week", ACME)] == ["orders.search"]
        registry.relations.lift("orders.search", "orders.refund", "root")
        assert len(registry.relations.learn().relations) == 1
        registry.relations.decide("orders.search", "orders.refund", "confirmed", "root")
        registry.store.usage.prune(before=registry.store.audit_log(1)[0].at.replace(year=2100))
        registry.relations.learn()  # the log is empty now: nothing is learned, the confirmation stays
        found = registry.search("find the order I placed last week", GLOBEX)  # confirmed: for every tenant
        assert [r.name for r in found] == ["orders.search", "orders.refund"]
        assert found[1].signals.related_why == "related: confirmed by an admin"


def test_the_scheduler_learns_relations_daily_and_a_run_that_learns_nothing_new_writes_nothing(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    with ToolRegistry(tmp_path / "r.db", embedder, RELATED) as registry:
        registry.register_many(shop())
        registry.store.usage.record([], sessions(*[("orders.search", "orders.refund")] * 6))
        clock = WallClock()
        scheduler = Scheduler(registry, ScheduleConfig(consistency="off", report="off"), clock=clock)
        [run] = scheduler.tick()
        assert run.job == "relations" and run.body == {"days": 30, "calls": 12, "relations": 1, "changed": True}
        assert summary(run) == "toolrag relations: 1 learned from 12 calls of the last 30 days"
        assert [r.name for r in registry.search("find the order I placed last week", ACME)] == [
            "orders.search",
            "orders.refund",
        ]
        generation, audited = registry.store.generation(), len(registry.store.audit_log(100))
        clock.now += timedelta(hours=23)
        assert scheduler.tick() == []  # daily
        clock.now += timedelta(hours=1, minutes=1)
        [again] = scheduler.tick()
        assert again.body["changed"] is False and summary(again).endswith("days, as before")
        assert (registry.store.generation(), len(registry.store.audit_log(100))) == (generation, audited)
        registry.store.usage.record([], sessions(*[("orders.search", "orders.refund")] * 3, first=6))
        clock.now += timedelta(days=1, minutes=1)
        [third] = scheduler.tick()
        assert third.body["changed"] is True and registry.store.relations.learned()[0].support == 9


def test_the_command_line_learns_lists_and_judges_relations(tmp_path: Path, embedder: CountingEmbedder) -> None:
    store = str(tmp_path / "cli.db")
    with ToolRegistry(store, embedder, RELATED) as registry:
        registry.register_many(shop())
        registry.store.usage.record([], sessions(*[("orders.search", "orders.refund")] * 6))
    learned = runner.invoke(app, ["relations", "learn", "--store", store])
    assert learned.exit_code == 0, learned.output
    assert learned.stdout.splitlines() == [
        "1 relation learned from 12 calls of the last 30 days",
        "  tenant:acme: orders.search -> orders.refund (6 of 6 sessions, 1.00)",
    ]
    listed = runner.invoke(app, ["relations", "list", "orders.search", "--store", store])
    assert listed.stdout.splitlines() == [
        "orders.refund\trelated\tusage\t1.00\t6 of 6 acme sessions that called orders.search called orders.refund next"
    ]
    rejected = runner.invoke(app, ["relations", "reject", "orders.search", "orders.refund", "--store", store])
    assert rejected.stdout == "rejected: related orders.search -> orders.refund\n"
    listed = runner.invoke(app, ["relations", "list", "orders.search", "--store", store, "--json"])
    assert [(r["source"], r["rejected"], r["detail"]) for r in json.loads(listed.stdout)] == [
        ("usage", True, f"rejected by {getpass.getuser()}")
    ]
    wrong = runner.invoke(app, ["relations", "confirm", "orders.search", "weather.forecast", "--store", store])
    assert wrong.exit_code == 1
    assert "no inferred or learned relation from orders.search to weather.forecast" in wrong.stderr
    pair = ["orders.search", "orders.refund", "--store", store]
    wrong_kind = runner.invoke(app, ["relations", "confirm", *pair, "--kind", "requires"])
    assert wrong_kind.exit_code == 1
    assert "no inferred requirement from orders.search to orders.refund" in wrong_kind.stderr
    assert runner.invoke(app, ["relations", "confirm", *pair, "--kind", "parent"]).exit_code == 2
    assert runner.invoke(app, ["relations", "lift", *pair, "--kind", "related"]).exit_code == 0
    again = runner.invoke(app, ["relations", "lift", "orders.search", "orders.refund", "--store", store])
    assert (again.exit_code, again.stderr) == (1, "no verdict on orders.search -> orders.refund\n")
