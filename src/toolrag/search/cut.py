"""The last step: keep tools with real evidence, cut where scores fall off, stop at k.

The fused score is relative to one request (min-max normalized), so whether anything is relevant at all is
decided on absolute evidence instead:
- the cosine with the request: high, or (for the best tool) clearly ahead of every other tool's;
- the share of the request's word weight that the tool matches, two words at least;
- the tool's name in the request, or a routing rule that sends the request to the tool's category.
A request nothing passes for gets no tools, and the caller answers without them.
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


def has_evidence(item: Ranked, config: SearchConfig, min_similarity: float | None = None) -> bool:
    """`min_similarity` overrides the configured one (a calibrated threshold)."""
    if item.name_match or item.routed_category is not None:
        return True  # the request names the tool, or a configured routing rule sends it to the tool's category
    threshold = config.min_similarity if min_similarity is None else min_similarity
    if config.mode != "lexical" and (
        item.dense >= threshold or (item.dense >= config.lead_min_similarity and item.dense_lead >= config.min_lead)
    ):
        return True
    # One shared word is too little to go on ("tell me a joke" shares "tell" with a chat tool's alias).
    enough_words = item.matched_terms >= min(2, item.request_terms)
    return config.mode != "dense" and enough_words and item.lexical >= config.min_lexical_coverage


def cut(ranking: list[Ranked], config: SearchConfig, k: int, min_similarity: float | None = None) -> list[Ranked]:
    passing = [item for item in ranking if has_evidence(item, config, min_similarity)]
    if not passing:
        return []
    best = passing[0].score
    return [item for item in passing if item.name_match or item.score >= best - config.max_drop][:k]
