"""The HTTP API (FastAPI): manage tools, search for the caller's principal, execute through the execution gateway,
reports, metrics; the operator console. Every route needs a bearer token; a token's role limits what it may do.

`create_app` assembles: the routes are module-level routers (server/routes/, one per resource; the console's in
server/console/) that read what they share from `app.state`.

(No `from __future__ import annotations` here: FastAPI reads the route annotations at run time.)"""

import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from toolrag import __version__, tracing
from toolrag.access.guard import FailureLimiter, RequestGuard
from toolrag.access.oauth import JwtVerifier, caller_authenticator
from toolrag.access.rate_limit import RateLimiter
from toolrag.errors import (
    ApprovalConflictError,
    CatalogError,
    EditConflictError,
    InvalidToolError,
    MissingExtraError,
    ModelMismatchError,
    ServerNotFoundError,
    StoreError,
    ToolNotFoundError,
    ToolragError,
)
from toolrag.monitor.schedule import ScheduleHealth
from toolrag.monitor.startup import StartupCheck
from toolrag.registry import ToolRegistry
from toolrag.runtime.chat_models import ChatModelKeyError
from toolrag.server.config import ApiConfig
from toolrag.server.console import PREFIX as CONSOLE_PREFIX
from toolrag.server.console import PUBLIC_PATHS as CONSOLE_PUBLIC
from toolrag.server.console import ConsoleSessions, ConsoleState, Upstreams, console_router
from toolrag.server.metrics import ApiMetrics
from toolrag.server.models import Executor
from toolrag.server.routes import ROUTERS
from toolrag.server.served import Served
from toolrag.server.writing import (
    ExampleWriting,
    NoChatModelError,
    WritingBusyError,
    WritingNotStartedError,
    WritingOrderError,
)

_ERRORS: list[tuple[type[Exception], int]] = [
    (ToolNotFoundError, 404),
    (ServerNotFoundError, 404),
    (ApprovalConflictError, 409),
    (NoChatModelError, 409),
    (MissingExtraError, 409),
    (ChatModelKeyError, 409),
    (WritingBusyError, 409),
    (WritingNotStartedError, 404),
    (WritingOrderError, 422),
    (InvalidToolError, 422),
    (CatalogError, 422),
    (ModelMismatchError, 409),
    (EditConflictError, 409),
    (StoreError, 503),
    (ToolragError, 400),
]


def create_app(
    registry: ToolRegistry,
    config: ApiConfig,
    execute: Executor | None = None,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    startup: StartupCheck | None = None,
    upstreams: Upstreams | None = None,
    *,
    schedule: Callable[[], ScheduleHealth] | None = None,
) -> FastAPI:
    """The API over a registry. Tools run in this process (`registry.function`) unless `execute` says otherwise
    (the MCP gateway's forwarder, whose upstream connections `lifespan` keeps open). `startup`: what the check
    before serving found, shown by /health. `upstreams`: the MCP upstreams' states, for the console. `schedule`:
    how the scheduled jobs' ticks are going, shown by /health."""
    metrics = ApiMetrics(registry)
    app = FastAPI(
        title="toolrag",
        version=__version__,
        description="Tool selection as retrieval: a permission-aware tool registry for LLM agents.",
        lifespan=lifespan,
        # toolrag's own request span (below) is the root of each request's trace: FastAPI's would be a second root.
        telemetry={"tracing": False},
    )
    policy = config.policy()
    writing = ExampleWriting(registry, config.chat_model)
    limiter = RateLimiter(config.rate_limits)
    app.state.api = Served(registry, metrics, limiter, policy, writing, execute, startup, schedule)

    verifier = JwtVerifier(config.oauth) if config.oauth else None
    authenticate = caller_authenticator(policy, verifier)

    # Every route, the OpenAPI description included, needs a token in its Authorization header, checked before any
    # body is read; only OAuth's resource metadata and the dashboard's old address (a redirect) are public. The
    # console's pages authenticate with a session cookie instead (server/console/session.py).
    metadata = config.oauth.metadata_routes() if config.oauth else []
    app.router.routes.extend(metadata)
    sessions, failures = ConsoleSessions(), FailureLimiter(config.http)
    app.state.console = ConsoleState(registry, authenticate, policy, upstreams, sessions, failures)
    app.include_router(console_router)
    app.add_middleware(
        RequestGuard,
        authenticate=authenticate,
        limits=config.http,
        challenge=config.oauth.challenge() if config.oauth else 'Bearer realm="toolrag"',
        public_paths=frozenset(route.path for route in metadata) | CONSOLE_PUBLIC | {"/dashboard"},
        console=sessions.cookie,
        failures=failures,
    )
    _handle_errors(app)
    _trace_and_count(app, metrics)
    for router in ROUTERS:
        app.include_router(router)
    return app


def _handle_errors(app: FastAPI) -> None:
    @app.exception_handler(ToolragError)
    async def toolrag_error(request: Request, exc: ToolragError) -> JSONResponse:
        status = next(code for kind, code in _ERRORS if isinstance(exc, kind))
        return JSONResponse({"detail": str(exc)}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> Response:
        """What is wrong and where, without echoing the input: it may be a megabyte, or not even encodable (a lone
        surrogate made FastAPI's own answer fail with a 500). A console form gets a page saying it, not JSON."""
        problems = [{"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]} for error in exc.errors()]
        if request.url.path.startswith(CONSOLE_PREFIX):
            fields = "; ".join(f"{'.'.join(map(str, p['loc'][1:])) or 'form'}: {p['msg']}" for p in problems[:5])
            console: ConsoleState = request.app.state.console
            return console.page(request, "error.html", 422, title="Not accepted", message=fields)
        return JSONResponse({"detail": problems[:20]}, status_code=422)


def _trace_and_count(app: FastAPI, metrics: ApiMetrics) -> None:
    @app.middleware("http")
    async def trace_and_count(request: Request, call_next: Any) -> Response:
        """One span per request (the root of its trace), its request id in the logs and the response, counted."""
        request_id = request.headers.get("x-request-id", "")[:64] or uuid.uuid4().hex
        token = tracing.REQUEST_ID.set(request_id)
        try:
            with tracing.span(
                f"{request.method} {request.url.path}", **{"http.request.method": request.method}
            ) as span:
                response: Response = await call_next(request)
                route = getattr(request.scope.get("route"), "path", "unmatched")
                if span is not None:
                    span.set_attribute("http.route", route)
                    span.set_attribute("http.response.status_code", response.status_code)
        finally:
            tracing.REQUEST_ID.reset(token)
        metrics.requests.labels(route, str(response.status_code)).inc()
        response.headers["X-Request-Id"] = request_id
        return response
