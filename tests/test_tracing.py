"""Traces and logs: one trace per request (API request or gateway tool call -> search -> its signals and store
queries; gateway -> upstream call), collected with the OpenTelemetry SDK's in-memory exporter; JSON log lines with
the request id and the trace id."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.client import Client
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from toolrag import Principal, ToolRegistry, tracing
from toolrag.access import Caller, Grant
from toolrag.mcp.config import GatewayConfig, ServerConfig
from toolrag.mcp.gateway import McpGateway
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig

from .conftest import RETRIEVAL, SAMPLE_TOOLS
from .mcp_support import python_server
from .test_api import serving

TOKEN = "trace-token-0123456789"
EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module", autouse=True)
def provider() -> Iterator[None]:
    """The process's TracerProvider, as an operator configures theirs (here with the in-memory exporter)."""
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    current.add_span_processor(SimpleSpanProcessor(EXPORTER))
    yield


@pytest.fixture(autouse=True)
def fresh() -> None:
    EXPORTER.clear()


def parent_of(span: ReadableSpan, spans: list[ReadableSpan]) -> ReadableSpan | None:
    return next((s for s in spans if span.parent is not None and s.context.span_id == span.parent.span_id), None)


def test_an_api_search_is_one_trace_down_to_its_signals_and_store_queries(tmp_path: Path) -> None:
    registry = ToolRegistry(tmp_path / "traced.db", config=RETRIEVAL)
    registry.register_many(SAMPLE_TOOLS)
    config = ApiConfig(tokens={"bot": Grant(token=TOKEN, role="agent", scopes=["*"])})
    with serving(create_app(registry, config)) as url:
        headers = {"Authorization": f"Bearer {TOKEN}", "X-Request-Id": "req-42"}
        answer = httpx.post(f"{url}/search", json={"query": "will it rain in Kyiv tomorrow"}, headers=headers)
    assert answer.status_code == 200 and answer.headers["x-request-id"] == "req-42"
    spans = list(EXPORTER.get_finished_spans())
    roots = [s for s in spans if s.name == "POST /search"]
    assert len(roots) == 1, [(s.attributes, s.context.trace_id, s.parent) for s in roots]
    (root,) = roots
    assert root.parent is None and (root.attributes or {})["http.response.status_code"] == 200
    assert (root.attributes or {})["toolrag.request_id"] == "req-42"
    search = next(s for s in spans if s.name == "toolrag.search")
    assert parent_of(search, spans) is root and (search.attributes or {})["toolrag.results"] >= 1
    for signal in ("toolrag.search.lexical", "toolrag.search.dense"):  # one per ranking the search made
        parts = [s for s in spans if s.name == signal]
        assert parts and all(part.context.trace_id == root.context.trace_id for part in parts)
        assert all(part.end_time is not None and part.start_time is not None for part in parts)
    queries = [s for s in spans if s.name == "toolrag.store.query" and s.context.trace_id == root.context.trace_id]
    assert queries and all((s.attributes or {})["db.system"] == "sqlite" for s in queries)


CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@contextmanager
def shop_gateway(tmp_path: Path) -> Iterator[McpGateway]:
    fixture = python_server("tests.mcp_fixture_server")
    settings = GatewayConfig(store=str(tmp_path / "gateway.db"), servers={"shop": ServerConfig(**fixture)})
    yield McpGateway.from_config(settings)


ME = Caller("me", "agent", Principal(user="me", scopes=frozenset("*")), key="me")


def run_calls(gateway: McpGateway, mode: str = "auto", meta: dict[str, Any] | None = None, bare: bool = False) -> None:
    """find_tools then call_tool through the SDK client in-process (`mode`: auto speaks 2026-07-28, legacy
    2025-11-25); `bare`: without the SDK's own server span (a server whose middleware list was emptied)."""

    async def session() -> None:
        async with anyio.create_task_group() as group:
            await gateway.start(group)
            server = gateway.mcp_server(lambda request: ME)
            if bare:
                server.middleware.clear()
            async with Client(server, mode=mode) as client:
                found = await client.call_tool("find_tools", {"query": "look up my order"}, meta=meta)
                assert not found.is_error
                order = {"name": "shop.lookup_order", "arguments": {"order_id": "42"}}
                assert not (await client.call_tool("call_tool", order, meta=meta)).is_error
            group.cancel_scope.cancel()

    anyio.run(session)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_gateway_call_is_one_trace_down_to_the_upstream(tmp_path: Path, mode: str) -> None:
    with shop_gateway(tmp_path) as gateway:
        run_calls(gateway, mode)
    spans = list(EXPORTER.get_finished_spans())
    calls = [
        s
        for s in spans
        if (s.attributes or {}).get("gen_ai.operation.name") == "execute_tool" and s.kind.name == "INTERNAL"
    ]
    assert [s.name for s in calls] == ["execute_tool find_tools", "execute_tool shop.lookup_order"]
    search = next(s for s in spans if s.name == "toolrag.search")
    assert search.context.trace_id == calls[0].context.trace_id
    (upstream,) = [s for s in spans if s.name == "tools/call lookup_order"]
    assert upstream.context.trace_id == calls[1].context.trace_id and parent_of(upstream, spans) is calls[1]
    assert (upstream.attributes or {})["toolrag.server"] == "shop" and (upstream.attributes or {})["toolrag.tool"] == (
        "lookup_order"
    )


