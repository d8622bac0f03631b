"""The agent loop and the execution gateway, driven by a scripted model over real registries."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolrag import Principal, Tool, ToolContext, ToolRegistry, tool
from toolrag.runtime import (
    Agent,
    ExecutionPolicy,
    ListSink,
    MaxRoundsExceeded,
    Message,
    OpenTelemetrySink,
    ScriptedModel,
    SecurityEvent,
    ToolCall,
    ToolCallEvent,
)
from toolrag.runtime.toolbox import Toolbox

from .conftest import RETRIEVAL, CountingEmbedder

SEEN: dict[str, object] = {}
BARRIER = threading.Barrier(2, timeout=5)


@tool(aliases=["is it cold outside"])
def get_current_weather_in_city(city: str) -> dict[str, object]:
    """Current weather conditions for a city: temperature and wind."""
    return {"city": city, "celsius": 21}


@tool(name="billing.refund", scopes=["billing:write"])
def refund(payment_id: str) -> str:
    """Refund a payment to the customer's card."""
    SEEN["refunded"] = payment_id
    return f"refunded {payment_id}"


@tool(name="shop.track", return_direct=True)
def track(order_id: str) -> str:
    """Track an order's parcel and its delivery date."""
    return f"{order_id}: arrives tomorrow"


@tool(name="github.create_issue")
def github_issue(title: str) -> str:
    """Open a GitHub issue."""
    return "gh-1"


@tool(name="jira.create_issue")
def jira_issue(title: str) -> str:
    """Open a Jira issue."""
    return "JIRA-1"


@tool(name="util.meet")
def meet(label: str) -> str:
    """Wait until another call arrives too (proves calls run concurrently)."""
    BARRIER.wait()
    if label == "first":
        time.sleep(0.05)  # finish last: results must still come back in call order
    return label


@tool(name="util.sleep")
def sleep(seconds: float) -> str:
    """Sleep for a while."""
    time.sleep(seconds)
    return "awake"


@tool(name="util.fail")
def fail(kind: str) -> str:
    """Fail in a chosen way."""
    errors: dict[str, BaseException] = {
        "value": ValueError("bad value"),
        "permission": PermissionError("not yours"),
        "interrupt": KeyboardInterrupt(),
    }
    raise errors[kind]


@tool(name="util.nothing")
def nothing() -> None:
    """Return nothing."""


@tool(name="util.whoami")
def whoami(ctx: ToolContext) -> str:
    """Tell which user and tenant the request is for."""
    SEEN["context"] = ctx
    return "ok"


@tool(name="util.fetch")
async def fetch(url: str) -> dict[str, str]:
    """Fetch a URL (asynchronously)."""
    await asyncio.sleep(0)
    return {"url": url, "status": "200"}


TOOLS = [
    get_current_weather_in_city,
    refund,
    track,
    github_issue,
    jira_issue,
    meet,
    sleep,
    fail,
    nothing,
    whoami,
    fetch,
]
USER = Principal(user="u-123", tenant="acme")
BILLING = Principal(user="u-456", tenant="acme", scopes=frozenset({"billing:write"}))


@pytest.fixture
def registry(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    reg = ToolRegistry(tmp_path / "runtime.db", embedder, RETRIEVAL)
    reg.register(*TOOLS)
    return reg


def calls(*items: tuple[str, str, dict[str, object] | str]) -> Message:
    return Message(
        "assistant",
        "",
        tuple(
            ToolCall(call_id, name, args if isinstance(args, str) else json.dumps(args))
            for call_id, name, args in items
        ),
    )


def answer(text: str) -> Message:
    return Message("assistant", text)


def tool_messages(messages: Sequence[Message]) -> list[Message]:
    return [m for m in messages if m.role == "tool"]


def test_multi_round_loop_keeps_ids_and_order(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            calls(("c1", "get_current_weather_in_city", {"city": "Kyiv"})),
            calls(("c2", "get_current_weather_in_city", {"city": "Lviv"})),
            answer("Kyiv and Lviv are both 21 degrees."),
        ]
    )
    result = Agent(registry, model, USER).run("How warm is it in Kyiv and Lviv?")
    assert result.stopped_by == "answer" and result.rounds == 3
    assert result.text == "Kyiv and Lviv are both 21 degrees."
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert [m.tool_call_id for m in tool_messages(result.messages)] == ["c1", "c2"]
    assert json.loads(tool_messages(result.messages)[0].content) == {"city": "Kyiv", "celsius": 21}
    assert "get_current_weather_in_city" in [t.name for t in model.requests[0].tools]  # pre-selected by retrieval


