"""The dense scan against an approximate index at 100k and 1M tools: time, memory, build time, and what the
approximate index loses (recall@10 of the dense ranking against the exact scan).

    python benchmarks/beyond_100k.py --sizes 100000 1000000 [--anchors 2000] [--queries 200]

Embedding a million tool texts takes hours on two cores, so the vectors are built from real ones: `--anchors`
distinct synthetic tool texts (benchmarks/synthetic.py) embedded by the default model, and each tool's vector is an
anchor's plus Gaussian noise (cosine with its anchor about 0.8), normalized: the geometry of real tool embeddings
(topics, near neighbours) at any size. Requests are real: synthetic requests embedded by the default model. Per
size: the request embedding alone (p50), the exact scan (every vector times the request, per-tool best), the graph
(search/ann.py: its build, its memory, a search of `ann_candidates` rows plus their exact rescoring), and recall@10:
the share of the exact top 10 tools the graph's top 10 holds; and the rows no search of the graph reaches (search
scans them exactly).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from synthetic import synthetic_requests, synthetic_tools

from toolrag.embed import make_embedder
from toolrag.search.ann import VectorGraph
from toolrag.search.config import SearchConfig
from toolrag.search.text import dense_text

NOISE = 0.75  # per-dimension noise relative to a unit anchor: cosine with the anchor about 0.8


def tool_vectors(anchors: np.ndarray, size: int, seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    out = np.empty((size, anchors.shape[1]), dtype=np.float32)
    scale = NOISE / np.sqrt(anchors.shape[1])
    for start in range(0, size, 50_000):
        end = min(size, start + 50_000)
        block = anchors[rng.integers(0, len(anchors), end - start)]
        block = block + rng.standard_normal(block.shape).astype(np.float32) * scale
        out[start:end] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def top_tools(scores: np.ndarray, k: int = 10) -> set[int]:
    return set(np.argpartition(-scores, k)[:k].tolist())


def measure(size: int, anchors: np.ndarray, queries: np.ndarray, embed_ms: float, candidates: int) -> dict[str, float]:
    matrix = tool_vectors(anchors, size)
    exact_ms, exact_tops = [], []
    for query in queries:
        started = time.perf_counter()
        scores = matrix @ query
        exact_ms.append((time.perf_counter() - started) * 1000)
        exact_tops.append(top_tools(scores))
    started = time.perf_counter()
    graph = VectorGraph.build(matrix)
    build_s = time.perf_counter() - started
    graph_ms, recalls = [], []
    for query, expected in zip(queries, exact_tops, strict=True):
        started = time.perf_counter()
        rows = graph.candidate_rows(query, candidates)
        rescored = matrix[rows] @ query
        found = set(rows[np.argsort(-rescored)[:10]].tolist())
        graph_ms.append((time.perf_counter() - started) * 1000)
        recalls.append(len(found & expected) / 10)
    exact_p50, graph_p50 = statistics.median(exact_ms), statistics.median(graph_ms)
    return {
        "tools": size,
        "matrix_mib": round(matrix.nbytes / 2**20),
        "graph_mib": round(graph._graph.memory_usage / 2**20),
        "embed_p50_ms": round(embed_ms, 2),
        "exact_scan_p50_ms": round(exact_p50, 2),
        "exact_over_embed": round(exact_p50 / embed_ms, 2),
        "graph_build_s": round(build_s, 1),
        "graph_search_p50_ms": round(graph_p50, 2),
        "graph_over_embed": round(graph_p50 / embed_ms, 2),
        "recall_at_10": round(float(np.mean(recalls)), 4),
        "recall_at_10_min": round(float(np.min(recalls)), 2),
        "unreachable_rows": len(graph.orphans),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--anchors", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    embedder = make_embedder("default")
    texts = [dense_text(tool) for tool in synthetic_tools(args.anchors)]
    print(f"embedding {len(texts)} anchor texts", file=sys.stderr, flush=True)
    anchors = np.asarray(embedder.embed_documents(texts), dtype=np.float32)
    requests = synthetic_requests(args.queries)
    embedder.embed_query(requests[0])
    embed_ms, vectors = [], []
    for request in requests:
        started = time.perf_counter()
        vectors.append(embedder.embed_query(request))
        embed_ms.append((time.perf_counter() - started) * 1000)
    queries = np.vstack(vectors).astype(np.float32)
    rows = []
    for size in args.sizes:
        print(f"{size} tools", file=sys.stderr, flush=True)
        row = measure(size, anchors, queries, statistics.median(embed_ms), SearchConfig().ann_candidates)
        rows.append(row)
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
