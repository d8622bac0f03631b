"""Scheduled jobs: a daily consistency check (and repair of missing embeddings), a daily run that learns tools'
relations from the usage log, and a weekly health report.

A server runs `Scheduler.run()` beside its requests; every `check_every_seconds` it looks for due jobs. Several
instances may share one registry (PostgreSQL): each run is claimed in the store first (`claim_job`, one
transaction), so one instance runs it. Every run keeps its report in the store (`job_reports`, comparable week to
week), logs a summary, feeds the Prometheus gauges (server/metrics.py) and, with `webhook_url`, posts the summary
as Slack-compatible JSON (`{"text": ...}`).

A tick that fails (the store cannot be written: a full disk, a database outage) does not stop the server that runs
it: it is logged, tried again after a back-off that doubles up to `retry_max_seconds`, and shown in `/health`
(`Scheduler.health()`); a run whose report could not be kept is kept in memory and written at the next tick.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlsplit

import anyio
import httpx

from toolrag.model import utc_now
from toolrag.monitor.config import ScheduleConfig, parse_interval
from toolrag.monitor.report import build_report
from toolrag.monitor.validate import validate
from toolrag.registry import ToolRegistry
from toolrag.store.jobs import JobReport

log = logging.getLogger("toolrag.schedule")
CONSISTENCY, REPORT, RELATIONS = "consistency", "report", "relations"


@dataclass(frozen=True)
class Job:
    name: str
    every: timedelta
    run: Callable[[], dict[str, Any]]


@dataclass(frozen=True)
class ScheduleHealth:
    """How the scheduler's ticks are going, for `/health`."""

    ok: bool
    failures: int  # failed ticks in a row
    failing_since: datetime | None
    error: str | None  # what the latest failed tick raised
    retry_in_seconds: float | None  # while failing: the back-off before the next try

    def shown(self, admin: bool) -> dict[str, Any]:
        """As /health shows it: what the store raised only to admins (it may name paths or hosts)."""
        since = self.failing_since.isoformat(timespec="seconds") if self.failing_since else None
        return {
            "ok": self.ok,
            "failures": self.failures,
            "failing_since": since,
            "error": self.error if admin else None,
            "retry_in_seconds": self.retry_in_seconds,
        }


MAX_ERROR_CHARS = 300


