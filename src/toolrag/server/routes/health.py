"""`/health`: is the server up, what it serves, and how its start and its scheduled jobs went.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from fastapi import APIRouter

from toolrag.access import Caller
from toolrag.monitor.startup import StartupCheck
from toolrag.server.models import Health, ScheduleOut, StartupOut
from toolrag.server.routes.deps import Api, Reader

router = APIRouter(tags=["operations"])


@router.get("/health", response_model=Health)
def health(who: Reader, api: Api) -> Health:
    # Admins read the registry's figures; any other token the count of the tools its principal may use.
    registry = api.registry
    model = registry.store.index_model()
    ticks = ScheduleOut.model_validate(api.schedule().shown(who.is_admin)) if api.schedule else None
    tools = registry.snapshot().live_count if who.is_admin else len(registry.visible_tools(who.principal))
    return Health(
        status="ok",
        tools=tools,
        generation=registry.generation if who.is_admin else None,
        model=model and model.model_id,
        startup=_startup_out(api.startup, who),
        schedule=ticks,
    )


def _startup_out(startup: StartupCheck | None, who: Caller) -> StartupOut | None:
    if startup is None:
        return None
    orphans = [f"{f.tools[0]}: {f.detail}" for f in startup.orphans] if who.is_admin else []
    return StartupOut(
        checked_at=startup.checked_at,
        ok=startup.ok,
        missing_embeddings=len(startup.missing_embeddings),
        repaired=startup.repaired,
        orphans=orphans,
    )
