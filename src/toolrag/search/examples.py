"""Example requests as views of their tools: a request close to an example a person approved for a tool scores that
tool at least as close, as an alias would, but only for the example's tenant. A tenant's own description of a tool
(`Tool.tenant_descriptions`) is one more view of it, that tenant's only, embedded as the tool's main text is.

An operator writes examples in the console or promotes a logged request that led to a successful call
(model.ExampleRequest). Each is embedded as a tool text is (once per text and model: the store keeps the vector),
and a request's cosine with a tool becomes the best of its cosines with the tool's texts and with the examples of
the principal's tenant (or of every tenant). One tenant's examples never move another tenant's ranking, and an
example of a tool a principal may not use changes nothing for that principal: only visible tools' cosines move.
A past task is one request given as an example of every tool its task used (promoted from an agent's session that
called them, or written by an operator): a later request like it raises all of them at once, so the whole set is
retrieved, not only the tool the request is most about; never above the tool the request's own views rank first
(search/gather.py `OWN_KEPT`: another request's task must not push out the tool a request is about), nor above its
first two when the nearest past task does not hold its first (`OWN_KEPT_AGAINST_TASKS`).
A request close to an example also counts as evidence that it needs a tool, so a request that found nothing finds
the tool after its example is added; but requests resemble each other more than they resemble tool descriptions,
small talk included, so that evidence is weighed against what the small-talk bank reaches against the same examples
(search/calibrate.py), not against the tools' level. On by default (`SearchConfig.example_views`):
a person approved each one. Measured: docs/benchmarks.md "Example requests".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np
import numpy.typing as npt

from toolrag.limits import MAX_SET_TOOLS
from toolrag.model import ExampleRequest, Tool, example_key, utc_now
from toolrag.search.lexical import BoolArray, FloatArray, IntArray

if TYPE_CHECKING:
    from toolrag.store.base import Store
    from toolrag.store.usage import TaskCall, UsedRequest

_CHUNK_ROWS = 4096
Views = Literal["all", "own", "tasks"]  # which views of a tool pool its cosine: every one, its own, past tasks'
# How much a tool's own views still count in the order of tools once a past task raised its cosine: a past task
# raises every tool of it to the same cosine, and their own texts then tell apart the one the request is most about.
# A request given to one tool alone is one of its own views: an operator's fix is not undone by the tool's weaker
# description. Chosen on metatool's tuning half: the most requests with both of their tools in the top 5 (past
# tasks from the other half: 0.854 -> 0.883; docs/benchmarks.md "Past tasks").
OWN_TEXT_WEIGHT = 0.5


@dataclass(frozen=True)
class ExampleViews:
    """Every tenant view of a snapshot's tools (example requests and tenants' descriptions): its vector, its tool's
    position, its tenant, and whether it is the tool's own (a tenant's description of it, or a request about it
    alone) or a past task's request, shared with the task's other tools."""

    vectors: FloatArray  # one row per view, embedded as tool texts are
    positions: IntArray  # the view's tool
    tenants: tuple[str | None, ...]  # None: every tenant's
    own: BoolArray  # False: a past task's request (`ExampleRequest.task`)

    @classmethod
    def empty(cls, dimension: int) -> ExampleViews:
        return cls(np.zeros((0, dimension), dtype=np.float32), np.zeros(0, dtype=np.int64), (), np.zeros(0, bool))

    @classmethod
    def of(
        cls,
        rows: Sequence[FloatArray],
        tenants: Sequence[Sequence[str | None]],
        own: Sequence[Sequence[bool]],
        first: int,
        dimension: int,
    ) -> ExampleViews:
        """`rows[i]`, `tenants[i]`, `own[i]`: the views of the tool at position `first + i`."""
        counts = [len(block) for block in rows]
        if not sum(counts):
            return cls.empty(dimension)
        vectors = np.vstack([block for block in rows if len(block)]).astype(np.float32)
        positions = np.repeat(np.arange(first, first + len(rows), dtype=np.int64), counts)
        flags = np.array([flag for flags in own for flag in flags], dtype=np.bool_)
        return cls(vectors, positions, tuple(tenant for owners in tenants for tenant in owners), flags)

    @property
    def count(self) -> int:
        return len(self.positions)

    # Derived once per snapshot, not per search: a Python loop over every example's tenant on each request.
    @cached_property
    def _owners(self) -> npt.NDArray[np.object_]:
        return np.array(self.tenants, dtype=object)

    @cached_property
    def has_tasks(self) -> bool:
        """Whether any view is a past task's request: without one, every view is its tool's own."""
        return not bool(self.own.all())

    @cached_property
    def _shared(self) -> BoolArray:
        return np.array([owner is None for owner in self.tenants], dtype=np.bool_)

    def appended(self, other: ExampleViews) -> ExampleViews:
        if not other.count:
            return self
        if not self.count:
            return other
        return ExampleViews(
            np.vstack([self.vectors, other.vectors]),
            np.concatenate([self.positions, other.positions]),
            (*self.tenants, *other.tenants),
            np.concatenate([self.own, other.own]),
        )

    def compacted(self, keep: BoolArray, renumber: IntArray) -> ExampleViews:
        """Without the examples of positions that are not kept, the others renumbered."""
        rows = np.flatnonzero(keep[self.positions]) if self.count else np.zeros(0, dtype=np.int64)
        tenants = tuple(self.tenants[i] for i in rows.tolist())
        return ExampleViews(self.vectors[rows], renumber[self.positions[rows]], tenants, self.own[rows])

    def rows(self, tenant: str | None, usable: BoolArray | None) -> IntArray:
        """The examples a principal of `tenant` searches with. `usable`: positions the principal may use and that
        are live (None: all)."""
        if not self.count:
            return np.zeros(0, dtype=np.int64)
        mine = self._shared | (self._owners == tenant)
        if usable is not None:
            mine &= usable[self.positions]
        return np.flatnonzero(mine)

    def searched(self, vector: FloatArray, tenant: str | None, usable: BoolArray | None) -> SearchedViews:
        """The views a principal of `tenant` who may use `usable` searches with, and the request's cosine with each
        (once per request, however many ways a ranking pools them)."""
        rows = self.rows(tenant, usable)
        return SearchedViews(self.positions[rows], self.own[rows], (self.vectors[rows] @ vector).astype(np.float32))

    def best(self, requests: FloatArray, rows: IntArray) -> FloatArray:
        """Each request's best cosine with the examples at `rows` (a few thousand at a time: bounded memory)."""
        best = np.full(len(requests), -np.inf, dtype=np.float32)
        for start in range(0, len(rows), _CHUNK_ROWS):
            chunk = self.vectors[rows[start : start + _CHUNK_ROWS]]
            best = np.maximum(best, (requests @ chunk.T).max(axis=1))
        return best

    def of_tool(self, vector: FloatArray, position: int, tenant: str | None) -> list[tuple[int, float]]:
        """(which, cosine) of each of the tool's views `tenant` searches with: which of its views it is (their
        order in search/text.py `tenant_views`) and the request's cosine with it; for explanations."""
        rows = np.flatnonzero(self.positions == position).tolist()
        mine = [n for n, row in enumerate(rows) if self.tenants[row] is None or self.tenants[row] == tenant]
        if not mine:
            return []
        cosines = (self.vectors[[rows[n] for n in mine]] @ vector).tolist()
        return list(zip(mine, (float(c) for c in cosines), strict=True))


