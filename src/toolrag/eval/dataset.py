"""Benchmark sets: `DIR/tools.jsonl` and `DIR/queries.jsonl` (format in shared/bench/README.md)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from toolrag.catalog.files import tool_from_entry
from toolrag.embed.language import guess_language
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
class NoToolRequest:
    """A request that needs none of the set's tools (small talk, thanks, opinions)."""

    id: str
    text: str
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


def _distinct(name: str, taken: set[str]) -> str:
    """`name`, or `name_2`, `name_3`, ... when a name equal to it but for case is taken; the one returned is taken."""
    chosen, number = name, 1
    while chosen.lower() in taken:
        number += 1
        chosen = f"{name[: 128 - len(str(number)) - 1]}_{number}"
    taken.add(chosen.lower())
    return chosen


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise CatalogError(
            f"{path}: no such file (a benchmark folder holds tools.jsonl and queries.jsonl: docs/evaluation.md)",
            path=path,
        )
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    row = loads(line)
                except json.JSONDecodeError as exc:
                    raise CatalogError(
                        f"{path}: line {number}: invalid JSON: {exc.msg}", path=path, line=number
                    ) from None
                if not isinstance(row, dict):
                    raise CatalogError(f"{path}: line {number}: expected a JSON object", path=path, line=number)
                rows.append(row)
    return rows


def load_benchmark(folder: str | Path, limit: int | None = None) -> BenchmarkSet:
    """Read a benchmark folder (format: docs/evaluation.md); `limit` keeps an evenly spaced sample of that many
    queries. Tools are given as in the shared benchmarks (`id`, `name`, `description`, `parameters`) or as catalog
    entries (`name`, `description`, `input_schema`, ...)."""
    folder = Path(folder)
    tools, names = _tools(folder / "tools.jsonl", _read_jsonl(folder / "tools.jsonl"))
    path = folder / "queries.jsonl"
    rows = _read_jsonl(path)
    if not rows:
        raise CatalogError(f"{path}: holds no request (one JSON object per line: docs/evaluation.md)", path=path)
    return _with_queries(folder.resolve().name, tools, names, rows, f"{path}: line", limit)


def load_example(limit: int | None = None) -> BenchmarkSet:
    """The example catalog (the quick start's 220 tools) with the requests written for it, in six languages."""
    from importlib import resources

    from toolrag.catalog.files import load_catalog

    with resources.as_file(resources.files("toolrag") / "data" / "example_catalog.yaml") as catalog:
        tools = load_catalog(catalog)
    rows = [{"id": f"example-{n}", **row} for n, row in enumerate(_example_requests()["requests"], 1)]
    return _with_queries("example", tools, {t.name: t.name for t in tools}, rows, "example request", limit)


def example_no_tool_requests() -> list[NoToolRequest]:
    """Small talk for the example catalog (`toolrag eval --example` measures the false-tool rate on it)."""
    rows = [{"id": f"example-notool-{n}", **row} for n, row in enumerate(_example_requests()["small_talk"], 1)]
    return _no_tool(rows, "example small talk")


def _example_requests() -> dict[str, list[dict[str, Any]]]:
    from importlib import resources

    import yaml

    text = (resources.files("toolrag") / "data" / "example_requests.yaml").read_text(encoding="utf-8")
    return dict(yaml.safe_load(text))


def load_no_tool(path: str | Path) -> list[NoToolRequest]:
    """Requests that need no tool: `{"id", "query", "lang"}` per line, or one request per plain line (its language
    guessed from its words and script)."""
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise CatalogError(f"{source} does not exist", path=source) from None
    if any(line.strip() and not line.lstrip().startswith("{") for line in lines):
        return [
            NoToolRequest(str(n), text.strip(), guess_language(text)) for n, text in enumerate(lines, 1) if text.strip()
        ]
    return _no_tool(_read_jsonl(source), f"{path}: line")


Half = Literal["tune", "held-out"]
HALVES: tuple[Half, ...] = ("tune", "held-out")


_LANGUAGE_SUFFIX = re.compile(r"#[a-z]{2,3}$")


