"""The last stage: what a chosen tool becomes in the results an agent reads, with its signals, its card in the
principal's tenant's own words where it has them, and why a tool of a set is there."""

from __future__ import annotations

from toolrag.model import SearchResult, SignalScores, Strategy
from toolrag.search.confidence import fitted_for
from toolrag.search.cut import Chosen
from toolrag.search.index import SearchIndex
from toolrag.search.relations import Prerequisite


def result(
    index: SearchIndex,
    chosen: Chosen,
    evidence: float,
    reformulation: str | None = None,
    strategy: Strategy = "retrieval",
) -> SearchResult:
    item, tool = chosen.item, index.tools[chosen.item.position]
    signals = SignalScores(
        dense=round(item.dense, 4),
        lexical=round(item.lexical, 4),
        fused=round(item.score, 4),
        evidence=round(evidence, 4),
        name_match=item.name_match,
        routed_category=item.routed_category,
        reformulation=reformulation,
    )
    return SearchResult(
        name=tool.name, score=round(chosen.probability, 4), signals=signals, card=tool.card(), strategy=strategy
    )


def in_set(
    index: SearchIndex, retrieved: SearchResult | None, position: int, why: Prerequisite | None, likelihood: float
) -> SearchResult:
    """A tool of a set: as retrieved, or needed by another tool of the set (then at least as likely to be needed as
    that tool; if optionally, half as), saying which tool needs it and for what."""
    if why is None and retrieved is not None:
        return retrieved
    needed = {"needed_by": index.names[why.needed_by], "needed_for": why.requirement.parameter} if why else {}
    if retrieved is not None:
        signals = retrieved.signals.model_copy(update=needed)
        return retrieved.model_copy(update={"signals": signals, "score": round(likelihood, 4)})
    tool = index.tools[position]
    return SearchResult(name=tool.name, score=round(likelihood, 4), signals=SignalScores(**needed), card=tool.card())


def flagged(request: str, results: list[SearchResult]) -> list[SearchResult]:
    """The results, marked uncalibrated when the request's language is none the relevance model was fitted on."""
    if not results or fitted_for(request):
        return results
    return [r.model_copy(update={"signals": r.signals.model_copy(update={"calibrated": False})}) for r in results]


def described(index: SearchIndex, results: list[SearchResult], tenant: str | None) -> list[SearchResult]:
    """The results with the cards of the tools described in `tenant`'s own words made from that text (the
    results are built from the snapshot's tools, which carry the source's description)."""
    shown = []
    for found in results:
        tool = index.tools[index.by_name[found.name.lower()]]
        own = tool.described_for(tenant)
        shown.append(found if own is None else found.model_copy(update={"card": tool.for_tenant(tenant).card()}))
    return shown
