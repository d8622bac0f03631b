"""Relations learned from usage: tool B is related to tool A when, in enough sessions of one tenant that called A,
the next tool called was B. Such a relation is `related`, never `requires`: that agents called B after A says they
went on with it, not that A cannot run without it.

Learning reads a window of the usage log per learner (each one's latest successful calls made in sessions,
`UsageTables.session_calls`: one tenant's flood never pushes another's history out) and counts per learner: a tenant,
or a caller of no tenant (who learns from, and is moved by, its own sessions only; search/feedback.py draws the same
line). A session counts once per pair however often its agent looped between the two tools, so a relation needs
`min_sessions` distinct sessions; and `min_strength` of the sessions that called A must have called B next. A
relation learned from one tenant's sessions is read for all of that tenant's searches, so its sessions must come from
`min_callers` distinct callers (as the usage log records them, `Principal.caller`): clients name their sessions, and
one caller minting sessions must not teach its whole tenant.

A tool the learner's tenant may not see, a pair an admin rejected, and a tool no longer in the catalog are never
learned; at search time, a related tool the principal may not use is never added, counted or named (the pipeline
checks the principal's own visibility).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import groupby, pairwise

from toolrag.model import Tool
from toolrag.search.learned_defaults import MAX_RELATED, MIN_CALLERS, MIN_SESSIONS, MIN_STRENGTH
from toolrag.store.base import Store
from toolrag.store.relations import LearnedRelation, ProposedRelation, RelationKind, RelationVerdict, Verdict
from toolrag.store.usage import SessionCall


def learner_key(tenant: str | None, caller: str | None) -> str | None:
    """Whose sessions a call is of: `tenant:NAME`, or `caller:ID` for a caller of no tenant (None: a call logged
    before callers were, which nobody learns from)."""
    if tenant:
        return f"tenant:{tenant}"
    return f"caller:{caller}" if caller else None


def learner_label(learner: str) -> str:
    """How explain names a learner's sessions: "acme" for a tenant, "your" for a caller's own."""
    kind, _, name = learner.partition(":")
    return name if kind == "tenant" else "your"


@dataclass(frozen=True)
class Thresholds:
    min_sessions: int = MIN_SESSIONS
    min_strength: float = MIN_STRENGTH
    max_related: int = MAX_RELATED
    min_callers: int = MIN_CALLERS  # of a tenant's sessions; a caller of no tenant learns for itself only


DEFAULT_THRESHOLDS = Thresholds()


@dataclass
class _Counts:
    """Per learner: sessions that called each tool, sessions in which one tool was called next after another, and
    the callers whose sessions did (None: calls logged before callers were, one unknown caller)."""

    called: Counter[str] = field(default_factory=Counter)
    followed: Counter[tuple[str, str]] = field(default_factory=Counter)
    callers: dict[tuple[str, str], set[str | None]] = field(default_factory=dict)


def learn(
    calls: Sequence[SessionCall],
    tools: Iterable[Tool],
    verdicts: Collection[RelationVerdict] = (),
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    progress: Callable[[int, int], None] | None = None,
) -> list[LearnedRelation]:
    """The relations `calls` (oldest first) support, per learner. `tools`: the catalog's active tools; a tool a
    learner's tenant may not see is not learned for it. `progress(done, total)` is called as sessions are read."""
    catalog = {tool.name.lower(): tool for tool in tools if tool.active}
    rejected = {(v.tool.lower(), v.other.lower()) for v in verdicts if v.verdict == "rejected" and v.kind == "related"}
    counts = _count(calls, progress)
    learned = []
    for learner, counted in counts.items():
        tenant = learner.removeprefix("tenant:") if learner.startswith("tenant:") else None
        min_callers = thresholds.min_callers if tenant is not None else 1
        candidates: dict[str, list[LearnedRelation]] = {}
        for (first, then), support in counted.followed.items():
            sessions = counted.called[first]
            strength = support / sessions
            if support < thresholds.min_sessions or strength < thresholds.min_strength:
                continue
            if len(counted.callers[first, then]) < min_callers:
                continue
            if (first.lower(), then.lower()) in rejected or not _seen(catalog, first, tenant, then):
                continue
            relation = LearnedRelation(learner, first, then, round(strength, 4), support, sessions)
            candidates.setdefault(first, []).append(relation)
        for found in candidates.values():
            found.sort(key=lambda r: (-r.strength, r.related))
            learned += found[: thresholds.max_related]
    return sorted(learned, key=lambda r: (r.learner, r.tool, -r.strength, r.related))


def _count(calls: Sequence[SessionCall], progress: Callable[[int, int], None] | None) -> dict[str, _Counts]:
    """Each learner's counts, a session (a caller's: two callers naming theirs alike are two) counting once per
    tool and once per pair."""
    by_session: dict[tuple[str, str | None, str], list[str]] = {}
    for call in calls:
        learner = learner_key(call.tenant, call.caller)
        if learner is not None:
            by_session.setdefault((learner, call.caller, call.session), []).append(call.tool)
    counts: dict[str, _Counts] = {}
    for done, ((learner, caller, _), called) in enumerate(by_session.items(), 1):
        sequence = [tool for tool, _ in groupby(called)]  # A, A, B: the agent retried A, then went on to B
        mine = counts.setdefault(learner, _Counts())
        mine.called.update(set(sequence))
        pairs = {pair for pair in pairwise(sequence) if pair[0] != pair[1]}
        mine.followed.update(pairs)
        for pair in pairs:
            mine.callers.setdefault(pair, set()).add(caller)
        if progress is not None and (done % 10_000 == 0 or done == len(by_session)):
            progress(done, len(by_session))
    return counts


