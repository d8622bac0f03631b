"""The gateway over streamable HTTP: the official SDK's session manager behind toolrag's request guard.

Every request needs a configured principal's bearer token or, with `[oauth]`, an access token of the configured
issuer that one of the principals' rules matches (access/policy.py, access/oauth.py), checked before its body is
read (`access/guard.py`).
Clients of MCP 2025-11-25 open sessions: each principal may hold a bounded number, so one token cannot use up the
server's session table and lock every other client out; idle sessions end after a few minutes. A session can only
be used with the token that opened it (the SDK compares the authenticated user of each request with the session's
owner). Requests of 2026-07-28 open no session (the SDK answers each on its own); the gateway keeps what a caller's
conversation needs itself (mcp/conversations.py), keyed by the caller, never by a session.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolrag.access import Caller
from toolrag.access.guard import CALLER_KEY, Authenticated, RequestGuard, Scope
from toolrag.access.oauth import JwtVerifier, caller_authenticator
from toolrag.mcp.config import GatewayConfig

MCP_PATH = "/mcp"


class PrincipalSessions(StreamableHTTPSessionManager):
    """The SDK's session manager with a limit per principal beside its global one."""

    def __init__(self, app: Server[Any], per_principal: int, **options: Any) -> None:
        super().__init__(app, **options)
        self.per_principal = per_principal

    def sessions_of(self, requestor: AuthorizationContext) -> int:
        return sum(1 for owner in self._session_owners.values() if owner == requestor)

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        if requestor is not None and self.sessions_of(requestor) >= self.per_principal:
            return None  # answered like the global limit: 503, existing sessions unaffected
        return super()._admit_session(requestor)


def http_app(
    server: Server[Any], settings: GatewayConfig, host: str, health: Callable[[Caller], dict[str, Any]] | None = None
) -> tuple[RequestGuard, PrincipalSessions]:
    """The ASGI app `toolrag mcp serve --transport http` runs, and its session manager. `health(caller)`: what
    `GET /health` answers a caller (the upstreams it may use, and their state)."""
    sessions = PrincipalSessions(
        server,
        per_principal=settings.max_sessions_per_principal,
        session_idle_timeout=settings.session_idle_timeout_seconds,
        max_sessions=settings.max_sessions,
        max_request_body_size=settings.http.max_body_bytes,
        security_settings=_local_only(host),
    )
    oauth = settings.oauth
    routes = [Route(MCP_PATH, endpoint=StreamableHTTPASGIApp(sessions)), *(oauth.metadata_routes() if oauth else [])]
    if health is not None:

        async def answer_health(request: Request) -> JSONResponse:
            caller = request.scope.get(CALLER_KEY)
            assert isinstance(caller, Caller)  # the guard let no one else through
            return JSONResponse(health(caller))

        routes.append(Route("/health", answer_health, methods=["GET"]))
    app = Starlette(routes=routes, lifespan=lambda _: sessions.run())
    verifier = JwtVerifier(oauth) if oauth else None
    resolve = caller_authenticator(settings.policy(), verifier)

    async def authenticate(token: str, scope: Scope) -> Authenticated[Caller] | None:
        found = await resolve(token, scope)
        if found is not None:
            # The SDK keys session ownership on the authenticated user: a session answers only the caller that
            # opened it (a refreshed OAuth token of the same issuer and subject keeps it).
            caller = found.who
            owner = hashlib.sha256(caller.key.encode()).hexdigest()
            access = AccessToken(token=owner, client_id=caller.name, scopes=[], subject=owner)
            scope["user"] = AuthenticatedUser(access)
        return found

    challenge = oauth.challenge() if oauth else 'Bearer realm="toolrag"'
    public = frozenset(route.path for route in routes if route.path not in (MCP_PATH, "/health"))
    return RequestGuard(app, authenticate, settings.http, challenge, public_paths=public), sessions


def _local_only(host: str) -> TransportSecuritySettings | None:
    """DNS rebinding protection for a gateway on loopback, as the SDK sets it up for its own apps."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
