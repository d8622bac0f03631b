"""The token budget: what injecting a principal's whole catalog would cost, and whether it fits a budget (the `all`
strategy, `SearchConfig.inject_all_below_tokens`).

Counts are derived from the snapshot and kept in it (search/derived.py): a catalog's total once per snapshot,
visibility and format; a tool's definition once per content and format, carried over to the snapshot that follows a
change (an unchanged tool is not counted again).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from toolrag.errors import ToolNotFoundError
from toolrag.inject.formats import render
from toolrag.inject.tokens import tools_tokens
from toolrag.model import Principal, SearchResult, Strategy, Tool
from toolrag.search.derived import Slot
from toolrag.search.filter import partition
from toolrag.search.index import SearchIndex

TOOL_TOKENS: Slot[int] = Slot("prompt tokens by tool content and format", max_keys=None, carried=True)
CATALOG_TOKENS: Slot[int] = Slot("catalog tokens by visibility and format")
CATALOG_FITS: Slot[bool] = Slot("catalog fits by visibility, budget and format")


@dataclass(frozen=True)
class Selection:
    """The tools chosen for one request, rendered for a provider, with what they cost in prompt tokens."""

    results: list[SearchResult]
    tools: list[dict[str, Any]]
    injected_tokens: int
    catalog_tokens: int
    request_note: str | None = None  # what search left out of a long request (search/request.py)

    @property
    def strategy(self) -> Strategy:
        """`all` when the principal's whole catalog fit the token budget and was returned, else `retrieval`."""
        return "all" if any(r.strategy == "all" for r in self.results) else "retrieval"

    @property
    def saved_pct(self) -> float:
        if self.catalog_tokens == 0:
            return 0.0
        return round(100.0 * (1 - self.injected_tokens / self.catalog_tokens), 1)

    def costs(self) -> dict[str, float]:
        """injected_tokens, catalog_tokens and saved_pct (an explanation's)."""
        return {
            "injected_tokens": self.injected_tokens,
            "catalog_tokens": self.catalog_tokens,
            "saved_pct": self.saved_pct,
        }


def chosen_tools(index: SearchIndex, results: Sequence[SearchResult], tenant: str | None) -> list[Tool]:
    """The tools of a search's results, from the snapshot it searched, as `tenant` is shown them."""
    return [index.tools[index.by_name[result.name.lower()]].for_tenant(tenant) for result in results]


def selected(
    index: SearchIndex, results: list[SearchResult], fmt: str, principal: Principal, note: str | None
) -> Selection:
    """The results rendered in `fmt`, with what they and the principal's whole catalog cost."""
    rendered = render(chosen_tools(index, results, principal.tenant), fmt)
    return Selection(results, rendered, tools_tokens(rendered), catalog_tokens(index, principal, fmt), note)


def schemas(visible: Sequence[Tool], names: Iterable[str], fmt: str) -> list[Any]:
    """The full definitions of the named tools among `visible`; a tool not among them is reported as not found."""
    by_name = {tool.name: tool for tool in visible}
    chosen = []
    for name in names:
        if name not in by_name:
            raise ToolNotFoundError(f"no tool named {name!r}", name=name)
        chosen.append(by_name[name])
    return render(chosen, fmt)


def tool_tokens(index: SearchIndex, tool: Tool, fmt: str) -> int:
    """What the tool's full definition costs in `fmt`."""
    return index.derived.get(TOOL_TOKENS, (tool.content_hash, fmt), lambda: tools_tokens(render([tool], fmt)))


def position_tokens(index: SearchIndex, position: int) -> int:
    """What the full definition of the snapshot's tool at `position` costs, as OpenAI's format counts it (a set's
    budget: search/complete.py)."""
    return tool_tokens(index, index.tools[position], "openai")


def catalog_tokens(index: SearchIndex, principal: Principal, fmt: str = "openai") -> int:
    """What injecting every tool the principal can see would cost."""

    def count() -> int:
        return sum(tool_tokens(index, tool, fmt) for tool in partition(index, principal)[0])

    return index.derived.get(CATALOG_TOKENS, (principal.visibility_key, fmt), count)


def catalog_fits(index: SearchIndex, principal: Principal, budget: int, fmt: str = "openai") -> bool:
    """Whether every tool the principal can see costs fewer tokens than `budget` in full; counts only until the
    budget is reached."""

    def fits() -> bool:
        total = 0
        for tool in partition(index, principal)[0]:
            total += tool_tokens(index, tool, fmt)
            if total >= budget:
                return False
        return True

    return index.derived.get(CATALOG_FITS, (principal.visibility_key, budget, fmt), fits)
