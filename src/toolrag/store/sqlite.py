"""The embedded default store: one SQLite file in WAL mode, stdlib `sqlite3`, numbered SQL migrations."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import numpy as np

from toolrag import tracing
from toolrag.errors import ModelMismatchError, StoreError
from toolrag.model import Tool, utc_now
from toolrag.store.base import (
    GENERATIONS_LOGGED,
    AuditEntry,
    IndexModel,
    Pin,
    RegistryDump,
    StoredRow,
    UpsertReport,
    Vector,
    check_expected,
    checked_vector,
    group_changes,
    migrations,
    model_mismatch_message,
    next_version,
    sql_statements,
)
from toolrag.store.usage import UsageTables

_CHUNK = 500  # SQLite limits the number of bound parameters per statement


class SQLiteStore:
    """A registry in one SQLite file. Safe to share between threads; several processes may open the same file."""

    def __init__(self, path: str | Path, create: bool = True) -> None:
        """`create=False` refuses a file that does not exist (a mistyped path), naming the registries beside it."""
        self.path = Path(path)
        if self.path.is_dir():
            raise StoreError(f"{self.path} is a directory, expected a database file")
        if not create and not self.path.exists():
            raise StoreError(f"no registry at {self.path}{_registries_near(self.path)}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        try:
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open registry {self.path}: {exc}") from exc

        self.usage = UsageTables(
            self._query,
            self._transaction,
            placeholder="?",
            timestamp=lambda moment: moment.isoformat(),
            parse_time=lambda value: datetime.fromisoformat(str(value)),
            day="substr(at, 1, 10)",
        )

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction. SQLite's own failures (a full disk, a lock held too long, I/O errors) become a
        StoreError that says what happened; the transaction is rolled back if SQLite has not already done so."""
        with tracing.span("toolrag.store.write", **{"db.system": "sqlite"}), self._lock:
            try:
                self._db.execute("BEGIN IMMEDIATE")
                try:
                    yield self._db
                except BaseException:
                    if self._db.in_transaction:  # SQLite rolls back by itself after some errors (SQLITE_FULL)
                        self._db.execute("ROLLBACK")
                    raise
                self._db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise StoreError(_write_failure(self.path, exc)) from exc

    def _migrate(self) -> None:
        current = self._db.execute("PRAGMA user_version").fetchone()[0]
        bundled = migrations("sqlite")
        newest = bundled[-1][0]
        if current > newest:
            raise StoreError(
                f"{self.path} has schema version {current}, newer than this toolrag knows ({newest}): upgrade toolrag"
            )
        for number, sql in bundled:
            if number > current:
                with self._transaction() as db:
                    for statement in sql_statements(sql):
                        db.execute(statement)
                    db.execute(f"PRAGMA user_version = {number}")

    # -- writes ---------------------------------------------------------------------------------------------------

    def upsert(
        self,
        tools: Sequence[Tool],
        vectors: dict[str, Vector],
        model: IndexModel,
        audit: Sequence[AuditEntry] = (),
        expected: Mapping[str, int | None] | None = None,
    ) -> UpsertReport:
        report = UpsertReport()
        with self._transaction() as db:  # BEGIN IMMEDIATE: no other writer, of any process, until it ends
            self._check_or_set_model(db, model)
            generation = self._bump_generation(db)
            for tool in tools:
                self._upsert_one(db, tool, generation, report, expected)
            self._insert_vectors(db, model, vectors)
            self._append_audit(db, audit)
        return report

    def save_vectors(self, model: IndexModel, vectors: dict[str, Vector], wait_seconds: float | None = None) -> None:
        with self._transaction() as db:  # SQLite's writers hold its lock for moments: the busy timeout bounds it
            self._insert_vectors(db, model, vectors)

    def switch_model(self, model: IndexModel, if_generation: int | None = None) -> bool:
        with self._transaction() as db:
            current = int(db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
            if if_generation is not None and current != if_generation:
                return False
            self._write_model(db, model)
            db.execute("DELETE FROM embeddings WHERE model != ?", (model.model_id,))
            generation = self._bump_generation(db)
            db.execute("UPDATE tools SET seq = ?", (generation,))  # every tool must be re-read with new vectors
        return True

    @staticmethod
    def _insert_vectors(db: sqlite3.Connection, model: IndexModel, vectors: dict[str, Vector]) -> None:
        db.executemany(
            "INSERT OR IGNORE INTO embeddings(model, text_hash, vector) VALUES (?, ?, ?)",
            [(model.model_id, key, checked_vector(vec, model.dimension).tobytes()) for key, vec in vectors.items()],
        )

    def _upsert_one(
        self,
        db: sqlite3.Connection,
        tool: Tool,
        generation: int,
        report: UpsertReport,
        expected: Mapping[str, int | None] | None,
    ) -> None:
        row = db.execute(
            "SELECT content_hash, version, created_at, updated_at FROM tools WHERE name = ?", (tool.name,)
        ).fetchone()
        current = (
            None
            if row is None
            else StoredRow(row[0], row[1], datetime.fromisoformat(row[2]), datetime.fromisoformat(row[3]))
        )
        check_expected(tool.name, expected, current, lambda name: self._last_change(db, name))
        stored = next_version(tool, current, report)
        if stored is not None:
            self._write_current(db, stored, generation)
            self._write_version(db, stored)

    @staticmethod
    def _last_change(db: sqlite3.Connection, name: str) -> AuditEntry | None:
        row = db.execute(
            "SELECT action, detail, tool, server, principal, at FROM audit_log WHERE tool = ? ORDER BY id DESC LIMIT 1",
            (name,),
        ).fetchone()
        if row is None:
            return None
        return AuditEntry(row[0], row[1], row[2], row[3], row[4], datetime.fromisoformat(row[5]))

    @staticmethod
    def _write_current(db: sqlite3.Connection, tool: Tool, generation: int) -> None:
        db.execute(
            "INSERT INTO tools(name, definition, content_hash, version, active, source, created_at, updated_at, seq)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET definition = excluded.definition,"
            " content_hash = excluded.content_hash, version = excluded.version, active = excluded.active,"
            " source = excluded.source, updated_at = excluded.updated_at, seq = excluded.seq",
            (
                tool.name,
                tool.model_dump_json(),
                tool.content_hash,
                tool.version,
                int(tool.active),
                tool.source,
                tool.created_at.isoformat(),
                tool.updated_at.isoformat(),
                generation,
            ),
        )

    @staticmethod
    def _write_version(db: sqlite3.Connection, tool: Tool) -> None:
        db.execute(
            "INSERT INTO tool_versions(name, version, definition, content_hash, created_at) VALUES (?, ?, ?, ?, ?)",
            (tool.name, tool.version, tool.model_dump_json(), tool.content_hash, tool.updated_at.isoformat()),
        )

    def _check_or_set_model(self, db: sqlite3.Connection, model: IndexModel) -> None:
        recorded = self._read_model(db)
        if recorded is None:
            self._write_model(db, model)
        elif recorded != model:
            raise ModelMismatchError(model_mismatch_message(recorded, model))

    @staticmethod
    def _write_model(db: sqlite3.Connection, model: IndexModel) -> None:
        db.executemany(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
            [("model_id", model.model_id), ("dimension", str(model.dimension))],
        )

    @staticmethod
    def _bump_generation(db: sqlite3.Connection) -> int:
        db.execute("UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'")
        generation = int(db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0])
        db.execute(
            "INSERT OR REPLACE INTO generation_log(generation, token) VALUES (?, lower(hex(randomblob(16))))",
            (generation,),
        )
        db.execute("DELETE FROM generation_log WHERE generation <= ?", (generation - GENERATIONS_LOGGED,))
        return generation

    # -- reads ----------------------------------------------------------------------------------------------------

    def _query(self, sql: str, params: Sequence[object] = ()) -> list[tuple[object, ...]]:
        with tracing.span("toolrag.store.query", **{"db.system": "sqlite"}), self._lock:
            try:
                return self._db.execute(sql, params).fetchall()
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"registry {self.path}: {exc}") from exc

    def _query_in(self, sql: str, params: Sequence[object], keys: Iterable[str]) -> list[tuple[object, ...]]:
        """The rows of `sql`, which ends in `IN ({marks})`, for every one of `keys` (after `params`): one statement
        up to _CHUNK keys, one per _CHUNK beyond (SQLite limits the parameters bound to a statement)."""
        unique = list(dict.fromkeys(keys))
        rows: list[tuple[object, ...]] = []
        for start in range(0, len(unique), _CHUNK):
            chunk = unique[start : start + _CHUNK]
            rows.extend(self._query(sql.format(marks=",".join("?" * len(chunk))), (*params, *chunk)))
        return rows

    def get(self, name: str) -> Tool | None:
        rows = self._query("SELECT definition FROM tools WHERE name = ?", (name,))
        return Tool.from_store(str(rows[0][0])) if rows else None

    def get_many(self, names: Iterable[str]) -> dict[str, Tool]:
        rows = self._query_in("SELECT name, definition FROM tools WHERE name IN ({marks})", (), names)
        return {str(name): Tool.from_store(str(definition)) for name, definition in rows}

    def tools(self, include_inactive: bool = False) -> list[Tool]:
        where = "" if include_inactive else " WHERE active = 1"
        rows = self._query(f"SELECT definition FROM tools{where} ORDER BY name")
        return [Tool.from_store(str(row[0])) for row in rows]

    def changed_since(self, generation: int) -> list[Tool]:
        # Sorted here: asked to sort by name, SQLite walks every row in name order instead of using the seq index.
        rows = self._query("SELECT definition FROM tools WHERE seq > ?", (generation,))
        return sorted((Tool.from_store(str(row[0])) for row in rows), key=lambda tool: tool.name)

    def history(self, name: str) -> list[Tool]:
        rows = self._query("SELECT definition FROM tool_versions WHERE name = ? ORDER BY version", (name,))
        return [Tool.from_store(str(row[0])) for row in rows]

    def vectors(self, model_id: str, text_hashes: Iterable[str]) -> dict[str, Vector]:
        sql = "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN ({marks})"
        rows = self._query_in(sql, (model_id,), text_hashes)
        return {str(key): np.frombuffer(blob, dtype=np.float32) for key, blob in rows}  # type: ignore[call-overload]

    def index_model(self) -> IndexModel | None:
        with self._lock:
            return self._read_model(self._db)

    @staticmethod
    def _read_model(db: sqlite3.Connection) -> IndexModel | None:
        rows = dict(db.execute("SELECT key, value FROM meta WHERE key IN ('model_id', 'dimension')").fetchall())
        if "model_id" not in rows:
            return None
        return IndexModel(rows["model_id"], int(rows["dimension"]))

    def generation(self) -> int:
        return int(str(self._query("SELECT value FROM meta WHERE key = 'generation'")[0][0]))

    def generation_token(self, generation: int) -> str | None:
        rows = self._query("SELECT token FROM generation_log WHERE generation = ?", (generation,))
        return str(rows[0][0]) if rows else None

    def group_descriptions(self) -> dict[str, str]:
        return {str(name): str(text) for name, text in self._query("SELECT name, description FROM tool_groups")}

    def describe_groups(self, descriptions: Mapping[str, str | None]) -> None:
        with self._transaction() as db:
            current = dict(db.execute("SELECT name, description FROM tool_groups").fetchall())
            written, forgotten = group_changes(current, descriptions)
            if not written and not forgotten:
                return
            now = utc_now().isoformat()
            db.executemany(
                "INSERT OR REPLACE INTO tool_groups(name, description, updated_at) VALUES (?, ?, ?)",
                [(name, text, now) for name, text in written.items()],
            )
            db.executemany("DELETE FROM tool_groups WHERE name = ?", [(name,) for name in forgotten])
            self._bump_generation(db)

    def pins(self, server: str | None = None) -> list[Pin]:
        where, params = (" WHERE server = ?", (server,)) if server is not None else ("", ())
        rows = self._query(
            f"SELECT tool, server, approved_hash, pending_hash, pending, findings, updated_at FROM pins{where}"
            " ORDER BY tool",
            params,
        )
        return [
            Pin(
                str(tool),
                str(srv),
                _text(approved),
                _text(pending_hash),
                None if pending is None else Tool.from_store(str(pending)),
                tuple(json.loads(str(findings))),
                datetime.fromisoformat(str(updated)),
            )
            for tool, srv, approved, pending_hash, pending, findings, updated in rows
        ]

    def save_pins(self, pins: Sequence[Pin], audit: Sequence[AuditEntry] = ()) -> None:
        with self._transaction() as db:
            db.executemany(
                "INSERT OR REPLACE INTO pins(tool, server, approved_hash, pending_hash, pending, findings, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        pin.tool,
                        pin.server,
                        pin.approved_hash,
                        pin.pending_hash,
                        pin.pending.model_dump_json() if pin.pending else None,
                        json.dumps(list(pin.findings)),
                        pin.updated_at.isoformat(),
                    )
                    for pin in pins
                ],
            )
            self._append_audit(db, audit)

    def audit(self, entries: Sequence[AuditEntry]) -> None:
        with self._transaction() as db:
            self._append_audit(db, entries)

    @staticmethod
    def _append_audit(db: sqlite3.Connection, entries: Sequence[AuditEntry]) -> None:
        db.executemany(
            "INSERT INTO audit_log(at, action, tool, server, principal, detail) VALUES (?, ?, ?, ?, ?, ?)",
            [(e.at.isoformat(), e.action, e.tool, e.server, e.principal, e.detail) for e in entries],
        )

    def audit_log(self, limit: int = 200, tool: str | None = None) -> list[AuditEntry]:
        where, params = (" WHERE tool = ?", (tool, limit)) if tool is not None else ("", (limit,))
        rows = self._query(
            f"SELECT action, detail, tool, server, principal, at FROM audit_log{where} ORDER BY id DESC LIMIT ?",
            params,
        )
        return [
            AuditEntry(str(a), str(d), _text(t), _text(sv), _text(p), datetime.fromisoformat(str(at)))
            for a, d, t, sv, p, at in rows
        ]

    def dump(self) -> RegistryDump:
        # One read transaction: another process's write cannot land between the tools and their versions.
        with self._lock:
            self._db.execute("BEGIN")
            try:
                model = self._read_model(self._db)
                tools = self.tools(include_inactive=True)
                versions = self._query("SELECT definition FROM tool_versions ORDER BY name, version")
                rows = (
                    []
                    if model is None
                    else self._query("SELECT text_hash, vector FROM embeddings WHERE model = ?", (model.model_id,))
                )
                groups = self.group_descriptions()
            finally:
                self._db.execute("COMMIT")
        return RegistryDump(
            model=model,
            tools=tools,
            versions=[Tool.from_store(str(row[0])) for row in versions],
            vectors={str(key): np.frombuffer(blob, dtype=np.float32) for key, blob in rows},  # type: ignore[call-overload]
            groups=groups,
        )

    def restore(self, dump: RegistryDump) -> None:
        with self._transaction() as db:
            if db.execute("SELECT count(*) FROM tool_versions").fetchone()[0]:
                raise StoreError(f"cannot restore into {self.path}: it already holds tools")
            generation = self._bump_generation(db)
            for tool in dump.tools:
                self._write_current(db, tool, generation)
            for version in dump.versions:
                self._write_version(db, version)
            if dump.model is not None:
                self._write_model(db, dump.model)
                self._insert_vectors(db, dump.model, dump.vectors)
            now = utc_now().isoformat()
            db.executemany(
                "INSERT INTO tool_groups(name, description, updated_at) VALUES (?, ?, ?)",
                [(name, text, now) for name, text in dump.groups.items()],
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _registries_near(path: Path) -> str:
    """A hint for a mistyped registry path: the registry files in the same folder."""
    folder = path.parent if str(path.parent) else Path(".")
    found = sorted(str(p.name if folder == Path(".") else p) for p in folder.glob("*.db") if p.is_file())[:8]
    if found:
        return f"; registries there: {', '.join(found)} (or create one with `toolrag import CATALOG --store PATH`)"
    return " (create one with `toolrag import CATALOG --store PATH`, or run `toolrag quickstart`)"


def _write_failure(path: Path, exc: sqlite3.DatabaseError) -> str:
    reason = str(exc)
    if "full" in reason:
        return f"cannot write registry {path}: the disk is full ({reason}); nothing was written: free space and retry"
    if "locked" in reason:
        return f"cannot write registry {path}: another process held it locked too long ({reason}); retry"
    return f"cannot write registry {path}: {reason}; nothing was written"


def _text(value: object) -> str | None:
    return None if value is None else str(value)
