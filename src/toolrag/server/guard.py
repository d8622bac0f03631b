"""What stands between the network and toolrag's HTTP servers (the API and the MCP gateway).

A request is authenticated from its headers before any of its body is read, its body is bounded in size and in
time, and one principal cannot hold more than its share of requests in flight. Below the application, the
connection itself is bounded: a client that does not finish sending a request head in time is disconnected, and
connections beyond the limit are closed as they are accepted.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import anyio
import h11
from pydantic import BaseModel, ConfigDict, Field
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolrag.errors import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Who = TypeVar("Who")

CALLER_KEY = "toolrag.caller"  # where the guard leaves the authenticated caller in the ASGI scope


class HttpLimits(BaseModel):
    """`[http]` in the API's and the gateway's configuration."""

    model_config = ConfigDict(extra="forbid")

    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="larger request bodies get 413")
    header_timeout_seconds: float = Field(default=10.0, gt=0, description="to send a whole request head")
    body_timeout_seconds: float = Field(default=30.0, gt=0, description="to send a whole request body")
    keep_alive_seconds: int = Field(default=75, ge=1, description="an idle client connection stays open this long")
    max_connections: int = Field(default=2000, ge=1, description="open connections at most; more are closed")
    max_connections_per_source: int = Field(
        default=256,
        ge=1,
        description="open connections from one address at most, so one client cannot hold the whole server (behind a"
        " reverse proxy, every client is the proxy's address: raise it to max_connections there)",
    )
    max_requests_per_principal: int = Field(
        default=128, ge=1, description="requests of one principal in flight at once; more get 429"
    )


@dataclass(frozen=True)
class Authenticated(Generic[Who]):
    """Who a request comes from, and the key its in-flight requests are counted under."""

    who: Who
    key: str


class Refused(Exception):
    """What an authenticator raises to refuse a token with its own status and challenge (OAuth's invalid_token,
    insufficient_scope) rather than the guard's plain 401."""

    def __init__(self, status: int, detail: str, challenge: str) -> None:
        super().__init__(detail)
        self.status, self.detail, self.challenge = status, detail, challenge


# (token from the Authorization header, or from `?token=` where allowed; the request's scope) -> caller or None.
# Asynchronous: checking a token may wait for an issuer's keys, which must not hold up other requests.
Authenticator = Callable[[str, Scope], Awaitable[Authenticated[Any] | None]]


@dataclass(frozen=True)
class ConsoleCookie:
    """The console's pages (below `prefix`) authenticate with a session cookie holding the bearer token the person
    signed in with; a page asked for without a valid one redirects to `login`."""

    prefix: str
    login: str
    cookie: str

    def covers(self, scope: Scope) -> bool:
        return str(scope.get("path", "")).startswith(self.prefix)

    async def to_login(self, send: Send) -> None:
        expired = f"{self.cookie}=; Path={self.prefix}; Max-Age=0; HttpOnly; SameSite=Strict".encode()
        headers = [(b"location", self.login.encode()), (b"set-cookie", expired), (b"cache-control", b"no-store")]
        await send({"type": "http.response.start", "status": 303, "headers": headers})
        await send({"type": "http.response.body", "body": b""})


def cookie_value(scope: Scope, name: str) -> str | None:
    """The value of cookie `name` in the request's Cookie headers."""
    for header, value in scope.get("headers", []):
        if header == b"cookie":
            for pair in value.decode("latin-1").split(";"):
                key, _, found = pair.strip().partition("=")
                if key == name and found:
                    return str(found)
    return None


