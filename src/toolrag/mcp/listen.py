"""`subscriptions/listen` (MCP 2026-07-28): `toolsListChanged` for the callers whose visible tools changed.

The SDK's listen handler fans one bus out to every stream; the gateway's tool lists differ by principal, so each
stream gets a bus of its own and hears an event only when what its principal sees changed (another tenant's new
tool tells it nothing, not even that something changed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp.types as types
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

from toolrag.model import Principal, Tool


@dataclass
class _Stream:
    principal: Principal
    seen: str  # the fingerprint of the visible set the stream's client last heard of
    bus: InMemorySubscriptionBus


class ListChanges:
    """The open listen streams, each with the fingerprint of its principal's visible tools."""

    def __init__(self, visible: Callable[[Principal], list[Tool]], max_streams: int) -> None:
        self.visible, self.max_streams = visible, max_streams
        self._streams: dict[int, _Stream] = {}

    def fingerprint(self, principal: Principal) -> str:
        """Changes when a tool the principal may use comes, goes or changes its definition."""
        digest = hashlib.sha256()
        for tool in sorted(self.visible(principal), key=lambda t: t.name):
            digest.update(f"{tool.name}\x00{tool.version}\x00{tool.content_hash}\x00".encode())
        return digest.hexdigest()

    async def listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams, principal: Principal
    ) -> types.SubscriptionsListenResult:
        """Serve one stream until the client goes (the SDK's handler: its acknowledgment, its subscription id)."""
        if len(self._streams) >= self.max_streams:
            raise MCPError(types.INTERNAL_ERROR, "Subscription limit reached")
        stream = _Stream(principal, self.fingerprint(principal), InMemorySubscriptionBus())
        key = id(stream)
        self._streams[key] = stream
        try:
            return await ListenHandler(stream.bus, max_subscriptions=1)(ctx, params)
        finally:
            del self._streams[key]

    async def check(self) -> int:
        """Tell every stream whose principal's visible tools changed since it last heard; how many were told."""
        told = 0
        for stream in list(self._streams.values()):
            now = self.fingerprint(stream.principal)
            if now != stream.seen:
                stream.seen = now
                await stream.bus.publish(ToolsListChanged())
                told += 1
        return told

    @property
    def open(self) -> int:
        return len(self._streams)
