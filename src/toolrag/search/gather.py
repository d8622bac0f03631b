"""Stage 1, gather and fuse: a request's candidates among the tools the principal may see, scored.

Lexical (BM25 over what the principal sees) and dense (each tool's best cosine: its text, its tenant's description,
its example requests and past tasks) scores, fused; moved by routing rules, groups and what usage taught; the tools
the request names outright first. A request of several intents ranks each part too and merges in the parts that
point at a tool of their own (search/steps.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from toolrag import tracing
from toolrag.embed.language import looks_english
from toolrag.model import Principal
from toolrag.search.context import RequestContext, SearchSettings
from toolrag.search.cut import Ranked
from toolrag.search.dense import dense_scores, exact_dense_scores
from toolrag.search.examples import SearchedViews, ranking_cosines
from toolrag.search.feedback import learner_of
from toolrag.search.fuse import fuse, min_max
from toolrag.search.groups import blend_groups, description_scores
from toolrag.search.index import SearchIndex
from toolrag.search.intents import split_intents
from toolrag.search.lexical import BoolArray, FloatArray, IntArray
from toolrag.search.steps import Step, merge_rankings, trusted_steps
from toolrag.search.text import tokenize

GROUPED_HEAD = 256  # candidates that take part in group ranking
_QUOTES = "\"'`()[]{}<>,;:!?"
# The request's own first tools (by its own views, without past tasks) that a past task may not push down: 1, the
# tool the request is about. On metatool's tuning half, two-tool requests with both tools in the top 5 under past
# tasks: 0.863 keeping 1, 0.815 keeping 2, 0.714 keeping 3 (docs/benchmarks.md "Past tasks that push out a request's
# own tool").
OWN_KEPT = 1
# ... and when the past task nearest the request does not hold its own first tool (nothing of that tool is as near:
# a task's request, an example of the same text, its texts), it is about another tool: the request's own first two
# stay on top ("hear a song in Apple Music", whose own first tool is the app's version screen and second its
# player, nearest a YouTube Music task). Not for a request read as steps: its own second tool is usually another
# step's, which that step's ranking keeps. Chosen on the tuning halves of three generated catalogs (seeds 11-13)
# and metatool's (docs/benchmarks.md "A past task about another tool").
OWN_KEPT_AGAINST_TASKS = 2
SAME_COSINE = 1e-5  # one request's cosine, the same vector in each tool's views, up to each row's float arithmetic
_SPACES = re.compile(r"\s+")


def normalize_query(query: str) -> str:
    return _SPACES.sub(" ", query).strip().lower()


def whole_name(query: str) -> str:
    """The request read as one tool name: lowercased, without quotes and a closing full stop."""
    return normalize_query(query).strip(_QUOTES + ".")


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
class _PastTasks:
    """With past tasks in the registry: each position's cosine with its own views alone, and with the past tasks'
    requests that hold it (-inf for a tool in none)."""

    own: FloatArray
    tasks: FloatArray


class Gatherer:
    """The candidates of a request and their fused scores (this module's docstring)."""

    def __init__(self, settings: SearchSettings) -> None:
        self.settings = settings

    def parts(self, query: str) -> list[str]:
        """The request's intents (search/intents.py), or the request whole when `multi_intent` is off."""
        return split_intents(query) if self.settings.config.multi_intent else [query]

    def rank(self, request: RequestContext, parts: list[str]) -> tuple[list[Ranked], FloatArray | None, list[Step]]:
        """The whole request's ranking, with each step's best tools merged in fairly (one query embedding more
        per step): the whole request's best tool, then each step's best, then the rest alternately; the whole
        request's vector; and the parts whose best tool is their own (none when the request is one step)."""
        if len(parts) < 2:
            whole, vector = self.rank_one(request)
            return whole, vector, []
        whole, vector = self.rank_one(request, read_as_steps=True)
        ranked = [Step(part, *self.rank_one(request.about(part), read_as_steps=True)) for part in parts]
        # The ranking merges in the parts that point at their tool with evidence; search() delivers every part
        # with a tool of its own that passes the small-talk decision by itself (decide.py `chosen_per_step`).
        merged = trusted_steps(ranked, self.settings.config.intent_min_similarity)
        steps = trusted_steps(ranked, -1.0)
        if not merged:
            return whole, vector, steps
        return merge_rankings([whole, *(step.items for step in merged)], request.limit), vector, steps

    def rank_one(self, request: RequestContext, read_as_steps: bool = False) -> tuple[list[Ranked], FloatArray | None]:
        """The top candidates by fused score, and the request's vector (None when nothing was embedded).
        `read_as_steps`: the request, or the step ranked, is one of several (how past tasks may move it)."""
        config = self.settings.config
        index, query, visible, mode = request.index, request.text, request.visible, request.mode
        candidates = np.flatnonzero(visible) if visible is not None else np.arange(index.size)
        if len(candidates) == 0 or not query.strip():
            return [], None
        candidates, routed = self._route(index, query, candidates)
        tokens = tokenize(query, stem=not config.stem_english_only or looks_english(query))
        with tracing.span("toolrag.search.lexical", terms=len(tokens)):
            lexical, matched_terms = _lexical(index, tokens, visible, mode)
        with tracing.span("toolrag.search.dense", tools=len(candidates)):
            text_dense, vector = self._dense(index, query, visible, mode)
            views = self._searched_views(request, vector)
            dense = views.pooled(text_dense) if views is not None else text_dense
        ordering, past = self._ordering(request, text_dense, dense, vector, views)

        def fused_by(cosines: FloatArray, grouped: FloatArray) -> FloatArray:
            if mode == "hybrid":
                fused = fuse(cosines, lexical, candidates, config.dense_weight)
            else:
                fused = min_max((cosines if mode == "dense" else lexical)[candidates])
            fused = self._boost_routed(index, candidates, fused, routed)
            fused = self._blend_groups(index, candidates, fused, grouped, vector)
            return self._learned(index, candidates, fused, vector, request.principal)

        scores = fused_by(ordering, dense)
        if past is not None:  # past tasks raised their sets: none rises above the tools the request is about
            own = fused_by(past.own, past.own)
            scores = _own_first_kept(scores, own, dense[candidates], past.tasks[candidates], read_as_steps)
        fused = np.zeros(index.size, dtype=np.float32)
        fused[candidates] = scores
        scored = _Scored(fused, dense, text_dense, _coverage(index, tokens, lexical, visible), matched_terms)
        leader, lead = _lead(dense, candidates) if mode != "lexical" else (-1, 0.0)
        named = _named(index, query, visible)
        items = [
            scored.ranked(index, position, position in named, routed, lead if position == leader else 0.0, tokens)
            for position in dict.fromkeys([*named, *_top(candidates, scores, request.limit)])
        ]
        items.sort(key=lambda item: (not item.name_match, -item.score, index.names[item.position]))
        return items[: request.limit], vector

    def example_rows(self, index: SearchIndex, tenant: str | None, usable: BoolArray | None) -> IntArray | None:
        """The example requests a principal of `tenant` who may use `usable` searches with (None: none)."""
        views = index.examples
        if views is None or not views.count or not self.settings.config.example_views:
            return None
        return views.rows(tenant, usable)

    def _route(self, index: SearchIndex, query: str, candidates: IntArray) -> tuple[IntArray, set[str]]:
        router, config = self.settings.router, self.settings.config
        if not router.rules:
            return candidates, set()
        routed = router.categories_for(query)
        if routed and config.route_mode == "filter":
            kept = np.array([p for p in candidates.tolist() if index.categories[p] in routed], dtype=np.int64)
            if len(kept):
                return kept, routed
        return candidates, routed

    def _boost_routed(
        self, index: SearchIndex, candidates: IntArray, scores: FloatArray, routed: set[str]
    ) -> FloatArray:
        config = self.settings.config
        if not routed or config.route_mode != "boost":
            return scores
        hits = np.array([index.categories[p] in routed for p in candidates.tolist()], dtype=np.bool_)
        return np.where(hits, np.minimum(1.0, scores + config.route_boost), scores).astype(np.float32)

    def _dense(
        self, index: SearchIndex, query: str, visible: BoolArray | None, mode: str
    ) -> tuple[FloatArray, FloatArray | None]:
        """Each tool's cosine with the request, and the request's vector (None in lexical mode)."""
        if mode == "lexical":
            return np.zeros(index.size, dtype=np.float32), None
        vector = self.settings.embedder_of(index).embed_query(query)
        return dense_scores(index, vector, visible, self.settings.config.ann_candidates), vector

    def _searched_views(self, request: RequestContext, vector: FloatArray | None) -> SearchedViews | None:
        """The views of the principal's tenant the request is searched with (search/examples.py): its example
        requests and its descriptions, with the request's cosine with each; None without any."""
        views = request.index.examples
        if views is None or not views.count or vector is None or not self.settings.config.example_views:
            return None
        return views.searched(vector, request.principal.tenant, request.usable)

    def _ordering(
        self,
        request: RequestContext,
        text_dense: FloatArray,
        dense: FloatArray,
        vector: FloatArray | None,
        views: SearchedViews | None,
    ) -> tuple[FloatArray, _PastTasks | None]:
        """The cosines that order the tools (search/examples.py `ranking_cosines`), and with past tasks the cosines
        of the tools' own views alone and of the past tasks' requests (None without past tasks): with examples
        pooled, each tool's own views count beside its best view; a tool an example raised gets its own text's
        cosine computed exactly (an approximate index gives the tools it did not propose only a bound). Without past
        tasks, own views are every view: the best view alone orders the tools, with nothing more computed."""
        examples = request.index.examples
        if dense is text_dense or vector is None or views is None or examples is None or not examples.has_tasks:
            return dense, None
        exact = text_dense.copy()
        raised = np.flatnonzero(dense > text_dense)
        exact[raised] = exact_dense_scores(request.index, vector, raised)
        own = views.pooled(exact, "own")
        tasks = views.pooled(np.full(request.index.size, -np.inf, dtype=np.float32), "tasks")
        return ranking_cosines(dense, own), _PastTasks(own, tasks)

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
        memory, config = self.settings.memory, self.settings.config
        weight = config.usage_weight
        if memory is None or vector is None or weight <= 0:
            return scores
        if memory.model_id != self.settings.embedder_of(index).model_id:
            return scores  # learned with another model: its vectors do not compare
        owner = learner_of(principal.tenant, principal.caller)
        gains = memory.adjustment(index, vector, candidates, config.usage_min_similarity, weight, owner)
        return ((scores + gains) / (1.0 + weight)).astype(np.float32)

    def _blend_groups(
        self, index: SearchIndex, candidates: IntArray, scores: FloatArray, dense: FloatArray, vector: FloatArray | None
    ) -> FloatArray:
        """Scores moved towards their groups' (search/groups.py). Only the best GROUPED_HEAD candidates take part:
        a group's two best tools are among them whenever the group matters, and a large registry is not sorted."""
        groups, config = index.groups, self.settings.config
        if groups is None or config.group_weight <= 0 or len(candidates) == 0:
            return scores
        cosines = groups.description_cosines(vector) if vector is not None else np.full(len(groups.names), np.nan)
        weight = config.dense_weight if config.mode == "hybrid" else 1.0
        descriptions = description_scores(cosines.astype(np.float32), dense[candidates], weight)
        head = np.argpartition(-scores, GROUPED_HEAD)[:GROUPED_HEAD] if len(scores) > GROUPED_HEAD else slice(None)
        blended = scores.copy()
        ids = groups.of_tool[candidates[head]]
        blended[head] = blend_groups(ids, scores[head], descriptions, config.group_weight)
        return blended


def _own_first_kept(
    scores: FloatArray, own: FloatArray, views: FloatArray, tasks: FloatArray, read_as_steps: bool
) -> FloatArray:
    """`scores` with the candidates that `own` (the same scores without past tasks) ranks first at the top, in
    their order: OWN_KEPT of them, or OWN_KEPT_AGAINST_TASKS for a request of one step when the nearest past task
    is nearer the request than anything of its own first tool (`tasks`: each candidate's best cosine with the past
    tasks' requests; `views`: with every view of it, those requests, its texts and its examples): that task does
    not hold the tool. A past task proposes its whole set, and must not push out the tools a request is about for
    another request's set (issue 52). They go just above the best, by more than the 6 digits a ranking's scores
    keep (a tie is broken for them)."""
    if not len(scores):
        return scores
    order = np.argsort(-own, kind="stable")
    nearest = float(tasks.max())
    about_another = not read_as_steps and np.isfinite(nearest) and views[order[0]] < nearest - SAME_COSINE
    firsts = order[: OWN_KEPT_AGAINST_TASKS if about_another else OWN_KEPT]
    best = float(scores.max())
    scores = scores.copy()
    for rank, first in enumerate(firsts.tolist()):
        scores[first] = best + (len(firsts) - rank) * 1e-5
    return scores


def _lexical(
    index: SearchIndex, tokens: list[str], visible: BoolArray | None, mode: str
) -> tuple[FloatArray, IntArray]:
    if mode == "dense":
        return np.zeros(index.size, dtype=np.float32), np.zeros(index.size, dtype=np.int64)
    return index.lexical.scores(tokens, visible)


def _coverage(index: SearchIndex, tokens: list[str], lexical: FloatArray, visible: BoolArray | None) -> FloatArray:
    """BM25 as the share of the best possible score for this request, in [0, 1]."""
    best = index.lexical.max_score(tokens, visible)
    if best <= 0:
        return np.zeros_like(lexical)
    return np.asarray(np.clip(lexical / best, 0.0, 1.0), dtype=np.float32)


def _named(index: SearchIndex, query: str, visible: BoolArray | None) -> set[int]:
    """Tools the request names: the whole request is a tool name, or a word of it is an identifier-like name."""
    names = set()
    whole = whole_name(query)
    if whole in index.by_name:
        names.add(index.by_name[whole])
    for word in query.split():
        word = word.strip(_QUOTES).rstrip(".")
        if any(sep in word for sep in "_.-") or (word[1:] != word[1:].lower()):
            position = index.by_name.get(word.lower())
            if position is not None:
                names.add(position)
    return {p for p in names if visible is None or visible[p]}


def _top(candidates: IntArray, scores: FloatArray, limit: int) -> list[int]:
    """Positions of the `limit` best candidates, best first (ties broken later by name)."""
    if len(candidates) > limit * 4:
        # Keep a margin past `limit` so equal scores at the boundary can still be ordered by name.
        keep = np.argpartition(-scores, limit * 4 - 1)[: limit * 4]
        candidates, scores = candidates[keep], scores[keep]
    order = np.argsort(-scores, kind="stable")[: limit * 4]
    return [int(candidates[i]) for i in order]


def _lead(dense: FloatArray, candidates: IntArray) -> tuple[int, float]:
    """The candidate with the best cosine, and by how much it leads the second best."""
    if len(candidates) < 2:
        return (int(candidates[0]), 1.0) if len(candidates) else (-1, 0.0)
    scores = dense[candidates]
    first, second = np.argpartition(-scores, 1)[:2]
    if scores[second] > scores[first]:
        first, second = second, first
    return int(candidates[first]), float(scores[first] - scores[second])
