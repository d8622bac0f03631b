"""Switching an upstream MCP server off and on without removing it from the gateway's configuration (`toolrag mcp
disable` / `enable`, the API's `POST /mcp/servers/{server}/disable` and `/enable`). The switch is kept in the
registry's store (store/switches.py), so every gateway and API over that registry honours it (mcp/gateway.py).
"""

from __future__ import annotations

from collections.abc import Iterable

from toolrag.errors import ServerNotFoundError, ToolragError
from toolrag.mcp.importer import SOURCE_PREFIX
from toolrag.store.base import AuditEntry, Store
from toolrag.store.switches import DisabledServer

MAX_REASON_CHARS = 500
DISABLED_ACTION = "server disabled"
ENABLED_ACTION = "server enabled"


class InvalidReasonError(ToolragError):
    """The reason given for a switch is too long to keep."""


def check_known(server: str, known: Iterable[str]) -> None:
    """ServerNotFoundError naming the servers there are, when `server` is not one of them."""
    names = sorted(set(known))
    if server not in names:
        raise ServerNotFoundError(server, names)


def disable_server(store: Store, server: str, known: Iterable[str], who: str | None, reason: str | None = None) -> bool:
    """Switch `server` off; False when it was off already (nothing written)."""
    check_known(server, known)
    reason = (reason or "").strip() or None
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise InvalidReasonError(f"the reason is {len(reason):,} characters long; at most {MAX_REASON_CHARS} are kept")
    audit = AuditEntry(DISABLED_ACTION, reason or "disabled", None, server, who)
    return store.switches.disable(DisabledServer(server, who, reason), audit)


def enable_server(store: Store, server: str, known: Iterable[str], who: str | None) -> bool:
    """Switch `server` on again; False when it was not off (nothing written)."""
    check_known(server, known)
    return store.switches.enable(server, AuditEntry(ENABLED_ACTION, "enabled", None, server, who))


def servers_in(store: Store, configured: Iterable[str] = ()) -> set[str]:
    """The servers a switch may name: the configured ones, those with tools in the registry and those switched off
    (an unconfigured server's switch can still be lifted)."""
    imported = {t.source.removeprefix(SOURCE_PREFIX) for t in store.tools(True) if t.source.startswith(SOURCE_PREFIX)}
    return set(configured) | imported | {d.server for d in store.switches.disabled()}
