"""Text changes of catalog tools waiting for review, and the registry setting that asks for them (`text_review` in
`meta`, so every process on the registry honours it). A held change is written in the transaction of the tool write
it came with (`Store.upsert`), compare-and-set on what waited when the write read it (so a proposal or a decision
made in between is not overwritten); approvals and rejections compare the pending hash the admin reviewed under the
same write lock (compare-and-set).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from toolrag.errors import ApprovalConflictError, ReviewConflictError
from toolrag.store.base import AuditEntry, ReviewState, TextReview

if TYPE_CHECKING:  # tables.py builds these tables
    from toolrag.store.tables import AuditTrail, Database

SETTING = "text_review"
ON, TWO_PERSON = "on", "two-person"  # its values besides "off"
LOWERING, LOWERED_BY = "text_review_lowering", "text_review_lowering_by"  # a request to lower two-person review


class ReviewTables:
    """The `text_reviews` rows and the `text_review` setting, over one store's database (store/tables.py)."""

    def __init__(self, database: Database, trail: AuditTrail) -> None:
        self._db = database
        self._trail = trail

    def required(self, db: Any = None) -> bool:
        """Whether text changes of existing tools wait for review (off unless an admin turned it on); read in the
        caller's transaction `db`, if given."""
        return self._setting(db) in (ON, TWO_PERSON)

    def two_person(self, db: Any = None) -> bool:
        """Whether whoever proposed a change may not approve it (review on, with a second admin's approval)."""
        return self._setting(db) == TWO_PERSON

    def require(self, on: bool, audit: AuditEntry, two_person: bool = False) -> bool:
        """Set the setting, audited with `audit`; whether it changed now. Under two-person review, lowering it takes
        two admins as approving does: the first one's request is kept (audited `setting asked`) and it changes when
        another admin asks for the same."""
        wanted = (TWO_PERSON if two_person else ON) if on else "off"
        with self._db.transaction() as db:
            if self._setting(db) == TWO_PERSON and wanted != TWO_PERSON:
                asked = self._read_meta(db, LOWERING)
                if asked != wanted or audit.principal is None or self._read_meta(db, LOWERED_BY) == audit.principal:
                    self._write_meta(db, {LOWERING: wanted, LOWERED_BY: audit.principal or ""})
                    detail = f"{audit.detail}: asked, another admin asking the same makes it so (two-person review)"
                    self._trail.write(db, [replace(audit, action="setting asked", detail=detail)])
                    return False
            self.write_setting(db, on, two_person)
            self._trail.write(db, [audit])
            # What search reads depends on it (relations learned from usage serve only while review is off).
            self._db.bump_generation(db)
            return True

    def write_setting(self, db: Any, on: bool, two_person: bool = False) -> None:
        """Set `required` (and `two_person`, which only review that is on has) in the caller's transaction (`db`);
        a request to lower it is forgotten."""
        value = (TWO_PERSON if two_person else ON) if on else "off"
        self._write_meta(db, {SETTING: value, LOWERING: "", LOWERED_BY: ""})

    def _setting(self, db: Any) -> str | None:
        return self._read_meta(db, SETTING)

    def _read_meta(self, db: Any, key: str) -> str | None:
        rows = self._db.read(self._db.dialect.sql("SELECT value FROM meta WHERE key = ?"), (key,), db)
        return str(rows[0][0]) if rows and rows[0][0] != "" else None

    def _write_meta(self, db: Any, values: Mapping[str, str]) -> None:
        upsert = "INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value"
        for key, value in values.items():
            db.execute(self._db.dialect.sql(upsert), (key, value))

    def read(self, tools: Sequence[str] | None = None, db: Any = None) -> list[TextReview]:
        """Every row (of the named tools), by tool name (read in the caller's transaction `db`, if given)."""
        as_text = self._db.dialect.as_text
        query = (
            f"SELECT tool, pending_hash, {as_text('pending')}, {as_text('findings')}, proposed_by, origin, proposed_at,"
            f" rejected_hash, {as_text('contributors')} FROM text_reviews ORDER BY tool"
        )
        wanted = None if tools is None else set(tools)
        rows = [self._row(row) for row in self._db.read(query, db=db)]
        return [row for row in rows if wanted is None or row.tool in wanted]

    def save(
        self,
        rows: Sequence[TextReview],
        audit: Sequence[AuditEntry],
        reviewed: Mapping[str, str | None],
        read: Mapping[str, ReviewState] | None = None,
    ) -> None:
        """Write rows (a rejection, a lifted one) with their audit entries in one transaction (`write`)."""
        with self._db.transaction() as db:
            self.write(db, rows, reviewed, read)
            self._trail.write(db, audit)

    def write(
        self,
        db: Any,
        rows: Sequence[TextReview],
        reviewed: Mapping[str, str | None] | None = None,
        read: Mapping[str, ReviewState] | None = None,
    ) -> None:
        """Insert or replace rows in the caller's transaction (`db`). `reviewed`: the pending hash each named tool
        was decided on, compared first: ApprovalConflictError, with nothing written, when another text waits now.
        `read`: what waited for each named tool when the rows were made from it (`TextReview.state`), compared
        too: ReviewConflictError, nothing written, when it moved since."""
        dialect = self._db.dialect
        self._check(db, reviewed or {})
        self._check_read(db, read or {})
        for row in rows:
            db.execute(
                dialect.sql(
                    "INSERT INTO text_reviews(tool, pending_hash, pending, findings, proposed_by, origin, proposed_at,"
                    " rejected_hash, contributors) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(tool) DO UPDATE SET"
                    " pending_hash = excluded.pending_hash, pending = excluded.pending,"
                    " findings = excluded.findings, proposed_by = excluded.proposed_by, origin = excluded.origin,"
                    " proposed_at = excluded.proposed_at, rejected_hash = excluded.rejected_hash,"
                    " contributors = excluded.contributors"
                ),
                (
                    row.tool,
                    row.pending_hash,
                    None if row.pending is None else json.dumps(row.pending, sort_keys=True, ensure_ascii=False),
                    json.dumps(list(row.findings)),
                    row.proposed_by,
                    row.origin,
                    dialect.timestamp(row.proposed_at),
                    row.rejected_hash,
                    json.dumps(list(row.contributors)),
                ),
            )

    def _check(self, db: Any, reviewed: Mapping[str, str | None]) -> None:
        query = self._db.dialect.sql("SELECT pending_hash FROM text_reviews WHERE tool = ?")
        for tool, wanted in sorted(reviewed.items()):
            found = db.execute(query, (tool,)).fetchone()
            now = None if found is None or found[0] is None else str(found[0])
            if now != wanted:
                waits = f"text {now[:12]} waits now" if now else "nothing waits now"
                raise ApprovalConflictError(
                    f"the text change of {tool!r} changed since it was reviewed (text {str(wanted)[:12]} was reviewed,"
                    f" {waits}): review it again; nothing was decided"
                )

    def _check_read(self, db: Any, read: Mapping[str, ReviewState]) -> None:
        query = self._db.dialect.sql("SELECT pending_hash, rejected_hash FROM text_reviews WHERE tool = ?")
        for tool, state in sorted(read.items()):
            found = db.execute(query, (tool,)).fetchone()
            now = (None, None) if found is None else tuple(None if h is None else str(h) for h in found)
            if now != state:
                raise ReviewConflictError(tool)

    def _row(self, row: tuple[Any, ...]) -> TextReview:
        tool, pending_hash, pending, findings, proposed_by, origin, proposed_at, rejected_hash, contributors = row
        return TextReview(
            str(tool),
            None if pending_hash is None else str(pending_hash),
            None if pending is None else json.loads(str(pending)),
            tuple(json.loads(str(findings))),
            None if proposed_by is None else str(proposed_by),
            None if origin is None else str(origin),
            self._db.dialect.parse_time(proposed_at),
            None if rejected_hash is None else str(rejected_hash),
            tuple(json.loads(str(contributors))),
        )
