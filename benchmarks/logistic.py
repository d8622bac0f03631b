"""Logistic regression by Newton's method with an L2 penalty (not on the bias): the small models the benchmarks fit
(the relevance model of benchmarks/confidence.py, the learned fusion of benchmarks/fusion.py)."""

from __future__ import annotations

import numpy as np


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 50) -> np.ndarray:
    """Weights in the order of `x`'s columns, then the bias."""
    design = np.hstack([x, np.ones((len(x), 1))])
    weights = np.zeros(design.shape[1])
    penalty = np.full(design.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ weights))
        gradient = design.T @ (p - y) + penalty * weights
        hessian = (design * (p * (1 - p))[:, None]).T @ design + np.diag(penalty + 1e-9)
        weights -= np.linalg.solve(hessian, gradient)
    return weights
