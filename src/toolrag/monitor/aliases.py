"""Alias suggestions learned from usage: the words users used for a tool that retrieval did not offer them.

A request is a candidate alias for a tool when, in the same session, the tool was then called successfully
although that request's shortlist did not contain it. Suggestions are only proposals: a person reviews them and
applies them (`toolrag suggest-aliases --apply TOOL`), which makes a new version of the tool.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import timedelta

from toolrag.model import utc_now
from toolrag.registry import ToolRegistry

MAX_ALIAS_CHARS = 120


@dataclass(frozen=True)
class AliasSuggestion:
    tool: str
    alias: str
    count: int  # sessions in which the request led to the tool only after a miss


def suggest_aliases(registry: ToolRegistry, days: int = 30, min_count: int = 1) -> list[AliasSuggestion]:
    since = utc_now() - timedelta(days=days)
    active = {t.name: t for t in registry.tools()}
    counts: Counter[tuple[str, str]] = Counter()
    for tool, request in registry.store.usage.missed_requests(since):
        alias = " ".join(request.split())[:MAX_ALIAS_CHARS]
        if tool in active and alias and alias.lower() not in {a.lower() for a in active[tool].aliases}:
            counts[(tool, alias)] += 1
    return [
        AliasSuggestion(tool, alias, count)
        for (tool, alias), count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
        if count >= min_count
    ]


def apply_suggestions(registry: ToolRegistry, suggestions: list[AliasSuggestion], tools: set[str]) -> list[str]:
    """Add the suggested aliases of the given tools (one new version each); returns the tools updated."""
    updated = []
    for name in sorted(tools):
        new = [s.alias for s in suggestions if s.tool == name]
        if new:
            registry.edit(name, lambda tool, new=new: {"aliases": [*tool.aliases, *new]})  # type: ignore[misc]
            updated.append(name)
    return updated
