"""Relations between tools kept beside them: those learned from the usage log (search/learned.py computes them) and
an admin's verdicts on inferred and learned ones. Every write is one transaction with its audit entries, and moves
the registry's generation, so the next snapshot searches with what was written.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from toolrag.jsontext import only_text
from toolrag.model import utc_now
from toolrag.store.asked import AskedBases
from toolrag.store.base import AuditEntry

if TYPE_CHECKING:  # tables.py builds these tables
    from toolrag.store.tables import AuditTrail, Database

RelationKind = Literal["requires", "related"]
Verdict = Literal["confirmed", "rejected"]


@dataclass(frozen=True)
class LearnedRelation:
    """`related` was called next after `tool` in `support` of the `sessions` sessions of `learner` that called
    `tool` (`learner`: `tenant:NAME`, or `caller:ID` for a caller of no tenant); `strength` = support / sessions."""

    learner: str
    tool: str
    related: str
    strength: float
    support: int
    sessions: int
    learned_at: datetime = field(default_factory=utc_now)


@dataclass(frozen=True)
class RelationVerdict:
    """An admin's word on `tool` -> `other` of `kind`: confirmed (as strong as declared) or rejected (never inferred
    nor learned again until lifted). `parameter`: what a confirmed requirement fills, if it was inferred for one."""

    tool: str
    other: str
    kind: RelationKind
    verdict: Verdict
    parameter: str | None = None
    decided_by: str | None = None
    decided_at: datetime = field(default_factory=utc_now)


@dataclass(frozen=True)
class ProposedRelation:
    """A chat model's proposal that `tool` requires `other` (to fill `parameter`, if one), with its reason: unused
    until an admin confirms it or the registry accepts proposals (runtime/propose.py)."""

    tool: str
    other: str
    parameter: str | None
    reason: str
    model: str
    proposed_at: datetime = field(default_factory=utc_now)


class RelationTables:
    """The learned relations and the verdicts, over one store's database (store/tables.py `Database`)."""

    def __init__(self, database: Database, trail: AuditTrail, asked: AskedBases) -> None:
        self._db = database
        self._trail = trail
        self._asked = asked

    def learned(self, db: Any = None) -> list[LearnedRelation]:
        """Every learned relation, strongest first per tool (read in the caller's transaction `db`, if given)."""
        rows = self._db.read(
            "SELECT learner, tool, related, strength, support, sessions, learned_at FROM learned_relations"
            " ORDER BY learner, tool, strength DESC, related",
            db=db,
        )
        parse = self._db.dialect.parse_time
        return [
            LearnedRelation(str(le), str(t), str(r), float(s), int(su), int(se), parse(at))
            for le, t, r, s, su, se, at in rows
        ]

    def replace_learned(self, relations: Sequence[LearnedRelation], audit: Sequence[AuditEntry] = ()) -> None:
        """What a run learned in place of what the runs before it learned (a run reads the whole window)."""
        with self._db.transaction() as db:
            self.write_learned(db, relations)
            self._trail.write(db, audit)
            self._db.bump_generation(db)

    def write_learned(self, db: Any, relations: Sequence[LearnedRelation]) -> None:
        """`relations` in place of every learned one, in the caller's transaction (`db`)."""
        dialect = self._db.dialect
        db.execute("DELETE FROM learned_relations")
        for r in relations:
            db.execute(
                dialect.sql(
                    "INSERT INTO learned_relations(learner, tool, related, strength, support, sessions,"
                    " learned_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
                ),
                (r.learner, r.tool, r.related, r.strength, r.support, r.sessions, dialect.timestamp(r.learned_at)),
            )

    def verdicts(self, db: Any = None) -> list[RelationVerdict]:
        """Every verdict (read in the caller's transaction `db`, if given)."""
        rows = self._db.read(
            "SELECT tool, other, kind, verdict, parameter, decided_by, decided_at FROM relation_verdicts"
            " ORDER BY tool, other, kind",
            db=db,
        )
        parse = self._db.dialect.parse_time
        return [
            RelationVerdict(str(t), str(o), k, v, p and str(p), by and str(by), parse(at))
            for t, o, k, v, p, by, at in rows
        ]

    def decide(self, verdict: RelationVerdict, audit: AuditEntry) -> None:
        """Record a verdict (in place of an earlier one on the same pair and kind); a rejection also forgets what
        was learned for the pair."""
        with self._db.transaction() as db:
            self.write_verdict(db, verdict)
            if verdict.verdict == "rejected" and verdict.kind == "related":
                db.execute(
                    self._db.dialect.sql("DELETE FROM learned_relations WHERE tool = ? AND related = ?"),
                    (verdict.tool, verdict.other),
                )
            self._trail.write(db, [audit])
            self._db.bump_generation(db)

    def write_verdict(self, db: Any, verdict: RelationVerdict) -> None:
        """Record a verdict in place of an earlier one on the same pair and kind, in the caller's transaction."""
        dialect = self._db.dialect
        db.execute(
            dialect.sql(
                "INSERT INTO relation_verdicts(tool, other, kind, verdict, parameter, decided_by, decided_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(tool, other, kind) DO UPDATE SET"
                " verdict = excluded.verdict, parameter = excluded.parameter,"
                " decided_by = excluded.decided_by, decided_at = excluded.decided_at"
            ),
            (
                verdict.tool,
                verdict.other,
                verdict.kind,
                verdict.verdict,
                _storable(verdict.parameter),
                verdict.decided_by,
                dialect.timestamp(verdict.decided_at),
            ),
        )

    def lift(self, tool: str, other: str, audit: AuditEntry, kind: RelationKind | None = None) -> int:
        """Drop the verdicts on `tool` -> `other` (of `kind`; None: of either); how many there were."""
        sql = "DELETE FROM relation_verdicts WHERE tool = ? AND other = ?" + (" AND kind = ?" if kind else "")
        with self._db.transaction() as db:
            dropped = db.execute(self._db.dialect.sql(sql), (tool, other, *((kind,) if kind else ()))).rowcount
            if dropped:
                self._trail.write(db, [audit])
                self._db.bump_generation(db)
        return int(dropped)

    def proposals(self, db: Any = None) -> list[ProposedRelation]:
        """Every proposed requirement, by tool (read in the caller's transaction `db`, if given)."""
        rows = self._db.read(
            "SELECT tool, other, parameter, reason, model, proposed_at FROM proposed_relations ORDER BY tool, other",
            db=db,
        )
        parse = self._db.dialect.parse_time
        return [ProposedRelation(str(t), str(o), p and str(p), str(r), str(m), parse(at)) for t, o, p, r, m, at in rows]

    def record_proposals(
        self, asked: Sequence[tuple[str, str]], proposals: Sequence[ProposedRelation], audit: Sequence[AuditEntry]
    ) -> None:
        """For each (tool, basis) asked about: its proposals in place of the earlier ones, and the basis it was asked
        with, in one transaction with the audit entries."""
        dialect = self._db.dialect
        with self._db.transaction() as db:
            for tool, _ in asked:
                db.execute(dialect.sql("DELETE FROM proposed_relations WHERE tool = ?"), (tool,))
            self._asked.record("relations", asked, db)
            self.write_proposals(db, proposals)
            self._trail.write(db, audit)
            self._db.bump_generation(db)

    def write_proposals(self, db: Any, proposals: Sequence[ProposedRelation]) -> None:
        """Add `proposals` in the caller's transaction (`db`); a pair already proposed keeps its first proposal."""
        dialect = self._db.dialect
        for p in proposals:
            db.execute(
                dialect.sql(
                    "INSERT INTO proposed_relations(tool, other, parameter, reason, model, proposed_at)"
                    " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(tool, other) DO NOTHING"
                ),
                (
                    p.tool,
                    p.other,
                    _storable(p.parameter),
                    only_text(p.reason),
                    p.model,
                    dialect.timestamp(p.proposed_at),
                ),
            )


def _storable(parameter: str | None) -> str | None:
    """A parameter's name as a column holds it: a schema may name a property with a NUL, which PostgreSQL's text
    refuses (a model proposing it failed its whole run's write)."""
    return None if parameter is None else only_text(parameter)
