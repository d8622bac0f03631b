"""Where a registry lives: a path or URL opened as its store."""

from __future__ import annotations

from pathlib import Path

from toolrag.errors import StoreLocationError
from toolrag.store.base import Store
from toolrag.store.conninfo import is_connection_string
from toolrag.store.sqlite import SQLiteStore


def open_store(location: str | Path, create: bool = True) -> Store:
    """A store from a path or URL: `tools.db` and `sqlite:///tools.db` open SQLite files, `postgresql://...` and
    libpq's `host=... dbname=...` a PostgreSQL database (the `toolrag[postgres]` extra). `create=False` refuses a
    registry that does not exist yet (StoreError naming the registries it can see) instead of creating an empty one."""
    text = str(location)
    if is_connection_string(text):
        from toolrag.store.postgres import PostgresStore

        return PostgresStore.from_url(text, create)
    if text.startswith("sqlite:///"):
        return SQLiteStore(text.removeprefix("sqlite:///"), create)
    if "://" in text:
        raise StoreLocationError(text)
    return SQLiteStore(text, create)
