"""A registry looked at without being opened as a store (opening one creates or migrates it): read-only, for
`toolrag doctor`."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from toolrag.errors import StoreError

TOOLRAG_PARAMETERS = ("schema", "vector_index")


@dataclass
class FoundRegistry:
    dialect: Literal["sqlite", "postgres"]
    version: int  # of its schema: the number of the last migration applied
    tools: int
    active: int
    model_id: str | None  # what its vectors were made with (None before the first import)


def split_parameters(url: str) -> tuple[str, dict[str, str]]:
    """The connection URL without toolrag's own query parameters (`schema`, `vector_index`: libpq knows neither),
    and their values (the last one given of each)."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    found = {key: value for key, value in query if key in TOOLRAG_PARAMETERS}
    rest = urlencode([(key, value) for key, value in query if key not in TOOLRAG_PARAMETERS], safe="/")
    return urlunsplit(parts._replace(query=rest)), found


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
    try:
        with psycopg.connect(plain, autocommit=True, connect_timeout=10) as conn:
            return _read_postgres_registry(conn, schema)
    except psycopg.Error as exc:
        raise StoreError(f"cannot read the registry at {redacted_url(plain)}: {failure_reason(exc)}") from None


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


def failure_reason(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


# A value is quoted (libpq's key='a value', with \\' and \\\\ escapes) or runs to the next space or `&`.
_SECRET_PARAMETERS = re.compile(
    r"(?i)\b(password|sslpassword|sslkey|passfile|token)\s*=\s*('(?:[^'\\]|\\.)*'?|[^&\s]*)"
)


def redacted_url(url: str) -> str:
    """The connection string without any password, for messages: the one in the user part of a URL, and any
    `password=` (or similar) given as a URL parameter or as a key=value pair."""
    parts = urlsplit(url) if "://" in url else None
    if parts is not None and parts.password is not None:
        host = parts.netloc.rsplit("@", 1)[1]
        url = urlunsplit(parts._replace(netloc=f"{parts.username or ''}@{host}"))
    return _SECRET_PARAMETERS.sub(lambda match: f"{match.group(1)}=<hidden>", url)