@dataclass(frozen=True)
class SearchedViews:
    """The views one request is searched with (ExampleViews.searched): each view's tool, whether it is the tool's
    own, and the request's cosine with it."""

    positions: IntArray
    own: BoolArray
    cosines: FloatArray

    def pooled(self, cosines: FloatArray, views: Views = "all") -> FloatArray:
        """`cosines` (one per position) raised to the request's cosine with each tool's views: every view, its own
        views only (not past tasks' requests), or past tasks' requests only; `cosines` itself when there is none."""
        kept = slice(None) if views == "all" else self.own == (views == "own")
        positions, found = self.positions[kept], self.cosines[kept]
        if not len(positions):
            return cosines
        raised = cosines.copy()
        np.maximum.at(raised, positions, found)
        return raised


def ranking_cosines(pooled: FloatArray, own: FloatArray) -> FloatArray:
    """The cosines that order tools once examples were pooled: each tool's best view (`pooled`: its texts, its
    tenant's description and the examples searched with), plus the cosine of its best own view for the tenant
    (`own`: the same without past tasks' requests) weighed by OWN_TEXT_WEIGHT. A tool no past task raised keeps its
    place (both are one cosine); a tool an example of its own raised stays above every tool below that example."""
    return (pooled + np.float32(OWN_TEXT_WEIGHT) * own).astype(np.float32)


