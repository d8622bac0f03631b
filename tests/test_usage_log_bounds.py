"""The usage log holds what a caller does within bounds no caller sets: records waiting for a slow database, and the
rows one caller keeps (docs/reliability.md "Seventh security review"). Each test failed on the code before its fix."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal
from unittest import mock

import pytest

from toolrag import ToolRegistry
from toolrag.mcp import audit
from toolrag.mcp.gateway import AuditSink
from toolrag.model import Principal, utc_now
from toolrag.runtime.gateway import ToolGateway, permitted_tools
from toolrag.runtime.messages import ToolCall
from toolrag.runtime.toolbox import find
from toolrag.store.base import AuditEntry
from toolrag.store.location import open_store
from toolrag.store.sqlite import SQLiteStore
from toolrag.store.usage import Audience
from toolrag.usagelog import recorder as recording
from toolrag.usagelog import redact
from toolrag.usagelog.config import MonitorConfig
from toolrag.usagelog.recorder import UsageRecorder

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder, in_schema


class _StuckLog:
    """A usage table whose writes wait until released (a database far slower than the requests)."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.released = threading.Event()
        self.written = 0

    def record(self, retrievals: list[Any], calls: list[Any]) -> None:
        self.released.wait()
        self.written += len(retrievals) + len(calls)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def test_records_waiting_for_a_slow_database_are_bounded(tmp_path: Path) -> None:
    """The queue had no bound: a database slower than the requests (or stuck) grew the process's memory by every
    request's record, 6 kB each with their texts, until it ran out."""
    store = SQLiteStore(tmp_path / "log.db")
    stuck = _StuckLog(store.usage)
    store.usage = stuck  # type: ignore[assignment]
    recorder = UsageRecorder(store)
    flood = recording.MAX_WAITING + 5_000
    for number in range(flood):
        recorder.record_retrieval(f"request {number} " + "x" * 100, Principal(user="flooder"), [])
    assert recorder.waiting() <= recording.MAX_WAITING
    assert recorder.dropped >= flood - recording.MAX_WAITING - recording.BATCH  # the writer holds one batch
    stuck.released.set()
    recorder.flush()
    assert stuck.written + recorder.dropped == flood  # each record written or counted as dropped, none lost unseen


