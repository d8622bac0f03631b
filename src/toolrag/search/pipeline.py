"""The retrieval pipeline: principal -> visibility filter -> route -> lexical + dense -> fuse -> decide -> cut.

`Retriever.rank` gives the full ranking of a request (what the eval harness measures); `Retriever.search` adds
the decision whether the request needs a tool, each tool's probability of being relevant, the cut, the
always-include list and the query cache (what agents use); or, when the principal's whole catalog fits the token
budget, returns all of it by relevance.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from toolrag import tracing
from toolrag.embed.base import Embedder
from toolrag.embed.language import looks_english
from toolrag.limits import MAX_K
from toolrag.model import Principal, Requirement, SearchResult, SignalScores, Strategy, Tool
from toolrag.search.cache import QueryCache
from toolrag.search.calibrate import FixedTextVectors, Levels, SmallTalkReference, embed_fixed, small_talk_reference
from toolrag.search.confidence import MODEL, SPREAD_OVER, Candidates, RelevanceModel, fitted_for
from toolrag.search.config import SearchConfig
from toolrag.search.cut import Chosen, Ranked, choose
from toolrag.search.dense import dense_scores, exact_dense_scores
from toolrag.search.derived import Slot
from toolrag.search.examples import ranking_cosines
from toolrag.search.feedback import UsageMemory, learner_of
from toolrag.search.filter import visibility_mask
from toolrag.search.fuse import fuse, min_max
from toolrag.search.groups import blend_groups, description_scores
from toolrag.search.index import SearchIndex
from toolrag.search.inferred import InferredRelations, SeenRelations, infer
from toolrag.search.intents import split_intents
from toolrag.search.learned import RelationBook, learner_key
from toolrag.search.lexical import BoolArray, FloatArray, IntArray
from toolrag.search.relations import Prerequisite, Requires, requirements, with_prerequisites
from toolrag.search.request import searched_text
from toolrag.search.route import CategoryRouter
from toolrag.search.steps import Step, merge_rankings, tools_of_steps, trusted_steps
from toolrag.search.text import tokenize

if TYPE_CHECKING:
    from toolrag.search.reformulate import Rewriter, Vocabulary

log = logging.getLogger("toolrag.search")
GROUPED_HEAD = 256  # candidates that take part in group ranking
_QUOTES = "\"'`()[]{}<>,;:!?"
_SPACES = re.compile(r"\s+")
# Derived from a snapshot and kept in it (search/derived.py): once per snapshot, levels per visibility and quantile.
SMALL_TALK_REFERENCE: Slot[SmallTalkReference | None] = Slot("small-talk reference")
SMALL_TALK_LEVELS: Slot[Levels] = Slot("small-talk levels")
VOCABULARY: Slot[Vocabulary] = Slot("typo vocabulary")
# Inferred once per snapshot, whoever asks first (a background thread after a change), the others waiting for it.
INFERRED: Slot[InferredRelations] = Slot("inferred requirements", single_flight=True)
INFERRED_SEEN: Slot[SeenRelations] = Slot("inferred requirements as a visibility sees them")
RELATIONS: Slot[RelationBook] = Slot("stored relations: learned from usage, and admins' verdicts")


def normalize_query(query: str) -> str:
    return _SPACES.sub(" ", query).strip().lower()


def _whole_name(query: str) -> str:
    """The request read as one tool name: lowercased, without quotes and a closing full stop."""
    return normalize_query(query).strip(_QUOTES + ".")


def _top(candidates: IntArray, scores: FloatArray, limit: int) -> list[int]:
    """Positions of the `limit` best candidates, best first (ties broken later by name)."""
    if len(candidates) > limit * 4:
        # Keep a margin past `limit` so equal scores at the boundary can still be ordered by name.
        keep = np.argpartition(-scores, limit * 4 - 1)[: limit * 4]
        candidates, scores = candidates[keep], scores[keep]
    order = np.argsort(-scores, kind="stable")[: limit * 4]
    return [int(candidates[i]) for i in order]


def _flagged(request: str, results: list[SearchResult]) -> list[SearchResult]:
    """The results, marked uncalibrated when the request's language is none the relevance model was fitted on."""
    if not results or fitted_for(request):
        return results
    return [r.model_copy(update={"signals": r.signals.model_copy(update={"calibrated": False})}) for r in results]


def _inference_progress(done: int, total: int) -> None:
    """Inferring requirements for a large catalog takes a while: say how far it is, every 5,000 tools."""
    if done % 5000 == 0 or (done == total and total >= 5000):
        log.info("inferring requirements: %d of %d tools", done, total)


def _usable(index: SearchIndex, visible: BoolArray | None) -> BoolArray | None:
    """Positions a principal who sees `visible` may use and that are live (None: all)."""
    if index.live is None:
        return visible
    return index.live if visible is None else visible & index.live


