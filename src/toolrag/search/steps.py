"""Requests of several steps: each step is searched as a request of its own, and the tools of all the steps form
the set an agent needs to finish the task.

A split (search/intents.py) is trusted only as far as its parts point, with evidence, at different tools: a part
whose best tool is weak (a sentence of context: "I am planning a trip") or the same as an earlier part's (a step
told in two sentences) is not a step of its own, nor is a part that reads as small talk by itself ("Can you help
me?"). A request left with fewer than two steps is searched whole; one with more gets the whole request's likeliest
tool and each step's, with what they require, and then, room left, the whole request's other likely tools: a
sentence of context ("Any salary is fine") can pass for a step, and must not cost the tool the request is about
(search/pipeline.py `_with_alternatives`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import zip_longest

from toolrag.search.cut import Chosen, Ranked
from toolrag.search.lexical import FloatArray


@dataclass(frozen=True)
class Step:
    """One part of a request and its own ranking."""

    text: str
    items: list[Ranked]
    vector: FloatArray | None


def trusted_steps(parts: Sequence[Step], min_similarity: float) -> list[Step]:
    """The parts that are steps of their own: their best tool has at least `min_similarity` cosine with them and
    is no earlier step's best; none when fewer than two remain."""
    steps: list[Step] = []
    tops: set[int] = set()
    for part in parts:
        if not part.items:
            continue
        top = part.items[0]
        if top.position in tops or (top.dense < min_similarity and not top.name_match):
            continue
        tops.add(top.position)
        steps.append(part)
    return steps if len(steps) > 1 else []


def merge_rankings(rankings: Sequence[list[Ranked]], limit: int) -> list[Ranked]:
    """One ranking from several, fairly: the first ranking's best, each other's best, then the rest alternately."""
    merged: dict[int, Ranked] = {}
    for item in [*rankings[0][:1], *(ranking[0] for ranking in rankings[1:] if ranking)]:
        merged.setdefault(item.position, item)
    for items in zip_longest(*(ranking[1:] for ranking in rankings)):
        for item in items:
            if item is not None:
                merged.setdefault(item.position, item)
    return list(merged.values())[:limit]


def tools_of_steps(whole: list[Chosen], chosen_per_step: Sequence[list[Chosen]], budget: int) -> list[Chosen]:
    """The whole request's chosen tools and each step's, at most `budget` in all (every one's likeliest is kept
    before any one's second), in the order of the steps: the order an agent calls them in. A tool several steps
    chose comes once, at the first; one only the whole request chose comes first."""
    ranked = [whole, *chosen_per_step]
    kept: dict[int, Chosen] = {}
    for rank in range(max((len(chosen) for chosen in ranked), default=0)):
        for chosen in ranked:
            if rank < len(chosen) and len(kept) < budget:
                kept.setdefault(chosen[rank].item.position, chosen[rank])
    place: dict[int, tuple[int, int]] = {}
    for step, chosen in enumerate(chosen_per_step):
        for rank, one in enumerate(chosen):
            place.setdefault(one.item.position, (step, rank))
    return sorted(kept.values(), key=lambda one: place.get(one.item.position, (-1, 0)))
