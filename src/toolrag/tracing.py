"""Traces and logs of a request: OpenTelemetry spans and structured JSON log lines that carry its request id.

Spans cover API requests, the gateway's tool calls, searches and their signals (lexical, dense), upstream MCP
calls and store queries; each nests under the span that was current, so one request is one trace. They go to the
process's TracerProvider (configure your exporter, e.g. OTLP, as OpenTelemetry documents); without the `otel`
extra, `span` does nothing.
"""

from __future__ import annotations

import json
import logging
from contextlib import AbstractContextManager, nullcontext
from contextvars import ContextVar
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

REQUEST_ID: ContextVar[str | None] = ContextVar("toolrag_request_id", default=None)


@lru_cache(maxsize=1)
def _tracer() -> Any:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace.get_tracer("toolrag")  # a proxy: it follows a provider set later


def span(name: str, **attributes: Any) -> AbstractContextManager[Any]:
    """A span named `name`, current for the `with` block; attributes without a dot get the `toolrag.` prefix,
    None values are left out."""
    tracer = _tracer()
    if tracer is None:
        return nullcontext()
    clean = {(key if "." in key else f"toolrag.{key}"): value for key, value in attributes.items() if value is not None}
    request_id = REQUEST_ID.get()
    if request_id is not None:
        clean["toolrag.request_id"] = request_id
    return tracer.start_as_current_span(name, attributes=clean)  # type: ignore[no-any-return]


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
