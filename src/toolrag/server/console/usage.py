"""The console's pages of what went wrong and what happened: misses, upstreams, the audit trail, the dashboard.
Each reads the usage log by the rule `/reports/health` reads it for the same caller (`Reading`).

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

import json
from datetime import timedelta
from typing import Annotated, get_args

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse

from toolrag.access import Caller
from toolrag.events import Outcome
from toolrag.model import utc_now
from toolrag.monitor.reading import ANSWERED, Reading
from toolrag.server.console.common import Console, ConsoleState, Who
from toolrag.server.console.dashboard import dashboard_context

router = APIRouter()


@router.get("/misses")
def misses(
    request: Request, console: Console, who: Who, days: Annotated[int, Query(ge=1, le=365)] = 30
) -> HTMLResponse:
    registry = console.registry
    since = utc_now() - timedelta(days=days)
    usage = registry.store.usage
    reading = Reading.of(registry, who)  # what /reports/health shows this caller, and nothing more
    mine = reading.audience
    no_tool = [e for e in usage.recent_requests(since, 200, mine) if not e.tools][:50]
    report = reading.report(registry, days)
    low = [(u, usage.requests_for_tool(u.tool, since, 5, mine)) for u in report.low_relevance]
    unshortlisted = reading.unshortlisted(usage, since, 50)
    return console.page(request, "misses.html", no_tool=no_tool, low=low, unshortlisted=unshortlisted, days=days)


@router.get("/upstreams")
def upstreams_page(request: Request, console: Console, who: Who) -> HTMLResponse:
    return upstreams_view(request, console, who)


def upstreams_view(
    request: Request, console: ConsoleState, who: Caller, status: int = 200, error: str | None = None
) -> HTMLResponse:
    """The upstreams page as `who` may see it; `error`: why the admin's last decision on it was not made."""
    # Anyone but an admin is shown the upstreams it uses, only their tools it could use counted (as /health).
    states = console.upstreams(None if who.is_admin else who.principal) if console.upstreams else []
    pins = console.registry.store.pins() if who.is_admin else []
    disabled = console.registry.disabled_servers_seen(who.principal, who.is_admin)
    # Per server, what an "approve all" form posts back: the text hashes this page shows (compared at the write).
    waiting: dict[str, dict[str, str]] = {}
    for pin in pins:
        if pin.quarantined:
            waiting.setdefault(pin.server, {})[pin.tool] = str(pin.pending_hash)
    waiting = dict(sorted(waiting.items()))
    reviewed = {server: json.dumps(pending) for server, pending in waiting.items()}
    context = {"states": states, "pins": pins, "disabled": disabled, "waiting": waiting, "reviewed": reviewed}
    return console.page(request, "upstreams.html", status, error=error, **context)


@router.get("/audit")
def audit(
    request: Request,
    console: Console,
    who: Who,
    principal: Annotated[str, Query(max_length=200)] = "",
    tool: Annotated[str, Query(max_length=200)] = "",
    outcome: Annotated[str, Query(max_length=40)] = "",
    days: Annotated[int, Query(ge=1, le=365)] = 30,
) -> HTMLResponse:
    registry = console.registry
    since = utc_now() - timedelta(days=days)
    reading = Reading.of(registry, who)  # calls of tools it may use, answered as their callers were
    calls = reading.calls(registry.store.usage, since, 200, principal or None, tool or None, outcome or None)
    changes = registry.store.audit_log(200, tool or None) if who.is_admin else []
    filters = {"principal": principal, "tool": tool, "outcome": outcome, "days": days}
    # The outcomes the filter can match, as this caller is shown them (a reader never sees `refused`).
    outcomes = [o for o in get_args(Outcome) if who.is_admin or o not in ANSWERED]
    return console.page(request, "audit.html", calls=calls, changes=changes, filters=filters, outcomes=outcomes)


@router.get("/dashboard")
def dashboard(
    request: Request, console: Console, who: Who, days: Annotated[int, Query(ge=1, le=3650)] = 30
) -> HTMLResponse:
    """Registry health for people: what to rewrite, what found nothing, week to week (operators)."""
    registry = console.registry
    reading = Reading.of(registry, who)
    report = reading.report(registry, days)
    since = utc_now() - timedelta(days=days)
    usage = registry.store.usage
    candidates = {u.tool for u in [*report.dead, *report.low_relevance]}
    offered = {name: usage.requests_for_tool(name, since, audience=reading.audience) for name in candidates}
    weekly = registry.store.jobs.job_reports("report", 12) if who.is_admin else []  # every tenant's figures
    return console.page(request, "dashboard.html", days=days, **dashboard_context(report, offered, weekly))
