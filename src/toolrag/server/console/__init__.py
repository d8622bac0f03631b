"""The operator console: find, explain and fix tool selection in the browser (`/console/`).

Server-rendered pages (Jinja2, every value escaped) and plain HTML forms: no script at all, so the Content-Security-
Policy forbids every script and every asset comes from this server (it works offline). The pages are the API's own
operations (search/explain.py, the registry's versioned edits, the usage log) behind the same tokens and roles:
admins edit, readers and agents see what their principal may use and their own tenant's records.
"""

from __future__ import annotations

from toolrag.server.console.common import ConsoleState, Upstreams
from toolrag.server.console.routes import PUBLIC_PATHS, console_router
from toolrag.server.console.session import PREFIX, ConsoleSessions

__all__ = ["PREFIX", "PUBLIC_PATHS", "ConsoleSessions", "ConsoleState", "Upstreams", "console_router"]
