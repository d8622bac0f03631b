"""What an edit changed: the logged requests it may affect, searched again before and after it.

An edit of one tool can pull other tools' requests towards it, so the console replays, besides the request being
fixed, the recent requests the tool was offered for, the recent requests that found nothing, and the most recent
requests of all, and lists every one whose tools changed. Each is searched as its tenant's principal holding every
scope (the log keeps the tenant, not the scopes a request was made with): what moved in the ranking, whatever a
particular user may see. Nothing is written to the usage log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from toolrag.model import Principal, utc_now
from toolrag.registry import ToolRegistry
from toolrag.store.usage import Audience, LoggedRequest

REPLAYED = 60  # requests searched twice per edit: about a second on a laptop-sized registry
DAYS = 30


@dataclass(frozen=True)
class Replayed:
    request: str
    tenant: str | None
    before: tuple[str, ...]
    after: tuple[str, ...]
    fixing: bool = False  # the request the edit was made for

    @property
    def changed(self) -> bool:
        return self.before != self.after


@dataclass(frozen=True)
class Impact:
    replayed: list[Replayed]

    @property
    def changed(self) -> list[Replayed]:
        return [r for r in self.replayed if r.changed or r.fixing]

    @property
    def unchanged(self) -> int:
        return sum(1 for r in self.replayed if not r.changed and not r.fixing)


def affected_requests(
    registry: ToolRegistry, tool: str, audience: Audience, fixing: tuple[str, str | None] | None
) -> list[tuple[str, str | None]]:
    """(request, tenant) pairs to replay: the one being fixed, then the tool's, the misses, the most recent."""
    usage = registry.store.usage
    since = utc_now() - timedelta(days=DAYS)
    offered = usage.recent_requests(since, REPLAYED // 3, audience, tool=tool)
    recent = usage.recent_requests(since, REPLAYED * 2, audience)
    misses = [entry for entry in recent if not entry.tools][: REPLAYED // 3]
    pairs = [fixing] if fixing else []
    pairs += [_pair(entry) for entry in [*offered, *misses, *recent]]
    return list(dict.fromkeys(pairs))[:REPLAYED]


def measure_edit(
    registry: ToolRegistry, requests: list[tuple[str, str | None]], edit: Callable[[], object], fixing: bool
) -> Impact:
    """Search every request, make the edit, search them again."""
    before = [_tools(registry, request, tenant) for request, tenant in requests]
    edit()
    return Impact(
        [
            Replayed(request, tenant, was, _tools(registry, request, tenant), fixing and number == 0)
            for number, ((request, tenant), was) in enumerate(zip(requests, before, strict=True))
        ]
    )


def _tools(registry: ToolRegistry, request: str, tenant: str | None) -> tuple[str, ...]:
    principal = Principal(tenant=tenant, scopes=frozenset({"*"}))
    return tuple(result.name for result in registry.retriever.search(request, principal))


def _pair(entry: LoggedRequest) -> tuple[str, str | None]:
    return (entry.request, entry.tenant)
