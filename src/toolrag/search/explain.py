"""Why search() delivered what it did: the ranking behind a result, signal by signal, and why each tool that was
ranked but not returned was cut. The one implementation behind `toolrag explain`, `POST /explain` and the console's
playground.

A principal's explanation covers only the tools it may use. An operator's (`reveal_hidden`) also lists the tools the
request is close to that the principal may not use, and which rule hides each: the first place to look when a user
says "the tool exists but search never offers it".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from toolrag.embed.ensemble import model_cosines
from toolrag.embed.language import looks_english
from toolrag.model import Principal, SearchResult, Tool
from toolrag.search.confidence import fitted_for
from toolrag.search.config import SearchConfig
from toolrag.search.cut import Ranked
from toolrag.search.dense import dense_scores
from toolrag.search.filter import visibility_mask
from toolrag.search.groups import group_of
from toolrag.search.index import SearchIndex
from toolrag.search.request import searched_text
from toolrag.search.text import lexical_text, tokenize

if TYPE_CHECKING:
    from toolrag.search.pipeline import Retriever

RANKED = 10  # candidates explained
HIDDEN = 5  # hidden tools shown to operators


class RankedTool(BaseModel):
    """One candidate of the ranking and every signal behind its place."""

    name: str
    rank: int = Field(description="1 for the best fused score")
    delivered: bool = Field(description="search() returned it")
    probability: float = Field(description="the estimated probability of relevance search() shows")
    fused: float = Field(description="the score that orders the candidates (1: the best)")
    cosine: float = Field(description="the request's cosine with the tool (or one of its example requests)")
    model_cosines: dict[str, float] = Field(description="each embedding model's cosine with the tool's description")
    lexical: float = Field(description="share of the request's best possible word score")
    matched_words: list[str] = Field(description="the request's words the tool's text holds")
    example: str | None = Field(default=None, description="the tool's example request nearest this request")
    example_cosine: float | None = None
    example_source: str | None = Field(
        default=None, description="who wrote that example: operator, usage or written (the operator's chat model)"
    )
    description: str = Field(
        default="source", description="which description was used: the source's, or the principal's tenant's own"
    )
    description_cosine: float | None = Field(
        default=None, description="the request's cosine with the tool described in the tenant's own words"
    )
    group: str | None = Field(default=None, description="its group (category or MCP server)")
    routed_category: str | None = Field(default=None, description="a routing rule sent the request to its category")
    named: bool = Field(default=False, description="the request names the tool")
    cut: str | None = Field(default=None, description="why it was not returned")


class HiddenTool(BaseModel):
    """A tool close to the request that the principal may not use (operators only)."""

    name: str
    cosine: float
    hidden_by: str


class Explanation(BaseModel):
    request: str
    request_note: str | None = Field(default=None, description="what search left out of a long request")
    strategy: str
    needs_tool: bool = Field(description="the request reads as a request for a tool (not small talk)")
    evidence: float = Field(description="below 0 the request reads as needing no tool (search/confidence.py)")
    decision: str = Field(description="the decision in words")
    meaning: str = Field(default="", description="what the probabilities shown mean, with this registry's settings")
    calibrated: bool = Field(
        default=True, description="False: the request's language is none the probabilities were calibrated on"
    )
    delivered: list[str]
    steps: list[str] = Field(
        default_factory=list, description="the steps of a request of several, each searched as a request of its own"
    )
    needed: dict[str, str] = Field(
        default_factory=dict, description="delivered tools that another delivered tool requires, and why"
    )
    related: dict[str, str] = Field(
        default_factory=dict,
        description="delivered tools related to another delivered tool (learned from usage, or confirmed), and why",
    )
    also_needs: dict[str, list[str]] = Field(
        default_factory=dict, description="delivered tools whose required tools did not all fit the set: the rest"
    )
    proposed: dict[str, list[str]] = Field(
        default_factory=dict,
        description="delivered tools for which a chat model proposed requirements that wait for an admin (unused)",
    )
    ranking: list[RankedTool]
    hidden: list[HiddenTool] = Field(default_factory=list)
    injected_tokens: int = 0
    catalog_tokens: int = 0
    saved_pct: float = 0.0


def explain(
    retriever: Retriever,
    query: str,
    principal: Principal,
    delivered: list[SearchResult],
    k: int,
    reveal_hidden: bool = False,
) -> Explanation:
    """`delivered`: what search() returned for this request and principal (with k at most `k`)."""
    searched = searched_text(query, retriever.config.max_request_chars)
    index = retriever.snapshot()
    found, steps = retriever.candidates_and_steps(query, principal, RANKED)
    probabilities, config = retriever.probabilities(found), retriever.config
    returned = {result.name for result in delivered}
    embedder = index.embedder or retriever.embedder
    vector = embedder.embed_query(searched.text) if retriever.config.mode != "lexical" else None
    words = set(tokenize(searched.text, stem=looks_english(searched.text)))
    per_model = _model_cosines(index, embedder, searched.text, found.items) if vector is not None else {}
    ranking = []
    for rank, (item, probability) in enumerate(zip(found.items, probabilities, strict=True), 1):
        tool = index.tools[item.position]
        ranking.append(
            RankedTool(
                name=tool.name,
                rank=rank,
                delivered=tool.name in returned,
                probability=round(probability, 4),
                fused=round(item.score, 4),
                cosine=round(item.dense, 4),
                model_cosines=per_model.get(item.position, {}),
                lexical=round(item.lexical, 4),
                matched_words=sorted(words & set(tokenize(lexical_text(tool), stem=True)) | _unstemmed(words, tool)),
                group=group_of(tool),
                routed_category=item.routed_category,
                named=item.name_match,
                cut=None
                if tool.name in returned
                else _why_cut(found.needs_tool, bool(returned), rank, k, probability, config),
                **_nearest_views(index, vector, item.position, principal.tenant, tool),
            )
        )
    return Explanation(
        request=query if len(query) <= 2000 else query[:2000] + "...",
        request_note=searched.note,
        strategy=delivered[0].strategy if delivered else "retrieval",
        needs_tool=found.needs_tool,
        evidence=round(found.evidence, 4),
        decision=_decision(found.needs_tool, found.evidence, delivered, ranking, words, config.no_tool_below),
        meaning=_meaning(config),
        calibrated=fitted_for(searched.text),
        delivered=[result.name for result in delivered],
        steps=steps,
        needed={result.name: why for result in delivered if (why := result.needed_as())},
        related={result.name: why for result in delivered if (why := result.signals.related_why)},
        also_needs={result.name: result.signals.also_needs for result in delivered if result.signals.also_needs},
        proposed=_waiting_proposals(retriever, index, delivered, principal),
        ranking=ranking,
        hidden=_hidden(retriever, index, vector, principal) if reveal_hidden and vector is not None else [],
    )


def _waiting_proposals(
    retriever: Retriever, index: SearchIndex, delivered: list[SearchResult], principal: Principal
) -> dict[str, list[str]]:
    """The requirements a chat model proposed for the delivered tools that search does not use yet, naming only
    tools the principal may use."""
    if retriever.config.accept_proposed_relations:
        return {}
    book, seen = retriever.relations(index), visibility_mask(index, principal)
    waiting = {}
    for result in delivered:
        names = [
            p.other
            for p in book.proposed_requirements(result.name)
            if (at := index.position_named(p.other)) is not None and (seen is None or seen[at])
        ]
        if names:
            waiting[result.name] = names
    return waiting


def _why_cut(needs_tool: bool, any_returned: bool, rank: int, k: int, probability: float, config: SearchConfig) -> str:
    if not needs_tool:
        return "the request reads as small talk: no tool is returned"
    if not any_returned and probability < config.no_tool_below:
        return f"probability {probability:.3f} is below no_tool_below {config.no_tool_below}: it does not serve it"
    if rank > k:
        return f"ranked below the {k} tools returned at most"
    if probability < config.min_confidence:
        return f"probability {probability:.3f} is below min_confidence {config.min_confidence}"
    return "another intent's tool took its place"


def _decision(
    needs_tool: bool,
    evidence: float,
    delivered: list[SearchResult],
    ranking: list[RankedTool],
    words: set[str],
    no_tool_below: float,
) -> str:
    if delivered and delivered[0].strategy == "all":
        return "every tool this principal may use fits the token budget: all of them are returned, likeliest first"
    nearest = max(ranking, key=lambda tool: tool.probability, default=None)
    if needs_tool and not delivered and nearest is not None and nearest.probability < no_tool_below:
        missing = sorted(words - set(nearest.matched_words))
        uncovered = f"; its text lacks the request's {', '.join(missing[:6])}" if missing else ""
        return (
            f"no tool here serves the request: the nearest, {nearest.name}, is {nearest.probability:.2f} likely to"
            f" (below no_tool_below {no_tool_below}){uncovered}"
        )
    if needs_tool and evidence >= 0:
        return (
            f"the best tool beats the nearest small talk by more than small talk does here (evidence {evidence:+.3f})"
        )
    if needs_tool:
        return "the request names a tool or a routing rule sent it to a category"
    if delivered:
        return "it read as small talk, but a second-chance reformulation found tools"
    return f"the request reads as small talk: its best tool is no closer than small talk (evidence {evidence:+.3f})"


def _meaning(config: SearchConfig) -> str:
    if config.mode == "lexical":
        return "p is the fused score (lexical mode: without cosines it is no probability), best first"
    return (
        f"p is the probability that the tool serves the request, where {config.absent_share:.0%} of the requests for"
        f" a tool find none here (absent_share: the catalog lacks it, or hides it); below {config.no_tool_below}"
        " (no_tool_below) not even the likeliest is returned"
    )


def _model_cosines(
    index: SearchIndex, embedder: object, text: str, items: Sequence[Ranked]
) -> dict[int, dict[str, float]]:
    """Each model's cosine of the request with each ranked tool's own text, by tool position."""
    rows = {item.position: index.vectors.rows_of(np.array([item.position])) for item in items}
    positions = [position for position, found in rows.items() if len(found)]
    if not positions:
        return {}
    documents = np.vstack([index.vectors.span(int(rows[p][0]), int(rows[p][0]) + 1)[0] for p in positions])
    cosines = model_cosines(embedder, text, documents)  # type: ignore[arg-type]
    return {p: {model: round(c, 4) for model, c in row.items()} for p, row in zip(positions, cosines, strict=True)}


def _nearest_views(
    index: SearchIndex, vector: np.ndarray | None, position: int, tenant: str | None, tool: Tool
) -> dict[str, object]:
    """Which description the principal's tenant gets, and its nearest example request, with their cosines."""
    own = tool.described_for(tenant)
    shown: dict[str, object] = {"description": f"override for tenant {tenant}" if own is not None else "source"}
    views = index.examples
    if vector is None or views is None or not views.count:
        return shown
    cosines = views.of_tool(vector, position, tenant)
    examples = [(which, cosine) for which, cosine in cosines if which < len(tool.examples)]
    described = [cosine for which, cosine in cosines if which >= len(tool.examples)]
    if examples:
        which, cosine = max(examples, key=lambda found: found[1])
        nearest = tool.examples[which]
        shown |= {"example": nearest.text, "example_cosine": round(cosine, 4), "example_source": nearest.source}
    if own is not None and described:
        shown["description_cosine"] = round(max(described), 4)
    return shown


def _unstemmed(words: set[str], tool: Tool) -> set[str]:
    """Request words found as written (requests in other languages are not stemmed)."""
    return words & set(tokenize(lexical_text(tool), stem=False))


def _hidden(retriever: Retriever, index: SearchIndex, vector: np.ndarray, principal: Principal) -> list[HiddenTool]:
    """The tools nearest the request by cosine that the principal may not use, with the rule that hides each."""
    cosines = dense_scores(index, vector, index.live)
    visible = visibility_mask(index, principal)
    hidden: list[HiddenTool] = []
    for position in np.argsort(-cosines).tolist():
        if len(hidden) == HIDDEN or not np.isfinite(cosines[position]):
            break
        if (index.live is not None and not index.live[position]) or (visible is None or visible[position]):
            continue
        tool = index.tools[position]
        hidden.append(
            HiddenTool(
                name=tool.name, cosine=round(float(cosines[position]), 4), hidden_by=principal.hidden_by(tool) or ""
            )
        )
    return hidden
