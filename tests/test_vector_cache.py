"""Document vectors are kept per machine by model and text: a new registry of texts embedded before embeds
nothing, and a cache that cannot be used never fails a search."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from toolrag.embed import vector_cache
from toolrag.embed.base import Vectors
from toolrag.embed.cache import cache_entries
from toolrag.embed.vector_cache import cached_documents


class Model:
    """Vectors from a hash of the text, counting what it is asked to embed."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, texts: Sequence[str]) -> Vectors:
        self.asked.extend(texts)
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)


@pytest.fixture(autouse=True)
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_text_is_embedded_once_per_machine() -> None:
    model = Model()
    first = cached_documents("m1", 3, ["a tool", "another tool", "a tool"], model)
    again = cached_documents("m1", 3, ["another tool", "a third tool", "a tool"], model)
    assert model.asked == ["a tool", "another tool", "a third tool"]  # each distinct text once, ever
    np.testing.assert_array_equal(first[0], again[2])
    np.testing.assert_array_equal(again, model(["another tool", "a third tool", "a tool"]))


def test_models_never_share_vectors() -> None:
    model = Model()
    cached_documents("m1", 3, ["a tool"], model)
    cached_documents("m2", 3, ["a tool"], model)
    assert model.asked == ["a tool", "a tool"]


def test_an_unusable_cache_embeds_as_if_it_were_not_there(cache_folder: Path) -> None:
    cache_folder.parent.mkdir(parents=True, exist_ok=True)
    cache_folder.write_text("a file where the folder should be")
    model = Model()
    vectors = cached_documents("m1", 3, ["a tool"], model)
    assert vectors.shape == (1, 3) and model.asked == ["a tool"]


def test_a_corrupt_file_is_read_past(cache_folder: Path) -> None:
    cached_documents("m1", 3, ["a tool"], Model())
    (stored,) = (cache_folder / "document-vectors").iterdir()
    stored.write_bytes(b"not a database")
    model = Model()
    assert cached_documents("m1", 3, ["a tool"], model).shape == (1, 3) and model.asked == ["a tool"]


def test_the_cache_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_cache, "MAX_ENTRIES", 20)
    model = Model()
    cached_documents("m1", 3, [f"tool {i}" for i in range(25)], model)
    model.asked.clear()
    cached_documents("m1", 3, ["tool 24", "tool 0"], model)
    assert model.asked == ["tool 0"]  # the oldest went, the newest stayed


def test_prune_lists_and_keeps_recent_vectors() -> None:
    cached_documents("m1", 3, ["a tool"], Model())
    (entry,) = [e for e in cache_entries(set()) if e.kind == "document-vectors"]
    assert entry.kept and entry.bytes > 0