def _lead(dense: FloatArray, candidates: IntArray) -> tuple[int, float]:
    """The candidate with the best cosine, and by how much it leads the second best."""
    if len(candidates) < 2:
        return (int(candidates[0]), 1.0) if len(candidates) else (-1, 0.0)
    scores = dense[candidates]
    first, second = np.argpartition(-scores, 1)[:2]
    if scores[second] > scores[first]:
        first, second = second, first
    return int(candidates[first]), float(scores[first] - scores[second])


def _with_confirmed(tool: Tool, book: RelationBook) -> Tool:
    """`tool` with the requirements an admin confirmed for it after those it declares."""
    confirmed = book.confirmed_requirements(tool.name)
    if not confirmed:
        return tool
    declared = {r.tool.lower() for r in tool.requires}
    extra = [Requirement(tool=v.other, parameter=v.parameter) for v in confirmed if v.other.lower() not in declared]
    return tool.model_copy(update={"requires": [*tool.requires, *extra]})


def _described(index: SearchIndex, results: list[SearchResult], tenant: str | None) -> list[SearchResult]:
    """The results with the cards of the tools described in `tenant`'s own words made from that text (the
    results are built from the snapshot's tools, which carry the source's description)."""
    described = []
    for result in results:
        tool = index.tools[index.by_name[result.name.lower()]]
        own = tool.described_for(tenant)
        described.append(result if own is None else result.model_copy(update={"card": tool.for_tenant(tenant).card()}))
    return described


