"""What the API's routes share: the served registry and its companions (`Served`, `Api`: server/served.py), and the
caller the guard authenticated, with the role a route needs.

Dependencies are `async def`: they only read what the guard found, and a plain `def` costs every request a trip
through the thread pool, which under 100 clients was most of an /execute's time.

(No `from __future__ import annotations` here: FastAPI reads the annotations at run time.)"""

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from toolrag.access import Caller, Role
from toolrag.access.guard import CALLER_KEY
from toolrag.server.served import Api

__all__ = ["Admin", "AgentRole", "Api", "Reader", "allowed", "caller"]


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


Reader = Annotated[Caller, Depends(allowed("reader"))]
AgentRole = Annotated[Caller, Depends(allowed("agent"))]
Admin = Annotated[Caller, Depends(allowed("admin"))]
