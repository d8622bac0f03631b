"""The `Store` protocol: durable tools and their vectors (`ToolStore`), with the tables beside them as sub-objects.
Only `store/` speaks SQL."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import numpy.typing as npt

from toolrag.errors import EditConflictError, StoreError
from toolrag.model import Tool, utc_now
from toolrag.store.jobs import JobTables
from toolrag.store.usage import UsageTables

if TYPE_CHECKING:
    from toolrag.store.asked import AskedBases
    from toolrag.store.groups import GroupReview, GroupTables
    from toolrag.store.relations import LearnedRelation, ProposedRelation, RelationTables, RelationVerdict
    from toolrag.store.reviews import ReviewTables
    from toolrag.store.switches import DisabledServer, UpstreamSwitches
    from toolrag.store.tables import AuditTrail, BackupTables, PinTables, VersionTables

Vector = npt.NDArray[np.float32]


GENERATIONS_LOGGED = 1000  # generation tokens kept (snapshot/ reuses an in-memory index at most this old)


@dataclass(frozen=True)
class IndexModel:
    """The embedding model an index was built with."""

    model_id: str
    dimension: int


@dataclass
class UpsertReport:
    """What an upsert did, by tool name."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)  # a text change waits for review; the live text keeps serving
    rejected: list[str] = field(default_factory=list)  # proposed the text an admin rejected: left out again

    @property
    def changed(self) -> int:
        return len(self.added) + len(self.updated)


@dataclass
class RegistryDump:
    """Everything a registry holds, for copying it to another store exactly (history and vectors included)."""

    model: IndexModel | None
    tools: list[Tool]  # current state of every tool, inactive ones too
    versions: list[Tool]  # every version of every tool, oldest first per tool
    vectors: dict[str, Vector]  # the index model's vectors by text hash
    groups: dict[str, str] = field(default_factory=dict)  # group name -> description
    # What operators decided, which a copy must keep: approved, waiting and rejected MCP and catalog texts (and
    # whether catalog text changes wait for review), upstreams switched
    # off, verdicts on relations, what was learned from usage, and the audit log (oldest first). The usage log is
    # not part of a dump.
    pins: list[Pin] = field(default_factory=list)
    text_reviews: list[TextReview] = field(default_factory=list)  # catalog text changes waiting, texts rejected
    text_review: bool = False  # whether text changes wait for review (the registry's setting)
    two_person_review: bool = False  # whether a change's proposer may not approve it (the same setting)
    group_reviews: list[GroupReview] = field(default_factory=list)  # group descriptions waiting, and rejected
    switches: list[DisabledServer] = field(default_factory=list)
    verdicts: list[RelationVerdict] = field(default_factory=list)
    learned: list[LearnedRelation] = field(default_factory=list)
    proposals: list[ProposedRelation] = field(default_factory=list)  # a chat model's, waiting for a verdict
    audit: list[AuditEntry] = field(default_factory=list)


NO_PIN = "<no pin>"  # what a sync that read no pin of a tool expects of it at its write (`PinTables.check_pending`)


@dataclass(frozen=True)
class Pin:
    """The approved content hash of a tool imported from an MCP server, and a changed version awaiting approval."""

    tool: str
    server: str
    approved_hash: str | None
    pending_hash: str | None = None
    pending: Tool | None = None
    findings: tuple[str, ...] = ()
    updated_at: datetime = field(default_factory=utc_now)
    rejected_hash: str | None = None  # upstream text an admin rejected: left out until lifted or changed

    @property
    def quarantined(self) -> bool:
        return self.pending_hash is not None


@dataclass(frozen=True)
class TextReview:
    """A catalog tool's text change (description, schemas, annotations) waiting for an admin while the registry's
    `text_review` setting is on, and the text an admin rejected (catalog/review.py): the MCP pins' counterpart for
    tools no upstream server owns."""

    tool: str
    pending_hash: str | None = None
    pending: dict[str, Any] | None = None  # the proposed values of `model.SOURCE_FIELDS`
    findings: tuple[str, ...] = ()
    proposed_by: str | None = None
    origin: str | None = None  # import, api, console, cli or python
    proposed_at: datetime = field(default_factory=utc_now)
    rejected_hash: str | None = None  # left out when proposed again, until lifted
    # Everyone whose proposed part still waits, `proposed_by` (the latest writer) too: a later write builds on what
    # waits, and under two-person review none of them may approve the whole.
    contributors: tuple[str, ...] = ()

    @property
    def waiting(self) -> bool:
        return self.pending_hash is not None

    @property
    def proposers(self) -> tuple[str, ...]:
        """Who proposed what waits (rows written before contributors were kept: their proposer)."""
        return self.contributors or ((self.proposed_by,) if self.proposed_by else ())

    @property
    def state(self) -> ReviewState:
        """What a write held for review builds on: the change waiting and the change rejected."""
        return self.pending_hash, self.rejected_hash


