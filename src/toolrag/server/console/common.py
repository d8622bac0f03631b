"""What the console's pages share: the served registry and sign-in state (`ConsoleState`, kept in
`app.state.console` by `create_app`), the templates, the caller the guard authenticated, and the headers every
answer carries.

(No `from __future__ import annotations`: FastAPI reads the annotations at run time.)"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar
from urllib.parse import quote

from fastapi import Depends, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from jinja2 import Environment, FileSystemLoader, StrictUndefined
from pydantic import BaseModel, Field

from toolrag.access import AccessPolicy, Caller
from toolrag.access.guard import CALLER_KEY, Authenticator, FailureLimiter
from toolrag.errors import ApprovalConflictError, ToolNotFoundError
from toolrag.inject.tokens import count_text
from toolrag.model import Principal, Tool
from toolrag.registry import ToolRegistry
from toolrag.server.console.session import ConsoleSessions
from toolrag.server.principals import visible_tool

HERE = Path(__file__).parent
# No script may run, styles and images only from this server, forms only to it, never framed.
POLICY = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none';"
    " base-uri 'none'"
)
# The MCP upstreams' states as a principal is shown them (None: an admin, every one): the gateway's rule.
Upstreams = Callable[[Principal | None], list[dict[str, Any]]]
R = TypeVar("R", bound=Response)
# StrictUndefined: a template naming a value the page did not pass fails its test instead of rendering "".
TEMPLATES = Jinja2Templates(
    env=Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=True, undefined=StrictUndefined)
)
TEMPLATES.env.filters["tokens"] = count_text  # `~231` when estimated, as the CLI prints it


@dataclass(frozen=True)
class ConsoleState:
    """The registry the console serves; how sign-ins are checked (`authenticate`, the guard's `failures` limits,
    which sign-ins share) and whom tokens stand for (`policy`); the open `sessions`; `upstreams`: the MCP upstreams'
    states, when the API serves the gateway's tools."""

    registry: ToolRegistry
    authenticate: Authenticator
    policy: AccessPolicy
    upstreams: Upstreams | None
    sessions: ConsoleSessions
    failures: FailureLimiter

    def upstream_names(self) -> list[str]:
        """Every upstream the API serves the gateway of (an admin's view), none without one."""
        return [str(state["name"]) for state in self.upstreams(None)] if self.upstreams else []

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        who = request.scope.get(CALLER_KEY)
        session = self.sessions.of(request)
        context = {"error": None} | context
        context |= {"who": who, "csrf": session.csrf if session else "", "upstreams_shown": self.upstreams is not None}
        return secured(TEMPLATES.TemplateResponse(request, template, context, status_code=status))

    def error(self, request: Request, status: int, message: str) -> HTMLResponse:
        return self.page(request, "error.html", status, message=message)

    def admin(self, request: Request, csrf: str | None) -> Caller:
        """A state-changing form: from this session's page, sent by an admin."""
        self.sessions.check_form(request, csrf)
        who = signed_in(request)
        if not who.is_admin:
            raise HTTPException(403, f"token {who.name!r} is {who.role}: only admins change tools")
        return who

    def visible_tool(self, who: Caller, name: str) -> Tool:
        return visible_tool(who, self.registry, name)


def this_page(request: Request) -> str:
    """The path of the page asked for, as a link or a form action names it: the decoded path quoted whole, so a
    name holding "%2F" or "?" leads back here (`request.url.path` re-escapes some characters, which quoting would
    encode twice)."""
    return quote(request.scope["path"])


def confirm(
    console: ConsoleState, request: Request, question: str, consequence: str, fields: dict[str, str], back: str
) -> Response:
    """Ask before a decision that is hard to take back: the same form again, confirmed (no script: a page);
    `back`: where Cancel leads."""
    return console.page(
        request,
        "confirm.html",
        question=question,
        consequence=consequence,
        action=this_page(request),
        fields=fields,
        back=back,
    )


class TextDecision(BaseModel):
    """An admin's form deciding on a text a page showed (a text change, a group's description, a quarantined
    tool): approve or reject it, named by its hash; `confirmed` once asked, `csrf` from this session's page."""

    decision: Literal["approve", "reject"]
    text_hash: str = Field(pattern="^[0-9a-f]{64}$")
    csrf: str | None = None
    confirmed: bool = False


DecisionForm = Annotated[TextDecision, Form()]


def asked_then_decided(
    console: ConsoleState,
    request: Request,
    form: TextDecision,
    what: str,
    consequence: str,
    decide: Callable[[str, str | None], object],
    conflict: Callable[[str], Response],
    back: str,
    done: str,
) -> Response:
    """Ask first (`what` and its `consequence`; Cancel leads `back`), then `decide(text_hash, the admin's name)`:
    nothing waiting is the page a missing one gets, another text waiting now is `conflict(why)`; done, to `done`."""
    who = console.admin(request, form.csrf)
    if not form.confirmed:
        fields = {"decision": form.decision, "text_hash": form.text_hash}
        return confirm(console, request, f"{form.decision.capitalize()} {what}?", consequence, fields, back)
    try:
        decide(form.text_hash, who.actor)
    except ToolNotFoundError as missing:
        return console.error(request, 404, str(missing))
    except ApprovalConflictError as moved:
        return conflict(str(moved))
    return secured(RedirectResponse(done, status_code=303))


def console_state(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state


def signed_in(request: Request) -> Caller:
    who = request.scope.get(CALLER_KEY)
    if not isinstance(who, Caller):  # the guard redirects to the sign-in page before a route runs
        raise HTTPException(401, "sign in first")
    return who


def chosen_principal(who: Caller, user: str, tenant: str, scopes: str) -> Principal:
    """The principal a page acts as (the playground's search, a tool's trial): admins may name any (user, tenant,
    comma-separated scopes), everyone else, and an admin who names none, acts as their own token's."""
    if not (who.may_explain_for() and (user or tenant or scopes)):
        return who.principal
    held = frozenset(s.strip() for s in scopes.split(",") if s.strip())
    return Principal(user=user or None, tenant=tenant or None, scopes=held)


Console = Annotated[ConsoleState, Depends(console_state)]
Who = Annotated[Caller, Depends(signed_in)]


def secured(response: R) -> R:
    response.headers["Content-Security-Policy"] = POLICY
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["X-Content-Type-Options"] = "nosniff"
    # Requests in the URL stay on this server; and same-origin, not no-referrer: under no-referrer a browser sends
    # `Origin: null` with the console's own forms, which could then not be told from a sandboxed frame's.
    response.headers["Referrer-Policy"] = "same-origin"
    response.headers["Cache-Control"] = "no-store"
    return response
