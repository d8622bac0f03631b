"""Traces and logs of a request: OpenTelemetry spans and structured JSON log lines that carry its request id.

Spans cover API requests, the gateway's tool calls, searches and their signals (lexical, dense), upstream MCP
calls and store queries; each nests under the span that was current, so one request is one trace. They go to the
process's TracerProvider (configure your exporter, e.g. OTLP, as OpenTelemetry documents); without the `otel`
extra, `span` does nothing.

The gateway's tool calls follow the OpenTelemetry GenAI and MCP semantic conventions (`execute_tool {tool}`,
`gen_ai.*`, `mcp.method.name`; `tools/call {tool}` for an upstream call), so they line up with the spans of the
caller's agent framework; a `traceparent` in a request's `_meta` (SEP-414) continues the caller's trace. Tool
arguments and results are recorded only when `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (opt-in,
as the conventions ask: they may hold personal data).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

REQUEST_ID: ContextVar[str | None] = ContextVar("toolrag_request_id", default=None)
CAPTURE_CONTENT_VARIABLE = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
MAX_CONTENT_CHARS = 8192  # a recorded argument or result is cut here: spans are not the place for megabytes


@lru_cache(maxsize=1)
def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("toolrag")  # a proxy: it follows a provider set later


def span(name: str, /, *, kind: str = "internal", **attributes: Any) -> AbstractContextManager[Any]:
    """A span named `name` (of kind `internal`, `client` or `server`), current for the `with` block; attributes
    without a dot get the `toolrag.` prefix, None values are left out."""
    tracer = _tracer()
    if tracer is None:
        return nullcontext()
    from opentelemetry.trace import SpanKind

    clean = {(key if "." in key else f"toolrag.{key}"): value for key, value in attributes.items() if value is not None}
    request_id = REQUEST_ID.get()
    if request_id is not None:
        clean["toolrag.request_id"] = request_id
    return tracer.start_as_current_span(name, kind=SpanKind[kind.upper()], attributes=clean)  # type: ignore[no-any-return]


def execute_tool(tool: str, arguments: Any = None, /, **attributes: Any) -> AbstractContextManager[Any]:
    """The GenAI span of one tool execution: `execute_tool {tool}`, `gen_ai.operation.name=execute_tool`,
    `gen_ai.tool.name`; with content capture on, the arguments too."""
    conventions: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.type": "extension",
        "gen_ai.tool.call.arguments": _content(arguments),
    }
    return span(f"execute_tool {tool}", **(conventions | attributes))


def tool_outcome(current: Any, result: Any, is_error: bool) -> None:
    """Record a tool's outcome on its span: `error.type=tool_error` for an error answer (the MCP conventions' value),
    the result itself with content capture on."""
    if current is None:
        return
    if is_error:
        from opentelemetry.trace import StatusCode

        current.set_attribute("error.type", "tool_error")
        current.set_status(StatusCode.ERROR)
    elif (recorded := _content(result)) is not None:
        current.set_attribute("gen_ai.tool.call.result", recorded)


def capture_content() -> bool:
    return os.environ.get(CAPTURE_CONTENT_VARIABLE, "").strip().lower() == "true"


def _content(value: Any) -> str | None:
    """A tool's arguments or result as JSON for a span attribute, when content capture is on."""
    if value is None or not capture_content():
        return None
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text[:MAX_CONTENT_CHARS]


@contextmanager
def continued(meta: Mapping[str, Any] | None) -> Iterator[None]:
    """Continue the trace a request's `_meta` names (`traceparent`, `tracestate`: SEP-414) for the block, unless a
    span is current already (the MCP SDK's server span, which has the same parent)."""
    try:
        from opentelemetry import context, trace
        from opentelemetry.propagate import extract
    except ImportError:
        yield
        return
    remote = None
    if meta and not trace.get_current_span().get_span_context().is_valid:
        try:
            found = extract(dict(meta))
        except (TypeError, ValueError):  # a malformed carrier continues nothing
            found = None
        remote = found if found is not None and trace.get_current_span(found).get_span_context().is_valid else None
    token = context.attach(remote) if remote is not None else None
    try:
        yield
    finally:
        if token is not None:
            context.detach(token)


def _trace_id() -> str | None:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    context = trace.get_current_span().get_span_context()
    return f"{context.trace_id:032x}" if context.is_valid else None


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, the request id and trace id when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in (("request_id", REQUEST_ID.get()), ("trace_id", _trace_id())):
            if value is not None:
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: int, json_lines: bool) -> None:
    """The servers' logging: JSON lines (`--log-format json`) or `name: message` text, on stderr."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if json_lines else logging.Formatter("%(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
