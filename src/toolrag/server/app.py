"""The HTTP API (FastAPI): manage tools, search for the caller's principal, execute through the execution gateway,
reports, metrics, the dashboard. Every route needs a bearer token; a token's role limits what it may do.

(No `from __future__ import annotations` here: FastAPI reads the route annotations at run time.)"""

import json
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from datetime import datetime, timedelta
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, Field

from toolrag import __version__, tracing
from toolrag.access import Caller, Role
from toolrag.errors import (
    CatalogError,
    EditConflictError,
    InvalidToolError,
    ModelMismatchError,
    StoreError,
    ToolNotFoundError,
    ToolragError,
)
from toolrag.limits import MAX_MESSAGE_CHARS
from toolrag.model import (
    MAX_EXAMPLE_CHARS,
    ExampleRequest,
    Principal,
    Requirement,
    SearchResult,
    Strategy,
    Tool,
    utc_now,
)
from toolrag.monitor.reading import Reading
from toolrag.monitor.schedule import ScheduleHealth
from toolrag.monitor.startup import StartupCheck
from toolrag.registry import ToolRegistry
from toolrag.runtime.gateway import ExecutionPolicy, ToolGateway, permitted_tools
from toolrag.runtime.messages import ToolCall
from toolrag.search.explain import Explanation
from toolrag.server.config import ApiConfig
from toolrag.server.console import PREFIX as CONSOLE_PREFIX
from toolrag.server.console import ConsoleSessions, console_router
from toolrag.server.dashboard import render_dashboard
from toolrag.server.guard import CALLER_KEY, FailureLimiter, RequestGuard
from toolrag.server.metrics import ApiMetrics
from toolrag.server.oauth import JwtVerifier, caller_authenticator
from toolrag.server.rate_limit import Kind, RateLimiter, retry_after

Format = Literal["openai", "openai-responses", "anthropic", "mcp", "gemini"]


class ToolIn(BaseModel):
    """A tool to register (the same fields as a catalog entry)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    description: str
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    category: str | None = None
    aliases: list[str] = Field(default_factory=list)
    not_for: str | None = None
    scopes: list[str] = Field(default_factory=list)
    tenants: list[str] = Field(default_factory=list)
    requires: list[Requirement] = Field(default_factory=list, description="tools this one needs")
    return_direct: bool = False


class ToolPatch(BaseModel):
    """Fields to change; each change is a new version."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = None
    input_schema: dict[str, Any] | None = None
    category: str | None = None
    aliases: list[str] | None = None
    not_for: str | None = None
    examples: list[ExampleRequest] | None = None
    scopes: list[str] | None = None
    tenants: list[str] | None = None
    requires: list[Requirement] | None = None
    active: bool | None = None
    version: int | None = Field(
        default=None,
        ge=1,
        description="the version this edit was made from: 409, nothing written, when the tool has moved on since",
    )


class UpsertOut(BaseModel):
    added: list[str]
    updated: list[str]
    unchanged: list[str]


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(
        min_length=1,
        max_length=MAX_MESSAGE_CHARS,
        description="the request; search reads a bounded view of a long one (data blobs left out), and says so",
    )
    k: int | None = Field(default=None, ge=1, le=5)
    session: str | None = Field(default=None, max_length=200)
    format: Format = "openai"


class SearchOut(BaseModel):
    strategy: Strategy = Field(
        description="`all`: the principal's whole catalog fit the token budget and is returned whole, by relevance;"
        " `retrieval`: the best tools were retrieved"
    )
    results: list[SearchResult]
    tools: list[dict[str, Any]] = Field(description="the chosen tools' full definitions in the requested format")
    injected_tokens: int
    catalog_tokens: int
    request_note: str | None = Field(
        default=None, description="what search left out of a long request (none when it read the whole request)"
    )


class PrincipalIn(BaseModel):
    """Whom an operator explains a search for (admin tokens only; others explain for their own principal)."""

    model_config = ConfigDict(extra="forbid")

    user: str | None = Field(default=None, max_length=200)
    tenant: str | None = Field(default=None, max_length=200)
    scopes: list[str] = Field(default_factory=list, max_length=100)

    def principal(self) -> Principal:
        return Principal(user=self.user, tenant=self.tenant, scopes=frozenset(self.scopes))


class ExplainIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    k: int | None = Field(default=None, ge=1, le=5)
    format: Format = "openai"
    principal: PrincipalIn | None = Field(
        default=None, description="explain for this principal instead of the token's own (admin tokens only)"
    )


class ExampleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_EXAMPLE_CHARS)
    tenant: str | None = Field(default=None, max_length=200, description="whose searches it serves; none: all")
    source: Literal["operator", "usage"] = "operator"


class OverridesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    fields: list[Literal["description", "input_schema", "output_schema", "annotations"]] = Field(
        min_length=1, max_length=4, description="fields an operator replaced, to return to their source's value"
    )


class ExecuteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=200)
    arguments: dict[str, Any] = Field(default_factory=dict)
    session: str | None = Field(default=None, max_length=200)


class ExecuteOut(BaseModel):
    outcome: str
    is_error: bool
    content: str


class ToolOut(BaseModel):
    name: str
    version: int
    active: bool
    category: str | None
    scopes: list[str]
    card: str


Executor = Callable[[str, dict[str, Any], Principal, str], Awaitable[ExecuteOut]]


class StartupOut(BaseModel):
    checked_at: datetime
    ok: bool = Field(description="every tool was searchable when the server started (after repairs)")
    missing_embeddings: int = Field(description="tools that had no embedding for the index's model")
    repaired: bool = Field(description="those tools were embedded before the server started")
    orphans: list[str] = Field(description="tools whose function or MCP server is gone, with why (admin tokens only)")


class ScheduleOut(BaseModel):
    ok: bool = Field(description="the scheduler's latest tick worked (it reads and writes the store)")
    failures: int = Field(description="failed ticks in a row")
    failing_since: datetime | None
    error: str | None = Field(description="what the latest failed tick raised (admin tokens only)")
    retry_in_seconds: float | None = Field(description="while failing: the back-off before the next try")


class Health(BaseModel):
    status: Literal["ok"]
    tools: int = Field(description="active tools (for tokens other than admin: those its principal may use)")
    generation: int | None = Field(description="the registry's change counter (admin tokens only)")
    model: str | None
    startup: StartupOut | None = Field(default=None, description="what the check before serving found and did")
    schedule: ScheduleOut | None = Field(default=None, description="how the scheduled jobs' ticks are going")


