"""One event interface for everything the runtime and the MCP gateway do, for monitoring, audits and tracing.

Sinks receive plain dataclasses. `ListSink` keeps them (tests, small tools); `OpenTelemetrySink` turns them into
spans when `opentelemetry-api` is installed; the usage log persists them (usagelog/recorder.py). Below both users,
so neither the runtime nor the log's writer has to import the other.
"""

from __future__ import annotations

import threading
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Outcome = Literal["ok", "error", "timeout", "refused", "unknown_tool", "invalid_arguments", "propagated"]
CallOrigin = Literal["console"]

# Who started the tool calls made in this context, when not an agent: the console sets it around an admin's trial
# call, and the gateway stamps it on the call's event, so the usage log tells trials from agents' calls whichever
# path the call takes (this process's tools, or an MCP upstream through the relay).
CALL_ORIGIN: ContextVar[CallOrigin | None] = ContextVar("toolrag_call_origin", default=None)


@dataclass(frozen=True)
class RoundEvent:
    round: int
    offered: tuple[str, ...]  # tools whose schemas the model saw this round
    tool_calls: int
    model_ms: float
    total_ms: float


@dataclass(frozen=True)
class ToolCallEvent:
    call_id: str
    requested_name: str
    resolved_name: str | None
    resolution: str | None  # exact, provider (the name as rendered for a provider), normalized, fuzzy
    arguments_bytes: int
    outcome: Outcome
    latency_ms: float
    offered: bool  # was the tool's schema in the model's prompt
    error: str | None = None
    session: str | None = None  # the conversation (agent run, MCP session) the call belongs to
    user: str | None = None
    tenant: str | None = None
    caller: str | None = None  # the principal's `Principal.caller`
    origin: CallOrigin | None = None  # None: an agent's call; "console": an admin's trial in the console


@dataclass(frozen=True)
class SecurityEvent:
    """A call the principal may not make: refused, and never revealed to the model as existing."""

    user: str | None
    tenant: str | None
    requested_name: str
    tool: str
    reason: str


Event = RoundEvent | ToolCallEvent | SecurityEvent


class EventSink(Protocol):
    def emit(self, event: Event) -> None: ...


class NullSink:
    def emit(self, event: Event) -> None:
        pass


class FanoutSink:
    """Passes every event to several sinks (for example your tracing and the registry's usage log)."""

    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = sinks

    def emit(self, event: Event) -> None:
        for sink in self.sinks:
            sink.emit(event)


@dataclass
class ListSink:
    events: list[Event] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def emit(self, event: Event) -> None:
        with self._lock:
            self.events.append(event)

    def of(self, kind: type[Any]) -> list[Any]:
        return [e for e in self.events if isinstance(e, kind)]


class OpenTelemetrySink:
    """Each event becomes a span (named `toolrag.<kind>`) with the event's fields as attributes."""

    def __init__(self, tracer: Any = None) -> None:
        from opentelemetry import trace

        self._tracer = tracer or trace.get_tracer("toolrag")

    def emit(self, event: Event) -> None:
        name = {RoundEvent: "toolrag.round", ToolCallEvent: "toolrag.tool_call", SecurityEvent: "toolrag.security"}
        with self._tracer.start_as_current_span(name[type(event)]) as span:
            for key, value in vars(event).items():
                if value is not None:
                    span.set_attribute(f"toolrag.{key}", list(value) if isinstance(value, tuple) else value)
