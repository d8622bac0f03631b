"""A registry in PostgreSQL with pgvector, shared by every process that points at it.

Tables live in their own schema (`toolrag` by default). Writers serialize on a lock of the schema's `meta` table,
so the generation counter orders every change and no update is lost; readers notice other processes' writes by the
counter. Creating or migrating a schema runs under a session-level advisory lock of that schema, so instances
starting together do not race; a schema already at the current version is opened without it.

Any role that may connect to the database (PUBLIC may, by default) can send a notification on any channel and take
any advisory lock, whatever it may read: so a notification is only a hint to read the generation again, a write
waits on a lock only the registry's own roles can take, and the advisory lock is waited for at most
MIGRATION_WAIT_SECONDS.

A per-model HNSW index on the vectors is opt-in (`vector_index=hnsw` in the URL): no search reads it (the in-memory
snapshot, and past `SearchConfig.ann_min_tools` search/ann.py's graph, answer every search), while growing it slows
every write; only `PostgresStore.nearest`, a query of the database itself, can use it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from toolrag import tracing
from toolrag.errors import MissingExtraError, StoreError
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
from toolrag.store.conninfo import failure_reason, parsed, redacted_url, split_parameters
from toolrag.store.dialect import POSTGRES
from toolrag.store.tables import (
    REPLACE_CURRENT,
    Database,
    VectorAccess,
    check_or_set_model,
    read_model,
    tables_over,
    write_current,
    write_version,
)

log = logging.getLogger("toolrag.store")

try:
    import psycopg
    from pgvector.psycopg import register_vector
    from psycopg import sql
except ImportError as exc:  # tests/test_cli.py runs a command with psycopg hidden
    raise MissingExtraError("the PostgreSQL store", "postgres") from exc

_MIGRATION_LOCK = 0x746F6F6D  # with a digest of the schema: held while the schema is created or migrated
_INDEX_BUILD_LOCK = 0x746F6F6C  # with a digest of the schema: held by the one connection building its vector index
MIGRATION_WAIT_SECONDS = 60.0  # an opener gives up (StoreError) when another holds the schema's migration this long
BULK_ROWS = 1000  # tools + vectors in one write from which COPY and one later index build beat row-by-row inserts
_NEAREST_EF_SEARCH = 200


class PostgresConnection:
    """A store's connection to its schema: opened when first needed (creating or migrating the schema, under an
    advisory lock every opener takes), dropped after a failure and opened again; database failures turned into
    StoreError."""

    def __init__(self, url: str, schema: str, create: bool) -> None:
        self.url = url
        self.schema = schema
        self.create = create
        self._lock = threading.RLock()
        self._conn: psycopg.Connection[Any] | None = None

    def open(self) -> psycopg.Connection[Any]:
        if self._conn is not None and not self._conn.closed:
            return self._conn
        parsed(self.url)  # one libpq cannot read is refused before its errors repeat it
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a host name no IDNA encodes
            raise StoreError(
                f"cannot connect to PostgreSQL at {redacted_url(self.url)}: {failure_reason(exc, self.url)}"
            ) from exc
        try:
            self._prepare(conn)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _prepare(self, conn: psycopg.Connection[Any]) -> None:
        if self._is_current(conn):  # the usual opening: nothing to create, so no lock another role could hold
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
            register_vector(conn)
            return
        lock = _schema_lock(_MIGRATION_LOCK, self.schema)
        conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(f"{MIGRATION_WAIT_SECONDS * 1000:.0f}ms")))
        try:
            conn.execute("SELECT pg_advisory_lock(%s, %s)", lock)
        except psycopg.errors.LockNotAvailable as exc:
            raise StoreError(
                f"schema {self.schema!r} at {redacted_url(self.url)} is being created or migrated by another connection"
                f" for over {MIGRATION_WAIT_SECONDS:.0f} s"
            ) from exc
        finally:
            conn.execute("RESET lock_timeout")
        try:
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as exc:
                raise StoreError(
                    f"PostgreSQL at {redacted_url(self.url)} has no usable pgvector extension"
                    f" ({failure_reason(exc, self.url)}): "
                    "install pgvector, or have an administrator run CREATE EXTENSION vector"
                ) from exc
            if not self.create:
                self._check_exists(conn)
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(self.schema)))
            conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
            register_vector(conn)
            self._migrate(conn)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s, %s)", lock)

    def _is_current(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether the schema holds a registry at the current version, with pgvector installed."""
        versions = sql.SQL("SELECT max(version) FROM {}.schema_version").format(sql.Identifier(self.schema))
        holds = "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'schema_version'"
        if conn.execute(holds, (self.schema,)).fetchone() is None:
            return False
        if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone() is None:
            return False
        row = conn.execute(versions).fetchone()
        current = int(row[0]) if row and row[0] is not None else 0
        return not pending_migrations("postgres", current, f"schema {self.schema!r} has version")

    def separate(self) -> psycopg.Connection[Any]:
        """A connection of its own for index builds, which must not hold the store's connection for minutes."""
        conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(self.schema)))
        return conn

    def _check_exists(self, conn: psycopg.Connection[Any]) -> None:
        registries = [
            row[0]
            for row in conn.execute(
                "SELECT table_schema FROM information_schema.tables WHERE table_name = 'schema_version'"
                " ORDER BY table_schema"
            ).fetchall()
        ]
        if self.schema not in registries:
            there = f"; registries in this database: {', '.join(registries)}" if registries else ""
            raise StoreError(f"no registry in schema {self.schema!r} at {redacted_url(self.url)}{there}")

    def _migrate(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = conn.execute("SELECT max(version) FROM schema_version").fetchone()
        current = int(row[0]) if row and row[0] is not None else 0
        for number, script in pending_migrations("postgres", current, f"schema {self.schema!r} has version"):
            with conn.transaction():
                for statement in sql_statements(script):
                    conn.execute(statement.encode())
                conn.execute("INSERT INTO schema_version(version) VALUES (%s)", (number,))

    @contextmanager
    def session(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection, with database failures turned into StoreError (and the connection dropped if broken)."""
        with self._lock:
            conn = self.open()
            try:
                yield conn
            except psycopg.OperationalError as exc:
                conn.close()
                self._conn = None
                reason = failure_reason(exc, self.url)
                raise StoreError(f"PostgreSQL at {redacted_url(self.url)} failed: {reason}") from exc
            except psycopg.Error as exc:
                raise StoreError(f"PostgreSQL at {redacted_url(self.url)}: {failure_reason(exc, self.url)}") from exc

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


class PostgresStore(PreviousNames):
    """A registry in a PostgreSQL database (with the pgvector extension). Thread-safe; reconnects after failures."""

    def __init__(self, url: str, schema: str = "toolrag", create: bool = True, vector_index: bool = False) -> None:
        """`create=False` refuses a schema that does not hold a registry yet (a mistyped name); `vector_index` keeps
        an HNSW index of the model's vectors for `nearest` (module docstring)."""
        self.url = url
        self.schema = schema
        self.vector_index = vector_index
        self._connection = PostgresConnection(url, schema, create)
        self._index_builder = IndexBuilder(self._connection.separate, schema, wanted=vector_index)
        self._generations = GenerationListener(self._connection.separate, _channel_of(schema))
        with self._connection.session() as conn:
            self._index_builder.rebuild_if_missing(conn)
        database = Database(POSTGRES, self._query, self._transaction, self._bump_generation, repr(self))
        vectors = VectorAccess(self._consistent_read, self._write_model, _insert_vectors, _as_array)
        tables = tables_over(database, vectors)
        self.usage, self.jobs, self.trail, self.pinning, self.groups, self.versions = tables[:6]
        self.backup, self.relations, self.switches, self.reviews, self.asked = tables[6:]

    @classmethod
    def from_url(cls, url: str, create: bool = True) -> PostgresStore:
        """A store from a connection URL; a `schema=NAME` query parameter picks the schema (default `toolrag`),
        `vector_index=hnsw` keeps an HNSW index of the vectors (default `none`)."""
        plain, found = split_parameters(url)
        index = found.get("vector_index", "none")
        if index not in ("none", "hnsw"):
            raise StoreError(f"vector_index={index} in the store URL: expected none or hnsw")
        return cls(plain, schema=found.get("schema", "toolrag"), create=create, vector_index=index == "hnsw")

    def __repr__(self) -> str:
        return f"PostgresStore({redacted_url(self.url)!r}, schema={self.schema!r})"

    @contextmanager
    def _consistent_read(self) -> Iterator[psycopg.Connection[Any]]:
        """One read transaction that sees one state of the registry, whatever other processes commit meanwhile."""
        with self._connection.session() as conn, conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield conn

    @contextmanager
    def _transaction(self, wait_seconds: float | None = None) -> Iterator[psycopg.Connection[Any]]:
        """A write transaction, serialized with every other writer of the database; with `wait_seconds`, one that
        gives up (StoreError) when its locks are not had in that time."""
        with tracing.span("toolrag.store.write", **{"db.system": "postgresql"}), self._connection.session() as conn:
            self._bumped: int | None = None
            with conn.transaction():
                if wait_seconds is not None:
                    conn.execute(
                        sql.SQL("SET LOCAL lock_timeout = {}").format(sql.Literal(f"{wait_seconds * 1000:.0f}ms"))
                    )
                # A table lock, not an advisory one: only roles that may write the registry can take it.
                conn.execute("LOCK TABLE meta IN SHARE ROW EXCLUSIVE MODE")
                yield conn
            bumped = self._bumped
            if bumped is not None:
                _announce(conn, self._generations.channel)
        if bumped is not None:  # committed: this process reads its own write at once, before the notification
            self._generations.saw(bumped)

    # -- writes -------------------------------------------------------------------------------------------------

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
        """One transaction. A bulk write (BULK_ROWS tools and vectors or more) goes through COPY and leaves the
        model's HNSW index, when the store keeps one, to be built once, after the writes stop (`IndexBuilder`). The
        versions `expected` are compared under the write lock every instance on the database takes, with the rows
        locked: two instances cannot both write over the version they read."""
        report = UpsertReport()
        with self._transaction() as db:
            check_or_set_model(db, model, self._write_model)
            generation = self._bump_generation(db)
            current = _current_rows(db, [t.name for t in tools])
            for tool in tools:
                check_expected(
                    tool.name, expected, current.get(tool.name), lambda name: self.trail.last_change(db, name)
                )
            stored = [s for tool in tools if (s := next_version(tool, current.get(tool.name), report)) is not None]
            bulk = len(stored) + len(vectors) >= BULK_ROWS
            if bulk:
                _copy_tools(db, stored, generation)
                self._copy_vectors(db, model, vectors)
            else:
                for tool in stored:
                    write_current(db, POSTGRES, tool, generation)
                    write_version(db, POSTGRES, tool)
                _insert_vectors(db, model, vectors)
            self.reviews.write(db, reviews, reviewed, read)
            self.pinning.check_pending(db, pinned or {})
            self.trail.write(db, audit)
        if bulk:
            self._index_builder.after_bulk_write(model)
        return report

    def save_vectors(self, model: IndexModel, vectors: dict[str, Vector], wait_seconds: float | None = None) -> None:
        bulk = len(vectors) >= BULK_ROWS
        with self._transaction(wait_seconds) as db:
            (self._copy_vectors if bulk else _insert_vectors)(db, model, vectors)
        if bulk:
            self._index_builder.after_bulk_write(model)

    def wait_for_vector_index(self, timeout: float = 600.0) -> bool:
        """Wait until no HNSW build is pending or running (after bulk writes); whether it finished in time."""
        return self._index_builder.wait(timeout)

    def _copy_vectors(self, db: psycopg.Connection[Any], model: IndexModel, vectors: dict[str, Vector]) -> None:
        """Binary COPY: formatting 896 floats as text made the text format 30x slower (measured)."""
        self._index_builder.stop_builds(db)
        db.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(_hnsw_name(model.model_id)))  # rebuilt once, later
        db.execute("CREATE TEMP TABLE staged_vectors (text_hash TEXT, vector vector) ON COMMIT DROP")
        with db.cursor().copy("COPY staged_vectors (text_hash, vector) FROM STDIN (FORMAT BINARY)") as copy:
            copy.set_types(["text", "vector"])
            for key, vector in vectors.items():
                copy.write_row((key, checked_vector(vector, model.dimension)))
        db.execute(
            "INSERT INTO embeddings(model, text_hash, vector) SELECT %s, text_hash, vector FROM staged_vectors"
            " ON CONFLICT DO NOTHING",
            (model.model_id,),
        )

    def switch_model(self, model: IndexModel, if_generation: int | None = None) -> bool:
        with self._transaction() as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
            if if_generation is not None and row is not None and int(row[0]) != if_generation:
                return False
            previous = read_model(db)
            self._index_builder.stop_builds(db)
            self._write_model(db, model)
            db.execute("DELETE FROM embeddings WHERE model <> %s", (model.model_id,))
            if previous is not None and previous.model_id != model.model_id:
                db.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(_hnsw_name(previous.model_id)))
            generation = self._bump_generation(db)
            db.execute("UPDATE tools SET seq = %s", (generation,))  # every tool must be re-read with new vectors
        return True

    def _write_model(self, db: psycopg.Connection[Any], model: IndexModel) -> None:
        with db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO meta(key, value) VALUES (%s, %s) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [("model_id", model.model_id), ("dimension", str(model.dimension))],
            )
        if self.vector_index:
            db.execute(hnsw_index(model))

    def _bump_generation(self, db: psycopg.Connection[Any]) -> int:
        row = db.execute(
            "UPDATE meta SET value = (value::bigint + 1)::text WHERE key = 'generation' RETURNING value"
        ).fetchone()
        assert row is not None  # the first migration inserts the counter
        generation = int(row[0])
        db.execute(
            "INSERT INTO generation_log(generation, token) VALUES (%s, md5(random()::text || clock_timestamp()::text))"
            " ON CONFLICT (generation) DO UPDATE SET token = excluded.token",
            (generation,),
        )
        db.execute("DELETE FROM generation_log WHERE generation <= %s", (generation - GENERATIONS_LOGGED,))
        self._bumped = generation  # announced once committed (`_announce`)
        return generation

    # -- reads --------------------------------------------------------------------------------------------------

    def _query(self, query: str | sql.Composed, params: Sequence[object] = ()) -> list[tuple[Any, ...]]:
        with tracing.span("toolrag.store.query", **{"db.system": "postgresql"}), self._connection.session() as conn:
            return conn.execute(query, params).fetchall()

    def get(self, name: str) -> Tool | None:
        rows = self._query("SELECT definition::text FROM tools WHERE name = %s", (name,))
        return Tool.from_store(rows[0][0]) if rows else None

    def get_many(self, names: Iterable[str]) -> dict[str, Tool]:
        rows = self._query("SELECT name, definition::text FROM tools WHERE name = ANY(%s)", (list(names),))
        return {name: Tool.from_store(definition) for name, definition in rows}

    def tools(self, include_inactive: bool = False) -> list[Tool]:
        where = "" if include_inactive else " WHERE active"
        rows = self._query(f"SELECT definition::text FROM tools{where} ORDER BY name")
        return [Tool.from_store(row[0]) for row in rows]

    def names(self) -> list[str]:
        return [str(row[0]) for row in self._query("SELECT name FROM tools")]

    def changed_since(self, generation: int) -> list[Tool]:
        rows = self._query("SELECT definition::text FROM tools WHERE seq > %s", (generation,))
        return sorted((Tool.from_store(row[0]) for row in rows), key=lambda tool: tool.name)

    def vectors(self, model_id: str, text_hashes: Iterable[str]) -> dict[str, Vector]:
        keys = list(dict.fromkeys(text_hashes))
        rows = self._query(
            "SELECT text_hash, vector FROM embeddings WHERE model = %s AND text_hash = ANY(%s)", (model_id, keys)
        )
        return {key: _as_array(vector) for key, vector in rows}

    def nearest(self, model_id: str, vector: Vector, limit: int) -> dict[str, float]:
        model = self.index_model()
        if model is None or model.model_id != model_id:
            return {}
        # Literals, not parameters: the planner can use a partial index only when it sees the model's name.
        query = sql.SQL(
            "SELECT text_hash, 1 - (vector::vector({dim}) <=> %s::vector({dim})) FROM embeddings"
            " WHERE model = {model} ORDER BY vector::vector({dim}) <=> %s::vector({dim}) LIMIT %s"
        ).format(dim=sql.Literal(model.dimension), model=sql.Literal(model_id))
        query_vector = checked_vector(vector, model.dimension)
        with self._connection.session() as conn, conn.transaction():
            conn.execute(sql.SQL("SET LOCAL hnsw.ef_search = {}").format(sql.Literal(max(_NEAREST_EF_SEARCH, limit))))
            rows = conn.execute(query, (query_vector, query_vector, limit)).fetchall()
        return {key: float(similarity) for key, similarity in rows}

    def index_model(self) -> IndexModel | None:
        with self._connection.session() as conn:
            return read_model(conn)

    def generation(self) -> int:
        announced = self._generations.current
        return announced if announced is not None else self._read_generation()

    def _read_generation(self) -> int:
        return int(self._query("SELECT value FROM meta WHERE key = 'generation'")[0][0])

    def generation_token(self, generation: int) -> str | None:
        rows = self._query("SELECT token FROM generation_log WHERE generation = %s", (generation,))
        return str(rows[0][0]) if rows else None

    def close(self) -> None:
        self._generations.stop()
        self._connection.close()


