"""Dense scores: cosine of the request with each tool's best vector (its description or one of its aliases)."""

from __future__ import annotations

import numpy as np

from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray, FloatArray, IntArray

MIN_VISIBLE_PROPOSED = 16  # fewer of the graph's proposals visible to the principal: scan exactly instead


def dense_scores(
    index: SearchIndex, query_vector: FloatArray, visible: BoolArray | None, candidates: int | None = None
) -> FloatArray:
    """One cosine per tool. Hidden tools get -1 and are dropped before any ranking. With `candidates` and a graph
    built for the snapshot (search/ann.py), only the rows it proposes and the rows appended since are scored."""
    if index.size == 0:
        return np.zeros(0, dtype=np.float32)
    graph = index.graph.graph if candidates else None
    if graph is not None and candidates:
        appended = np.arange(graph.rows, index.vectors.count, dtype=np.int64)
        rows = np.concatenate([graph.candidate_rows(query_vector, candidates), appended])
        if visible is None or int(visible[index.vectors.row_tool[rows]].sum()) >= MIN_VISIBLE_PROPOSED:
            return approximate_dense_scores(index, query_vector, visible, rows)
    row_scores = index.vectors.scores(query_vector.astype(np.float32))
    if index.has_aliases():
        per_tool = np.full(index.size, -1.0, dtype=np.float32)
        np.maximum.at(per_tool, index.vectors.row_tool, row_scores)
    else:
        per_tool = row_scores
    return _hide(per_tool, visible)


def approximate_dense_scores(
    index: SearchIndex, query_vector: FloatArray, visible: BoolArray | None, rows: IntArray
) -> FloatArray:
    """Cosines of the tools of `rows` (an approximate index's proposal), computed exactly; every other tool gets the
    lowest of those, a bound on its own cosine, so fusion treats it as dense-irrelevant."""
    if len(rows) == 0:
        return _hide(np.zeros(index.size, dtype=np.float32), visible)
    row_scores = index.vectors.take(rows) @ query_vector.astype(np.float32)
    per_tool = np.full(index.size, float(row_scores.min()), dtype=np.float32)
    np.maximum.at(per_tool, index.vectors.row_tool[rows], row_scores)
    return _hide(per_tool, visible)


def exact_dense_scores(index: SearchIndex, query_vector: FloatArray, positions: IntArray) -> FloatArray:
    """The cosines of the tools at `positions` (each its best row), computed exactly whatever index proposed them."""
    rows = index.vectors.rows_of(positions)
    best = np.full(index.size, -1.0, dtype=np.float32)
    np.maximum.at(best, index.vectors.row_tool[rows], index.vectors.take(rows) @ query_vector.astype(np.float32))
    return best[positions]


def _hide(per_tool: FloatArray, visible: BoolArray | None) -> FloatArray:
    if visible is not None:
        per_tool = np.where(visible, per_tool, np.float32(-1.0))
    return per_tool.astype(np.float32, copy=False)
