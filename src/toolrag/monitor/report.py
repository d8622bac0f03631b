"""The health report: which tools are used, ignored, dead or poorly described, which requests went unserved, and
which tools' share of selections jumped (a description edited to game selection wins a tool many times the use:
arXiv 2505.18135; so does a real change of what users ask, which the operator tells apart).

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
    surge_days: int = 7  # the recent window whose share of selections is compared with the rest of the report's
    surge_ratio: float = 3.0  # a share of selections this many times the earlier one is a jump
    min_surge_selections: int = 10  # selections in the recent window before a jump counts
    min_baseline_searches: int = 50  # searches before the recent window, for an earlier share worth comparing


@dataclass(frozen=True)
class Surge:
    """A tool chosen for a much larger share of searches recently than before."""

    tool: str
    recent_selections: int
    recent_share: float  # of the recent window's searches
    earlier_share: float  # of the searches before it

    @property
    def ratio(self) -> float | None:
        return self.recent_share / self.earlier_share if self.earlier_share else None


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
    surging: list[Surge]
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
            "surging": [{**asdict(surge), "ratio": surge.ratio} for surge in self.surging],
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
    totals = store.usage.totals(since, audience, visible)
    return HealthReport(
        since=since,
        until=until,
        active_tools=len(active),
        inactive_tools=len(everything) - len(active),
        totals=totals,
        tools=usage,
        dead=sorted(
            (u for u in judged if u.call_rate < rules.dead_call_rate), key=lambda u: (u.call_rate, -u.injected)
        ),
        unused=sorted(active - seen),
        low_relevance=sorted(
            (u for u in judged if u.mean_score is not None and u.mean_score < rules.low_relevance),
            key=lambda u: u.mean_score or 0.0,
        ),
        surging=_surging(store, (since, until), rules, audience, usage, totals.retrievals),
        misses=misses,
        relevance_histogram=store.usage.score_histogram(since, audience=audience),
        daily=store.usage.daily(since, audience, visible),
        rules=rules,
        audience=audience,
    )


def _surging(
    store: Store,
    window: tuple[datetime, datetime],
    rules: ReportRules,
    audience: Audience,
    usage: list[ToolUsage],
    searches: int,
) -> list[Surge]:
    """Tools whose share of the recent window's searches is `surge_ratio` times their share of the searches before
    it (a tool never chosen before counts as chosen once, so a new favourite shows too). `usage` and `searches`:
    the report's own, over the whole window, of the tools the reader may see."""
    since, until = window
    recent_since = max(since, until - timedelta(days=rules.surge_days))
    recent_searches = store.usage.totals(recent_since, audience).retrievals
    earlier_searches = searches - recent_searches
    if recent_since <= since or earlier_searches < rules.min_baseline_searches or not recent_searches:
        return []
    chosen = {u.tool: u.injected for u in usage}
    surges = []
    for recent in store.usage.tool_usage(recent_since, audience):
        if recent.tool not in chosen or recent.injected < rules.min_surge_selections:
            continue  # a tool the reader may not see is not in the report's usage
        earlier = chosen[recent.tool] - recent.injected
        recent_share, earlier_share = recent.injected / recent_searches, earlier / earlier_searches
        if recent_share >= rules.surge_ratio * max(earlier, 1) / earlier_searches:
            surges.append(Surge(recent.tool, recent.injected, round(recent_share, 4), round(earlier_share, 4)))
    return sorted(surges, key=lambda surge: -surge.recent_share)
