"""`/metrics` for Prometheus and `/dashboard` for people.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import HTMLResponse, Response

from toolrag.model import utc_now
from toolrag.monitor.reading import Reading
from toolrag.server.dashboard import render_dashboard
from toolrag.server.routes.deps import Admin, Api, Reader

router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response)
def prometheus(who: Admin, api: Api) -> Response:
    """Process and registry counters across every tenant: admin tokens only."""
    return Response(api.metrics.render(), media_type="text/plain; version=0.0.4")


@router.get("/dashboard", response_class=HTMLResponse)
def dashboard(who: Reader, api: Api, days: Annotated[int, Query(ge=1, le=3650)] = 30) -> HTMLResponse:
    """Registry health for people (the token may also come as `?token=`)."""
    registry = api.registry
    reading = Reading.of(registry, who)  # the console's misses and audit pages read by the same rule
    report = reading.report(registry, days)
    since = utc_now() - timedelta(days=days)
    candidates = {u.tool for u in [*report.dead, *report.low_relevance]}
    usage = registry.store.usage
    offered = {name: usage.requests_for_tool(name, since, audience=reading.audience) for name in candidates}
    weekly = registry.store.usage.job_reports("report", 12) if who.is_admin else []  # every tenant's
    return HTMLResponse(render_dashboard(report, offered, weekly))
