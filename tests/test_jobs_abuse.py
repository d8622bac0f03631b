"""The operator's jobs against a hostile tenant, model or catalog (docs/reliability.md "Seventh security review"):
proposals, written examples, reports and checks. Each test failed on the code before its fix."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from toolrag import SearchConfig, Tool, ToolRegistry
from toolrag.runtime.messages import Message, ToolCall
from toolrag.runtime.propose import RECORD as PROPOSE
from toolrag.runtime.propose import propose_relations
from toolrag.runtime.write_examples import MAX_FAILURES_IN_A_ROW, write_examples
from toolrag.runtime.write_examples import RECORD as WRITE

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
    """Proposes the finder for the shared tool, its reason naming every other candidate it was shown."""

    def __init__(self) -> None:
        self.shown: dict[str, list[str]] = {}

    def complete(self, messages: list[Message], tools: Any) -> Message:
        asked = json.loads(messages[-1].content)
        names = [candidate["name"] for candidate in asked["candidates"]]
        self.shown[asked["tool"]["name"]] = names
        entries = []
        if asked["tool"]["name"] == SHARED.name and FINDER.name in names:
            others = ", ".join(name for name in names if name != FINDER.name)
            entries.append(
                {"tool": FINDER.name, "parameter": "customer_id", "reason": f"gives the id ({others} do not)"}
            )
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


def test_a_reason_naming_another_candidate_names_no_tool(tmp_path: Path) -> None:
    """What a model's reason says of the other candidates is free text about tools the readers of the relation may
    not see: their names are replaced."""
    registry = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(inject_all_below_tokens=0))
    other = Tool(name="crm.export_customers", description="Export every customer record with customer ids.")
    registry.register_many([SHARED, FINDER, other])
    propose_relations(registry, Proposer(), "scripted")
    (proposal,) = [r for r in registry.store.relations.proposals() if r.tool == SHARED.name]
    assert other.name not in proposal.reason and "another tool" in proposal.reason


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
