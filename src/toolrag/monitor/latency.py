"""A tool's calls over time, for its console page: per hour or day, how many ran, how many failed, how many were
refused before running, and the latency's median and 95th percentile.

Calls that ran are those the gateway let through (`refused` and `unknown_tool` never reach the tool, and take no
time of its own); of those, every outcome but `ok` is a failure, as in the usage totals (store/usage.py). An
admin's console trials are counted with the rest and also apart (`trials`), so a busy afternoon of trying a tool is
not mistaken for agents' traffic.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from toolrag.store.usage import TimedCall

Period = Literal["hour", "day"]
NOT_RUN = frozenset({"refused", "unknown_tool"})


@dataclass(frozen=True)
class CallFigures:
    """The calls of one period (`start`: its first instant, UTC), or of a whole window."""

    start: datetime
    ran: int
    failed: int
    not_run: int
    trials: int  # console trials among all of them (ran or not)
    p50_ms: float | None  # of the calls that ran; None when none did
    p95_ms: float | None

    @property
    def error_rate(self) -> float:
        return self.failed / self.ran if self.ran else 0.0


def call_figures(calls: Sequence[TimedCall], period: Period) -> list[CallFigures]:
    """One `CallFigures` per period that had a call, oldest first."""
    periods: dict[datetime, list[TimedCall]] = {}
    for call in calls:
        periods.setdefault(_period_start(call.at, period), []).append(call)
    return [figures(start, members) for start, members in sorted(periods.items())]


def figures(start: datetime, calls: Sequence[TimedCall]) -> CallFigures:
    ran = [call for call in calls if call.outcome not in NOT_RUN]
    latencies = sorted(call.latency_ms for call in ran)
    return CallFigures(
        start=start,
        ran=len(ran),
        failed=sum(1 for call in ran if call.outcome != "ok"),
        not_run=len(calls) - len(ran),
        trials=sum(1 for call in calls if call.origin == "console"),
        p50_ms=nearest_rank(latencies, 0.50),
        p95_ms=nearest_rank(latencies, 0.95),
    )


def nearest_rank(ordered: Sequence[float], quantile: float) -> float | None:
    """The nearest-rank percentile of sorted values: the smallest value with at least `quantile` of them at or
    below it (always a latency that was measured, never an interpolation between two)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(quantile * len(ordered)) - 1)]


def _period_start(at: datetime, period: Period) -> datetime:
    hour = at.replace(minute=0, second=0, microsecond=0)
    return hour if period == "hour" else hour.replace(hour=0)
