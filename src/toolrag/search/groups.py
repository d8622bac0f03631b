"""Groups of tools (an MCP server, a category) as a ranking signal: hierarchical retrieval, blended with the flat one.

A group is scored from its members: the mean of its two best fused scores, its description (when one is known,
e.g. an MCP server's) counting as one more member, scored by its cosine on the same scale as the tools' cosines.
Each tool's score then moves towards its group's: `(1 - w) * own + w * group`. A tool alone in its group, or in
none, keeps its own score, so registries without groups rank exactly as before.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from toolrag.errors import ConfigError
from toolrag.model import Tool, group_description_problem
from toolrag.search.lexical import FloatArray, IntArray
from toolrag.search.text import split_identifier


def group_of(tool: Tool) -> str | None:
    """The tool's category, else the namespace of a dotted name (`github.create_issue` -> `github`)."""
    if tool.category:
        return tool.category
    head, dot, _ = tool.name.partition(".")
    return head if dot else None


def group_text(name: str, description: str) -> str:
    """What the embedding model reads for a group's description vector."""
    return f"{split_identifier(name)}: {description}"


def checked_descriptions(descriptions: Mapping[str, str | None]) -> Mapping[str, str | None]:
    """Group descriptions to write (None forgets one): a name and a text of bounded length, not blank."""
    for name, text in descriptions.items():
        if problem := group_description_problem(name, text):
            raise ConfigError(problem)
    return descriptions


def blend_groups(group_ids: IntArray, fused: FloatArray, descriptions: FloatArray, weight: float) -> FloatArray:
    """Scores of the candidates moved towards their groups' scores.

    `group_ids` and `fused` are aligned with the candidates (group -1: none); `descriptions` has one score per group
    of the index, on the fused scale (`description_scores`; NaN: no description)."""
    grouped = group_ids >= 0
    if weight <= 0 or not grouped.any():
        return fused
    ids, scores = group_ids[grouped], fused[grouped]
    order = np.lexsort((-scores, ids))
    ids, scores = ids[order], scores[order]
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    sizes = np.diff(np.r_[starts, len(ids)])
    members = np.full((len(starts), 3), np.nan, dtype=np.float32)
    members[:, 0] = scores[starts]
    pairs = sizes > 1
    members[pairs, 1] = scores[starts[pairs] + 1]
    members[:, 2] = descriptions[ids[starts]]
    best_two = -np.sort(-np.nan_to_num(members, nan=-np.inf), axis=1)[:, :2]
    counted = np.minimum(2, np.isfinite(best_two).sum(axis=1))
    group_score = np.where(counted > 1, best_two.sum(axis=1, where=np.isfinite(best_two)) / 2, best_two[:, 0])
    by_group = np.zeros(int(group_ids.max()) + 1, dtype=np.float32)
    by_group[ids[starts]] = group_score
    table = by_group[np.maximum(group_ids, 0)]
    return np.where(grouped, (1 - weight) * fused + weight * table, fused).astype(np.float32)


def description_scores(cosines: FloatArray, dense: FloatArray, dense_weight: float) -> FloatArray:
    """Groups' description cosines as the dense part of a fused score: min-max against the candidates' cosines."""
    low, high = float(dense.min()), float(dense.max())
    if high <= low:
        return np.full_like(cosines, np.nan)
    return np.asarray(dense_weight * np.clip((cosines - low) / (high - low), 0.0, 1.0), dtype=np.float32)