def halves(ids: Sequence[str]) -> dict[str, Half]:
    """Each id's half: the distinct ids, without a language suffix so a request's translations (`single_9950#de`,
    `single_9950#uk`) stay together, ordered by a hash and dealt alternately, so the halves differ by one at most.
    Values are chosen on `tune` and reported on `held-out` (docs/evaluation.md)."""
    groups = sorted({_LANGUAGE_SUFFIX.sub("", i) for i in ids}, key=lambda g: hashlib.sha256(g.encode()).digest())
    dealt: dict[str, Half] = {group: HALVES[n % 2] for n, group in enumerate(groups)}
    return {i: dealt[_LANGUAGE_SUFFIX.sub("", i)] for i in ids}


def in_half(benchmark: BenchmarkSet, half: Half) -> BenchmarkSet:
    assigned = halves([q.id for q in benchmark.queries])
    return BenchmarkSet(benchmark.name, benchmark.tools, [q for q in benchmark.queries if assigned[q.id] == half])


def no_tool_in_half(requests: Sequence[NoToolRequest], half: Half) -> list[NoToolRequest]:
    """Dealt per language, so each language's small talk is split evenly too."""
    chosen = []
    for lang in dict.fromkeys(request.lang for request in requests):
        same = [request for request in requests if request.lang == lang]
        assigned = halves([request.id for request in same])
        chosen += [request for request in same if assigned[request.id] == half]
    return chosen


def _no_tool(rows: list[dict[str, Any]], where: str) -> list[NoToolRequest]:
    requests = []
    for number, row in enumerate(rows, 1):
        text = row.get("query")
        if not isinstance(text, str) or not text.strip():
            raise CatalogError(f"{where} {number}: a request needs `query`, a non-empty string")
        requests.append(NoToolRequest(str(row.get("id", number)), text, str(row.get("lang", "en"))))
    return requests


def _tools(path: Path, rows: list[dict[str, Any]]) -> tuple[list[Tool], dict[str, str]]:
    tools = []
    names: dict[str, str] = {}
    taken: set[str] = set()  # lowercased: a registry refuses names that differ only in case (bfcl has such ids)
    for number, row in enumerate(rows, 1):
        tool_id = row.get("id", row.get("name"))
        if not isinstance(tool_id, str) or not tool_id:
            raise CatalogError(f"{path}: line {number}: a tool needs an `id` or a `name`", path=path, line=number)
        names[tool_id] = _distinct(registry_name(tool_id), taken)
        entry = dict(row, name=names[tool_id], description=row.get("description") or tool_id)
        entry.pop("id", None)
        try:
            # Benchmarks carry schemas from other function-calling dialects (Java types, `any`): repair them.
            tools.append(tool_from_entry(entry, source="benchmark", lenient=True))
        except InvalidToolError as exc:
            raise CatalogError(f"{path}: line {number}: tool {tool_id!r}: {exc}", path=path, line=number) from None
    return tools, names


def _with_queries(
    name: str, tools: list[Tool], names: dict[str, str], rows: list[dict[str, Any]], where: str, limit: int | None
) -> BenchmarkSet:
    """`where`: how errors name a row (followed by its number)."""
    if limit is not None and limit < 1:
        raise ValueError(f"a sample needs at least one request, not {limit}")
    queries = []
    for number, row in enumerate(rows, 1):
        here = f"{where} {number}"
        text, relevant = row.get("query"), row.get("relevant")
        if not isinstance(text, str) or not text.strip():
            raise CatalogError(f"{here}: a request needs `query`, a non-empty string")
        if not isinstance(relevant, list) or not relevant or not all(isinstance(r, str) for r in relevant):
            raise CatalogError(f"{here}: a request needs `relevant`, a non-empty list of tool ids or names")
        unknown = [r for r in relevant if r not in names]
        if unknown:
            raise CatalogError(f"{here}: `relevant` names unknown tools {unknown}")
        query_id = str(row.get("id", number))
        queries.append(Query(query_id, text, frozenset(names[r] for r in relevant), str(row.get("lang", "en"))))
    if limit is not None and limit < len(queries):
        step = len(queries) / limit
        queries = [queries[int(i * step)] for i in range(limit)]
    return BenchmarkSet(name, tools, queries)
