"""The operator's jobs against a hostile tenant, model or catalog (docs/reliability.md "Seventh security review"):
proposals, written examples, reports and checks. Each test failed on the code before its fix."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from toolrag import Principal, SearchConfig, Tool, ToolRegistry
from toolrag.model import utc_now
from toolrag.monitor.reading import Reading
from toolrag.monitor.schedule import Scheduler
from toolrag.monitor.validate import MAX_PAIRS_LISTED, validate
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.propose import RECORD as PROPOSE
from toolrag.runtime.propose import propose_relations
from toolrag.runtime.write_examples import MAX_FAILURES_IN_A_ROW, write_examples
from toolrag.runtime.write_examples import RECORD as WRITE
from toolrag.search.examples import past_tasks
from toolrag.store.jobs import REPORTS_KEPT
from toolrag.store.usage import Audience, CallRecord, RetrievalRecord, TaskCall

from .test_snapshot import WordEmbedder

SHARED = Tool(
    name="crm.lookup_customer",
    description="Look up a customer record by customer id.",
    tenants=["acme", "globex"],
    input_schema={
        "type": "object",
        "properties": {"customer_id": {"type": "string", "description": "the customer id"}},
    },
)
FINDER = Tool(name="crm.find_customer_id", description="Find a customer id from a customer's name or e-mail.")
ACME_ONLY = Tool(
    name="acme.payroll_export",
    description="Export the payroll of acme with employee names, salaries and customer id links.",
    tenants=["acme"],
)


class Proposer:
    """Proposes the finder for the shared tool, by default with a reason naming every other candidate it was shown."""

    def __init__(self, reason: Callable[[list[str]], str] | None = None) -> None:
        self.shown: dict[str, list[str]] = {}
        self.reason = reason or (lambda others: f"gives the id ({', '.join(others)} do not)")

    def complete(self, messages: list[Message], tools: Any) -> Message:
        asked = json.loads(messages[-1].content)
        names = [candidate["name"] for candidate in asked["candidates"]]
        self.shown[asked["tool"]["name"]] = names
        entries = []
        if asked["tool"]["name"] == SHARED.name and FINDER.name in names:
            others = [name for name in names if name != FINDER.name]
            entries.append({"tool": FINDER.name, "parameter": "customer_id", "reason": self.reason(others)})
        return Message("assistant", "", (ToolCall("c1", PROPOSE, json.dumps({"requires": entries})),))


def test_a_proposal_for_a_shared_tool_reads_only_tools_all_its_tenants_see(tmp_path: Path) -> None:
    """Candidates were retrieved as the tool's first tenant sees the catalog: the model was shown acme's payroll
    tool for a tool globex shares, and its reason ("... acme.payroll_export do not") reached globex's readers."""
    registry = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(inject_all_below_tokens=0))
    registry.register_many([SHARED, FINDER, ACME_ONLY])
    model = Proposer()
    propose_relations(registry, model, "scripted")
    assert ACME_ONLY.name not in model.shown[SHARED.name] and FINDER.name in model.shown[SHARED.name]
    (proposal,) = [r for r in registry.store.relations.proposals() if r.tool == SHARED.name]
    assert ACME_ONLY.name not in proposal.reason


class Writer:
    """Two requests for the public forecast tool: one about it, one about the ski resorts."""

    def complete(self, messages: list[Message], tools: Any) -> Message:
        asked = json.loads(messages[-1].content)
        requests = [
            "weather forecast for Berlin tomorrow",
            "snow depth and lift status at the ski resorts this weekend",
        ]
        entries = (
            [{"language": "en", "request": r} for r in requests] if asked["tool"]["name"] == "weather.forecast" else []
        )
        return Message("assistant", "", (ToolCall("c", WRITE, json.dumps({"examples": entries})),))


def test_which_written_examples_a_tenant_reads_does_not_depend_on_another_tenants_tools(tmp_path: Path) -> None:
    """Each written example was compared with every live tool: a globex-only ski tool dropped the shared forecast
    tool's ski example for everyone, which acme could read on the tool and in its ranking."""
    forecast = Tool(name="weather.forecast", description="Get the weather forecast for a city for the next days.")
    mail = Tool(name="mail.send", description="Send an e-mail message to an address.")
    ski = Tool(
        name="globex.ski_report",
        description="Snow depth and lift status at the globex ski resorts.",
        tenants=["globex"],
    )
    kept = []
    for catalog in ([forecast, mail], [forecast, mail, ski]):
        registry = ToolRegistry(
            tmp_path / f"{len(catalog)}.db", WordEmbedder(), SearchConfig(inject_all_below_tokens=0)
        )
        registry.register_many(catalog)
        write_examples(registry, Writer(), "scripted", ["en"], per_language=2)
        kept.append([e.text for e in registry.get(forecast.name).seen_by("acme").examples])
    assert kept[0] == kept[1]


