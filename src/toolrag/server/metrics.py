"""Prometheus metrics of one API process (counters since it started, registry gauges read at scrape time)."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from toolrag.registry import ToolRegistry


class ApiMetrics:
    def __init__(self, registry: ToolRegistry) -> None:
        self.collector = CollectorRegistry()
        self.searches = Counter(
            "toolrag_searches", "Searches served, by whether a tool passed", ["found"], registry=self.collector
        )
        self.search_seconds = Histogram(
            "toolrag_search_seconds",
            "Search latency, request embedding included",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
            registry=self.collector,
        )
        self.calls = Counter("toolrag_calls", "Tool calls executed, by outcome", ["outcome"], registry=self.collector)
        self.call_seconds = Histogram("toolrag_call_seconds", "Tool call latency", registry=self.collector)
        self.rate_limited = Counter(
            "toolrag_rate_limited", "Requests refused by a rate limit, by kind", ["kind"], registry=self.collector
        )
        self.requests = Counter(
            "toolrag_http_requests", "HTTP requests, by route and status", ["route", "status"], registry=self.collector
        )
        tools = Gauge("toolrag_tools", "Tools in the registry, by state", ["state"], registry=self.collector)
        tools.labels("active").set_function(lambda: registry.snapshot().live_count)
        tools.labels("all").set_function(lambda: len(registry.tools(include_inactive=True)))
        Gauge("toolrag_registry_generation", "The registry's change counter", registry=self.collector).set_function(
            lambda: registry.generation
        )

        self._scheduled_gauges(registry)

    def _scheduled_gauges(self, registry: ToolRegistry) -> None:
        """Gauges read from the latest reports of the scheduled jobs (monitor/schedule.py), 0 before the first."""

        read: dict[str, tuple[float, dict[str, Any]]] = {}

        def latest(job: str) -> dict[str, Any]:
            """The job's latest report, read once per scrape (its gauges ask for it once per label)."""
            now = time.monotonic()
            if job not in read or now - read[job][0] > 1.0:
                reports = registry.store.jobs.job_reports(job, 1)
                read[job] = (now, reports[0].body if reports else {})
            return read[job][1]

        tools = Gauge(
            "toolrag_report_tools",
            "Tools in the latest weekly report, by finding",
            ["finding"],
            registry=self.collector,
        )
        for finding in ("dead", "unused", "low_relevance", "surging"):
            tools.labels(finding).set_function(functools.partial(_count, latest, "report", finding))
        Gauge(
            "toolrag_report_no_tool_rate",
            "Share of searches that found no tool, latest report",
            registry=self.collector,
        ).set_function(lambda: float(latest("report").get("no_tool_rate", 0.0)))
        checked = Gauge(
            "toolrag_consistency_findings",
            "Findings of the latest consistency check, by kind",
            ["kind"],
            registry=self.collector,
        )
        for kind in ("orphan", "missing_embedding", "near_duplicate", "too_short", "too_long"):
            checked.labels(kind).set_function(functools.partial(_finding_count, latest, kind))

    def render(self) -> bytes:
        return generate_latest(self.collector)


def _count(latest: Callable[[str], dict[str, Any]], job: str, key: str) -> float:
    return float(len(latest(job).get(key, [])))


def _finding_count(latest: Callable[[str], dict[str, Any]], kind: str) -> float:
    return float(latest("consistency").get("counts", {}).get(kind, 0))
