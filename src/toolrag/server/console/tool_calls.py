"""A tool's calls on its console page: per hour over the last two days, per day over the last month, with the
latency's median and 95th percentile and the error rate (monitor/latency.py), and a bar chart of the days drawn
here as SVG (no script, no CDN). Read by the rule every usage page reads by (`Reading`): a reader counts its own
tenant's calls only."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from markupsafe import Markup, escape

from toolrag.access import Caller
from toolrag.model import utc_now
from toolrag.monitor.latency import CallFigures, call_figures, figures
from toolrag.monitor.reading import Reading
from toolrag.registry import ToolRegistry

DAYS = 30
HOURS = 48


@dataclass(frozen=True)
class ToolCalls:
    window: CallFigures  # the whole month
    daily: list[CallFigures]
    hourly: list[CallFigures]
    chart: Markup | None

    @property
    def days(self) -> int:
        return DAYS

    @property
    def hours(self) -> int:
        return HOURS


def tool_calls(registry: ToolRegistry, who: Caller, tool: str) -> ToolCalls:
    now = utc_now()
    since = now - timedelta(days=DAYS)
    calls = registry.store.usage.timed_calls(tool, since, Reading.of(registry, who).audience)
    recent = [call for call in calls if call.at >= now - timedelta(hours=HOURS)]
    daily = call_figures(calls, "day")
    return ToolCalls(figures(since, calls), daily, call_figures(recent, "hour"), _chart(daily))


def _chart(daily: list[CallFigures]) -> Markup | None:
    """A bar per day with calls: its height the calls that ran, its red part the failed ones."""
    if not daily:
        return None
    peak = max(max(day.ran, day.not_run) for day in daily) or 1
    step = min(24.0, 480 / len(daily))
    parts = []
    for i, day in enumerate(daily):
        x, ran, failed = 4 + i * step, 50 * day.ran / peak, 50 * day.failed / peak
        p95 = "" if day.p95_ms is None else f", p95 {day.p95_ms:.1f} ms"
        label = escape(f"{day.start:%Y-%m-%d}: {day.ran} calls, {day.failed} failed{p95}")
        parts.append(
            f'<rect x="{x:.1f}" y="{54 - ran:.1f}" width="{step * 0.7:.1f}" height="{ran:.1f}" fill="#2563eb">'
            f"<title>{label}</title></rect>"
            f'<rect x="{x:.1f}" y="{54 - failed:.1f}" width="{step * 0.7:.1f}" height="{failed:.1f}" fill="#dc2626"/>'
        )
    width = 8 + len(daily) * step
    return Markup(
        f'<svg class="spark" id="calls-chart" width="{width:.0f}" height="58" viewBox="0 0 {width:.0f} 58"'
        f' role="img">{"".join(parts)}</svg>'
    )
