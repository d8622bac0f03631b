"""A registry looked at without being opened as a store (opening one creates or migrates it): read-only, for
`toolrag doctor`."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from toolrag.errors import StoreError
from toolrag.store.conninfo import failure_reason, parsed, redacted_url, split_parameters


@dataclass
class FoundRegistry:
    dialect: Literal["sqlite", "postgres"]
    version: int  # of its schema: the number of the last migration applied
    tools: int
    active: int
    model_id: str | None  # what its vectors were made with (None before the first import)


def split_schema(url: str) -> tuple[str, str]:
    """The connection URL without toolrag's parameters, and the schema it names (default `toolrag`)."""
    plain, found = split_parameters(url)
    return plain, found.get("schema", "toolrag")


def inspect_sqlite(path: Path) -> FoundRegistry | None:
    """What the SQLite file holds, opened read-only; None when there is no registry there yet."""
    if not path.exists():
        return None
    if path.is_dir():
        raise StoreError(f"{path} is a directory, expected a database file")
    try:
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version == 0:
                return None  # an empty file: the first command that writes makes it a registry
            tools, active = db.execute("SELECT count(*), coalesce(sum(active), 0) FROM tools").fetchone()
            model = db.execute("SELECT value FROM meta WHERE key = 'model_id'").fetchone()
    except sqlite3.Error as exc:
        raise StoreError(f"cannot read {path}: {exc}") from None
    return FoundRegistry("sqlite", version, int(tools), int(active), model[0] if model else None)


def inspect_postgres(url: str) -> FoundRegistry | None:
    """What the registry in the URL's schema holds, read without creating anything; None when there is none yet.
    ImportError without the `postgres` extra."""
    import psycopg

    plain, schema = split_schema(url)
    parsed(plain)  # one libpq cannot read is refused before its errors repeat it
    try:
        with psycopg.connect(plain, autocommit=True, connect_timeout=10) as conn:
            return _read_postgres_registry(conn, schema)
    except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a host name no IDNA encodes
        raise StoreError(f"cannot read the registry at {redacted_url(plain)}: {failure_reason(exc, plain)}") from None


def _read_postgres_registry(conn: Any, schema: str) -> FoundRegistry | None:
    from psycopg import sql

    holds = "SELECT 1 FROM information_schema.tables WHERE table_schema = %s AND table_name = 'schema_version'"
    if conn.execute(holds, (schema,)).fetchone() is None:
        if conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone() is None:
            raise StoreError("this PostgreSQL has no pgvector extension: install pgvector before the first import")
        return None
    table = sql.Identifier
    version = conn.execute(sql.SQL("SELECT max(version) FROM {}.schema_version").format(table(schema))).fetchone()[0]
    counts = "SELECT count(*), count(*) FILTER (WHERE active) FROM {}.tools"
    tools, active = conn.execute(sql.SQL(counts).format(table(schema))).fetchone()
    meta = "SELECT value FROM {}.meta WHERE key = 'model_id'"
    model = conn.execute(sql.SQL(meta).format(table(schema))).fetchone()
    return FoundRegistry("postgres", int(version or 0), int(tools), int(active), model[0] if model else None)