ReviewState = tuple[str | None, str | None]  # a tool's pending and rejected hashes; (None, None): no row


@dataclass(frozen=True)
class AuditEntry:
    """One line of the audit log: what happened to which tool, for whom, and why."""

    action: str
    detail: str
    tool: str | None = None
    server: str | None = None
    principal: str | None = None
    at: datetime = field(default_factory=utc_now)


class ToolStore(Protocol):
    """What the registry's snapshot (snapshot/) and search read and write: the current tools, their vectors and
    the generation. Every write method is one transaction: it happens whole or not at all."""

    def upsert(
        self,
        tools: Sequence[Tool],
        vectors: dict[str, Vector],
        model: IndexModel,
        audit: Sequence[AuditEntry] = (),
        expected: Mapping[str, int | None] | None = None,
        reviews: Sequence[TextReview] = (),
        reviewed: Mapping[str, str | None] | None = None,
        read: Mapping[str, ReviewState] | None = None,
        pinned: Mapping[str, str | None] | None = None,
    ) -> UpsertReport:
        """Insert or update tools, save the vectors (keyed by text hash) for `model`, append `audit` (who changed
        what) and write `reviews` (text changes held or decided, compare-and-set on the pending hashes `reviewed`,
        and on what waited as `read`: `ReviewTables.write`), atomically. `pinned`: the pending hash each named MCP
        tool's pin must still have (an MCP sync's or approval's write, planned from the pins: `PinTables.check_pending`,
        ApprovalConflictError and nothing written when one moved).

        A tool whose definition changed gets the next version; an unchanged tool is left alone. `expected`: the
        version each named tool was read at (None: it did not exist), compared and set in the same transaction as
        the write: EditConflictError, with nothing written, when one of them moved since (compare-and-set).
        """
        ...

    def save_vectors(self, model: IndexModel, vectors: dict[str, Vector], wait_seconds: float | None = None) -> None:
        """Keep vectors of any model (keyed by text hash) without changing which model the index uses. With
        `wait_seconds`, StoreError when the store's locks are not had within that time (the caller can go on)."""
        ...

    def switch_model(self, model: IndexModel, if_generation: int | None = None) -> bool:
        """Make `model` the index's model and drop other models' vectors, in one transaction. With
        `if_generation`, only if the registry is still at that generation (no tool was written since the caller
        embedded them all); returns whether it switched."""
        ...

    def get(self, name: str) -> Tool | None: ...

    def get_many(self, names: Iterable[str]) -> dict[str, Tool]:
        """The current version of each named tool there is (active or not), by name, read in one query: a name
        with no tool is left out."""
        ...

    def tools(self, include_inactive: bool = False) -> list[Tool]: ...

    def names(self) -> list[str]:
        """The name of every tool (active or not), read without the tools."""
        ...

    def changed_since(self, generation: int) -> list[Tool]:
        """Tools (active or not) written after `generation`."""
        ...

    def vectors(self, model_id: str, text_hashes: Iterable[str]) -> dict[str, Vector]: ...

    def index_model(self) -> IndexModel | None: ...

    def generation(self) -> int:
        """A counter that grows with every committed write: equal generations mean equal registries."""
        ...

    def generation_token(self, generation: int) -> str | None:
        """The random token drawn when this registry reached `generation` (None when it is too old to be logged):
        a copy of a registry file that diverged from it reaches the same generation with another token."""
        ...

    def close(self) -> None: ...


class PreviousNames(Protocol):
    """The sub-objects' methods under the names the store had before it had sub-objects (issue 34), for the
    callers not moved to them yet; each only passes the call on. Stores inherit these bodies."""

    trail: AuditTrail
    pinning: PinTables
    groups: GroupTables
    versions: VersionTables
    backup: BackupTables

    def history(self, name: str) -> list[Tool]:
        return self.versions.history(name)

    def group_descriptions(self) -> dict[str, str]:
        return self.groups.descriptions()

    def describe_groups(self, descriptions: Mapping[str, str | None], by: str | None = None) -> None:
        self.groups.describe(descriptions, by)

    def pins(self, server: str | None = None) -> list[Pin]:
        return self.pinning.read(server)

    def save_pins(
        self, pins: Sequence[Pin], audit: Sequence[AuditEntry] = (), expected: Mapping[str, str | None] | None = None
    ) -> None:
        self.pinning.save(pins, audit, expected)

    def audit(self, entries: Sequence[AuditEntry]) -> None:
        self.trail.append(entries)

    def audit_log(self, limit: int = 200, tool: str | None = None) -> list[AuditEntry]:
        return self.trail.newest(limit, tool)

    def dump(self) -> RegistryDump:
        return self.backup.dump()

    def restore(self, dump: RegistryDump) -> None:
        self.backup.restore(dump)


