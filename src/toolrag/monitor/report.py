"""The health report: which tools are used, ignored, dead or poorly described, and which requests went unserved.

Relevance is the dense cosine between request and tool (comparable across requests, unlike the fused score, which
is normalized per request).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from toolrag.model import utc_now
from toolrag.store.base import Store
from toolrag.store.usage import EVERYONE, SAMPLE_KINDS, Audience, RequestSample, SampleKind, ToolUsage, UsageTotals


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
    audience: Audience = EVERYONE  # whose records it counts

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


def build_report(
    store: Store,
    days: int = 30,
    rules: ReportRules | None = None,
    samples: int = 20,
    audience: Audience = EVERYONE,
    visible: Collection[str] | None = None,
) -> HealthReport:
    """The report over the last `days`. A reader who is not an operator gets it over their tenant's records
    (`audience`) and the tools their principal may use (`visible`, active tools): counts, samples and request texts
    of other tenants, and every trace of tools they cannot see, are left out."""
    rules = rules or ReportRules()
    until = utc_now()
    since = until - timedelta(days=days)

    def shown(tool: str) -> bool:
        return visible is None or tool in visible

    usage = [u for u in store.usage.tool_usage(since, audience) if shown(u.tool)]
    everything = [t for t in store.tools(include_inactive=True) if shown(t.name)]
    active = {t.name for t in everything if t.active}
    seen = {u.tool for u in usage if u.injected or u.called}
    judged = [u for u in usage if u.tool in active and u.injected >= rules.min_injections]
    misses = {kind: store.usage.samples(kind, since, samples, audience, visible) for kind in SAMPLE_KINDS}
    return HealthReport(
        since=since,
        until=until,
        active_tools=len(active),
        inactive_tools=len(everything) - len(active),
        totals=store.usage.totals(since, audience),
        tools=usage,
        dead=sorted(
            (u for u in judged if u.call_rate < rules.dead_call_rate), key=lambda u: (u.call_rate, -u.injected)
        ),
        unused=sorted(active - seen),
        low_relevance=sorted(
            (u for u in judged if u.mean_score is not None and u.mean_score < rules.low_relevance),
            key=lambda u: u.mean_score or 0.0,
        ),
        misses=misses,
        relevance_histogram=store.usage.score_histogram(since, audience=audience),
        daily=store.usage.daily(since, audience),
        rules=rules,
        audience=audience,
    )
