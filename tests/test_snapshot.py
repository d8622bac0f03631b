"""The snapshot's life cycle (snapshot/): a registry followed a change at a time answers as one built afresh, a
saved snapshot is mapped by the next process, and a snapshot is never used for a registry state it does not hold."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrag import Principal, SearchConfig, Tool, ToolRegistry, snapshot
from toolrag.embed.base import Vectors
from toolrag.model import ExampleRequest
from toolrag.search import calibrate
from toolrag.search.ann import GRAPH_FILE, ORPHANS_FILE
from toolrag.search.index import SearchIndex

from .conftest import copy_registry, make_tool
from .test_confidence import vectors_only_index

WORDS = [
    "invoice",
    "refund",
    "payment",
    "ticket",
    "weather",
    "forecast",
    "email",
    "calendar",
    "meeting",
    "file",
    "upload",
    "deploy",
    "build",
]
DOMAINS = ["billing", "support", "weather", "mail", "files", "ci"]


class WordEmbedder:
    """A fast deterministic model for testing the index's mechanics: a text's vector is the normalized sum of one
    fixed random vector per word."""

    model_id = "test-words-32"
    dimension = 32

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        return np.vstack([self._embed(text) for text in texts]) if texts else np.zeros((0, 32), np.float32)

    def embed_query(self, text: str) -> Vectors:
        return self._embed(text)

    def _embed(self, text: str) -> Vectors:
        total = np.full(self.dimension, 1e-3, dtype=np.float32)
        for word in text.lower().split():
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "little")
            total += np.random.default_rng(seed).standard_normal(self.dimension).astype(np.float32)
        return (total / np.linalg.norm(total)).astype(np.float32)


PRINCIPALS = [
    Principal.anonymous(),
    Principal(user="a", scopes=frozenset({"billing:write"})),
    Principal(user="b", tenant="acme", scopes=frozenset({"billing:write", "mail:send"})),
    Principal(user="c", deny_tools=("ci.*",)),
]
QUERIES = ["refund the invoice payment", "weather forecast", "upload a file", "deploy the build", "zzz"]


def _tool(number: int, words: list[str], scoped: bool, tenant: bool, alias: bool) -> Tool:
    domain = DOMAINS[number % len(DOMAINS)]
    fields: dict[str, object] = {}
    if scoped:
        fields["scopes"] = [f"{domain}:write"]
    if tenant:
        fields["tenants"] = ["acme"]
    if alias:
        fields["aliases"] = [f"{words[0]} {domain} helper"]
    # The number keeps two tools' texts apart: tools with one text tie, and which of them comes first may follow
    # the order they sit in the index (their cosines differ in the last bits), which is not what this test is about.
    text = f"{' '.join(words).capitalize()} for {domain} work, tool {number}."
    return make_tool(f"{domain}.tool_{number}", text, **fields)


tools_strategy = st.builds(
    _tool,
    number=st.integers(0, 14),
    words=st.lists(st.sampled_from(WORDS), min_size=2, max_size=5),
    scoped=st.booleans(),
    tenant=st.booleans(),
    alias=st.booleans(),
)
steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.lists(tools_strategy, min_size=1, max_size=4)),
        st.tuples(st.just("deactivate"), st.integers(0, 14)),
        st.tuples(st.just("describe"), st.sampled_from(DOMAINS)),
        st.tuples(st.just("example"), st.tuples(st.integers(0, 14), st.sampled_from([None, "acme"]))),
    ),
    min_size=1,
    max_size=8,
)


def _answers(registry: ToolRegistry) -> list[object]:
    """Everything a principal can receive: rankings with scores, searches, and what it may see."""
    found: list[object] = []
    for principal in PRINCIPALS:
        visible, hidden = registry.partition(principal)
        found.append((sorted(t.name for t in visible), sorted(t.name for t in hidden)))
        for query in QUERIES:
            found.append([(r.name, round(r.score, 4)) for r in registry.rank(query, principal, limit=8)])
            found.append([(r.name, round(r.score, 4)) for r in registry.search(query, principal)])
    return found


def _assert_alike(got: list[object], expected: list[object]) -> None:
    """The same tools in the same order, their scores within 0.001: a registry that followed its changes sums a
    tool's evidence in another order than one built afresh, so the last digit may differ (0.3034 against 0.3033)."""
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        if mine and isinstance(mine, list) and isinstance(mine[0], tuple) and isinstance(mine[0][1], float):
            assert [name for name, _ in mine] == [name for name, _ in theirs], (mine, theirs)  # type: ignore[union-attr]
            assert [score for _, score in mine] == pytest.approx([score for _, score in theirs], abs=1e-3)  # type: ignore[union-attr]
        else:
            assert mine == theirs


