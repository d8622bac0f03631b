"""`toolrag validate`: problems in a registry that hurt retrieval or execution, and the ones it can repair.

- orphans: a Python tool whose function no longer imports, an MCP tool whose server is no longer configured;
- tools without embeddings for the index's model (repaired with `fix`);
- near-duplicates: pairs whose descriptions are so close that retrieval and the model will confuse them (compared
  within a namespace or category, where confusable tools live; that keeps 100k-tool registries tractable);
- descriptions too short or too long to retrieve well, and near-duplicates without a "not for" line.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

import numpy as np

from toolrag.model import Tool
from toolrag.registry import ToolRegistry

Kind = Literal["orphan", "missing_embedding", "near_duplicate", "no_not_for", "too_short", "too_long"]
MIN_WORDS = 5
MAX_WORDS = 250
MAX_PAIRS_LISTED = 200  # near-duplicate pairs named, the most alike (the rest counted)
COMPARED_ROWS = 512  # tools compared with their namespace at once: memory of 512 x n cosines


@dataclass(frozen=True)
class Finding:
    kind: Kind
    tools: tuple[str, ...]
    detail: str
    fixed: bool = False
    count: int = 1  # the problems it stands for: more than one for a finding that counts those not listed


def validate(
    registry: ToolRegistry,
    mcp_servers: set[str] | None = None,
    fix: bool = False,
    duplicate_similarity: float = 0.9,
) -> list[Finding]:
    """Every finding, worst kinds first. `mcp_servers`: the configured servers (None: do not judge MCP tools)."""
    tools = registry.tools()
    missing = _missing_embeddings(registry, fix)
    findings = [*orphans(tools, mcp_servers), *missing, *_lengths(tools)]
    if not missing or fix:  # comparing needs every vector
        findings.extend(_near_duplicates(registry, duplicate_similarity))
    return findings


def orphans(tools: list[Tool], mcp_servers: set[str] | None) -> list[Finding]:
    """Python tools whose function no longer imports; MCP tools of servers not configured (None: not judged)."""
    found = []
    for tool in tools:
        kind, _, where = tool.source.partition(":")
        if kind == "python" and where and not _importable(where):
            found.append(Finding("orphan", (tool.name,), f"its function {where} no longer imports"))
        elif kind == "mcp" and mcp_servers is not None and where not in mcp_servers:
            found.append(Finding("orphan", (tool.name,), f"its MCP server {where!r} is not configured"))
    return found


def _importable(target: str) -> bool:
    module_name, _, qualname = target.partition(":")
    try:
        value: object = importlib.import_module(module_name)
        for part in qualname.split("."):
            if part == "<locals>":
                return True  # a function defined inside another cannot be looked up; assume it exists
            value = getattr(value, part)
    except (ImportError, AttributeError, ValueError):
        return False
    return True


def _missing_embeddings(registry: ToolRegistry, fix: bool) -> list[Finding]:
    missing = registry.tools_without_embeddings()
    if not missing:
        return []
    if fix:
        registry.embed_missing()
    detail = "embedded now" if fix else "no vector for the index's model: run `toolrag validate --fix`"
    return [Finding("missing_embedding", tuple(missing), detail, fixed=fix)]


def _lengths(tools: list[Tool]) -> list[Finding]:
    found = []
    for tool in tools:
        words = len(tool.description.split())
        if words < MIN_WORDS:
            found.append(Finding("too_short", (tool.name,), f"{words} words: say what it does, with what, for whom"))
        elif words > MAX_WORDS:
            found.append(Finding("too_long", (tool.name,), f"{words} words: the first sentences carry retrieval"))
    return found


def _near_duplicates(registry: ToolRegistry, threshold: float) -> list[Finding]:
    """The MAX_PAIRS_LISTED most alike pairs within a namespace (or category) at `threshold` or more, and how many
    more there are: a namespace of n tools of one description holds n^2/2 pairs (2,000 tools: 2 million, which an
    upstream's first listing can bring), so pairs are counted in blocks of rows and only the most alike are named."""
    index = registry.snapshot()
    if index.live_count < 2:
        return []
    _, first_rows = np.unique(index.vectors.row_tool, return_index=True)  # each tool's description vector
    groups: dict[str, list[int]] = {}
    for position, (name, category) in enumerate(zip(index.names, index.categories, strict=True)):
        if index.live is None or index.live[position]:
            groups.setdefault(category or name.split(".")[0], []).append(position)
    cosines, firsts, seconds, total = np.zeros(0, np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64), 0
    lacking_any = np.array([not tool.not_for for tool in index.tools], dtype=bool)
    total_lacking = 0
    for members in (m for m in groups.values() if len(m) >= 2):
        positions = np.asarray(members, dtype=np.int64)
        vectors = index.vectors.take(first_rows[members])
        for start in range(0, len(members), COMPARED_ROWS):
            similarity = vectors[start : start + COMPARED_ROWS] @ vectors.T
            left, right = np.nonzero(np.triu(similarity, k=start + 1) >= threshold)
            total += len(left)
            total_lacking += int(np.count_nonzero(lacking_any[positions[start + left]] | lacking_any[positions[right]]))
            cosines = np.concatenate([cosines, similarity[left, right]])
            firsts = np.concatenate([firsts, positions[start + left]])
            seconds = np.concatenate([seconds, positions[right]])
            if len(cosines) > 2 * MAX_PAIRS_LISTED:
                kept = np.argsort(-cosines, kind="stable")[:MAX_PAIRS_LISTED]
                cosines, firsts, seconds = cosines[kept], firsts[kept], seconds[kept]
    found: list[Finding] = []
    for at in np.argsort(-cosines, kind="stable")[:MAX_PAIRS_LISTED].tolist():
        first, second = index.tools[int(firsts[at])], index.tools[int(seconds[at])]
        pair = (first.name, second.name)
        found.append(
            Finding(
                "near_duplicate", pair, f"descriptions {float(cosines[at]):.2f} alike: say in each when not to use it"
            )
        )
        if not first.not_for or not second.not_for:
            lacking = [t.name for t in (first, second) if not t.not_for]
            verb = "has" if len(lacking) == 1 else "have"
            found.append(Finding("no_not_for", pair, f"{', '.join(lacking)} {verb} no 'not for' line"))
    if total > MAX_PAIRS_LISTED:
        more = total - MAX_PAIRS_LISTED
        detail = (
            f"{more:,} more pairs {threshold:.2f} or more alike, not listed (the {MAX_PAIRS_LISTED} most alike are)"
        )
        found.append(Finding("near_duplicate", (), detail, count=more))
        unlisted = total_lacking - sum(1 for finding in found if finding.kind == "no_not_for")
        if unlisted:
            found.append(
                Finding("no_not_for", (), f"{unlisted:,} more of those pairs have no 'not for' line", count=unlisted)
            )
    return found
