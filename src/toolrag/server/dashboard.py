"""The dashboard: one server-rendered page with SVG charts (no script, no CDN: it works offline and in audits).

It answers the questions of a person deciding which descriptions to rewrite: which tools are offered but not
called, which are far from the requests they serve, which are never offered, and which requests found nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from toolrag.monitor.report import HealthReport
from toolrag.store.usage import JobReport, ToolUsage

_STYLE = """
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2430}
header{background:#1d2430;color:#fff;padding:14px 24px}header h1{margin:0;font-size:20px}
main{padding:16px 24px;display:grid;gap:16px;grid-template-columns:repeat(auto-fit,minmax(460px,1fr))}
section{background:#fff;border-radius:8px;padding:14px 18px;box-shadow:0 1px 2px #0002}
h2{font-size:15px;margin:0 0 10px}.cards{display:flex;gap:12px;flex-wrap:wrap;grid-column:1/-1}
.card{background:#fff;border-radius:8px;padding:10px 16px;box-shadow:0 1px 2px #0002;min-width:130px}
.card b{display:block;font-size:22px}.muted{color:#6b7280}table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:4px 6px;border-bottom:1px solid #eee;vertical-align:top}th{font-weight:600}
svg text{font-size:11px;fill:#374151}.bad{color:#b91c1c}.wide{grid-column:1/-1}
"""


def render_dashboard(
    report: HealthReport,
    offered_for: dict[str, list[tuple[str | None, float]]],
    weekly: Sequence[JobReport] = (),
) -> str:
    """The page. `offered_for`: recent requests each rewrite candidate was offered for, with its relevance;
    `weekly`: the stored reports of the scheduled job, newest first (the trend; operators only)."""
    totals = report.totals
    no_tool_rate = totals.no_tool / totals.retrievals if totals.retrievals else 0.0
    cards = [
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
    days = (report.until - report.since).days
    busiest = sorted(report.tools, key=lambda u: -u.injected)[:15]
    body = [
        '<div class="cards">'
        + "".join(
            f'<div class="card" data-card="{escape(k)}"><b>{escape(str(v))}</b>{escape(k)}</div>' for k, v in cards
        )
        + "</div>",
        _section("Call rate per tool (most offered first)", _call_rate_chart(busiest), "call-rate"),
        _section("Searches and calls per day", _daily_chart(report.daily), "daily"),
        _section(
            "Relevance of offered tools (request-tool cosine)",
            _histogram_chart(report.relevance_histogram),
            "relevance",
        ),
        _section(
            "Rewrite candidates: dead and low-relevance tools",
            _rewrite_table(report, offered_for),
            "rewrite",
            wide=True,
        ),
        _section("Requests that found no tool", _requests_table(report, "no_tool"), "no-tool"),
        _section(
            "Requests found only on a second chance (expanded, relaxed, rewritten)",
            _requests_table(report, "reformulated"),
            "reformulated",
        ),
        _section(
            "Calls to tools that were not in the shortlist", _requests_table(report, "unshortlisted_call"), "misses"
        ),
        _section("Sessions that searched again", _requests_table(report, "repeated_search"), "repeated"),
        _section("Unused tools (never offered nor called)", _list(report.unused), "unused"),
    ]
    if weekly:
        body.append(_section("Week to week (the scheduled reports)", _trend_table(weekly), "trend", wide=True))
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>toolrag dashboard</title>"
        f"<style>{_STYLE}</style></head><body><header><h1>toolrag registry health</h1>"
        f"<span class='muted'>last {days} days, until {report.until:%Y-%m-%d %H:%M} UTC</span></header>"
        f"<main>{''.join(body)}</main></body></html>"
    )


def _trend_table(weekly: Sequence[JobReport]) -> str:
    rows = "".join(
        f"<tr><td>{run.at:%Y-%m-%d}</td><td>{escape(str(run.body.get('searches', '')))}</td>"
        f"<td>{float(run.body.get('no_tool_rate', 0.0)):.1%}</td><td>{escape(str(run.body.get('calls', '')))}</td>"
        + "".join(f"<td>{len(run.body.get(key, []))}</td>" for key in ("dead", "unused", "low_relevance"))
        + "</tr>"
        for run in weekly
        if not run.body.get("failed")
    )
    head = "<tr><th>week of</th><th>searches</th><th>no tool</th><th>calls</th><th>dead</th><th>unused</th>"
    return f"<table>{head}<th>low relevance</th></tr>{rows}</table>"


def _section(title: str, content: str, key: str, wide: bool = False) -> str:
    classes = ' class="wide"' if wide else ""
    return f'<section id="{key}"{classes}><h2>{escape(title)}</h2>{content}</section>'


def _call_rate_chart(rows: list[ToolUsage]) -> str:
    if not rows:
        return "<p class='muted'>No searches yet.</p>"
    height, label_width, bar_width = 20 * len(rows) + 10, 210, 220
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
    return f'<svg class="chart" width="100%" viewBox="0 0 520 {height}" role="img">{"".join(parts)}</svg>'


def _daily_chart(daily: list[tuple[str, int, int]]) -> str:
    if not daily:
        return "<p class='muted'>No activity yet.</p>"
    peak = max(max(r, c) for _, r, c in daily) or 1
    step = 480 / len(daily)
    parts = []
    for i, (day, retrievals, calls) in enumerate(daily):
        x = 30 + i * step
        for offset, value, color in ((0.0, retrievals, "#2563eb"), (step * 0.45, calls, "#16a34a")):
            height = 140 * value / peak
            parts.append(
                f'<rect class="bar" x="{x + offset:.1f}" y="{150 - height:.1f}" width="{step * 0.4:.1f}" '
                f'height="{height:.1f}" fill="{color}"><title>{day}: {value}</title></rect>'
            )
        if len(daily) <= 14 or i % max(1, len(daily) // 7) == 0:
            parts.append(f'<text x="{x:.1f}" y="165">{day[5:]}</text>')
    legend = '<text x="30" y="180" fill="#2563eb">searches</text><text x="110" y="180" fill="#16a34a">calls</text>'
    return f'<svg class="chart" width="100%" viewBox="0 0 520 185" role="img">{"".join(parts)}{legend}</svg>'


def _histogram_chart(counts: list[int]) -> str:
    if not any(counts):
        return "<p class='muted'>No offered tools yet.</p>"
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
    return f'<svg class="chart" width="100%" viewBox="0 0 520 165" role="img">{"".join(parts)}</svg>'


def _rewrite_table(report: HealthReport, offered_for: dict[str, list[tuple[str | None, float]]]) -> str:
    candidates: dict[str, tuple[ToolUsage, str]] = {}
    for usage in report.dead:
        candidates[usage.tool] = (usage, "offered often, rarely called")
    for usage in report.low_relevance:
        reason = candidates[usage.tool][1] + "; " if usage.tool in candidates else ""
        candidates[usage.tool] = (usage, reason + "far from the requests it serves")
    if not candidates:
        return "<p class='muted'>No tool needs rewriting.</p>"
    rows = []
    for name, (usage, reason) in candidates.items():
        requests = "<br>".join(
            f"{escape(text or '(no request text)')} <span class='muted'>({relevance:.2f})</span>"
            for text, relevance in offered_for.get(name, [])
        )
        rows.append(
            f"<tr><td><b>{escape(name)}</b></td><td class='bad'>{escape(reason)}</td><td>{usage.call_rate:.0%}</td>"
            f"<td>{'' if usage.mean_score is None else f'{usage.mean_score:.2f}'}</td><td>{requests}</td></tr>"
        )
    header = "<tr><th>tool</th><th>why</th><th>call rate</th><th>mean relevance</th><th>offered for</th></tr>"
    return f"<table>{header}{''.join(rows)}</table>"


def _requests_table(report: HealthReport, kind: Any) -> str:
    samples = report.misses.get(kind, [])
    if not samples:
        return "<p class='muted'>None.</p>"
    rows = "".join(
        f"<tr><td>{s.at:%m-%d %H:%M}</td><td>{escape(s.request or '(no request text)')}</td>"
        f"<td>{escape(s.detail)}</td></tr>"
        for s in samples
    )
    return f"<table><tr><th>when</th><th>request</th><th>detail</th></tr>{rows}</table>"


def _list(names: list[str]) -> str:
    if not names:
        return "<p class='muted'>None.</p>"
    shown = ", ".join(escape(n) for n in names[:60])
    more = f" <span class='muted'>and {len(names) - 60} more</span>" if len(names) > 60 else ""
    return f"<p>{shown}{more}</p>"
