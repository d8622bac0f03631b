"""Durable registry state behind the `Store` protocol; SQLite is the embedded default."""

from toolrag.store.base import IndexModel, Store, ToolStore, UpsertReport
from toolrag.store.sqlite import SQLiteStore

__all__ = ["IndexModel", "SQLiteStore", "Store", "ToolStore", "UpsertReport"]
