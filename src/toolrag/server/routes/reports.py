"""`/reports/health`: per-tool usage and what went wrong, as the token may read the usage log.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from typing import Annotated, Any

from fastapi import APIRouter, Query

from toolrag.monitor.reading import Reading
from toolrag.server.routes.deps import Api, Reader

router = APIRouter(tags=["reports"])


@router.get("/reports/health")
def health_report(who: Reader, api: Api, days: Annotated[int, Query(ge=1, le=3650)] = 30) -> dict[str, Any]:
    """Per-tool usage, dead, unused and low-relevance tools, and the requests behind retrieval misses."""
    return Reading.of(api.registry, who).report(api.registry, days).as_json()
