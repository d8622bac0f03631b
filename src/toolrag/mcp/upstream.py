"""Connections to upstream MCP servers: one long-lived client per server, kept alive and reconnected with backoff.

Each `Upstream` runs as a task: connect (stdio or streamable HTTP, official SDK; the handshake has the connect
timeout), list the tools (bounded in pages, bytes, tools and time while read) and hand them to the importer (which
has a CPU budget per sync, not a deadline: a large server's first import is work, not a hang), then wait,
answering `tools/list_changed` by listing again (at most once a second) and listing periodically to notice a hung
or dead server; a listing that changes every time is imported with a back-off. When the connection fails, calls
fail fast with the reason until the reconnection succeeds. Each upstream says what state it is in and since when
(`UpstreamStatus`), so answers given while a server is still connecting can say so instead of "no tool fits".
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from toolrag.errors import ToolragError
from toolrag.mcp.bounds import CHECKER, REFUSED, MessageBounds
from toolrag.mcp.config import GatewayConfig, ServerConfig
from toolrag.mcp.relay import RELAY_LOGGER
from toolrag.model import utc_now

State = Literal["connecting", "importing", "up", "down"]
MIN_REFRESH_SECONDS = 1.0  # between two listings: a server sending list_changed without pause cannot keep us busy
CHURN_GRACE = 2  # listings in a row with changed tools imported at once; past them, imports back off
MAX_CHURN_WAIT_SECONDS = 300.0
# (server, its tools, its instructions from the handshake)
ToolsHandler = Callable[[str, list[types.Tool], str | None], Awaitable[None]]


class UpstreamUnavailable(ToolragError):
    """The upstream server is not connected (starting, crashed, hung or unreachable)."""


class UpstreamCallFailed(ToolragError):
    """The upstream server answered a call with an error, or did not answer in time."""


class ListingRefused(UpstreamUnavailable):
    """The server's tool list went past a limit while it was read: it is not imported."""


@dataclass
class Listing:
    """A tool list as it is read, page by page: its tools, their serialized size and their hash."""

    tools: list[types.Tool] = field(default_factory=list)
    pages: int = 0
    bytes: int = 0
    note: str | None = None  # why the list was not read to its end, when it holds more tools than are imported
    _hash: Any = field(default_factory=hashlib.sha256)

    def add(self, tools: list[types.Tool], max_tools: int) -> None:
        """One page; past `max_tools` one tool more is kept (the importer refuses it, saying why) and no more."""
        self.pages += 1
        room = max_tools + 1 - len(self.tools)
        if len(tools) >= room:
            tools = tools[:room]
            self.note = f"it lists more than {max_tools:,} tools (max_tools_per_server): the first ones are imported"
        for tool in tools:
            serialized = tool.model_dump_json().encode()
            self.bytes += len(serialized)
            self._hash.update(serialized)
        self.tools.extend(tools)

    @property
    def digest(self) -> str:
        return str(self._hash.hexdigest())


@dataclass
class UpstreamStatus:
    name: str
    transport: str
    state: State
    since: datetime  # when it entered that state
    tools: int
    last_error: str | None
    reconnects: int
    last_import: datetime | None  # when its tools were last handed to the importer
    error_output: str | None = None  # a stdio server's last line of error output as it exited: operators' only

    @property
    def ready(self) -> bool:
        return self.state == "up"

    @property
    def operators_error(self) -> str | None:
        """The last error with the server's own last line of error output: for operators, never for a principal
        or its model (a server's stderr may hold a connection string, a path, a key)."""
        if self.error_output is None:
            return self.last_error
        return f"{self.last_error}; its last error output: {self.error_output}"


