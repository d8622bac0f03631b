"""Building the API from its configuration file: registry, monitoring, and (optionally) the MCP upstreams."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import anyio
import mcp.types as types
from fastapi import FastAPI

from toolrag.model import Principal
from toolrag.monitor.schedule import Scheduler
from toolrag.monitor.startup import check_at_startup
from toolrag.registry import ToolRegistry
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig
from toolrag.server.models import ExecuteOut


def build_api(config: ApiConfig) -> FastAPI:
    """The app `toolrag api serve` runs, once its registry passed the startup check. With `mcp_config`, tools
    execute on their MCP servers, which stay connected for the app's lifetime."""
    registry = ToolRegistry(config.store, config.embedder, monitor=config.monitor)
    if config.mcp_config is None:
        startup = check_at_startup(registry, config.startup.missing_embeddings)
        scheduler = Scheduler(registry, config.schedule)
        return create_app(registry, config, lifespan=_running(scheduler), startup=startup, schedule=scheduler.health)
    from toolrag.mcp.config import load_config
    from toolrag.mcp.gateway import McpGateway

    settings = load_config(config.mcp_config)
    servers = set(settings.enabled_servers)
    startup = check_at_startup(registry, config.startup.missing_embeddings, servers)
    scheduler = Scheduler(registry, config.schedule, mcp_servers=servers)
    gateway = McpGateway(settings, registry)

    async def execute(name: str, arguments: dict[str, Any], principal: Principal, session: str) -> ExecuteOut:
        result, outcome = await gateway.call_with_outcome(name, arguments, principal, session)
        text = "\n".join(part.text for part in result.content if isinstance(part, types.TextContent))
        return ExecuteOut(outcome=outcome, is_error=result.is_error, content=text)

    @asynccontextmanager
    async def upstreams(app: FastAPI) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            group.start_soon(scheduler.run)
            await gateway.start(group)
            yield
            group.cancel_scope.cancel()

    def states(principal: Principal | None) -> list[dict[str, Any]]:
        """The upstreams as `principal` is shown them, by the gateway's rule (mcp/seen.py; None: an admin, all)."""
        seen = None if principal is None else gateway.seen.of(principal)
        return [
            {
                "name": status.name,
                "state": status.state,
                "since": status.since.isoformat(timespec="seconds"),
                "tools": status.tools if seen is None else seen[status.name],
                "reconnects": status.reconnects,
                "last_import": status.last_import.isoformat(timespec="seconds") if status.last_import else None,
                "error": status.last_error,
            }
            for status in gateway.pool.statuses()
            if seen is None or status.name in seen
        ]

    return create_app(registry, config, execute, upstreams, startup, states, schedule=scheduler.health)


def _running(scheduler: Scheduler) -> Callable[[FastAPI], AbstractAsyncContextManager[None]]:
    """The app's lifespan: the scheduled jobs run while it serves."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with anyio.create_task_group() as group:
            group.start_soon(scheduler.run)
            yield
            group.cancel_scope.cancel()

    return lifespan