def _seen(catalog: dict[str, Tool], first: str, tenant: str | None, then: str) -> bool:
    """Both tools are in the catalog and the learner's tenant may see them (a caller of no tenant: any tool open to
    every tenant)."""
    for name in (first, then):
        tool = catalog.get(name.lower())
        if tool is None or (tool.tenants and tenant not in tool.tenants):
            return False
    return True


@dataclass(frozen=True)
class Related:
    """A tool related to another, as search reads it: learned (`usage`) or confirmed by an admin (`confirmed`)."""

    tool: str
    source: str  # "usage" | "confirmed"
    strength: float
    why: str


@dataclass(frozen=True)
class RelationBook:
    """What search reads of the stored relations, once per snapshot: verdicts by pair, and learned relations by
    learner and tool."""

    learned: dict[tuple[str, str], tuple[LearnedRelation, ...]] = field(default_factory=dict)
    verdicts: dict[tuple[str, str, RelationKind], RelationVerdict] = field(default_factory=dict)
    # The confirmed verdicts by tool and kind: search reads them per tool it walks, so they are not scanned for.
    confirmed: dict[tuple[str, RelationKind], tuple[RelationVerdict, ...]] = field(default_factory=dict)
    # A chat model's proposed requirements by tool, without rejected pairs: used only where the registry accepts them.
    proposed: dict[str, tuple[ProposedRelation, ...]] = field(default_factory=dict)
    # The registry asks for review: only what an admin confirmed is used (not what usage, a model or schemas suggest).
    reviewed: bool = False

    @classmethod
    def of(
        cls,
        learned: Iterable[LearnedRelation],
        verdicts: Iterable[RelationVerdict],
        proposed: Iterable[ProposedRelation] = (),
        reviewed: bool = False,
    ) -> RelationBook:
        by_tool: dict[tuple[str, str], list[LearnedRelation]] = {}
        for relation in learned:
            by_tool.setdefault((relation.learner, relation.tool.lower()), []).append(relation)
        decided = {(v.tool.lower(), v.other.lower(), v.kind): v for v in verdicts}
        confirmed: dict[tuple[str, RelationKind], list[RelationVerdict]] = {}
        for (name, _, kind), verdict in decided.items():
            if verdict.verdict == "confirmed":
                confirmed.setdefault((name, kind), []).append(verdict)
        proposals: dict[str, list[ProposedRelation]] = {}
        for proposal in proposed:
            if (proposal.tool.lower(), proposal.other.lower(), "requires") not in decided:
                proposals.setdefault(proposal.tool.lower(), []).append(proposal)
        return cls(
            {key: tuple(found) for key, found in by_tool.items()},
            decided,
            {key: tuple(found) for key, found in confirmed.items()},
            {key: tuple(found) for key, found in proposals.items()},
            reviewed,
        )

    @property
    def confirms_requirements(self) -> bool:
        """Whether an admin confirmed any requirement (then search resolves requirements tool by tool)."""
        return any(kind == "requires" for _, kind in self.confirmed)

    def verdict(self, tool: str, other: str, kind: RelationKind) -> Verdict | None:
        found = self.verdicts.get((tool.lower(), other.lower(), kind))
        return None if found is None else found.verdict

    def confirmed_requirements(self, tool: str) -> list[RelationVerdict]:
        """The requirements an admin confirmed for `tool`: as strong as declared."""
        return list(self.confirmed.get((tool.lower(), "requires"), ()))

    def proposed_requirements(self, tool: str) -> list[ProposedRelation]:
        """What a chat model proposed that `tool` requires, no admin having judged the pair."""
        return list(self.proposed.get(tool.lower(), ()))

    def related(self, tool: str, learner: str | None) -> list[Related]:
        """What `tool` relates to for `learner`'s searches, strongest first: confirmed relations (every learner's:
        an admin said so), then what `learner`'s own sessions taught, without rejected pairs."""
        # Not the admin's name: a result's reasons reach agents, and a name is free text an agent's model reads
        # (issue 48, R4-8). Who confirmed it stays in the audit log and in the relations operators list.
        confirmed = [
            Related(v.other, "confirmed", 1.0, "related: confirmed by an admin")
            for v in self.confirmed.get((tool.lower(), "related"), ())
        ]
        named = {r.tool.lower() for r in confirmed}
        mine = self.learned.get((learner, tool.lower()), ()) if learner is not None else ()
        learned = [
            Related(r.related, "usage", r.strength, usage_reason(r))
            for r in mine
            if r.related.lower() not in named and self.verdict(tool, r.related, "related") != "rejected"
        ]
        return confirmed + learned


def usage_reason(relation: LearnedRelation) -> str:
    """ "related: 14 of 20 acme sessions that called search_orders called refund_order next"."""
    return (
        f"related: {relation.support} of {relation.sessions} {learner_label(relation.learner)} sessions that called"
        f" {relation.tool} called {relation.related} next"
    )


def stored_relations(store: Store) -> RelationBook:
    """The relations search reads: learned and proposed ones only while no review is asked for (under review, a
    relation learned from usage, proposed by a model or inferred from schemas reaches search only once an admin
    confirms it, as a `confirmed` verdict: issue 48, and the ninth security review for inferred ones)."""
    reviewed = store.reviews.required()
    learned = () if reviewed else store.relations.learned()
    proposed = () if reviewed else store.relations.proposals()
    return RelationBook.of(learned, store.relations.verdicts(), proposed, reviewed)
