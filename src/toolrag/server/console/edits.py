"""The console's forms that change tools (admins, from this session's pages: `ConsoleState.admin`): each edit is
made between two replays of the logged requests it may affect, and the page after it shows what moved.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from collections.abc import Callable, Sequence
from typing import Annotated, Literal
from urllib.parse import quote

from fastapi import APIRouter, Form, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import TypeAdapter, ValidationError

from toolrag.access import Caller
from toolrag.errors import (
    ApprovalConflictError,
    EditConflictError,
    InvalidToolError,
    ServerNotFoundError,
    ToolragError,
)
from toolrag.limits import MAX_MESSAGE_CHARS
from toolrag.mcp.review import described
from toolrag.model import MAX_DESCRIPTION_CHARS, MAX_EXAMPLE_CHARS, Tool, example_key
from toolrag.server.console.common import Console, ConsoleState, DecisionForm, confirm, secured
from toolrag.server.console.impact import Impact, affected_requests, measure_edit
from toolrag.server.console.session import PREFIX
from toolrag.server.console.usage import upstreams_view
from toolrag.store.relations import RelationKind

router = APIRouter()
# What an "approve all" form posts: tool -> text hash of each tool it showed waiting; room for thousands of them.
REVIEWED = TypeAdapter(dict[str, str])
MAX_REVIEWED_CHARS = 1_000_000


@router.post("/tools/{name}/edit")
def edit_tool(
    request: Request,
    console: Console,
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
    who = console.admin(request, csrf)
    changes = {
        "description": description,
        "aliases": [line.strip() for line in aliases.splitlines() if line.strip()],
        "not_for": not_for.strip() or None,
        "category": category.strip() or None,
    }
    held: list[bool] = []

    def update() -> Tool:
        edited = console.registry.update_reviewed(
            name, edited_by=who.actor, expected_version=version, origin="console", **changes
        )
        held.append(edited.held or edited.rejected)
        return edited.tool

    return _edited(console, request, who, name, update, fixing, fixing_tenant, held=held)


@router.post("/tools/{name}/examples")
def change_example(
    request: Request,
    console: Console,
    name: str,
    text: Annotated[str, Form(max_length=MAX_EXAMPLE_CHARS)],
    tenant: Annotated[str, Form(max_length=200)] = "",
    action: Annotated[str, Form(pattern="^(add|promote|remove)$")] = "add",
    fixing: Annotated[str, Form(max_length=MAX_MESSAGE_CHARS)] = "",
    fixing_tenant: Annotated[str, Form(max_length=200)] = "",
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    who, registry = console.admin(request, csrf), console.registry
    owner = tenant.strip() or None
    source: Literal["operator", "usage"] = "usage" if action == "promote" else "operator"
    held: list[bool] = []

    def change() -> None:
        if action == "remove":
            tool = registry.examples.remove(name, text, owner, edited_by=who.actor, origin="console")
        else:
            tool = registry.examples.add(name, text, owner, source, edited_by=who.actor, origin="console")
        present = any(e.key == example_key(text, owner) for e in tool.examples)
        held.append(present == (action == "remove"))  # the live examples did not move: the change waits for review

    fixing = fixing or (text if action != "remove" else "")
    return _edited(console, request, who, name, change, fixing, fixing_tenant or tenant, held=held)


@router.post("/tools/{name}/tenant-descriptions")
def change_tenant_description(
    request: Request,
    console: Console,
    name: str,
    tenant: Annotated[str, Form(max_length=200)],
    version: Annotated[int, Form(ge=1)],
    text: Annotated[str, Form(max_length=2 * MAX_DESCRIPTION_CHARS)] = "",
    action: Annotated[str, Form(pattern="^(set|remove)$")] = "set",
    fixing: Annotated[str, Form(max_length=MAX_MESSAGE_CHARS)] = "",
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """Describe the tool for one tenant (or give it the source's text again), compare-and-set on the version the
    page showed; the page after it shows what the poisoning check found in the text."""
    who, registry = console.admin(request, csrf), console.registry
    findings: list[str] = []
    held: list[bool] = []

    def change() -> None:
        if action == "remove":
            edited = registry.descriptions.drop(
                name, tenant, expected_version=version, edited_by=who.actor, origin="console"
            )
            held.append(edited.held or edited.rejected)
        else:
            done = described(registry, name, tenant, text, version, edited_by=who.actor, origin="console")
            findings.extend(done.findings)
            held.append(done.held)

    return _edited(console, request, who, name, change, fixing, tenant, findings=findings, held=held)


@router.post("/tools/{name}/overrides")
def drop_override(
    request: Request,
    console: Console,
    name: str,
    field: Annotated[str, Form(pattern="^(description|input_schema|output_schema|annotations)$")],
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """Give a field an operator replaced back to the tool's MCP server (`ToolRegistry.drop_overrides`)."""
    who = console.admin(request, csrf)
    held: list[bool] = []

    def drop() -> None:
        edited = console.registry.drop_overrides(name, [field], edited_by=who.actor, origin="console")
        held.append(edited.held or edited.rejected)

    return _edited(console, request, who, name, drop, "", "", held=held)


@router.post("/tools/{name}/active")
def set_active(
    request: Request,
    console: Console,
    name: str,
    active: Annotated[bool, Form()],
    csrf: Annotated[str | None, Form()] = None,
    confirmed: Annotated[bool, Form()] = False,
) -> Response:
    who = console.admin(request, csrf)
    if not active and not confirmed:
        question, consequence = f"Deactivate {name}?", "search stops offering it and calls of it fail"
        return confirm(console, request, question, consequence, {"active": "false"}, _tool_page(name))
    held: list[bool] = []

    def switch() -> None:
        switched = console.registry.set_active(name, active, edited_by=who.actor, origin="console")
        held.append(active and not switched.active)  # under text review a reactivation waits for an admin

    return _edited(console, request, who, name, switch, "", "", held=held)


@router.post("/tools/{name}/rollback")
def rollback_tool(
    request: Request,
    console: Console,
    name: str,
    to: Annotated[int, Form(ge=1)],
    expected_version: Annotated[int, Form(ge=1)],
    csrf: Annotated[str | None, Form()] = None,
    confirmed: Annotated[bool, Form()] = False,
) -> Response:
    """Restore an earlier version's content, asked first, compare-and-set on the version the diff page showed:
    a change made since (the API, a sync, another operator) is a conflict page, not overwritten unseen."""
    who = console.admin(request, csrf)
    if not confirmed:
        question = f"Restore version {to} of {name}?"
        consequence = f"version {to}'s content becomes a new version over version {expected_version}"
        fields = {"to": str(to), "expected_version": str(expected_version)}
        return confirm(console, request, question, consequence, fields, _tool_page(name))
    restore = lambda: console.registry.rollback(  # noqa: E731
        name, to, expected_version=expected_version, edited_by=who.actor
    )
    return _edited(console, request, who, name, restore, "", "")


@router.post("/quarantine/{name}")
def decide_quarantine(request: Request, console: Console, name: str, form: DecisionForm) -> Response:
    """Decide on the quarantined text the page showed (`text_hash`): another text waiting now is a conflict."""
    who = console.admin(request, form.csrf)
    decision, text_hash = form.decision, form.text_hash
    if not form.confirmed:
        pin = next((p for p in console.registry.store.pins() if p.tool == name), None)
        approved_before = pin is not None and pin.approved_hash is not None
        kept = "the last approved definition stays" if approved_before else "the tool stays out of search and calls"
        consequence = (
            "its current definition is pinned and served"
            if decision == "approve"
            else f"the change is dropped and {kept}"
        )
        question = f"{decision.capitalize()} {name}?"
        fields = {"decision": decision, "text_hash": text_hash}
        return confirm(console, request, question, consequence, fields, _tool_page(name))
    from toolrag.mcp.importer import approve_quarantined, reject_quarantined

    decide = approve_quarantined if decision == "approve" else reject_quarantined
    try:
        decide(console.registry, [name], who.actor, {name: text_hash})
    except ToolragError as problem:
        return console.error(request, 409, str(problem))
    return secured(RedirectResponse(f"{PREFIX}upstreams", status_code=303))


@router.post("/upstreams/{server}/approve")
def approve_upstream(
    request: Request,
    console: Console,
    server: str,
    pending: Annotated[str, Form(max_length=MAX_REVIEWED_CHARS)],
    csrf: Annotated[str | None, Form()] = None,
    confirmed: Annotated[bool, Form()] = False,
) -> Response:
    """Approve every quarantined tool of a server at once, asked first, on the texts the page showed (`pending`:
    tool -> text hash, as `POST /mcp/servers/{server}/approve` takes it): a sync that changed or added one since is
    the upstreams page again with the conflict, nothing approved."""
    who = console.admin(request, csrf)
    try:
        reviewed = REVIEWED.validate_json(pending)
    except ValidationError:
        return console.error(request, 422, "pending: not a JSON object of tool names to text hashes")
    if not confirmed:
        question = f"Approve all {len(reviewed)} waiting tools of {server}?"
        consequence = f"their current definitions are pinned and served: {', '.join(sorted(reviewed))}"
        back = f"{PREFIX}upstreams"
        return confirm(console, request, question, consequence, {"pending": pending}, back)
    from toolrag.mcp.importer import approve_server

    try:
        approve_server(console.registry, server, reviewed, who.actor)
    except ServerNotFoundError as missing:
        return console.error(request, 404, str(missing))
    except (ApprovalConflictError, InvalidToolError) as conflict:  # invalid: a name another tool took since
        return upstreams_view(request, console, who, 409, str(conflict))
    return secured(RedirectResponse(f"{PREFIX}upstreams", status_code=303))


@router.post("/upstreams/{server}/switch")
def switch_upstream(
    request: Request,
    console: Console,
    server: str,
    decision: Annotated[str, Form(pattern="^(disable|enable)$")],
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """An admin switches an upstream off or on (mcp/switches.py, audited with the admin's name); undone by the
    other button, so no confirmation page."""
    who = console.admin(request, csrf)
    from toolrag.mcp.switches import disable_server, enable_server, servers_in

    store = console.registry.store
    known = servers_in(store, console.upstream_names())
    try:
        if decision == "disable":
            disable_server(store, server, known, who.actor, "from the console")
        else:
            enable_server(store, server, known, who.actor)
    except ToolragError as problem:
        return console.error(request, 404, str(problem))
    return secured(RedirectResponse(f"{PREFIX}upstreams", status_code=303))


@router.post("/tools/{name}/relations/{other}")
def judge_relation(
    request: Request,
    console: Console,
    name: str,
    other: str,
    decision: Annotated[str, Form(pattern="^(confirm|reject|lift)$")],
    kind: Annotated[RelationKind | None, Form()] = None,
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """An admin's word on a relation the registry inferred or learned (catalog/relations.py), of the row's kind
    (a pair can have both an inferred requirement and a learned relation); undone by `lift`, so nothing is asked
    first."""
    who, relations = console.admin(request, csrf), console.registry.relations
    try:
        if decision == "lift":
            relations.lift(name, other, who.actor, kind)
        else:
            relations.decide(name, other, "confirmed" if decision == "confirm" else "rejected", who.actor, kind)
    except ToolragError as problem:
        return console.error(request, 422, str(problem))
    return secured(RedirectResponse(f"{_tool_page(name)}#relations", status_code=303))


def _tool_page(name: str) -> str:
    return f"{PREFIX}tools/{quote(name, safe='')}"


def _edited(
    console: ConsoleState,
    request: Request,
    who: Caller,
    name: str,
    change: Callable[[], object],
    fixing: str,
    fixing_tenant: str,
    findings: Sequence[str] = (),
    held: Sequence[bool] = (),
) -> Response:
    """Make the edit between two replays of the logged requests it may affect; show what moved, `findings` (what
    the poisoning check found in a text the edit wrote) and `held` (whether its text waits for review), both
    filled by the edit."""
    registry = console.registry
    try:
        registry.get(name)
        target = (fixing.strip(), fixing_tenant.strip() or None) if fixing.strip() else None
        requests = affected_requests(registry, name, who.audience(), target)
        impact: Impact = measure_edit(registry, requests, change, fixing=target is not None)
    except EditConflictError as conflict:
        return console.page(request, "conflict.html", 409, message=str(conflict), name=name)
    except ToolragError as problem:
        return console.error(request, 422, str(problem))
    tool = registry.get(name)
    return console.page(
        request, "impact.html", name=name, tool=tool, impact=impact, findings=list(findings), held=any(held)
    )
