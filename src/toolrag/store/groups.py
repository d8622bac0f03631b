"""What each described group of tools (an MCP server, a category) is for, and the descriptions waiting for review.

A model reads a group's description as what its tools are for (deferred loading's namespaces), and search ranks
groups by it: while the registry's `text_review` setting is on, a new description waits in `group_reviews`
(migration 18) for an admin, as a tool's text does in `text_reviews`, and the live one keeps serving. Removing a
description is not held: the model then reads a summary of the group's tools' own (reviewed) texts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from toolrag.errors import ApprovalConflictError, ToolNotFoundError
from toolrag.model import utc_now
from toolrag.store.base import AuditEntry

if TYPE_CHECKING:  # tables.py builds these tables
    from toolrag.store.reviews import ReviewTables
    from toolrag.store.tables import AuditTrail, Database


def description_hash(text: str) -> str:
    """What an admin's decision on a waiting description names (compare-and-set)."""
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class GroupReview:
    """A group's description waiting for an admin, and the one an admin rejected (left out when proposed again,
    until lifted)."""

    name: str
    pending: str | None = None
    proposed_by: str | None = None
    origin: str | None = None  # import, cli or python
    proposed_at: datetime = field(default_factory=utc_now)
    rejected_hash: str | None = None

    @property
    def pending_hash(self) -> str | None:
        return None if self.pending is None else description_hash(self.pending)

    @property
    def proposers(self) -> tuple[str, ...]:
        """Who proposed what waits, as `TextReview.proposers` says it of a tool's change (a description is replaced
        whole, so its one proposer)."""
        name = (self.proposed_by or "").strip()
        return (name,) if name else ()


@dataclass
class GroupWrite:
    """What a write of group descriptions did, by group name."""

    described: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # waits for review; the live description keeps serving
    rejected: list[str] = field(default_factory=list)  # the description an admin rejected: left out again


