"""Alias suggestions learned from usage: the words users used for a tool that retrieval did not offer them.

A request is a candidate alias for a tool when, in the same session, the tool was then called successfully
although that request's shortlist did not contain it. Suggestions are only proposals: a person reviews them and
applies them (`toolrag suggest-aliases --apply TOOL`), which makes a new version of the tool (held for review
while the registry asks for it).

An alias is a text every tenant who sees the tool is ranked with, so a suggestion needs the sessions of at least
`min_callers` distinct callers (one caller's loop of calls is no usage), and the request of one tenant is never
suggested for a tool other tenants see: their users' words, names and figures would reach them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from toolrag.model import Tool, utc_now
from toolrag.registry import ToolRegistry
from toolrag.search.learned_defaults import MIN_CALLERS

MAX_ALIAS_CHARS = 120


@dataclass(frozen=True)
class AliasSuggestion:
    tool: str
    alias: str
    count: int  # sessions in which the request led to the tool only after a miss
    callers: int = 0  # distinct callers of those sessions
    tenants: tuple[str, ...] = ()  # the tenants whose users wrote it (none: callers of no tenant)


@dataclass
class _Seen:
    sessions: set[str] = field(default_factory=set)
    callers: set[str] = field(default_factory=set)
    tenants: set[str | None] = field(default_factory=set)


def suggest_aliases(
    registry: ToolRegistry, days: int = 30, min_count: int = 1, min_callers: int = MIN_CALLERS
) -> list[AliasSuggestion]:
    since = utc_now() - timedelta(days=days)
    active = {t.name: t for t in registry.tools()}
    seen: defaultdict[tuple[str, str], _Seen] = defaultdict(_Seen)
    for missed in registry.store.usage.missed_requests(since):
        alias = " ".join(missed.request.split())[:MAX_ALIAS_CHARS]
        tool = active.get(missed.tool)
        if tool is None or not alias or alias.lower() in {a.lower() for a in tool.aliases}:
            continue
        found = seen[missed.tool, alias]
        found.sessions.add(missed.session)
        found.callers.add(missed.caller or "")
        found.tenants.add(missed.tenant)
    suggestions = [
        AliasSuggestion(
            tool, alias, len(found.sessions), len(found.callers), tuple(sorted(t for t in found.tenants if t))
        )
        for (tool, alias), found in seen.items()
        if len(found.sessions) >= min_count
        and len(found.callers) >= min_callers
        and not _told_to_others(active[tool], found.tenants)
    ]
    return sorted(suggestions, key=lambda s: (-s.count, s.tool, s.alias))


def _told_to_others(tool: Tool, tenants: set[str | None]) -> bool:
    """Whether the tool is seen by tenants other than the one whose users wrote the request: a tool of no tenants is
    everyone's. Requests of callers of no tenant (a registry without tenants) and of several tenants are no one's."""
    if len(tenants) != 1 or None in tenants:
        return False
    return set(tool.tenants) != tenants


def apply_suggestions(
    registry: ToolRegistry, suggestions: list[AliasSuggestion], tools: set[str], by: str | None = None
) -> list[str]:
    """Add the suggested aliases of the given tools (one new version each, by `by`); returns the tools updated."""
    updated = []
    for name in sorted(tools):
        new = [s.alias for s in suggestions if s.tool == name]
        if new:
            registry.edit(name, lambda tool, new=new: {"aliases": [*tool.aliases, *new]}, by)  # type: ignore[misc]
            updated.append(name)
    return updated