def test_issue33_gateway_spans_carry_the_genai_and_mcp_semantic_conventions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Span names and attributes of the OTel GenAI / MCP conventions beside toolrag's own (candidates, strategy,
    confidence); arguments and results only with content capture on."""
    with shop_gateway(tmp_path) as gateway:
        run_calls(gateway)
    quiet = {s.name: dict(s.attributes or {}) for s in EXPORTER.get_finished_spans()}
    EXPORTER.clear()
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
    with shop_gateway(tmp_path) as gateway:
        run_calls(gateway)
    captured = {s.name: dict(s.attributes or {}) for s in EXPORTER.get_finished_spans()}
    find, call = quiet["execute_tool find_tools"], quiet["execute_tool shop.lookup_order"]
    for attributes, tool in ((find, "find_tools"), (call, "shop.lookup_order")):
        assert attributes["gen_ai.operation.name"] == "execute_tool" and attributes["gen_ai.tool.name"] == tool
        assert attributes["mcp.method.name"] == "tools/call" and attributes["gen_ai.tool.type"] == "extension"
        assert attributes["gen_ai.tool.call.id"] and attributes["gen_ai.conversation.id"]
        assert "gen_ai.tool.call.arguments" not in attributes and "gen_ai.tool.call.result" not in attributes
    assert find["toolrag.candidates"] >= 1 and find["toolrag.strategy"] in {"all", "retrieval"}
    assert 0 < find["toolrag.confidence"] <= 1
    assert find["gen_ai.conversation.id"] == call["gen_ai.conversation.id"]  # one conversation without sessions
    upstream = quiet["tools/call lookup_order"]
    assert upstream["mcp.method.name"] == "tools/call" and upstream["gen_ai.tool.name"] == "lookup_order"
    assert upstream["network.transport"] == "pipe"
    # The SDK's server span of each request: the MCP server span the conventions name.
    assert quiet["tools/call call_tool"]["mcp.method.name"] == "tools/call"
    opted = captured["execute_tool shop.lookup_order"]
    assert json.loads(opted["gen_ai.tool.call.arguments"]) == {"order_id": "42"}
    assert "order 42" in opted["gen_ai.tool.call.result"]


@pytest.mark.parametrize("bare", [False, True])
def test_issue33_a_traceparent_in_meta_is_the_parent_of_the_gateways_spans(tmp_path: Path, bare: bool) -> None:
    """SEP-414: the caller's `traceparent` in `_meta` continues its trace; its span is the parent of the server's
    span (the SDK's, over toolrag's) or, without the SDK's span, of toolrag's own."""
    with shop_gateway(tmp_path) as gateway:
        run_calls(gateway, meta={"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}, bare=bare)
    spans = list(EXPORTER.get_finished_spans())
    ours = [s for s in spans if s.name.split(" ")[0] in {"execute_tool", "toolrag.search", "tools/call"}]
    assert len(ours) >= 4 and all(f"{s.context.trace_id:032x}" == CALLER_TRACE for s in ours), [s.name for s in ours]
    for name in ("execute_tool find_tools", "execute_tool shop.lookup_order"):
        span = next(s for s in spans if s.name == name)
        top = span if bare else parent_of(span, spans)
        assert top is not None and top.parent is not None and f"{top.parent.span_id:016x}" == CALLER_SPAN, name
        assert top.parent.is_remote


def test_json_log_lines_carry_the_request_and_trace_ids() -> None:
    record = logging.LogRecord("toolrag.test", logging.WARNING, __file__, 1, "searched %s", ("twice",), None)
    token = tracing.REQUEST_ID.set("req-7")
    try:
        with tracing.span("toolrag.test") as span:
            line = json.loads(tracing.JsonFormatter().format(record))
    finally:
        tracing.REQUEST_ID.reset(token)
    assert line["message"] == "searched twice" and line["level"] == "warning" and line["request_id"] == "req-7"
    assert line["trace_id"] == f"{span.get_span_context().trace_id:032x}"
    assert "request_id" not in json.loads(tracing.JsonFormatter().format(record))
