"""Usage monitoring on both stores: what is logged from searches and agent runs, and the health report over it."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta

import pytest
from typer.testing import CliRunner

from toolrag import Principal, ToolRegistry
from toolrag.cli.app import app
from toolrag.model import utc_now
from toolrag.monitor import build_report
from toolrag.runtime import Agent, Message, ScriptedModel, ToolCall
from toolrag.store.usage import CallRecord, RetrievalRecord
from toolrag.usagelog import MonitorConfig
from toolrag.usagelog.redact import redact

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder

runner = CliRunner()
ADMIN = Principal(user="ann", tenant="acme", scopes=frozenset({"*"}))
FAST = MonitorConfig(flush_seconds=0.05)


def monitored(store_url: str, embedder: CountingEmbedder, config: MonitorConfig = FAST) -> ToolRegistry:
    registry = ToolRegistry(store_url, embedder, RETRIEVAL, monitor=config)
    registry.register_many(SAMPLE_TOOLS)

    def send(to: str, body: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    registry._functions["email.send"] = send
    registry._functions["calendar.create_event"] = lambda **kwargs: "scheduled"
    return registry


def call(call_id: str, name: str, arguments: dict[str, object]) -> Message:
    return Message("assistant", "", (ToolCall(call_id, name, json.dumps(arguments)),))


def test_searches_and_agent_calls_are_logged_and_reported(store_url: str, embedder: CountingEmbedder) -> None:
    registry = monitored(store_url, embedder)
    for _ in range(6):  # offered six times, never called: a dead tool
        registry.search("what is the exchange rate of the dollar", ADMIN, session="s-rates")
    registry.search("tell me a joke", ADMIN, session="s-joke")
    model = ScriptedModel(
        [
            call("c1", "email.send", {"to": "bob@example.com", "body": "hi"}),
            call("c2", "calendar.create_event", {}),  # not in the shortlist of an e-mail request
            Message("assistant", "Done."),
        ]
    )
    Agent(registry, model, ADMIN).run("send an email to Bob saying the report is ready")
    registry.usage.flush()  # type: ignore[union-attr]
    report = build_report(registry.store, days=30)
    usage = {u.tool: u for u in report.tools}
    assert usage["finance.exchange_rate"].injected >= 6 and usage["finance.exchange_rate"].called == 0
    assert usage["email.send"].called == 1 and usage["email.send"].injected >= 1
    assert usage["email.send"].call_rate > 0 and 0 < (usage["email.send"].mean_score or 0) <= 1
    assert usage["calendar.create_event"].called == 1
    assert "finance.exchange_rate" in [u.tool for u in report.dead]
    # Never offered nor called (which tools a request brings as long shots is the model's: not pinned here).
    assert report.unused and all(name not in usage or not usage[name].injected for name in report.unused)
    assert [s.request for s in report.misses["no_tool"]] == ["tell me a joke"]
    unshortlisted = report.misses["unshortlisted_call"]
    assert [(s.detail, s.request) for s in unshortlisted] == [
        ("calendar.create_event", "send an email to Bob saying the report is ready")
    ]
    assert {s.session for s in report.misses["repeated_search"]} >= {"s-rates"}
    assert report.totals.calls == 2 and report.totals.no_tool == 1
    assert sum(report.relevance_histogram) == sum(u.injected for u in report.tools)
    assert report.daily[-1][1] == report.totals.retrievals


def test_request_texts_can_be_redacted_or_hashed(store_url: str, embedder: CountingEmbedder) -> None:
    assert redact("refund order 12345678 for ann@example.com") == "refund order <number> for <email>"
    registry = monitored(store_url, embedder, MonitorConfig(requests="redacted", flush_seconds=0.05))
    registry.search("refund order 12345678 for ann@example.com", ADMIN)
    registry.usage.flush()  # type: ignore[union-attr]
    hashed = ToolRegistry(
        registry.store, embedder, RETRIEVAL, monitor=MonitorConfig(requests="hash", flush_seconds=0.05)
    )
    hashed.search("what is the exchange rate of the dollar to the euro", ADMIN)
    hashed.usage.flush()  # type: ignore[union-attr]
    report = build_report(registry.store).as_json()
    assert report["totals"]["retrievals"] == 2
    samples = registry.store.usage._query("SELECT request FROM retrievals ORDER BY id", ())
    assert [row[0] for row in samples] == ["refund order <number> for <email>", None]


def test_retention_prunes_old_entries(store_url: str, embedder: CountingEmbedder) -> None:
    registry = monitored(store_url, embedder, MonitorConfig(retention_days=7, flush_seconds=0.05))
    old = utc_now() - timedelta(days=10)
    registry.store.usage.record(
        [RetrievalRecord("h", (("email.send", 0.9, 0.6),), "old request", at=old)],
        [CallRecord("email.send", "ok", 3.0, True, at=old)],
    )
    registry.search("send an email", ADMIN)
    registry.usage.flush()  # type: ignore[union-attr]
    assert registry.usage.prune() == 2  # type: ignore[union-attr]
    totals = registry.store.usage.totals(utc_now() - timedelta(days=365))
    assert (totals.retrievals, totals.calls) == (1, 0)


def test_report_cli(tmp_path, embedder: CountingEmbedder) -> None:  # type: ignore[no-untyped-def]
    store = str(tmp_path / "r.db")
    registry = monitored(store, embedder)
    registry.search("tell me a joke", ADMIN)
    registry.search("will it rain tomorrow", ADMIN, session="x")
    registry.close()
    text = runner.invoke(app, ["report", "--store", store])
    assert text.exit_code == 0, text.output
    assert "2 searches" in text.stdout and "misses: no tool: tell me a joke" in text.stdout
    data = json.loads(runner.invoke(app, ["report", "--store", store, "--json", "--days", "7"]).stdout)
    assert data["totals"]["retrievals"] == 2 and data["registry"]["active_tools"] == len(SAMPLE_TOOLS)


def test_alias_suggestions_come_from_misses_and_apply_after_review(store_url: str, embedder: CountingEmbedder) -> None:
    registry = monitored(store_url, embedder)
    registry._functions["shop.track_shipment"] = lambda: "in Lviv, arrives Friday"
    missed = "Nova Poshta still silent"
    assert "shop.track_shipment" not in [r.name for r in registry.search(missed, ADMIN)]
    # Three people's conversations with the same question, answered by a tool it did not find (an alias needs three
    # callers: one caller's loop of calls is no usage; tests/test_usage_and_access_abuse.py).
    for session in ("a", "b", "c"):
        person = Principal(user=f"agent-{session}", scopes=frozenset({"*"}))
        registry.search(missed, person, session=session)
        agent = Agent(registry, ScriptedModel([]), person)
        agent._request_id = session
        asyncio.run(agent.aexecute(call("c1", "shop.track_shipment", {}), []))
    registry.usage.flush()  # type: ignore[union-attr]
    listed = runner.invoke(app, ["suggest-aliases", "--store", store_url, "--json"])
    assert listed.exit_code == 0, listed.output
    suggested = {"tool": "shop.track_shipment", "alias": missed, "count": 3, "callers": 3, "tenants": []}
    assert json.loads(listed.stdout)["suggestions"] == [suggested]
    assert registry.get("shop.track_shipment").aliases == ["where is my package"]  # nothing applied unreviewed
    applied = runner.invoke(app, ["suggest-aliases", "--store", store_url, "--apply", "shop.track_shipment", "--json"])
    assert json.loads(applied.stdout)["applied"] == ["shop.track_shipment"]
    updated = ToolRegistry(store_url, embedder)
    assert updated.get("shop.track_shipment").aliases == ["where is my package", missed]
    assert updated.search(missed, ADMIN)[0].name == "shop.track_shipment"  # the next user is served


def test_calls_of_a_readers_tools_are_chosen_in_the_query_however_many_tools_it_may_use(
    store_url: str, embedder: CountingEmbedder
) -> None:
    """A reader's usable tools are named in the query, a few hundred a query: with 1,200 of them the newest calls of
    every chunk are merged newest first, and calls of other tools are never read."""
    registry = monitored(store_url, embedder)
    start = utc_now() - timedelta(hours=1)
    names = [f"t{i:04d}" for i in range(1200)]
    calls = [CallRecord(name, "ok", 1.0, False, at=start + timedelta(seconds=i)) for i, name in enumerate(names)]
    hidden = [CallRecord("hidden.tool", "ok", 1.0, False, at=start + timedelta(seconds=2000 + i)) for i in range(50)]
    registry.store.usage.record([], [*calls, *hidden])
    since = start - timedelta(minutes=1)
    read = registry.store.usage.calls(since, 10, tools=frozenset(names))
    assert [c.tool for c in read] == names[::-1][:10]
    assert [c.tool for c in registry.store.usage.calls(since, 10, tools=frozenset(names[:3]))] == names[2::-1]
    assert registry.store.usage.calls(since, 10, tool="hidden.tool", tools=frozenset(names)) == []
    assert registry.store.usage.calls(since, 10, tools=frozenset()) == []
    samples = registry.store.usage.samples("unshortlisted_call", since, 5, tools=frozenset(names))
    assert [s.detail for s in samples] == names[::-1][:5]


def test_a_tool_whose_share_of_selections_jumps_is_flagged(store_url: str, embedder: CountingEmbedder) -> None:
    registry = monitored(store_url, embedder)
    earlier, recent = utc_now() - timedelta(days=20), utc_now() - timedelta(days=2)

    def searches(at: datetime, tool: str, count: int) -> list[RetrievalRecord]:
        return [RetrievalRecord(f"h-{at:%d}-{tool}-{i}", ((tool, 0.8, 0.5),), "a request", at=at) for i in range(count)]

    registry.store.usage.record(
        [
            *searches(earlier, "email.send", 95),
            *searches(earlier, "finance.exchange_rate", 5),  # 5% of the searches before
            *searches(recent, "email.send", 20),
            *searches(recent, "finance.exchange_rate", 20),  # 50% of the recent ones: ten times the share
        ],
        [],
    )
    report = build_report(registry.store, days=30)
    (surge,) = report.surging
    assert (surge.tool, surge.recent_selections, surge.earlier_share, surge.recent_share) == (
        "finance.exchange_rate",
        20,
        0.05,
        0.5,
    )
    assert report.as_json()["surging"][0]["ratio"] == pytest.approx(10.0)
    hidden = build_report(registry.store, days=30, visible={"email.send"})
    assert hidden.surging == []  # a reader never learns of a tool they may not see
    quiet = build_report(registry.store, days=5)  # no window before the recent one to compare with
    assert quiet.surging == []


def test_issue33_refused_and_unknown_tool_calls_are_not_counted_as_calls(
    store_url: str, embedder: CountingEmbedder
) -> None:
    """The usage report counted calls that never ran (refused, a tool that does not exist) as calls."""
    registry = monitored(store_url, embedder, MonitorConfig(flush_seconds=0.05))
    outcomes = ["ok", "ok", "error", "refused", "unknown_tool", "unknown_tool"]
    registry.store.usage.record([], [CallRecord("email.send", outcome, 1.0, True) for outcome in outcomes])
    totals = registry.store.usage.totals(utc_now() - timedelta(days=1))
    assert (totals.calls, totals.failed_calls, totals.refused_calls) == (3, 1, 3)
