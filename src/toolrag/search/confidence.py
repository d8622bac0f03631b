"""Whether a request needs a tool, and how likely each candidate is to be the one: what search() decides and shows.

The fused score orders tools within one request (it is min-max normalized, so the best tool always looks strong);
it cannot say whether anything is relevant. Two estimates that mean the same across requests, registries and
languages replace it:

- the request's evidence: its margin (best cosine with a tool minus cosine with its nearest small talk) minus the
  level the small-talk bank reaches against this registry (search/calibrate.py). A request with evidence below 0
  looks like small talk and gets no tool; the rule has no fitted parameter besides the quantile;
- each candidate's probability of serving the request: a logistic model over the request's evidence and the
  candidate's place among the others (its cosine below the best, its rank). Catalogs never hold every tool asked
  for, and permissions hide many they hold, so it was fitted on the development sets' requests twice: with their
  tools present, and with them hidden from the principal (the right answer then is nothing), in equal numbers
  (benchmarks/absent.py; docs/benchmarks.md "A tool or none"). A registry expecting another share of such requests
  says so (`SearchConfig.absent_share`), and the probabilities move with it. It is the score search() shows, and
  the likeliest tool is returned only at `SearchConfig.no_tool_below` or above (search/cut.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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

    def signals(self) -> Signals:
        return Signals(self.evidence, self.english, tuple(item.dense for item in self.items))


@dataclass(frozen=True)
class Signals:
    """What the relevance model reads of a request's candidates (benchmarks/absent.py keeps it to fit the model)."""

    evidence: float
    english: bool
    dense: tuple[float, ...]  # each candidate's cosine, in the order of the fused score

    def to_json(self) -> dict[str, object]:
        return {"evidence": self.evidence, "english": self.english, "dense": list(self.dense)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Signals:
        return cls(float(data["evidence"]), bool(data["english"]), tuple(float(c) for c in data["dense"]))


def feature_matrix(signals: Signals) -> npt.NDArray[np.float64]:
    """One row per candidate, in the order of FEATURES."""
    cosines = np.array(signals.dense, dtype=np.float64)
    first = (np.arange(len(cosines)) == 0).astype(np.float64)
    evidence = np.full(len(cosines), signals.evidence)
    columns = {
        "evidence": evidence,
        "below_best": cosines - cosines.max(),
        "inverse_rank": 1.0 / (np.arange(len(cosines)) + 1.0),
        "first": first,
        "evidence_if_first": evidence * first,
        "english": np.full(len(cosines), 1.0 if signals.english else 0.0),
    }
    return np.column_stack([columns[name] for name in FEATURES])


def features(candidates: Candidates) -> npt.NDArray[np.float64]:
    """One row per candidate, in the order of FEATURES."""
    return feature_matrix(candidates.signals())


@dataclass(frozen=True)
class RelevanceModel:
    """Logistic regression over `features`: weights in the order of FEATURES, then the bias."""

    weights: tuple[float, ...]
    bias: float

    fitted_absent_share: float = 0.5  # the share of requests whose tools were hidden in the data it was fitted on

    def probabilities(self, candidates: Candidates, absent_share: float | None = None) -> list[float]:
        if not candidates.items:
            return []
        return self.from_signals(candidates.signals(), absent_share)

    def from_signals(self, signals: Signals, absent_share: float | None = None) -> list[float]:
        """`absent_share`: the share of requests whose tool the registry is expected not to hold (None: the share
        it was fitted at); the odds that the request's tool is here move by the ratio of the two shares' odds."""
        if not signals.dense:
            return []
        logits = feature_matrix(signals) @ np.asarray(self.weights) + self.bias
        if absent_share is not None:
            logits += _odds(1 - absent_share) - _odds(1 - self.fitted_absent_share)
        return [float(p) for p in 1.0 / (1.0 + np.exp(-logits))]


def _odds(share: float) -> float:
    """The log odds of `share`."""
    return float(np.log(share / (1 - share)))


# Fitted by `python benchmarks/absent.py fit` on the tuning halves of bfcl, metatool, seal-tools,
# metatool-multilingual-xl and the generated graph catalog, each request with its tools present and hidden. Signals
# the issue proposed (the share of request words a tool covers, its lexical coverage, its lead over the runner-up,
# the runner-up's likeness to it, whether the models that serve the language agree on the nearest) fitted the tuning
# halves better and did no better on left-out catalogs (docs/benchmarks.md "A tool or none"): they are not read.
MODEL = RelevanceModel(weights=(5.3055, 5.4197, 4.3708, -1.0325, 0.3756, -0.2653), bias=-4.8823)
# The languages of the requests it was fitted on: elsewhere its probabilities are an extrapolation, and say so.
FITTED_LANGUAGES = frozenset({"en", "de", "uk", "zh", "es", "fr", "pl"})


def fitted_for(request: str) -> bool:
    """Whether the request is in a language the relevance model was fitted on (as far as its letters and function
    words tell: embed/language.py)."""
    return guess_language(request) in FITTED_LANGUAGES
