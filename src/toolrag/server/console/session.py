"""The console's sessions: a random session id in a cookie, and on the server what it stands for (the bearer token
the person signed in with, checked again by the guard on every request; the session's own CSRF token; when it
ends). Signing out ends the session on the server, so a copied cookie stops working then, or at the latest when the
session expires.

The cookie is HttpOnly (no script reads it), SameSite=Strict (no other site's page sends it), Secure over HTTPS
(this server's own, or a TLS-terminating proxy's listed in `[http] trusted_proxies`), and scoped to the console's
path (API routes never accept it, so they need no CSRF defence). Forms carry the session's CSRF token and must come
from this origin (`Origin: null` included among the refused); the sign-in form carries a token of its own, kept in
a cookie only this origin's sign-in page sets.

Sessions are kept in the server's memory: they end when it restarts, and behind several instances a browser signs
in on the one it reaches (route browsers to one instance, "sticky sessions").
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from fastapi import HTTPException, Request
from fastapi.responses import Response

from toolrag.access.guard import ConsoleCookie, Scope, cookie_value

PREFIX = "/console/"
LOGIN = f"{PREFIX}login"
COOKIE = "toolrag_console"
LOGIN_COOKIE = "toolrag_console_login"  # the sign-in form's own CSRF token, before there is a session
SESSION_SECONDS = 12 * 3600
LOGIN_FORM_SECONDS = 3600
MAX_SESSIONS = 10_000  # past this, the oldest session ends
MAX_SESSIONS_PER_CALLER = 16  # past this, the caller's own oldest session ends (not another person's)


@dataclass(frozen=True)
class Session:
    token: str  # what the person signed in with; the guard checks it on every request (revoked, expired)
    csrf: str
    ends: float  # on the sessions' clock
    caller: str  # who signed in (`Caller.key`): one identity's sessions, whatever tokens it was issued


class ConsoleSessions:
    """The open sessions of one server, by session id. Read by the guard on the event loop and by the pages in
    FastAPI's thread pool: a lock keeps the table whole."""

    def __init__(self, seconds: float = SESSION_SECONDS, clock: Callable[[], float] = time.time) -> None:
        self.seconds = seconds
        self.clock = clock
        self._open: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()
        self.cookie = ConsoleCookie(prefix=PREFIX, login=LOGIN, cookie=COOKIE, token_of=self.token_of)

    def open(self, token: str, caller: str) -> str:
        """A new session for `token`, which stands for `caller` (`Caller.key`): its id (the cookie's value)."""
        sid = secrets.token_urlsafe(32)
        with self._lock:
            # One caller's sign-ins end its own sessions, never another's: 10,000 sign-ins with a reader's token
            # ended every operator's session (the table dropped its oldest), and so did as many sign-ins with the
            # fresh access tokens an OAuth provider issues one user. A linear pass: sign-ins are rare.
            own = [key for key, session in self._open.items() if session.caller == caller]
            for key in own[: max(0, len(own) - MAX_SESSIONS_PER_CALLER + 1)]:
                del self._open[key]
            self._open[sid] = Session(token, secrets.token_urlsafe(32), self.clock() + self.seconds, caller)
            while len(self._open) > MAX_SESSIONS:
                self._open.popitem(last=False)
        return sid

    def get(self, sid: str) -> Session | None:
        with self._lock:
            session = self._open.get(sid)
            if session is not None and session.ends <= self.clock():
                del self._open[sid]
                return None
            return session

    def close(self, sid: str) -> None:
        with self._lock:
            self._open.pop(sid, None)

    def token_of(self, sid: str) -> str | None:
        session = self.get(sid)
        return session.token if session else None

    def of(self, request: Request) -> Session | None:
        """The session of a request's cookie, if it names an open one."""
        sid = cookie_value(request.scope, COOKIE)
        return self.get(sid) if sid else None

    def check_form(self, request: Request, submitted: str | None) -> None:
        """Refuse a state-changing form that this session's page did not render, or that comes from another
        origin."""
        same_origin(request)
        session = self.of(request)
        if session is None or not submitted or not hmac.compare_digest(submitted, session.csrf):
            raise HTTPException(403, "this form has expired or did not come from the console: reload the page")

    def sign_in(self, request: Request, response: Response, token: str, caller: str) -> None:
        """Open a session for `token` (which stands for `caller`) and set its cookie; the sign-in form's token is
        spent."""
        secure = https(request.scope)
        response.set_cookie(
            COOKIE,
            self.open(token, caller),
            max_age=int(self.seconds),
            path=PREFIX,
            httponly=True,
            samesite="strict",
            secure=secure,
        )
        response.delete_cookie(LOGIN_COOKIE, path=LOGIN, httponly=True, samesite="strict", secure=secure)

    def sign_out(self, request: Request, response: Response) -> None:
        """End the session on the server (its cookie, wherever copied, no longer works) and drop the cookie."""
        sid = cookie_value(request.scope, COOKIE)
        if sid:
            self.close(sid)
        response.delete_cookie(COOKIE, path=PREFIX, httponly=True, samesite="strict", secure=https(request.scope))

    def login_form(self, request: Request, response: Response, token: str) -> None:
        """Set the sign-in form's token (rendered in the form as `token`) in its cookie."""
        response.set_cookie(
            LOGIN_COOKIE,
            token,
            max_age=LOGIN_FORM_SECONDS,
            path=LOGIN,
            httponly=True,
            samesite="strict",
            secure=https(request.scope),
        )

    @staticmethod
    def check_login(request: Request, submitted: str | None) -> None:
        """Refuse a sign-in posted by another site: its Origin, and the form's token against its cookie (which
        only this origin's sign-in page sets, and SameSite keeps from other sites' posts)."""
        same_origin(request)
        expected = cookie_value(request.scope, LOGIN_COOKIE)
        if not expected or not submitted or not hmac.compare_digest(submitted, expected):
            raise HTTPException(403, "this sign-in form has expired or did not come from the console: reload it")


def same_origin(request: Request) -> None:
    """Refuse a request whose Origin is another site's, or `null` (a sandboxed frame, a data: page, a redirect
    across origins): a browser always sends Origin with a form's POST."""
    origin = request.headers.get("origin")
    if origin is not None and (origin == "null" or urlsplit(origin).netloc != request.headers.get("host", "")):
        raise HTTPException(403, "this form was sent from another site")


def https(scope: Scope) -> bool:
    """The browser's connection is HTTPS: this server's, or a trusted proxy's that says so (uvicorn sets the
    scheme from X-Forwarded-Proto for `[http] trusted_proxies` only)."""
    return scope.get("scheme") == "https"


def new_form_token() -> str:
    return secrets.token_urlsafe(32)