class Upstream:
    """One upstream server and its connection."""

    def __init__(self, name: str, server: ServerConfig, settings: GatewayConfig, on_tools: ToolsHandler) -> None:
        self.name = name
        self.server = server
        self.settings = settings
        self._on_tools = on_tools
        self.state: State = "connecting"
        self.since = utc_now()
        self.last_error: str | None = None
        self.tool_count = 0
        self.reconnects = 0
        self.last_import: datetime | None = None
        self.attempted = anyio.Event()  # set once the first attempt has ended: imported, or failed
        self._client: Client | None = None
        self._wake = anyio.Event()
        self._again = False  # import the next listing even if it is unchanged (a sync's budget ran out)
        self._broken: str | None = None
        self._listing = ""  # the hash of the listing last imported
        self._seen = ""  # the hash of the last listing
        self._churn = 0  # listings in a row that differed from the one before
        self._imported_at = 0.0
        self._listed_at = 0.0
        self.listing_note: str | None = None  # a limit the last listing reached, for the status
        self._exit_note: tuple[str, str | None] | None = None  # how a stdio server exited, and its last error output
        self.error_output: str | None = None  # the last attempt's: for operators only (UpstreamStatus)
        self._came_up = False  # the current connection attempt reached "up"
        self._exits_at_start = False  # the last attempt ended with the server's exit before it came up

    # -- the connection task ------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Stay connected until cancelled."""
        backoff = 0.5
        while True:
            started = time.monotonic()
            try:
                await self._connected_session()
            except Exception as exc:
                self._mark_down(_describe(exc))
            else:
                self._mark_down("the connection ended")
            if time.monotonic() - started > 30:
                backoff = 0.5  # the connection had been healthy: retry quickly
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self.settings.max_backoff_seconds)
            self.reconnects += 1
            # A server that failed stays "down" while it retries (with its last error): "connecting" is the first
            # attempt only, so a status taken at any moment says what the last attempt found.

    def _enter(self, state: State) -> None:
        if state != self.state:
            self.state, self.since = state, utc_now()

    async def _connected_session(self) -> None:
        self._broken, self._exit_note, self._came_up = None, None, False
        connected = anyio.Event()
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(self._connect_watchdog, scope, connected)
                async with self._client_for_server() as client:
                    connected.set()  # the handshake is done: the import that follows is work, not a hang
                    self._enter("importing")
                    await self._refresh(client)
                    self._client, self.last_error = client, None
                    self._enter("up")
                    self._came_up = True
                    self.attempted.set()
                    await self._serve(client)
        if scope.cancelled_caught:
            raise UpstreamUnavailable(f"no answer within {self.settings.connect_timeout_seconds:g} s of connecting")

    async def _connect_watchdog(self, scope: anyio.CancelScope, connected: anyio.Event) -> None:
        """Cancel a connection attempt that hangs (a scope around the client would cut across its task groups)."""
        with anyio.move_on_after(self.settings.connect_timeout_seconds) as waiting:
            await connected.wait()
        if waiting.cancelled_caught:
            scope.cancel()

    async def _serve(self, client: Client) -> None:
        while True:
            with anyio.move_on_after(self.settings.ping_interval_seconds):
                await self._wake.wait()
            await anyio.sleep(max(0.0, MIN_REFRESH_SECONDS - (time.monotonic() - self._listed_at)))
            self._wake = anyio.Event()
            if self._broken is not None:
                raise UpstreamUnavailable(self._broken)
            # Listing again is the liveness probe (ping is gone from protocol 2026-07-28); it also catches servers
            # that change their tools without sending tools/list_changed.
            forced, self._again = self._again, False
            with anyio.fail_after(self.settings.call_timeout_seconds):
                await self._refresh(client, forced)

    def _client_for_server(self) -> Client:
        """A client whose answers are bounded as they are read: a stdio server runs under the relay (mcp/relay.py),
        an HTTP server's responses stop at the cap (`_BoundedTransport`)."""
        server, settings = self.server, self.settings
        cap = message_cap(settings.max_result_bytes)
        bounds = MessageBounds(settings.max_result_depth, settings.max_result_parts, settings.max_tools_per_server)
        if server.command is not None:
            command = resolved_command(server.command)
            missing = _missing_command(command, server.env, server.cwd)
            if missing is not None:  # said before a relay is started for it: the relay would only see it exit
                raise UpstreamUnavailable(missing)
            limits = ["--max-bytes", str(cap), "--max-depth", str(bounds.max_depth)]
            limits += ["--max-parts", str(bounds.max_parts), "--max-tools", str(bounds.max_tools)]
            relayed = ["-m", "toolrag.mcp.relay", *limits, "--", command, *server.args]
            target: Any = StdioServerParameters(
                command=sys.executable, args=relayed, env=server.env or None, cwd=server.cwd
            )
        else:
            assert server.url is not None
            http = httpx2.AsyncClient(
                headers=server.headers,
                timeout=self.settings.call_timeout_seconds,
                transport=_BoundedTransport(httpx2.AsyncHTTPTransport(), cap, bounds, self.name),
            )
            target = streamable_http_client(server.url, http_client=http)
        # Only a stdio server has a relay to say how it exited: an HTTP server's log messages are its own.
        logs = self._on_log if server.command is not None else None
        return Client(
            target,
            message_handler=self._on_message,
            logging_callback=logs,
            read_timeout_seconds=self.settings.call_timeout_seconds,
        )

    async def _refresh(self, client: Client, forced: bool = True) -> None:
        """List the tools; hand them to the importer when asked to, or when they differ from the last import
        (backing off when they change at every listing)."""
        listing = await self._listed(client)
        self.tool_count = len(listing.tools)
        self._listed_at = time.monotonic()
        self._churn = self._churn + 1 if listing.digest != self._seen else 0
        self._seen = listing.digest
        self.listing_note = listing.note
        if not forced and listing.digest == self._listing:
            return
        wait = self._churn_wait()
        if not forced and time.monotonic() - self._imported_at < wait:
            self.listing_note = f"its tools change at every listing: imported again at most every {wait:g} s"
            return
        self._listing, self._imported_at = listing.digest, time.monotonic()
        await self._on_tools(self.name, listing.tools, client.instructions)
        self.last_import = utc_now()

    def _churn_wait(self) -> float:
        """How long after the last import a changed listing waits: nothing for the first changes in a row, then
        twice as long at every further change (a server whose text changes at every listing was scanned, and
        audited, at every liveness listing)."""
        if self._churn <= CHURN_GRACE:
            return 0.0
        interval = max(self.settings.ping_interval_seconds, MIN_REFRESH_SECONDS)  # between two listings
        doubled = interval * 2.0 ** (self._churn - CHURN_GRACE)
        return min(doubled, MAX_CHURN_WAIT_SECONDS)

    async def _listed(self, client: Client) -> Listing:
        """Every page of the server's tool list, bounded while it is read: in pages, bytes and time (a server
        whose listing never ends is refused, `ListingRefused`) and in tools (past `max_tools_per_server` the rest
        is not read; the first ones are imported and the listing says so)."""
        settings, listing = self.settings, Listing()
        cursor: str | None = None
        try:
            with anyio.fail_after(settings.list_timeout_seconds):
                for _ in range(settings.max_list_pages):
                    page = await client.list_tools(cursor=cursor, cache_mode="refresh")
                    # Serializing a page for its size and hash is work in proportion to it: not on the loop.
                    await anyio.to_thread.run_sync(listing.add, page.tools, settings.max_tools_per_server)
                    if listing.bytes > settings.max_list_bytes:
                        raise ListingRefused(
                            f"its tool list is over {settings.max_list_bytes:,} bytes (max_list_bytes)"
                            f" after {listing.pages} pages"
                        )
                    cursor = page.next_cursor
                    if cursor is None or listing.note is not None:
                        return listing
        except TimeoutError:
            raise ListingRefused(
                f"its tool list did not end within {settings.list_timeout_seconds:g} s (list_timeout_seconds):"
                f" {listing.pages} pages read"
            ) from None
        raise ListingRefused(f"its tool list did not end within {settings.max_list_pages:,} pages (max_list_pages)")

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._wake.set()
        elif isinstance(message, Exception):
            self._break(_describe(message))

    def import_again(self) -> None:
        """Hand the next listing to the importer even if it is unchanged (tools are waiting to be scanned or
        registered)."""
        self._again = True

    def _break(self, reason: str) -> None:
        self._broken = reason
        self._wake.set()

    def _mark_down(self, reason: str) -> None:
        self._client = None
        self._enter("down")
        self._exits_at_start = self._exit_note is not None and not self._came_up
        ended, self.error_output = self._exit_note or (None, None)
        self.last_error = f"{reason}; the server {ended}" if ended else reason
        self.attempted.set()

    async def _on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        """The relay's last message: how the server exited, and its last line of error output (mcp/relay.py, which
        drops any such message the server writes itself). One printable line each, bounded."""
        data = params.data
        if params.logger != RELAY_LOGGER or not isinstance(data, dict) or not isinstance(data.get("ended"), str):
            return
        output = data.get("output")
        self._exit_note = (_one_line(data["ended"]), _one_line(output) if isinstance(output, str) and output else None)

    # -- calls --------------------------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        client = self._client
        if client is None or self.state != "up":
            reason = f": {self.last_error}" if self.last_error else ""
            # A command that cannot run is the configuration's to fix: waiting will not bring the server up.
            configured = (self.last_error or "").startswith(_CONFIGURATION_ERRORS)
            hint = "the gateway's configuration names a command that cannot run" if configured else "retry later"
            if self._exits_at_start:
                hint = "it exits as it starts: its command, arguments or environment need fixing (see its status)"
            raise UpstreamUnavailable(f"MCP server {self.name!r} is unavailable ({self.state}{reason}); {hint}")
        timeout = self.settings.call_timeout_seconds
        try:
            with anyio.fail_after(timeout):
                return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise UpstreamCallFailed(f"MCP server {self.name!r} did not answer {tool} within {timeout:g} s") from None
        except MCPError as exc:
            # An error answer to this request (the SDK's own read timeout among them): the connection is fine.
            raise UpstreamCallFailed(f"MCP server {self.name!r} did not run {tool}: {exc}") from None
        except Exception as exc:
            # A failed request on a live session comes back as an error result; an exception means the connection.
            self._break(_describe(exc))
            raise UpstreamUnavailable(f"MCP server {self.name!r} failed during {tool}: {_describe(exc)}") from exc

    def status(self) -> UpstreamStatus:
        return UpstreamStatus(
            self.name,
            self.server.transport,
            self.state,
            self.since,
            self.tool_count,
            self.last_error or self.listing_note,
            self.reconnects,
            self.last_import,
            self.error_output if self.state != "up" else None,
        )


