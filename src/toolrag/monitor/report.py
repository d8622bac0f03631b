"""The health report: which tools are used, ignored, dead or poorly described, and which requests went unserved.

Relevance is the dense cosine between request and tool (comparable across requests, unlike the fused score, which
is normalized per request).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from toolrag.model import utc_now
from toolrag.store.base import Store
from toolrag.store.usage import SAMPLE_KINDS, RequestSample, SampleKind, ToolUsage, UsageTotals


@dataclass(frozen=True)
class ReportRules:
    """When a tool counts as dead or low-relevance."""

    min_injections: int = 5  # judge a tool only once it was offered this often
    dead_call_rate: float = 0.1  # offered often, called less than this share of the time
    low_relevance: float = 0.35  # mean cosine with the requests it was offered for


@dataclass
class HealthReport:
    since: datetime
    until: datetime
    active_tools: int
    inactive_tools: int
    totals: UsageTotals
    tools: list[ToolUsage]
    dead: list[ToolUsage]
    unused: list[str]
    low_relevance: list[ToolUsage]
    misses: dict[SampleKind, list[RequestSample]]
    relevance_histogram: list[int]
    daily: list[tuple[str, int, int]]
    rules: ReportRules = field(default_factory=ReportRules)

    def restricted_to(self, shown: Callable[[str], bool]) -> HealthReport:
        """The report without the tools `shown` rejects (for callers who may not see every tool)."""
        return replace(
            self,
            tools=[u for u in self.tools if shown(u.tool)],
            dead=[u for u in self.dead if shown(u.tool)],
            unused=[name for name in self.unused if shown(name)],
            low_relevance=[u for u in self.low_relevance if shown(u.tool)],
            misses={
                kind: [s for s in samples if kind != "unshortlisted_call" or shown(s.detail)]
                for kind, samples in self.misses.items()
            },
        )

    def as_json(self) -> dict[str, Any]:
        def tool_row(usage: ToolUsage) -> dict[str, Any]:
            return {**asdict(usage), "call_rate": round(usage.call_rate, 3)}

        return {
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "registry": {"active_tools": self.active_tools, "inactive_tools": self.inactive_tools},
            "totals": asdict(self.totals),
            "tools": [tool_row(u) for u in self.tools],
            "dead": [tool_row(u) for u in self.dead],
            "unused": self.unused,
            "low_relevance": [tool_row(u) for u in self.low_relevance],
            "misses": {kind: [asdict(s) for s in samples] for kind, samples in self.misses.items()},
            "relevance_histogram": self.relevance_histogram,
            "daily": [{"day": d, "retrievals": r, "calls": c} for d, r, c in self.daily],
            "rules": asdict(self.rules),
        }


def build_report(store: Store, days: int = 30, rules: ReportRules | None = None, samples: int = 20) -> HealthReport:
    rules = rules or ReportRules()
    until = utc_now()
    since = until - timedelta(days=days)
    usage = store.usage.tool_usage(since)
    everything = store.tools(include_inactive=True)
    active = {t.name for t in everything if t.active}
    seen = {u.tool for u in usage if u.injected or u.called}
    judged = [u for u in usage if u.tool in active and u.injected >= rules.min_injections]
    return HealthReport(
        since=since,
        until=until,
        active_tools=len(active),
        inactive_tools=len(everything) - len(active),
        totals=store.usage.totals(since),
        tools=usage,
        dead=sorted(
            (u for u in judged if u.call_rate < rules.dead_call_rate), key=lambda u: (u.call_rate, -u.injected)
        ),
        unused=sorted(active - seen),
        low_relevance=sorted(
            (u for u in judged if u.mean_score is not None and u.mean_score < rules.low_relevance),
            key=lambda u: u.mean_score or 0.0,
        ),
        misses={kind: store.usage.samples(kind, since, samples) for kind in SAMPLE_KINDS},
        relevance_histogram=store.usage.score_histogram(since),
        daily=store.usage.daily(since),
        rules=rules,
    )
