"""What only the PostgreSQL store does: connection errors, schemas, migrations under a lock, a vector index."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from psycopg import sql

from toolrag import Principal, SearchConfig, StoreError, Tool, ToolRegistry, open_store
from toolrag.errors import EditConflictError
from toolrag.store import IndexModel, postgres
from toolrag.store.base import migrations
from toolrag.store.postgres import PostgresStore

from .conftest import RETRIEVAL, SAMPLE_TOOLS, CountingEmbedder, in_schema, make_tool

MODEL = IndexModel("test-model", 4)


def indexed(url: str) -> str:
    """The store URL of a store that keeps an HNSW index of its vectors (opt-in: no search reads it)."""
    return f"{url}&vector_index=hnsw"


def test_an_unreachable_database_is_named_without_its_password(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(StoreError, match=r"cannot connect to PostgreSQL at postgresql://bob@/db\?host=") as caught:
        open_store(f"postgresql://bob:hunter2@/db?host={tmp_path}")
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize("parameter", ["password", "sslpassword"])
def test_finding5_a_password_given_as_a_url_parameter_is_never_shown(
    tmp_path: Path, postgres_url: str, parameter: str
) -> None:
    with pytest.raises(StoreError) as caught:
        open_store(f"postgresql://bob@/db?host={tmp_path}&{parameter}=hunter2")
    assert "hunter2" not in str(caught.value)
    url = in_schema(f"{postgres_url}{'&' if '?' in postgres_url else '?'}{parameter}=hunter2", "redacted")
    store = PostgresStore.from_url(url)
    assert "hunter2" not in repr(store)
    pid = store._query("SELECT pg_backend_pid()")[0][0]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreError) as dropped:  # what a 503 of the API says while the database is down
        store.tools()
    assert "hunter2" not in str(dropped.value)
    store.close()


def test_schemas_hold_separate_registries(postgres_url: str) -> None:
    one, two = open_store(in_schema(postgres_url, "sep_one")), open_store(in_schema(postgres_url, "sep_two"))
    one.upsert([make_tool("a", "A.")], {}, MODEL)
    assert two.tools() == [] and [t.name for t in one.tools()] == ["a"]


def test_instances_starting_together_migrate_once(postgres_url: str) -> None:
    url = in_schema(postgres_url, "racing")
    errors: list[BaseException] = []

    def start() -> None:
        try:
            open_store(url).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    with psycopg.connect(postgres_url) as conn:
        applied = [row[0] for row in conn.execute("SELECT version FROM racing.schema_version ORDER BY version")]
    assert applied == [number for number, _ in migrations("postgres")]  # each migration exactly once


def test_a_newer_schema_is_refused(postgres_url: str) -> None:
    open_store(in_schema(postgres_url, "newer")).close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("INSERT INTO newer.schema_version(version) VALUES (999)")
    with pytest.raises(StoreError, match="newer than this toolrag"):
        open_store(in_schema(postgres_url, "newer"))


def test_nearest_uses_the_models_hnsw_index(postgres_url: str) -> None:
    store = PostgresStore.from_url(indexed(in_schema(postgres_url, "nearest")))
    rng = np.random.default_rng(7)
    vectors = {f"h{i}": v / np.linalg.norm(v) for i, v in enumerate(rng.normal(size=(300, 4)).astype(np.float32))}
    store.upsert([make_tool("a", "A.")], vectors, MODEL)
    query = vectors["h42"]
    found = store.nearest("test-model", query, 5)
    assert next(iter(found)) == "h42" and found["h42"] == pytest.approx(1.0, abs=1e-5)
    exact = sorted(vectors, key=lambda key: -float(vectors[key] @ query))[:5]
    assert set(found) == set(exact)
    assert store.nearest("another-model", query, 5) == {}
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("SET search_path TO nearest, public")
        conn.execute("ANALYZE embeddings")
        conn.execute("SET enable_sort = off")  # a table this small would otherwise be sorted; large ones are not
        plan = conn.execute(
            "EXPLAIN SELECT text_hash FROM embeddings WHERE model = 'test-model'"
            " ORDER BY vector::vector(4) <=> '[1,0,0,0]'::vector(4) LIMIT 5"
        ).fetchall()
    assert "embeddings_hnsw_" in " ".join(row[0] for row in plan)


def _hnsw_indexes(postgres_url: str, schema: str) -> int:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        count = "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'embeddings_hnsw_%%'"
        return int(conn.execute(count, (schema,)).fetchone()[0])  # type: ignore[index]


def test_issue34_no_vector_index_unless_asked_and_nearest_still_answers(postgres_url: str) -> None:
    """No search reads the database's HNSW index, and growing it slows every write: a store keeps none unless its
    URL says `vector_index=hnsw`, small writes and bulk ones alike; `nearest` then scans, with the same answer."""
    store = PostgresStore.from_url(in_schema(postgres_url, f"plain_{uuid.uuid4().hex[:8]}"))
    assert not store.vector_index
    tools, vectors = _catalog(1200)
    store.upsert(tools[:1], {"h0": vectors["h0"]}, MODEL)
    store.upsert(tools, vectors, MODEL)  # past BULK_ROWS: COPY, and no build asked for
    assert store.wait_for_vector_index(1) and _hnsw_indexes(postgres_url, store.schema) == 0
    query = vectors["h42"]
    exact = sorted(vectors, key=lambda key: -float(vectors[key] @ query))[:5]
    assert list(store.nearest("test-model", query, 5)) == exact
    with pytest.raises(StoreError, match="vector_index=ivfflat"):
        PostgresStore.from_url(f"{in_schema(postgres_url, store.schema)}&vector_index=ivfflat")
    store.close()


def test_issue34_migration_10_drops_the_indexes_an_opted_in_store_builds_again(postgres_url: str) -> None:
    """Registries written before kept an index per model: migration 10 drops them; a store that asks for one builds
    its model's again when it opens the registry."""
    schema = f"older_{uuid.uuid4().hex[:8]}"
    url = in_schema(postgres_url, schema)
    store = PostgresStore.from_url(indexed(url))
    store.upsert([make_tool("a", "A.")], {"h": np.array([1, 0, 0, 0], dtype=np.float32)}, MODEL)
    store.close()
    assert _hnsw_indexes(postgres_url, schema) == 1
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as a registry of schema version 9 is
        conn.execute(sql.SQL("DELETE FROM {}.schema_version WHERE version >= 10").format(sql.Identifier(schema)))
    PostgresStore.from_url(url).close()
    assert _hnsw_indexes(postgres_url, schema) == 0
    opener = PostgresStore.from_url(indexed(url))
    assert opener.wait_for_vector_index(60) and _hnsw_indexes(postgres_url, schema) == 1
    assert opener.get("a") is not None
    opener.close()


