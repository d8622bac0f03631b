"""`subscriptions/listen` (MCP 2026-07-28): `toolsListChanged` for the callers whose visible tools changed.

The SDK's listen handler fans one bus out to every stream; the gateway's tool lists differ by principal, so each
stream gets a bus of its own and hears an event only when what its principal sees changed (another tenant's new
tool tells it nothing, not even that something changed).

What a stream's principal sees is summed up in a fingerprint of its visible tools, computed once per visibility
(`Principal.visibility_key`: equal keys see the same tools) and registry generation, in a worker thread: many
streams of one token cost one computation a change, and none of them holds up the event loop. Streams are bounded
in all (`max_listen_streams`) and per principal (`max_listen_streams_per_principal`), so a few tokens cannot take
every stream.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp.types as types
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp.shared.exceptions import MCPError

from toolrag.model import Principal, Tool


@dataclass
class _Stream:
    principal: Principal
    seen: str  # the fingerprint of the visible set the stream's client last heard of
    bus: InMemorySubscriptionBus


def fingerprint(tools: list[Tool]) -> str:
    """Changes when a tool of `tools` comes, goes or changes its definition."""
    digest = hashlib.sha256()
    for tool in sorted(tools, key=lambda t: t.name):
        digest.update(f"{tool.name}\x00{tool.version}\x00{tool.content_hash}\x00".encode())
    return digest.hexdigest()


class ListChanges:
    """The open listen streams, each with the fingerprint of its principal's visible tools.

    `visible(principal)` and `generation()` read the registry (possibly its database): they run in a worker thread.
    """

    def __init__(
        self,
        visible: Callable[[Principal], list[Tool]],
        generation: Callable[[], int],
        max_streams: int,
        max_per_principal: int,
    ) -> None:
        self.visible, self.generation = visible, generation
        self.max_streams, self.max_per_principal = max_streams, max_per_principal
        self._streams: dict[object, _Stream] = {}
        self._held: Counter[str] = Counter()  # streams open or opening, by `Principal.caller`
        self._generation: int | None = None  # the generation `_fingerprints` were computed at
        self._fingerprints: dict[tuple[object, ...], str] = {}
        # Held while fingerprints are computed and compared: a stream registered after a check computed its own,
        # and a concurrent check or listen of the same generation finds them computed.
        self._lock = anyio.Lock()

    async def listen(
        self, ctx: Any, params: types.SubscriptionsListenRequestParams, principal: Principal
    ) -> types.SubscriptionsListenResult:
        """Serve one stream until the client goes (the SDK's handler: its acknowledgment, its subscription id)."""
        caller = principal.caller
        if self._held.total() >= self.max_streams:
            raise MCPError(
                types.INTERNAL_ERROR,
                f"listen stream limit reached: the gateway serves {self.max_streams} at once (max_listen_streams)",
            )
        if self._held[caller] >= self.max_per_principal:
            raise MCPError(
                types.INTERNAL_ERROR,
                f"listen stream limit reached: you hold {self.max_per_principal} open streams"
                " (max_listen_streams_per_principal); close one before opening another",
            )
        self._held[caller] += 1  # counted before the first await: concurrent requests cannot pass the limits
        key = object()
        try:
            async with self._lock:
                seen = (await self._computed([principal]))[principal.visibility_key]
                stream = _Stream(principal, seen, InMemorySubscriptionBus())
                self._streams[key] = stream
            return await ListenHandler(stream.bus, max_subscriptions=1)(ctx, params)
        finally:
            self._streams.pop(key, None)
            self._held[caller] -= 1
            if self._held[caller] <= 0:
                del self._held[caller]

    async def check(self) -> int:
        """Tell every stream whose principal's visible tools changed since it last heard; how many were told."""
        told = 0
        async with self._lock:  # no stream is registered meanwhile; one that closes is told nothing
            now = await self._computed([stream.principal for stream in self._streams.values()])
            for stream in list(self._streams.values()):
                seen = now[stream.principal.visibility_key]
                if seen != stream.seen:
                    stream.seen = seen
                    await stream.bus.publish(ToolsListChanged())
                    told += 1
        return told

    async def _computed(self, principals: list[Principal]) -> dict[tuple[object, ...], str]:
        """The fingerprint of each principal's visibility at the registry's current generation."""
        return await anyio.to_thread.run_sync(self._fingerprints_of, principals)

    def _fingerprints_of(self, principals: list[Principal]) -> dict[tuple[object, ...], str]:
        # The generation is read before the tools: a fingerprint is never filed under a newer generation than the
        # tools it was computed from (at worst under an older one, and computed again when the generation moves).
        generation = self.generation()
        # Past max_streams visibilities within one generation, principals came and went: start afresh, bounded.
        if generation != self._generation or len(self._fingerprints) > self.max_streams:
            self._generation, self._fingerprints = generation, {}
        for principal in principals:
            if principal.visibility_key not in self._fingerprints:
                self._fingerprints[principal.visibility_key] = fingerprint(self.visible(principal))
        return {p.visibility_key: self._fingerprints[p.visibility_key] for p in principals}

    @property
    def open(self) -> int:
        return len(self._streams)
