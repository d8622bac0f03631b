"""Which parts of a tool's text help dense retrieval: one variant of the embedded text per run, every shared set.

    python benchmarks/tool_text.py [--metatool-limit 5000] [--sets bfcl metatool metatool-multilingual]
        [--variants VARIANT ...]

Each variant replaces the text the default model embeds for a tool (lexical text is unchanged), re-indexes the
set and measures Recall@3/5 and nDCG@10 with the default configuration. Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import toolrag.registry
import toolrag.search.index
import toolrag.search.text as text
from toolrag.embed import make_embedder
from toolrag.eval import evaluate, load_benchmark
from toolrag.model import Tool

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
SETS = ("bfcl", "metatool", "metatool-multilingual")
HEADINGS = {"bfcl": "bfcl", "metatool": "metatool", "metatool-multilingual": "multilingual"}  # the table's columns


def parameters_with_descriptions(schema: dict[str, Any]) -> list[str]:
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return []
    described = []
    for name, spec in properties.items():
        words = text.split_identifier(str(name))
        about = spec.get("description") if isinstance(spec, dict) else None
        described.append(
            f"{words} ({about.strip().rstrip('.')})" if isinstance(about, str) and about.strip() else words
        )
    return described


def variant(name: str) -> Callable[[Tool], str]:
    def build(tool: Tool) -> str:
        words = text.split_identifier(tool.name)
        params = text.parameter_words(tool.input_schema)
        if name == "description only":
            return tool.description
        if name == "name + description":
            return f"{words}: {tool.description}"
        if name == "name + description + parameter descriptions":
            described = parameters_with_descriptions(tool.input_schema)
            return f"{words}: {tool.description}" + (f" Parameters: {'; '.join(described)}." if described else "")
        if name == "category + name + description + parameters":
            prefix = f"{text.split_identifier(tool.category)} / " if tool.category else ""
            return prefix + f"{words}: {tool.description}" + (f" Parameters: {', '.join(params)}." if params else "")
        return f"{words}: {tool.description}" + (f" Parameters: {', '.join(params)}." if params else "")

    return build


VARIANTS = [
    "name + description + parameter names (default)",
    "description only",
    "name + description",
    "name + description + parameter descriptions",
    "category + name + description + parameters",
]


def use_variant(name: str) -> None:
    build = variant(name)

    def texts(tool: Tool) -> list[str]:
        return [build(tool), *tool.aliases]

    # The registry and the index imported the function by name: replace it where it is used.
    toolrag.registry.dense_texts = texts  # type: ignore[attr-defined]
    toolrag.search.index.dense_texts = texts  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metatool-limit", type=int, default=5000)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    args = parser.parse_args()
    embedder = make_embedder("default")
    limits = {"metatool": args.metatool_limit}
    sets = {name: load_benchmark(BENCH / name, limits.get(name)) for name in args.sets}
    rows = []
    for name in args.variants:
        use_variant(name)
        row: dict[str, Any] = {"variant": name}
        for set_name, benchmark in sets.items():
            report = evaluate(benchmark, embedder).as_json()
            row[set_name] = {k: report[k] for k in ("recall@3", "recall@5", "ndcg@10")}
        rows.append(row)
        print(json.dumps(row), flush=True, file=sys.stderr)
    columns = " | ".join(f"{HEADINGS[s]} R@5 | {HEADINGS[s]} nDCG@10" for s in sets)
    print(f"| text embedded for a tool | {columns} |")
    print("|---|" + "---|---|" * len(sets))
    for row in rows:
        cells = [f"{row[s]['recall@5']:.3f} | {row[s]['ndcg@10']:.3f}" for s in sets]
        print(f"| {row['variant']} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
