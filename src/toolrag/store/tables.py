"""The registry's tables beside the current tools and their vectors, each a sub-object of the store whose SQL is
written once (store/dialect.py spells what the databases spell differently), as `store.usage` is: the audit trail,
the pins of MCP tools, group descriptions, the version history, and a whole registry's dump and restore.

A store hands each one a `Database` (how to read, how to write in one transaction, how a write moves the generation);
every write method is one transaction, and the row writers that take `db` join the caller's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any

from toolrag.errors import ApprovalConflictError, ModelMismatchError, StoreError
from toolrag.jsontext import only_text
from toolrag.model import Tool, case_twin, utc_now
from toolrag.store.asked import AskedBases
from toolrag.store.base import (
    NO_PIN,
    AuditEntry,
    IndexModel,
    Pin,
    RegistryDump,
    Vector,
    model_mismatch_message,
)
from toolrag.store.dialect import Dialect
from toolrag.store.groups import GroupTables
from toolrag.store.jobs import JobTables
from toolrag.store.relations import RelationTables
from toolrag.store.reviews import ReviewTables
from toolrag.store.switches import UpstreamSwitches
from toolrag.store.usage import UsageTables

Rows = list[tuple[Any, ...]]

# A tool's current row, replaced by its new version (row by row and from PostgreSQL's bulk staging table alike).
REPLACE_CURRENT = (
    "ON CONFLICT(name) DO UPDATE SET definition = excluded.definition, content_hash = excluded.content_hash,"
    " version = excluded.version, active = excluded.active, source = excluded.source,"
    " updated_at = excluded.updated_at, seq = excluded.seq"
)


@dataclass(frozen=True)
class Database:
    """How a store's tables reach its database: `query(sql, params)` reads; `transaction()` yields an object with
    `execute(sql, params)` whose writes commit together; `bump_generation(db)` moves the registry's generation in
    that transaction. `label` names the registry in messages."""

    dialect: Dialect
    query: Callable[[str, Sequence[object]], Rows]
    transaction: Callable[[], AbstractContextManager[Any]]
    bump_generation: Callable[[Any], int]
    label: str

    def read(self, sql: str, params: Sequence[object] = (), db: Any = None) -> Rows:
        """The rows of a read: in the caller's transaction `db` when given (a dump's one consistent read of every
        table), else on its own."""
        return self.query(sql, params) if db is None else list(db.execute(sql, params).fetchall())


def write_current(db: Any, dialect: Dialect, tool: Tool, generation: int) -> None:
    """Insert or replace a tool's current row, written at `generation`."""
    db.execute(
        dialect.sql(
            "INSERT INTO tools(name, definition, content_hash, version, active, source, created_at, updated_at, seq)"
            f" VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) {REPLACE_CURRENT}"
        ),
        (
            tool.name,
            tool.model_dump_json(),
            tool.content_hash,
            tool.version,
            tool.active,
            tool.source,
            dialect.timestamp(tool.created_at),
            dialect.timestamp(tool.updated_at),
            generation,
        ),
    )


def write_version(db: Any, dialect: Dialect, tool: Tool) -> None:
    """Append a version to the tool's history."""
    db.execute(
        dialect.sql(
            "INSERT INTO tool_versions(name, version, definition, content_hash, created_at) VALUES (?, ?, ?, ?, ?)"
        ),
        (tool.name, tool.version, tool.model_dump_json(), tool.content_hash, dialect.timestamp(tool.updated_at)),
    )


def read_model(db: Any) -> IndexModel | None:
    """The model the index was built with, read in `db` (a connection or a transaction)."""
    rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('model_id', 'dimension')").fetchall())
    if "model_id" not in rows:
        return None
    return IndexModel(rows["model_id"], int(rows["dimension"]))


def check_or_set_model(db: Any, model: IndexModel, write_model: Callable[[Any, IndexModel], None]) -> None:
    """In a write transaction: record `model` as the index's model if it has none; ModelMismatchError if it has
    another."""
    recorded = read_model(db)
    if recorded is None:
        write_model(db, model)
    elif recorded != model:
        raise ModelMismatchError(model_mismatch_message(recorded, model))


