"""Checks a server runs on its registry before it accepts requests (`toolrag api serve`, `toolrag mcp serve`).

- The embedding model: the registry must be searchable with the model it was indexed with; a mismatch refuses.
- Tools without embeddings (a failed job, a write straight to the store): embedded now (`repair`, the default),
  or the server refuses to start (`refuse`), naming them and the command that repairs them.
- Orphans: Python tools whose function no longer imports, MCP tools of servers no longer configured. Reported.

The result is logged and kept for `/health`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from toolrag.errors import ModelMismatchError, ToolragError
from toolrag.model import utc_now
from toolrag.monitor.validate import Finding, orphans
from toolrag.registry import ToolRegistry

log = logging.getLogger("toolrag.startup")
MissingEmbeddings = Literal["repair", "refuse"]


class StartupRefused(ToolragError):
    """The registry is not fit to serve, and the configuration says not to repair it."""


@dataclass(frozen=True)
class StartupCheck:
    model: str | None
    missing_embeddings: tuple[str, ...] = ()
    repaired: bool = False
    orphans: tuple[Finding, ...] = ()
    checked_at: datetime = field(default_factory=utc_now)

    @property
    def ok(self) -> bool:
        """Every tool is searchable (orphans are reported, not fatal: their calls fail, their search does not)."""
        return not self.missing_embeddings or self.repaired

    def summary(self) -> str:
        missing = len(self.missing_embeddings)
        embedded = f"{missing} tools without embeddings {'embedded' if self.repaired else 'left'}" if missing else ""
        parts = [f"model {self.model}", embedded, f"{len(self.orphans)} orphans" if self.orphans else ""]
        return "startup check: " + ", ".join(part for part in parts if part)


def check_at_startup(
    registry: ToolRegistry, missing_embeddings: MissingEmbeddings = "repair", mcp_servers: set[str] | None = None
) -> StartupCheck:
    """Check the registry, repair what the policy allows, refuse (StartupRefused) what it does not."""
    try:
        missing = tuple(registry.tools_without_embeddings())
    except ModelMismatchError as exc:
        raise StartupRefused(f"the registry cannot be searched: {exc}") from None
    if missing and missing_embeddings == "refuse":
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise StartupRefused(
            f"{len(missing)} tools have no embedding for the index's model ({shown}): run `toolrag validate --fix`, "
            'or set missing_embeddings = "repair" under [startup]'
        )
    if missing:
        registry.embed_missing()
    model = registry.store.index_model()
    check = StartupCheck(
        model=model.model_id if model else None,
        missing_embeddings=missing,
        repaired=bool(missing),
        orphans=tuple(orphans(registry.tools(), mcp_servers)),
    )
    log.info(check.summary())
    for finding in check.orphans:
        log.warning("orphan %s: %s", finding.tools[0], finding.detail)
    return check