class UpstreamPool:
    """Every enabled upstream of a configuration, run in one task group."""

    def __init__(self, settings: GatewayConfig, on_tools: ToolsHandler) -> None:
        self.upstreams = {
            name: Upstream(name, server, settings, on_tools) for name, server in settings.enabled_servers.items()
        }

    async def run(self, task_group: anyio.abc.TaskGroup) -> None:
        for upstream in self.upstreams.values():
            task_group.start_soon(upstream.run, name=f"upstream {upstream.name}")

    async def wait_attempted(self, timeout: float) -> None:
        """Until every server has been imported or has failed once (or `timeout` passed)."""
        with anyio.move_on_after(timeout):
            for upstream in self.upstreams.values():
                await upstream.attempted.wait()

    def not_ready(self) -> list[UpstreamStatus]:
        """The servers whose tools may be missing now: connecting, importing or down."""
        return [status for status in self.statuses() if not status.ready]

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        upstream = self.upstreams.get(server)
        if upstream is None:
            raise UpstreamUnavailable(f"no MCP server named {server!r} is configured")
        return await upstream.call(tool, arguments)

    def statuses(self) -> list[UpstreamStatus]:
        return [upstream.status() for upstream in self.upstreams.values()]


_CONFIGURATION_ERRORS = ("command not found", "command is not executable")
_EXIT_NOTE_CHARS = 300