class VersionTables:
    """Every version of every tool (written by the store's upserts with `write_version`)."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def history(self, name: str) -> list[Tool]:
        """The tool's versions, oldest first."""
        definition = self._db.dialect.as_text("definition")
        query = f"SELECT {definition} FROM tool_versions WHERE name = ? ORDER BY version"
        return [Tool.from_store(str(row[0])) for row in self._db.query(self._db.dialect.sql(query), (name,))]


class AuditTrail:
    """The append-only audit log: imports, changes, approvals and refusals."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def append(self, entries: Sequence[AuditEntry]) -> None:
        with self._db.transaction() as db:
            self.write(db, entries)

    def write(self, db: Any, entries: Sequence[AuditEntry]) -> None:
        """Append `entries` in the caller's transaction (`db`)."""
        dialect = self._db.dialect
        for entry in entries:  # names and principals come from callers and tokens: a NUL fails PostgreSQL's write
            texts = (entry.action, entry.tool, entry.server, entry.principal, entry.detail)
            db.execute(
                dialect.sql(
                    "INSERT INTO audit_log(at, action, tool, server, principal, detail) VALUES (?, ?, ?, ?, ?, ?)"
                ),
                (dialect.timestamp(entry.at), *(None if text is None else only_text(text) for text in texts)),
            )

    def read_all(self, db: Any) -> list[AuditEntry]:
        """Every entry, oldest first, read in the caller's transaction (`db`): for a dump."""
        query = "SELECT action, detail, tool, server, principal, at FROM audit_log ORDER BY id"
        return [self._entry(row) for row in db.execute(query).fetchall()]

    def has(self, action: str, server: str) -> bool:
        """Whether an entry of `action` about `server` was ever written."""
        query = "SELECT 1 FROM audit_log WHERE action = ? AND server = ? LIMIT 1"
        return bool(self._db.query(self._db.dialect.sql(query), (action, server)))

    def newest(self, limit: int = 200, tool: str | None = None) -> list[AuditEntry]:
        """The newest entries first, of one tool or of all."""
        where, params = (" WHERE tool = ?", (tool, limit)) if tool is not None else ("", (limit,))
        query = f"SELECT action, detail, tool, server, principal, at FROM audit_log{where} ORDER BY id DESC LIMIT ?"
        return [self._entry(row) for row in self._db.query(self._db.dialect.sql(query), params)]

    def last_change(self, db: Any, name: str) -> AuditEntry | None:
        """The tool's newest entry, read in the caller's transaction (`db`): who moved it (store/base.py
        `check_expected`)."""
        row = db.execute(
            self._db.dialect.sql(
                "SELECT action, detail, tool, server, principal, at FROM audit_log WHERE tool = ?"
                " ORDER BY id DESC LIMIT 1"
            ),
            (name,),
        ).fetchone()
        return None if row is None else self._entry(row)

    def _entry(self, row: tuple[Any, ...]) -> AuditEntry:
        action, detail, tool, server, principal, at = row
        return AuditEntry(
            str(action), str(detail), _text(tool), _text(server), _text(principal), self._db.dialect.parse_time(at)
        )