@pytest.fixture
def small_segments() -> Iterator[None]:
    """Compaction after a few changes, and short lists of the small-talk bank's nearest tools, so the examples go
    through both."""
    with mock.patch.object(snapshot, "COMPACT_MIN", 3), mock.patch.object(calibrate, "NEAREST_TOOLS", 3):
        yield


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(initial=st.lists(tools_strategy, min_size=1, max_size=10), changes=steps)
def test_a_snapshot_followed_change_by_change_answers_as_one_built_afresh(
    tmp_path: Path, small_segments: None, initial: list[Tool], changes: list[tuple[str, object]]
) -> None:
    path = tmp_path / f"{abs(hash((tuple(t.name for t in initial), len(changes))))}.db"
    path.unlink(missing_ok=True)
    config = SearchConfig(cache_entries=0, save_snapshots_from=None, inject_all_below_tokens=0)
    following = ToolRegistry(path, WordEmbedder(), config)
    following.register_many(list({t.name: t for t in initial}.values()))
    following.search("warm up")  # the snapshot this registry will follow
    for kind, argument in changes:
        if kind == "write":
            following.register_many(list({t.name: t for t in argument}.values()))  # type: ignore[attr-defined]
        elif kind == "deactivate":
            names = [t.name for t in following.tools() if t.name.endswith(f"_{argument}")]
            for name in names:
                following.set_active(name, False)
        elif kind == "example":  # a request made a view of a tool, for one tenant or all (search/examples.py)
            number, tenant = argument  # type: ignore[misc]
            names = [t.name for t in following.tools() if t.name.endswith(f"_{number}") and not t.tenants]
            for name in names:
                following.examples.add(name, QUERIES[number % len(QUERIES)], tenant)
        else:
            following.describe_groups({str(argument): f"{argument} work of every kind"})
        fresh = ToolRegistry(path, WordEmbedder(), config)
        _assert_alike(_answers(following), _answers(fresh))
        assert following.snapshot().live_count == fresh.snapshot().live_count
        fresh.close()
    following.close()


def _registry(path: Path, save_from: int | None = 1) -> ToolRegistry:
    return ToolRegistry(path, WordEmbedder(), SearchConfig(cache_entries=0, save_snapshots_from=save_from))


def _catalog(count: int, prefix: str = "t") -> list[Tool]:
    return [
        _tool(i, [WORDS[i % len(WORDS)], WORDS[(i * 7) % len(WORDS)]], i % 3 == 0, i % 5 == 0, i % 4 == 0).model_copy(
            update={"name": f"{DOMAINS[i % len(DOMAINS)]}.{prefix}_{i}", "examples": _examples(i)}
        )
        for i in range(count)
    ]


def _examples(number: int) -> list[ExampleRequest]:
    """Some tools with example requests, of every tenant or of acme's (saved and mapped with the snapshot)."""
    if number % 6:
        return []
    return [ExampleRequest(text=QUERIES[number % len(QUERIES)], tenant="acme" if number % 5 == 0 else None)]


def _saved(cache: Path) -> list[Path]:
    return sorted(p.parent for p in cache.rglob("complete"))


def _built_from_store() -> mock._patch[mock.MagicMock]:
    return mock.patch.object(SearchIndex, "build", side_effect=AssertionError("built instead of mapped"))


def test_the_next_process_maps_the_saved_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    first = _registry(tmp_path / "r.db")
    first.register_many(_catalog(40))
    expected = _answers(first)
    assert len(_saved(tmp_path / "cache")) == 1
    with _built_from_store():
        second = _registry(tmp_path / "r.db")
        assert _answers(second) == expected
        assert second.snapshot().vectors.blocks[0].flags.writeable is False  # mapped, not read


def test_changes_made_after_the_save_are_applied_on_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    writer = _registry(tmp_path / "r.db")
    writer.register_many(_catalog(40))
    writer.search("warm up")
    writer.update("billing.t_0", description="Refund a payment to the customer's card.")
    writer.set_active("weather.t_2", False)
    writer.register_many(_catalog(3, prefix="new"))
    expected = _answers(_registry(tmp_path / "r.db", save_from=None))
    with _built_from_store():
        reopened = _registry(tmp_path / "r.db")
        assert _answers(reopened) == expected
        assert "weather.t_2" not in {t.name for t in reopened.visible_tools(Principal.anonymous())}