def _as_array(vector: Any) -> Vector:
    values = vector.to_numpy() if hasattr(vector, "to_numpy") else vector
    return np.asarray(values, dtype=np.float32)


def _hnsw_name(model_id: str) -> sql.Identifier:
    return sql.Identifier(_hnsw_index_name(model_id))


def _hnsw_index_name(model_id: str) -> str:
    return "embeddings_hnsw_" + hashlib.sha256(model_id.encode()).hexdigest()[:16]


def hnsw_index(model: IndexModel, concurrently: bool = False) -> sql.Composed:
    """The model's partial HNSW index on its vectors cast to its dimension."""
    return sql.SQL(
        "CREATE INDEX {} IF NOT EXISTS {} ON embeddings USING hnsw ((vector::vector({})) vector_cosine_ops)"
        " WHERE model = {}"
    ).format(
        sql.SQL("CONCURRENTLY" if concurrently else ""),
        _hnsw_name(model.model_id),
        sql.Literal(model.dimension),
        sql.Literal(model.model_id),
    )


def _index_is_valid(conn: psycopg.Connection[Any], schema: str, model: IndexModel) -> bool:
    """Whether the model's HNSW index exists and is complete (a cancelled concurrent build leaves it invalid)."""
    row = conn.execute(
        "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, _hnsw_index_name(model.model_id)),
    ).fetchone()
    return row is not None and bool(row[0])


