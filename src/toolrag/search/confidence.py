"""Whether a request needs a tool, and how likely each candidate is to be the one: what search() decides and shows.

The fused score orders tools within one request (it is min-max normalized, so the best tool always looks strong);
it cannot say whether anything is relevant. Two estimates that mean the same across requests, registries and
languages replace it:

- the request's evidence: its margin (best cosine with a tool minus cosine with its nearest small talk) minus the
  level the small-talk bank reaches against this registry (search/calibrate.py). A request with evidence below 0
  looks like small talk and gets no tool; the rule has no fitted parameter besides the quantile;
- each candidate's probability of being relevant: a logistic model over the request's evidence and the candidate's
  place among the others (its cosine below the best, its rank). It was fitted on the candidates of the shared
  development sets' requests that need a tool (benchmarks/confidence.py prints these coefficients and the
  calibration on each set, also fitted without it; docs/benchmarks.md). It is the score search() shows.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from toolrag.embed.language import guess_language
from toolrag.search.cut import Ranked

SPREAD_OVER = 10  # candidates search() ranks at least, so the best cosine is among them
# The fused score and the gap scaled by the candidates' spread were features too; left out, the model fitted without a
# set is calibrated better on that set (chosen on the tuning halves, docs/benchmarks.md "Confidence that transfers").
FEATURES = (
    "evidence",
    "below_best",
    "inverse_rank",
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
    first = (np.arange(len(cosines)) == 0).astype(np.float64)
    evidence = np.full(len(cosines), candidates.evidence)
    return np.column_stack(
        [
            evidence,
            cosines - cosines.max(),
            1.0 / (np.arange(len(cosines)) + 1.0),
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


# Fitted by `python benchmarks/confidence.py fit` on bfcl, metatool, metatool-multilingual(-xl) and the example set.
MODEL = RelevanceModel(weights=(1.1971, 7.5194, 5.1074, -1.0833, 2.6801, 0.0076), bias=-4.1742)
# The languages of the requests it was fitted on: elsewhere its probabilities are an extrapolation, and say so.
FITTED_LANGUAGES = frozenset({"en", "de", "uk", "zh", "es", "fr", "pl"})


def fitted_for(request: str) -> bool:
    """Whether the request is in a language the relevance model was fitted on (as far as its letters and function
    words tell: embed/language.py)."""
    return guess_language(request) in FITTED_LANGUAGES