_ERRORS: list[tuple[type[Exception], int]] = [
    (ToolNotFoundError, 404),
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
    upstreams: Callable[[], list[dict[str, Any]]] | None = None,
    *,
    schedule: Callable[[], ScheduleHealth] | None = None,
) -> FastAPI:
    """The API over a registry. Tools run in this process (`registry.function`) unless `execute` says otherwise
    (the MCP gateway's forwarder, whose upstream connections `lifespan` keeps open). `startup`: what the check
    before serving found, shown by /health. `upstreams`: the MCP upstreams' states, for the console. `schedule`:
    how the scheduled jobs' ticks are going, shown by /health."""
    metrics = ApiMetrics(registry)
    limiter = RateLimiter(config.rate_limits)
    app = FastAPI(
        title="toolrag",
        version=__version__,
        description="Tool selection as retrieval: a permission-aware tool registry for LLM agents.",
        lifespan=lifespan,
        # toolrag's own request span (below) is the root of each request's trace: FastAPI's would be a second root.
        telemetry={"tracing": False},
    )

    verifier = JwtVerifier(config.oauth) if config.oauth else None
    authenticate = caller_authenticator(config.policy(), verifier)

    # Every route, the OpenAPI description included, needs a token, checked before any body is read; only the
    # dashboard (a page a browser opens) takes it as `?token=`, and only OAuth's resource metadata is public.
    # The console's pages authenticate with a session cookie instead (server/console/session.py).
    metadata = config.oauth.metadata_routes() if config.oauth else []
    app.router.routes.extend(metadata)
    sessions, failures = ConsoleSessions(), FailureLimiter(config.http)
    app.include_router(console_router(registry, authenticate, upstreams, sessions, failures))
    console_public = {f"{CONSOLE_PREFIX}login", f"{CONSOLE_PREFIX}static/console.css"}
    app.add_middleware(
        RequestGuard,
        authenticate=authenticate,
        limits=config.http,
        challenge=config.oauth.challenge() if config.oauth else 'Bearer realm="toolrag"',
        query_token_paths=frozenset({"/dashboard"}),
        public_paths=frozenset(route.path for route in metadata) | console_public,
        console=sessions.cookie,
        failures=failures,
    )

    bearer = HTTPBearer(auto_error=False)  # describes the scheme in the OpenAPI document; the guard checks it

    # Dependencies are `async def`: they only read what the guard found, and a plain `def` costs every request a
    # trip through the thread pool, which under 100 clients was most of an /execute's time.
    async def caller(request: Request, _: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]) -> Caller:
        who = request.scope.get(CALLER_KEY)
        if not isinstance(who, Caller):  # the guard answers 401 before a route runs
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        return who

    def allowed(role: Role) -> Callable[[Caller], Awaitable[Caller]]:
        async def check(who: Annotated[Caller, Depends(caller)]) -> Caller:
            if not who.may(role):
                raise HTTPException(403, f"token {who.name!r} is {who.role}; this needs {role}")
            return who

        return check

    def within_rate(who: Caller, kind: Kind) -> None:
        wait = limiter.wait(who.principal, kind)
        if wait > 0:
            metrics.rate_limited.labels(kind).inc()
            raise HTTPException(
                429,
                f"rate limit: the {kind} rate for token {who.name!r} is used up; retry in {retry_after(wait)} s",
                headers={"Retry-After": retry_after(wait)},
            )

    Reader = Annotated[Caller, Depends(allowed("reader"))]
    AgentRole = Annotated[Caller, Depends(allowed("agent"))]
    Admin = Annotated[Caller, Depends(allowed("admin"))]

    @app.exception_handler(ToolragError)
    async def toolrag_error(request: Request, exc: ToolragError) -> JSONResponse:
        status = next(code for kind, code in _ERRORS if isinstance(exc, kind))
        return JSONResponse({"detail": str(exc)}, status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        """What is wrong and where, without echoing the input: it may be a megabyte, or not even encodable (a lone
        surrogate made FastAPI's own answer fail with a 500)."""
        problems = [{"loc": list(error["loc"]), "msg": error["msg"], "type": error["type"]} for error in exc.errors()]
        return JSONResponse({"detail": problems[:20]}, status_code=422)

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

    @app.get("/health", response_model=Health, tags=["operations"])
    def health(who: Reader) -> Health:
        model = registry.store.index_model()
        checked = startup_out(who)
        admin = who.role == "admin"
        ticks = ScheduleOut.model_validate(schedule().shown(admin)) if schedule else None
        if admin:
            return Health(
                status="ok",
                tools=registry.snapshot().live_count,
                generation=registry.generation,
                model=model and model.model_id,
                startup=checked,
                schedule=ticks,
            )
        tools = len(registry.visible_tools(who.principal))
        model_id = model and model.model_id
        return Health(status="ok", tools=tools, generation=None, model=model_id, startup=checked, schedule=ticks)

    def startup_out(who: Caller) -> StartupOut | None:
        if startup is None:
            return None
        orphans = [f"{f.tools[0]}: {f.detail}" for f in startup.orphans] if who.role == "admin" else []
        return StartupOut(
            checked_at=startup.checked_at,
            ok=startup.ok,
            missing_embeddings=len(startup.missing_embeddings),
            repaired=startup.repaired,
            orphans=orphans,
        )

    def shown_to(who: Caller, tool: Tool) -> bool:
        """Admins manage every tool; any other token sees only the tools its principal may use."""
        return who.role == "admin" or who.principal.can_use(tool)

    @app.get("/tools", response_model=list[ToolOut], tags=["tools"])
    def list_tools(who: Reader, include_inactive: bool = False) -> list[ToolOut]:
        """Every tool for admin tokens; the tools its principal may use for any other token."""
        return [_tool_out(t) for t in registry.tools(include_inactive) if shown_to(who, t)]

    @app.get("/tools/{name}", response_model=Tool, tags=["tools"])
    def get_tool(name: str, who: Reader) -> Tool:
        """A tool as the token may read it: other tenants' example requests (their users' words) left out."""
        tool = registry.get(name)
        if not shown_to(who, tool):
            raise ToolNotFoundError(f"no tool named {name!r}")  # hidden tools are not even confirmed to exist
        return tool.seen_by(who.principal.tenant, everything=who.role == "admin")

    @app.get("/tools/{name}/history", response_model=list[Tool], tags=["tools"])
    def tool_history(name: str, who: Reader) -> list[Tool]:
        """Every version of a tool; for tokens other than admin, only versions their principal may see (an earlier
        version restricted to another tenant stays that tenant's)."""
        get_tool(name, who)
        admin, tenant = who.role == "admin", who.principal.tenant
        return [v.seen_by(tenant, admin) for v in registry.history(name) if admin or who.principal.may_see(v)]

    @app.post("/tools", response_model=UpsertOut, tags=["tools"])
    def register_tools(tools: list[ToolIn], who: Admin) -> UpsertOut:
        """Add or update tools, all in one transaction: the fields a tool is posted with replace the current ones,
        those it leaves out (an operator's tenants, examples, ...) are kept; compare-and-set on the versions read."""
        parsed = [Tool.parse({**t.model_dump(exclude_unset=True), "source": "api"}) for t in tools]
        report = registry.register_over(parsed)
        return UpsertOut(added=report.added, updated=report.updated, unchanged=report.unchanged)

    @app.patch("/tools/{name}", response_model=Tool, tags=["tools"])
    def update_tool(name: str, patch: ToolPatch, who: Admin) -> Tool:
        """Replace some fields (a new version), compare-and-set on `version` when given, else on the version the
        server read: 409 when another writer changed the tool in between (nothing is written; reload and redo)."""
        changes = patch.model_dump(exclude_unset=True)
        expected = changes.pop("version", None)
        if not changes:
            raise HTTPException(422, "nothing to change")
        return registry.update(name, edited_by=who.name, expected_version=expected, **changes)

    @app.post("/tools/{name}/deactivate", response_model=Tool, tags=["tools"])
    def deactivate(name: str, who: Admin) -> Tool:
        return registry.set_active(name, False, edited_by=who.name)

    @app.post("/tools/{name}/reactivate", response_model=Tool, tags=["tools"])
    def reactivate(name: str, who: Admin) -> Tool:
        return registry.set_active(name, True, edited_by=who.name)

    @app.post("/tools/{name}/overrides/remove", response_model=Tool, tags=["tools"])
    def remove_overrides(name: str, body: OverridesIn, who: Admin) -> Tool:
        """Return fields of an MCP server's tool that an operator replaced (`overrides`) to the server's value (a new
        version): syncs keep them current again. 422 for a field that is not overridden."""
        return registry.drop_overrides(name, body.fields, edited_by=who.name)

    @app.post("/tools/{name}/examples", response_model=Tool, tags=["tools"])
    def add_example(name: str, body: ExampleIn, who: Admin) -> Tool:
        """One more example request (a new version): searches like it, of that tenant, find the tool. Made on the
        tool as it is at the write: concurrent additions all stay."""
        return registry.add_example(name, body.text, body.tenant, body.source, edited_by=who.name)

    @app.post("/tools/{name}/examples/remove", response_model=Tool, tags=["tools"])
    def remove_example(name: str, body: ExampleIn, who: Admin) -> Tool:
        return registry.remove_example(name, body.text, body.tenant, edited_by=who.name)

    @app.post("/search", response_model=SearchOut, tags=["agents"])
    def search(body: SearchIn, who: Reader) -> SearchOut:
        """The tools for a request, as the token's principal may see them, rendered for a provider."""
        within_rate(who, "search")
        started = time.perf_counter()
        selection = registry.select(body.query, who.principal, body.format, body.k, who.session(body.session))
        metrics.search_seconds.observe(time.perf_counter() - started)
        metrics.searches.labels(str(bool(selection.results)).lower()).inc()
        return SearchOut(
            strategy=selection.strategy,
            results=selection.results,
            tools=selection.tools,
            injected_tokens=selection.injected_tokens,
            catalog_tokens=selection.catalog_tokens,
            request_note=selection.request_note,
        )

    @app.post("/explain", response_model=Explanation, tags=["agents"])
    def explain(body: ExplainIn, who: Reader) -> Explanation:
        """What /search delivers for the request and why, signal by signal, nothing logged. Admin tokens may name
        another principal and also see the near tools that principal may not use, with the rule hiding each."""
        within_rate(who, "search")
        if body.principal is not None and who.role != "admin":
            raise HTTPException(403, f"token {who.name!r} is {who.role}; explaining for another principal needs admin")
        principal = body.principal.principal() if body.principal is not None else who.principal
        return registry.explain(body.query, principal, body.k, body.format, reveal_hidden=who.role == "admin")

    @app.post("/execute", response_model=ExecuteOut, tags=["agents"])
    async def run_tool(body: ExecuteIn, who: AgentRole) -> ExecuteOut:
        """Run a tool through the execution gateway: authorization, name resolution, schema validation, timeout."""
        within_rate(who, "call")
        started = time.perf_counter()
        session = who.session(body.session) or uuid.uuid4().hex
        if execute is not None:
            result = await execute(body.name, body.arguments, who.principal, session)
        else:
            result = await _execute_here(registry, body, who.principal, session)
        metrics.calls.labels(result.outcome).inc()
        metrics.call_seconds.observe(time.perf_counter() - started)
        return result

    @app.get("/reports/health", tags=["reports"])
    def health_report(who: Reader, days: Annotated[int, Query(ge=1, le=3650)] = 30) -> dict[str, Any]:
        """Per-tool usage, dead, unused and low-relevance tools, and the requests behind retrieval misses."""
        return Reading.of(registry, who).report(registry, days).as_json()

    @app.get("/metrics", tags=["operations"], response_class=Response)
    def prometheus(who: Admin) -> Response:
        """Process and registry counters across every tenant: admin tokens only."""
        return Response(metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/dashboard", tags=["operations"], response_class=HTMLResponse)
    def dashboard(who: Reader, days: Annotated[int, Query(ge=1, le=3650)] = 30) -> HTMLResponse:
        """Registry health for people (the token may also come as `?token=`)."""
        reading = Reading.of(registry, who)  # the console's misses and audit pages read by the same rule
        report = reading.report(registry, days)
        since = utc_now() - timedelta(days=days)
        candidates = {u.tool for u in [*report.dead, *report.low_relevance]}
        usage = registry.store.usage
        offered = {name: usage.requests_for_tool(name, since, audience=reading.audience) for name in candidates}
        weekly = registry.store.usage.job_reports("report", 12) if who.role == "admin" else []  # every tenant's
        return HTMLResponse(render_dashboard(report, offered, weekly))

    return app


async def _execute_here(registry: ToolRegistry, body: ExecuteIn, principal: Principal, session: str) -> ExecuteOut:
    policy = ExecutionPolicy()
    permitted = await anyio.to_thread.run_sync(permitted_tools, registry, principal, policy.fuzzy_cutoff)
    gateway = ToolGateway(permitted, (), principal, registry.function, policy=policy, events=registry.usage)
    result = await gateway.call(ToolCall(uuid.uuid4().hex, body.name, json.dumps(body.arguments)), set(), session)
    return ExecuteOut(outcome=result.outcome, is_error=result.message.is_error, content=result.message.content)


def _tool_out(tool: Tool) -> ToolOut:
    return ToolOut(
        name=tool.name,
        version=tool.version,
        active=tool.active,
        category=tool.category,
        scopes=tool.scopes,
        card=tool.card().text(),
    )