def _schema_lock(kind: int, schema: str) -> tuple[int, int]:
    """An advisory lock (two keys) of one schema's registry: other schemas' registries do not wait on it."""
    return kind, int.from_bytes(hashlib.sha256(schema.encode()).digest()[:4], "big") & 0x7FFFFFFF


class IndexBuilder:
    """Builds a model's HNSW index once bulk writes have stopped for `quiet_seconds` (when the store keeps one:
    `wanted`; either way a write that drops the index stops other processes' builds first).

    Growing an HNSW index vector by vector made 100k tools take 262 s to write; a bulk write drops it instead and
    asks for a build, which waits for the writes to go quiet, so a 100k import builds it once, not once per batch.
    The build runs on its own connection, in a daemon thread, with CREATE INDEX CONCURRENTLY: writes go on while it
    runs (at 100k tools it takes minutes; under the write lock, as before, every writer waited 11-15 minutes). A
    bulk write or a model switch, which drop the index, cancel a running build first (`stop_builds`); it is built
    again once the writes stop. Searches never need the index (the in-memory snapshot answers them); `nearest` falls
    back to an exact scan until it is valid. A process that exits before the build, or whose build was cancelled,
    leaves it to the next store that opens the registry.
    """

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        schema: str,
        quiet_seconds: float = 2.0,
        wanted: bool = True,
    ) -> None:
        self.connect = connect
        self.wanted = wanted
        self.schema = schema
        self.lock = _schema_lock(_INDEX_BUILD_LOCK, schema)
        self.quiet_seconds = quiet_seconds
        self._wanted: IndexModel | None = None
        self._last_write = 0.0
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None
        self._busy = False

    def rebuild_if_missing(self, conn: psycopg.Connection[Any]) -> None:
        """A bulk import whose process ended before the index build leaves no index, and a build cancelled halfway
        an invalid one (and migration 10 dropped every index): the next opener that keeps one builds it."""
        model = read_model(conn)
        if self.wanted and model is not None and not _index_is_valid(conn, self.schema, model):
            self.after_bulk_write(model)

    def after_bulk_write(self, model: IndexModel) -> None:
        if not self.wanted:
            return
        with self._condition:
            self._wanted, self._last_write = model, time.monotonic()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="toolrag-hnsw-build", daemon=True)
                self._thread.start()
            self._condition.notify_all()

    def wait(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._condition:
            while self._wanted is not None or self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._condition.wait(min(left, 0.5))
        return True

    def _run(self) -> None:
        while True:
            with self._condition:
                while self._wanted is not None and time.monotonic() - self._last_write < self.quiet_seconds:
                    self._condition.wait(self.quiet_seconds)
                model, self._wanted = self._wanted, None
                if model is None:
                    self._thread = None
                    self._condition.notify_all()
                    return
                self._busy = True
            try:
                self._build(model)
            except psycopg.errors.QueryCanceled:
                log.info("the HNSW index build of %s gave way to a bulk write, which builds it again", model.model_id)
            except psycopg.Error as exc:
                log.warning("the HNSW index of %s was not built (the next bulk write retries): %s", model.model_id, exc)
            finally:
                with self._condition:
                    self._busy = False
                    self._condition.notify_all()

    def _build(self, model: IndexModel) -> None:
        started = time.monotonic()
        with self.connect() as conn:  # autocommit: a concurrent build cannot run inside a transaction
            conn.execute("SELECT pg_advisory_lock(%s, %s)", self.lock)
            try:
                if not _index_is_valid(conn, self.schema, model):
                    # Invalid: left by a cancelled build. IF NOT EXISTS would keep it as it is.
                    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(_hnsw_name(model.model_id)))
                conn.execute(hnsw_index(model, concurrently=True))
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s, %s)", self.lock)
        log.info("HNSW index of %s built in %.1f s", model.model_id, time.monotonic() - started)

    def stop_builds(self, db: psycopg.Connection[Any], timeout: float = 60.0) -> None:
        """In a write transaction about to drop the index: cancel any build of this registry's index, in any
        process, and hold the build lock until the transaction ends. It polls rather than waits for the lock: the
        build waits for this transaction to end, so a wait here could be a deadlock."""
        deadline = time.monotonic() + timeout
        while not db.execute("SELECT pg_try_advisory_xact_lock(%s, %s)", self.lock).fetchone()[0]:  # type: ignore[index]
            db.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted"
                " AND classid::bigint = %s AND objid::bigint = %s AND objsubid = 2 AND pid <> pg_backend_pid()",
                self.lock,
            )
            if time.monotonic() > deadline:
                raise StoreError(f"a vector index build did not give way within {timeout:.0f} s")
            time.sleep(0.05)


