from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest

from toolrag import ModelMismatchError, StoreError
from toolrag.store import IndexModel, SQLiteStore

from .conftest import make_tool

MODEL = IndexModel("test-model", 4)


def vec(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


def test_upsert_versions_and_history(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    first = make_tool("a.tool", "First text.")
    report = store.upsert([first], {"h1": vec(1, 0, 0, 0)}, MODEL)
    assert report.added == ["a.tool"]
    assert store.upsert([first], {}, MODEL).unchanged == ["a.tool"]
    changed = first.model_copy(update={"description": "Second text."})
    assert store.upsert([changed], {}, MODEL).updated == ["a.tool"]
    current = store.get("a.tool")
    assert current is not None and current.version == 2 and current.description == "Second text."
    assert current.created_at < current.updated_at
    assert [t.description for t in store.history("a.tool")] == ["First text.", "Second text."]
    assert store.vectors("test-model", ["h1", "unknown"])["h1"].tolist() == [1, 0, 0, 0]


def test_generation_grows_with_every_write_and_changes_are_listed(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    start = store.generation()
    store.upsert([make_tool("a", "A.")], {}, MODEL)
    middle = store.generation()
    store.upsert([make_tool("b", "B.")], {}, MODEL)
    assert start < middle < store.generation()
    assert [t.name for t in store.changed_since(middle)] == ["b"]


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.upsert([make_tool("keep", "Kept.")], {}, MODEL)
    before = (store.generation(), [t.name for t in store.tools()])
    with pytest.raises(StoreError, match="dimension 4"):
        store.upsert([make_tool("new", "New."), make_tool("keep", "Changed.")], {"bad": vec(1, 2)}, MODEL)
    assert (store.generation(), [t.name for t in store.tools()]) == before
    assert store.get("keep").description == "Kept."  # type: ignore[union-attr]
    assert store.history("new") == []


def test_another_model_is_refused(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s.db")
    store.upsert([make_tool("a", "A.")], {}, MODEL)
    with pytest.raises(ModelMismatchError, match="rebuild"):
        store.upsert([make_tool("b", "B.")], {}, IndexModel("other-model", 8))
    assert store.get("b") is None


def test_unusable_files_give_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a directory"):
        SQLiteStore(tmp_path)
    garbage = tmp_path / "garbage.db"
    garbage.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match="cannot open registry"):
        SQLiteStore(garbage)
    newer = tmp_path / "newer.db"
    SQLiteStore(newer).close()
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version = 999")
    with pytest.raises(StoreError, match="newer than this toolrag"):
        SQLiteStore(newer)


def test_two_connections_see_each_others_writes(tmp_path: Path) -> None:
    one, two = SQLiteStore(tmp_path / "s.db"), SQLiteStore(tmp_path / "s.db")
    one.upsert([make_tool("a", "A.")], {}, MODEL)
    assert two.get("a") is not None and two.generation() == one.generation()