def _one_line(text: str) -> str:
    return "".join(c if c.isprintable() else " " for c in text[:_EXIT_NOTE_CHARS]).strip()


# A configuration's `command = "python"` means the gateway's own interpreter: started from an IDE or an MCP client,
# the first `python` on the PATH is another one, without the server's package ("No module named mcp_server_time").
_THIS_PYTHON = frozenset({"python", "python3", f"python3.{sys.version_info.minor}"})


def resolved_command(command: str) -> str:
    """The command a stdio upstream is started with: `python` (and `python3`) the gateway's own interpreter."""
    return sys.executable if command in _THIS_PYTHON else command


def _missing_command(command: str, env: dict[str, str] | None, cwd: str | None) -> str | None:
    """Why a stdio server's command cannot be run (not found, or not executable), or None when it can be: looked
    up on the PATH the server is started with, or as a path from its working directory."""
    if os.sep in command or (os.altsep and os.altsep in command):
        path = os.path.join(cwd or os.getcwd(), command)  # an absolute command stays itself
        if not os.path.isfile(path):
            return f"command not found: {command}"
        return None if os.access(path, os.X_OK) else f"command is not executable: {command}"
    search_path = (env or {}).get("PATH", os.environ.get("PATH", os.defpath))
    return None if shutil.which(command, path=search_path) else f"command not found: {command}"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    if isinstance(exc, UpstreamUnavailable) and str(exc).strip():
        return str(exc).strip().splitlines()[0]  # toolrag's own reason is a sentence already
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def message_cap(max_result_bytes: int) -> int:
    """The size of one upstream message read at most: the largest result let through, and its envelope."""
    return max_result_bytes + 65_536