def test_parallel_calls_run_concurrently_and_keep_call_order(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [calls(("a", "util.meet", {"label": "first"}), ("b", "util.meet", {"label": "second"})), answer("done")]
    )
    result = Agent(registry, model, USER).run("meet twice")
    assert [m.content for m in tool_messages(result.messages)] == ["first", "second"]


def test_discovered_tools_are_callable_in_the_same_turn(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            calls(("f1", "find_tools", {"query": "refund a payment"})),
            lambda messages, tools: calls(("r1", "billing__refund", {"payment_id": "pay_9"})),
            answer("Refunded."),
        ]
    )
    result = Agent(registry, model, BILLING, mode="discover").run("Please refund pay_9")
    assert [t.name for t in model.requests[0].tools] == ["find_tools"]
    assert "billing.refund" in [t.name for t in model.requests[1].tools]
    cards = json.loads(tool_messages(result.messages)[0].content)
    assert cards[0]["name"] == "billing__refund" and "Refund a payment" in cards[0]["description"]
    assert tool_messages(result.messages)[1].content == "refunded pay_9"


def test_discovered_tools_belong_to_one_conversation(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            calls(("f1", "find_tools", {"query": "refund a payment"})),
            answer("Found it."),
            answer("Hello again."),
        ]
    )
    agent = Agent(registry, model, BILLING, mode="discover")
    agent.run("Please refund pay_9")
    agent.run("hi")
    assert [t.name for t in model.requests[2].tools] == ["find_tools"]  # the refund tool stayed in the first run


def test_truncated_and_reshaped_names_resolve_and_are_logged(registry: ToolRegistry) -> None:
    sink = ListSink()
    model = ScriptedModel(
        [
            calls(
                ("c1", "get_current_weather", {"city": "Kyiv"}),
                ("c2", "Get-Current-Weather-In-City", {"city": "Odesa"}),
            ),
            answer("ok"),
        ]
    )
    result = Agent(registry, model, USER, events=sink).run("weather")
    assert all(not m.is_error for m in tool_messages(result.messages))
    events = sink.of(ToolCallEvent)
    assert [(e.resolved_name, e.resolution) for e in events] == [
        ("get_current_weather_in_city", "fuzzy"),
        ("get_current_weather_in_city", "normalized"),
    ]


def test_ambiguous_and_unknown_names_list_the_closest_visible_names(registry: ToolRegistry) -> None:
    model = ScriptedModel([calls(("c1", "create_issue", {"title": "x"}), ("c2", "launch_rocket", {})), answer("ok")])
    result = Agent(registry, model, USER).run("open an issue")
    ambiguous, unknown = tool_messages(result.messages)
    assert (
        ambiguous.is_error and "github.create_issue" in ambiguous.content and "jira.create_issue" in ambiguous.content
    )
    assert unknown.is_error and "no tool named 'launch_rocket'" in unknown.content
    assert "billing.refund" not in unknown.content  # suggestions come from visible tools only


def test_unauthorized_call_is_refused_even_when_typed_in(registry: ToolRegistry) -> None:
    sink = ListSink()
    SEEN.pop("refunded", None)
    model = ScriptedModel([calls(("c1", "billing.refund", {"payment_id": "pay_1"})), answer("sorry")])
    result = Agent(registry, model, USER, events=sink).run("What's the weather?")
    refusal = tool_messages(result.messages)[0]
    assert refusal.is_error and refusal.content == "Error: no tool named 'billing.refund' is available"
    assert "refunded" not in SEEN
    assert [(e.tool, e.user) for e in sink.of(SecurityEvent)] == [("billing.refund", "u-123")]
    assert sink.of(ToolCallEvent)[0].outcome == "refused"
    assert all("billing.refund" not in [t.name for t in r.tools] for r in model.requests)


