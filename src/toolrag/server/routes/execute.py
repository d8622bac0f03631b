"""`/execute`: run a tool through the execution gateway, here or where `Served.execute` forwards it.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

import json
import time
import uuid

import anyio
from fastapi import APIRouter

from toolrag.model import Principal
from toolrag.registry import ToolRegistry
from toolrag.runtime.gateway import ExecutionPolicy, ToolGateway, permitted_tools
from toolrag.runtime.messages import ToolCall
from toolrag.server.models import ExecuteIn, ExecuteOut
from toolrag.server.routes.deps import AgentRole, Api

router = APIRouter(tags=["agents"])


@router.post("/execute", response_model=ExecuteOut)
async def run_tool(body: ExecuteIn, who: AgentRole, api: Api) -> ExecuteOut:
    """Run a tool through the execution gateway: authorization, name resolution, schema validation, timeout."""
    api.within_rate(who, "call")
    started = time.perf_counter()
    session = who.session(body.session) or uuid.uuid4().hex
    if api.execute is not None:
        result = await api.execute(body.name, body.arguments, who.principal, session)
    else:
        result = await _execute_here(api.registry, body, who.principal, session)
    api.metrics.calls.labels(result.outcome).inc()
    api.metrics.call_seconds.observe(time.perf_counter() - started)
    return result


async def _execute_here(registry: ToolRegistry, body: ExecuteIn, principal: Principal, session: str) -> ExecuteOut:
    policy = ExecutionPolicy()
    permitted = await anyio.to_thread.run_sync(permitted_tools, registry, principal, policy.fuzzy_cutoff)
    gateway = ToolGateway(permitted, (), principal, registry.function, policy=policy, events=registry.usage)
    result = await gateway.call(ToolCall(uuid.uuid4().hex, body.name, json.dumps(body.arguments)), set(), session)
    return ExecuteOut(outcome=result.outcome, is_error=result.message.is_error, content=result.message.content)
