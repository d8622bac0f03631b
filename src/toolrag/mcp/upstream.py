"""Connections to upstream MCP servers: one long-lived client per server, kept alive and reconnected with backoff.

Each `Upstream` runs as a task: connect (stdio or streamable HTTP, official SDK), list the tools and hand them to
the importer, then wait, answering `tools/list_changed` by listing again, and listing periodically to notice a hung
or dead server. When the connection fails, calls fail fast with the reason until the reconnection succeeds.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import httpx2
import mcp.types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from toolrag.errors import ToolragError
from toolrag.mcp.config import GatewayConfig, ServerConfig

State = Literal["connecting", "up", "down"]
# (server, its tools, its instructions from the handshake)
ToolsHandler = Callable[[str, list[types.Tool], str | None], Awaitable[None]]


class UpstreamUnavailable(ToolragError):
    """The upstream server is not connected (starting, crashed, hung or unreachable)."""


class UpstreamCallFailed(ToolragError):
    """The upstream server answered a call with an error, or did not answer in time."""


@dataclass
class UpstreamStatus:
    name: str
    transport: str
    state: State
    tools: int
    last_error: str | None
    reconnects: int


class Upstream:
    """One upstream server and its connection."""

    def __init__(self, name: str, server: ServerConfig, settings: GatewayConfig, on_tools: ToolsHandler) -> None:
        self.name = name
        self.server = server
        self.settings = settings
        self._on_tools = on_tools
        self.state: State = "connecting"
        self.last_error: str | None = None
        self.tool_count = 0
        self.reconnects = 0
        self.attempted = anyio.Event()  # set once the first connection attempt has ended, either way
        self._client: Client | None = None
        self._wake = anyio.Event()
        self._changed = False
        self._broken: str | None = None
        self._listing = ""

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
            if time.monotonic() - started > 30:
                backoff = 0.5  # the connection had been healthy: retry quickly
            await anyio.sleep(backoff)
            backoff = min(backoff * 2, self.settings.max_backoff_seconds)
            self.reconnects += 1
            self.state = "connecting"

    async def _connected_session(self) -> None:
        self._broken, self._changed = None, False
        connected = anyio.Event()
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(self._connect_watchdog, scope, connected)
                async with self._client_for_server() as client:
                    await self._refresh(client)
                    self._client, self.state, self.last_error = client, "up", None
                    connected.set()
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
            self._wake = anyio.Event()
            if self._broken is not None:
                raise UpstreamUnavailable(self._broken)
            # Listing again is the liveness probe (ping is gone from protocol 2026-07-28); it also catches servers
            # that change their tools without sending tools/list_changed.
            forced, self._changed = self._changed, False
            with anyio.fail_after(self.settings.call_timeout_seconds):
                await self._refresh(client, forced)

    def _client_for_server(self) -> Client:
        server = self.server
        if server.command is not None:
            target: Any = StdioServerParameters(
                command=server.command, args=server.args, env=server.env or None, cwd=server.cwd
            )
        else:
            assert server.url is not None
            http = httpx2.AsyncClient(headers=server.headers, timeout=self.settings.call_timeout_seconds)
            target = streamable_http_client(server.url, http_client=http)
        return Client(target, message_handler=self._on_message, read_timeout_seconds=self.settings.call_timeout_seconds)

    async def _refresh(self, client: Client, forced: bool = True) -> None:
        """List the tools; hand them to the importer when asked to, or when they differ from the last listing."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tool_count = len(tools)
        listing = hashlib.sha256(b"".join(t.model_dump_json().encode() for t in tools)).hexdigest()
        if forced or listing != self._listing:
            self._listing = listing
            await self._on_tools(self.name, tools, client.instructions)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._changed = True
            self._wake.set()
        elif isinstance(message, Exception):
            self._break(_describe(message))

    def _break(self, reason: str) -> None:
        self._broken = reason
        self._wake.set()

    def _mark_down(self, reason: str) -> None:
        self._client = None
        self.state = "down"
        self.last_error = reason
        self.attempted.set()

    # -- calls --------------------------------------------------------------------------------------------------

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        client = self._client
        if client is None or self.state != "up":
            reason = f": {self.last_error}" if self.last_error else ""
            raise UpstreamUnavailable(f"MCP server {self.name!r} is unavailable ({self.state}{reason}); retry later")
        timeout = self.settings.call_timeout_seconds
        try:
            with anyio.fail_after(timeout):
                return await client.call_tool(tool, arguments, read_timeout_seconds=timeout)
        except TimeoutError:
            raise UpstreamCallFailed(f"MCP server {self.name!r} did not answer {tool} within {timeout:g} s") from None
        except Exception as exc:
            # A failed request on a live session comes back as an error result; an exception means the connection.
            self._break(_describe(exc))
            raise UpstreamUnavailable(f"MCP server {self.name!r} failed during {tool}: {_describe(exc)}") from exc

    def status(self) -> UpstreamStatus:
        return UpstreamStatus(
            self.name, self.server.transport, self.state, self.tool_count, self.last_error, self.reconnects
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
        """Until every server has connected or failed once (or `timeout` passed)."""
        with anyio.move_on_after(timeout):
            for upstream in self.upstreams.values():
                await upstream.attempted.wait()

    async def call(self, server: str, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        upstream = self.upstreams.get(server)
        if upstream is None:
            raise UpstreamUnavailable(f"no MCP server named {server!r} is configured")
        return await upstream.call(tool, arguments)

    def statuses(self) -> list[UpstreamStatus]:
        return [upstream.status() for upstream in self.upstreams.values()]


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        return _describe(exc.exceptions[0])
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