def test_schema_invalid_arguments_go_back_to_the_model(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            calls(("c1", "get_current_weather_in_city", {"town": "Kyiv"})),
            calls(("c2", "get_current_weather_in_city", "{not json")),
            calls(("c3", "get_current_weather_in_city", {"city": "Kyiv"})),
            answer("21 degrees"),
        ]
    )
    result = Agent(registry, model, USER).run("weather in Kyiv")
    first, second, third = tool_messages(result.messages)
    assert first.is_error and "invalid arguments" in first.content and "'city' is a required property" in first.content
    assert second.is_error and "not valid JSON" in second.content
    assert not third.is_error


def test_tool_exceptions(registry: ToolRegistry) -> None:
    def run(kind: str, **policy: object) -> Message:
        model = ScriptedModel([calls(("c1", "util.fail", {"kind": kind})), answer("ok")])
        agent = Agent(registry, model, USER, policy=ExecutionPolicy(**policy))  # type: ignore[arg-type]
        return tool_messages(agent.run("fail").messages)[0]

    message = run("value")
    assert message.is_error and "util.fail failed: ValueError: bad value" in message.content
    with pytest.raises(PermissionError):
        run("permission", propagate=(PermissionError,))
    with pytest.raises(ValueError):
        run("value", always_raise=True)
    with pytest.raises(KeyboardInterrupt):
        run("interrupt")


def test_return_direct_and_the_mixed_round(registry: ToolRegistry) -> None:
    direct = ScriptedModel([calls(("c1", "shop.track", {"order_id": "A-1"}))])
    result = Agent(registry, direct, USER).run("where is A-1")
    assert result.stopped_by == "return_direct" and result.text == "A-1: arrives tomorrow" and len(direct.requests) == 1

    mixed = ScriptedModel(
        [
            calls(("c1", "shop.track", {"order_id": "A-1"}), ("c2", "get_current_weather_in_city", {"city": "Kyiv"})),
            answer("Arrives tomorrow; 21 degrees."),
        ]
    )
    result = Agent(registry, mixed, USER).run("where is A-1 and how warm is it")
    assert result.stopped_by == "answer" and len(mixed.requests) == 2


def test_round_limit(registry: ToolRegistry) -> None:
    def loop() -> list[Message]:
        return [calls((f"c{i}", "util.nothing", {})) for i in range(3)]

    with pytest.raises(MaxRoundsExceeded, match="after 3 rounds") as raised:
        Agent(registry, ScriptedModel(list(loop())), USER, max_rounds=3).run("loop")
    assert len(tool_messages(raised.value.messages)) == 3
    stopped = Agent(registry, ScriptedModel(list(loop())), USER, max_rounds=3, on_max_rounds="stop").run("loop")
    assert stopped.stopped_by == "max_rounds" and "Stopped after 3 rounds" in stopped.text


def test_tool_timeout(registry: ToolRegistry) -> None:
    model = ScriptedModel([calls(("c1", "util.sleep", {"seconds": 2})), answer("ok")])
    result = Agent(registry, model, USER, policy=ExecutionPolicy(timeout_seconds=0.1)).run("sleep")
    message = tool_messages(result.messages)[0]
    assert message.is_error and "util.sleep timed out after 0.1 s" in message.content


def test_results_none_structured_and_async_tools(registry: ToolRegistry) -> None:
    model = ScriptedModel(
        [calls(("c1", "util.nothing", {}), ("c2", "util.fetch", {"url": "https://x.test"})), answer("ok")]
    )
    nothing_result, fetched = tool_messages(Agent(registry, model, USER).run("go").messages)
    assert nothing_result.content == "" and json.loads(fetched.content) == {"url": "https://x.test", "status": "200"}


def test_context_reaches_the_tool_but_never_the_model(registry: ToolRegistry) -> None:
    model = ScriptedModel([calls(("c1", "util.whoami", {})), answer("ok")])
    Agent(registry, model, Principal(user="secret-user-77", tenant="tenant-x")).run("who am I?")
    context = SEEN["context"]
    assert isinstance(context, ToolContext) and context.user == "secret-user-77" and context.request_id
    shown = json.dumps(
        [[m.__dict__ for m in r.messages] + [t.model_dump(mode="json") for t in r.tools] for r in model.requests],
        default=str,
    )
    assert "secret-user-77" not in shown and "tenant-x" not in shown and "ToolContext" not in shown


