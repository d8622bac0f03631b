"""Which upstreams a caller other than an admin is shown (the gateway's /health): a server is named only to who
could use one of its tools, and counted in those tools, so no reader learns of another tenant's servers, their size or
their errors; and a server a reader uses is shown while it is down, so its `ready` waits for it."""

from __future__ import annotations

from toolrag.mcp.config import GatewayConfig
from toolrag.mcp.importer import SOURCE_PREFIX
from toolrag.model import Principal, Tool
from toolrag.registry import ToolRegistry
from toolrag.search.filter import servers_seen


class UpstreamsSeen:
    """The upstreams shown to a principal, with how many of their live tools it could use."""

    def __init__(self, registry: ToolRegistry, settings: GatewayConfig) -> None:
        self.registry = registry
        self.settings = settings
        self._registered: tuple[int, dict[str, list[Tool]]] | None = None

    def of(self, principal: Principal) -> dict[str, int]:
        """Those with a tool it could use were it live (a down server's tools may all be deactivated), and those
        with no tool yet (down since the start, or every tool waiting for review) whose configured scopes it holds
        and whose names its rules allow."""
        seen = servers_seen(self.registry.snapshot(), principal)
        registered = self._registered_tools()
        for name, server in self.settings.servers.items():
            tools = registered.get(name)
            if tools is None:
                shown = principal.may_name(f"{name}.") and principal.meets(server.scopes, ())
            else:
                shown = any(principal.may_see(tool) for tool in tools)
            if shown:
                seen.setdefault(name, 0)
        return seen

    def _registered_tools(self) -> dict[str, list[Tool]]:
        """Each upstream's registered tools, live or not, read from the store once per generation."""
        generation = self.registry.generation
        if self._registered is None or self._registered[0] != generation:
            by_server: dict[str, list[Tool]] = {}
            for tool in self.registry.tools(include_inactive=True):
                if tool.source.startswith(SOURCE_PREFIX):
                    by_server.setdefault(tool.source.removeprefix(SOURCE_PREFIX), []).append(tool)
            self._registered = (generation, by_server)
        return self._registered[1]