def test_a_dropped_connection_fails_clearly_then_recovers(postgres_url: str) -> None:
    store = PostgresStore.from_url(in_schema(postgres_url, "reconnect"))
    store.upsert([make_tool("a", "A.")], {}, MODEL)
    pid = store._query("SELECT pg_backend_pid()")[0][0]
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
    with pytest.raises(StoreError, match=r"PostgreSQL at .* failed"):
        store.get("a")
    assert store.get("a") is not None  # the next call reconnects


def test_search_with_the_databases_vector_index_matches_the_exact_scan(
    postgres_url: str, embedder: CountingEmbedder
) -> None:
    url = in_schema(postgres_url, "approximate")
    exact = ToolRegistry(url, embedder, RETRIEVAL)
    exact.register_many(SAMPLE_TOOLS)
    approximate = ToolRegistry(
        url, embedder, SearchConfig(ann_min_tools=0, ann_candidates=10, inject_all_below_tokens=0)
    )
    nobody = Principal()
    for query in ["will it rain in Kyiv", "refund the customer", "where is my parcel", "email my boss"]:
        assert [r.name for r in approximate.search(query, nobody)] == [r.name for r in exact.search(query, nobody)]
        ranked = approximate.rank(query, nobody, limit=10)
        assert not {r.name for r in ranked} & {"payments.refund_payment", "payments.list_payments", "hr.update_salary"}


def _catalog(count: int, revision: str = "") -> tuple[list[Tool], dict[str, np.ndarray]]:
    tools = [make_tool(f"bulk.tool_{i}", f"Bulk tool number {i}{revision}.", category="bulk") for i in range(count)]
    rng = np.random.default_rng(len(revision))
    vectors = {f"{revision}h{i}": v / np.linalg.norm(v) for i, v in enumerate(rng.normal(size=(count, 4)))}
    return tools, {key: vector.astype(np.float32) for key, vector in vectors.items()}


def _state(store: PostgresStore) -> tuple[object, ...]:
    """What a registry holds, without the timestamps."""
    dump = store.dump()
    return (
        sorted((t.name, t.version, t.content_hash, t.active) for t in dump.tools),
        sorted((t.name, t.version, t.content_hash) for t in dump.versions),
        sorted((key, tuple(np.round(vector, 6))) for key, vector in dump.vectors.items()),
    )


def test_bulk_writes_hold_what_row_by_row_writes_hold(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 18: from BULK_ROWS rows a write goes through COPY; the registry it leaves is the same, version for
    version, and the HNSW index is built once the writes stop."""
    first, vectors = _catalog(1200)
    changed, changed_vectors = _catalog(1200, " (revised)")
    reports = {}
    stores = {}
    for path in ("bulk", "rows"):
        if path == "rows":
            monkeypatch.setattr(postgres, "BULK_ROWS", 10**9)
        url = indexed(in_schema(postgres_url, f"{path}_{uuid.uuid4().hex[:8]}"))
        store = stores[path] = PostgresStore.from_url(url)
        reports[path] = [
            store.upsert(first, vectors, MODEL),
            store.upsert(changed[:600] + first[600:], changed_vectors, MODEL),
            store.upsert(changed[:600] + first[600:], {}, MODEL),
        ]
    assert [(len(r.added), len(r.updated), len(r.unchanged)) for r in reports["bulk"]] == [
        (1200, 0, 0),
        (0, 600, 600),
        (0, 0, 1200),
    ]
    assert [vars(r) for r in reports["bulk"]] == [vars(r) for r in reports["rows"]]
    assert _state(stores["bulk"]) == _state(stores["rows"])
    assert stores["bulk"].get("bulk.tool_3").version == 2 and stores["bulk"].get("bulk.tool_900").version == 1
    assert stores["bulk"].wait_for_vector_index(60)
    query = vectors["h42"]
    assert next(iter(stores["bulk"].nearest("test-model", query, 3))) == "h42"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        indexes = conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'embeddings_hnsw_%%'",
            (stores["bulk"].schema,),
        ).fetchall()
    assert len(indexes) == 1  # dropped by each bulk write, built once after them


def test_the_small_talk_bank_never_meets_a_nearest_neighbour_query(
    postgres_url: str, embedder: CountingEmbedder
) -> None:
    """The bank's vectors live beside the tools' (one embedding per registry, not per process) but under a model key
    of their own: a query of the database's vector index returns tool texts only (before, the bank's 267 sentences
    crowded the tools out of approximate candidates)."""
    from toolrag.search import calibrate
    from toolrag.search.index import texts_by_hash

    registry = ToolRegistry(in_schema(postgres_url, f"bank_{uuid.uuid4().hex[:8]}"), embedder, RETRIEVAL)
    registry.register_many(SAMPLE_TOOLS)
    calibrate._BANK.clear()  # as in a new process: the bank is read from the store, or embedded and written there
    registry.search("tell me a joke")
    found = registry.store.nearest(embedder.model_id, embedder.embed_query("tell me a joke"), 50)  # type: ignore[attr-defined]
    assert found and set(found) <= set(texts_by_hash(registry.tools()))


def test_an_index_left_unbuilt_is_built_by_the_next_opener(postgres_url: str) -> None:
    """A process that ends between a bulk import and its index build leaves no HNSW index; the next store to open
    the registry builds it."""
    url = indexed(in_schema(postgres_url, f"unbuilt_{uuid.uuid4().hex[:8]}"))
    importer = PostgresStore.from_url(url)
    importer._index_builder.quiet_seconds = 3600  # the process "ends" before writes go quiet
    tools, vectors = _catalog(1200)
    importer.upsert(tools, vectors, MODEL)
    importer.close()
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        schema = importer.schema
        count = "SELECT count(*) FROM pg_indexes WHERE schemaname = %s AND indexname LIKE 'embeddings_hnsw_%%'"
        assert conn.execute(count, (schema,)).fetchone() == (0,)
        opener = PostgresStore.from_url(url)
        assert opener.wait_for_vector_index(60)
        assert conn.execute(count, (schema,)).fetchone() == (1,)


def _index_state(conn: psycopg.Connection, schema: str) -> list[tuple[str, bool]]:  # type: ignore[type-arg]
    """The schema's HNSW indexes, and whether each is valid (complete)."""
    query = (
        "SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname LIKE 'embeddings_hnsw_%%'"
    )
    return [(name, valid) for name, valid in conn.execute(query, (schema,)).fetchall()]


def _build_started(store: PostgresStore, timeout: float = 30.0) -> bool:
    """Whether the store's index build has started (and, held back, goes on running)."""
    deadline = time.monotonic() + timeout
    while not store._index_builder._busy and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # into its statement
    return store._index_builder._busy


def test_writes_go_on_while_the_vector_index_is_built(postgres_url: str) -> None:
    """After a bulk import the HNSW index took 11-15 minutes to build at 100k tools, under the write lock: every
    registry write waited for it. A build now runs concurrently with writes."""
    schema = f"building_{uuid.uuid4().hex[:8]}"
    store = PostgresStore.from_url(indexed(in_schema(postgres_url, schema)))
    store._index_builder.quiet_seconds = 1.0
    tools, vectors = _catalog(1200)
    with psycopg.connect(postgres_url) as blocker:
        store.upsert(tools, vectors, MODEL)
        # An open transaction that writes the table holds the build back (once the writes are quiet for a second),
        # as a build of 100k vectors would last.
        blocker.execute(sql.SQL("LOCK TABLE {}.embeddings IN ROW EXCLUSIVE MODE").format(sql.Identifier(schema)))
        assert _build_started(store)
        done = threading.Event()

        def write_one() -> None:
            store.upsert(
                [make_tool("during.build", "Registered while the index builds.")], {"d1": vectors["h1"]}, MODEL
            )
            done.set()

        threading.Thread(target=write_one, daemon=True).start()
        assert done.wait(10), "a single-tool write waited for the index build"
        blocker.rollback()
    assert store.wait_for_vector_index(60)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        assert [valid for _, valid in _index_state(conn, schema)] == [True]
    assert store.get("during.build") is not None
    store.close()


def test_a_bulk_write_cancels_a_running_index_build_which_is_built_again(
    postgres_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A bulk write drops the index: a build in flight gives way (it would wait for the write, and the write for
    it), and the index is built again, valid, once the writes stop; an opener finds an invalid one and rebuilds it."""
    schema = f"cancel_{uuid.uuid4().hex[:8]}"
    url = indexed(in_schema(postgres_url, schema))
    store = PostgresStore.from_url(url)
    store._index_builder.quiet_seconds = 1.0
    tools, vectors = _catalog(1200)
    changed, changed_vectors = _catalog(1200, " (revised)")
    with psycopg.connect(postgres_url) as blocker, psycopg.connect(postgres_url, autocommit=True) as watcher:
        store.upsert(tools, vectors, MODEL)
        blocker.execute(sql.SQL("LOCK TABLE {}.embeddings IN ROW EXCLUSIVE MODE").format(sql.Identifier(schema)))
        assert _build_started(store)
        finished = threading.Event()

        def bulk_write() -> None:
            store.upsert(changed, changed_vectors, MODEL)
            finished.set()

        with caplog.at_level(logging.INFO, logger="toolrag.store"):
            threading.Thread(target=bulk_write, daemon=True).start()
            time.sleep(1.0)  # the build is cancelled; the write's DROP INDEX waits for the blocker only
            blocker.rollback()
            assert finished.wait(30)
            assert store.wait_for_vector_index(60)
        assert "gave way to a bulk write" in caplog.text
        assert [valid for _, valid in _index_state(watcher, schema)] == [True]
    assert store.get("bulk.tool_5").version == 2
    store.close()


def test_other_processes_writes_are_announced_not_polled(postgres_url: str) -> None:
    """A search reads the generation PostgreSQL announced (LISTEN/NOTIFY), not the database; a write of this store
    is seen at once, another store's within moments, and without the listening connection the database is read."""
    url = in_schema(postgres_url, f"gen_{uuid.uuid4().hex[:8]}")
    reader, writer = open_store(url), open_store(url)
    assert isinstance(reader, PostgresStore) and isinstance(writer, PostgresStore)
    model = IndexModel("m", 2)
    first = reader.generation()
    writer.upsert([make_tool("a.b", "One tool.")], {}, model)
    assert writer.generation() == first + 1  # its own write: at once
    deadline = time.monotonic() + 20  # the listener connects in the background: on a busy machine, seconds
    while reader._generations.value != first + 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    reads: list[int] = []
    original = reader._read_generation
    reader._read_generation = lambda: reads.append(1) or original()  # type: ignore[method-assign]
    assert reader.generation() == first + 1 and not reads  # announced, not read
    reader._generations.stop()
    assert reader.generation() == first + 1 and reads  # no listener: read from the database
    reader.close()
    writer.close()


def test_a_search_never_waits_for_another_writer_s_lock(
    postgres_url: str, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first search keeps the small-talk bank's vectors in the store; while another writer holds the write lock
    (a vector index build after a bulk import holds it for minutes) it searches without keeping them."""
    from toolrag.search import calibrate

    schema = f"busy_{uuid.uuid4().hex[:8]}"
    url = in_schema(postgres_url, schema)
    ToolRegistry(url, embedder).register_many(SAMPLE_TOOLS)
    monkeypatch.setattr(calibrate, "_BANK", {})  # as in a new process: the bank is not in memory
    with psycopg.connect(postgres_url) as holder, holder.transaction():
        holder.execute(sql.SQL("LOCK TABLE {}.meta IN SHARE ROW EXCLUSIVE MODE").format(sql.Identifier(schema)))
        found: list[str] = []
        searching = threading.Thread(
            target=lambda: found.extend(
                r.name for r in ToolRegistry(url, embedder).search("will it rain in Paris tomorrow?")
            )
        )
        searching.start()
        searching.join(timeout=120)
        assert not searching.is_alive() and found[:1] == ["weather.forecast"]  # the lock is still held


def test_issue31_two_instances_writing_over_one_version_cannot_both_win(postgres_url: str) -> None:
    """Two instances on one database read version 1 and write together: one writes, the other gets the conflict."""
    url = in_schema(postgres_url, f"cas_{uuid.uuid4().hex[:8]}")
    instances = [PostgresStore.from_url(url) for _ in range(2)]
    instances[0].upsert([make_tool("a.tool", "First text.")], {}, MODEL)
    together = threading.Barrier(len(instances))
    outcomes: list[str] = []

    def write(store: PostgresStore, number: int) -> None:
        read = store.get("a.tool")
        assert read is not None
        edited = read.model_copy(update={"description": f"Text {number}."})
        together.wait()
        try:
            store.upsert([edited], {}, MODEL, expected={"a.tool": 1})
            outcomes.append("written")
        except EditConflictError:
            outcomes.append("conflict")

    threads = [threading.Thread(target=write, args=(store, n)) for n, store in enumerate(instances)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["conflict", "written"]
    final = instances[1].get("a.tool")
    assert final is not None and final.version == 2 and [t.version for t in instances[0].history("a.tool")] == [1, 2]
    for store in instances:
        store.close()
