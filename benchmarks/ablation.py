"""The retrieval-quality techniques, each switched off (or on) alone, on every shared set, in one run.

    python benchmarks/ablation.py [--metatool-limit 5000] [--only-defaults] [--latency-requests 600]
        [--sets bfcl metatool metatool-multilingual] [--requests N] [--text-variants VARIANT ...]

Per set: the tools are indexed once and each request embedded once; every configuration below ranks the same
requests (Recall@3/5 and nDCG@10 from `rank()`, the no-tool rate from `search()`). Then:
- the usage-learned adjustment, measured by replaying every second request as a usage log and ranking the others;
- the tool-text variants (re-indexed), from benchmarks/tool_text.py;
- latency of `search()` with real request embeddings, single- against multi-intent requests, and how many request
  embeddings each needed, for the default and the previous default.
`--only-defaults` measures the default against the previous default only (use it with --metatool-limit 0 for the
whole 21,041-request set). `--requests` keeps at most that many requests of each set (a quick run; the figures
of docs/benchmarks.md use every request but metatool's). Figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tool_text import use_variant

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.embed.base import DelegatingEmbedder, Embedder, Vectors
from toolrag.eval import BenchmarkSet, load_benchmark
from toolrag.eval.metrics import score_query, summarize
from toolrag.eval.runner import replay, split_for_replay
from toolrag.search.intents import split_intents

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
SETS = ("bfcl", "metatool", "metatool-multilingual")

# The core issue's default (as far as its settings still exist): one query embedding, no second chances, no groups,
# English stemming for every request.
PREVIOUS = {
    "multi_intent": False,
    "reformulate": [],
    "group_weight": 0.0,
    "stem_english_only": False,
}
ABLATIONS: list[tuple[str, dict[str, Any]]] = [
    ("previous default (core issue)", PREVIOUS),
    ("**default**", {}),
    ("default without multi-intent split (item 1)", {"multi_intent": False}),
    ("default without second chances (item 2)", {"reformulate": []}),
    ("default without group ranking (item 3)", {"group_weight": 0.0}),
    ("default, group weight 0.4 (item 3)", {"group_weight": 0.4}),
    ("default, small-talk quantile 0.9 (issue 13)", {"small_talk_quantile": 0.9}),
    ("default, English stemming for every request", {"stem_english_only": False}),
]
USAGE = {"usage_weight": 0.3, "usage_min_similarity": 0.5}
TEXT_VARIANTS = ["description only", "name + description"]


class Remembered(DelegatingEmbedder):
    """Embeds each request once for all configurations; counts real embeddings."""

    def __init__(self, inner: Embedder, remember: bool = True) -> None:
        super().__init__(inner)
        self.remember = remember
        self.memory: dict[str, Vectors] = {}
        self.calls = 0

    def embed_query(self, text: str) -> Vectors:
        if self.remember and text in self.memory:
            return self.memory[text]
        self.calls += 1
        vector = self.inner.embed_query(text)
        if self.remember:
            self.memory[text] = vector
        return vector


def measure(registry: ToolRegistry, benchmark: BenchmarkSet, config: SearchConfig) -> dict[str, Any]:
    registry.retriever.use_config(config)
    anyone = Principal.anonymous()
    scores, empty = [], 0
    for query in benchmark.queries:
        ranking = [r.name for r in registry.rank(query.text, anyone, limit=10)]
        returned = [r.name for r in registry.search(query.text, anyone)]
        scores.append(score_query(ranking, query.relevant, query.lang, returned))
        empty += not returned
    by_lang: dict[str, list[Any]] = defaultdict(list)
    for item in scores:
        by_lang[item.lang].append(item)
    return {
        **summarize(scores),
        "no_tool": round(empty / max(1, len(scores)), 4),
        "by_lang": {lang: summarize(items)["ndcg@10"] for lang, items in sorted(by_lang.items()) if len(items) >= 15},
    }


def latency(
    registry: ToolRegistry, embedder: Embedder, benchmark: BenchmarkSet, config: SearchConfig, count: int
) -> dict[str, Any]:
    """search() with real request embeddings (`embedder` remembers nothing): p50/p95 ms and request embeddings
    per request, single- against multi-intent requests."""
    counting = Remembered(embedder, remember=False)
    measured = ToolRegistry(registry.store, counting, config)
    anyone = Principal.anonymous()
    step = max(1, len(benchmark.queries) // count)
    groups: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for query in benchmark.queries[::step]:
        before = counting.calls
        started = time.perf_counter()
        measured.search(query.text, anyone)
        elapsed = (time.perf_counter() - started) * 1000
        kind = "multi" if len(split_intents(query.text)) > 1 else "single"
        groups[kind].append((elapsed, counting.calls - before))
    return {kind: _latency_summary(items) for kind, items in sorted(groups.items())}


def _latency_summary(items: Sequence[tuple[float, int]]) -> dict[str, float]:
    ordered = sorted(ms for ms, _ in items)
    return {
        "n": len(items),
        "p50": round(ordered[len(ordered) // 2], 2),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 2),
        "embeddings": round(statistics.fmean(n for _, n in items), 2),
    }


def run_set(name: str, benchmark: BenchmarkSet, embedder: Embedder, args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"configs": {}}
    rows = ABLATIONS[:2] if args.only_defaults else ABLATIONS
    with tempfile.TemporaryDirectory() as folder:
        remembered = Remembered(embedder)
        registry = ToolRegistry(Path(folder) / "a.db", remembered)
        registry.register_many(benchmark.tools)
        for label, overrides in rows:
            results["configs"][label] = measure(registry, benchmark, SearchConfig(**overrides))
            print(name, label, json.dumps(results["configs"][label]), file=sys.stderr, flush=True)
        results["latency"] = {
            label: latency(registry, embedder, benchmark, SearchConfig(**overrides), args.latency_requests)
            for label, overrides in (("default", {}), ("previous default", PREVIOUS))
        }
        if args.only_defaults:
            return results
        log, rest = split_for_replay(benchmark, 0.5)
        results["usage"] = {"held-out default": measure(registry, rest, SearchConfig())}
        results["usage"]["learned"] = replay(registry, log, Principal.anonymous())  # as measure() searches
        results["usage"]["held-out default + usage learning"] = measure(registry, rest, SearchConfig(**USAGE))
    for variant in args.text_variants:
        use_variant(variant)
        with tempfile.TemporaryDirectory() as folder:
            registry = ToolRegistry(Path(folder) / "t.db", Remembered(embedder))
            registry.register_many(benchmark.tools)
            results["configs"][f"default, tool text: {variant} (item 4)"] = measure(registry, benchmark, SearchConfig())
    use_variant("name + description + parameter names (default)")
    return results


def print_tables(results: dict[str, dict[str, Any]]) -> None:
    names = list(results)
    print("| configuration | " + " | ".join(f"{n} R@3 | R@5 | nDCG@10 | no tool" for n in names) + " |")
    print("|---|" + "---|---|---|---|" * len(names))
    for label in results[names[0]]["configs"]:
        cells = []
        for name in names:
            row = results[name]["configs"].get(label)
            cells.append(
                "– | – | – | –"
                if row is None
                else f"{row['recall@3']:.3f} | {row['recall@5']:.3f} | {row['ndcg@10']:.3f} | {row['no_tool']:.3f}"
            )
        print(f"| {label} | {' | '.join(cells)} |")
    print()
    for name in names:
        langs = {label: row["by_lang"] for label, row in results[name]["configs"].items() if len(row["by_lang"]) > 1}
        for label, by_lang in langs.items():
            print(f"{name} {label}: " + ", ".join(f"{lang} {value:.3f}" for lang, value in by_lang.items()))
    print()
    print(
        "| set | search() latency | single-intent p50 / p95 ms | embeddings | multi-intent p50 / p95 ms | embeddings |"
    )
    print("|---|---|---|---|---|---|")
    for name in names:
        for label, kinds in results[name]["latency"].items():
            cells = []
            for kind in ("single", "multi"):
                item = kinds.get(kind)
                cells.append("– | –" if item is None else f"{item['p50']} / {item['p95']} | {item['embeddings']}")
            print(f"| {name} | {label} | {' | '.join(cells)} |")
    if "usage" not in results[names[0]]:
        return
    print()
    print("| set | replayed as log | held-out: default R@3 / R@5 / nDCG@10 | with usage learning |")
    print("|---|---|---|---|")
    for name in names:
        usage = results[name]["usage"]
        base, learned = usage["held-out default"], usage["held-out default + usage learning"]
        cells = [f"{r['recall@3']:.3f} / {r['recall@5']:.3f} / {r['ndcg@10']:.3f}" for r in (base, learned)]
        print(f"| {name} | {usage['learned']} pairs | {cells[0]} | {cells[1]} |")


def request_limit(name: str, args: argparse.Namespace) -> int | None:
    """How many requests of a set are measured (None: all): metatool's own limit, and --requests for any set."""
    limits = [args.requests, args.metatool_limit if name == "metatool" else None]
    return min((limit for limit in limits if limit), default=None)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metatool-limit", type=int, default=5000, help="0: every request")
    parser.add_argument("--only-defaults", action="store_true")
    parser.add_argument("--latency-requests", type=int, default=600)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--requests", type=int, default=None, help="at most this many requests of each set")
    parser.add_argument("--text-variants", nargs="*", default=TEXT_VARIANTS, choices=TEXT_VARIANTS)
    args = parser.parse_args()
    embedder = make_embedder("default")
    results = {}
    for name in args.sets:
        results[name] = run_set(name, load_benchmark(BENCH / name, request_limit(name, args)), embedder, args)
    print(json.dumps(results), file=sys.stderr)
    print_tables(results)


if __name__ == "__main__":
    main()