class Scheduler:
    def __init__(
        self,
        registry: ToolRegistry,
        config: ScheduleConfig | None = None,
        *,
        mcp_servers: set[str] | None = None,
        holder: str | None = None,
        clock: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], Awaitable[None]] = anyio.sleep,
    ) -> None:
        self.registry = registry
        self.config = config or ScheduleConfig()
        self.mcp_servers = mcp_servers
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.clock = clock
        self.sleep = sleep
        self._unsaved: list[JobReport] = []  # runs whose report the store did not take yet
        self._health = ScheduleHealth(ok=True, failures=0, failing_since=None, error=None, retry_in_seconds=None)
        self.jobs = [
            Job(name, every, run)
            for name, interval, run in (
                (CONSISTENCY, self.config.consistency, self.consistency),
                (REPORT, self.config.report, self.report),
                (RELATIONS, self.config.relations, self.relations),
            )
            if (every := parse_interval(interval)) is not None
        ]

    async def run(self) -> None:
        """Look for due jobs until cancelled. A failing job is logged and tried again when next due; a failing
        tick (the store) is logged and tried again after a back-off: it never ends the loop, nor the server."""
        while True:
            try:
                await anyio.to_thread.run_sync(self.tick)
            except Exception as exc:  # whatever the store raised: the server keeps serving
                wait = self._failed(exc)
            else:
                wait = self._recovered()
            await self.sleep(wait)

    def health(self) -> ScheduleHealth:
        return self._health

    def _failed(self, exc: Exception) -> float:
        """Log a failed tick and note it for /health; the back-off before the next try."""
        before = self._health
        failures = before.failures + 1
        wait = min(self.config.check_every_seconds * 2.0**failures, self.config.retry_max_seconds)
        error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
        if failures == 1:
            log.exception("a scheduler tick failed; trying again in %.0f s", wait)
        else:
            log.warning("a scheduler tick failed (%d in a row): %s; trying again in %.0f s", failures, error, wait)
        since = before.failing_since or self.clock()
        self._health = ScheduleHealth(False, failures, since, error, wait)
        return wait

    def _recovered(self) -> float:
        if not self._health.ok:
            log.info("the scheduler's ticks work again after %d failures", self._health.failures)
            self._health = ScheduleHealth(ok=True, failures=0, failing_since=None, error=None, retry_in_seconds=None)
        return self.config.check_every_seconds

    def tick(self) -> list[JobReport]:
        """Run every job that is due and that this instance claims; the reports of the runs. Raises what the store
        raises (`run()` backs off)."""
        self._save_unsaved()
        runs = []
        for job in self.jobs:
            now = self.clock()
            lease = now + timedelta(seconds=self.config.lease_seconds)
            if not self.registry.store.jobs.claim_job(job.name, self.holder, now, lease, now - job.every):
                continue
            try:
                body = job.run()
            except Exception:
                log.exception("scheduled job %s failed", job.name)
                body = {"failed": True}
            finished = JobReport(job.name, self.clock(), self.holder, body)
            runs.append(finished)
            self._announce(finished)
            self._unsaved.append(finished)
            self._save_unsaved()
        return runs

    def _save_unsaved(self) -> None:
        """Keep the reports of finished runs (releasing their jobs); one the store refuses waits for the next tick,
        its job still leased to this instance, so it is not run twice."""
        while self._unsaved:
            run = self._unsaved[0]
            self.registry.store.jobs.finish_job(run.job, self.holder, run.at, run.body)
            self._unsaved.pop(0)

    # -- the jobs ------------------------------------------------------------------------------------------------

    def consistency(self) -> dict[str, Any]:
        """Orphans, tools without embeddings (embedded now), near-duplicates: counts and the tools concerned."""
        findings = validate(self.registry, self.mcp_servers, fix=True)
        by_kind: dict[str, list[str]] = {}
        counts: dict[str, int] = {}
        for finding in findings:
            by_kind.setdefault(finding.kind, []).append(", ".join(finding.tools) or finding.detail)
            counts[finding.kind] = counts.get(finding.kind, 0) + finding.count
        return {"counts": counts, "findings": by_kind}

    def relations(self) -> dict[str, Any]:
        """Relations learned from the usage log's latest sessions, in place of the last run's."""
        run = self.registry.relations.learn()
        return {"days": run.days, "calls": run.calls, "relations": len(run.relations), "changed": run.changed}

    def report(self) -> dict[str, Any]:
        report = build_report(self.registry.store, days=self.config.report_days)
        totals = report.totals
        return {
            "days": self.config.report_days,
            "active_tools": report.active_tools,
            "searches": totals.retrievals,
            "no_tool_rate": round(totals.no_tool / totals.retrievals, 4) if totals.retrievals else 0.0,
            "calls": totals.calls,
            "failed_calls": totals.failed_calls,
            "dead": [u.tool for u in report.dead],
            "unused": report.unused,
            "low_relevance": [u.tool for u in report.low_relevance],
            "surging": [surge.tool for surge in report.surging],
        }

    # -- telling people ------------------------------------------------------------------------------------------

    def _announce(self, run: JobReport) -> None:
        text = summary(run)
        log.info(text)
        if self.config.webhook_url:
            try:
                # Its answer is never read: a hook that floods it must not fill the server's memory.
                with httpx.stream("POST", self.config.webhook_url, json={"text": text}, timeout=10) as answer:
                    answer.raise_for_status()
            except httpx.HTTPError as exc:
                # Never the URL: for Slack and most chat webhooks, the URL is the secret.
                log.warning(
                    "the webhook at %s did not take the %s summary: %s",
                    _host(self.config.webhook_url),
                    run.job,
                    _why(exc),
                )


def summary(run: JobReport) -> str:
    """One line a person reads in a log or a chat channel."""
    body = run.body
    if body.get("failed"):
        return f"toolrag {run.job}: failed (see the server log)"
    if run.job == CONSISTENCY:
        counts = body.get("counts", {})
        found = ", ".join(f"{count} {kind}" for kind, count in sorted(counts.items())) or "nothing to report"
        return f"toolrag consistency check: {found}"
    if run.job == RELATIONS:
        news = "" if body["changed"] else ", as before"
        return (
            f"toolrag relations: {body['relations']} learned from {body['calls']} calls of the last {body['days']}"
            f" days{news}"
        )
    return (
        f"toolrag weekly report ({body['days']} days): {body['searches']} searches, no-tool rate "
        f"{body['no_tool_rate']:.1%}, {body['calls']} calls ({body['failed_calls']} failed); {len(body['dead'])} dead, "
        f"{len(body['unused'])} unused, {len(body['low_relevance'])} low-relevance tools of {body['active_tools']}"
    )


def compare(previous: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """What changed between two weekly report bodies, one line per change."""
    lines = []
    for key in ("searches", "calls", "failed_calls", "active_tools"):
        if previous.get(key) != current.get(key):
            lines.append(f"{key}: {previous.get(key)} -> {current.get(key)}")
    if previous.get("no_tool_rate") != current.get("no_tool_rate"):
        lines.append(f"no_tool_rate: {previous.get('no_tool_rate', 0):.1%} -> {current.get('no_tool_rate', 0):.1%}")
    for key in ("dead", "unused", "low_relevance", "surging"):
        before, after = set(previous.get(key, [])), set(current.get(key, []))
        if after - before:
            lines.append(f"{key}, new: {', '.join(sorted(after - before))}")
        if before - after:
            lines.append(f"{key}, no longer: {', '.join(sorted(before - after))}")
    return lines or ["nothing changed"]


def _host(url: str) -> str:
    return urlsplit(url).hostname or "(no host)"


def _why(exc: httpx.HTTPError) -> str:
    """What went wrong, without the URL httpx puts in its messages."""
    if isinstance(exc, httpx.HTTPStatusError):
        return f"HTTP {exc.response.status_code}"
    return type(exc).__name__