class GroupTables:
    """`tool_groups` (the live descriptions) and `group_reviews` (what waits, what was rejected)."""

    def __init__(self, database: Database, trail: AuditTrail, reviews: ReviewTables) -> None:
        self._db = database
        self._trail = trail
        self._reviews = reviews  # whether the registry asks for review

    def descriptions(self) -> dict[str, str]:
        return {str(name): str(text) for name, text in self._db.query("SELECT name, description FROM tool_groups", ())}

    def reviews(self, db: Any = None) -> list[GroupReview]:
        """Every `group_reviews` row, by group name (read in the caller's transaction `db`, if given)."""
        query = "SELECT name, pending, proposed_by, origin, proposed_at, rejected_hash FROM group_reviews ORDER BY name"
        return [self._review(row) for row in self._db.read(query, db=db)]

    def describe(
        self, descriptions: Mapping[str, str | None], by: str | None = None, origin: str = "python"
    ) -> GroupWrite:
        """Set (or, with None, remove) group descriptions, each change audited with `by`. While review is on (read
        in this write's transaction) a new description waits instead; a removal goes live."""
        report = GroupWrite()
        with self._db.transaction() as db:
            current = dict(db.execute("SELECT name, description FROM tool_groups").fetchall())
            written, report.removed = group_changes(current, descriptions)
            held = self._reviews.required(db)
            self._write_live(db, {} if held else written, report.removed)
            if held:
                reviews = {review.name: review for review in self.reviews(db)}
                audit = [
                    self._hold(db, name, text, reviews.get(name), by, origin, report) for name, text in written.items()
                ]
            else:
                audit = [_described(name, text, by) for name, text in written.items()]
                report.described = list(written)
            audit += [AuditEntry("group description removed", name, None, None, by) for name in report.removed]
            self._trail.write(db, [entry for entry in audit if entry is not None])
            if report.described or report.removed:
                self._db.bump_generation(db)
        return report

    def decide(
        self, name: str, reviewed: str, approved: bool, by: str | None, check: Callable[[GroupReview], None]
    ) -> None:
        """Make the waiting description of `name` live (`approved`) or drop it and remember it as rejected, audited
        with `by`; compare-and-set on the hash the admin `reviewed`: ApprovalConflictError, nothing written, when
        another description waits now. `check` may refuse the row found, in the same transaction."""
        with self._db.transaction() as db:
            review = next((r for r in self.reviews(db) if r.name == name and r.pending is not None), None)
            if review is None or review.pending is None:
                raise ToolNotFoundError(f"no description of group {name!r} waits for review", name=name)
            if review.pending_hash != reviewed:
                raise changed_since(name, reviewed, str(review.pending_hash))
            check(review)
            rejected = review.rejected_hash if approved else review.pending_hash
            self._save(db, GroupReview(name, rejected_hash=rejected))
            if approved:
                self._write_live(db, {name: review.pending}, [])
                self._db.bump_generation(db)
            proposer = f"proposed by {review.proposed_by or 'an unnamed user'} through {review.origin}"
            action = "group description approved" if approved else "group description rejected"
            self._trail.write(db, [AuditEntry(action, _decided(review, proposer), None, None, by)])

    def lift(self, name: str, audit: AuditEntry) -> None:
        """Forget the description rejected for `name`: proposing it again holds it for review again."""
        with self._db.transaction() as db:
            review = next((r for r in self.reviews(db) if r.name == name and r.rejected_hash is not None), None)
            if review is None:
                raise ToolNotFoundError(f"no rejected description of group {name!r}", name=name)
            self._save(db, GroupReview(name, review.pending, review.proposed_by, review.origin, review.proposed_at))
            self._trail.write(db, [audit])

    def write_reviews(self, db: Any, reviews: Sequence[GroupReview]) -> None:
        """Rows of a restored dump, in its transaction (`db`)."""
        for review in reviews:
            self._save(db, review)

    def _hold(
        self,
        db: Any,
        name: str,
        text: str,
        review: GroupReview | None,
        by: str | None,
        origin: str,
        report: GroupWrite,
    ) -> AuditEntry | None:
        proposed = description_hash(text)
        if review is not None and proposed == review.rejected_hash:
            report.rejected.append(name)
            return None
        report.held.append(name)
        if review is not None and proposed == review.pending_hash:
            return None  # proposing what waits changes nothing (a sync proposes its configured text each time)
        rejected = None if review is None else review.rejected_hash
        self._save(db, GroupReview(name, text, by, origin, utc_now(), rejected))
        replaced = (
            f"replaces the description {review.proposed_by or 'an unnamed user'} proposed"
            if review is not None and review.pending is not None
            else ""
        )
        held = GroupReview(name, text)
        return AuditEntry("group description held", _decided(held, replaced), None, None, by)

    def _write_live(self, db: Any, written: Mapping[str, str], removed: Sequence[str]) -> None:
        dialect = self._db.dialect
        now = dialect.timestamp(utc_now())
        for name, text in written.items():
            db.execute(
                dialect.sql(
                    "INSERT INTO tool_groups(name, description, updated_at) VALUES (?, ?, ?) ON CONFLICT(name)"
                    " DO UPDATE SET description = excluded.description, updated_at = excluded.updated_at"
                ),
                (name, text, now),
            )
        for name in removed:
            db.execute(dialect.sql("DELETE FROM tool_groups WHERE name = ?"), (name,))

    def _save(self, db: Any, review: GroupReview) -> None:
        """Write `review` in place of the group's row; a row neither waiting nor rejected is deleted."""
        dialect = self._db.dialect
        db.execute(dialect.sql("DELETE FROM group_reviews WHERE name = ?"), (review.name,))
        if review.pending is None and review.rejected_hash is None:
            return
        db.execute(
            dialect.sql(
                "INSERT INTO group_reviews(name, pending, proposed_by, origin, proposed_at, rejected_hash)"
                " VALUES (?, ?, ?, ?, ?, ?)"
            ),
            (
                review.name,
                review.pending,
                review.proposed_by,
                review.origin,
                dialect.timestamp(review.proposed_at),
                review.rejected_hash,
            ),
        )

    def _review(self, row: tuple[Any, ...]) -> GroupReview:
        name, pending, proposed_by, origin, proposed_at, rejected_hash = row
        return GroupReview(
            str(name),
            _text(pending),
            _text(proposed_by),
            _text(origin),
            self._db.dialect.parse_time(proposed_at),
            _text(rejected_hash),
        )


def changed_since(name: str, reviewed: str, waiting: str) -> ApprovalConflictError:
    return ApprovalConflictError(
        f"the description of group {name!r} changed since it was reviewed (description {reviewed[:12]} was"
        f" reviewed, {waiting[:12]} waits now): review it again; nothing was decided"
    )


def group_changes(current: Mapping[str, str], wanted: Mapping[str, str | None]) -> tuple[dict[str, str], list[str]]:
    """The descriptions to write and the groups to forget, so that a store holding `current` holds `wanted`."""
    written = {name: text for name, text in wanted.items() if text is not None and current.get(name) != text}
    forgotten = [name for name, text in wanted.items() if text is None and name in current]
    return written, forgotten


def _described(name: str, text: str, by: str | None) -> AuditEntry:
    return AuditEntry("group described", f"{name}: {text}", None, None, by)


def _decided(review: GroupReview, note: str) -> str:
    """An audit row's detail of a waiting description: the whole text (at most MAX_GROUP_DESCRIPTION_CHARS) and its
    hash, what an admin's decision names."""
    return f"{review.name}: {review.pending} (description {review.pending_hash}{'; ' + note if note else ''})"


def _text(value: object) -> str | None:
    return None if value is None else str(value)
