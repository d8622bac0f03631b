"""Dense scores: cosine of the request with each tool's best vector (its description or one of its aliases)."""

from __future__ import annotations

import numpy as np

from toolrag.search.index import SearchIndex
from toolrag.search.lexical import BoolArray, FloatArray


def dense_scores(index: SearchIndex, query_vector: FloatArray, visible: BoolArray | None) -> FloatArray:
    """One cosine per tool. Hidden tools get -1 and are dropped by the caller before any ranking."""
    if index.size == 0:
        return np.zeros(0, dtype=np.float32)
    row_scores = index.matrix @ query_vector.astype(np.float32)
    if index.has_aliases():
        per_tool = np.full(index.size, -1.0, dtype=np.float32)
        np.maximum.at(per_tool, index.row_tool, row_scores)
    else:
        per_tool = row_scores
    if visible is not None:
        per_tool = np.where(visible, per_tool, np.float32(-1.0))
    return per_tool.astype(np.float32, copy=False)