def test_the_log_keeps_a_requests_first_characters_only(tmp_path: Path) -> None:
    """The edges accept requests of 100,000 characters and the log kept each whole: a megabyte of disk (and of
    memory while waiting) per ten searches, of which search reads 4,000 characters."""
    store = SQLiteStore(tmp_path / "log.db")
    recorder = UsageRecorder(store)
    recorder.record_retrieval("refund the payment " + "x" * 99_000, Principal(user="flooder"), [])
    recorder.flush()
    (kept,) = [row.request for row in store.usage.recent_requests(utc_now() - timedelta(hours=1))]
    assert kept is not None and kept.startswith("refund the payment ") and len(kept) == redact.MAX_CHARS


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_one_callers_flood_keeps_its_latest_rows_and_nobody_elses_go(
    store_kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """The log was bounded by age only (90 days): one token's searches, 6 kB each with their texts, filled a disk
    within the retention. Now a caller keeps its latest `max_rows_per_caller` searches (and calls); others keep
    theirs."""
    schema = f"test_{uuid.uuid4().hex[:12]}"
    where = (
        str(tmp_path / "log.db")
        if store_kind == "sqlite"
        else in_schema(request.getfixturevalue("postgres_url"), schema)
    )
    store = open_store(where)
    keep = 1000
    recorder = UsageRecorder(store, MonitorConfig(max_rows_per_caller=keep, flush_seconds=0.01))
    flooder, other = Principal(user="flooder"), Principal(user="other")
    for number in range(20):
        recorder.record_retrieval(f"others' request {number}", other, [])
        recorder.record_call("weather.current", "ok", 1.0, True, user="other")
    recorder.flush()
    for number in range(3 * keep):
        recorder.record_retrieval(f"flood {number}", flooder, [])
        recorder.record_call("weather.current", "ok", 1.0, True, user="flooder")
        if number % recording.BATCH == 0:
            recorder.flush()
    recorder.flush()

    def kept(principal: Principal) -> tuple[int, int]:
        days = store.usage.daily(utc_now() - timedelta(days=1), Audience.of(principal))
        return sum(day[1] for day in days), sum(day[2] for day in days)

    retrievals, calls = kept(flooder)
    assert keep <= retrievals <= keep + keep // 10 and keep <= calls <= keep + keep // 10
    assert kept(other) == (20, 20)
    latest = store.usage.recent_requests(utc_now() - timedelta(hours=1), limit=1, audience=Audience.of(flooder))
    assert latest[0].request == f"flood {3 * keep - 1}"
    store.close()


@pytest.mark.parametrize("requests", ["full", "redacted", "hash"])
def test_half_an_emoji_in_a_logged_request_is_answered_and_logged(
    requests: Literal["full", "redacted", "hash"], tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """With the usage log on, a lone surrogate (half an emoji in a model's `find_tools` arguments, which JSON keeps)
    raised UnicodeEncodeError out of `search`: the agent run ended, as in LangGraph's, LangChain's and LlamaIndex's
    tool search. And one such record in a batch would fail the whole batch's write."""
    registry = ToolRegistry(tmp_path / "r.db", embedder, RETRIEVAL, monitor=MonitorConfig(requests=requests))
    registry.register_many(SAMPLE_TOOLS)
    found = find(registry, Principal(user="u"), '{"query": "weather \\ud83d in paris"}')
    assert [r.name for r in found][:1] == ["weather.forecast"]
    registry.search("also the forecast \ud800", Principal(user="u"))
    assert registry.usage is not None
    registry.usage.flush()
    logged = registry.store.usage.recent_requests(utc_now() - timedelta(hours=1))
    assert len(logged) == (0 if requests == "hash" else 2)
    assert all("\ufffd" in row.request for row in logged)
    registry.close()


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_refused_calls_write_a_bounded_number_of_audit_rows(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """Each call of a name a deny rule matches wrote one audit row, at once, on the caller's path: 3,000 calls,
    3,000 rows and 870 kB, with no retention and no bound. Now one row a minute per principal and kind, and one
    more saying how many were not written one by one."""
    registry = ToolRegistry(tmp_path / "r.db", embedder, RETRIEVAL)
    registry.register_many(SAMPLE_TOOLS)
    clock = _Clock()
    reader = Principal(user="mallory", deny_tools=frozenset({"tickets.delete_*"}))
    gateway = ToolGateway(
        permitted_tools(registry, reader), [], reader, lambda name: None, events=AuditSink(registry, clock)
    )

    async def refused(count: int) -> None:
        for number in range(count):
            await gateway.call(ToolCall(str(number), f"tickets.delete_{number:08d}" + "x" * 200, "{}"), set())

    asyncio.run(refused(3000))
    assert [e.action for e in registry.store.audit_log()] == ["refused"]
    clock.now += audit.WINDOW_SECONDS + 1
    asyncio.run(refused(1))
    rows = registry.store.audit_log()
    assert [e.action for e in rows] == ["refused", "refused", "refused"]
    assert any("2,999 more" in e.detail and e.principal == "mallory" for e in rows)
    registry.close()


def test_flagged_results_write_a_bounded_number_of_audit_rows() -> None:
    written: list[AuditEntry] = []
    clock = _Clock()
    bounded = audit.BoundedAudit(written.extend, clock)
    for _ in range(500):
        bounded([AuditEntry("result flagged", "kept: an instruction", "web.fetch", "web")])
        bounded([AuditEntry("result flagged", "kept: an instruction", "files.read", "files")])
    assert [(e.tool, e.detail) for e in written] == [
        ("web.fetch", "kept: an instruction"),
        ("files.read", "kept: an instruction"),
    ]
    clock.now += audit.WINDOW_SECONDS + 1
    bounded([])  # any write after the window writes what was counted
    assert sorted((e.tool, e.detail) for e in written[2:]) == [
        (tool, "499 more like this in the last 60 s, not written one by one: kept: an instruction (499)")
        for tool in ("files.read", "web.fetch")
    ]


def test_a_count_row_names_what_it_counts_and_is_written_when_the_gateway_stops() -> None:
    """The third review: one row named the first refused tool, and "1,000 more" stood for another tool of another
    server; a count was written only if another row came after the window; past MAX_KINDS, a new principal's
    refusals were counted under another principal's name."""
    written: list[AuditEntry] = []
    clock = _Clock()
    bounded = audit.BoundedAudit(written.extend, clock)
    bounded([AuditEntry("refused", "may not", "public.weather_admin", "public", "mallory")])
    for _ in range(1000):
        bounded([AuditEntry("refused", "may not", "billing.payroll_export", "billing", "mallory")])
    bounded.flush()
    first, count = written
    assert first.tool == "public.weather_admin"
    assert count.principal == "mallory" and count.tool is None and count.server is None
    assert count.detail.endswith("not written one by one: billing.payroll_export (1,000)")

    written.clear()
    with mock.patch.object(audit, "MAX_KINDS", 2):
        crowded = audit.BoundedAudit(written.extend, clock)
        for who in ("sub-1", "sub-2", "sub-3", "vic", "vic"):
            crowded([AuditEntry("refused", "may not", "hr.payroll", "hr", who)])
        crowded.flush()
    assert [e.principal for e in written] == ["sub-1", "sub-2", "sub-3", None]
    assert written[-1].detail.endswith("vic: hr.payroll (2)")


def test_a_count_is_written_by_a_timer_when_nothing_else_comes() -> None:
    written: list[AuditEntry] = []
    bounded = audit.BoundedAudit(written.extend, _Clock())
    with mock.patch.object(audit, "WINDOW_SECONDS", 0.05):
        bounded([AuditEntry("refused", "may not", "hr.payroll", "hr", "mallory")] * 3)
        bounded.clock.now += 1  # type: ignore[attr-defined]
        deadline = time.monotonic() + 30
        while len(written) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert len(written) == 2 and written[1].detail.startswith("2 more like this")
