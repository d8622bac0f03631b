"""Writes retrievals and tool calls to the store's usage log, in batches, off the request path.

Searches and calls only enqueue a record; a background thread writes a batch every `flush_seconds` (or when asked
to flush), so logging adds microseconds to a search, and a failing database loses log entries, not requests.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from toolrag.events import Event, ToolCallEvent
from toolrag.model import Principal, SearchResult, caller_key, utc_now
from toolrag.store.base import Store
from toolrag.store.usage import CallRecord, RetrievalRecord, principal_label
from toolrag.usagelog.config import MonitorConfig
from toolrag.usagelog.redact import redact

log = logging.getLogger("toolrag.monitor")


class UsageRecorder:
    """The usage log of one store. Also an `EventSink`: tool-call events of the runtime are recorded as calls."""

    def __init__(self, store: Store, config: MonitorConfig | None = None) -> None:
        self.store = store
        self.config = config or MonitorConfig()
        self._queue: queue.Queue[RetrievalRecord | CallRecord | threading.Event] = queue.Queue()
        self._thread = threading.Thread(target=self._write_forever, name="toolrag-usage", daemon=True)
        self._thread.start()
        self.prune()

    def record_retrieval(
        self,
        request: str,
        principal: Principal,
        results: Sequence[SearchResult],
        session: str | None = None,
        step: str | None = None,
    ) -> None:
        self._queue.put(
            RetrievalRecord(
                request_hash=hashlib.sha256(request.strip().lower().encode()).hexdigest()[:32],
                results=tuple((r.name, round(r.score, 4), round(r.signals.dense, 4)) for r in results),
                request=self._kept_text(request),
                session=session,
                principal=principal_label(principal.user, principal.tenant),
                step=step,
                tenant=principal.tenant,
                strategy=results[0].strategy if results else "retrieval",
                caller=principal.caller,
            )
        )

    def record_call(
        self,
        tool: str,
        outcome: str,
        latency_ms: float,
        injected: bool,
        session: str | None = None,
        user: str | None = None,
        tenant: str | None = None,
        caller: str | None = None,
        origin: str | None = None,
    ) -> None:
        """`caller`: the caller's `Principal.caller` (by default that of a principal of `user` and `tenant` made in
        Python code); `origin`: who started the call when not an agent ("console": an admin's trial)."""
        label = principal_label(user, tenant)
        who = caller if caller is not None else caller_key(None, user, tenant)
        record = CallRecord(tool, outcome, latency_ms, injected, session, label, tenant, caller=who, origin=origin)
        self._queue.put(record)

    def emit(self, event: Event) -> None:
        if isinstance(event, ToolCallEvent):
            self.record_call(
                event.resolved_name or event.requested_name,
                event.outcome,
                event.latency_ms,
                event.offered,
                event.session,
                event.user,
                event.tenant,
                event.caller,
                event.origin,
            )

    def _kept_text(self, request: str) -> str | None:
        if self.config.requests == "hash":
            return None
        return redact(request) if self.config.requests == "redacted" else request

    def flush(self, timeout: float = 10.0) -> None:
        """Block until everything recorded so far is written."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def prune(self) -> int:
        """Apply the retention setting now (it also runs once a day while recording)."""
        return self.store.usage.prune(utc_now() - timedelta(days=self.config.retention_days))

    def _write_forever(self) -> None:
        last_prune = utc_now()
        while True:
            batch: list[RetrievalRecord | CallRecord] = []
            waiting: list[threading.Event] = []
            item = self._queue.get()
            deadline = utc_now() + timedelta(seconds=self.config.flush_seconds)
            while True:
                if isinstance(item, threading.Event):
                    waiting.append(item)
                    break
                batch.append(item)
                remaining = (deadline - utc_now()).total_seconds()
                if remaining <= 0 or len(batch) >= 500:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            self._write(batch)
            for event in waiting:
                event.set()
            if utc_now() - last_prune > timedelta(days=1):
                last_prune = utc_now()
                self._safely(self.prune)

    def _write(self, batch: list[RetrievalRecord | CallRecord]) -> None:
        if not batch:
            return
        retrievals = [r for r in batch if isinstance(r, RetrievalRecord)]
        calls = [c for c in batch if isinstance(c, CallRecord)]
        self._safely(lambda: self.store.usage.record(retrievals, calls))

    @staticmethod
    def _safely(action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # the log must never break searches or calls
            log.warning("usage log write failed: %s", exc)
