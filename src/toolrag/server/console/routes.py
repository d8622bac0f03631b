"""The console's routes, one router per part (signin, pages, edits, usage, trial, access, text review, past tasks,
written examples) under the console's prefix. Every page reads the caller the guard authenticated (session cookie or
bearer token); every form that changes something is checked against the session's CSRF token and needs an admin."""

from __future__ import annotations

from fastapi import APIRouter

from toolrag.server.console import access, edits, pages, signin, tasks, text_review, trial, usage, writing
from toolrag.server.console.session import LOGIN, PREFIX

console_router = APIRouter(prefix=PREFIX.rstrip("/"), include_in_schema=False)
for part in (signin, pages, edits, usage, trial, access, text_review, tasks, writing):
    console_router.include_router(part.router)

# Served before a session exists: the sign-in page and its stylesheet.
PUBLIC_PATHS = frozenset({LOGIN, f"{PREFIX}static/console.css"})