def test_a_copy_of_the_registry_that_diverged_never_uses_the_original_s_snapshot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    original = _registry(tmp_path / "a" / "r.db")
    original.register_many(_catalog(20))
    original.search("warm up")
    copy = copy_registry(tmp_path / "a" / "r.db", tmp_path / "b")
    # Both move one generation on, differently; the copy is then opened where the original was (same location).
    original.register_many([make_tool("mail.only_in_original", "Sends the quarterly newsletter.")])
    _registry(copy).register_many([make_tool("mail.only_in_copy", "Archives old newsletters.")])
    with mock.patch.object(snapshot, "COMPACT_MIN", 0), mock.patch.object(snapshot, "COMPACT_SHARE", 0.0):
        original.search("warm up")  # compacts, so the original saves its new generation too
    assert len(_saved(tmp_path / "cache")) == 2
    original.close()
    (tmp_path / "a" / "r.db").unlink()
    for part in (tmp_path / "b").glob("r.db*"):
        part.rename(tmp_path / "a" / part.name)
    reopened = _registry(tmp_path / "a" / "r.db")
    names = {t.name for t in reopened.visible_tools(Principal.anonymous())}
    assert "mail.only_in_copy" in names and "mail.only_in_original" not in names


def test_a_damaged_snapshot_is_set_aside_and_the_index_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    registry = _registry(tmp_path / "r.db")
    registry.register_many(_catalog(30))
    expected = _answers(registry)
    (folder,) = _saved(tmp_path / "cache")
    matrix = folder / "matrix.npy"
    matrix.write_bytes(matrix.read_bytes()[:-100])  # truncated
    with caplog.at_level(logging.WARNING, logger="toolrag.snapshot"):
        assert _answers(_registry(tmp_path / "r.db")) == expected
    assert "snapshot not used" in caplog.text


def test_a_snapshot_of_another_tokenization_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    registry = _registry(tmp_path / "r.db")
    registry.register_many(_catalog(30))
    expected = _answers(registry)
    (folder,) = _saved(tmp_path / "cache")
    facts = json.loads((folder / "snapshot.json").read_text(encoding="utf-8"))
    facts["tokenization"] -= 1  # postings an earlier toolrag split differently
    (folder / "snapshot.json").write_text(json.dumps(facts), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="toolrag.snapshot"):
        assert _answers(_registry(tmp_path / "r.db")) == expected
    assert "snapshot not used" in caplog.text


def test_an_unwritable_cache_folder_only_costs_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the cache folder should be")
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(blocked))
    registry = _registry(tmp_path / "r.db")
    registry.register_many(_catalog(10))
    assert registry.search("refund the invoice payment", Principal(user="a", scopes=frozenset({"billing:write"})))


def test_a_model_switch_starts_a_snapshot_of_the_new_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    registry = _registry(tmp_path / "r.db")
    registry.register_many(_catalog(12))
    registry.search("warm up")

    class OtherWords(WordEmbedder):
        model_id = "test-words-32-other"

    switched = ToolRegistry(tmp_path / "r.db", OtherWords(), SearchConfig(save_snapshots_from=1))
    switched.rebuild()
    assert switched.snapshot().embedder is not None and switched.snapshot().embedder.model_id == OtherWords.model_id
    models = {p.parent.name for p in _saved(tmp_path / "cache")}
    assert len(models) == 2  # one folder per model


