"""Writes retrievals and tool calls to the store's usage log, in batches, off the request path.

Searches and calls only enqueue a record; a background thread writes a batch every `flush_seconds` (or when asked
to flush), so logging adds microseconds to a search, and a failing database loses log entries, not requests. A
database slower than the requests loses them too: at most MAX_WAITING records wait in memory, and the rest are
dropped and counted (`UsageRecorder.dropped`), never queued without bound. What one caller keeps is bounded too
(`MonitorConfig.max_rows_per_caller`): retention bounds age only, and one token's searches would fill a disk.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from datetime import timedelta
from functools import partial
from typing import Any

from toolrag.events import Event, ToolCallEvent
from toolrag.jsontext import only_text
from toolrag.model import Principal, SearchResult, caller_key, utc_now
from toolrag.store.base import Store
from toolrag.store.usage import CallRecord, RetrievalRecord, principal_label
from toolrag.usagelog.config import MonitorConfig
from toolrag.usagelog.redact import MAX_CHARS as MAX_KEPT_CHARS
from toolrag.usagelog.redact import redact

log = logging.getLogger("toolrag.monitor")
MAX_WAITING = 10_000  # records waiting to be written, each holding at most MAX_KEPT_CHARS of a request's text
BATCH = 500  # records written in one transaction at most
DROPS_TOLD_EVERY = 60.0  # seconds between two warnings that records are being dropped


class UsageRecorder:
    """The usage log of one store. Also an `EventSink`: tool-call events of the runtime are recorded as calls."""

    def __init__(self, store: Store, config: MonitorConfig | None = None) -> None:
        self.store = store
        self.config = config or MonitorConfig()
        self._queue: queue.Queue[RetrievalRecord | CallRecord | threading.Event] = queue.Queue(MAX_WAITING)
        self.dropped = 0  # records not written because MAX_WAITING others were waiting
        self._written_since_trim: Counter[str] = Counter()  # per caller: its rows are counted only now and then
        self._dropped_told = 0.0
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
        self._enqueue(
            RetrievalRecord(
                request_hash=hashlib.sha256(request.strip().lower().encode("utf-8", "surrogatepass")).hexdigest()[:32],
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
        self._enqueue(record)

    def _enqueue(self, record: RetrievalRecord | CallRecord) -> None:
        try:
            self._queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1  # not locked: callers on several threads may race, and a count lost only undercounts
            now = time.monotonic()
            if now - self._dropped_told >= DROPS_TOLD_EVERY:
                self._dropped_told = now
                log.warning("usage log: %d records dropped, the database writes slower than they come", self.dropped)

    def waiting(self) -> int:
        """Records waiting to be written."""
        return self._queue.qsize()

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
        """What the log keeps of a request: at most its first MAX_KEPT_CHARS (the edges accept 100,000, and search
        reads 4,000), as text, redacted or not at all as configured."""
        if self.config.requests == "hash":
            return None
        text = only_text(request[:MAX_KEPT_CHARS])  # before redaction reads it; `_storable` makes it text again
        return redact(text) if self.config.requests == "redacted" else text

    def flush(self, timeout: float = 10.0) -> None:
        """Block until everything recorded so far is written."""
        done = threading.Event()
        started = time.monotonic()
        with contextlib.suppress(queue.Full):  # the writer is stuck: nothing to wait for beyond the timeout
            self._queue.put(done, timeout=timeout)
            done.wait(max(0.0, timeout - (time.monotonic() - started)))

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
                if remaining <= 0 or len(batch) >= BATCH:
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
        batch = [_storable(record) for record in batch]  # here, on the writer's thread: off the search's path
        retrievals = [r for r in batch if isinstance(r, RetrievalRecord)]
        calls = [c for c in batch if isinstance(c, CallRecord)]
        self._safely(lambda: self.store.usage.record(retrievals, calls))
        self._trim([record.caller for record in batch if record.caller is not None])

    def _trim(self, callers: list[str]) -> None:
        """Keep each caller within `max_rows_per_caller`, counting a caller's rows once it wrote a tenth of that
        since the last count (so the count costs a few index entries per record)."""
        keep = self.config.max_rows_per_caller
        self._written_since_trim.update(callers)
        for caller in [c for c, written in self._written_since_trim.items() if written >= keep // 10]:
            del self._written_since_trim[caller]
            self._safely(partial(self.store.usage.trim_caller, caller, keep))

    @staticmethod
    def _safely(action: Callable[[], object]) -> None:
        try:
            action()
        except Exception as exc:  # the log must never break searches or calls
            log.warning("usage log write failed: %s", exc)


def _storable(record: RetrievalRecord | CallRecord) -> RetrievalRecord | CallRecord:
    """`record` with every text made storable (`only_text`): a lone surrogate or a NUL in one record, from a request, a
    session id, a model's tool name or a token's claims, would fail its whole batch's write, every caller's records
    with it."""
    texts: dict[str, Any] = {
        f.name: only_text(value) for f in fields(record) if isinstance(value := getattr(record, f.name), str)
    }
    return replace(record, **texts)
