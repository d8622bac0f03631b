"""Dense candidates from an approximate index, for registries too large to scan exactly on every request.

Past `SearchConfig.ann_min_tools` tools the exact scan (every vector times the request) costs several times the
request's embedding (docs/benchmarks.md "Beyond 100k"). An HNSW graph (usearch, in-process, the same on either
store) then proposes the `ann_candidates` rows nearest the request; their cosines are computed exactly from the
snapshot's own vectors, and every other tool gets the lowest of them, a bound on its own. The graph covers the
snapshot's base rows: rows appended since are few and scanned exactly, tombstoned and hidden tools are masked
out as always. A principal that sees few of the proposed tools gets the exact scan: the graph does not know who
may see what.

The graph is built in the background after a snapshot is built or compacted (searches scan exactly until it is
ready), saved beside the snapshot file and mapped by the next process.
"""

from __future__ import annotations

import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.search.lexical import FloatArray, IntArray

log = logging.getLogger("toolrag.search")

# Graphs of earlier builds (graph.usearch: other parameters; graph-2.usearch: built by several threads, which can
# leave rows unreachable) are built again, not mapped.
GRAPH_FILE = "graph-3.usearch"
# Measured on real-shaped vectors of 1,280 dimensions and real requests (benchmarks/beyond_100k.py): int8 builds 2x
# faster than float16 at the same recall. A million tools are 2,000 topics of 500 near neighbours each, and a graph
# of connectivity 16 searched 1,000 wide lost a fifth of the exact top 10 (recall@10 0.81): it stayed inside one
# topic's neighbours. Connectivity 32, 128 while adding and a search 5,000 wide bring recall@10 at 1M to 0.99
# (4,000: 0.984; 3,000: 0.98) in 20 ms against the exact scan's 170; at 300k the same graph finds the exact top 10.
CONNECTIVITY = 32
EXPANSION_ADD = 128
EXPANSION_SEARCH = 5000
DTYPE = "i8"


class GraphSlot:
    """Where the graph of a snapshot's base rows appears once built; shared by the snapshots that follow that base
    a change at a time (their base rows are the same)."""

    def __init__(self) -> None:
        self.graph: VectorGraph | None = None


class VectorGraph:
    """An HNSW graph over a matrix's rows (keys: row numbers), by inner product, its vectors kept in int8 (the
    proposed rows are rescored exactly from the snapshot's own float32 vectors)."""

    def __init__(self, graph: Any, rows: int) -> None:
        self._graph = graph
        self.rows = rows

    @classmethod
    def build(cls, matrix: FloatArray) -> VectorGraph:
        from usearch.index import Index

        graph = Index(
            ndim=matrix.shape[1],
            metric="ip",
            dtype=DTYPE,
            connectivity=CONNECTIVITY,
            expansion_add=EXPANSION_ADD,
            expansion_search=EXPANSION_SEARCH,
        )
        # One thread: usearch's concurrent add() strands a few nodes that no search reaches (unum-cloud/USearch#735,
        # open; here 4-7 rows of 20,000, and one build in six of a 100-row test registry), whose tools then never
        # come up. One thread builds about 1.7 times slower, in the background.
        graph.add(np.arange(len(matrix), dtype=np.uint64), np.ascontiguousarray(matrix, dtype=np.float32), threads=1)
        return cls(graph, len(matrix))

    @classmethod
    def mapped(cls, path: Path, rows: int) -> VectorGraph:
        """The graph saved at `path`, mapped (not read); ValueError when it does not cover `rows` rows."""
        from usearch.index import Index

        graph = Index.restore(str(path), view=True)
        if graph is None or len(graph) != rows:
            raise ValueError(f"{path} does not hold a graph of {rows} rows")
        graph.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # a setter the stubs miss
        return cls(graph, rows)

    def reachable(self) -> int:
        """How many rows a search reaches from the graph's entry: every row unless the build went wrong. It searches
        the whole graph (not while others search it: it widens the search for the time it takes)."""
        width = self._graph.expansion_search
        self._graph.expansion_search = max(width, self.rows)
        try:
            return len(self._graph.search(np.asarray(self._graph.get(0), dtype=np.float32), self.rows).keys)
        finally:
            self._graph.expansion_search = width

    def nearest_rows(self, vector: FloatArray, count: int) -> IntArray:
        matches = self._graph.search(np.asarray(vector, dtype=np.float32), min(count, self.rows))
        return np.asarray(matches.keys, dtype=np.int64)

    def save(self, folder: Path) -> None:
        """Into `folder` (a snapshot's), through a temporary file, so a reader never maps half a graph."""
        handle, staging = tempfile.mkstemp(prefix=".graph-", dir=folder)
        os.close(handle)
        try:
            self._graph.save(staging)
            os.replace(staging, folder / GRAPH_FILE)
        except BaseException:
            Path(staging).unlink(missing_ok=True)
            raise
