"""toolrag against the open-source peers that run offline here, on every shared set, in one run.

    pip install -e ".[compare]"          # the peers: benchmark-only dependencies
    python benchmarks/compare/run.py [--bfcl-limit 1000] [--metatool-limit 2000] [--seal-limit 500] [--plot ...]

Every system gets the same tools and requests and, where it takes an embedding model, toolrag's default model
(peers.py). Reported per set: Recall@3/5 and nDCG@10 of the top 10, search latency p50/p95 (request embedding
included, one request at a time, 2 CPU cores) and index build time; and the prompt tokens of injecting every tool
against toolrag's selection. On seal-tools (its held-out half: toolrag's set rules were chosen on the other), the
requests that need two or more tools are also judged as whole sets: all-required@5/@10 of each ranking and of what
each system hands an agent (a peer: its top 10). Not measured: callbus (its ranking needs its 8B embedding model on
a GPU server).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from peers import (
    GraphToolCall,
    LanggraphBigtool,
    LlamaIndexObjectIndex,
    PlainBM25,
    PlainDense,
    SiftTools,
    System,
    Toolrag,
)

from toolrag import Principal, Tool
from toolrag.embed import make_embedder
from toolrag.eval import BenchmarkSet, load_benchmark
from toolrag.eval.dataset import Query, in_half
from toolrag.eval.metrics import by_needed, score_query, summarize

BENCH = Path(__file__).resolve().parents[3] / "shared" / "bench"
SETS = ("bfcl", "metatool", "metatool-multilingual", "seal-tools")


def measure(system: System, benchmark: BenchmarkSet) -> dict[str, Any]:
    started = time.perf_counter()
    system.build(benchmark.tools)
    build_seconds = time.perf_counter() - started
    scores, latencies = [], []
    for query in benchmark.queries:
        started = time.perf_counter()
        names = system.search(query.text, 10)
        latencies.append((time.perf_counter() - started) * 1000)
        scores.append(score_query(names, query.relevant, query.lang, delivered(system, query.text, names)))
    ordered = sorted(latencies)
    return {
        **summarize(scores),
        "sets": by_needed(scores).get("2+"),
        "p50_ms": round(ordered[len(ordered) // 2], 2),
        "p95_ms": round(ordered[int(len(ordered) * 0.95)], 2),
        "build_s": round(build_seconds, 2),
    }


def delivered(system: System, request: str, ranking: list[str]) -> list[str]:
    """What an agent receives: a peer hands over its top 10 as they are; toolrag's search() decides and cuts
    (asked outside the timed search, so latencies stay those of the ranking)."""
    return system.delivered(request) if isinstance(system, Toolrag) else ranking


def prompt_tokens(system: Toolrag, benchmark: BenchmarkSet) -> dict[str, float]:
    """Every tool's schema in every prompt, against the schemas toolrag's search() selects (mean per request)."""
    anyone = Principal.anonymous()
    injected = [system.registry.select(q.text, anyone).injected_tokens for q in benchmark.queries]
    return {"all_tools": system.registry.catalog_tokens(anyone), "toolrag": round(sum(injected) / len(injected), 1)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--metatool-limit", type=int, default=2000)
    parser.add_argument("--bfcl-limit", type=int, default=1000)
    parser.add_argument("--seal-limit", type=int, default=500, help="of seal-tools' held-out half, evenly spaced")
    parser.add_argument(
        "--seal-catalog",
        type=int,
        default=None,
        help="cut seal-tools' catalog to this many tools: every tool the sampled requests need, then others evenly"
        " spaced (graph-tool-call searches for seconds a request on a few thousand tools)",
    )
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--systems", nargs="+", default=None, help="names starting with these (default: all)")
    args = parser.parse_args()
    embedder = make_embedder("default")
    results: dict[str, dict[str, Any]] = {}
    for set_name in args.sets:
        benchmark = read(set_name, args)
        results[set_name] = {"systems": {}}
        with tempfile.TemporaryDirectory() as folder:
            systems: list[Callable[[], System]] = [
                lambda: Toolrag(embedder, Path(folder)),
                lambda: PlainBM25(),
                lambda: PlainDense(embedder),
                lambda: GraphToolCall(embedder),
                lambda: SiftTools(embedder),
                lambda: LanggraphBigtool(embedder),
                lambda: LlamaIndexObjectIndex(embedder),
            ]
            for make in systems:
                system = make()
                if args.systems and not any(system.name.startswith(prefix) for prefix in args.systems):
                    continue
                figures = measure(system, benchmark)
                results[set_name]["systems"][system.name] = figures
                print(set_name, system.name, json.dumps(figures), file=sys.stderr, flush=True)
                if isinstance(system, Toolrag):
                    results[set_name]["tokens"] = prompt_tokens(system, benchmark)
        results[set_name]["requests"] = len(benchmark.queries)
    print(json.dumps(results), file=sys.stderr)
    print_tables(results)
    if args.plot:
        plot(results, args.plot)


def read(set_name: str, args: argparse.Namespace) -> BenchmarkSet:
    """The set's requests, or an evenly spaced sample of them (seal-tools: of its held-out half)."""
    if set_name == "seal-tools":
        held = in_half(load_benchmark(BENCH / set_name), "held-out")
        step = max(1, len(held.queries) // args.seal_limit)
        queries = held.queries[::step][: args.seal_limit]
        return BenchmarkSet(held.name, catalog_cut(held.tools, queries, args.seal_catalog), queries)
    limits = {"bfcl": args.bfcl_limit, "metatool": args.metatool_limit}
    return load_benchmark(BENCH / set_name, limits.get(set_name))


def catalog_cut(tools: Sequence[Tool], queries: Sequence[Query], size: int | None) -> list[Tool]:
    """`size` tools at most (None: all): the ones the requests need, then the others evenly spaced, in catalog order."""
    if size is None or size >= len(tools):
        return list(tools)
    needed = {name for query in queries for name in query.relevant}
    others = [tool for tool in tools if tool.name not in needed]
    room = max(0, size - len(needed))
    step = max(1, len(others) // room) if room else len(others) + 1
    kept = needed | {tool.name for tool in others[::step][:room]}
    return [tool for tool in tools if tool.name in kept]


def print_tables(results: dict[str, dict[str, Any]]) -> None:
    for set_name, result in results.items():
        tokens = result.get("tokens")
        about = f"all tools {tokens['all_tools']:,}, toolrag's selection {tokens['toolrag']}" if tokens else "-"
        print(f"\n{set_name} ({result['requests']} requests; prompt tokens per request: {about})\n")
        print("| system | R@3 | R@5 | nDCG@10 | search p50 / p95 ms | index build s |")
        print("|---|---|---|---|---|---|")
        for name, f in result["systems"].items():
            print(
                f"| {name} | {f['recall@3']:.3f} | {f['recall@5']:.3f} | {f['ndcg@10']:.3f} "
                f"| {f['p50_ms']} / {f['p95_ms']} | {f['build_s']} |"
            )
        several = {name: f["sets"] for name, f in result["systems"].items() if f.get("sets")}
        if not several:
            continue
        n = next(iter(several.values()))["n"]
        print(f"\n{set_name}, the {n} requests that need two or more tools: the whole set\n")
        print("| system | all-required@5 | all-required@10 | delivered all-required | tools delivered |")
        print("|---|---|---|---|---|")
        for name, f in several.items():
            print(
                f"| {name} | {f['all_required@5']:.3f} | {f['all_required@10']:.3f} "
                f"| {f['delivered_all_required']:.3f} | {f['mean_returned']:.2f} |"
            )


def plot(results: dict[str, dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sets = list(results)
    systems = list(results[sets[0]]["systems"])
    figure, (quality, speed) = plt.subplots(1, 2, figsize=(13, 4.5))
    width = 0.8 / len(systems)
    for i, name in enumerate(systems):
        xs = [s + i * width for s in range(len(sets))]
        quality.bar(xs, [results[s]["systems"][name]["ndcg@10"] for s in sets], width, label=name)
        speed.bar(xs, [results[s]["systems"][name]["p50_ms"] for s in sets], width, label=name)
    for axis, title in ((quality, "nDCG@10 (higher is better)"), (speed, "search p50 ms (lower is better)")):
        axis.set_xticks([s + 0.4 - width / 2 for s in range(len(sets))], sets)
        axis.set_title(title)
    speed.set_yscale("log")
    quality.legend(fontsize=7, loc="lower left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)


if __name__ == "__main__":
    main()
