"""Signing in to the console and out, and its stylesheet (the two things served before a session exists).

(No `from __future__ import annotations`: FastAPI reads the route annotations at run time.)"""

from typing import Annotated

from fastapi import APIRouter, Form, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

from toolrag.access.guard import Refused, client_address
from toolrag.server.console.common import HERE, Console, ConsoleState, secured
from toolrag.server.console.session import PREFIX, new_form_token

router = APIRouter()


@router.get("/static/console.css")
def stylesheet() -> FileResponse:
    return FileResponse(HERE / "static" / "console.css", media_type="text/css")


def login_form(console: ConsoleState, request: Request, status: int = 200, error: str | None = None) -> HTMLResponse:
    """The sign-in page, with a new form token (in the form and in its cookie)."""
    form = new_form_token()
    response = console.page(request, "login.html", status, error=error, login_csrf=form)
    console.sessions.login_form(request, response, form)
    return response


@router.get("/login")
def login_page(request: Request, console: Console) -> HTMLResponse:
    return login_form(console, request)


@router.post("/login")
async def login(
    request: Request,
    console: Console,
    token: Annotated[str, Form(max_length=8192)],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    console.sessions.check_login(request, csrf)
    token, client, failures = token.strip(), client_address(request.scope), console.failures
    if token and (wait := failures.retry_after(token)) > 0:
        return login_form(console, request, 429, f"too many failed attempts: wait {max(1, round(wait))} s")
    try:
        found = await console.authenticate(token, request.scope) if token else None
        refused = None if found is not None else "that is not a token of this server"
    except Refused as refusal:
        refused = refusal.detail
    if refused is not None or found is None:
        if (wait := failures.failed(client, token)) > 0:
            return login_form(console, request, 429, f"too many failed attempts: wait {max(1, round(wait))} s")
        return login_form(console, request, 401, refused)
    response = RedirectResponse(PREFIX, status_code=303)
    console.sessions.sign_in(request, response, token, found.key)
    return secured(response)


@router.post("/logout")
def logout(request: Request, console: Console, csrf: Annotated[str | None, Form()] = None) -> Response:
    console.sessions.check_form(request, csrf)
    response = RedirectResponse(f"{PREFIX}login", status_code=303)
    console.sessions.sign_out(request, response)
    return secured(response)
