"""The console's session: a cookie holding the bearer token the person signed in with (the same tokens and OAuth
access tokens as the API, checked on every request by the guard), and the CSRF token of every form.

The cookie is HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), Secure when served
over HTTPS, and scoped to the console's path (API routes never accept it, so they need no CSRF defence). A form's
CSRF token is an HMAC of the session's token: only a page the console rendered for that session holds it, and
several instances behind one database agree on it without sharing any state.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections import deque
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from fastapi.responses import Response

from toolrag.server.guard import ConsoleCookie, bearer_token, cookie_value

PREFIX = "/console/"
COOKIE = "toolrag_console"
SESSION = ConsoleCookie(prefix=PREFIX, login=f"{PREFIX}login", cookie=COOKIE)
SESSION_SECONDS = 12 * 3600


def session_token(request: Request) -> str | None:
    """The token this request was authenticated with: the session cookie's, or a bearer header's."""
    return cookie_value(request.scope, COOKIE) or bearer_token(request.scope)


def csrf_token(token: str) -> str:
    return hmac.new(token.encode("utf-8", "replace"), b"toolrag console form", hashlib.sha256).hexdigest()


def check_form(request: Request, submitted: str | None) -> None:
    """Refuse a state-changing form that this session's page did not render, or that comes from another origin."""
    origin = request.headers.get("origin")
    if origin and origin != "null" and urlsplit(origin).netloc != request.headers.get("host", ""):
        raise HTTPException(403, "this form was sent from another site")
    token = session_token(request)
    if token is None or not submitted or not hmac.compare_digest(submitted, csrf_token(token)):
        raise HTTPException(403, "this form has expired or did not come from the console: reload the page")


def sign_in(response: Response, token: str, secure: bool) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=SESSION_SECONDS,
        path=PREFIX,
        httponly=True,
        samesite="strict",
        secure=secure,
    )


def sign_out(response: Response) -> None:
    response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict")


class SignInLimiter:
    """At most `attempts` failed sign-ins per client address per minute: tokens are long, but a guesser should
    not get to try them as fast as the server answers."""

    def __init__(self, attempts: int = 10) -> None:
        self.attempts = attempts
        self._failures: dict[str, deque[float]] = {}

    def allowed(self, client: str) -> bool:
        recent = self._failures.get(client)
        now = time.monotonic()
        while recent and now - recent[0] > 60:
            recent.popleft()
        return recent is None or len(recent) < self.attempts

    def failed(self, client: str) -> None:
        if len(self._failures) > 10_000:
            self._failures.clear()
        self._failures.setdefault(client, deque()).append(time.monotonic())
