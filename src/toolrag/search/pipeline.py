"""A search, stage by stage. `STAGES` is the list a request goes through, in order (`python -m toolrag.search
--stages` prints it); `Retriever` runs it over the latest snapshot. Each stage is a module with one job that reads
a frozen `RequestContext` (search/context.py) and the snapshot's derived state, and a new feature is a new stage or
a change inside one.

`Retriever.rank` gives the full ranking of a request (what the eval harness measures); `Retriever.search` adds
the decision whether the request needs a tool, each tool's probability of being relevant, the cut, the set's
completion, the always-include list and the query cache (what agents use); or, when the principal's whole catalog
fits the token budget, returns all of it by relevance.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from toolrag.embed.base import Embedder
from toolrag.errors import InvalidRequestError
from toolrag.limits import MAX_K
from toolrag.model import Principal, SearchResult, SignalScores
from toolrag.search import render
from toolrag.search.cache import QueryCache
from toolrag.search.calibrate import FixedTextVectors, embed_fixed
from toolrag.search.complete import SetCompleter
from toolrag.search.confidence import SPREAD_OVER, Candidates, RelevanceModel
from toolrag.search.config import SearchConfig
from toolrag.search.context import RequestContext, SearchSettings, usable
from toolrag.search.decide import Decider
from toolrag.search.filter import visibility_mask
from toolrag.search.gather import Gatherer, whole_name
from toolrag.search.index import SearchIndex
from toolrag.search.inferred import InferredRelations
from toolrag.search.learned import RelationBook, learner_key
from toolrag.search.request import searched_text

if TYPE_CHECKING:
    from toolrag.search.feedback import UsageMemory
    from toolrag.search.reformulate import Rewriter

_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class Stage:
    name: str
    module: str
    does: str


STAGES = (
    Stage("read", "search/request.py", "the bounded, cleaned view of a long request (data blobs left out)"),
    Stage("filter", "search/context.py, search/filter.py", "what the principal may see and use, before scoring"),
    Stage(
        "gather and fuse",
        "search/gather.py",
        "lexical, dense, example views and past tasks, named tools; fused, routed, grouped, moved by usage; each step",
    ),
    Stage("decide", "search/decide.py", "small talk or a tool, each candidate's probability, the cut, second chances"),
    Stage(
        "complete the set",
        "search/complete.py",
        "prerequisites before the tools that need them, related tools, the request's other tools, always-included",
    ),
    Stage("render", "search/render.py", "results with their signals and cards, in the tenant's own words"),
)


class Retriever:
    """Searches the latest snapshot that `snapshot()` provides, through `STAGES`; thread-safe. What is derived from
    a snapshot is kept in it (search/derived.py); the query cache, by snapshot serial, is the retriever's own."""

    def __init__(
        self,
        snapshot: Callable[[], SearchIndex],
        embedder: Embedder,
        config: SearchConfig,
        rewriter: Rewriter | None = None,
        fixed_vectors: FixedTextVectors = embed_fixed,
        catalog_fits: Callable[[Principal, int], bool] | None = None,
        stored_relations: Callable[[], RelationBook] | None = None,
        tool_tokens: Callable[[SearchIndex, int], int] | None = None,
    ) -> None:
        """`catalog_fits(principal, budget)`: whether every tool the principal may use costs fewer prompt tokens
        than the budget, in full (for the `all` strategy). `stored_relations()`: the store's learned relations and
        verdicts, read once per snapshot (a write to them moves the generation). `tool_tokens(index, position)`:
        the prompt tokens of a tool's full definition (a set's budget, `set_budget_tokens`)."""
        self._snapshot = snapshot
        self._catalog_fits = catalog_fits
        self.settings = SearchSettings(config, embedder, rewriter)
        self.gather = Gatherer(self.settings)
        self.decide = Decider(self.settings, self.gather, fixed_vectors)
        self.complete = SetCompleter(self.settings, stored_relations, self.decide.scored, tool_tokens)
        self.cache: QueryCache[list[SearchResult]] = QueryCache(config.cache_entries, config.cache_ttl_seconds)

    @property
    def config(self) -> SearchConfig:
        return self.settings.config

    @property
    def embedder(self) -> Embedder:
        return self.settings.embedder

    @property
    def memory(self) -> UsageMemory | None:
        return self.settings.memory

    def use_config(self, config: SearchConfig) -> None:
        """Search with `config` from now on (an evaluation of each mode, an ablation); cached results are dropped."""
        self.settings.use_config(config)
        self.cache.clear()

    def use_relevance(self, model: RelevanceModel) -> None:
        """Decide and show with another relevance model (one fitted leaving a catalog out: benchmarks/cut.py);
        cached results are dropped."""
        self.settings.relevance = model
        self.cache.clear()

    def use_memory(self, memory: UsageMemory | None) -> None:
        """Adjust scores with what the usage log taught (search/feedback.py); cached results are dropped."""
        self.settings.memory = memory
        self.cache.clear()

    def use_embedder(self, embedder: Embedder) -> None:
        """Embed requests with `embedder` where a snapshot names no model of its own (the index switched models)."""
        self.settings.embedder = embedder

    def search(self, query: str, principal: Principal, k: int | None = None) -> list[SearchResult]:
        """At most `k` tools (None: `SearchConfig.k`, or the whole catalog when it fits the budget: an explicit k
        wins over the `all` strategy)."""
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K):
            # One rule for every way in: the CLI, the API and find_tools refuse the same (issue 50).
            raise InvalidRequestError(f"k must be an integer from 1 to {MAX_K} (got {k!r}), or None for the default")
        query, index, config = self.searched(query), self._snapshot(), self.config
        # Case kept: steps are told apart by capitals after full stops ("... stock. Order ...").
        # The learner too: callers without a tenant learn from their own usage only (search/learned.py).
        learner = learner_key(principal.tenant, principal.caller)
        key = (_SPACES.sub(" ", query).strip(), principal.visibility_key, learner, index.serial, k)
        cached = self.cache.get(key)
        if cached is not None:
            return list(cached)
        if k is None and self.serves_all(principal):
            request = RequestContext.of(index, query, principal, index.size, config.mode)
            results = self.decide.whole_catalog(request)
        else:
            limit = config.k if k is None else k
            request = RequestContext.of(index, query, principal, max(limit, SPREAD_OVER), config.mode)
            retrieved = self.decide.retrieve(request, limit)
            results = self.complete.with_prerequisites(request, retrieved.tools)
            results = self.complete.with_related(request, results, retrieved.found)
            results = self.complete.with_alternatives(request, results, retrieved.alternatives)
        results.extend(self.complete.always_included(request, {r.name for r in results}))
        results = render.described(index, render.flagged(query, results), principal.tenant)
        self.cache.put(key, results)
        return list(results)

    def rank(self, query: str, principal: Principal, limit: int = 10, mode: str | None = None) -> list[SearchResult]:
        """The top `limit` visible tools by fused score, with no decision or cut; each tool's required closure right
        after it (complete.py `in_set_order`), so the top `limit` shows whole sets."""
        query = self.searched(query)
        request = RequestContext.of(self._snapshot(), query, principal, limit, mode or self.config.mode)
        found = self.decide.candidates(request, self.gather.parts(query))
        ranked = [render.result(request.index, chosen, found.evidence) for chosen in self.decide.scored(found)]
        ranked = self.complete.in_set_order(request, ranked, limit)
        return render.described(request.index, render.flagged(query, ranked), principal.tenant)

    def candidates(self, query: str, principal: Principal, limit: int = SPREAD_OVER) -> Candidates:
        """The best candidates of the configured mode and what the relevance model reads (search/confidence.py)."""
        query = self.searched(query)
        request = RequestContext.of(self._snapshot(), query, principal, limit, self.config.mode)
        return self.decide.candidates(request, self.gather.parts(query))

    def candidates_and_steps(self, query: str, principal: Principal, limit: int) -> tuple[Candidates, list[str]]:
        """`candidates()`, and the steps search() delivers a request of several in, each searched as a request of
        its own (none: one step): one ranking for both (explain)."""
        query = self.searched(query)
        request = RequestContext.of(self._snapshot(), query, principal, limit, self.config.mode)
        found, steps = self.decide.candidates_and_steps(request, self.gather.parts(query))
        delivered = self.decide.chosen_per_step(request, steps, found, self.config.k) if found.needs_tool else []
        return found, [step.text for step, _ in delivered]

    def probabilities(self, candidates: Candidates) -> list[float]:
        return self.decide.probabilities(candidates)

    def named(self, query: str, principal: Principal, limit: int) -> tuple[list[SearchResult], int]:
        """The tools a request names outright, in name order: the whole request is a tool's name (any case), or a
        name prefix ending in `*` (`shop.*`); at most `limit` of them, and how many matched. Only the tools the
        principal may use are looked at, so neither a name nor a prefix tells anything of hidden tools."""
        index = self._snapshot()
        allowed = usable(index, visibility_mask(index, principal))
        whole = whole_name(query)
        if whole.endswith("*"):
            prefix = whole[:-1]
            if not prefix or any(c in prefix for c in "* "):
                return [], 0
            searched = range(index.size) if allowed is None else np.flatnonzero(allowed).tolist()
            positions = [p for p in searched if index.names[p].lower().startswith(prefix)]
        else:
            position = index.position_named(whole)
            positions = [position] if position is not None and (allowed is None or allowed[position]) else []
        positions.sort(key=lambda p: index.names[p])
        found = [
            SearchResult(name=tool.name, score=1.0, signals=SignalScores(name_match=True), card=tool.card())
            for tool in (index.tools[p] for p in positions[:limit])
        ]
        return render.described(index, found, principal.tenant), len(positions)

    def serves_all(self, principal: Principal) -> bool:
        """Whether the principal's whole catalog fits `SearchConfig.inject_all_below_tokens`."""
        budget = self.config.inject_all_below_tokens
        return budget > 0 and self._catalog_fits is not None and self._catalog_fits(principal, budget)

    def searched(self, query: str) -> str:
        """What search reads of a request (search/request.py): without data blobs, cut to `max_request_chars`."""
        return searched_text(query, self.config.max_request_chars).text

    def snapshot(self) -> SearchIndex:
        return self._snapshot()

    def relations(self, index: SearchIndex) -> RelationBook:
        return self.complete.relations(index)

    def inferred(self, index: SearchIndex) -> InferredRelations:
        return self.complete.inferred(index)

    def prepare(self, index: SearchIndex) -> None:
        self.complete.prepare(index)
