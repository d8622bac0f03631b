"""What a search costs against plain dense retrieval with the same model on the same catalog, in one run (issue 51,
item 3: search p50 <= 2x plain dense, explain <= 3x a search).

    python benchmarks/search_cost.py [FOLDER ...] [--requests 200] [--graph [--providers 5]]

Each FOLDER is a benchmark set (shared/bench format; default: seal-tools, 4,076 tools); `--graph` adds the generated
graph catalog of benchmarks/graph_catalog.py (312 tools, requirements declared, so set completion runs). Per
catalog, after a warm-up, the same requests are timed, interleaved so that load moves every method alike:

- plain dense: embed the request with the registry's model, score every tool vector, take the top 10;
- `search()`: the whole default path (lexical and dense, fusion, decision, cut, set completion), query cache off;
- `explain()`: what the playground's Explain runs.

Medians (p50) and the ratios to plain dense in the same run are the figures; the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from graph_catalog import generate, write

from toolrag import Principal, ToolRegistry
from toolrag.eval.dataset import load_benchmark
from toolrag.search.config import SearchConfig

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"


def plain_dense(registry: ToolRegistry, request: str) -> list[int]:
    """The top 10 by cosine over every tool vector of the snapshot, with the registry's own model."""
    index = registry.snapshot()
    vector = (index.embedder or registry.embedder).embed_query(request)
    scores = index.vectors.scores(np.asarray(vector, dtype=np.float32))
    top = np.argpartition(-scores, 10)[:10]
    return [int(position) for position in top[np.argsort(-scores[top])]]


def measure(label: str, bench: Path, limit: int, folder: Path) -> dict[str, Any]:
    loaded = load_benchmark(bench, limit=limit)
    registry = ToolRegistry(folder / "registry.db", "default", SearchConfig(cache_entries=0))
    try:
        print(f"{label}: indexing {len(loaded.tools)} tools", file=sys.stderr)
        registry.register_many(loaded.tools)
        requests = [query.text for query in loaded.queries]
        principal = Principal.anonymous()
        for request in requests[:20]:  # warm up: models, snapshot, derived state
            registry.search(request, principal)
            plain_dense(registry, request)
        times: dict[str, list[float]] = {"plain dense": [], "search()": [], "explain()": []}
        for number, request in enumerate(requests, 1):
            for method, run in (
                ("plain dense", lambda r=request: plain_dense(registry, r)),
                ("search()", lambda r=request: registry.search(r, principal)),
                ("explain()", lambda r=request: registry.explain(r, principal)),
            ):
                started = time.perf_counter()
                run()
                times[method].append(time.perf_counter() - started)
            if number % 50 == 0:
                print(f"{label}: {number} of {len(requests)} requests", file=sys.stderr)
        p50 = {method: statistics.median(values) * 1000 for method, values in times.items()}
        return {
            "tools": len(registry.tools()),
            "requests": len(requests),
            **{f"{method} p50 ms": round(value, 1) for method, value in p50.items()},
            "search / plain dense": round(p50["search()"] / p50["plain dense"], 2),
            "explain / search": round(p50["explain()"] / p50["search()"], 2),
        }
    finally:
        registry.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--graph", action="store_true", help="also the generated graph catalog")
    parser.add_argument("--providers", type=int, default=5, help="the generated catalog's providers per capability")
    args = parser.parse_args()
    folders = args.folders or ([] if args.graph else [BENCH / "seal-tools"])
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="toolrag-search-cost-") as root:
        if args.graph:
            graph = Path(root) / "graph"
            write(graph, *generate(7, args.providers), with_graph=True)
            results["generated graph catalog"] = measure("graph", graph, args.requests, graph)
        for folder in folders:
            work = Path(root) / folder.name
            work.mkdir()
            results[folder.name] = measure(folder.name, folder, args.requests, work)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
