"""The last step: which of a request's candidates search() returns.

A request that reads as small talk gets none (search/confidence.py), unless it names a tool or a routing rule sends
it to a category; nor does one whose likeliest tool is less likely than `SearchConfig.no_tool_below` to serve it
(the catalog holds no tool for it, or hides it: both look the same). Otherwise the best `k` candidates are returned,
best first by their probability of being relevant, without the ones below `SearchConfig.min_confidence` (the best
one is always kept: the request needs a tool, and it is the likeliest).
"""

from __future__ import annotations

from dataclasses import dataclass

from toolrag.search.config import SearchConfig


@dataclass(frozen=True)
class Ranked:
    """One tool in a request's ranking, before the cut."""

    position: int  # into the snapshot's tools
    score: float
    dense: float
    lexical: float
    name_match: bool = False
    routed_category: str | None = None
    dense_lead: float = 0.0  # for the tool with the best cosine: how far it leads the second best
    matched_terms: int = 0  # distinct request words the tool contains
    request_terms: int = 0
    text_dense: float = 0.0  # the cosine with the tool's own texts; `dense` also counts its example requests


@dataclass(frozen=True)
class Chosen:
    item: Ranked
    probability: float


def _asked_for(item: Ranked) -> bool:
    """The request names the tool, or a routing rule sends it to the tool's category: the operator's or the user's
    word, kept whatever its probability."""
    return item.name_match or item.routed_category is not None


def choose(
    items: list[Ranked],
    probabilities: list[float],
    needs_tool: bool,
    config: SearchConfig,
    k: int,
    floored: bool = True,
) -> list[Chosen]:
    """`floored`: nothing but the tools the request named or a rule routed it to when no candidate, among all of
    them (not only the first `k`: the answer must not depend on k), reaches `no_tool_below`. A request read as
    several steps is not floored: each step passed the small-talk decision by itself, and a request about several
    things spreads its probability."""
    if not needs_tool:
        return []
    top = [Chosen(item, p) for item, p in zip(items[:k], probabilities, strict=False)]
    top.sort(key=lambda chosen: (not chosen.item.name_match, -chosen.probability))
    if floored and max(probabilities, default=0.0) < config.no_tool_below:
        return [chosen for chosen in top if _asked_for(chosen.item)]  # no tool here serves the request
    return [
        chosen
        for number, chosen in enumerate(top)
        if number == 0 or chosen.probability >= config.min_confidence or chosen.item.name_match
    ]
