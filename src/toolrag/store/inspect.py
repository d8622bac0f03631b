"""A registry looked at without being opened as a store (opening one creates or migrates it): read-only, for
`toolrag doctor`."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

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
    # Not urlsplit/urlunsplit: they end the user part at a `?` or `#` a password holds, and drop the `//` of a URL
    # with no host (`postgresql:///agents?host=/run/postgresql`), which libpq then no longer reads as a URL.
    scheme, account, rest = _split_account(url)
    base, _, query = rest.partition("?")
    pairs = parse_qsl(query, keep_blank_values=True)
    found = {key: value for key, value in pairs if key in TOOLRAG_PARAMETERS}
    kept = urlencode([(key, value) for key, value in pairs if key not in TOOLRAG_PARAMETERS], safe="/")
    user = f"{account}@" if account is not None else ""
    return f"{scheme}://{user}{base}{f'?{kept}' if kept else ''}", found


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


def failure_reason(exc: BaseException, url: str | None = None) -> str:
    """The first line of an error, without any secret of `url`: libpq repeats the part of a connection string it
    could not read, and that part may be a password (a generated one with a `%` in it)."""
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for secret in sorted(_secrets(url), key=len, reverse=True) if url else ():
        reason = reason.replace(secret, "<hidden>")
    return reason


# Parameters a message may show; every other one's value is hidden (a password, or a mistyped `passwrd=`).
_SHOWN_PARAMETERS = frozenset(
    {
        *TOOLRAG_PARAMETERS,
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "sslmode",
        "connect_timeout",
        "application_name",
        "target_session_attrs",
        "load_balance_hosts",
    }
)
# libpq's key=value form: a value is quoted (`\` escapes any character, a newline too), or runs to the next space
# (`\` escaping one, a space too), or is empty.
_CONNINFO_PAIR = re.compile(r"\s*(\w+)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)(?:[^\s\\]|\\.)*|(?=\s|$))", re.DOTALL)
_CONNINFO_KEYS = ("host", "hostaddr", "port", "dbname", "user", "password", "service", "sslmode")
_LOOKS_LIKE_CONNINFO = re.compile(rf"\s*\w+\s*=.*(?<!\w)(?:{'|'.join(_CONNINFO_KEYS)})\s*=", re.DOTALL)
UNREADABLE = "<a connection string that cannot be read>"


def redacted_url(url: str) -> str:
    """The connection string without any password: the one in the user part of a URL, and the value of every
    parameter (a URL's, or libpq's key=value) that is not one of `_SHOWN_PARAMETERS`."""
    try:
        pairs = conninfo_pairs(url)
    except StoreError:
        return UNREADABLE
    if pairs is not None:
        return " ".join(f"{key}={_shown(key, value)}" for key, value in pairs)
    if "://" not in url:  # a file path, or no URL libpq reads
        return url if "=" not in url else UNREADABLE
    scheme, account, rest = _split_account(url)
    user = account.split(":", 1)[0] + "@" if account is not None else ""
    parts = urlsplit(f"{scheme}://{rest}")
    query = "&".join(f"{key}={_shown(key, value)}" for key, value in _query_pairs(parts.query))
    return urlunsplit(parts._replace(netloc=f"{user}{parts.netloc}", query=query, fragment=""))


def _split_account(url: str) -> tuple[str, str | None, str]:
    """A URL's scheme, its user part (None when it has none) and the rest. libpq reads the user part to the last `@`
    before the host, whatever `/`, `?` or `#` a password holds; taking it to the last `@` anywhere may hide more
    than the password (an `@` in a parameter), never less."""
    scheme, _, after = url.partition("://")
    account, at, rest = after.rpartition("@")
    return (scheme, account, rest) if at else (scheme, None, after)


def _shown(key: str, value: str) -> str:
    return value if key in _SHOWN_PARAMETERS else "<hidden>"


def _query_pairs(query: str) -> list[tuple[str, str]]:
    """A URL's query as written (not decoded: a message shows what the user wrote)."""
    return [(key, value) for key, _, value in (item.partition("=") for item in query.split("&") if item)]


def _secrets(url: str) -> set[str]:
    """Each secret `url` holds, as written and decoded: what a message must not repeat."""
    try:
        pairs = conninfo_pairs(url)
    except StoreError:
        return set()
    if pairs is None:
        _, account, rest = _split_account(url)
        pairs = _query_pairs(urlsplit(f"x://{rest}").query)
        if account is not None and ":" in account:
            pairs.append(("password", account.split(":", 1)[1]))
    hidden = {value.strip("'") for key, value in pairs if key not in _SHOWN_PARAMETERS and value.strip("'")}
    return hidden | {unquote(value) for value in hidden} | {_unescaped(value) for value in hidden}


def conninfo_pairs(location: str) -> list[tuple[str, str]] | None:
    """libpq's key=value connection string as its pairs (values as written); None when `location` is not one (a
    URL, a file path); StoreError, which never repeats it, when it is one that cannot be read (a quote not closed)."""
    if "://" in location or not _LOOKS_LIKE_CONNINFO.match(location):
        return None
    pairs: list[tuple[str, str]] = []
    at, end = 0, len(location.rstrip())
    while at < end:
        match = _CONNINFO_PAIR.match(location, at)
        if match is None:
            raise StoreError(f"{UNREADABLE} (libpq's key=value form; a quote not closed?): nothing was opened")
        pairs.append((match.group(1), match.group(2)))
        at = match.end()
    return pairs


def conninfo_url(pairs: list[tuple[str, str]]) -> str:
    """A key=value connection string as the URL the rest of the store reads (libpq takes every parameter in a URL's
    query, and toolrag's own, `schema` and `vector_index`, are read from there)."""
    plain = [(key, _unescaped(value[1:-1] if value.startswith("'") else value)) for key, value in pairs]
    return "postgresql://?" + urlencode(plain, safe="/")


def _unescaped(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value, flags=re.DOTALL)
