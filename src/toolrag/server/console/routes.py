"""The console's pages and forms. Every page reads the caller the guard authenticated (session cookie or bearer
token); every form that changes something is checked against the session's CSRF token and needs an admin.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

import difflib
import json
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Form, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from toolrag.access import Caller
from toolrag.access.guard import CALLER_KEY, Authenticator, FailureLimiter, Refused, client_address
from toolrag.errors import EditConflictError, ToolNotFoundError, ToolragError
from toolrag.limits import MAX_MESSAGE_CHARS
from toolrag.model import MAX_EXAMPLE_CHARS, Principal, Tool, utc_now
from toolrag.monitor.reading import Reading
from toolrag.registry import ToolRegistry
from toolrag.search.groups import group_of
from toolrag.server.console.impact import Impact, affected_requests, measure_edit
from toolrag.server.console.session import PREFIX, ConsoleSessions, new_form_token
from toolrag.store.usage import EVERYONE, Audience

HERE = Path(__file__).parent
# No script may run, styles and images only from this server, forms only to it, never framed.
POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none';"
    " base-uri 'none'"
)
STATUSES = ("active", "deactivated", "quarantined", "pinned")
Upstreams = Callable[[], list[dict[str, Any]]]
R = TypeVar("R", bound=Response)


def console_router(
    registry: ToolRegistry,
    authenticate: Authenticator,
    upstreams: Upstreams | None,
    sessions: ConsoleSessions,
    failures: FailureLimiter,
) -> APIRouter:
    """The console's routes. `upstreams`: the MCP upstreams' states, when the API serves the gateway's tools.
    `sessions`: the open sessions; `failures`: the guard's limits on failed authentications, which sign-ins share."""
    router = APIRouter(prefix=PREFIX.rstrip("/"), include_in_schema=False)
    # StrictUndefined: a template naming a value the page did not pass fails its test instead of rendering "".
    templates = Jinja2Templates(
        env=Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined)
    )

    def page(request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        who = request.scope.get(CALLER_KEY)
        session = sessions.of(request)
        context = {"error": None} | context
        context |= {"who": who, "csrf": session.csrf if session else "", "upstreams_shown": upstreams is not None}
        response = templates.TemplateResponse(request, template, context, status_code=status)
        return secured(response)

    def caller(request: Request) -> Caller:
        who = request.scope.get(CALLER_KEY)
        if not isinstance(who, Caller):  # the guard redirects to the sign-in page before a route runs
            raise HTTPException(401, "sign in first")
        return who

    def admin(request: Request, csrf: str | None) -> Caller:
        """A state-changing form: from this session's page, sent by an admin."""
        sessions.check_form(request, csrf)
        who = caller(request)
        if who.role != "admin":
            raise HTTPException(403, f"token {who.name!r} is {who.role}: only admins change tools")
        return who

    def audience(who: Caller) -> Audience:
        return EVERYONE if who.role == "admin" else Audience.of(who.principal)

    def visible_tool(who: Caller, name: str) -> Tool:
        tool = registry.get(name)
        if who.role != "admin" and not who.principal.can_use(tool):
            raise ToolNotFoundError(f"no tool named {name!r}")  # another tenant's tool is not even confirmed
        return tool.seen_by(who.principal.tenant, everything=who.role == "admin")

    # -- signing in ---------------------------------------------------------------------------------------------

    @router.get("/static/console.css")
    def stylesheet() -> FileResponse:
        return FileResponse(HERE / "static" / "console.css", media_type="text/css")

    def login_form(request: Request, status: int = 200, error: str | None = None) -> HTMLResponse:
        """The sign-in page, with a new form token (in the form and in its cookie)."""
        form = new_form_token()
        response = page(request, "login.html", status, error=error, login_csrf=form)
        sessions.login_form(request, response, form)
        return response

    @router.get("/login")
    def login_page(request: Request) -> HTMLResponse:
        return login_form(request)

    @router.post("/login")
    async def login(
        request: Request,
        token: Annotated[str, Form(max_length=8192)],
        csrf: Annotated[str | None, Form(max_length=200)] = None,
    ) -> Response:
        sessions.check_login(request, csrf)
        token, client = token.strip(), client_address(request.scope)
        if token and (wait := failures.retry_after(token)) > 0:
            return login_form(request, 429, f"too many failed attempts: wait {max(1, round(wait))} s")
        try:
            found = await authenticate(token, request.scope) if token else None
            refused = None if found is not None else "that is not a token of this server"
        except Refused as refusal:
            refused = refusal.detail
        if refused is not None:
            if (wait := failures.failed(client, token)) > 0:
                return login_form(request, 429, f"too many failed attempts: wait {max(1, round(wait))} s")
            return login_form(request, 401, refused)
        response = RedirectResponse(PREFIX, status_code=303)
        sessions.sign_in(request, response, token)
        return secured(response)

    @router.post("/logout")
    def logout(request: Request, csrf: Annotated[str | None, Form()] = None) -> Response:
        sessions.check_form(request, csrf)
        response = RedirectResponse(f"{PREFIX}login", status_code=303)
        sessions.sign_out(request, response)
        return secured(response)

    # -- pages --------------------------------------------------------------------------------------------------

    @router.get("/")
    def overview(request: Request) -> HTMLResponse:
        who = caller(request)
        since = utc_now() - timedelta(days=30)
        tools = registry.tools(include_inactive=True) if who.role == "admin" else registry.visible_tools(who.principal)
        totals = registry.store.usage.totals(since, audience(who))
        pending = [p for p in registry.store.pins() if p.quarantined] if who.role == "admin" else []
        return page(request, "overview.html", tools=tools, totals=totals, pending=pending)

    @router.get("/playground")
    def playground(
        request: Request,
        q: Annotated[str, Query(max_length=MAX_MESSAGE_CHARS)] = "",
        k: Annotated[int, Query(ge=1, le=5)] = 3,
        user: Annotated[str, Query(max_length=200)] = "",
        tenant: Annotated[str, Query(max_length=200)] = "",
        scopes: Annotated[str, Query(max_length=2000)] = "",
    ) -> HTMLResponse:
        """Admins may search as any principal; everyone else searches as their own token's."""
        who = caller(request)
        principal = who.principal
        if who.role == "admin" and (user or tenant or scopes):
            held = frozenset(s.strip() for s in scopes.split(",") if s.strip())
            principal = Principal(user=user or None, tenant=tenant or None, scopes=held)
        explanation = None
        if q.strip():
            explanation = registry.explain(q, principal, k, reveal_hidden=who.role == "admin")
        return page(request, "playground.html", q=q, k=k, principal=principal, explanation=explanation)

    @router.get("/tools")
    def tools_page(
        request: Request,
        q: Annotated[str, Query(max_length=200)] = "",
        group: Annotated[str, Query(max_length=200)] = "",
        server: Annotated[str, Query(max_length=200)] = "",
        status: Annotated[str, Query(max_length=20)] = "",
    ) -> HTMLResponse:
        who = caller(request)
        rows = _tool_rows(registry, who)
        groups = sorted({row["group"] for row in rows if row["group"]})
        servers = sorted({row["server"] for row in rows if row["server"]})
        shown = [
            row
            for row in rows
            if (not q or q.lower() in row["name"].lower() or q.lower() in row["purpose"].lower())
            and (not group or row["group"] == group)
            and (not server or row["server"] == server)
            and (not status or status in row["statuses"])
        ]
        filters = {"q": q, "group": group, "server": server, "status": status}
        return page(
            request, "tools.html", rows=shown, groups=groups, servers=servers, statuses=STATUSES, filters=filters
        )

    @router.get("/tools/{name}")
    def tool_page(
        request: Request,
        name: str,
        q: Annotated[str, Query(max_length=MAX_MESSAGE_CHARS)] = "",
        tenant: Annotated[str, Query(max_length=200)] = "",
    ) -> Response:
        who = caller(request)
        try:
            tool = visible_tool(who, name)
        except ToolNotFoundError as missing:
            return page(request, "error.html", 404, message=str(missing))
        history = [v.seen_by(who.principal.tenant, who.role == "admin") for v in registry.history(name)]
        if who.role != "admin":
            history = [v for v in history if who.principal.may_see(v)]
        pin = next((p for p in registry.store.pins() if p.tool == name), None) if who.role == "admin" else None
        candidates = registry.promotable_requests(name) if who.role == "admin" else []
        return page(
            request,
            "tool.html",
            tool=tool,
            schema=json.dumps(tool.input_schema, indent=2, ensure_ascii=False),
            history=history,
            pin=pin,
            candidates=candidates[:20],
            fixing=q,
            fixing_tenant=tenant,
        )

    @router.get("/tools/{name}/diff")
    def diff_page(
        request: Request, name: str, a: Annotated[int, Query(ge=1)], b: Annotated[int, Query(ge=1)]
    ) -> Response:
        who = caller(request)
        try:
            visible_tool(who, name)
        except ToolNotFoundError as missing:
            return page(request, "error.html", 404, message=str(missing))
        versions = {v.version: v for v in registry.history(name)}
        if a not in versions or b not in versions:
            return page(request, "error.html", 404, message=f"{name!r} has versions {', '.join(map(str, versions))}")
        admin_view = who.role == "admin"
        older, newer = (versions[v].seen_by(who.principal.tenant, admin_view) for v in (a, b))
        if not admin_view and not (who.principal.may_see(older) and who.principal.may_see(newer)):
            return page(request, "error.html", 404, message=f"no version {a} or {b} of {name!r} for this principal")
        return page(request, "diff.html", name=name, a=a, b=b, lines=_diff(older, newer))

    # -- edits (admins) -------------------------------------------------------------------------------------------

    @router.post("/tools/{name}/edit")
    def edit_tool(
        request: Request,
        name: str,
        description: Annotated[str, Form(max_length=8192)],
        aliases: Annotated[str, Form(max_length=8192)] = "",
        not_for: Annotated[str, Form(max_length=2000)] = "",
        category: Annotated[str, Form(max_length=200)] = "",
        fixing: Annotated[str, Form(max_length=MAX_MESSAGE_CHARS)] = "",
        fixing_tenant: Annotated[str, Form(max_length=200)] = "",
        version: Annotated[int | None, Form(ge=1)] = None,
        csrf: Annotated[str | None, Form()] = None,
    ) -> Response:
        """The form replaces every field it shows: a compare-and-set on the version the page showed (`version`), so
        an edit made meanwhile elsewhere (the API, another operator, a sync) is never overwritten unseen."""
        who = admin(request, csrf)
        changes = {
            "description": description,
            "aliases": [line.strip() for line in aliases.splitlines() if line.strip()],
            "not_for": not_for.strip() or None,
            "category": category.strip() or None,
        }
        return edited(
            request,
            who,
            name,
            lambda: registry.update(name, edited_by=who.name, expected_version=version, **changes),
            fixing,
            fixing_tenant,
        )

    @router.post("/tools/{name}/examples")
    def change_example(
        request: Request,
        name: str,
        text: Annotated[str, Form(max_length=MAX_EXAMPLE_CHARS)],
        tenant: Annotated[str, Form(max_length=200)] = "",
        action: Annotated[str, Form(pattern="^(add|promote|remove)$")] = "add",
        fixing: Annotated[str, Form(max_length=MAX_MESSAGE_CHARS)] = "",
        fixing_tenant: Annotated[str, Form(max_length=200)] = "",
        csrf: Annotated[str | None, Form()] = None,
    ) -> Response:
        who = admin(request, csrf)
        owner = tenant.strip() or None
        if action == "remove":
            change: Callable[[], object] = lambda: registry.remove_example(name, text, owner, edited_by=who.name)  # noqa: E731
        else:
            source: Literal["operator", "usage"] = "usage" if action == "promote" else "operator"
            change = lambda: registry.add_example(name, text, owner, source, edited_by=who.name)  # noqa: E731
        return edited(
            request, who, name, change, fixing or (text if action != "remove" else ""), fixing_tenant or tenant
        )

    @router.post("/tools/{name}/overrides")
    def drop_override(
        request: Request,
        name: str,
        field: Annotated[str, Form(pattern="^(description|input_schema|output_schema|annotations)$")],
        csrf: Annotated[str | None, Form()] = None,
    ) -> Response:
        """Give a field an operator replaced back to the tool's MCP server (`ToolRegistry.drop_overrides`)."""
        who = admin(request, csrf)
        return edited(request, who, name, lambda: registry.drop_overrides(name, [field], edited_by=who.name), "", "")

    @router.post("/tools/{name}/active")
    def set_active(
        request: Request,
        name: str,
        active: Annotated[bool, Form()],
        csrf: Annotated[str | None, Form()] = None,
    ) -> Response:
        who = admin(request, csrf)
        return edited(request, who, name, lambda: registry.set_active(name, active, edited_by=who.name), "", "")

    @router.post("/quarantine/{name}")
    def decide_quarantine(
        request: Request,
        name: str,
        decision: Annotated[str, Form(pattern="^(approve|reject)$")],
        csrf: Annotated[str | None, Form()] = None,
    ) -> Response:
        who = admin(request, csrf)
        from toolrag.mcp.importer import approve_quarantined, reject_quarantined

        decide = approve_quarantined if decision == "approve" else reject_quarantined
        try:
            decide(registry, [name], who.name)
        except ToolragError as problem:
            return page(request, "error.html", 409, message=str(problem))
        return secured(RedirectResponse(f"{PREFIX}upstreams", status_code=303))

    def edited(
        request: Request, who: Caller, name: str, change: Callable[[], object], fixing: str, fixing_tenant: str
    ) -> Response:
        """Make the edit between two replays of the logged requests it may affect; show what moved."""
        try:
            registry.get(name)
            target = (fixing.strip(), fixing_tenant.strip() or None) if fixing.strip() else None
            requests = affected_requests(registry, name, audience(who), target)
            impact: Impact = measure_edit(registry, requests, change, fixing=target is not None)
        except EditConflictError as conflict:
            return page(request, "conflict.html", 409, message=str(conflict), name=name)
        except ToolragError as problem:
            return page(request, "error.html", 422, message=str(problem))
        return page(request, "impact.html", name=name, tool=registry.get(name), impact=impact)

    # -- what went wrong ------------------------------------------------------------------------------------------

    @router.get("/misses")
    def misses(request: Request, days: Annotated[int, Query(ge=1, le=365)] = 30) -> HTMLResponse:
        who = caller(request)
        since = utc_now() - timedelta(days=days)
        usage = registry.store.usage
        reading = Reading.of(registry, who)  # what /reports/health shows this caller, and nothing more
        mine = reading.audience
        no_tool = [e for e in usage.recent_requests(since, 200, mine) if not e.tools][:50]
        report = reading.report(registry, days)
        low = [(u, usage.requests_for_tool(u.tool, since, 5, mine)) for u in report.low_relevance]
        unshortlisted = reading.unshortlisted(usage, since, 50)
        return page(request, "misses.html", no_tool=no_tool, low=low, unshortlisted=unshortlisted, days=days)

    @router.get("/upstreams")
    def upstreams_page(request: Request) -> HTMLResponse:
        who = caller(request)
        states = [
            s
            for s in (upstreams() if upstreams else [])
            if who.role == "admin" or who.principal.may_name(f"{s['name']}.")
        ]
        pins = registry.store.pins() if who.role == "admin" else []
        return page(request, "upstreams.html", states=states, pins=pins)

    @router.get("/audit")
    def audit(
        request: Request,
        principal: Annotated[str, Query(max_length=200)] = "",
        tool: Annotated[str, Query(max_length=200)] = "",
        outcome: Annotated[str, Query(max_length=40)] = "",
        days: Annotated[int, Query(ge=1, le=365)] = 30,
    ) -> HTMLResponse:
        who = caller(request)
        since = utc_now() - timedelta(days=days)
        reading = Reading.of(registry, who)  # calls of tools it may use, answered as their callers were
        calls = reading.calls(registry.store.usage, since, 200, principal or None, tool or None, outcome or None)
        changes = registry.store.audit_log(200, tool or None) if who.role == "admin" else []
        filters = {"principal": principal, "tool": tool, "outcome": outcome, "days": days}
        return page(request, "audit.html", calls=calls, changes=changes, filters=filters)

    return router


def secured(response: R) -> R:
    response.headers["Content-Security-Policy"] = POLICY
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    # Requests in the URL stay on this server; and same-origin, not no-referrer: under no-referrer a browser sends
    # `Origin: null` with the console's own forms, which could then not be told from a sandboxed frame's.
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    return response


def _tool_rows(registry: ToolRegistry, who: Caller) -> list[dict[str, Any]]:
    """Every tool the caller may see, with its statuses; admins also see inactive and quarantined-new tools."""
    admin = who.role == "admin"
    pins = {p.tool: p for p in registry.store.pins()} if admin else {}
    tools = registry.tools(include_inactive=True) if admin else registry.visible_tools(who.principal)
    known = {t.name for t in tools}
    tools += [p.pending for p in pins.values() if p.pending is not None and p.tool not in known]
    rows = []
    for tool in tools:
        pin = pins.get(tool.name)
        statuses = ["active" if tool.active and tool.name in known else "deactivated"]
        statuses += ["quarantined"] if pin is not None and pin.quarantined else []
        statuses += ["pinned"] if pin is not None and pin.approved_hash else []
        rows.append(
            {
                "name": tool.name,
                "purpose": tool.purpose(),
                "group": group_of(tool) or "",
                "server": tool.source[4:] if tool.source.startswith("mcp:") else "",
                "statuses": statuses,
                "version": tool.version,
                "examples": len(tool.seen_by(who.principal.tenant, admin).examples),
            }
        )
    return sorted(rows, key=lambda row: row["name"])


def _diff(older: Tool, newer: Tool) -> list[tuple[str, str]]:
    """The two versions' definitions as JSON, line by line: ("+", line), ("-", line) or (" ", line)."""

    def lines(tool: Tool) -> list[str]:
        return json.dumps(tool.definition(), indent=2, ensure_ascii=False, sort_keys=True).splitlines()

    return [
        (line[0], line[1:])
        for line in difflib.unified_diff(lines(older), lines(newer), lineterm="", n=3)
        if not line.startswith(("---", "+++", "@@"))
    ]
