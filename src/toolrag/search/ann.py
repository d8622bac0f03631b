"""Dense candidates from an approximate index, for registries too large to scan exactly on every request.

Past `SearchConfig.ann_min_tools` tools the exact scan (every vector times the request) costs several times the
request's embedding (docs/benchmarks.md "Beyond 100k"). An HNSW graph (usearch, in-process, the same on either
store) then proposes the `ann_candidates` rows nearest the request; their cosines are computed exactly from the
snapshot's own vectors, and every other tool gets the lowest of them, a bound on its own. The graph covers the
snapshot's base rows: rows appended since are few and scanned exactly, as are the few rows the graph cannot reach
(VectorGraph), tombstoned and hidden tools are masked out as always. A principal that sees few of the proposed
tools gets the exact scan: the graph does not know who may see what.

The graph is built in the background after a snapshot is built or compacted (searches scan exactly until it is
ready), saved beside the snapshot file and mapped by the next process.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from toolrag.search.lexical import FloatArray, IntArray

log = logging.getLogger("toolrag.search")

# Graphs of earlier builds (graph.usearch: other parameters; graph-2.usearch: without the list of the rows they cannot
# reach) are built again, not mapped.
GRAPH_FILE = "graph-3.usearch"
ORPHANS_FILE = "graph-3-orphans.npy"
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
    proposed rows are rescored exactly from the snapshot's own float32 vectors), and the rows it cannot reach.

    HNSW leaves a few rows that no search reaches (its neighbour pruning: 259 of a million here, with one thread;
    usearch's concurrent add() strands more, unum-cloud/USearch#735). Their tools would never come up, so they are
    found once, after the build, by searching the whole graph, and every search scans them exactly."""

    def __init__(self, graph: Any, rows: int, orphans: IntArray) -> None:
        self._graph = graph
        self.rows = rows
        self.orphans = orphans

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
        vectors = np.ascontiguousarray(matrix, dtype=np.float32)
        graph.add(np.arange(len(matrix), dtype=np.uint64), vectors)
        return cls(graph, len(matrix), _unreached(graph, vectors[0], len(matrix)))

    @classmethod
    def mapped(cls, path: Path, rows: int) -> VectorGraph:
        """The graph saved at `path`, mapped (not read), with its orphans saved beside it; ValueError when it does not
        cover `rows` rows or its orphans are missing."""
        from usearch.index import Index

        graph = Index.restore(str(path), view=True)
        if graph is None or len(graph) != rows:
            raise ValueError(f"{path} does not hold a graph of {rows} rows")
        try:
            orphans = np.load(path.parent / ORPHANS_FILE, allow_pickle=False)
        except (OSError, ValueError, EOFError) as error:
            raise ValueError(f"{path}: the list of rows it cannot reach is missing or unreadable ({error})") from None
        fits = orphans.ndim == 1 and orphans.dtype == np.int64
        if not fits or (len(orphans) and not 0 <= orphans.min() <= orphans.max() < rows):
            raise ValueError(f"{path}: its list of unreachable rows does not fit a graph of {rows} rows")
        graph.expansion_search = EXPANSION_SEARCH  # type: ignore[misc]  # a setter the stubs miss
        return cls(graph, rows, orphans)

    def candidate_rows(self, vector: FloatArray, count: int) -> IntArray:
        """The `count` rows nearest `vector` the graph finds, then the rows it cannot reach."""
        matches = self._graph.search(np.asarray(vector, dtype=np.float32), min(count, self.rows))
        return np.concatenate([np.asarray(matches.keys, dtype=np.int64), self.orphans])

    def save(self, folder: Path) -> None:
        """Into `folder` (a snapshot's), through temporary files, so a reader never maps half a graph: the orphans
        first, since a reader takes the graph file as the sign that both are there."""
        _replace_through_staging(folder, ORPHANS_FILE, self._save_orphans)
        _replace_through_staging(folder, GRAPH_FILE, self._graph.save)

    def _save_orphans(self, path: str) -> None:
        with open(path, "wb") as file:  # a file, not a name: np.save would add ".npy" to the name
            np.save(file, self.orphans)


def _unreached(graph: Any, start: FloatArray, rows: int) -> IntArray:
    """The rows a search of the whole graph (as wide as it is large) does not reach."""
    graph.expansion_search = rows
    try:
        reached = np.asarray(graph.search(start, rows).keys, dtype=np.int64)
    finally:
        graph.expansion_search = EXPANSION_SEARCH
    missing = np.ones(rows, dtype=np.bool_)
    missing[reached] = False
    return np.flatnonzero(missing).astype(np.int64)


def _replace_through_staging(folder: Path, name: str, write: Callable[[str], Any]) -> None:
    handle, staging = tempfile.mkstemp(prefix=f".{name}-", dir=folder)
    os.close(handle)
    try:
        write(staging)
        os.replace(staging, folder / name)
    except BaseException:
        Path(staging).unlink(missing_ok=True)
        raise
