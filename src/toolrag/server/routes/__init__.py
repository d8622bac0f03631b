"""The HTTP API's routes, one module-level router per resource; what they share (the registry, metrics, rate limits,
the caller and its role) comes from `request.app.state` through the dependencies of `deps.py`."""

from __future__ import annotations

from fastapi import APIRouter

from toolrag.server.routes import (
    access,
    execute,
    groups,
    health,
    operations,
    reports,
    search,
    servers,
    tools,
    writing,
)

ROUTERS: tuple[APIRouter, ...] = (
    health.router,
    tools.router,
    groups.router,
    search.router,
    execute.router,
    reports.router,
    operations.router,
    access.router,
    servers.router,
    writing.router,
)

__all__ = ["ROUTERS"]
