"""A tool's relations from every source, and an admin's verdicts on the ones the registry found by itself.

Sources: `declared` (the catalog's `requires`), `inferred` (from schemas, search/inferred.py), `usage` (learned from
sessions, search/learned.py), `proposed` (by the operator's chat model, runtime/propose.py) and `confirmed` (an
admin's). An inferred or learned relation can be confirmed (then it
is as strong as a declared one, and stays whatever inference or learning find next) or rejected (then it is neither
inferred nor learned again for the pair until the rejection is lifted); a declared one is the catalog's to change.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from toolrag.errors import InvalidToolError
from toolrag.model import RelationSource, Tool, ToolRelation, utc_now
from toolrag.search.inferred import InferredRelations
from toolrag.search.learned import DEFAULT_THRESHOLDS, Thresholds, learn, learner_label
from toolrag.search.learned_defaults import MAX_CALLS, WINDOW_DAYS
from toolrag.store.base import AuditEntry, Store
from toolrag.store.relations import LearnedRelation, ProposedRelation, RelationKind, RelationVerdict, Verdict

_SOUGHT: dict[RelationKind | None, str] = {
    "requires": "inferred requirement",
    "related": "learned relation",
    None: "inferred or learned relation",
}


@dataclass(frozen=True)
class LearningRun:
    """What one run of learning from usage read and kept."""

    calls: int
    relations: list[LearnedRelation]
    days: int
    changed: bool = True  # False: the same relations as the run before, so nothing was written


def _kept(relations: list[LearnedRelation]) -> set[tuple[str, str, str, float, int, int]]:
    """What a learned relation says, without when it was learned."""
    return {(r.learner, r.tool, r.related, round(r.strength, 9), r.support, r.sessions) for r in relations}


class RelationDesk:
    """The relations of a registry's tools: listed with their sources, learned from usage, confirmed and rejected.
    `inferred()`: the current snapshot's inferred requirements (computed once per snapshot, for whoever `of` is
    asked to show them: an admin judges what inference would add even while search does not use it)."""

    def __init__(
        self,
        store: Store,
        get: Callable[[str], Tool],
        tools: Callable[[], list[Tool]],
        inferred: Callable[[], InferredRelations],
    ) -> None:
        self._store = store
        self._get = get
        self._tools = tools
        self._inferred = inferred

    def learn(
        self,
        days: int = WINDOW_DAYS,
        max_calls: int = MAX_CALLS,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        progress: Callable[[int, int], None] | None = None,
    ) -> LearningRun:
        """Learn from each learner's latest `max_calls` successful calls of the last `days` (a tenant's, or a
        tenantless caller's) in place of what was learned before, in one transaction with its audit entry. A run
        that learns what is already kept writes nothing (a scheduled run on a quiet registry leaves no audit entry
        and rebuilds no snapshot)."""
        calls = self._store.usage.session_calls(utc_now() - timedelta(days=days), max_calls)
        verdicts = self._store.relations.verdicts()
        learned = learn(calls, self._tools(), verdicts, thresholds, progress)
        if _kept(learned) == _kept(self._store.relations.learned()):
            return LearningRun(len(calls), learned, days, changed=False)
        learners = len({r.learner for r in learned})
        detail = f"{len(learned)} relations for {learners} learners from {len(calls)} calls of the last {days} days"
        self._store.relations.replace_learned(learned, [AuditEntry("relations_learned", detail)])
        return LearningRun(len(calls), learned, days)

    def of(
        self,
        name: str,
        sees: Callable[[Tool], bool],
        learners: Callable[[str], bool] = lambda _: True,
        rejected_learned: bool = True,
        deciders: bool = True,
        inferred: bool = True,
        proposed: bool = True,
        reasons: bool = True,
    ) -> list[ToolRelation]:
        """Every relation of tool `name` to a tool `sees` accepts, by source: declared, confirmed, inferred (as a
        registry of the tools `sees` accepts would infer them; `inferred` False: none, and nothing is inferred),
        learned (of the learners `learners` accepts), then the rejected ones; tools the reader does not see, or that
        are no longer in the catalog, are left out, never named. `rejected_learned` False: without rejected learned
        relations, which some tenant's sessions taught (a reader of another tenant would learn that). `deciders`
        False: a verdict says "an admin", not who gave it (an admin's name is free text, and agents read relations
        too: issue 48, R4-8). `proposed` False: without a chat model's proposals (shown to readers only while search
        uses them). `reasons` False: a proposal without its model's reason (free text about the candidates it was
        shown, which a reader of the relation need not see: admins read it)."""
        tool = self._get(name)
        catalog = {t.name.lower(): t for t in self._tools()}

        def visible(other: str) -> bool:
            found = catalog.get(other.lower())
            return found is not None and sees(found)

        def by(verdict: RelationVerdict) -> str:
            return (verdict.decided_by if deciders else None) or "an admin"

        verdicts = {
            (v.other.lower(), v.kind): v for v in self._store.relations.verdicts() if v.tool.lower() == name.lower()
        }
        found = [
            ToolRelation(other=r.tool, kind="requires", source="declared", strength=1.0, parameter=r.parameter)
            for r in tool.requires
        ]
        found += [
            ToolRelation(
                other=v.other,
                kind=v.kind,
                source="confirmed",
                strength=1.0,
                parameter=v.parameter,
                detail=f"confirmed by {by(v)}",
            )
            for v in verdicts.values()
            if v.verdict == "confirmed"
        ]
        for edge in self._inferred().seen_by(visible).of(tool.name) if inferred else ():
            if (edge.producer.lower(), "requires") not in verdicts:
                found.append(
                    ToolRelation(
                        other=edge.producer,
                        kind="requires",
                        source="inferred",
                        strength=edge.confidence,
                        parameter=edge.parameter,
                        detail=f"returns `{edge.output}`",
                    )
                )
        for p in self._store.relations.proposals() if proposed else ():
            if p.tool.lower() == name.lower() and (p.other.lower(), "requires") not in verdicts:
                found.append(
                    ToolRelation(
                        other=p.other,
                        kind="requires",
                        source="proposed",
                        strength=0.0,
                        parameter=p.parameter,
                        detail=f"proposed by {p.model}, unused until confirmed" + (f": {p.reason}" if reasons else ""),
                    )
                )
        for r in self._store.relations.learned():
            if (
                r.tool.lower() == name.lower()
                and learners(r.learner)
                and (r.related.lower(), "related") not in verdicts
            ):
                found.append(_learned(r))
        found += [
            ToolRelation(
                other=v.other,
                kind=v.kind,
                source=_source(v),
                strength=0.0,
                parameter=v.parameter,
                detail=f"rejected by {by(v)}",
                rejected=True,
            )
            for v in verdicts.values()
            if v.verdict == "rejected" and (rejected_learned or v.kind == "requires")
        ]
        return [r for r in found if visible(r.other)]

    def proposal_bases(self) -> dict[str, str]:
        """What each tool was last asked about with, hashed (runtime/propose.py asks again only when it changed)."""
        return self._store.asked.bases("relations")

    def record_proposals(
        self, asked: Sequence[tuple[str, str]], proposals: Sequence[ProposedRelation], model: str
    ) -> None:
        """A chat model's proposals for the tools `asked` (tool, basis), in place of what it proposed for them
        before, with one audit entry: they wait for an admin's verdict."""
        detail = f"{len(proposals)} requirements proposed by {model} for {len(asked)} tools"
        self._store.relations.record_proposals(asked, proposals, [AuditEntry("relations_proposed", detail)])

    def decide(
        self, name: str, other: str, verdict: Verdict, decided_by: str | None, kind: RelationKind | None = None
    ) -> RelationVerdict:
        """Confirm or reject `name` -> `other` of `kind` (None: an inferred requirement if there is one, else a
        learned or already judged relation); InvalidToolError if the registry has no such relation, or the
        catalog declares the requirement."""
        tool, needed = self._get(name), self._get(other)
        if kind != "related" and any(r.tool.lower() == needed.name.lower() for r in tool.requires):
            raise InvalidToolError(
                f"{tool.name} declares it requires {needed.name}: change the tool's `requires`, not a verdict"
            )
        kind, parameter = self._found(tool.name, needed.name, kind)
        decided = RelationVerdict(tool.name, needed.name, kind, verdict, parameter, decided_by)
        audit = AuditEntry(
            f"relation_{verdict}", f"{kind} {tool.name} -> {needed.name}", tool=tool.name, principal=decided_by
        )
        self._store.relations.decide(decided, audit)
        return decided

    def lift(self, name: str, other: str, lifted_by: str | None, kind: RelationKind | None = None) -> int:
        """Forget the verdicts on `name` -> `other` (of `kind`; None: of either): inference and learning decide
        again."""
        tool, needed = self._get(name), self._get(other)
        what = f"{kind} {tool.name} -> {needed.name}" if kind else f"{tool.name} -> {needed.name}"
        audit = AuditEntry("relation_lifted", what, tool=tool.name, principal=lifted_by)
        return self._store.relations.lift(tool.name, needed.name, audit, kind)

    def _found(self, name: str, other: str, kind: RelationKind | None) -> tuple[RelationKind, str | None]:
        """What kind of relation `name` -> `other` the registry has found (only `kind`, if given), and the
        parameter an inferred one fills."""
        if kind != "related":
            for edge in self._inferred().of(name):
                if edge.producer.lower() == other.lower():
                    return "requires", edge.parameter
        if kind != "related":
            for p in self._store.relations.proposals():
                if p.tool.lower() == name.lower() and p.other.lower() == other.lower():
                    return "requires", p.parameter
        for v in self._store.relations.verdicts():
            if v.tool.lower() == name.lower() and v.other.lower() == other.lower() and kind in (None, v.kind):
                return v.kind, v.parameter
        if kind != "requires" and any(
            r.tool.lower() == name.lower() and r.related.lower() == other.lower()
            for r in self._store.relations.learned()
        ):
            return "related", None
        raise InvalidToolError(
            f"no {_SOUGHT[kind]} from {name} to {other}: declare it in the tool's `requires` instead"
        )


def _learned(relation: LearnedRelation) -> ToolRelation:
    who = learner_label(relation.learner)
    return ToolRelation(
        other=relation.related,
        kind="related",
        source="usage",
        strength=relation.strength,
        learner=None if who == "your" else who,
        detail=f"{relation.support} of {relation.sessions} {who} sessions that called {relation.tool} called"
        f" {relation.related} next",
    )


def _source(verdict: RelationVerdict) -> RelationSource:
    return "inferred" if verdict.kind == "requires" else "usage"
