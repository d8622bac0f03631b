"""What the API serves, shared by its routes and the console (`Served`, kept in `app.state.api` by `create_app`):
the registry, its metrics and rate limits, and where tools run. Tool calls go through `Served.call` whichever part
makes them: `/execute` for agents, the console for an admin's trial.

Dependencies are `async def`: they only read what the app holds, and a plain `def` costs every request a trip
through the thread pool.

(No `from __future__ import annotations` here: FastAPI reads the annotations at run time.)"""

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import anyio
from fastapi import Depends, HTTPException, Request

from toolrag.access import AccessPolicy, Caller
from toolrag.access.rate_limit import Kind, RateLimiter, retry_after
from toolrag.model import Principal
from toolrag.monitor.schedule import ScheduleHealth
from toolrag.monitor.startup import StartupCheck
from toolrag.registry import ToolRegistry
from toolrag.runtime.gateway import ExecutionPolicy, ToolGateway, permitted_tools
from toolrag.runtime.messages import ToolCall
from toolrag.server.metrics import ApiMetrics
from toolrag.server.models import ExecuteOut, Executor
from toolrag.server.writing import ExampleWriting


@dataclass(frozen=True)
class Served:
    """The registry the API serves and what its routes need besides. `policy`: whom its tokens stand for;
    `writing`: the operator's model's runs writing examples; `execute`: where tools run (None: in this process);
    `startup`: what the check before serving found; `schedule`: how the scheduled jobs' ticks go."""

    registry: ToolRegistry
    metrics: ApiMetrics
    limiter: RateLimiter
    policy: AccessPolicy
    writing: ExampleWriting
    execute: Executor | None = None
    startup: StartupCheck | None = None
    schedule: Callable[[], ScheduleHealth] | None = None

    def within_rate(self, who: Caller, kind: Kind) -> None:
        """429 when the caller's rate of this kind is used up."""
        wait = self.limiter.wait(who.principal, kind)
        if wait > 0:
            self.metrics.rate_limited.labels(kind).inc()
            raise HTTPException(
                429,
                f"rate limit: the {kind} rate for token {who.name!r} is used up; retry in {retry_after(wait)} s",
                headers={"Retry-After": retry_after(wait)},
            )

    async def call(self, name: str, arguments: dict[str, Any], principal: Principal, session: str) -> ExecuteOut:
        """One call for `principal` through the execution gateway, here or where `execute` forwards it (an MCP
        upstream, through the relay), counted in the metrics. The caller's rate is checked before (`within_rate`)."""
        started = time.perf_counter()
        if self.execute is not None:
            result = await self.execute(name, arguments, principal, session)
        else:
            result = await self._call_here(name, arguments, principal, session)
        self.metrics.calls.labels(result.outcome).inc()
        self.metrics.call_seconds.observe(time.perf_counter() - started)
        return result

    async def _call_here(self, name: str, arguments: dict[str, Any], principal: Principal, session: str) -> ExecuteOut:
        registry, policy = self.registry, ExecutionPolicy()
        permitted = await anyio.to_thread.run_sync(permitted_tools, registry, principal, policy.fuzzy_cutoff)
        gateway = ToolGateway(permitted, (), principal, registry.function, policy=policy, events=registry.usage)
        result = await gateway.call(ToolCall(uuid.uuid4().hex, name, json.dumps(arguments)), set(), session)
        return ExecuteOut(outcome=result.outcome, is_error=result.message.is_error, content=result.message.content)


async def served(request: Request) -> Served:
    state: Served = request.app.state.api
    return state


Api = Annotated[Served, Depends(served)]
