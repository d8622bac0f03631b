"""Scheduled jobs: a daily consistency check (and repair of missing embeddings) and a weekly health report.

A server runs `Scheduler.run()` beside its requests; every `check_every_seconds` it looks for due jobs. Several
instances may share one registry (PostgreSQL): each run is claimed in the store first (`claim_job`, one
transaction), so one instance runs it. Every run keeps its report in the store (`job_reports`, comparable week to
week), logs a summary, feeds the Prometheus gauges (server/metrics.py) and, with `webhook_url`, posts the summary
as Slack-compatible JSON (`{"text": ...}`).
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
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
from toolrag.store.usage import JobReport

log = logging.getLogger("toolrag.schedule")
CONSISTENCY, REPORT = "consistency", "report"


@dataclass(frozen=True)
class Job:
    name: str
    every: timedelta
    run: Callable[[], dict[str, Any]]


class Scheduler:
    def __init__(
        self,
        registry: ToolRegistry,
        config: ScheduleConfig | None = None,
        *,
        mcp_servers: set[str] | None = None,
        holder: str | None = None,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        self.registry = registry
        self.config = config or ScheduleConfig()
        self.mcp_servers = mcp_servers
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.clock = clock
        self.jobs = [
            Job(name, every, run)
            for name, interval, run in (
                (CONSISTENCY, self.config.consistency, self.consistency),
                (REPORT, self.config.report, self.report),
            )
            if (every := parse_interval(interval)) is not None
        ]

    async def run(self) -> None:
        """Look for due jobs until cancelled; a failing job is logged and tried again when next due."""
        while True:
            await anyio.to_thread.run_sync(self.tick)
            await anyio.sleep(self.config.check_every_seconds)

    def tick(self) -> list[JobReport]:
        """Run every job that is due and that this instance claims; the reports of the runs."""
        runs = []
        for job in self.jobs:
            now = self.clock()
            lease = now + timedelta(seconds=self.config.lease_seconds)
            if not self.registry.store.usage.claim_job(job.name, self.holder, now, lease, now - job.every):
                continue
            try:
                body = job.run()
            except Exception:
                log.exception("scheduled job %s failed", job.name)
                body = {"failed": True}
            finished = JobReport(job.name, self.clock(), self.holder, body)
            self.registry.store.usage.finish_job(job.name, self.holder, finished.at, body)
            runs.append(finished)
            self._announce(finished)
        return runs

    # -- the jobs ------------------------------------------------------------------------------------------------

    def consistency(self) -> dict[str, Any]:
        """Orphans, tools without embeddings (embedded now), near-duplicates: counts and the tools concerned."""
        findings = validate(self.registry, self.mcp_servers, fix=True)
        by_kind: dict[str, list[str]] = {}
        for finding in findings:
            by_kind.setdefault(finding.kind, []).append(", ".join(finding.tools))
        return {"counts": {kind: len(items) for kind, items in by_kind.items()}, "findings": by_kind}

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
        }

    # -- telling people ------------------------------------------------------------------------------------------

    def _announce(self, run: JobReport) -> None:
        text = summary(run)
        log.info(text)
        if self.config.webhook_url:
            try:
                httpx.post(self.config.webhook_url, json={"text": text}, timeout=10).raise_for_status()
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
    for key in ("dead", "unused", "low_relevance"):
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
