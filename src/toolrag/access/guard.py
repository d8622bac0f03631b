"""What stands between the network and toolrag's HTTP servers (the API and the MCP gateway).

A request is authenticated from its headers before any of its body is read, its body is bounded in size and in
time, and one principal cannot hold more than its share of requests in flight. Failed authentications are limited
on every way in (bearer header, the console's cookie and sign-in form) per client address and per
credential: past the limit, a credential not seen to work lately is refused (429) without being checked, while one
that did (the operator's own token behind the same address) still gets in. Below the application, the
connection itself is bounded: a client that does not finish sending a request head in time is disconnected, and
connections beyond the limit are closed as they are accepted (per client: behind a trusted proxy, per the client each
request names).

Connections are shared among sources (client addresses, `address_bucket`) by one rule: a source may hold up to
`max_connections_per_source`, but once the server holds the share of `max_connections` not reserved for small
sources (`reserved_for_small_sources`), a source gets a further connection only while it holds fewer than
`small_source_connections`. Whatever few sources hold, the reserve minus their own small shares stays open to the
others: nine sources at the per-source cap cannot lock a tenth out, only enough sources to fill the reserve with
small shares can.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import json
import socket
import time
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import anyio
import h11
from pydantic import BaseModel, ConfigDict, Field, field_validator
from uvicorn.protocols.http.h11_impl import H11Protocol

from toolrag.errors import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]
Who = TypeVar("Who")

CALLER_KEY = "toolrag.caller"  # where the guard leaves the authenticated caller in the ASGI scope
# The connection a request came on (`GuardedConnection`, from guarded_protocol), which the guard tells who it serves.
CONNECTION_KEY = "toolrag.connection"


class GuardedConnection(Protocol):
    def admit(self, client: str) -> bool:
        """A request of `client` (as `client_address` reads it) arrived on the connection: False when the client
        already holds its share of connections."""

    def authenticated(self) -> None:
        """A request on the connection authenticated."""


class HttpLimits(BaseModel):
    """`[http]` in the API's and the gateway's configuration."""

    model_config = ConfigDict(extra="forbid")

    max_body_bytes: int = Field(default=1_048_576, ge=1024, description="larger request bodies get 413")
    header_timeout_seconds: float = Field(default=10.0, gt=0, description="to send a whole request head")
    body_timeout_seconds: float = Field(default=30.0, gt=0, description="to send a whole request body")
    keep_alive_seconds: int = Field(default=75, ge=1, description="an idle client connection stays open this long")
    anonymous_keep_alive_seconds: int = Field(
        default=5, ge=1, description="how long an idle connection on which no request authenticated stays open"
    )
    reserved_for_authenticated: float = Field(
        default=0.25,
        ge=0,
        lt=1,
        description="the share of max_connections kept for connections that authenticated: past the rest, an idle"
        " unauthenticated connection is closed to make room, or the new one serves one request unless it"
        " authenticates",
    )
    max_connections: int = Field(default=2000, ge=1, description="open connections at most; more are closed")
    max_connections_per_source: int = Field(
        default=256,
        ge=1,
        description="open connections from one address (an IPv6 /64) at most, so one client cannot hold the whole"
        " server; a trusted proxy's connections count against the client of each request on them",
    )
    reserved_for_small_sources: float = Field(
        default=0.25,
        ge=0,
        lt=1,
        description="the share of max_connections kept for sources holding few connections: past the rest, a source"
        " gets a further connection only while it holds fewer than small_source_connections, so a few sources at"
        " max_connections_per_source cannot take every connection (0: no reserve, for a server whose clients all"
        " come through one address)",
    )
    small_source_connections: int = Field(
        default=16, ge=1, description="the connections of a source that may use the share reserved for small sources"
    )
    max_requests_per_principal: int = Field(
        default=128, ge=1, description="requests of one principal in flight at once; more get 429"
    )
    failed_auth_per_address: int = Field(
        default=10, ge=1, description="failed authentications a minute from one client address before it gets 429"
    )
    failed_auth_per_credential: int = Field(
        default=5, ge=1, description="failures a minute of one token or session cookie before it is refused unchecked"
    )
    trusted_proxies: list[str] = Field(
        default_factory=list,
        description="addresses or networks of TLS-terminating reverse proxies (a proxy on this host: 127.0.0.1):"
        " from them, X-Forwarded-For names the client (the address failed sign-ins are counted by) and"
        " X-Forwarded-Proto: https makes the console's cookie Secure; from anyone else both are ignored",
    )

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry)  # strict: uvicorn would silently ignore 10.0.0.1/8
            except ValueError as exc:
                raise ValueError(f"trusted_proxies: {entry!r} is not an IP address or network ({exc})") from None
        return value


def client_address(scope: Scope) -> str:
    """Who a request comes from: the peer, or behind a trusted proxy the client it names (uvicorn rewrites the
    scope from X-Forwarded-For for `trusted_proxies` only, see `server_config`)."""
    peer = scope.get("client")
    return str(peer[0]) if peer else "unknown"


def address_bucket(address: str) -> str:
    """What an address is counted as, for failed authentications and connections: an IPv4 address as itself (and an
    IPv4-mapped IPv6 one as that IPv4 address); an IPv6 address as its /64, the smallest allocation a subscriber gets,
    whose 2^64 addresses would otherwise be as many clients; anything else (a Unix socket, "unknown") as it is."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((int(ip), 64), strict=False))
    return str(ip)