@settings(max_examples=60, deadline=None)
@given(
    tools=st.integers(min_value=1, max_value=40),
    joined=st.integers(min_value=0, max_value=12),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_the_bank_s_nearest_tools_follow_changes_without_a_scan(tools: int, joined: int, seed: int) -> None:
    """After tools leave and join, each bank request's best visible cosine is still exact, for any visibility."""
    rng = np.random.default_rng(seed)
    requests = rng.normal(size=(6, 8)).astype(np.float32)
    requests /= np.linalg.norm(requests, axis=1, keepdims=True)
    matrix = rng.normal(size=(tools + joined, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)  # cosines, as the models give
    before = vectors_only_index(matrix[:tools], np.arange(tools))
    gone = sorted(set(rng.integers(0, tools, size=rng.integers(0, tools + 1)).tolist()))
    live = np.ones(tools + joined, dtype=np.bool_)
    live[gone] = False
    after = replace(vectors_only_index(matrix, np.arange(tools + joined)), live=live)
    with mock.patch.object(calibrate, "NEAREST_TOOLS", 4):
        followed = calibrate.updated_neighbours(calibrate.nearest_tools(before, requests), after, gone, tools, requests)
    reference = calibrate.SmallTalkReference(
        sentences=requests,
        bank_requests=requests,
        bank_english=np.ones(6, dtype=np.bool_),
        bank_reference=np.zeros(6, dtype=np.float32),
        neighbours=followed,
    )
    for _ in range(5):
        visible = live & rng.random(tools + joined).astype(np.float32).__lt__(0.6)
        exact = np.where(visible, requests @ matrix.T, -1.0).max(axis=1) if visible.any() else np.full(6, -1.0)
        assert np.allclose(reference._best_visible(after, visible), exact, atol=1e-5)


def test_an_approximate_index_takes_over_the_dense_scan_and_is_mapped_next_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOOLRAG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(snapshot, "GRAPH_DELAY_SECONDS", 0.0)
    approximate = SearchConfig(cache_entries=0, save_snapshots_from=1, ann_min_tools=30, ann_candidates=16)
    registry = ToolRegistry(tmp_path / "r.db", WordEmbedder(), approximate)
    registry.register_many(_catalog(80))
    slot = registry.snapshot().graph
    deadline = time.monotonic() + 30
    while slot.graph is None and time.monotonic() < deadline:  # built in the background
        time.sleep(0.05)
    assert slot.graph is not None
    proposals: list[int] = []
    propose = slot.graph.candidate_rows
    monkeypatch.setattr(slot.graph, "candidate_rows", lambda v, n: proposals.append(n) or propose(v, n))
    exact = ToolRegistry(tmp_path / "r.db", WordEmbedder(), SearchConfig(cache_entries=0, save_snapshots_from=None))
    for principal in PRINCIPALS:  # a principal seeing few of the proposed tools gets the exact scan
        for query in QUERIES:
            assert [r.name for r in registry.rank(query, principal, limit=3, mode="dense")] == [
                r.name for r in exact.rank(query, principal, limit=3, mode="dense")
            ]
    assert proposals  # the graph proposed the candidates
    while not any((tmp_path / "cache").rglob(GRAPH_FILE)) and time.monotonic() < deadline:
        time.sleep(0.05)
    reopened = ToolRegistry(tmp_path / "r.db", WordEmbedder(), approximate)
    assert reopened.snapshot().graph.graph is not None  # mapped with the snapshot, not built again


def test_rows_the_approximate_index_cannot_reach_are_still_proposed(tmp_path: Path) -> None:
    """HNSW leaves a few rows no search reaches (one build in six of 100 rows here, with usearch's concurrent add):
    their tools were never proposed. Clusters of near neighbours, like tools of one topic, built many times: each
    row's own vector must bring it back, and the rows a mapped graph cannot reach are known as well."""
    from toolrag.search.ann import VectorGraph

    rng = np.random.default_rng(3)
    for build in range(40):
        centres = rng.standard_normal((8, 32))
        rows = centres[rng.integers(0, 8, 120)] + 0.4 * rng.standard_normal((120, 32))
        rows = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
        graph = VectorGraph.build(rows)
        missed = [row for row in range(120) if row not in graph.candidate_rows(rows[row], 16)]
        assert missed == [], f"build {build}: rows {missed} never proposed"
        if len(graph.orphans):
            graph.save(tmp_path)
            mapped = VectorGraph.mapped(tmp_path / GRAPH_FILE, 120)
            assert mapped.orphans.tolist() == graph.orphans.tolist()
    (tmp_path / GRAPH_FILE).unlink(missing_ok=True)
    VectorGraph.build(rows).save(tmp_path)
    (tmp_path / ORPHANS_FILE).unlink()
    with pytest.raises(ValueError, match="rows it cannot reach is missing"):
        VectorGraph.mapped(tmp_path / GRAPH_FILE, 120)


def test_the_approximate_index_library_and_the_model_runtime_load_in_either_order() -> None:
    """usearch 2.26 crashed the process when onnxruntime was imported after it (a mapped graph before the first
    embedding); the pinned release must not."""
    import subprocess
    import sys

    for first, second in (("usearch.index", "onnxruntime"), ("onnxruntime", "usearch.index")):
        done = subprocess.run([sys.executable, "-c", f"import {first}; import {second}"], capture_output=True)
        assert done.returncode == 0, (first, second, done.returncode, done.stderr[-500:])


def test_tools_with_one_text_rank_alike_whatever_their_place_in_the_index(tmp_path: Path) -> None:
    """Found by the property above: two tools with the same text had cosines a few bits apart (depending on the
    rows they sat in), and normalizing the candidates' cosines blew that up to 0.72 against 0.08, so a followed
    snapshot and one built afresh ranked them in opposite orders."""
    config = SearchConfig(cache_entries=0, save_snapshots_from=None, inject_all_below_tokens=0)
    twin = {"aliases": ["weather weather helper"]}
    following = ToolRegistry(tmp_path / "twins.db", WordEmbedder(), config)
    following.register_many([make_tool("weather.tool_8", "Weather invoice for weather work.", **twin)])
    following.search("warm up")
    following.register_many(
        [
            make_tool("billing.tool_0", "Invoice invoice for billing work.", tenants=["acme"]),
            make_tool("weather.tool_2", "Weather invoice for weather work.", **twin),
        ]
    )
    fresh = ToolRegistry(tmp_path / "twins.db", WordEmbedder(), config)
    for registry in (following, fresh):
        ranked = registry.rank("deploy the build", Principal.anonymous(), limit=8)
        assert [(r.name, r.signals.fused) for r in ranked] == [("weather.tool_2", 0.0), ("weather.tool_8", 0.0)]
    fresh.close()
    following.close()