class Down:
    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages: list[Message], tools: Any) -> Message:
        self.calls += 1
        raise ConnectionError("connection refused")


def test_a_proposal_run_stops_when_its_model_keeps_failing(tmp_path: Path) -> None:
    """A model that always failed was asked about every tool (500 calls by default: with a real client's 60 s
    timeout and a retry, about 17 hours); writing examples stopped after five."""
    registry = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(inject_all_below_tokens=0))
    registry.register_many(
        [Tool(name=f"tool.t{n}", description=f"Does thing number {n} for a customer id.") for n in range(30)]
    )
    model = Down()
    run = propose_relations(registry, model, "scripted")
    assert model.calls == MAX_FAILURES_IN_A_ROW and run.failed == MAX_FAILURES_IN_A_ROW
    assert run.stopped is not None and "connection refused" in run.stopped and run.left > 0


def test_a_readers_health_report_counts_no_call_of_a_tool_it_may_not_use(tmp_path: Path) -> None:
    """The report's rows left a tool the reader may not use out, but its totals and daily counts counted that
    tool's calls and failures: acme's reader without `hr` read 8 calls, 2 failed, where it may see 1."""
    registry = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(inject_all_below_tokens=0))
    registry.register_many(
        [
            Tool(name="weather.now", description="The weather now in a city."),
            Tool(name="hr.payroll", description="Run the payroll for employees.", tenants=["acme"], scopes=["hr"]),
        ]
    )
    hr = Principal(user="hr-bot", tenant="acme", scopes=frozenset({"hr"}))
    reader = Principal(user="viewer", tenant="acme")
    search = RetrievalRecord("h1", (("weather.now", 0.9, 0.8),), "weather in Paris", "s1", "viewer", tenant="acme")
    payroll = [
        CallRecord("hr.payroll", "ok" if n < 5 else "error", 5.0, False, "s2", "hr-bot", "acme", caller=hr.caller)
        for n in range(7)
    ]
    weather = CallRecord("weather.now", "ok", 5.0, True, "s1", "viewer", "acme", caller=reader.caller)
    registry.store.usage.record([replace(search, caller=reader.caller)], [weather, *payroll])
    visible = frozenset(t.name for t in registry.visible_tools(reader))
    report = Reading(Audience.of(reader), visible).report(registry, 30).as_json()
    assert report["totals"]["calls"] == 1 and report["totals"]["failed_calls"] == 0
    assert sum(day["calls"] for day in report["daily"]) == 1


def test_the_consistency_check_names_a_bounded_number_of_near_duplicates(tmp_path: Path) -> None:
    """Each near-duplicate pair was a finding, kept whole in the daily job's report, and reports were never
    deleted: 2,000 tools of one description (one upstream's listing) took 1.6 GB and 15 s, and added 422 MB to the
    registry a day. The most alike pairs are named, the rest counted; a job keeps its latest reports."""
    registry = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(inject_all_below_tokens=0))
    description = "Look up the current status of an order in the shop by its order number and report it."
    registry.register_many([Tool(name=f"shop.order_status_{n:04d}", description=description) for n in range(700)])
    body = Scheduler(registry).consistency()
    pairs, every = body["findings"]["near_duplicate"], 700 * 699 // 2
    assert len(pairs) == MAX_PAIRS_LISTED + 1 and pairs[-1].startswith(f"{every - MAX_PAIRS_LISTED:,} more pairs")
    assert body["counts"]["near_duplicate"] == every and body["counts"]["no_not_for"] == every  # the fourth round
    more = [f for f in validate(registry) if f.kind == "near_duplicate" and not f.tools]
    assert more and more[0].detail.startswith(f"{700 * 699 // 2 - MAX_PAIRS_LISTED:,} more pairs")
    for day in range(REPORTS_KEPT + 5):
        registry.store.jobs.finish_job("consistency", "me", utc_now() + timedelta(days=day), {"day": day})
    kept = registry.store.jobs.job_reports("consistency", limit=1000)
    assert len(kept) == REPORTS_KEPT and kept[0].body == {"day": REPORTS_KEPT + 4}


def test_a_session_of_more_tools_than_a_set_proposes_no_past_task() -> None:
    """Each call was looked up in its session's whole list of tools: 100,000 calls over 5,000 tools cost 2.7 s on the
    admin's past-tasks page (docs/reliability.md). A session past a set's size proposes nothing, so
    its tools stop being collected there; a set within the size is still proposed."""
    calls = [TaskCall("s1", None, "c", f"tool.t{n % 5000}", "do everything") for n in range(100_000)]
    calls += [TaskCall("s2", None, "c", tool, "book a trip") for tool in ("travel.search", "travel.book") * 3]
    (task,) = past_tasks(calls, lambda tool, tenant, request: False)
    assert task.tools == ("travel.search", "travel.book")
