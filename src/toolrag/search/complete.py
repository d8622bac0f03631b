"""Stage 3, complete the set: what the chosen tools need and what goes with them, within the set's room.

Each chosen tool brings the tools it requires (declared, confirmed by an admin, and with `infer_requirements` those
inferred from what other tools return: search/inferred.py), placed before it (search/relations.py): each its whole
required closure before the next one's, likeliest first, within `set_budget_tokens` (what does not fit is named);
optional requirements come within `max_set_tools`; related tools
(`related_tools`: learned from usage or confirmed) follow the tool they relate to; a request read as steps then gets
the other tools the whole request reads as, each whole with what it needs, in the room left; the configured
always-included tools come last.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from toolrag.limits import MAX_SET_TOOLS
from toolrag.model import Requirement, SearchResult, SignalScores, Tool
from toolrag.search import render
from toolrag.search.confidence import Candidates
from toolrag.search.context import RequestContext, SearchSettings
from toolrag.search.cut import Chosen
from toolrag.search.derived import Slot
from toolrag.search.index import SearchIndex
from toolrag.search.inferred import InferredRelations, SeenRelations, infer
from toolrag.search.learned import RelationBook, learner_key
from toolrag.search.relations import Requires, Room, closure_edges, requirements, with_prerequisites

log = logging.getLogger("toolrag.search")
# Inferred once per snapshot, whoever asks first (a background thread after a change), the others waiting for it.
INFERRED: Slot[InferredRelations] = Slot("inferred requirements", single_flight=True)
INFERRED_SEEN: Slot[SeenRelations] = Slot("inferred requirements as a visibility sees them")
RELATIONS: Slot[RelationBook] = Slot("stored relations: learned from usage, and admins' verdicts")


class SetCompleter:
    """The tools a set needs and what goes with them (this module's docstring). `stored_relations()`: the store's
    learned relations and verdicts, read once per snapshot (a write to them moves the generation); `scored`: the
    candidates' probabilities (decide.py), which related tools must reach."""

    def __init__(
        self,
        settings: SearchSettings,
        stored_relations: Callable[[], RelationBook] | None,
        scored: Callable[[Candidates], list[Chosen]],
        cost: Callable[[SearchIndex, int], int] | None = None,
    ) -> None:
        """`cost(index, position)`: the prompt tokens of a tool's full definition (None: tools are counted only)."""
        self.settings = settings
        self._cost = cost or (lambda index, position: 0)
        self._stored_relations = stored_relations
        self._scored = scored
        self._last_inferred: InferredRelations | None = None  # what the next snapshot's inference starts from
        self._warned_generation = -1

    def with_prerequisites(self, request: RequestContext, results: list[SearchResult]) -> list[SearchResult]:
        """The results with the tools they require (search/relations.py), each before the tool that needs it: each
        result's whole required closure before the next result's, within the set's room (`set_budget_tokens`, and
        limits.MAX_SET_TOOLS tools, beyond which only the less likely results themselves come); what does not fit
        is named in the result's `also_needs`."""
        index, config = request.index, self.settings.config
        positions = [index.position_of(found.name) for found in results]
        requires = self._requires(request)
        if not any(p is not None and requires(p) for p in positions):
            return results
        by_position = {p: r for p, r in zip(positions, results, strict=True) if p is not None}
        room = Room(
            closure_tools=max(MAX_SET_TOOLS, len(results)),
            extra_tools=max(config.max_set_tools, len(results)),
            tokens=config.set_budget_tokens or None,
            cost=lambda position: self._cost(index, position),
        )
        plan = with_prerequisites(index, list(by_position), request.usable, room, requires)
        likelihood = {p: r.score for p, r in by_position.items()}
        for position, _ in plan.entries[::-1]:  # needers come after what they need: each gets its needers' best
            for edge in plan.edges:
                if edge.needed_by == position and edge.position != position:
                    needed = likelihood.get(position, 0.0) / (2 if edge.requirement.optional else 1)
                    likelihood[edge.position] = max(likelihood.get(edge.position, 0.0), needed)
        completed = []
        for position, why in plan.entries:
            found = render.in_set(index, by_position.get(position), position, why, likelihood.get(position, 0.0))
            if position in plan.left:
                left = [index.names[p] for p in plan.left[position]]
                found = found.model_copy(update={"signals": found.signals.model_copy(update={"also_needs": left})})
            completed.append(found)
        return completed

    def in_set_order(self, request: RequestContext, ranked: list[SearchResult], limit: int) -> list[SearchResult]:
        """A ranking with each tool's required closure right after it (nearest first, each tool once, at its
        first place), at most `limit`: a client reading the top `limit` sees whole sets (`rank()`, the eval's
        top-k). A prerequisite brought up is as likely as the tool that first needs it, and says so."""
        index = request.index
        requires = self._requires(request)
        taken: set[int] = set()
        ordered: list[SearchResult] = []
        for found in ranked:
            position = index.position_of(found.name)
            if position is None or position in taken:
                continue
            taken.add(position)
            ordered.append(found)
            for edge in closure_edges(requires, position, request.usable):
                if edge.position not in taken:
                    taken.add(edge.position)
                    ordered.append(render.in_set(index, None, edge.position, edge, found.score))
        return ordered[:limit]

    def with_alternatives(
        self, request: RequestContext, results: list[SearchResult], alternatives: list[SearchResult]
    ) -> list[SearchResult]:
        """The set, then each alternative that fits in what `max_set_tools` leaves with the tools it requires:
        after the set, so it never displaces a step's tool or a prerequisite, and whole, never without what it
        needs."""
        taken = {found.name for found in results}
        for alternative in alternatives:
            if alternative.name in taken:
                continue
            complete = [r for r in self.with_prerequisites(request, [alternative]) if r.name not in taken]
            whole = not any(r.signals.also_needs for r in complete)
            if whole and len(results) + len(complete) <= self.settings.config.max_set_tools:
                results = [*results, *complete]
                taken.update(found.name for found in complete)
        return results

    def with_related(
        self, request: RequestContext, results: list[SearchResult], found: Candidates | None
    ) -> list[SearchResult]:
        """The results with, after each, the tools related to it (`SearchConfig.related_tools`: learned from the
        usage of the principal's tenant, or confirmed by an admin) that the request's own ranking supports (among
        its candidates, at `min_confidence` or more) and the principal may use, within `max_set_tools`."""
        config = self.settings.config
        if not config.related_tools or found is None or not found.needs_tool:
            return results
        room = config.max_set_tools - len(results)
        book = self.relations(request.index)
        learner = learner_key(request.principal.tenant, request.principal.caller)
        if room <= 0 or not (book.learned or book.verdicts):
            return results
        index, floor = request.index, config.min_confidence
        ranked = {c.item.position: c for c in self._scored(found) if c.probability >= floor}
        taken = {found.name.lower() for found in results}
        with_related: list[SearchResult] = []
        for retrieved in results:
            with_related.append(retrieved)
            for related in book.related(retrieved.name, learner):
                position = index.position_named(related.tool)
                if room <= 0 or position is None or position not in ranked or related.tool.lower() in taken:
                    continue
                if request.usable is not None and not request.usable[position]:
                    continue
                added = render.result(index, ranked[position], found.evidence)
                signals = added.signals.model_copy(update={"related_to": retrieved.name, "related_why": related.why})
                with_related.append(added.model_copy(update={"signals": signals}))
                taken.add(related.tool.lower())
                room -= 1
        return with_related

    def always_included(self, request: RequestContext, chosen: set[str]) -> list[SearchResult]:
        extra = []
        index, visible = request.index, request.visible
        self._warn_unknown_always_included(index)
        chosen = set(chosen)
        for name in self.settings.config.always_include:
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

    def relations(self, index: SearchIndex) -> RelationBook:
        """The store's learned relations and admins' verdicts, read once per snapshot."""
        if self._stored_relations is None:
            return RelationBook()
        return index.derived.get(RELATIONS, None, self._stored_relations)

    def prepare(self, index: SearchIndex) -> None:
        """Start computing what a search of the new snapshot `index` will need and costs the most, in the
        background: the inferred requirements (`infer_requirements`), which requests then find computed, or being
        computed (they wait for that one computation), rather than compute themselves."""
        if self.settings.config.infer_requirements:
            threading.Thread(target=self._infer_quietly, args=(index,), name="toolrag-inference", daemon=True).start()

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

    def _infer_quietly(self, index: SearchIndex) -> None:
        try:
            self.inferred(index)
        except Exception:  # a background thread has no caller to tell: the next request computes it and fails
            log.exception("inferring requirements failed")

    def _requires(self, request: RequestContext) -> Requires:
        """What a tool requires, each with the position of the tool it names: what it declares and what an admin
        confirmed (as strong as declared), then (`SearchConfig.infer_requirements`) per parameter it declares
        nothing for, the best inferred producer the principal may use that no admin rejected (search/inferred.py),
        inferred as in a registry of the tools the principal may use."""
        index, usable = request.index, request.usable
        book = self.relations(index)
        # Under review a new tool must not become a prerequisite by saying it returns an id: an admin confirms it.
        infer_requirements = self.settings.config.infer_requirements and not book.reviewed
        proposals = self.settings.config.accept_proposed_relations and bool(book.proposed)
        if not infer_requirements and not book.confirms_requirements and not proposals:
            return lambda position: requirements(index, position)

        def may_use(name: str) -> bool:
            position = index.position_named(name)
            return position is not None and (usable is None or bool(usable[position]))

        relations = None
        if infer_requirements:
            inferred = self.inferred(index)
            seen = request.principal.visibility_key
            relations = index.derived.get(INFERRED_SEEN, seen, lambda: inferred.seen_by(may_use))

        def resolved(position: int) -> tuple[tuple[int | None, Requirement], ...]:
            tool = _with_confirmed(index.tools[position], book, proposals)
            if relations is None:
                found = tool.requires
            else:
                found = relations.requirements(
                    tool, lambda name: may_use(name) and book.verdict(tool.name, name, "requires") != "rejected"
                )
            return tuple((index.position_named(r.tool), r) for r in found)

        return resolved

    def _warn_unknown_always_included(self, index: SearchIndex) -> None:
        """A configured name no active tool has is a typo or a retired tool: said once per registry version."""
        if self._warned_generation == index.generation:
            return
        self._warned_generation = index.generation
        unknown = [name for name in self.settings.config.always_include if name.lower() not in index.by_name]
        if unknown:
            log.warning("always_include names no active tool: %s", ", ".join(unknown))


def _with_confirmed(tool: Tool, book: RelationBook, proposals: bool = False) -> Tool:
    """`tool` with the requirements an admin confirmed for it after those it declares, then (`proposals`: the
    registry accepts them) those a chat model proposed that no admin judged."""
    found = [(v.other, v.parameter) for v in book.confirmed_requirements(tool.name)]
    if proposals:
        found += [(p.other, p.parameter) for p in book.proposed_requirements(tool.name)]
    if not found:
        return tool
    known = {r.tool.lower() for r in tool.requires}
    extra = []
    for other, parameter in found:
        if other.lower() not in known and other.lower() != tool.name.lower():
            known.add(other.lower())
            extra.append(Requirement(tool=other, parameter=parameter))
    return tool.model_copy(update={"requires": [*tool.requires, *extra]})


def _inference_progress(done: int, total: int) -> None:
    """Inferring requirements for a large catalog takes a while: say how far it is, every 5,000 tools."""
    if done % 5000 == 0 or (done == total and total >= 5000):
        log.info("inferring requirements: %d of %d tools", done, total)
