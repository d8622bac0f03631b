"""Dense scores: cosine of the request with each tool's best vector (its description or one of its aliases)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray, FloatArray

NearestSearch = Callable[[FloatArray, int], dict[str, float]]


def dense_scores(index: SearchIndex, query_vector: FloatArray, visible: BoolArray | None) -> FloatArray:
    """One cosine per tool, from an exact scan. Hidden tools get -1 and are dropped before any ranking."""
    if index.size == 0:
        return np.zeros(0, dtype=np.float32)
    row_scores = index.vectors.scores(query_vector.astype(np.float32))
    if index.has_aliases():
        per_tool = np.full(index.size, -1.0, dtype=np.float32)
        np.maximum.at(per_tool, index.vectors.row_tool, row_scores)
    else:
        per_tool = row_scores
    return _hide(per_tool, visible)


def approximate_dense_scores(
    index: SearchIndex, query_vector: FloatArray, visible: BoolArray | None, nearest: NearestSearch, candidates: int
) -> FloatArray:
    """Cosines of the tools whose vectors an approximate index (the store's) finds nearest, computed exactly;
    every other tool gets the lowest of those, a bound on its own cosine, so fusion treats it as dense-irrelevant."""
    if index.size == 0:
        return np.zeros(0, dtype=np.float32)
    found = nearest(query_vector, candidates)
    rows = np.array([index.row_of_text[key] for key in found if key in index.row_of_text], dtype=np.int64)
    if len(rows) == 0:
        return _hide(np.zeros(index.size, dtype=np.float32), visible)
    row_scores = index.vectors.take(rows) @ query_vector.astype(np.float32)
    per_tool = np.full(index.size, float(row_scores.min()), dtype=np.float32)
    np.maximum.at(per_tool, index.vectors.row_tool[rows], row_scores)
    return _hide(per_tool, visible)


def _hide(per_tool: FloatArray, visible: BoolArray | None) -> FloatArray:
    if visible is not None:
        per_tool = np.where(visible, per_tool, np.float32(-1.0))
    return per_tool.astype(np.float32, copy=False)
