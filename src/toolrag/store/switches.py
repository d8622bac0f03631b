"""Upstream MCP servers an operator switched off without removing them from the gateway's configuration: a row per
disabled server. Every switch is one transaction with its audit entry, and moves the registry's generation, so a
gateway that reads the switches with the generation (mcp/gateway.py) sees the change at its next request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from toolrag.model import utc_now
from toolrag.store.base import AuditEntry

if TYPE_CHECKING:  # tables.py builds these tables
    from toolrag.store.tables import AuditTrail, Database


@dataclass(frozen=True)
class DisabledServer:
    """An upstream switched off: by whom (None: not known), when and why."""

    server: str
    disabled_by: str | None = None
    reason: str | None = None
    disabled_at: datetime = field(default_factory=utc_now)


class UpstreamSwitches:
    """The disabled upstream servers, over one store's database (store/tables.py `Database`)."""

    def __init__(self, database: Database, trail: AuditTrail) -> None:
        self._db = database
        self._trail = trail

    def disabled(self, db: Any = None) -> list[DisabledServer]:
        """Every disabled server, by name (read in the caller's transaction `db`, if given)."""
        query = "SELECT server, disabled_by, reason, disabled_at FROM upstream_switches ORDER BY server"
        rows = self._db.read(query, db=db)
        parse = self._db.dialect.parse_time
        return [DisabledServer(str(s), by and str(by), why and str(why), parse(at)) for s, by, why, at in rows]

    def disable(self, switch: DisabledServer, audit: AuditEntry) -> bool:
        """Switch a server off; False (nothing written) when it was off already."""
        with self._db.transaction() as db:
            written = self.write(db, switch)
            if written:
                self._trail.write(db, [audit])
                self._db.bump_generation(db)
        return written

    def write(self, db: Any, switch: DisabledServer) -> bool:
        """Record a switch in the caller's transaction (`db`); False when the server was off already."""
        dialect = self._db.dialect
        written = db.execute(
            dialect.sql(
                "INSERT INTO upstream_switches(server, disabled_by, disabled_at, reason) VALUES (?, ?, ?, ?)"
                " ON CONFLICT(server) DO NOTHING"
            ),
            (switch.server, switch.disabled_by, dialect.timestamp(switch.disabled_at), switch.reason),
        ).rowcount
        return bool(written)

    def enable(self, server: str, audit: AuditEntry) -> bool:
        """Switch a server on again; False (nothing written) when it was not off."""
        with self._db.transaction() as db:
            dropped = db.execute(
                self._db.dialect.sql("DELETE FROM upstream_switches WHERE server = ?"), (server,)
            ).rowcount
            if dropped:
                self._trail.write(db, [audit])
                self._db.bump_generation(db)
        return bool(dropped)
