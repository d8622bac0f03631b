"""Benchmark sets: `DIR/tools.jsonl` and `DIR/queries.jsonl` (format in shared/bench/README.md)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolrag.catalog.files import tool_from_entry
from toolrag.errors import CatalogError, InvalidToolError
from toolrag.jsontext import loads
from toolrag.model import TOOL_NAME_PATTERN, Tool

_UNSAFE = re.compile(r"[^a-zA-Z0-9_.-]")


@dataclass(frozen=True)
class Query:
    id: str
    text: str
    relevant: frozenset[str]  # tool names in the registry
    lang: str


@dataclass(frozen=True)
class BenchmarkSet:
    name: str
    tools: list[Tool]
    queries: list[Query]


def registry_name(tool_id: str) -> str:
    """Benchmark ids are free text; registry names are not. Map the few that do not fit, stably."""
    if TOOL_NAME_PATTERN.fullmatch(tool_id):
        return tool_id
    return _UNSAFE.sub("_", tool_id)[:128]


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise CatalogError(f"{path}: no such file (a benchmark folder holds tools.jsonl and queries.jsonl)")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    rows.append(loads(line))
                except json.JSONDecodeError as exc:
                    raise CatalogError(f"{path}: line {number}: invalid JSON: {exc.msg}") from None
    return rows


def load_benchmark(folder: str | Path, limit: int | None = None) -> BenchmarkSet:
    """Read a benchmark folder; `limit` keeps an evenly spaced sample of that many queries."""
    folder = Path(folder)
    tools = []
    names: dict[str, str] = {}
    for row in _read_jsonl(folder / "tools.jsonl"):
        tool_id = str(row["id"])
        names[tool_id] = registry_name(tool_id)
        entry = dict(row, name=names[tool_id], id=names[tool_id], description=row.get("description") or tool_id)
        try:
            # Benchmarks carry schemas from other function-calling dialects (Java types, `any`): repair them.
            tools.append(tool_from_entry(entry, source="benchmark", lenient=True))
        except InvalidToolError as exc:
            raise CatalogError(f"{folder / 'tools.jsonl'}: tool {tool_id!r}: {exc}") from None
    queries = []
    for row in _read_jsonl(folder / "queries.jsonl"):
        relevant = [str(r) for r in row["relevant"]]
        unknown = [r for r in relevant if r not in names]
        if unknown:
            raise CatalogError(f"{folder / 'queries.jsonl'}: query {row['id']!r} names unknown tools {unknown}")
        queries.append(
            Query(str(row["id"]), str(row["query"]), frozenset(names[r] for r in relevant), str(row.get("lang", "en")))
        )
    if limit is not None and limit < len(queries):
        step = len(queries) / limit
        queries = [queries[int(i * step)] for i in range(limit)]
    return BenchmarkSet(folder.name, tools, queries)