class PinTables:
    """The approved content of tools imported from MCP servers, and the changed versions awaiting approval."""

    def __init__(self, database: Database, trail: AuditTrail) -> None:
        self._db = database
        self._trail = trail

    def read(self, server: str | None = None, db: Any = None) -> list[Pin]:
        """Every pin (of one server), by tool name (read in the caller's transaction `db`, if given)."""
        where, params = (" WHERE server = ?", (server,)) if server is not None else ("", ())
        findings = self._db.dialect.as_text("findings")
        query = self._db.dialect.sql(
            f"SELECT tool, server, approved_hash, pending_hash, pending, {findings}, updated_at, rejected_hash"
            f" FROM pins{where} ORDER BY tool"
        )
        return [self._pin(row) for row in self._db.read(query, params, db)]

    def save(
        self, pins: Sequence[Pin], audit: Sequence[AuditEntry] = (), expected: Mapping[str, str | None] | None = None
    ) -> None:
        """Insert or replace pins and append audit entries, in one transaction. `expected`: the pending hash each
        named tool was read with (None: nothing pending), compared in the same transaction, under the write lock:
        ApprovalConflictError, with nothing written, when a sync changed one of them since (compare-and-set)."""
        with self._db.transaction() as db:
            if expected:
                self.check_pending(db, expected)
            self.write(db, pins)
            self._trail.write(db, audit)

    def write(self, db: Any, pins: Sequence[Pin]) -> None:
        """Insert or replace pins in the caller's transaction (`db`)."""
        dialect = self._db.dialect
        for pin in pins:
            db.execute(
                dialect.sql(
                    "INSERT INTO pins(tool, server, approved_hash, pending_hash, pending, findings, updated_at,"
                    " rejected_hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(tool) DO UPDATE SET"
                    " server = excluded.server, approved_hash = excluded.approved_hash,"
                    " pending_hash = excluded.pending_hash, pending = excluded.pending,"
                    " findings = excluded.findings, updated_at = excluded.updated_at,"
                    " rejected_hash = excluded.rejected_hash"
                ),
                (
                    pin.tool,
                    pin.server,
                    pin.approved_hash,
                    pin.pending_hash,
                    pin.pending.model_dump_json() if pin.pending else None,
                    json.dumps(list(pin.findings)),
                    dialect.timestamp(pin.updated_at),
                    pin.rejected_hash,
                ),
            )

    def check_pending(self, db: Any, expected: Mapping[str, str | None]) -> None:
        """In the caller's transaction `db`: ApprovalConflictError when a named tool's pin has another pending hash
        than `expected` (None: nothing pending, or no pin; NO_PIN: no pin at all, as a sync that read none)."""
        query = self._db.dialect.sql("SELECT pending_hash FROM pins WHERE tool = ?")
        for tool, wanted in sorted(expected.items()):
            row = db.execute(query, (tool,)).fetchone()
            if wanted == NO_PIN:
                if row is not None:
                    raise ApprovalConflictError(
                        f"{tool!r} was pinned since it was read (another sync): nothing written"
                    )
                continue
            now = None if row is None else _text(row[0])
            if now != wanted:
                waits = f"now waits with text {now[:12]}" if now else "has nothing waiting now"
                raise ApprovalConflictError(
                    f"{tool!r} changed since it was read (text {str(wanted)[:12]} was reviewed, it {waits}):"
                    " review it again; nothing was approved"
                )

    def _pin(self, row: tuple[Any, ...]) -> Pin:
        tool, server, approved, pending_hash, pending, findings, updated, rejected = row
        return Pin(
            str(tool),
            str(server),
            _text(approved),
            _text(pending_hash),
            None if pending is None else Tool.from_store(str(pending)),
            tuple(json.loads(str(findings))),
            self._db.dialect.parse_time(updated),
            _text(rejected),
        )


@dataclass(frozen=True)
class VectorAccess:
    """What a dump and a restore need of the index model and its vectors, which each database keeps its own way:
    a read transaction that sees one state of the registry, the model written and vectors inserted in a write
    transaction (`db`), and a stored vector as an array."""

    read_consistently: Callable[[], AbstractContextManager[Any]]
    write_model: Callable[[Any, IndexModel], None]
    insert_vectors: Callable[[Any, IndexModel, dict[str, Vector]], None]
    parse_vector: Callable[[Any], Vector]


@dataclass(frozen=True)
class OperatorRecords:
    """The tables of what operators decided, as a dump reads and a restore writes them, in its transaction."""

    pins: PinTables
    switches: UpstreamSwitches
    relations: RelationTables
    reviews: ReviewTables
    groups: GroupTables
    trail: AuditTrail

    def read(self, db: Any) -> dict[str, Any]:
        """RegistryDump's fields of these tables."""
        return {
            "pins": self.pins.read(db=db),
            "text_reviews": self.reviews.read(db=db),
            "text_review": self.reviews.required(db),
            "two_person_review": self.reviews.two_person(db),
            "group_reviews": self.groups.reviews(db),
            "switches": self.switches.disabled(db),
            "verdicts": self.relations.verdicts(db),
            "learned": self.relations.learned(db),
            "proposals": self.relations.proposals(db),
            "audit": self.trail.read_all(db),
        }

    def write(self, db: Any, dump: RegistryDump) -> None:
        self.pins.write(db, dump.pins)
        self.reviews.write(db, dump.text_reviews)
        # A store that asks for review keeps asking: a backup file does not switch it off.
        self.reviews.write_setting(
            db,
            dump.text_review or self.reviews.required(db),
            dump.two_person_review or self.reviews.two_person(db),
        )
        self.groups.write_reviews(db, dump.group_reviews)
        for switch in dump.switches:
            self.switches.write(db, switch)
        for verdict in dump.verdicts:
            self.relations.write_verdict(db, verdict)
        self.relations.write_learned(db, dump.learned)
        self.relations.write_proposals(db, dump.proposals)
        self.trail.write(db, dump.audit)