def _channel_of(schema: str) -> str:
    """The notification channel of a schema's registry: a digest, so two long schema names never share one."""
    return f"toolrag_generation_{hashlib.sha256(schema.encode()).hexdigest()[:24]}"


def _announce(conn: psycopg.Connection[Any], channel: str) -> None:
    """Tell other processes the generation moved, after the commit and at best: the notification queue is the
    server's, shared with every role (a stranger who fills it would fail every write sent inside one), and a
    listener reads the generation every second anyway."""
    try:
        conn.execute("SELECT pg_notify(%s, '')", (channel,))
    except psycopg.Error as error:  # the write is committed: never reported as failed (a broken connection
        # is closed, and the next call opens another)
        log.warning("other processes learn of this write within a second, not at once: %s", error)


class GenerationListener:
    """The registry's generation as its own connection reads it: on each notification a commit sends, and every
    second, so a search learns of other processes' writes without a round trip. While that connection is down
    (`value` None), the store reads the generation from the database as before."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], channel: str) -> None:
        self.channel = channel
        self.value: int | None = None
        self._connect = weakref.WeakMethod(connect)
        self._failing = False
        self._stopped = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def saw(self, generation: int) -> None:
        """A generation this process committed; starts listening on first use."""
        self._advance(generation)
        self._start()

    @property
    def current(self) -> int | None:
        self._start()
        return self.value

    def _start(self) -> None:
        with self._lock:
            if self._thread is None and not self._stopped.is_set():
                self._thread = threading.Thread(target=self._listen_forever, name="toolrag-generation", daemon=True)
                self._thread.start()

    def _advance(self, generation: int) -> None:
        with self._lock:
            if self.value is not None and generation > self.value:
                self.value = generation

    def _listen_forever(self) -> None:
        while not self._stopped.is_set():
            try:
                connect = self._connect()
                if connect is None:  # the store was dropped without being closed
                    return
                conn = connect()
                del connect  # a listening thread keeps no store alive
                with conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
                    row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                    with self._lock:  # listening before reading: no commit falls between the two
                        self.value = int(row[0]) if row is not None else None
                    # psycopg (3.3 on) keeps what arrives between two notifies() loops for the next one.
                    while not self._stopped.is_set() and self._connect() is not None:
                        # A notification, or a second: either way the generation is read from the database. Any
                        # role may notify on any channel (the payload is never read), and a notification may never
                        # come (the server's queue full): a write reaches every process within a second.
                        list(conn.notifies(timeout=1.0, stop_after=1))
                        row = conn.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()
                        if row is not None:
                            self._advance(int(row[0]))
            except Exception as error:  # any: a listener that died would leave its last generation standing
                (log.debug if self._failing else log.warning)(
                    "not listening for generation changes (%s): reading them from the database", error
                )
                self._failing = True
            else:
                self._failing = False
            with self._lock:
                self.value = None
            self._stopped.wait(2.0)

    def stop(self) -> None:
        self._stopped.set()
        with self._lock:
            self.value = None


def _copy_tools(db: psycopg.Connection[Any], tools: Sequence[Tool], generation: int) -> None:
    columns = "name, definition, content_hash, version, active, source, created_at, updated_at"
    db.execute(
        "CREATE TEMP TABLE staged_tools (name TEXT, definition JSON, content_hash TEXT, version INTEGER,"
        " active BOOLEAN, source TEXT, created_at TIMESTAMPTZ, updated_at TIMESTAMPTZ) ON COMMIT DROP"
    )
    with db.cursor().copy(f"COPY staged_tools ({columns}) FROM STDIN") as copy:
        for tool in tools:
            row = (tool.name, tool.model_dump_json(), tool.content_hash, tool.version, tool.active, tool.source)
            copy.write_row((*row, tool.created_at, tool.updated_at))
    db.execute(
        f"INSERT INTO tools({columns}, seq) SELECT {columns}, %s FROM staged_tools {REPLACE_CURRENT}",
        (generation,),
    )
    db.execute(
        "INSERT INTO tool_versions(name, version, definition, content_hash, created_at)"
        " SELECT name, version, definition, content_hash, updated_at FROM staged_tools"
    )


def _current_rows(db: psycopg.Connection[Any], names: list[str]) -> dict[str, StoredRow]:
    rows = db.execute(
        "SELECT name, content_hash, version, created_at, updated_at FROM tools WHERE name = ANY(%s) FOR UPDATE",
        (names,),
    ).fetchall()
    return {row[0]: StoredRow(row[1], row[2], row[3], row[4]) for row in rows}


def _insert_vectors(db: psycopg.Connection[Any], model: IndexModel, vectors: dict[str, Vector]) -> None:
    rows = [(model.model_id, key, checked_vector(vec, model.dimension)) for key, vec in vectors.items()]
    if rows:
        with db.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO embeddings(model, text_hash, vector) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING", rows
            )
