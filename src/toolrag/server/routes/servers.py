"""`/mcp/servers`: what admins do with one upstream MCP server at a time: review and approve, all at once, what its
changed or new tools wait with; switch it off and on without removing it from the configuration. Each action is
audited with the admin's name; the gateway over this registry hides a disabled server's tools and refuses calls to
them (mcp/switches.py).

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Body, Request

from toolrag.mcp.importer import approve_server, server_quarantined
from toolrag.mcp.switches import disable_server, enable_server, servers_in
from toolrag.server.models import (
    ServerApprovedOut,
    ServerApproveIn,
    ServerPendingOut,
    SwitchIn,
    SwitchOut,
    WaitingToolOut,
)
from toolrag.server.routes.deps import Admin, Api
from toolrag.server.served import Served

router = APIRouter(tags=["mcp"])


@router.get("/mcp/servers/{server}/pending", response_model=ServerPendingOut)
def server_pending(server: str, who: Admin, api: Api) -> ServerPendingOut:
    """The server's quarantined tools with the hash of each text waiting; `pending` is the body `approve` takes.
    404 for a server with no tools in the registry, 409 when none of its tools waits."""
    waiting = server_quarantined(api.registry, server)
    tools = [
        WaitingToolOut(
            tool=pin.tool,
            kind="new" if pin.approved_hash is None else "changed",
            text_hash=str(pin.pending_hash),
            findings=list(pin.findings),
            description=pin.pending.description if pin.pending else "",
        )
        for pin in waiting
    ]
    return ServerPendingOut(server=server, pending={t.tool: t.text_hash for t in tools}, tools=tools)


@router.post("/mcp/servers/{server}/approve", response_model=ServerApprovedOut)
def approve_server_tools(server: str, body: ServerApproveIn, who: Admin, api: Api) -> ServerApprovedOut:
    """Approve every quarantined tool of the server in one transaction, each audited with the token's name. The
    body states what the approver reviewed: 409, nothing approved, when the tools waiting are not exactly those, with
    those text hashes (the server changed one, or listed another, since). 404 for a server with no tools here."""
    approved = approve_server(api.registry, server, body.pending, who.actor)
    return ServerApprovedOut(server=server, approved=approved)


@router.post("/mcp/servers/{server}/disable", response_model=SwitchOut)
def disable(
    server: str, request: Request, who: Admin, api: Api, body: Annotated[SwitchIn | None, Body()] = None
) -> SwitchOut:
    """Switch an upstream off: its tools are listed and found by no one, calls to them are refused, until it is
    enabled. 404 for a server neither configured nor in the registry; `changed: false` when it was off already."""
    reason = body.reason if body else None
    changed = _known(
        server, request, api, lambda known: disable_server(api.registry.store, server, known, who.actor, reason)
    )
    return _switch_out(api, server, changed)


@router.post("/mcp/servers/{server}/enable", response_model=SwitchOut)
def enable(server: str, request: Request, who: Admin, api: Api) -> SwitchOut:
    """Switch an upstream on again: its tools come back at the gateway's next request."""
    changed = _known(server, request, api, lambda known: enable_server(api.registry.store, server, known, who.actor))
    return _switch_out(api, server, changed)


def _known(server: str, request: Request, api: Served, switch: Callable[[set[str]], bool]) -> bool:
    """The switch made with the servers there are (configured upstreams, servers with tools); 404 for another."""
    configured = request.app.state.console.upstream_names()
    return switch(servers_in(api.registry.store, configured))  # ServerNotFoundError: 404 (server/app.py)


def _switch_out(api: Served, server: str, changed: bool) -> SwitchOut:
    switch = next((d for d in api.registry.store.switches.disabled() if d.server == server), None)
    if switch is None:
        return SwitchOut(server=server, disabled=False, changed=changed)
    return SwitchOut(
        server=server,
        disabled=True,
        changed=changed,
        disabled_by=switch.disabled_by,
        disabled_at=switch.disabled_at,
        reason=switch.reason,
    )
