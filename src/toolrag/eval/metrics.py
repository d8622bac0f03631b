"""Ranking metrics as shared/bench/README.md defines them: Recall@k, nDCG@10 with binary gains, MRR@10."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class QueryScores:
    lang: str
    recall_1: float
    recall_3: float
    recall_5: float
    ndcg_10: float
    mrr_10: float


def recall_at(ranking: Sequence[str], gold: frozenset[str], k: int) -> float:
    return len(gold.intersection(ranking[:k])) / len(gold)


def ndcg_at_10(ranking: Sequence[str], gold: frozenset[str]) -> float:
    dcg = sum(1.0 / math.log2(i + 2) for i, name in enumerate(ranking[:10]) if name in gold)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(gold), 10)))
    return dcg / ideal


def mrr_at_10(ranking: Sequence[str], gold: frozenset[str]) -> float:
    return next((1.0 / (i + 1) for i, name in enumerate(ranking[:10]) if name in gold), 0.0)


def score_query(ranking: Sequence[str], gold: frozenset[str], lang: str) -> QueryScores:
    return QueryScores(
        lang,
        recall_at(ranking, gold, 1),
        recall_at(ranking, gold, 3),
        recall_at(ranking, gold, 5),
        ndcg_at_10(ranking, gold),
        mrr_at_10(ranking, gold),
    )


def summarize(scores: Sequence[QueryScores]) -> dict[str, float]:
    count = len(scores)
    if count == 0:
        return {"n_queries": 0, "recall@1": 0.0, "recall@3": 0.0, "recall@5": 0.0, "ndcg@10": 0.0, "mrr@10": 0.0}
    return {
        "n_queries": count,
        "recall@1": round(sum(s.recall_1 for s in scores) / count, 4),
        "recall@3": round(sum(s.recall_3 for s in scores) / count, 4),
        "recall@5": round(sum(s.recall_5 for s in scores) / count, 4),
        "ndcg@10": round(sum(s.ndcg_10 for s in scores) / count, 4),
        "mrr@10": round(sum(s.mrr_10 for s in scores) / count, 4),
    }
