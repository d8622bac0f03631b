"""The console's written examples page (admins): the operator's chat model (the server's `[chat_model]`) writes
example requests for every tool in the users' languages (server/writing.py). A form counts a run's cost or starts
one; the page shows the running or last run, reloads itself while one runs (a refresh, no script) and offers to
stop it. Anyone else gets the page a missing one gets.

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from toolrag.errors import MissingExtraError
from toolrag.runtime.chat_models import ChatModelKeyError
from toolrag.runtime.write_examples import MAX_PER_LANGUAGE, WritingRun
from toolrag.server.console.common import Console, ConsoleState, Who, secured
from toolrag.server.console.session import PREFIX
from toolrag.server.served import Api, Served
from toolrag.server.writing import (
    NoChatModelError,
    WritingBusyError,
    WritingJob,
    WritingNotStartedError,
    WritingOrder,
    WritingOrderError,
)

router = APIRouter()
PAGE = f"{PREFIX}written-examples"


@router.get("/written-examples")
def writing_page(request: Request, console: Console, api: Api, who: Who) -> HTMLResponse:
    if not who.is_admin:
        return console.error(request, 404, f"no page {PAGE}")
    return _page(request, console, api)


@router.post("/written-examples")
def write_or_plan(
    request: Request,
    console: Console,
    api: Api,
    languages: Annotated[str, Form(max_length=200)],
    per_language: Annotated[int, Form(ge=1, le=MAX_PER_LANGUAGE)] = 2,
    max_calls: Annotated[int, Form(ge=0, le=100_000)] = 500,
    max_tokens: Annotated[int, Form(ge=0, le=10**9)] = 2_000_000,
    action: Annotated[str, Form(pattern="^(plan|write)$")] = "plan",
    csrf: Annotated[str | None, Form()] = None,
) -> Response:
    """`plan`: the cost of a run, counted, nothing asked; `write`: start one (the page then follows it)."""
    who = console.admin(request, csrf)
    order = WritingOrder(languages.replace(",", " ").split(), per_language, max_calls, max_tokens)
    try:
        if action == "plan":
            return _page(request, console, api, order=order, plan=api.writing.plan(order))
        api.writing.start(order, who.actor, "console")
    except WritingOrderError as problem:
        return _page(request, console, api, 422, str(problem), order)
    except (NoChatModelError, WritingBusyError, MissingExtraError, ChatModelKeyError) as problem:
        return _page(request, console, api, 409, str(problem), order)
    return secured(RedirectResponse(PAGE, status_code=303))


@router.post("/written-examples/cancel")
def cancel(request: Request, console: Console, api: Api, csrf: Annotated[str | None, Form()] = None) -> Response:
    """Stop the run going on at its next call; what it wrote stays."""
    who = console.admin(request, csrf)
    try:
        api.writing.cancel(who.actor)
    except WritingNotStartedError as problem:
        return _page(request, console, api, 409, str(problem))
    return secured(RedirectResponse(PAGE, status_code=303))


def _page(
    request: Request,
    console: ConsoleState,
    api: Served,
    status: int = 200,
    error: str | None = None,
    order: WritingOrder | None = None,
    plan: WritingRun | None = None,
) -> HTMLResponse:
    try:
        job: WritingJob | None = api.writing.latest()
    except WritingNotStartedError:
        job = None
    shown = order or (job.order if job else WritingOrder(["en"]))
    return console.page(
        request,
        "written_examples.html",
        status,
        error=error,
        model=api.writing.model_name,
        job=job,
        order=shown,
        plan=plan,
    )
