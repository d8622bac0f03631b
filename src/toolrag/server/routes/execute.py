"""`/execute`: run a tool through the execution gateway, here or where `Served.execute` forwards it.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

import uuid

from fastapi import APIRouter

from toolrag.server.models import ExecuteIn, ExecuteOut
from toolrag.server.routes.deps import AgentRole, Api

router = APIRouter(tags=["agents"])


@router.post("/execute", response_model=ExecuteOut)
async def run_tool(body: ExecuteIn, who: AgentRole, api: Api) -> ExecuteOut:
    """Run a tool through the execution gateway: authorization, name resolution, schema validation, timeout."""
    api.within_rate(who, "call")
    session = who.session(body.session) or uuid.uuid4().hex
    return await api.call(body.name, body.arguments, who.principal, session)
