"""The console's past tasks page (admins): the logged requests after which an agent's session called several tools,
each promoted with one click, and a form to write a past task by hand. A past task gives its request to every tool
of it as an example (search/examples.py), so a request like it retrieves the whole set. Anyone else gets the page
a missing one gets.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from typing import Annotated, Literal

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from toolrag.errors import ToolragError
from toolrag.limits import MAX_SET_TOOLS
from toolrag.model import MAX_EXAMPLE_CHARS
from toolrag.server.console.common import Console, ConsoleState, Who, secured
from toolrag.server.console.session import PREFIX

router = APIRouter()
PAGE = f"{PREFIX}tasks"


@router.get("/tasks")
def tasks_page(request: Request, console: Console, who: Who) -> HTMLResponse:
    if not who.is_admin:
        return console.error(request, 404, f"no page {PAGE}")
    return _tasks_view(request, console)


@router.post("/tasks")
def add_task(
    request: Request,
    console: Console,
    text: Annotated[str, Form(max_length=MAX_EXAMPLE_CHARS)],
    tools: Annotated[str, Form(max_length=MAX_SET_TOOLS * 201)],
    tenant: Annotated[str, Form(max_length=200)] = "",
    action: Annotated[str, Form(pattern="^(add|promote)$")] = "add",
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """Write a past task: `tools` separated by commas or spaces. Nothing is asked first: each example can be removed
    on its tool's page, and every tool's new version is audited with the admin's name."""
    who = console.admin(request, csrf)
    names = tools.replace(",", " ").split()
    source: Literal["operator", "usage"] = "usage" if action == "promote" else "operator"
    try:
        console.registry.examples.add_task(
            text, names, tenant.strip() or None, source, edited_by=who.actor, origin="console"
        )
    except ToolragError as problem:
        return _tasks_view(request, console, 422, str(problem))
    return secured(RedirectResponse(PAGE, status_code=303))


def _tasks_view(request: Request, console: ConsoleState, status: int = 200, error: str | None = None) -> HTMLResponse:
    return console.page(request, "tasks.html", status, tasks=console.registry.examples.past_tasks(), error=error)
