"""The console's tool pages: the overview, the playground (search and explain), the tool list, a tool, a diff of
two of its versions, a quarantined MCP tool under review. Every page shows what the signed-in caller may see
(`Caller.sees`, `Caller.view`).

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

import difflib
import json
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, Response

from toolrag.access import Caller
from toolrag.errors import ToolNotFoundError
from toolrag.limits import MAX_MESSAGE_CHARS
from toolrag.mcp.review import pending_review
from toolrag.model import Tool, utc_now
from toolrag.monitor.reading import Reading
from toolrag.registry import ToolRegistry
from toolrag.search.groups import group_of
from toolrag.server.console.common import Console, Who, chosen_principal
from toolrag.server.console.tool_calls import tool_calls
from toolrag.server.principals import relations_shown
from toolrag.server.served import Api

STATUSES = ("active", "deactivated", "quarantined", "pinned")

router = APIRouter()


@router.get("/")
def overview(request: Request, console: Console, who: Who) -> HTMLResponse:
    registry = console.registry
    since = utc_now() - timedelta(days=30)
    tools = registry.tools(include_inactive=True) if who.is_admin else registry.visible_tools(who.principal)
    reading = Reading.of(registry, who)  # a reader's calls of tools it may use, as the dashboard counts them
    totals = registry.store.usage.totals(since, reading.audience, reading.usable)
    pending = [p for p in registry.store.pins() if p.quarantined] if who.is_admin else []
    return console.page(request, "overview.html", tools=tools, totals=totals, pending=pending)


@router.get("/playground")
def playground(
    request: Request,
    console: Console,
    api: Api,
    who: Who,
    q: Annotated[str, Query(max_length=MAX_MESSAGE_CHARS)] = "",
    k: Annotated[int, Query(ge=1, le=5)] = 3,
    user: Annotated[str, Query(max_length=200)] = "",
    tenant: Annotated[str, Query(max_length=200)] = "",
    scopes: Annotated[str, Query(max_length=2000)] = "",
) -> HTMLResponse:
    """Admins may search as any principal; everyone else searches as their own token's."""
    principal = chosen_principal(who, user, tenant, scopes)
    explanation = None
    if q.strip():
        try:
            api.within_rate(who, "search")  # the caller's own search rate, as /explain counts it
        except HTTPException as limited:
            return console.page(
                request, "playground.html", 429, q=q, k=k, principal=principal, explanation=None, error=limited.detail
            )
        explanation = console.registry.explain(q, principal, k, reveal_hidden=who.may_explain_for())
    return console.page(request, "playground.html", q=q, k=k, principal=principal, explanation=explanation)


@router.get("/tools")
def tools_page(
    request: Request,
    console: Console,
    who: Who,
    q: Annotated[str, Query(max_length=200)] = "",
    group: Annotated[str, Query(max_length=200)] = "",
    server: Annotated[str, Query(max_length=200)] = "",
    status: Annotated[str, Query(max_length=20)] = "",
) -> HTMLResponse:
    rows = _tool_rows(console.registry, who)
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
    return console.page(
        request, "tools.html", rows=shown, groups=groups, servers=servers, statuses=STATUSES, filters=filters
    )


@router.get("/tools/{name}")
def tool_page(
    request: Request,
    console: Console,
    who: Who,
    name: str,
    q: Annotated[str, Query(max_length=MAX_MESSAGE_CHARS)] = "",
    tenant: Annotated[str, Query(max_length=200)] = "",
) -> Response:
    registry = console.registry
    try:
        tool = console.visible_tool(who, name)
    except ToolNotFoundError as missing:
        return console.error(request, 404, str(missing))
    history = [who.view(v) for v in registry.history(name) if who.sees_version(v)]
    pin = next((p for p in registry.store.pins() if p.tool == name), None) if who.is_admin else None
    candidates = registry.examples.promotable(name) if who.is_admin else []
    return console.page(
        request,
        "tool.html",
        tool=tool,
        schema=_json(tool.input_schema),
        history=history,
        pin=pin,
        candidates=candidates[:20],
        fixing=q,
        fixing_tenant=tenant,
        calls=tool_calls(registry, who, name),
        relations=relations_shown(who, registry, name),
    )


@router.get("/tools/{name}/pending")
def pending_page(request: Request, console: Console, who: Who, name: str) -> Response:
    """A quarantined MCP tool whole, for an admin to review before deciding: its text as its server lists it,
    every finding, the diff against the approved version. Anyone else gets what a tool that does not exist gets."""
    review = pending_review(console.registry, name) if who.is_admin else None
    if review is None:
        return console.error(request, 404, f"no quarantined tool named {name!r}")
    return console.page(
        request,
        "pending.html",
        review=review,
        diff=review.diff(),
        schema=_json(review.tool.input_schema),
        output_schema=_json(review.tool.output_schema),  # what a model reads of its results
        annotations=_json(review.tool.annotations),  # `readOnlyHint` and the like: clients act on them unasked
    )


def _json(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value, indent=2, ensure_ascii=False)


@router.get("/tools/{name}/diff")
def diff_page(
    request: Request,
    console: Console,
    who: Who,
    name: str,
    a: Annotated[int | None, Query(ge=1)] = None,
    b: Annotated[int | None, Query(ge=1)] = None,
) -> Response:
    if a is None or b is None:  # a page, not FastAPI's JSON 422: someone followed or typed a link
        return console.error(request, 422, f"name two versions to compare: /console/tools/{name}/diff?a=1&b=2")
    try:
        console.visible_tool(who, name)
    except ToolNotFoundError as missing:
        return console.error(request, 404, str(missing))
    every = {v.version: v for v in console.registry.history(name)}
    # Only the versions the caller may see are named, and one answer for a version hidden and one never written:
    # the hidden versions of a tool are not even confirmed to exist (as /tools/NAME/history leaves them out).
    versions = {number: v for number, v in every.items() if who.sees_version(v)}
    if a not in versions or b not in versions:
        return console.error(request, 404, f"{name!r} has versions {', '.join(map(str, versions))} for you")
    older, newer = who.view(versions[a]), who.view(versions[b])
    current = max(versions)  # what a rollback from this page is compared against (the version shown)
    return console.page(request, "diff.html", name=name, a=a, b=b, lines=_diff(older, newer), current=current)


def _tool_rows(registry: ToolRegistry, who: Caller) -> list[dict[str, Any]]:
    """Every tool the caller may see, with its statuses; admins also see inactive and quarantined-new tools."""
    pins = {p.tool: p for p in registry.store.pins()} if who.is_admin else {}
    tools = registry.tools(include_inactive=True) if who.is_admin else registry.visible_tools(who.principal)
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
                "examples": len(who.view(tool).examples),
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
