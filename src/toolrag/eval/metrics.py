"""Metrics as shared/bench/README.md defines them.

The ranking (no threshold, no cut): Recall@k, nDCG@10 with binary gains, MRR@10, and Hit@k (at least one relevant
tool in the top k). What a caller receives from `search()` (after the decision and the cut): delivered hit
(at least one relevant tool returned), delivered recall, the share of requests answered with nothing, and how many
tools came back; and whether the scores it shows are calibrated probabilities (a reliability table and the expected
calibration error). For requests that need several tools, whether the whole set is there: all-required@k (every
relevant tool in the top k), set recall@10, and delivered all-required, overall and per number of tools needed. For
requests that need no tool: the share that got one anyway. And whether one mode really
ranks better than another on a set: the paired difference of their nDCG@10 with a bootstrap interval (a slice of 20
requests moves by 0.05 when one request does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class QueryScores:
    lang: str
    recall_1: float
    recall_3: float
    recall_5: float
    ndcg_10: float
    mrr_10: float
    hit_3: float
    hit_5: float
    delivered_hit: float
    delivered_recall: float
    empty: float
    returned: int
    needed: int = 1  # relevant tools
    all_5: float = 0.0  # every relevant tool in the top 5
    all_10: float = 0.0
    recall_10: float = 0.0
    delivered_all: float = 0.0  # every relevant tool returned
    injected_tokens: int = 0  # the prompt tokens of the returned tools' schemas


def recall_at(ranking: Sequence[str], gold: frozenset[str], k: int) -> float:
    return len(gold.intersection(ranking[:k])) / len(gold)


def all_at(ranking: Sequence[str], gold: frozenset[str], k: int) -> float:
    return 1.0 if gold <= set(ranking[:k]) else 0.0


def hit_at(ranking: Sequence[str], gold: frozenset[str], k: int) -> float:
    return 1.0 if gold.intersection(ranking[:k]) else 0.0


def ndcg_at_10(ranking: Sequence[str], gold: frozenset[str]) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, name in enumerate(ranking[:10]) if name in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    return dcg / ideal


def mrr_at_10(ranking: Sequence[str], gold: frozenset[str]) -> float:
    return next((1.0 / (i + 1) for i, name in enumerate(ranking[:10]) if name in gold), 0.0)


def score_query(ranking: Sequence[str], gold: frozenset[str], lang: str, delivered: Sequence[str]) -> QueryScores:
    """`ranking`: the full ranking; `delivered`: what `search()` returned for the same request."""
    found = gold.intersection(delivered)
    return QueryScores(
        lang,
        recall_at(ranking, gold, 1),
        recall_at(ranking, gold, 3),
        recall_at(ranking, gold, 5),
        ndcg_at_10(ranking, gold),
        mrr_at_10(ranking, gold),
        hit_at(ranking, gold, 3),
        hit_at(ranking, gold, 5),
        1.0 if found else 0.0,
        len(found) / len(gold),
        0.0 if delivered else 1.0,
        len(delivered),
        len(gold),
        all_at(ranking, gold, 5),
        all_at(ranking, gold, 10),
        recall_at(ranking, gold, 10),
        1.0 if found == gold else 0.0,
    )


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4) if values else 0.0


def summarize(scores: Sequence[QueryScores]) -> dict[str, float]:
    """The ranking figures, averaged over requests."""
    return {
        "n_queries": len(scores),
        "recall@1": _mean([s.recall_1 for s in scores]),
        "recall@3": _mean([s.recall_3 for s in scores]),
        "recall@5": _mean([s.recall_5 for s in scores]),
        "ndcg@10": _mean([s.ndcg_10 for s in scores]),
        "mrr@10": _mean([s.mrr_10 for s in scores]),
        "hit@3": _mean([s.hit_3 for s in scores]),
        "hit@5": _mean([s.hit_5 for s in scores]),
        "all_required@5": _mean([s.all_5 for s in scores]),
        "all_required@10": _mean([s.all_10 for s in scores]),
        "recall@10": _mean([s.recall_10 for s in scores]),
    }


def delivered(scores: Sequence[QueryScores]) -> dict[str, Any]:
    """What callers received, averaged over requests (the hit with its 95% bootstrap interval)."""
    return {
        "hit": _mean([s.delivered_hit for s in scores]),
        "hit_interval": interval([s.delivered_hit for s in scores]),
        "recall": _mean([s.delivered_recall for s in scores]),
        "all_required": _mean([s.delivered_all for s in scores]),
        "all_required_interval": interval([s.delivered_all for s in scores]),
        "empty": _mean([s.empty for s in scores]),
        "mean_returned": _mean([float(s.returned) for s in scores]),
    }


def needed_group(needed: int) -> str:
    """Requests grouped by how many tools they need: "1", "2", "3", "4", "5+"."""
    return str(needed) if needed < 5 else "5+"


def by_needed(scores: Sequence[QueryScores]) -> dict[str, dict[str, Any]]:
    """The set figures per number of tools needed, and for all requests that need more than one ("2+")."""
    groups: dict[str, list[QueryScores]] = {}
    for item in sorted(scores, key=lambda s: s.needed):
        groups.setdefault(needed_group(item.needed), []).append(item)
    several = [s for s in scores if s.needed > 1]
    if several:
        groups["2+"] = several
    return {name: _set_figures(items) for name, items in groups.items()}


def _set_figures(scores: Sequence[QueryScores]) -> dict[str, Any]:
    return {
        "n": len(scores),
        "all_required@5": _mean([s.all_5 for s in scores]),
        "all_required@10": _mean([s.all_10 for s in scores]),
        "recall@10": _mean([s.recall_10 for s in scores]),
        "delivered_all_required": _mean([s.delivered_all for s in scores]),
        "delivered_recall": _mean([s.delivered_recall for s in scores]),
        "mean_returned": _mean([float(s.returned) for s in scores]),
        "injected_tokens": _mean([float(s.injected_tokens) for s in scores]),
    }


@dataclass(frozen=True)
class ReliabilityBin:
    """Shown scores in [low, high): how many, their mean, and the share of them that were relevant."""

    low: float
    high: float
    n: int
    mean_score: float
    relevant: float


def reliability(scores: Sequence[float], relevant: Sequence[bool], bins: int = 10) -> list[ReliabilityBin]:
    """Scores grouped in equal-width bins (a score of 1 goes to the last one); empty bins are left out."""
    grouped: dict[int, list[tuple[float, bool]]] = {}
    for score, label in zip(scores, relevant, strict=True):
        grouped.setdefault(min(int(score * bins), bins - 1), []).append((score, label))
    return [
        ReliabilityBin(
            low=number / bins,
            high=(number + 1) / bins,
            n=len(members),
            mean_score=round(sum(s for s, _ in members) / len(members), 4),
            relevant=round(sum(1 for _, label in members if label) / len(members), 4),
        )
        for number, members in sorted(grouped.items())
    ]


def expected_calibration_error(table: Sequence[ReliabilityBin]) -> float:
    """The mean gap between score and observed relevance, weighted by how many scores each bin holds."""
    total = sum(b.n for b in table)
    return round(sum(b.n * abs(b.mean_score - b.relevant) for b in table) / total, 4) if total else 0.0


BOOTSTRAP_RESAMPLES = 10_000


@dataclass(frozen=True)
class PairedDifference:
    """One mode's per-request score minus another's on the same requests: the mean, its 95% bootstrap interval
    (the requests resampled with replacement, seeded: the same scores give the same interval) and how many
    requests scored differently at all."""

    n: int
    difference: float
    low: float
    high: float
    differing: int


def paired_difference(first: Sequence[float], second: Sequence[float], seed: int = 0) -> PairedDifference:
    if len(first) != len(second) or not first:
        raise ValueError("a paired difference needs the same non-empty set of requests on both sides")
    differences = np.asarray(first, dtype=np.float64) - np.asarray(second, dtype=np.float64)
    low, high = np.quantile(_bootstrap_means(differences, np.random.default_rng(seed)), [0.025, 0.975])
    return PairedDifference(
        n=len(differences),
        difference=round(float(differences.mean()), 4),
        low=round(float(low), 4),
        high=round(float(high), 4),
        differing=int(np.count_nonzero(np.abs(differences) > 1e-9)),
    )


def interval(values: Sequence[float], seed: int = 0) -> tuple[float, float]:
    """The 95% bootstrap interval of the mean of `values` (seeded: the same values give the same interval)."""
    if not values:
        return (0.0, 0.0)
    low, high = np.quantile(
        _bootstrap_means(np.asarray(values, dtype=np.float64), np.random.default_rng(seed)), [0.025, 0.975]
    )
    return (round(float(low), 4), round(float(high), 4))


def _bootstrap_means(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """BOOTSTRAP_RESAMPLES means of `values` resampled with replacement, drawn a few million values at a time (a
    set of 20,000 requests would otherwise need 10,000 x 20,000 indices at once)."""
    per_chunk = max(1, 2_000_000 // len(values))
    means = [
        values[rng.integers(0, len(values), (min(per_chunk, BOOTSTRAP_RESAMPLES - done), len(values)))].mean(axis=1)
        for done in range(0, BOOTSTRAP_RESAMPLES, per_chunk)
    ]
    return np.concatenate(means)