class Store(ToolStore, PreviousNames, Protocol):
    """Durable registry state: the tools (`ToolStore`) and the tables beside them, each a sub-object whose SQL is
    written once for both databases (store/tables.py, store/usage.py)."""

    usage: UsageTables  # the usage log: retrievals and calls, and the reports over them
    jobs: JobTables  # scheduled jobs' leases and reports
    trail: AuditTrail  # the audit log
    pinning: PinTables  # approved content of MCP tools, and quarantined changes
    groups: GroupTables  # what each group of tools is for
    versions: VersionTables  # every version of every tool
    backup: BackupTables  # the whole registry, dumped and restored
    relations: RelationTables  # relations learned from usage, and admins' verdicts on inferred and learned ones
    switches: UpstreamSwitches  # upstream MCP servers an operator switched off
    reviews: ReviewTables  # catalog tools' text changes waiting for review, and the `text_review` setting
    asked: AskedBases  # what the operator's chat model was last asked about each subject with


@dataclass(frozen=True)
class StoredRow:
    """What a store knows of a tool's current version when it decides whether an upsert is a new version."""

    content_hash: str
    version: int
    created_at: datetime
    updated_at: datetime | None = None


def check_expected(
    name: str,
    expected: Mapping[str, int | None] | None,
    current: StoredRow | None,
    last_change: Callable[[str], AuditEntry | None],
) -> None:
    """Raise EditConflictError when the tool is not at the version its writer read (`expected`); `last_change`
    reads the newest audit entry of the tool, in the writer's transaction, to say who moved it."""
    if expected is None or name not in expected:
        return
    version = None if current is None else current.version
    if version == expected[name]:
        return
    last = last_change(name)
    who = None if last is None else last.principal or (f"MCP server {last.server}" if last.server else None)
    raise EditConflictError(name, expected[name], version, who, None if current is None else current.updated_at)


def next_version(tool: Tool, current: StoredRow | None, report: UpsertReport) -> Tool | None:
    """The tool as its next version (numbered, timestamped), or None when its definition did not change;
    records the outcome in `report`."""
    if current is not None and current.content_hash == tool.content_hash:
        report.unchanged.append(tool.name)
        return None
    now = utc_now()
    (report.added if current is None else report.updated).append(tool.name)
    if current is None:
        return tool.model_copy(update={"version": 1, "created_at": now, "updated_at": now})
    return tool.model_copy(update={"version": current.version + 1, "created_at": current.created_at, "updated_at": now})


def migrations(dialect: str) -> list[tuple[int, str]]:
    """(number, sql) of every bundled migration of a database dialect, in order."""
    folder = resources.files("toolrag.store") / "migrations" / dialect
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text(encoding="utf-8")))
    return sorted(found)


def pending_migrations(dialect: str, current: int, described: str) -> list[tuple[int, str]]:
    """The bundled migrations a database at schema version `current` has not had yet, in order; StoreError when it
    is newer than this toolrag (`described`, e.g. "schema 'x' has version", starts the message)."""
    bundled = migrations(dialect)
    newest = bundled[-1][0]
    if current > newest:
        raise StoreError(f"{described} {current}, newer than this toolrag knows ({newest}): upgrade toolrag")
    return [(number, script) for number, script in bundled if number > current]


def sql_statements(script: str) -> list[str]:
    """The statements of a migration script: one per `;` at a line end, except inside a `$$`-quoted body (a
    PostgreSQL DO block)."""
    statements: list[str] = []
    current = ""
    for number, part in enumerate(script.split("$$")):
        if number % 2:  # between a pair of $$: one statement's body
            current += f"$${part}$$"
            continue
        first, *rest = part.split(";\n")
        current += first
        for piece in rest:
            statements.append(current)
            current = piece
    statements.append(current)
    return [statement for statement in statements if statement.strip()]


def checked_vector(vector: Vector, dimension: int) -> Vector:
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (dimension,):
        raise StoreError(f"vector of shape {array.shape} does not fit an index of dimension {dimension}")
    return array


def model_mismatch_message(recorded: IndexModel, requested: IndexModel) -> str:
    return (
        f"this registry was indexed with {recorded.model_id} ({recorded.dimension} dimensions), not "
        f"{requested.model_id} ({requested.dimension}): search with the model it was built with, or rebuild the "
        f"index for the new model with `toolrag index rebuild --embedder NAME` (or `ToolRegistry.rebuild()`)"
    )
