"""Stage 2, decide: does the request need a tool, how likely is each candidate, and which are chosen.

The request's evidence is its margin over small talk beyond the registry's level (search/calibrate.py), measured
once per snapshot and visibility; the probabilities come from the relevance model (search/confidence.py), the cut
from search/cut.py. A request of several steps gets each step's likeliest tool (search/steps.py); a request nothing
is found for gets its second chances (search/reformulate.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from toolrag.embed.language import looks_english
from toolrag.limits import MAX_K
from toolrag.model import SearchResult
from toolrag.search import render
from toolrag.search.calibrate import FixedTextVectors, Levels, SmallTalkReference, small_talk_reference
from toolrag.search.confidence import SPREAD_OVER, Candidates
from toolrag.search.context import RequestContext, SearchSettings
from toolrag.search.cut import Chosen, Ranked, choose
from toolrag.search.derived import Slot
from toolrag.search.gather import Gatherer
from toolrag.search.index import SearchIndex, surface_words
from toolrag.search.lexical import FloatArray
from toolrag.search.steps import Step, tools_of_steps

if TYPE_CHECKING:
    from toolrag.search.reformulate import Vocabulary

# Derived from a snapshot and kept in it (search/derived.py): once per snapshot, levels per visibility and quantile.
SMALL_TALK_REFERENCE: Slot[SmallTalkReference | None] = Slot("small-talk reference")
SMALL_TALK_LEVELS: Slot[Levels] = Slot("small-talk levels")
VOCABULARY: Slot[Vocabulary] = Slot("typo vocabulary")


@dataclass(frozen=True)
class Retrieved:
    """What the decision chose: the tools; the ranking they were chosen from (None: a second chance found them);
    and, for a request read as steps, the other tools the whole request would get read as one: a sentence of
    context can pass for a step, and must not cost the tool the request is about (complete.py
    `with_alternatives`)."""

    tools: list[SearchResult]
    found: Candidates | None
    alternatives: list[SearchResult] = field(default_factory=list)


class Decider:
    """Candidates, evidence, probabilities and the tools chosen (this module's docstring)."""

    def __init__(self, settings: SearchSettings, gather: Gatherer, fixed_vectors: FixedTextVectors) -> None:
        self.settings = settings
        self.gather = gather
        self._fixed_vectors = fixed_vectors

    def candidates(self, request: RequestContext, parts: list[str]) -> Candidates:
        return self.candidates_and_steps(request, parts)[0]

    def candidates_and_steps(self, request: RequestContext, parts: list[str]) -> tuple[Candidates, list[Step]]:
        items, vector, steps = self.gather.rank(request, parts)
        return Candidates(items, self.evidence(request, items, vector), request.english), steps

    def probabilities(self, candidates: Candidates) -> list[float]:
        """The candidates' probabilities of being relevant; in lexical mode, with no cosines to read, their fused
        scores instead."""
        config = self.settings.config
        if config.mode == "lexical":
            return [item.score for item in candidates.items]
        return self.settings.relevance.probabilities(candidates, config.absent_share)

    def scored(self, found: Candidates) -> list[Chosen]:
        return [Chosen(item, p) for item, p in zip(found.items, self.probabilities(found), strict=True)]

    def retrieve(self, request: RequestContext, k: int) -> Retrieved:
        """The retrieved tools (complete.py completes their set), chosen from the request's ranking or each of its
        steps' (search/steps.py), or found by a second chance."""
        config, index, parts = self.settings.config, request.index, self.gather.parts(request.text)
        found, steps = self.candidates_and_steps(request, parts)
        delivered = self.chosen_per_step(request, steps, found, k) if found.needs_tool else []
        if delivered:
            probabilities = self.probabilities(found)
            # Read as steps, each passed the small-talk decision by itself: no floor (search/cut.py).
            likeliest = choose(found.items, probabilities, True, config, 1, floored=False)
            chosen = tools_of_steps(likeliest, [chosen for _, chosen in delivered], config.max_set_tools)
            # The whole request's own choice, for `with_alternatives` (which skips the set's).
            whole = choose(found.items, probabilities, True, config, k, floored=False)
            return Retrieved(
                [render.result(index, c, found.evidence) for c in chosen],
                found,
                [render.result(index, c, found.evidence) for c in whole],
            )
        # Parts that did not make steps of their own may still each bring a tool: one more per part, up to MAX_K.
        bound = min(MAX_K, k + len(parts) - 1)
        chosen = choose(found.items, self.probabilities(found), found.needs_tool, config, bound)
        if chosen:
            return Retrieved([render.result(index, c, found.evidence) for c in chosen], found)
        return Retrieved(self._reformulate(request, bound), None)

    def chosen_per_step(
        self, request: RequestContext, steps: list[Step], whole: Candidates, k: int
    ) -> list[tuple[Step, list[Chosen]]]:
        """What each step of a request of several would get as a request of its own: its likeliest tool, and up to
        `k` with those that reach `step_min_confidence`. A step that reads as small talk by itself ("Can you help me
        with that?") is no step; none when fewer than two steps remain."""
        config, delivered = self.settings.config, []
        for step in steps:
            found = Candidates(step.items, self.evidence(request, step.items, step.vector), whole.english)
            if not found.needs_tool:
                continue
            chosen = choose(found.items, self.probabilities(found), True, config, k, floored=False)
            floor = config.step_min_confidence
            delivered.append((step, [c for n, c in enumerate(chosen) if n == 0 or c.probability >= floor]))
        return delivered if len(delivered) > 1 else []

    def whole_catalog(self, request: RequestContext) -> list[SearchResult]:
        """Every tool the principal may use, likeliest first (the `all` strategy)."""
        found = self.candidates(request, [request.text])
        ordered = sorted(self.scored(found), key=lambda chosen: -chosen.probability)
        return [render.result(request.index, chosen, found.evidence, strategy="all") for chosen in ordered]

    def evidence(self, request: RequestContext, items: list[Ranked], vector: FloatArray | None) -> float:
        """The request's margin over small talk beyond the registry's level (search/calibrate.py); in lexical
        mode, 0 when the best tool matches two words of the request and half its word weight, else -1."""
        if not items:
            return -1.0
        reference = self.small_talk(request.index)
        if vector is None or reference is None:
            top = items[0]
            return 0.0 if top.matched_terms >= min(2, top.request_terms) and top.lexical >= 0.5 else -1.0
        nearest = reference.nearest(vector)
        levels = self._level(request, reference)
        by_text = max(item.text_dense for item in items) - nearest - levels.for_request(request.english)
        by_example = max((item.dense for item in items if item.dense > item.text_dense), default=-np.inf)
        return max(by_text, float(by_example) - nearest - levels.for_examples(request.english))

    def small_talk(self, index: SearchIndex) -> SmallTalkReference | None:
        """The small-talk bank as this snapshot sees it, measured once per snapshot."""
        embedder = self.settings.embedder_of(index)
        return index.derived.get(
            SMALL_TALK_REFERENCE, None, lambda: small_talk_reference(index, embedder, self._fixed_vectors)
        )

    def _level(self, request: RequestContext, reference: SmallTalkReference) -> Levels:
        """The small-talk levels of what the principal may see, once per snapshot, visibility and quantile."""
        index, quantile = request.index, self.settings.config.small_talk_quantile

        def measure() -> Levels:
            examples = self.gather.example_rows(index, request.principal.tenant, request.usable)
            return reference.levels(index, request.visible, quantile, examples)

        return index.derived.get(SMALL_TALK_LEVELS, (request.principal.visibility_key, quantile), measure)

    def _reformulate(self, request: RequestContext, bound: int) -> list[SearchResult]:
        """What the first second-chance step that finds tools finds (search/reformulate.py)."""
        for step in self.settings.config.reformulate:
            best: dict[int, tuple[Chosen, float]] = {}
            for phrasing in self._phrasings(step, request):
                rephrased = replace(request, text=phrasing, english=looks_english(phrasing), limit=SPREAD_OVER)
                found = self.candidates(rephrased, [phrasing])
                chosen_now = choose(
                    found.items, self.probabilities(found), found.needs_tool, self.settings.config, MAX_K
                )
                for chosen in chosen_now:
                    position = chosen.item.position
                    if position not in best or best[position][0].probability < chosen.probability:
                        best[position] = (chosen, found.evidence)
            if best:
                ordered = sorted(best.values(), key=lambda pair: -pair[0].probability)[:bound]
                return [render.result(request.index, chosen, evidence, step) for chosen, evidence in ordered]
        return []

    def _phrasings(self, step: str, request: RequestContext) -> list[str]:
        query = request.text
        if step == "expand":
            index, usable = request.index, request.usable
            words = _words(request).expansions(query, lambda term: index.lexical.knows(term, usable))
            return [f"{query} {' '.join(words)}"] if words else []
        rewriter = self.settings.rewriter
        return rewriter.rewrite(query) if rewriter is not None else []


def _words(request: RequestContext) -> Vocabulary:
    """The words of the tools the principal may use, once per snapshot and visibility."""
    from toolrag.search.reformulate import Vocabulary  # loaded when a request first needs a second chance

    index, usable = request.index, request.usable

    def gathered() -> Vocabulary:
        if usable is None:
            return Vocabulary(index.words)
        return Vocabulary(word for p in np.flatnonzero(usable).tolist() for word in surface_words(index.tools[p]))

    return index.derived.get(VOCABULARY, request.principal.visibility_key, gathered)