def test_lower_level_calls(registry: ToolRegistry) -> None:
    agent = Agent(registry, ScriptedModel([]), USER)
    history = [Message.user("is it cold outside in Kyiv?")]
    tools = agent.tools_for_turn(history)
    assert tools[0].name == "get_current_weather_in_city"
    response = calls(("c1", "get_current_weather_in_city", {"city": "Kyiv"}))
    round_result = agent.execute(response, history, tools)
    assert round_result.history == [*history, response, *round_result.results]
    assert not round_result.return_direct
    assert agent.execute(calls(("c2", "shop.track", {"order_id": "B"})), history).return_direct
    assert agent.tools_for_turn([Message.user("tell me a joke")]) == []


def test_events_and_opentelemetry(registry: ToolRegistry) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    sink = OpenTelemetrySink(provider.get_tracer("test"))
    model = ScriptedModel([calls(("c1", "get_current_weather_in_city", {"city": "Kyiv"})), answer("ok")])
    Agent(registry, model, USER, events=sink).run("weather in Kyiv")
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"toolrag.round", "toolrag.tool_call"}
    attributes = spans["toolrag.tool_call"].attributes or {}
    assert attributes["toolrag.resolved_name"] == "get_current_weather_in_city"
    assert attributes["toolrag.outcome"] == "ok" and attributes["toolrag.offered"] is True


def test_async_agent_with_an_async_model(registry: ToolRegistry) -> None:
    class AsyncScripted:
        def __init__(self) -> None:
            self.steps = [calls(("c1", "util.fetch", {"url": "u"})), answer("fetched")]

        async def acomplete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
            return self.steps.pop(0)

    result = asyncio.run(Agent(registry, AsyncScripted(), USER).arun("fetch u"))
    assert result.text == "fetched" and result.tools_called == ["util.fetch"]


# -- a tool that changes while the model holds its old schema -----------------------------------------------------


@tool(name="shop.lookup")
def lookup_order(order_id: str) -> str:
    """Look up an order by its id: status and items."""
    SEEN["looked_up"] = order_id
    return f"order {order_id}: shipped"


RENAMED = {"type": "object", "properties": {"id": {"type": "string", "description": "the order id"}}}


def test_a_call_against_an_older_version_is_answered_with_the_new_schema(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    registry = ToolRegistry(tmp_path / "stale.db", embedder, RETRIEVAL)
    registry.register(lookup_order)
    SEEN.pop("looked_up", None)

    def rename_then_call(messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        assert "order_id" in tools[0].input_schema["properties"]  # the model holds the old schema
        registry.update("shop.lookup", input_schema=RENAMED)
        return Message("assistant", "", (ToolCall("c1", "shop__lookup", '{"order_id": "o-7"}'),))

    model = ScriptedModel([rename_then_call, Message("assistant", "It changed.")])
    result = Agent(registry, model, USER, k=1).run("look up my order o-7")
    answer = next(m for m in result.messages if m.role == "tool")
    assert answer.is_error and "'order_id' is not a parameter" in answer.content
    assert "shop.lookup changed since it was offered" in answer.content and '"id"' in answer.content
    assert "looked_up" not in SEEN  # never run with the renamed parameter dropped or misplaced
    registry.close()


def test_a_toolbox_checks_calls_against_the_version_its_search_offered(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    registry = ToolRegistry(tmp_path / "stale-box.db", embedder, RETRIEVAL)
    registry.register(lookup_order)
    toolbox = Toolbox(registry, USER)
    assert [r.name for r in toolbox.search("look up my order", k=1)] == ["shop.lookup"]
    registry.update("shop.lookup", description="Look up an order by its id: status, items and the parcel.")
    same_parameters = asyncio.run(toolbox.call("shop.lookup", {"order_id": "o-1"}))
    assert same_parameters.outcome == "ok"  # a changed description does not make the model's arguments wrong
    registry.update("shop.lookup", input_schema=RENAMED)
    stale = asyncio.run(toolbox.call("shop.lookup", {"order_id": "o-2"}))
    assert stale.outcome == "invalid_arguments" and "its input schema now" in stale.message.content
    assert SEEN["looked_up"] == "o-1"
    registry.close()