def promotable_requests(
    name: str, examples: Sequence[ExampleRequest], used: Iterable[UsedRequest]
) -> list[tuple[str | None, str]]:
    """(tenant, request) of the logged requests in `used` after which the tool `name` was called successfully,
    in their order (newest first), without those already among its `examples`: the candidates to promote."""
    known = {e.key for e in examples}
    found: dict[tuple[str, str | None], tuple[str | None, str]] = {}
    for request in used:
        text = " ".join(request.request.split())
        key = example_key(text, request.tenant)
        if request.tool == name and text and key not in known:
            found.setdefault(key, (request.tenant, text))
    return list(found.values())


@dataclass(frozen=True)
class PastTask:
    """A request and the tools an agent's sessions called successfully after it (two or more, in the order of their
    first calls), a candidate to promote: each tool gets the request as an example (`ToolWriter.add_task_example`)."""

    tenant: str | None
    request: str
    tools: tuple[str, ...]
    sessions: int  # how many sessions asked this and called exactly these tools


def past_tasks(calls: Iterable[TaskCall], promoted: Callable[[str, str | None, str], bool]) -> list[PastTask]:
    """The tasks of the sessions whose `calls` (oldest first) name two to MAX_SET_TOOLS tools, alike ones counted
    together (the same tenant, request and tools), most sessions first, then newest first; without the tasks whose
    every tool `promoted(tool, tenant, request)` has the request as an example already. A session is one caller's:
    two callers that happen to share a session id are two tasks. A session that called more tools than a set may
    hold was not one task (an agent left running, a session id reused): it proposes nothing."""
    sessions: dict[tuple[str, str | None, str | None], tuple[str, list[str]]] = {}
    for call in calls:
        _, tools = sessions.setdefault((call.session, call.tenant, call.caller), (call.request, []))
        if len(tools) <= MAX_SET_TOOLS and call.tool not in tools:  # one past a set is enough to tell
            tools.append(call.tool)
    found: dict[tuple[str | None, str, frozenset[str]], PastTask] = {}
    for (_, tenant, _), (request, tools) in reversed(sessions.items()):  # newest first
        text = " ".join(request.split())
        if not 2 <= len(tools) <= MAX_SET_TOOLS or not text or all(promoted(tool, tenant, text) for tool in tools):
            continue
        key = (tenant, text.casefold(), frozenset(tools))
        seen = found.get(key)
        found[key] = (
            PastTask(tenant, text, tuple(tools), 1) if seen is None else replace(seen, sessions=seen.sessions + 1)
        )
    return sorted(found.values(), key=lambda task: -task.sessions)


def logged_promotable(store: Store, tool: Tool, days: int) -> list[tuple[str | None, str]]:
    """`promotable_requests` of `tool` among the usage log's requests of the last `days`."""
    used = store.usage.called_after(utc_now() - timedelta(days=days))
    return promotable_requests(tool.name, tool.examples, used)


def logged_past_tasks(store: Store, days: int, limit: int) -> list[PastTask]:
    """`past_tasks` of the usage log's last `days`, at most `limit`, without those naming a tool that is gone."""
    calls = store.usage.task_calls(utc_now() - timedelta(days=days))
    tools = store.get_many({call.tool for call in calls})

    def promoted(name: str, tenant: str | None, text: str) -> bool:
        tool = tools.get(name)
        wanted = example_key(text, tenant)
        return tool is not None and any(e.key == wanted for e in tool.examples)

    return [task for task in past_tasks(calls, promoted) if all(name in tools for name in task.tools)][:limit]
