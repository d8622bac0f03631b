"""Traces and logs: one trace per request (API request or gateway tool call -> search -> its signals and store
queries; gateway -> upstream call), collected with the OpenTelemetry SDK's in-memory exporter; JSON log lines with
the request id and the trace id."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

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


def test_a_gateway_call_is_one_trace_down_to_the_upstream(tmp_path: Path) -> None:
    fixture = python_server("tests.mcp_fixture_server")
    settings = GatewayConfig(store=str(tmp_path / "gateway.db"), servers={"shop": ServerConfig(**fixture)})
    gateway = McpGateway.from_config(settings)

    async def session() -> None:
        async with anyio.create_task_group() as group:
            await gateway.start(group)
            me = Caller("me", "agent", Principal(user="me", scopes=frozenset("*")), key="me")
            async with Client(gateway.mcp_server(lambda request: me)) as client:
                found = await client.call_tool("find_tools", {"query": "look up my order"})
                assert not found.is_error
                order = {"name": "shop.lookup_order", "arguments": {"order_id": "42"}}
                assert not (await client.call_tool("call_tool", order)).is_error
            group.cancel_scope.cancel()

    anyio.run(session)
    spans = list(EXPORTER.get_finished_spans())
    calls = [s for s in spans if s.name == "toolrag.mcp.tool"]
    assert [(s.attributes or {})["toolrag.tool"] for s in calls] == ["find_tools", "call_tool"]
    search = next(s for s in spans if s.name == "toolrag.search")
    assert search.context.trace_id == calls[0].context.trace_id
    (upstream,) = [s for s in spans if s.name == "toolrag.upstream.call"]
    assert upstream.context.trace_id == calls[1].context.trace_id
    assert (upstream.attributes or {})["toolrag.server"] == "shop" and (upstream.attributes or {})["toolrag.tool"] == (
        "lookup_order"
    )


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
