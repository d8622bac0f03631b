"""Whether a request needs a tool, and how likely each candidate is to be the one: what search() decides and shows.

The fused score orders tools within one request (it is min-max normalized, so the best tool always looks strong);
it cannot say whether anything is relevant. Two estimates that mean the same across requests, registries and
languages replace it:

- the request's evidence: its margin (best cosine with a tool minus cosine with its nearest small talk) minus the
  level the small-talk bank reaches against this registry (search/calibrate.py). A request with evidence below 0
  looks like small talk and gets no tool; the rule has no fitted parameter besides the quantile;
- each candidate's probability of being relevant: a logistic model over the request's evidence and the candidate's
  place among the others (its cosine below the best, also relative to the spread of the candidates' cosines,
  which is narrow in other languages than English; its rank and fused score). It was fitted on the candidates of
  the shared development sets' requests that need a tool (benchmarks/confidence.py prints these coefficients and
  the calibration on each set, also fitted without it; docs/benchmarks.md). It is the score search() shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from toolrag.search.cut import Ranked

SPREAD_OVER = 10  # candidates whose cosines measure the spread (search() ranks at least this many)
FEATURES = (
    "evidence",
    "below_best_scaled",
    "below_best",
    "inverse_rank",
    "fused",
    "first",
    "evidence_if_first",
    "english",
)


@dataclass(frozen=True)
class Candidates:
    """A request's best candidates, in the order of the fused score, and what they share."""

    items: list[Ranked]
    evidence: float  # > 0: the request reads as a request for a tool (module docstring)
    english: bool

    @property
    def needs_tool(self) -> bool:
        return self.evidence >= 0 or any(item.name_match or item.routed_category for item in self.items)


def features(candidates: Candidates) -> npt.NDArray[np.float64]:
    """One row per candidate, in the order of FEATURES."""
    cosines = np.array([item.dense for item in candidates.items], dtype=np.float64)
    fused = np.array([item.score for item in candidates.items], dtype=np.float64)
    below_best = cosines - cosines.max()
    spread = cosines.max() - cosines[:SPREAD_OVER].min() + 1e-3
    first = (np.arange(len(cosines)) == 0).astype(np.float64)
    evidence = np.full(len(cosines), candidates.evidence)
    return np.column_stack(
        [
            evidence,
            below_best / spread,
            below_best,
            1.0 / (np.arange(len(cosines)) + 1.0),
            fused,
            first,
            evidence * first,
            np.full(len(cosines), 1.0 if candidates.english else 0.0),
        ]
    )


@dataclass(frozen=True)
class RelevanceModel:
    """Logistic regression over `features`: weights in the order of FEATURES, then the bias."""

    weights: tuple[float, ...]
    bias: float

    def probabilities(self, candidates: Candidates) -> list[float]:
        if not candidates.items:
            return []
        logits = features(candidates) @ np.asarray(self.weights) + self.bias
        return [float(p) for p in 1.0 / (1.0 + np.exp(-logits))]


# Fitted by `python benchmarks/confidence.py fit` on bfcl, metatool, metatool-multilingual and the example set.
MODEL = RelevanceModel(weights=(-0.1852, 1.0794, 0.9507, 3.1121, 4.4436, -1.0454, 3.6301, -0.6110), bias=-6.0109)
