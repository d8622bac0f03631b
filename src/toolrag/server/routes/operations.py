"""`/metrics` for Prometheus; `/dashboard`, now a page of the console.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import RedirectResponse, Response

from toolrag.server.console import PREFIX as CONSOLE_PREFIX
from toolrag.server.routes.deps import Admin, Api

router = APIRouter(tags=["operations"])


@router.get("/metrics", response_class=Response)
def prometheus(who: Admin, api: Api) -> Response:
    """Process and registry counters across every tenant: admin tokens only."""
    return Response(api.metrics.render(), media_type="text/plain; version=0.0.4")


@router.get("/dashboard", include_in_schema=False)
def dashboard(days: Annotated[int, Query(ge=1, le=3650)] = 30) -> RedirectResponse:
    """The dashboard moved into the console, behind its session (a token in a URL ends up in logs)."""
    return RedirectResponse(f"{CONSOLE_PREFIX}dashboard?days={days}", status_code=303)