def _in_set(
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


@dataclass(frozen=True)
class _Scored:
    """A request's scores over the snapshot's positions, from which its ranking's items are read."""

    fused: FloatArray
    dense: FloatArray  # cosines with the tools' texts and the principal's examples
    text_dense: FloatArray  # cosines with the tools' own texts
    coverage: FloatArray
    matched_terms: IntArray

    def ranked(
        self, index: SearchIndex, position: int, named: bool, routed: set[str], lead: float, tokens: list[str]
    ) -> Ranked:
        category = index.categories[position]
        return Ranked(
            position=position,
            score=1.0 if named else round(float(self.fused[position]), 6),
            dense=max(0.0, float(self.dense[position])),
            lexical=float(self.coverage[position]),
            name_match=named,
            routed_category=category if category in routed else None,
            dense_lead=lead,
            matched_terms=int(self.matched_terms[position]),
            request_terms=len(set(tokens)),
            text_dense=max(0.0, float(self.text_dense[position])),
        )


@dataclass(frozen=True)
class RequestContext:
    """One request as the ranking reads it, built once by search(), rank() and their kin: the snapshot searched,
    what is searched for (the request, one of its steps, a rephrasing), who asks and what they may see and use."""

    index: SearchIndex
    text: str
    principal: Principal
    visible: BoolArray | None  # positions the principal may see (None: all)
    usable: BoolArray | None  # ... and that are live
    english: bool  # the request's language (the whole request's for its steps): its small-talk level
    mode: str  # hybrid, dense or lexical
    limit: int  # candidates ranked

    def about(self, text: str) -> RequestContext:
        """The same request, ranking `text`: one of its steps."""
        return replace(self, text=text)


class Retriever:
    """Searches the latest snapshot that `snapshot()` provides; thread-safe. What is derived from a snapshot is kept
    in it (search/derived.py); the query cache, by snapshot serial, is the retriever's own."""

    def __init__(
        self,
        snapshot: Callable[[], SearchIndex],
        embedder: Embedder,
        config: SearchConfig,
        rewriter: Rewriter | None = None,
        fixed_vectors: FixedTextVectors = embed_fixed,
        catalog_fits: Callable[[Principal, int], bool] | None = None,
        stored_relations: Callable[[], RelationBook] | None = None,
    ) -> None:
        """`catalog_fits(principal, budget)`: whether every tool the principal may use costs fewer prompt tokens
        than the budget, in full (for the `all` strategy). `stored_relations()`: the store's learned relations and
        verdicts, read once per snapshot (a write to them moves the generation)."""
        self._snapshot = snapshot
        self._stored_relations = stored_relations
        self._fixed_vectors = fixed_vectors
        self._catalog_fits = catalog_fits
        self.rewriter = rewriter
        self.memory: UsageMemory | None = None  # `use_memory`: what ToolRegistry.learn_from_usage learned
        self.relevance = MODEL  # `use_relevance`
        self.embedder = embedder
        self.config = config
        self.router = CategoryRouter.from_config(config.routes)
        self.cache: QueryCache[list[SearchResult]] = QueryCache(config.cache_entries, config.cache_ttl_seconds)
        self._last_inferred: InferredRelations | None = None  # what the next snapshot's inference starts from
        self._warned_generation = -1

    # -- what the retriever searches with -------------------------------------------------------------------------

    def use_config(self, config: SearchConfig) -> None:
        """Search with `config` from now on (an evaluation of each mode, an ablation); cached results are dropped."""
        self.config = config
        self.router = CategoryRouter.from_config(config.routes)
        self.cache.clear()

    def use_relevance(self, model: RelevanceModel) -> None:
        """Decide and show with another relevance model (one fitted leaving a catalog out: benchmarks/cut.py);
        cached results are dropped."""
        self.relevance = model
        self.cache.clear()

    def use_memory(self, memory: UsageMemory | None) -> None:
        """Adjust scores with what the usage log taught (search/feedback.py); cached results are dropped."""
        self.memory = memory
        self.cache.clear()

    def use_embedder(self, embedder: Embedder) -> None:
        """Embed requests with `embedder` where a snapshot names no model of its own (the index switched models)."""
        self.embedder = embedder

    # -- searching ------------------------------------------------------------------------------------------------

    def search(self, query: str, principal: Principal, k: int | None = None) -> list[SearchResult]:
        """At most `k` tools (None: `SearchConfig.k`, or the whole catalog when it fits the budget: an explicit k
        wins over the `all` strategy)."""
        query = self.searched(query)
        index = self._snapshot()
        # Case kept: steps are told apart by capitals after full stops ("... stock. Order ...").
        # The learner too: callers without a tenant learn from their own usage only (search/learned.py).
        learner = learner_key(principal.tenant, principal.caller)
        key = (_SPACES.sub(" ", query).strip(), principal.visibility_key, learner, index.serial, k)
        cached = self.cache.get(key)
        if cached is not None:
            return list(cached)
        if k is None and self.serves_all(principal):
            request = self._request(index, query, principal, index.size, self.config.mode)
            results = self._whole_catalog(request)
        else:
            limit = self.config.k if k is None else k
            request = self._request(index, query, principal, max(limit, SPREAD_OVER), self.config.mode)
            retrieved, found, alternatives = self._retrieve(request, limit)
            results = self._with_related(request, self._with_prerequisites(request, retrieved), found)
            results = self._with_alternatives(request, results, alternatives)
        results.extend(self._always_included(request, {r.name for r in results}))
        results = _described(index, _flagged(query, results), principal.tenant)
        self.cache.put(key, results)
        return list(results)

    def snapshot(self) -> SearchIndex:
        return self._snapshot()

    def named(self, query: str, principal: Principal, limit: int) -> tuple[list[SearchResult], int]:
        """The tools a request names outright, in name order: the whole request is a tool's name (any case), or a
        name prefix ending in `*` (`shop.*`); at most `limit` of them, and how many matched. Only the tools the
        principal may use are looked at, so neither a name nor a prefix tells anything of hidden tools."""
        index = self._snapshot()
        usable = _usable(index, visibility_mask(index, principal))
        whole = _whole_name(query)
        if whole.endswith("*"):
            prefix = whole[:-1]
            if not prefix or any(c in prefix for c in "* "):
                return [], 0
            searched = range(index.size) if usable is None else np.flatnonzero(usable).tolist()
            positions = [p for p in searched if index.names[p].lower().startswith(prefix)]
        else:
            position = index.position_named(whole)
            positions = [position] if position is not None and (usable is None or usable[position]) else []
        positions.sort(key=lambda p: index.names[p])
        found = [
            SearchResult(name=tool.name, score=1.0, signals=SignalScores(name_match=True), card=tool.card())
            for tool in (index.tools[p] for p in positions[:limit])
        ]
        return _described(index, found, principal.tenant), len(positions)

    def serves_all(self, principal: Principal) -> bool:
        """Whether the principal's whole catalog fits `SearchConfig.inject_all_below_tokens`."""
        budget = self.config.inject_all_below_tokens
        return budget > 0 and self._catalog_fits is not None and self._catalog_fits(principal, budget)

    def rank(self, query: str, principal: Principal, limit: int = 10, mode: str | None = None) -> list[SearchResult]:
        """The top `limit` visible tools by fused score, with no decision or cut."""
        query = self.searched(query)
        request = self._request(self._snapshot(), query, principal, limit, mode or self.config.mode)
        found = self._candidates(request, self._intents(query))
        ranked = [self._result(request.index, chosen, found.evidence) for chosen in self._scored(found)]
        return _described(request.index, _flagged(query, ranked), principal.tenant)

    def candidates(self, query: str, principal: Principal, limit: int = SPREAD_OVER) -> Candidates:
        """The best candidates of the configured mode and what the relevance model reads (search/confidence.py)."""
        query = self.searched(query)
        request = self._request(self._snapshot(), query, principal, limit, self.config.mode)
        return self._candidates(request, self._intents(query))

    def candidates_and_steps(self, query: str, principal: Principal, limit: int) -> tuple[Candidates, list[str]]:
        """`candidates()`, and the steps search() delivers a request of several in, each searched as a request of
        its own (none: one step): one ranking for both (explain)."""
        query = self.searched(query)
        request = self._request(self._snapshot(), query, principal, limit, self.config.mode)
        found, steps = self._candidates_and_steps(request, self._intents(query))
        delivered = self._chosen_per_step(request, steps, found, self.config.k) if found.needs_tool else []
        return found, [step.text for step, _ in delivered]

    def probabilities(self, candidates: Candidates) -> list[float]:
        """The candidates' probabilities of being relevant; in lexical mode, with no cosines to read, their fused
        scores instead."""
        if self.config.mode == "lexical":
            return [item.score for item in candidates.items]
        return self.relevance.probabilities(candidates)

    def searched(self, query: str) -> str:
        """What search reads of a request (search/request.py): without data blobs, cut to `max_request_chars`."""
        return searched_text(query, self.config.max_request_chars).text

    @staticmethod
    def _request(index: SearchIndex, text: str, principal: Principal, limit: int, mode: str) -> RequestContext:
        visible = visibility_mask(index, principal)
        usable = _usable(index, visible)
        return RequestContext(index, text, principal, visible, usable, looks_english(text), mode, limit)

    def _retrieve(
        self, request: RequestContext, k: int
    ) -> tuple[list[SearchResult], Candidates | None, list[SearchResult]]:
        """The retrieved tools, the ranking they were chosen from (None: a second chance found them), and, for a
        request read as steps, the other tools the whole request would get read as one: a sentence of context can
        pass for a step, and must not cost the tool the request is about (`_with_alternatives`)."""
        index, parts = request.index, self._intents(request.text)
        found, steps = self._candidates_and_steps(request, parts)
        delivered = self._chosen_per_step(request, steps, found, k) if found.needs_tool else []
        if delivered:
            probabilities = self.probabilities(found)
            likeliest = choose(found.items, probabilities, True, self.config, 1)
            chosen = tools_of_steps(likeliest, [chosen for _, chosen in delivered], self.config.max_set_tools)
            whole = choose(found.items, probabilities, True, self.config, k)  # `_with_alternatives` skips the set's
            others = [self._result(index, c, found.evidence) for c in whole]
            return [self._result(index, c, found.evidence) for c in chosen], found, others
        # Parts that did not make steps of their own may still each bring a tool: one more per part, up to MAX_K.
        bound = min(MAX_K, k + len(parts) - 1)
        chosen = choose(found.items, self.probabilities(found), found.needs_tool, self.config, bound)
        if chosen:
            return [self._result(index, c, found.evidence) for c in chosen], found, []
        return self._reformulate(request, bound), None, []

    def _chosen_per_step(
        self, request: RequestContext, steps: list[Step], whole: Candidates, k: int
    ) -> list[tuple[Step, list[Chosen]]]:
        """What each step of a request of several would get as a request of its own: its likeliest tool, and up to
        `k` with those that reach `step_min_confidence`. A step that reads as small talk by itself ("Can you help me
        with that?") is no step; none when fewer than two steps remain."""
        delivered = []
        for step in steps:
            found = Candidates(step.items, self._evidence(request, step.items, step.vector), whole.english)
            if not found.needs_tool:
                continue
            chosen = choose(found.items, self.probabilities(found), True, self.config, k)
            floor = self.config.step_min_confidence
            delivered.append((step, [c for n, c in enumerate(chosen) if n == 0 or c.probability >= floor]))
        return delivered if len(delivered) > 1 else []

    def _with_prerequisites(self, request: RequestContext, results: list[SearchResult]) -> list[SearchResult]:
        """The results with the tools they require (search/relations.py), each before the tool that needs it."""
        index = request.index
        positions = [index.position_of(result.name) for result in results]
        requires = self._requires(request)
        if not any(p is not None and requires(p) for p in positions):
            return results
        by_position = {p: r for p, r in zip(positions, results, strict=True) if p is not None}
        budget = max(self.config.max_set_tools, len(results))
        plan = with_prerequisites(index, list(by_position), request.usable, budget, requires)
        likelihood = {p: r.score for p, r in by_position.items()}
        for position, _ in plan.entries[::-1]:  # needers come after what they need: each gets its needers' best
            for edge in plan.edges:
                if edge.needed_by == position and edge.position != position:
                    needed = likelihood.get(position, 0.0) / (2 if edge.requirement.optional else 1)
                    likelihood[edge.position] = max(likelihood.get(edge.position, 0.0), needed)
        return [
            _in_set(index, by_position.get(position), position, why, likelihood.get(position, 0.0))
            for position, why in plan.entries
        ]

    def _with_alternatives(
        self, request: RequestContext, results: list[SearchResult], alternatives: list[SearchResult]
    ) -> list[SearchResult]:
        """The set, then each alternative that fits in what `max_set_tools` leaves with the tools it requires:
        after the set, so it never displaces a step's tool or a prerequisite, and whole, never without what it
        needs."""
        taken = {result.name for result in results}
        for alternative in alternatives:
            if alternative.name in taken:
                continue
            complete = [r for r in self._with_prerequisites(request, [alternative]) if r.name not in taken]
            if len(results) + len(complete) <= self.config.max_set_tools:
                results = [*results, *complete]
                taken.update(result.name for result in complete)
        return results

    def _requires(self, request: RequestContext) -> Requires:
        """What a tool requires, each with the position of the tool it names: what it declares and what an admin
        confirmed (as strong as declared), then (`SearchConfig.infer_requirements`) per parameter it declares
        nothing for, the best inferred producer the principal may use that no admin rejected (search/inferred.py),
        inferred as in a registry of the tools the principal may use."""
        index, usable = request.index, request.usable
        book = self.relations(index)
        if not self.config.infer_requirements and not book.confirms_requirements:
            return lambda position: requirements(index, position)

        def may_use(name: str) -> bool:
            position = index.position_named(name)
            return position is not None and (usable is None or bool(usable[position]))

        relations = None
        if self.config.infer_requirements:
            inferred = self.inferred(index)
            seen = request.principal.visibility_key
            relations = index.derived.get(INFERRED_SEEN, seen, lambda: inferred.seen_by(may_use))

        def resolved(position: int) -> tuple[tuple[int | None, Requirement], ...]:
            tool = _with_confirmed(index.tools[position], book)
            if relations is None:
                found = tool.requires
            else:
                found = relations.requirements(
                    tool, lambda name: may_use(name) and book.verdict(tool.name, name, "requires") != "rejected"
                )
            return tuple((index.position_named(r.tool), r) for r in found)

        return resolved

    def relations(self, index: SearchIndex) -> RelationBook:
        """The store's learned relations and admins' verdicts, read once per snapshot."""
        if self._stored_relations is None:
            return RelationBook()
        return index.derived.get(RELATIONS, None, self._stored_relations)

    def _with_related(
        self, request: RequestContext, results: list[SearchResult], found: Candidates | None
    ) -> list[SearchResult]:
        """The results with, after each, the tools related to it (`SearchConfig.related_tools`: learned from the
        usage of the principal's tenant, or confirmed by an admin) that the request's own ranking supports (among
        its candidates, at `min_confidence` or more) and the principal may use, within `max_set_tools`."""
        if not self.config.related_tools or found is None or not found.needs_tool:
            return results
        room = self.config.max_set_tools - len(results)
        book = self.relations(request.index)
        learner = learner_key(request.principal.tenant, request.principal.caller)
        if room <= 0 or not (book.learned or book.verdicts):
            return results
        index, floor = request.index, self.config.min_confidence
        ranked = {c.item.position: c for c in self._scored(found) if c.probability >= floor}
        taken = {result.name.lower() for result in results}
        with_related: list[SearchResult] = []
        for result in results:
            with_related.append(result)
            for related in book.related(result.name, learner):
                position = index.position_named(related.tool)
                if room <= 0 or position is None or position not in ranked or related.tool.lower() in taken:
                    continue
                if request.usable is not None and not request.usable[position]:
                    continue
                added = self._result(index, ranked[position], found.evidence)
                signals = added.signals.model_copy(update={"related_to": result.name, "related_why": related.why})
                with_related.append(added.model_copy(update={"signals": signals}))
                taken.add(related.tool.lower())
                room -= 1
        return with_related

    def prepare(self, index: SearchIndex) -> None:
        """Start computing what a search of the new snapshot `index` will need and costs the most, in the
        background: the inferred requirements (`infer_requirements`), which requests then find computed, or being
        computed (they wait for that one computation), rather than compute themselves."""
        if self.config.infer_requirements:
            threading.Thread(target=self._infer_quietly, args=(index,), name="toolrag-inference", daemon=True).start()

    def _infer_quietly(self, index: SearchIndex) -> None:
        try:
            self.inferred(index)
        except Exception:  # a background thread has no caller to tell: the next request computes it and fails
            log.exception("inferring requirements failed")

    def inferred(self, index: SearchIndex) -> InferredRelations:
        """The snapshot's inferred requirements, kept in its derived state and updated from the previous
        snapshot's (only what changed is scored again); computed once, whoever asks meanwhile waits for it."""

        def infer_now() -> InferredRelations:
            live = [tool for n, tool in enumerate(index.tools) if index.live is None or index.live[n]]
            started = time.perf_counter()
            relations = infer(live, previous=self._last_inferred, progress=_inference_progress)
            log.info(
                "inferred requirements: %d pairs scored in %.1f s", relations.compared, time.perf_counter() - started
            )
            self._last_inferred = relations
            return relations

        return index.derived.get(INFERRED, None, infer_now)

    def _whole_catalog(self, request: RequestContext) -> list[SearchResult]:
        """Every tool the principal may use, likeliest first (the `all` strategy)."""
        found = self._candidates(request, [request.text])
        ordered = sorted(self._scored(found), key=lambda chosen: -chosen.probability)
        return [self._result(request.index, chosen, found.evidence, strategy="all") for chosen in ordered]

    def _scored(self, found: Candidates) -> list[Chosen]:
        return [Chosen(item, p) for item, p in zip(found.items, self.probabilities(found), strict=True)]

    def _candidates(self, request: RequestContext, parts: list[str]) -> Candidates:
        return self._candidates_and_steps(request, parts)[0]

    def _candidates_and_steps(self, request: RequestContext, parts: list[str]) -> tuple[Candidates, list[Step]]:
        items, vector, steps = self._rank_intents(request, parts)
        return Candidates(items, self._evidence(request, items, vector), request.english), steps

    def _evidence(self, request: RequestContext, items: list[Ranked], vector: FloatArray | None) -> float:
        """The request's margin over small talk beyond the registry's level (search/calibrate.py); in lexical
        mode, 0 when the best tool matches two words of the request and half its word weight, else -1."""
        if not items:
            return -1.0
        reference = self._small_talk(request.index)
        if vector is None or reference is None:
            top = items[0]
            return 0.0 if top.matched_terms >= min(2, top.request_terms) and top.lexical >= 0.5 else -1.0
        nearest = reference.nearest(vector)
        levels = self._level(request, reference)
        by_text = max(item.text_dense for item in items) - nearest - levels.for_request(request.english)
        by_example = max((item.dense for item in items if item.dense > item.text_dense), default=-np.inf)
        return max(by_text, float(by_example) - nearest - levels.for_examples(request.english))

    def _small_talk(self, index: SearchIndex) -> SmallTalkReference | None:
        """The small-talk bank as this snapshot sees it, measured once per snapshot."""
        embedder = index.embedder or self.embedder
        return index.derived.get(
            SMALL_TALK_REFERENCE, None, lambda: small_talk_reference(index, embedder, self._fixed_vectors)
        )

    def _level(self, request: RequestContext, reference: SmallTalkReference) -> Levels:
        """The small-talk levels of what the principal may see, once per snapshot, visibility and quantile."""
        index, quantile = request.index, self.config.small_talk_quantile

        def measure() -> Levels:
            examples = self._example_rows(index, request.principal.tenant, request.usable)
            return reference.levels(index, request.visible, quantile, examples)

        return index.derived.get(SMALL_TALK_LEVELS, (request.principal.visibility_key, quantile), measure)

    def _reformulate(self, request: RequestContext, bound: int) -> list[SearchResult]:
        """What the first second-chance step that finds tools finds (search/reformulate.py)."""
        for step in self.config.reformulate:
            best: dict[int, tuple[Chosen, float]] = {}
            for phrasing in self._phrasings(step, request.index, request.text):
                rephrased = replace(request, text=phrasing, english=looks_english(phrasing), limit=SPREAD_OVER)
                found = self._candidates(rephrased, [phrasing])
                for chosen in choose(found.items, self.probabilities(found), found.needs_tool, self.config, MAX_K):
                    position = chosen.item.position
                    if position not in best or best[position][0].probability < chosen.probability:
                        best[position] = (chosen, found.evidence)
            if best:
                ordered = sorted(best.values(), key=lambda pair: -pair[0].probability)[:bound]
                return [self._result(request.index, chosen, evidence, step) for chosen, evidence in ordered]
        return []

    def _phrasings(self, step: str, index: SearchIndex, query: str) -> list[str]:
        if step == "expand":
            words = self._words(index).expansions(query, index.knows_term)
            return [f"{query} {' '.join(words)}"] if words else []
        return self.rewriter.rewrite(query) if self.rewriter is not None else []

    @staticmethod
    def _words(index: SearchIndex) -> Vocabulary:
        from toolrag.search.reformulate import Vocabulary

        return index.derived.get(VOCABULARY, None, lambda: Vocabulary(index))

    def _intents(self, query: str) -> list[str]:
        return split_intents(query) if self.config.multi_intent else [query]

    def _rank_intents(
        self, request: RequestContext, parts: list[str]
    ) -> tuple[list[Ranked], FloatArray | None, list[Step]]:
        """The whole request's ranking, with each step's best tools merged in fairly (one query embedding more
        per step): the whole request's best tool, then each step's best, then the rest alternately; the whole
        request's vector; and the parts whose best tool is their own (none when the request is one step)."""
        whole, vector = self._rank(request)
        if len(parts) < 2:
            return whole, vector, []
        ranked = [Step(part, *self._rank(request.about(part))) for part in parts]
        # The ranking merges in the parts that point at their tool with evidence; search() delivers every part
        # with a tool of its own that passes the small-talk decision by itself (`_chosen_per_step`).
        merged = trusted_steps(ranked, self.config.intent_min_similarity)
        steps = trusted_steps(ranked, -1.0)
        if not merged:
            return whole, vector, steps
        return merge_rankings([whole, *(step.items for step in merged)], request.limit), vector, steps

    def _rank(self, request: RequestContext) -> tuple[list[Ranked], FloatArray | None]:
        """The top candidates by fused score, and the request's vector (None when nothing was embedded)."""
        index, query, visible, mode = request.index, request.text, request.visible, request.mode
        candidates = np.flatnonzero(visible) if visible is not None else np.arange(index.size)
        if len(candidates) == 0 or not query.strip():
            return [], None
        candidates, routed = self._route(index, query, candidates)
        tokens = tokenize(query, stem=not self.config.stem_english_only or looks_english(query))
        with tracing.span("toolrag.search.lexical", terms=len(tokens)):
            lexical, matched_terms = self._lexical(index, tokens, visible, mode)
        with tracing.span("toolrag.search.dense", tools=len(candidates)):
            text_dense, vector = self._dense(index, query, visible, mode)
            dense = self._with_examples(index, text_dense, vector, request.principal.tenant, request.usable)
        ordering = self._ordering(request, text_dense, dense, vector)
        if mode == "hybrid":
            scores = fuse(ordering, lexical, candidates, self.config.dense_weight)
        else:
            scores = min_max((ordering if mode == "dense" else lexical)[candidates])
        scores = self._boost_routed(index, candidates, scores, routed)
        scores = self._blend_groups(index, candidates, scores, dense, vector)
        scores = self._learned(index, candidates, scores, vector, request.principal)
        fused = np.zeros(index.size, dtype=np.float32)
        fused[candidates] = scores
        scored = _Scored(fused, dense, text_dense, self._coverage(index, tokens, lexical, visible), matched_terms)
        leader, lead = _lead(dense, candidates) if mode != "lexical" else (-1, 0.0)
        named = self._named(index, query, visible)
        items = [
            scored.ranked(index, position, position in named, routed, lead if position == leader else 0.0, tokens)
            for position in dict.fromkeys([*named, *_top(candidates, scores, request.limit)])
        ]
        items.sort(key=lambda item: (not item.name_match, -item.score, index.names[item.position]))
        return items[: request.limit], vector

    def _boost_routed(
        self, index: SearchIndex, candidates: IntArray, scores: FloatArray, routed: set[str]
    ) -> FloatArray:
        if not routed or self.config.route_mode != "boost":
            return scores
        hits = np.array([index.categories[p] in routed for p in candidates.tolist()], dtype=np.bool_)
        return np.where(hits, np.minimum(1.0, scores + self.config.route_boost), scores).astype(np.float32)

    def _route(self, index: SearchIndex, query: str, candidates: IntArray) -> tuple[IntArray, set[str]]:
        if not self.router.rules:
            return candidates, set()
        routed = self.router.categories_for(query)
        if routed and self.config.route_mode == "filter":
            kept = np.array([p for p in candidates.tolist() if index.categories[p] in routed], dtype=np.int64)
            if len(kept):
                return kept, routed
        return candidates, routed

    @staticmethod
    def _lexical(
        index: SearchIndex, tokens: list[str], visible: BoolArray | None, mode: str
    ) -> tuple[FloatArray, IntArray]:
        if mode == "dense":
            return np.zeros(index.size, dtype=np.float32), np.zeros(index.size, dtype=np.int64)
        return index.lexical.scores(tokens, visible)

    def _dense(
        self, index: SearchIndex, query: str, visible: BoolArray | None, mode: str
    ) -> tuple[FloatArray, FloatArray | None]:
        """Each tool's cosine with the request, and the request's vector (None in lexical mode)."""
        if mode == "lexical":
            return np.zeros(index.size, dtype=np.float32), None
        # The snapshot's own model: a search that began before a model switch finishes with the old model.
        vector = (index.embedder or self.embedder).embed_query(query)
        return dense_scores(index, vector, visible, self.config.ann_candidates), vector

    def _with_examples(
        self,
        index: SearchIndex,
        dense: FloatArray,
        vector: FloatArray | None,
        tenant: str | None,
        usable: BoolArray | None,
        own_only: bool = False,
    ) -> FloatArray:
        """Cosines raised by the views of the principal's tenant (search/examples.py): its example requests and its
        descriptions, or (`own_only`) without past tasks' requests."""
        views = index.examples
        if views is None or not views.count or vector is None or not self.config.example_views:
            return dense
        return views.pooled(dense, vector, tenant, usable, own_only)

    def _ordering(
        self, request: RequestContext, text_dense: FloatArray, dense: FloatArray, vector: FloatArray | None
    ) -> FloatArray:
        """The cosines that order the tools (search/examples.py `ranking_cosines`): with examples pooled, each tool's
        own views count beside its best view; a tool an example raised gets its own text's cosine computed exactly
        (an approximate index gives the tools it did not propose only a bound). Without past tasks, own views are
        every view: the best view alone orders the tools, with nothing more computed."""
        views = request.index.examples
        if dense is text_dense or vector is None or views is None or not views.has_tasks:
            return dense
        exact = text_dense.copy()
        raised = np.flatnonzero(dense > text_dense)
        exact[raised] = exact_dense_scores(request.index, vector, raised)
        tenant, usable = request.principal.tenant, request.usable
        return ranking_cosines(dense, self._with_examples(request.index, exact, vector, tenant, usable, True))

    def _example_rows(self, index: SearchIndex, tenant: str | None, usable: BoolArray | None) -> IntArray | None:
        """The example requests a principal of `tenant` who may use `usable` searches with (None: none)."""
        views = index.examples
        if views is None or not views.count or not self.config.example_views:
            return None
        return views.rows(tenant, usable)

    def _learned(
        self,
        index: SearchIndex,
        candidates: IntArray,
        scores: FloatArray,
        vector: FloatArray | None,
        principal: Principal,
    ) -> FloatArray:
        """Scores with what the usage log taught in the principal's tenant, or without a tenant what its own usage
        taught (search/feedback.py), kept in [0, 1]."""
        memory, weight = self.memory, self.config.usage_weight
        if memory is None or vector is None or weight <= 0:
            return scores
        if memory.model_id != (index.embedder or self.embedder).model_id:
            return scores  # learned with another model: its vectors do not compare
        owner = learner_of(principal.tenant, principal.caller)
        gains = memory.adjustment(index, vector, candidates, self.config.usage_min_similarity, weight, owner)
        return ((scores + gains) / (1.0 + weight)).astype(np.float32)

    def _blend_groups(
        self, index: SearchIndex, candidates: IntArray, scores: FloatArray, dense: FloatArray, vector: FloatArray | None
    ) -> FloatArray:
        """Scores moved towards their groups' (search/groups.py). Only the best GROUPED_HEAD candidates take part:
        a group's two best tools are among them whenever the group matters, and a large registry is not sorted."""
        groups = index.groups
        if groups is None or self.config.group_weight <= 0 or len(candidates) == 0:
            return scores
        cosines = groups.description_cosines(vector) if vector is not None else np.full(len(groups.names), np.nan)
        weight = self.config.dense_weight if self.config.mode == "hybrid" else 1.0
        descriptions = description_scores(cosines.astype(np.float32), dense[candidates], weight)
        head = np.argpartition(-scores, GROUPED_HEAD)[:GROUPED_HEAD] if len(scores) > GROUPED_HEAD else slice(None)
        blended = scores.copy()
        ids = groups.of_tool[candidates[head]]
        blended[head] = blend_groups(ids, scores[head], descriptions, self.config.group_weight)
        return blended

    @staticmethod
    def _coverage(index: SearchIndex, tokens: list[str], lexical: FloatArray, visible: BoolArray | None) -> FloatArray:
        """BM25 as the share of the best possible score for this request, in [0, 1]."""
        best = index.lexical.max_score(tokens, visible)
        if best <= 0:
            return np.zeros_like(lexical)
        return np.asarray(np.clip(lexical / best, 0.0, 1.0), dtype=np.float32)

    @staticmethod
    def _named(index: SearchIndex, query: str, visible: BoolArray | None) -> set[int]:
        """Tools the request names: the whole request is a tool name, or a word of it is an identifier-like name."""
        names = set()
        whole = _whole_name(query)
        if whole in index.by_name:
            names.add(index.by_name[whole])
        for word in query.split():
            word = word.strip(_QUOTES).rstrip(".")
            if any(sep in word for sep in "_.-") or (word[1:] != word[1:].lower()):
                position = index.by_name.get(word.lower())
                if position is not None:
                    names.add(position)
        return {p for p in names if visible is None or visible[p]}

    def _always_included(self, request: RequestContext, chosen: set[str]) -> list[SearchResult]:
        extra = []
        index, visible = request.index, request.visible
        self._warn_unknown_always_included(index)
        chosen = set(chosen)
        for name in self.config.always_include:
            position = index.by_name.get(name.lower())
            if position is None or (visible is not None and not visible[position]):
                continue
            tool = index.tools[position]
            if tool.name in chosen:  # names are matched in any case: `Weather.Forecast` is weather.forecast
                continue
            chosen.add(tool.name)
            extra.append(
                SearchResult(name=tool.name, score=0.0, signals=SignalScores(always_included=True), card=tool.card())
            )
        return extra

    def _warn_unknown_always_included(self, index: SearchIndex) -> None:
        """A configured name no active tool has is a typo or a retired tool: said once per registry version."""
        if self._warned_generation == index.generation:
            return
        self._warned_generation = index.generation
        unknown = [name for name in self.config.always_include if name.lower() not in index.by_name]
        if unknown:
            log.warning("always_include names no active tool: %s", ", ".join(unknown))

    @staticmethod
    def _result(
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