class BackupTables:
    """A whole registry (history and vectors included) read at once, and loaded into an empty store exactly."""

    def __init__(self, database: Database, vectors: VectorAccess, decisions: OperatorRecords) -> None:
        self._db = database
        self._vectors = vectors
        self._decisions = decisions

    def dump(self) -> RegistryDump:
        """One read transaction: another process's write cannot land between the tools and their versions."""
        dialect = self._db.dialect
        definition = dialect.as_text("definition")
        with self._vectors.read_consistently() as db:
            model = read_model(db)
            tools = db.execute(f"SELECT {definition} FROM tools ORDER BY name").fetchall()
            versions = db.execute(f"SELECT {definition} FROM tool_versions ORDER BY name, version").fetchall()
            vectors = (
                []
                if model is None
                else db.execute(
                    dialect.sql("SELECT text_hash, vector FROM embeddings WHERE model = ?"), (model.model_id,)
                ).fetchall()
            )
            groups = db.execute("SELECT name, description FROM tool_groups").fetchall()
            decided = self._decisions.read(db)
        return RegistryDump(
            model=model,
            tools=[Tool.from_store(str(row[0])) for row in tools],
            versions=[Tool.from_store(str(row[0])) for row in versions],
            vectors={str(key): self._vectors.parse_vector(vector) for key, vector in vectors},
            groups={str(name): str(text) for name, text in groups},
            **decided,
        )

    def restore(self, dump: RegistryDump) -> None:
        """Load a dump into this store, which must hold no tools, in one transaction."""
        dialect = self._db.dialect
        # Twins from a crafted backup, or a store older than that rule, left one of them unreachable by changes.
        if twins := case_twin(tool.name for tool in dump.tools):
            raise StoreError(
                f"cannot restore into {self._db.label}: the tools {twins[0]!r} and {twins[1]!r} differ only in case;"
                " rename one in the source first"
            )
        with self._db.transaction() as db:
            if db.execute("SELECT count(*) FROM tool_versions").fetchone()[0]:
                raise StoreError(f"cannot restore into {self._db.label}: it already holds tools")
            generation = self._db.bump_generation(db)
            for tool in dump.tools:
                write_current(db, dialect, tool, generation)
            for version in dump.versions:
                write_version(db, dialect, version)
            if dump.model is not None:
                self._vectors.write_model(db, dump.model)
                self._vectors.insert_vectors(db, dump.model, dump.vectors)
            now = dialect.timestamp(utc_now())
            for name, text in dump.groups.items():
                db.execute(
                    dialect.sql("INSERT INTO tool_groups(name, description, updated_at) VALUES (?, ?, ?)"),
                    (name, text, now),
                )
            self._decisions.write(db, dump)


def tables_over(
    database: Database, vectors: VectorAccess
) -> tuple[
    UsageTables,
    JobTables,
    AuditTrail,
    PinTables,
    GroupTables,
    VersionTables,
    BackupTables,
    RelationTables,
    UpstreamSwitches,
    ReviewTables,
    AskedBases,
]:
    """A store's sub-objects, over its database: `store.usage`, `.jobs`, `.trail`, `.pinning`, `.groups`,
    `.versions`, `.backup`, `.relations`, `.switches`, `.reviews` and `.asked`, in that order."""
    trail = AuditTrail(database)
    asked = AskedBases(database)
    pins, relations, switches, reviews = (
        PinTables(database, trail),
        RelationTables(database, trail, asked),
        UpstreamSwitches(database, trail),
        ReviewTables(database, trail),
    )
    groups = GroupTables(database, trail, reviews)
    return (
        UsageTables(database.query, database.transaction, database.dialect),
        JobTables(database),
        trail,
        pins,
        groups,
        VersionTables(database),
        BackupTables(database, vectors, OperatorRecords(pins, switches, relations, reviews, groups, trail)),
        relations,
        switches,
        reviews,
        asked,
    )


def _text(value: object) -> str | None:
    return None if value is None else str(value)
