"""Fusion of the lexical and dense signals into one score in [0, 1].

Each signal is min-max normalized over the visible candidates of this request, then mixed with the dense
weight. Reciprocal rank fusion and low dense weights lose badly on sets where BM25 is weak (metatool); among the
weights and normalizations compared in docs/benchmarks.md, this one scored best on bfcl and metatool.
"""

from __future__ import annotations

import numpy as np

from toolrag.search.lexical import FloatArray, IntArray

# Below this spread the candidates' values are equal: matrix products round the same cosine differently in its
# last bits depending on the row it sits in, and normalizing would blow that noise up to a 0-or-1 difference (two
# tools with the same text ranked in the order they happen to sit in the index).
NOISE = 1e-5


def min_max(values: FloatArray) -> FloatArray:
    if len(values) == 0:
        return values
    low, high = float(values.min()), float(values.max())
    if high - low <= NOISE:
        return np.zeros_like(values) if high <= 0 else np.ones_like(values)
    return ((values - low) / (high - low)).astype(np.float32)


def fuse(dense: FloatArray, lexical: FloatArray, candidates: IntArray, dense_weight: float) -> FloatArray:
    """Fused scores of `candidates` (positions into the per-tool arrays), aligned with them."""
    return (dense_weight * min_max(dense[candidates]) + (1.0 - dense_weight) * min_max(lexical[candidates])).astype(
        np.float32
    )