def bearer_token(scope: Scope, query_token_paths: frozenset[str] = frozenset()) -> str | None:
    """The bearer token of a request: from its Authorization header, or (only for a GET of one of
    `query_token_paths`, such as a page a browser opens) from a `token` query parameter."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                return text[7:].strip() or None
            return None
    if scope.get("method") == "GET" and scope.get("path") in query_token_paths:
        for pair in scope.get("query_string", b"").decode("latin-1").split("&"):
            key, _, value = pair.partition("=")
            if key == "token" and value:
                from urllib.parse import unquote

                return unquote(value)
    return None


class RequestGuard:
    """ASGI middleware in front of an HTTP app: authentication first, then bounded bodies and fair sharing.

    `authenticate` turns a token into a caller (None: refused with 401 and `challenge` as WWW-Authenticate); the
    caller is left in `scope[CALLER_KEY]` for the app. Paths in `public_paths` need no token."""

    def __init__(
        self,
        app: ASGIApp,
        authenticate: Authenticator,
        limits: HttpLimits,
        challenge: str = 'Bearer realm="toolrag"',
        query_token_paths: frozenset[str] = frozenset(),
        public_paths: frozenset[str] = frozenset(),
        console: ConsoleCookie | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.limits = limits
        self.challenge = challenge
        self.query_token_paths = query_token_paths
        self.public_paths = public_paths
        self.console = console
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope.get("path") in self.public_paths:
            await self._pass(scope, receive, send)
            return
        token = bearer_token(scope, self.query_token_paths)
        page = self.console if self.console is not None and self.console.covers(scope) else None
        if token is None and page is not None:
            token = cookie_value(scope, page.cookie)
        try:
            caller = await self.authenticate(token, scope) if token else None
        except Refused as refusal:
            if page is not None:  # an expired or revoked session: sign in again
                await page.to_login(send)
                return
            await _respond(send, refusal.status, refusal.detail, [(b"www-authenticate", refusal.challenge.encode())])
            return
        if caller is None and page is not None:
            await page.to_login(send)
            return
        if caller is None:
            reason = "missing bearer token" if token is None else "unknown bearer token"
            await _respond(send, 401, reason, [(b"www-authenticate", self.challenge.encode())])
            return
        if self.in_flight[caller.key] >= self.limits.max_requests_per_principal:
            await _respond(send, 429, "too many requests in flight for this token", [(b"retry-after", b"1")])
            return
        scope[CALLER_KEY] = caller.who
        self.in_flight[caller.key] += 1
        try:
            await self._pass(scope, receive, send)
        finally:
            self.in_flight[caller.key] -= 1
            if self.in_flight[caller.key] <= 0:
                del self.in_flight[caller.key]

    async def _pass(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Read the (bounded) body, then run the app on it: the app never waits on a slow or endless body."""
        declared = _content_length(scope)
        if declared is not None and declared > self.limits.max_body_bytes:
            await _respond(send, 413, f"request body over {self.limits.max_body_bytes} bytes")
            return
        try:
            body = await read_body(receive, self.limits)
        except _BodyRefused as refusal:
            await _respond(send, refusal.status, str(refusal))
            return
        await self.app(scope, _replay(body, receive), send)


class _BodyRefused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def read_body(receive: Receive, limits: HttpLimits) -> bytes:
    """The whole request body, refused (413, 408) when larger than the limit or slower than the body timeout."""
    parts: list[bytes] = []
    size = 0
    try:
        with anyio.fail_after(limits.body_timeout_seconds):
            while True:
                message = await receive()
                if message["type"] != "http.request":
                    raise _BodyRefused(400, "the client went away")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limits.max_body_bytes:
                    raise _BodyRefused(413, f"request body over {limits.max_body_bytes} bytes")
                parts.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(parts)
    except TimeoutError:
        raise _BodyRefused(408, "request body not received in time") from None


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` that hands out the body read ahead, then waits on the connection (for its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _respond(send: Send, status: int, reason: str, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"detail": reason}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def guarded_protocol(limits: HttpLimits) -> type[H11Protocol]:
    """uvicorn's HTTP/1.1 protocol, bounded: a connection must send each request head within the header timeout
    (counted from when it opens, or from the first byte of a later head: idle kept-alive connections are closed
    by uvicorn's keep-alive timeout), and connections past the limits (in all, and from one address) are closed as
    they are accepted."""
    per_source: Counter[str] = Counter()  # open connections by client address, for this server

    class GuardedH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _source: str | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            peer = transport.get_extra_info("peername")
            source = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
            if (
                per_source[source] >= limits.max_connections_per_source
                or len(self.connections) > limits.max_connections
            ):
                transport.close()
                return
            self._source = source
            per_source[source] += 1
            self._await_head()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:
                self._cancel_head_timer()  # the head arrived: the body has its own timeout
            elif self._head_timer is None and not self.transport.is_closing():
                self._await_head()  # part of the next head on a kept-alive connection

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_timer()
            if self._source is not None:
                per_source[self._source] -= 1
                if per_source[self._source] <= 0:
                    del per_source[self._source]
                self._source = None
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._cancel_head_timer()
            self._head_timer = self.loop.call_later(limits.header_timeout_seconds, self._head_timed_out)

        def _cancel_head_timer(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol


def server_config(app: ASGIApp, host: str, port: int, limits: HttpLimits) -> Any:
    """The uvicorn configuration every toolrag HTTP server runs with: the bounded protocol and its timeouts."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        http=guarded_protocol(limits),
        # A short keep-alive makes a busy client's next request race the server closing the connection, which the
        # client sees as a reset (measured at 500 concurrent clients, docs/reliability.md).
        timeout_keep_alive=limits.keep_alive_seconds,
        lifespan="auto",
    )


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound before anything is announced or started: a port in use is one clear error, not a
    URL printed for a server that never runs."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a restart need not wait for TIME_WAIT
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc)
        raise ConfigError(f"cannot listen on {host}:{port}: {reason} (choose another --port)") from None
    sock.set_inheritable(True)
    return sock
