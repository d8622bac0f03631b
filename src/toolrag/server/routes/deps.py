"""What the API's routes share: the served registry and its companions (`Served`, kept in `app.state.api` by
`create_app`), and the caller the guard authenticated, with the role a route needs.

Dependencies are `async def`: they only read what the guard found, and a plain `def` costs every request a trip
through the thread pool, which under 100 clients was most of an /execute's time.

(No `from __future__ import annotations` here: FastAPI reads the annotations at run time.)"""

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from toolrag.access import AccessPolicy, Caller, Role
from toolrag.access.guard import CALLER_KEY
from toolrag.access.rate_limit import Kind, RateLimiter, retry_after
from toolrag.monitor.schedule import ScheduleHealth
from toolrag.monitor.startup import StartupCheck
from toolrag.registry import ToolRegistry
from toolrag.server.metrics import ApiMetrics
from toolrag.server.models import Executor


@dataclass(frozen=True)
class Served:
    """The registry the API serves and what its routes need besides. `policy`: whom its tokens stand for;
    `execute`: where tools run (None: in this process); `startup`: what the check before serving found; `schedule`:
    how the scheduled jobs' ticks go."""

    registry: ToolRegistry
    metrics: ApiMetrics
    limiter: RateLimiter
    policy: AccessPolicy
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


async def served(request: Request) -> Served:
    state: Served = request.app.state.api
    return state


bearer = HTTPBearer(auto_error=False)  # describes the scheme in the OpenAPI document; the guard checks it


async def caller(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Caller:
    who = request.scope.get(CALLER_KEY)
    if not isinstance(who, Caller):  # the guard answers 401 before a route runs
        raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
    return who


def allowed(role: Role) -> Callable[[Caller], Awaitable[Caller]]:
    async def check(who: Annotated[Caller, Depends(caller)]) -> Caller:
        if not who.may(role):
            raise HTTPException(403, f"token {who.name!r} is {who.role}; this needs {role}")
        return who

    return check


Api = Annotated[Served, Depends(served)]
Reader = Annotated[Caller, Depends(allowed("reader"))]
AgentRole = Annotated[Caller, Depends(allowed("agent"))]
Admin = Annotated[Caller, Depends(allowed("admin"))]
