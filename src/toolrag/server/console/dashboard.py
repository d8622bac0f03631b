"""The console's dashboard: registry health for a person deciding which descriptions to rewrite. Which tools are
offered but not called, which are far from the requests they serve, which are never offered, and which requests
found nothing; the page is templates/dashboard.html, its charts SVG drawn here (no script, no CDN: it works
offline and in audits)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from toolrag.monitor.report import HealthReport
from toolrag.store.jobs import JobReport
from toolrag.store.usage import ToolUsage

# The request samples the page lists, by kind: (section id, title).
SAMPLE_SECTIONS = (
    ("no_tool", "no-tool", "Requests that found no tool"),
    ("reformulated", "reformulated", "Requests found only on a second chance (expanded, relaxed, rewritten)"),
    ("unshortlisted_call", "misses", "Calls to tools that were not in the shortlist"),
    ("repeated_search", "repeated", "Sessions that searched again"),
)


@dataclass(frozen=True)
class Candidate:
    """A tool whose description may need rewriting, why, and the requests it was offered for (with relevance)."""

    tool: str
    reason: str
    call_rate: str
    mean_relevance: str
    offered_for: list[tuple[str, str]]


def dashboard_context(
    report: HealthReport, offered_for: dict[str, list[tuple[str | None, float]]], weekly: Sequence[JobReport]
) -> dict[str, Any]:
    """What dashboard.html shows. `offered_for`: recent requests each rewrite candidate was offered for, with its
    relevance; `weekly`: the stored reports of the scheduled job, newest first (the trend; operators only)."""
    busiest = sorted(report.tools, key=lambda u: -u.injected)[:15]
    return {
        "report": report,
        "cards": _cards(report),
        "call_rate": _call_rate_chart(busiest),
        "daily": _daily_chart(report.daily),
        "relevance": _histogram_chart(report.relevance_histogram),
        "candidates": _candidates(report, offered_for),
        "sample_sections": SAMPLE_SECTIONS,
        "unused": report.unused[:60],
        "more_unused": max(0, len(report.unused) - 60),
        "trend": _trend_rows(weekly),
    }


def _cards(report: HealthReport) -> list[tuple[str, object]]:
    totals = report.totals
    no_tool_rate = totals.no_tool / totals.retrievals if totals.retrievals else 0.0
    return [
        ("active tools", report.active_tools),
        ("inactive tools", report.inactive_tools),
        ("searches", totals.retrievals),
        ("sessions", totals.sessions),
        ("no-tool rate", f"{no_tool_rate:.0%}"),
        ("found on a second chance", totals.reformulated),
        ("served the whole catalog", totals.whole_catalog),
        ("tool calls", totals.calls),
        ("failed calls", totals.failed_calls),
        ("dead tools", len(report.dead)),
        ("unused tools", len(report.unused)),
    ]


def _trend_rows(weekly: Sequence[JobReport]) -> list[list[str]]:
    """Week to week: the scheduled reports that ran, one row of cells each."""
    return [
        [
            f"{run.at:%Y-%m-%d}",
            str(run.body.get("searches", "")),
            f"{float(run.body.get('no_tool_rate', 0.0)):.1%}",
            str(run.body.get("calls", "")),
            *(str(len(run.body.get(key, []))) for key in ("dead", "unused", "low_relevance")),
        ]
        for run in weekly
        if not run.body.get("failed")
    ]


def _candidates(report: HealthReport, offered_for: dict[str, list[tuple[str | None, float]]]) -> list[Candidate]:
    reasons: dict[str, tuple[ToolUsage, str]] = {}
    for usage in report.dead:
        reasons[usage.tool] = (usage, "offered often, rarely called")
    for usage in report.low_relevance:
        reason = reasons[usage.tool][1] + "; " if usage.tool in reasons else ""
        reasons[usage.tool] = (usage, reason + "far from the requests it serves")
    return [
        Candidate(
            tool=name,
            reason=reason,
            call_rate=f"{usage.call_rate:.0%}",
            mean_relevance="" if usage.mean_score is None else f"{usage.mean_score:.2f}",
            offered_for=[(text or "(no request text)", f"{score:.2f}") for text, score in offered_for.get(name, [])],
        )
        for name, (usage, reason) in reasons.items()
    ]


def _svg(parts: list[str], height: int) -> Markup:
    """A chart: every text in `parts` was escaped where it was put in."""
    return Markup(f'<svg class="chart" width="100%" viewBox="0 0 520 {height}" role="img">{"".join(parts)}</svg>')


def _call_rate_chart(rows: list[ToolUsage]) -> Markup | None:
    if not rows:
        return None
    label_width, bar_width = 210, 220
    parts = []
    for i, usage in enumerate(rows):
        y = 5 + i * 20
        width = max(1.0, bar_width * min(usage.call_rate, 1.0))
        color = "#dc2626" if usage.call_rate < 0.1 and usage.injected >= 5 else "#2563eb"
        parts.append(
            f'<text x="0" y="{y + 12}">{escape(usage.tool[:34])}</text>'
            f'<rect class="bar" x="{label_width}" y="{y}" width="{width:.1f}" height="14" fill="{color}">'
            f"<title>{escape(usage.tool)}: {usage.called} calls / {usage.injected} offers</title></rect>"
            f'<text x="{label_width + width + 6:.1f}" y="{y + 12}">{usage.call_rate:.0%} of {usage.injected}</text>'
        )
    return _svg(parts, 20 * len(rows) + 10)


def _daily_chart(daily: list[tuple[str, int, int]]) -> Markup | None:
    if not daily:
        return None
    peak = max(max(r, c) for _, r, c in daily) or 1
    step = 480 / len(daily)
    parts = []
    for i, (day, retrievals, calls) in enumerate(daily):
        x = 30 + i * step
        for offset, value, color in ((0.0, retrievals, "#2563eb"), (step * 0.45, calls, "#16a34a")):
            height = 140 * value / peak
            parts.append(
                f'<rect class="bar" x="{x + offset:.1f}" y="{150 - height:.1f}" width="{step * 0.4:.1f}" '
                f'height="{height:.1f}" fill="{color}"><title>{escape(day)}: {value}</title></rect>'
            )
        if len(daily) <= 14 or i % max(1, len(daily) // 7) == 0:
            parts.append(f'<text x="{x:.1f}" y="165">{escape(day[5:])}</text>')
    parts.append('<text x="30" y="180" fill="#2563eb">searches</text><text x="110" y="180" fill="#16a34a">calls</text>')
    return _svg(parts, 185)


def _histogram_chart(counts: list[int]) -> Markup | None:
    if not any(counts):
        return None
    peak = max(counts)
    width = 460 / len(counts)
    parts = []
    for i, count in enumerate(counts):
        height = 130 * count / peak
        x = 30 + i * width
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{140 - height:.1f}" width="{width - 4:.1f}" height="{height:.1f}" '
            f'fill="#7c3aed"><title>{i / len(counts):.1f}-{(i + 1) / len(counts):.1f}: {count}</title></rect>'
            f'<text x="{x:.1f}" y="155">{i / len(counts):.1f}</text>'
        )
    return _svg(parts, 165)
