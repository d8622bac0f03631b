"""The review desk: what waits for an admin (catalog/review.py holds it) and the admin's decisions on it.

`ToolRegistry.reviews` is one: whether the registry asks for review, what waits, approving (a new version, written
compare-and-set on the change the admin reviewed), rejecting (remembered by hash) and lifting a rejection.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from toolrag.catalog.edits import Decision, ToolWriter, retry_on_conflict
from toolrag.catalog.review import TextChange, login_name, named, person_of
from toolrag.errors import ApprovalConflictError, ToolNotFoundError
from toolrag.model import Tool
from toolrag.store.base import AuditEntry, TextReview
from toolrag.store.groups import GroupReview, changed_since, description_hash


class ReviewDesk:
    """Changes held for review and the decisions on them, over one registry's writer."""

    def __init__(self, writer: ToolWriter) -> None:
        self._writer = writer
        self._store = writer.store

    @property
    def required(self) -> bool:
        """Whether changes of what models read and are told to call wait for an admin (every process's setting)."""
        return self._store.reviews.required()

    @property
    def two_person(self) -> bool:
        """Whether a change's proposer may not approve it: a second admin does."""
        return self._store.reviews.two_person()

    def require(self, on: bool = True, by: str | None = None, two_person: bool = False) -> bool:
        """Turn review on (or off), audited with `by`: while on, a write that changes what a model reads of a tool
        or is told to call leaves the live tool serving and waits for `approve`. What waits keeps waiting when it is
        turned off. `two_person`: whoever proposed a change cannot approve it (over HTTP and in the console the
        names are the callers'; in the CLI and Python, the user running it); lowering it then takes two admins
        asking for the same (the first asking returns False, the setting unchanged). Returns whether it changed."""
        state = ("on, approved by another admin than the proposer" if two_person else "on") if on else "off"
        audit = AuditEntry("setting", f"text changes need review: {state}", None, None, named(by) or login_name())
        return self._store.reviews.require(on, audit, two_person)

    def waiting(self) -> list[TextChange]:
        """Every change waiting for review, by tool name, with its live tool: who proposed what, how, when, the
        findings."""
        rows = [row for row in self._store.reviews.read() if row.waiting]
        live = self._store.get_many(row.tool for row in rows)
        return [TextChange(row, live[row.tool]) for row in rows if row.tool in live]

    def change(self, name: str) -> TextChange:
        """The change of `name` waiting (its `diff()` against the live tool); ToolNotFoundError when none waits."""
        change = next((c for c in self.waiting() if c.review.tool == name), None)
        if change is None:
            raise ToolNotFoundError(f"no text change of {name!r} waits for review", name=name)
        return change

    def approve(self, name: str, text_hash: str | None = None, approver: str | None = None) -> Tool:
        """Make the waiting change of `name` live as a new version, audited with `approver`. `text_hash`: the
        change the approver reviewed (None: the one read here), compared in the write's transaction:
        ApprovalConflictError, nothing written, when another change waits now."""
        approver = named(approver) or login_name()

        def write() -> Tool:
            change = self.change(name)
            review = change.review
            self._check_approver(f"the text change of {name!r}", review.proposers, approver)
            if change.applied != (review.pending or {}):
                # What the diff shows was fitted to tenants narrowed since without review: what the hash names is
                # not what an admin saw (and the tenants may widen again before approval).
                raise ApprovalConflictError(
                    f"the change of {name!r} waiting names tenants the tool no longer serves (a write made without"
                    " review narrowed it): reject it, and propose again what should still change; nothing was decided"
                )
            reviewed = review.pending_hash if text_hash is None else text_hash
            _check_hash(name, reviewed, review)
            by = f" proposed by {', '.join(review.proposers)}" if review.proposers else ""
            despite = f" despite: {'; '.join(review.findings)}" if review.findings else ""
            detail = f"text change{by} through {review.origin} approved{despite}"
            decision = Decision(
                [TextReview(name, rejected_hash=review.rejected_hash)],
                {name: reviewed},
                [AuditEntry("text approved", detail, name, None, approver)],
                {name: review.state},
            )
            return self._writer.write_decision(change.live, dict(review.pending or {}), approver, decision)

        return retry_on_conflict(write)

    def reject(self, name: str, text_hash: str | None = None, rejecter: str | None = None) -> str:
        """Drop the waiting change of `name` (the live tool stays) and remember it: proposing the same again leaves
        it out, until `lift`. Returns the rejected change's hash; compare-and-set as approving, by the hash shown
        (of what the diff shows) or the stored change's: one that no longer fits the tool's tenants, which cannot be
        approved, is rejected by the hash its diff shows."""
        change = self.change(name)
        review = change.review
        reviewed = review.pending_hash if text_hash in (None, change.shown_hash) else text_hash
        _check_hash(name, reviewed, review)
        findings = "; ".join(review.findings)
        detail = f"text change through {review.origin} rejected" + (f": {findings}" if findings else "")
        self._store.reviews.save(
            [TextReview(name, rejected_hash=review.pending_hash)],
            [AuditEntry("text rejected", detail, name, None, named(rejecter) or login_name())],
            {name: reviewed},
        )
        return str(review.pending_hash)

    def lift(self, name: str, lifter: str | None = None) -> None:
        """Forget the rejected change of `name`: proposing it again holds it for review again. The row is written
        back compare-and-set on what was read, and read again when a proposal came in between."""
        by = named(lifter) or login_name()
        lifted = AuditEntry("text rejection lifted", "held for review again when proposed", name, None, by)

        def write() -> None:
            row = next((r for r in self._store.reviews.read([name]) if r.rejected_hash is not None), None)
            if row is None:
                raise ToolNotFoundError(f"no rejected text change of {name!r}", name=name)
            self._store.reviews.save([replace(row, rejected_hash=None)], [lifted], {}, {name: row.state})

        retry_on_conflict(write)

    def waiting_groups(self) -> list[GroupChange]:
        """Every group description waiting for review, by group name, with the live one."""
        live = self._store.groups.descriptions()
        return [GroupChange(review, live.get(review.name)) for review in self._store.groups.reviews() if review.pending]

    def approve_group(self, name: str, text_hash: str | None = None, approver: str | None = None) -> None:
        """Make the description waiting for group `name` live, compare-and-set on `text_hash` (the one the approver
        read; None: the one read here) as `approve` is. Text the poisoning checks find aimed at the model is refused
        (a write refuses it: it comes from a backup file, or an older scanner let it through)."""
        from toolrag.catalog.poisoning import scan  # the scanner's model loads only when a description is decided

        change = self._group_change(name)
        reviewed = change.text_hash if text_hash is None else text_hash
        if reviewed != change.text_hash:  # so the text scanned below is the one the transaction finds by this hash
            raise changed_since(name, reviewed, change.text_hash)
        if findings := scan(change.proposed):
            raise ApprovalConflictError(
                f"the description waiting for group {name!r} is written to the model ({'; '.join(findings)}):"
                " reject it; nothing was decided"
            )
        approver = named(approver) or login_name()

        def approvable(review: GroupReview) -> None:
            self._check_approver(f"the description of group {name!r}", review.proposers, approver)

        self._store.groups.decide(name, reviewed, True, approver, approvable)

    def reject_group(self, name: str, text_hash: str | None = None, rejecter: str | None = None) -> str:
        """Drop the description waiting for group `name` and remember it: proposing it again (a sync proposes its
        configured one each time) leaves it out, until `lift_group`. Returns its hash."""
        reviewed = self._group_change(name).text_hash if text_hash is None else text_hash
        self._store.groups.decide(name, reviewed, False, named(rejecter) or login_name(), lambda review: None)
        return reviewed

    def lift_group(self, name: str, lifter: str | None = None) -> None:
        """Forget the description rejected for group `name`: proposing it again holds it for review again."""
        audit = AuditEntry("group description rejection lifted", name, None, None, named(lifter) or login_name())
        self._store.groups.lift(name, audit)

    def _check_approver(self, what: str, proposers: tuple[str, ...], approver: str | None) -> None:
        """Under two-person review, a proposer's own approval is refused; so is an unnamed approver's, and any
        approval of a change nobody named proposed: either may be the proposer's."""
        if not self.two_person:
            return
        if not proposers:
            raise ApprovalConflictError(
                f"{what} was proposed without a name: under two-person review it cannot be told from the approver's"
                " own; reject it and propose it again under a name; nothing was decided"
            )
        if approver is None or approver in {person_of(proposer) for proposer in proposers}:
            raise ApprovalConflictError(
                f"{what} was proposed by {', '.join(proposers)}: under two-person review another admin approves it"
                " (rejecting it is anyone's); nothing was decided"
            )

    def _group_change(self, name: str) -> GroupChange:
        change = next((c for c in self.waiting_groups() if c.review.name == name), None)
        if change is None:
            raise ToolNotFoundError(f"no description of group {name!r} waits for review", name=name)
        return change


@dataclass(frozen=True)
class GroupChange:
    """A group's description waiting for review, beside the live one (None: the group has none, and a model reads
    a summary of its tools)."""

    review: GroupReview
    live: str | None

    @property
    def proposed(self) -> str:
        return self.review.pending or ""

    @property
    def text_hash(self) -> str:
        """What an admin's decision names: the hash of the description shown."""
        return description_hash(self.proposed)


def _check_hash(name: str, reviewed: str | None, review: TextReview) -> None:
    """A decision on another change than the one waiting is refused before anything is written (the write's
    transaction compares again, for a change that moves in between)."""
    if reviewed != review.pending_hash:
        raise ApprovalConflictError(
            f"the text change of {name!r} changed since it was reviewed (text {str(reviewed)[:12]} was reviewed,"
            f" text {str(review.pending_hash)[:12]} waits now): review it again; nothing was decided"
        )