class _BoundedTransport(httpx2.AsyncBaseTransport):
    """An HTTP transport whose responses stop being read at `cap` bytes of one message: a larger one is dropped
    and the request it answered gets a JSON-RPC error instead (as the stdio relay does, mcp/relay.py), so the call
    fails at once and the session stays up. A message under the cap is checked against `bounds` (mcp/bounds.py)
    before it is passed on, off the event loop."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, cap: int, bounds: MessageBounds, upstream: str) -> None:
        self.inner = inner
        self.cap = cap
        self.bounds = bounds
        self.upstream = upstream  # whose turn a message takes at the checker (bounds.BoundsChecker)

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        events = response.headers.get("content-type", "").startswith("text/event-stream")
        response.stream = _BoundedStream(
            response.stream, self.cap, _request_id(request), events, self.bounds, self.upstream
        )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _BoundedStream(httpx2.AsyncByteStream):
    """A response body passed on a whole message at a time (an SSE event, or the JSON body), none over `cap`."""

    def __init__(
        self, inner: Any, cap: int, request_id: Any, events: bool, bounds: MessageBounds, upstream: str
    ) -> None:
        self.inner, self.cap, self.request_id, self.events = inner, cap, request_id, events
        self.bounds, self.upstream = bounds, upstream

    async def __aiter__(self) -> AsyncIterator[bytes]:
        pending = bytearray()
        scanned = 0  # bytes of `pending` known to hold no event boundary
        held = b""  # a CR that ended the last chunk: with an LF after it, it is one line end
        async for chunk in self.inner:
            if self.events:
                chunk, held = lf_lines(held + chunk)
            pending += chunk
            while self.events and (end := _event_end(pending, max(0, scanned - 1))) > 0:
                yield await self._bounded(bytes(pending[:end]))
                del pending[:end]
                scanned = 0
            scanned = len(pending)
            if len(pending) > self.cap:
                await self.inner.aclose()
                yield self._refusal()
                return
        pending += b"\n" if held else b""
        if pending:
            yield await self._bounded(bytes(pending))

    async def _bounded(self, message: bytes) -> bytes:
        """The message, or the error that replaces it when it is past the bounds of one message."""
        data = _event_data(message) if self.events else message
        refused = await CHECKER.refusal(self.upstream, self.bounds, data)
        if refused is None:
            return message
        return b"event: message\ndata: " + refused + b"\n\n" if self.events and refused else refused

    def _refusal(self) -> bytes:
        message = (
            f"the MCP server's answer is over the gateway's limit of {self.cap:,} bytes for one message"
            " (max_result_bytes): ask for less (a filter, a page, a range)"
        )
        error = json.dumps({"jsonrpc": "2.0", "id": self.request_id, "error": {"code": REFUSED, "message": message}})
        return f"event: message\ndata: {error}\n\n".encode() if self.events else error.encode()

    async def aclose(self) -> None:
        await self.inner.aclose()


def lf_lines(data: bytes) -> tuple[bytes, bytes]:
    """`data` with every SSE line end (CRLF, a lone CR, LF: the SDK's parser reads all three) written as LF, and a
    CR that ends it held back for the next chunk. The events are then passed on in this form, so the gateway bounds
    exactly the events the SDK will read (a server writing lone CRs hid whole events from a reader of LFs only)."""
    held = b"\r" if data.endswith(b"\r") else b""
    body = data[:-1] if held else data
    return body.replace(b"\r\n", b"\n").replace(b"\r", b"\n"), held


def _event_end(buffer: bytearray, start: int) -> int:
    """Where the first complete SSE event of `buffer` (LF line ends) ends, after its blank line, looking from
    `start`, or 0."""
    end = buffer.find(b"\n\n", start)
    return end + 2 if end >= 0 else 0


def _event_data(event: bytes) -> bytes:
    """The data of one SSE event (its `data:` lines joined), which is the JSON-RPC message."""
    return b"\n".join(line[5:].removeprefix(b" ") for line in event.split(b"\n") if line.startswith(b"data:"))


def _request_id(request: httpx2.Request) -> Any:
    try:
        message = json.loads(request.content or b"null")
    except (ValueError, httpx2.RequestNotRead):
        return None
    return message.get("id") if isinstance(message, dict) else None
