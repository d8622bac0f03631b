"""What a caller may read of the usage log: one rule for every page and route that shows it (`/reports/health`,
`/dashboard`, the console's misses and audit pages).

Operators (admin tokens) read every record as it was logged. Any other caller reads its tenant's records (without a
tenant, its own: `Audience`) and, of those, only what concerns tools its principal may use now: a call of a tool it
may not use, a request sample naming one, a tool's usage row are left out. A call is shown as its caller was
answered: a call of a tool hidden from its caller was answered `unknown_tool` and is logged `refused` for operators
(runtime/gateway.py); shown as `refused`, it would confirm to a reader that such a tool exists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from toolrag.access import Caller
from toolrag.monitor.report import HealthReport, build_report
from toolrag.store.usage import EVERYONE, Audience, CallRecord, RequestSample, UsageTables

if TYPE_CHECKING:
    from toolrag.registry import ToolRegistry

# Outcomes only operators read, and what the caller was answered instead.
ANSWERED = {"refused": "unknown_tool"}


@dataclass(frozen=True)
class Reading:
    """Whose records a caller reads (`audience`) and the tools whose traces it may see (`usable`; None: every
    tool, for operators)."""

    audience: Audience
    usable: frozenset[str] | None = None

    @classmethod
    def of(cls, registry: ToolRegistry, who: Caller) -> Reading:
        if who.is_admin:
            return cls(EVERYONE)
        return cls(who.audience(), frozenset(t.name for t in registry.visible_tools(who.principal)))

    def report(self, registry: ToolRegistry, days: int) -> HealthReport:
        """The health report over the last `days`, as this caller may read it."""
        return build_report(registry.store, days, audience=self.audience, visible=self.usable)

    def calls(
        self,
        usage: UsageTables,
        since: datetime,
        limit: int,
        principal: str | None = None,
        tool: str | None = None,
        outcome: str | None = None,
    ) -> list[CallRecord]:
        """The latest `limit` calls it may read (chosen in the query, not after it: calls it may not read do not crowd
        them out), filtered by principal, tool and the outcome it is shown, each with the outcome its caller was
        answered."""
        outcomes = self.logged_outcomes(outcome) if outcome else None
        calls = usage.calls(since, limit, self.audience, principal, tool, outcomes, self.usable)
        if self.usable is None:
            return calls
        return [replace(c, outcome=ANSWERED.get(c.outcome, c.outcome)) for c in calls]

    def logged_outcomes(self, shown: str) -> tuple[str, ...]:
        """The logged outcomes a filter on the outcome `shown` matches (none: a reader never sees `refused`)."""
        if self.usable is None:
            return (shown,)
        if shown in ANSWERED:
            return ()
        return (shown, *(logged for logged, answered in ANSWERED.items() if answered == shown))

    def unshortlisted(self, usage: UsageTables, since: datetime, limit: int) -> list[RequestSample]:
        """The latest calls it may read that search did not offer (a sample names its tool: `detail`)."""
        return usage.samples("unshortlisted_call", since, limit, self.audience, self.usable)
