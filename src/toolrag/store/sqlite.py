"""The embedded default store: one SQLite file in WAL mode, stdlib `sqlite3`, numbered SQL migrations."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import numpy as np

from toolrag import tracing
from toolrag.errors import StoreError
from toolrag.model import Tool
from toolrag.store.base import (
    GENERATIONS_LOGGED,
    AuditEntry,
    IndexModel,
    PreviousNames,
    ReviewState,
    StoredRow,
    TextReview,
    UpsertReport,
    Vector,
    check_expected,
    checked_vector,
    next_version,
    pending_migrations,
    sql_statements,
)
from toolrag.store.dialect import SQLITE
from toolrag.store.tables import (
    Database,
    VectorAccess,
    check_or_set_model,
    read_model,
    tables_over,
    write_current,
    write_version,
)

_CHUNK = 500  # SQLite limits the number of bound parameters per statement


class SQLiteStore(PreviousNames):
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
            _create_private(self.path)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"cannot open registry {self.path}: {exc}") from exc

        database = Database(SQLITE, self._query, self._transaction, self._bump_generation, str(self.path))
        vectors = VectorAccess(self._consistent_read, self._write_model, self._insert_vectors, _as_array)
        tables = tables_over(database, vectors)
        self.usage, self.jobs, self.trail, self.pinning, self.groups, self.versions = tables[:6]
        self.backup, self.relations, self.switches, self.reviews, self.asked = tables[6:]

    def __repr__(self) -> str:
        return f"SQLiteStore({str(self.path)!r})"

    @contextmanager
    def _consistent_read(self) -> Iterator[sqlite3.Connection]:
        """One read transaction: another process's write cannot land between its reads."""
        with tracing.span("toolrag.store.query", **{"db.system": "sqlite"}), self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    yield self._db
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"registry {self.path}: {exc}") from exc

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
        for number, sql in pending_migrations("sqlite", current, f"{self.path} has schema version"):
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
        reviews: Sequence[TextReview] = (),
        reviewed: Mapping[str, str | None] | None = None,
        read: Mapping[str, ReviewState] | None = None,
        pinned: Mapping[str, str | None] | None = None,
    ) -> UpsertReport:
        report = UpsertReport()
        with self._transaction() as db:  # BEGIN IMMEDIATE: no other writer, of any process, until it ends
            check_or_set_model(db, model, self._write_model)
            generation = self._bump_generation(db)
            for tool in tools:
                self._upsert_one(db, tool, generation, report, expected)
            self._insert_vectors(db, model, vectors)
            self.reviews.write(db, reviews, reviewed, read)
            self.pinning.check_pending(db, pinned or {})
            self.trail.write(db, audit)
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
        check_expected(tool.name, expected, current, lambda name: self.trail.last_change(db, name))
        stored = next_version(tool, current, report)
        if stored is not None:
            write_current(db, SQLITE, stored, generation)
            write_version(db, SQLITE, stored)

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

    def names(self) -> list[str]:
        return [str(row[0]) for row in self._query("SELECT name FROM tools")]

    def changed_since(self, generation: int) -> list[Tool]:
        # Sorted here: asked to sort by name, SQLite walks every row in name order instead of using the seq index.
        rows = self._query("SELECT definition FROM tools WHERE seq > ?", (generation,))
        return sorted((Tool.from_store(str(row[0])) for row in rows), key=lambda tool: tool.name)

    def vectors(self, model_id: str, text_hashes: Iterable[str]) -> dict[str, Vector]:
        sql = "SELECT text_hash, vector FROM embeddings WHERE model = ? AND text_hash IN ({marks})"
        rows = self._query_in(sql, (model_id,), text_hashes)
        return {str(key): _as_array(blob) for key, blob in rows}

    def index_model(self) -> IndexModel | None:
        with self._lock:
            return read_model(self._db)

    def generation(self) -> int:
        return int(str(self._query("SELECT value FROM meta WHERE key = 'generation'")[0][0]))

    def generation_token(self, generation: int) -> str | None:
        rows = self._query("SELECT token FROM generation_log WHERE generation = ?", (generation,))
        return str(rows[0][0]) if rows else None

    def close(self) -> None:
        with self._lock:
            self._db.close()


def _create_private(path: Path) -> None:
    """Create a new registry file readable by its owner alone: it holds every tenant's tools and the usage log's
    requests. SQLite gives its WAL and shared-memory files the same mode."""
    if str(path) == ":memory:":  # SQLite's own name for a registry that lives in memory only
        return
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        pass  # an existing registry keeps the mode its owner gave it
    except OSError as exc:
        raise sqlite3.DatabaseError(str(exc)) from exc


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


def _as_array(blob: object) -> Vector:
    return np.frombuffer(blob, dtype=np.float32)  # type: ignore[call-overload, no-any-return]
