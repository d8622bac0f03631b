"""The gateway over streamable HTTP: the official SDK's session manager behind toolrag's request guard.

Every request needs a configured principal's bearer token or, with `[oauth]`, an access token of the configured
issuer (server/oauth.py), checked before its body is read (`server/guard.py`).
Each principal may hold a bounded number of MCP sessions, so one token cannot use up the server's session table and
lock every other client out; idle sessions end after a few minutes. A session can only be used with the token
that opened it (the SDK compares the authenticated user of each request with the session's owner).
"""

from __future__ import annotations

import hashlib
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser, AuthorizationContext
from mcp.server.auth.provider import AccessToken
from mcp.server.lowlevel import Server
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.routing import Route

from toolrag.mcp.config import GatewayConfig
from toolrag.model import Principal
from toolrag.server.guard import Authenticated, RequestGuard, Scope, TokenTable
from toolrag.server.oauth import JwtVerifier

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


def http_app(server: Server[Any], settings: GatewayConfig, host: str) -> tuple[RequestGuard, PrincipalSessions]:
    """The ASGI app `toolrag mcp serve --transport http` runs, and its session manager."""
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
    app = Starlette(routes=routes, lifespan=lambda _: sessions.run())
    tokens = TokenTable(
        {token: name for name, entry in settings.principals.items() if (token := entry.bearer_token()) is not None}
    )
    verifier = JwtVerifier(oauth) if oauth else None

    def authenticate(token: str, scope: Scope) -> Authenticated[Principal] | None:
        name = tokens.find(token)
        if name is None:
            return _from_access_token(verifier, token, scope) if verifier else None
        # The SDK keys session ownership on the authenticated user: a session answers only the token that opened it.
        digest = hashlib.sha256(token.encode()).hexdigest()
        scope["user"] = AuthenticatedUser(AccessToken(token=digest, client_id=name, scopes=[], subject=name))
        return Authenticated(settings.principals[name].principal(name), name)

    challenge = oauth.challenge() if oauth else 'Bearer realm="toolrag"'
    public = frozenset(route.path for route in routes if route.path != MCP_PATH)
    return RequestGuard(app, authenticate, settings.http, challenge, public_paths=public), sessions


def _from_access_token(verifier: JwtVerifier, token: str, scope: Scope) -> Authenticated[Principal]:
    """The principal of an OAuth access token; its sessions belong to its issuer and subject, so a refreshed
    token keeps them."""
    claims = verifier.verify(token)  # or Refused, which the guard answers
    principal = verifier.principal(claims)
    client = str(claims.get("client_id") or claims.get("azp") or principal.user)
    access = AccessToken(
        token=hashlib.sha256(f"{claims['iss']}|{principal.user}".encode()).hexdigest(),
        client_id=client,
        scopes=sorted(principal.scopes),
        expires_at=int(claims["exp"]),
        subject=principal.user,
        claims={"iss": claims["iss"]},
    )
    scope["user"] = AuthenticatedUser(access)
    return Authenticated(principal, f"oauth:{claims['iss']}|{principal.user}")


def _local_only(host: str) -> TransportSecuritySettings | None:
    """DNS rebinding protection for a gateway on loopback, as the SDK sets it up for its own apps."""
    if host not in ("127.0.0.1", "localhost", "::1"):
        return None
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )
