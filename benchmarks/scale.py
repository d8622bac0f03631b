"""Index build throughput, search latency and memory at 1k, 10k and 100k tools (synthetic catalog).

    python benchmarks/scale.py --sizes 1000 10000 100000 [--embedder default] [--queries 300]

Each size runs in two fresh processes: one indexes (throughput, peak memory while indexing), one opens the
registry and searches (latency with the request embedding included, embedding alone measured on the same
requests in the same process, peak memory while serving). Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from synthetic import synthetic_requests, synthetic_tools

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder

PRINCIPAL = Principal(user="bench", scopes=frozenset({"billing:write", "crm:write", "hr:write"}))


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def index(size: int, path: str, embedder: str) -> dict[str, float]:
    tools = synthetic_tools(size)
    registry = ToolRegistry(path, make_embedder(embedder))
    total = registry.texts_to_embed(tools)
    started = time.perf_counter()
    done = 0

    def progress(count: int) -> None:
        nonlocal done
        done += count
        if done % 5000 < count:
            print(f"  {done}/{total} texts embedded", file=sys.stderr, flush=True)

    registry.register_many(tools, progress=progress)
    seconds = time.perf_counter() - started
    return {
        "index_seconds": round(seconds, 1),
        "tools_per_second": round(size / seconds, 1),
        "index_peak_mib": round(peak_mib()),
    }


def search(size: int, path: str, embedder: str, queries: int) -> dict[str, float]:
    started = time.perf_counter()
    registry = ToolRegistry(path, make_embedder(embedder), SearchConfig(cache_entries=0))
    registry.search("warm up", PRINCIPAL)  # loads the models and builds the in-memory index
    open_seconds = time.perf_counter() - started
    requests = synthetic_requests(queries)
    embed_ms, search_ms = [], []
    for request in requests:
        t0 = time.perf_counter()
        registry.embedder.embed_query(request)
        t1 = time.perf_counter()
        registry.search(request, PRINCIPAL)
        t2 = time.perf_counter()
        embed_ms.append((t1 - t0) * 1000)
        search_ms.append((t2 - t1) * 1000)
    embed_p50 = statistics.median(embed_ms)
    search_p50 = statistics.median(search_ms)
    return {
        "open_seconds": round(open_seconds, 2),
        "embed_p50_ms": round(embed_p50, 2),
        "search_p50_ms": round(search_p50, 2),
        "search_p95_ms": round(sorted(search_ms)[int(len(search_ms) * 0.95)], 2),
        "search_over_embed": round(search_p50 / embed_p50, 2),
        "serve_peak_mib": round(peak_mib()),
    }


def run_child(stage: str, size: int, path: str, embedder: str, queries: int) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--child",
        stage,
        "--sizes",
        str(size),
        "--db",
        path,
        "--embedder",
        embedder,
        "--queries",
        str(queries),
    ]
    output = subprocess.run(command, capture_output=True, text=True)
    sys.stderr.write(output.stderr)
    if output.returncode != 0:
        raise SystemExit(f"{stage} at {size} tools failed (exit {output.returncode})")
    return dict(json.loads(output.stdout))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--embedder", default="default")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--child", choices=["index", "search"])
    parser.add_argument("--db")
    args = parser.parse_args()
    if args.child == "index":
        print(json.dumps(index(args.sizes[0], args.db, args.embedder)))
        return
    if args.child == "search":
        print(json.dumps(search(args.sizes[0], args.db, args.embedder, args.queries)))
        return
    rows = []
    with tempfile.TemporaryDirectory(prefix="toolrag-scale-") as folder:
        for size in args.sizes:
            path = str(Path(folder) / f"{size}.db")
            print(f"{size} tools: indexing", file=sys.stderr, flush=True)
            row: dict[str, float] = {"tools": size}
            row |= run_child("index", size, path, args.embedder, args.queries)
            print(f"{size} tools: searching", file=sys.stderr, flush=True)
            row |= run_child("search", size, path, args.embedder, args.queries)
            row["db_mib"] = round(Path(path).stat().st_size / 2**20, 1)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(markdown(rows))


def markdown(rows: list[dict[str, float]]) -> str:
    header = (
        "| tools | index s | tools/s | index peak MiB | open s | embed p50 ms | search p50 ms | search p95 ms "
        "| search/embed | serve peak MiB | db MiB |"
    )
    lines = [header, "|" + "---|" * 11]
    for r in rows:
        lines.append(
            f"| {r['tools']:,} | {r['index_seconds']} | {r['tools_per_second']} | {r['index_peak_mib']} "
            f"| {r['open_seconds']} | {r['embed_p50_ms']} | {r['search_p50_ms']} | {r['search_p95_ms']} "
            f"| {r['search_over_embed']} | {r['serve_peak_mib']} | {r['db_mib']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