class FailureLimiter:
    """Failed authentications per client address (`address_bucket`: an IPv6 /64 is one) and per credential over the
    last minute.

    Every credential presented is checked, whatever its address's failures: a static token has at least 16
    characters (guessing one is hopeless at any rate) and an access token a signature, so checking costs a
    constant-time lookup or a signature check, and a guesser sharing an address with an operator (a NAT, a proxy)
    never locks the operator out. What the limits change is the answer to failures: past an address's limit, or a
    credential's own, a failure is answered 429 with Retry-After instead of 401; and a credential past its own
    limit is refused unchecked (a client retrying a revoked token costs nothing)."""

    WINDOW = 60.0
    MAX_KEYS = 20_000  # memory stays bounded whatever the number of addresses and credentials

    def __init__(self, limits: HttpLimits, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_address, self.per_credential = limits.failed_auth_per_address, limits.failed_auth_per_credential
        self.clock = clock
        self._failures: OrderedDict[str, list[float]] = OrderedDict()

    def retry_after(self, credential: str) -> float:
        """0 when the credential may be checked now; else the seconds until it may (it failed too often itself)."""
        return self._wait(_credential_key(credential), self.per_credential, self.clock())

    def failed(self, address: str, credential: str) -> float:
        """Count a failed check; returns 0 when it is answered as a failure (401), else the seconds to wait (429):
        the address or the credential had used up its failures before this one."""
        now = self.clock()
        bucket = f"a:{address_bucket(address)}"
        names = ((bucket, self.per_address), (_credential_key(credential), self.per_credential))
        wait = max(self._wait(name, limit, now) for name, limit in names)
        for name, _ in names:
            self._failures.setdefault(name, []).append(now)
            self._failures.move_to_end(name)
        while len(self._failures) > self.MAX_KEYS:
            self._failures.popitem(last=False)
        return wait

    def _wait(self, name: str, limit: int, now: float) -> float:
        recent = [at for at in self._failures.get(name, []) if now - at < self.WINDOW]
        if recent:
            self._failures[name] = recent[-limit:]
        else:
            self._failures.pop(name, None)
        return self.WINDOW - (now - recent[-limit]) if len(recent) >= limit else 0.0


def _credential_key(credential: str) -> str:
    """Credentials are kept as hashes only."""
    return "c:" + hashlib.sha256(credential.encode("utf-8", "replace")).hexdigest()


async def _too_many_failures(send: Send, wait: float) -> None:
    retry = str(max(1, round(wait))).encode()
    await _respond(send, 429, "too many failed authentications: wait a minute", [(b"retry-after", retry)])


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


# (token from the Authorization header or a console session; the request's scope) -> caller or None.
# Asynchronous: checking a token may wait for an issuer's keys, which must not hold up other requests.
Authenticator = Callable[[str, Scope], Awaitable[Authenticated[Any] | None]]


@dataclass(frozen=True)
class ConsoleCookie:
    """The console's pages (below `prefix`) authenticate with a session cookie naming a server-side session
    (`token_of`: the bearer token it was opened with, None once it expired or was closed); a page asked for without
    a valid one redirects to `login`."""

    prefix: str
    login: str
    cookie: str
    token_of: Callable[[str], str | None]

    def covers(self, scope: Scope) -> bool:
        return str(scope.get("path", "")).startswith(self.prefix)

    async def to_login(self, send: Send, expire: bool) -> None:
        """Redirect to the sign-in page; `expire`: the request's cookie names no valid session, so drop it (a
        request without one, such as another site's link, which SameSite keeps the cookie from, leaves it be)."""
        headers = [(b"location", self.login.encode()), (b"cache-control", b"no-store")]
        if expire:
            expired = f"{self.cookie}=; Path={self.prefix}; Max-Age=0; HttpOnly; SameSite=Strict".encode()
            headers.append((b"set-cookie", expired))
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


def bearer_token(scope: Scope) -> str | None:
    """The bearer token of a request, from its Authorization header only: a token in a URL ends up in access logs,
    proxies' logs and browser histories."""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            text = value.decode("latin-1")
            if text[:7].lower() == "bearer ":
                return text[7:].strip() or None
            return None
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
        public_paths: frozenset[str] = frozenset(),
        console: ConsoleCookie | None = None,
        failures: FailureLimiter | None = None,
    ) -> None:
        self.app = app
        self.authenticate = authenticate
        self.limits = limits
        self.challenge = challenge
        self.public_paths = public_paths
        self.console = console
        self.failures = failures or FailureLimiter(limits)
        self.in_flight: Counter[str] = Counter()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        connection: GuardedConnection | None = scope.get(CONNECTION_KEY)
        if connection is not None and not connection.admit(client_address(scope)):
            await _respond(send, 503, "too many connections from this client", [(b"retry-after", b"1")])
            return
        if scope.get("path") in self.public_paths:
            await self._pass(scope, receive, send)
            return
        token = bearer_token(scope)
        page = self.console if self.console is not None and self.console.covers(scope) else None
        credential = token
        if token is None and page is not None and (session := cookie_value(scope, page.cookie)) is not None:
            credential, token = session, page.token_of(session)
        address = client_address(scope)
        if credential is not None and (wait := self.failures.retry_after(credential)) > 0:
            await _too_many_failures(send, wait)
            return
        try:
            caller = await self.authenticate(token, scope) if token else None
        except Refused as refusal:
            if credential is not None and (wait := self.failures.failed(address, credential)) > 0:
                await _too_many_failures(send, wait)
                return
            if page is not None:  # an expired or revoked session: sign in again
                await page.to_login(send, expire=True)
                return
            await _respond(send, refusal.status, refusal.detail, [(b"www-authenticate", refusal.challenge.encode())])
            return
        if credential is not None and caller is None and (wait := self.failures.failed(address, credential)) > 0:
            await _too_many_failures(send, wait)
            return
        if caller is None and page is not None:
            await page.to_login(send, expire=credential is not None)
            return
        if caller is None:
            reason = "missing bearer token" if token is None else "unknown bearer token"
            await _respond(send, 401, reason, [(b"www-authenticate", self.challenge.encode())])
            return
        if self.in_flight[caller.key] >= self.limits.max_requests_per_principal:
            await _respond(send, 429, "too many requests in flight for this token", [(b"retry-after", b"1")])
            return
        scope[CALLER_KEY] = caller.who
        if connection is not None:
            connection.authenticated()
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
    by uvicorn's keep-alive timeout), and connections past the limits (in all, and from one address: its cap, or its
    small share once the server holds the part not reserved for small sources) are closed as they are accepted. A
    trusted proxy's connection counts against the client of the request on it (the proxy opens one for a client's
    request and may reuse it for another's); a request past its client's share is answered 503.

    A connection on which no request authenticated yet (a public file, a sign-in page, a guess) is kept alive for
    `anonymous_keep_alive_seconds` only, and such connections may fill `max_connections` only up to the share not
    `reserved_for_authenticated`: past it, the oldest idle one is closed to make room, or, with none idle, the new
    connection serves one request and is closed unless that request authenticated."""
    book = _ConnectionBook(limits)

    class ThisServersProtocol(GuardedH11Protocol):
        _book = book

    return ThisServersProtocol


class _ConnectionBook:
    """What one server knows of its open connections: how many each client address holds, and which are not
    authenticated yet."""

    def __init__(self, limits: HttpLimits) -> None:
        self.limits = limits
        self.per_source: Counter[str] = Counter()  # open connections by client address (`address_bucket`)
        self.anonymous: dict[GuardedH11Protocol, None] = {}  # open and not authenticated, oldest first
        self.anonymous_cap = int(limits.max_connections * (1 - limits.reserved_for_authenticated))
        self.shared_cap = int(limits.max_connections * (1 - limits.reserved_for_small_sources))
        self._proxies = [ipaddress.ip_network(entry) for entry in limits.trusted_proxies]

    def trusted(self, peer: str) -> bool:
        """As uvicorn decides whether to read X-Forwarded-For from a peer (`server_config`)."""
        try:
            address = ipaddress.ip_address(peer)
        except ValueError:
            return False
        return any(address in network for network in self._proxies)

    def hold(self, source: str, open_now: int) -> bool:
        """Count a connection of `source`, unless it holds its share already: `max_connections_per_source`, or, with
        `open_now` connections open (this one among them) past the part not reserved for small sources,
        `small_source_connections`."""
        held = self.per_source[source]
        if held >= self.limits.max_connections_per_source:
            return False
        if held >= self.limits.small_source_connections and open_now > self.shared_cap:
            return False
        self.per_source[source] += 1
        return True

    def release(self, source: str) -> None:
        self.per_source[source] -= 1
        if self.per_source[source] <= 0:
            del self.per_source[source]

    def close_an_idle_one(self) -> bool:
        """Close the oldest idle unauthenticated connection, if there is one."""
        oldest = next((connection for connection in self.anonymous if connection.idle()), None)
        if oldest is None:
            return False
        self.anonymous.pop(oldest, None)
        oldest.timeout_keep_alive_handler()
        return True


class GuardedH11Protocol(H11Protocol):
    """The bounded protocol of `guarded_protocol`, keeping its count in the `_ConnectionBook` of its server."""

    _book: _ConnectionBook  # set by guarded_protocol, one per server
    _head_timer: asyncio.TimerHandle | None = None
    _source: str | None = None  # the address_bucket its connection counts against
    _proxied = False  # from a trusted proxy
    _probation = False  # admitted past the anonymous share: one request, unless it authenticates

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        book = self._book
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else "unknown"
        # A trusted proxy's connection is counted against the client of each request on it (`admit`), not
        # the proxy: every client would share one share.
        self._proxied = book.trusted(address)
        source = address_bucket(address)
        open_now = len(self.connections)
        if open_now > book.limits.max_connections or (not self._proxied and not book.hold(source, open_now)):
            transport.close()
            return
        self._source = None if self._proxied else source
        if len(book.anonymous) >= book.anonymous_cap and not book.close_an_idle_one():
            self._probation = True
        book.anonymous[self] = None
        self.timeout_keep_alive = book.limits.anonymous_keep_alive_seconds
        self.app = _marking(self.app, self)
        self._await_head()

    def admit(self, client: str) -> bool:
        if not self._proxied:
            return True  # counted by its peer when accepted: a header it sends changes nothing
        source = address_bucket(client)
        if source == self._source:
            return True
        if self._source is not None:
            self._book.release(self._source)
        self._source = source if self._book.hold(source, len(self.connections)) else None
        return self._source is not None

    def authenticated(self) -> None:
        if (
            self in self._book.anonymous
        ):  # the first authenticated request: the connection's full keep-alive from now on
            del self._book.anonymous[self]
            self.timeout_keep_alive = self._book.limits.keep_alive_seconds
            self._probation = False

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._probation and not self.transport.is_closing():
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._cancel_head_timer()  # the head arrived: the body has its own timeout
        elif self._head_timer is None and not self.transport.is_closing():
            self._await_head()  # part of the next head on a kept-alive connection

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._book.anonymous.pop(self, None)
        if self._source is not None:
            self._book.release(self._source)
            self._source = None
        super().connection_lost(exc)

    def idle(self) -> bool:
        """Between requests on a kept-alive connection (uvicorn's keep-alive timer runs)."""
        return self.timeout_keep_alive_task is not None and not self.transport.is_closing()

    def _await_head(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self._book.limits.header_timeout_seconds, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()


def _marking(app: ASGIApp, connection: GuardedConnection) -> ASGIApp:
    """The app, its requests' scopes carrying their connection for the guard (`CONNECTION_KEY`)."""

    async def marked(scope: Scope, receive: Receive, send: Send) -> None:
        scope[CONNECTION_KEY] = connection
        await app(scope, receive, send)

    return marked


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
        # X-Forwarded-For and -Proto only from the configured proxies (uvicorn's default trusts any local process).
        proxy_headers=bool(limits.trusted_proxies),
        forwarded_allow_ips=limits.trusted_proxies,
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
