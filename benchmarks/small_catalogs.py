"""The cut on small catalogs nobody tuned on (issue 32 §6): catalogs of 40 tools cut from a multilingual set, where
half the tools are the right tools of some requests and half are others, searched with the shipped defaults.

    python benchmarks/small_catalogs.py [--set metatool-multilingual-xl] [--seeds 4] [--size 40]

For each seed: `size / 2` of the set's right tools (drawn at random), `size / 2` other tools of its catalog, and
every request whose right tools are all in the cut, in every language; notool.jsonl against the same registry.
Prints per language the ranking's Hit@3, what search() delivered and the empty results, per catalog and pooled
(the ratio the issue's bar reads: delivered >= 0.9 x Hit@3), and small talk given a tool per catalog.
"""

from __future__ import annotations

import argparse
import random
from collections import defaultdict
from pathlib import Path

from toolrag.embed import make_embedder
from toolrag.eval import BenchmarkSet, evaluate, load_benchmark, load_no_tool

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"


def cut(benchmark: BenchmarkSet, size: int, seed: int) -> BenchmarkSet:
    rng = random.Random(seed)
    right = sorted({name for query in benchmark.queries for name in query.relevant})
    chosen = set(rng.sample(right, min(len(right), size // 2)))
    others = [tool.name for tool in benchmark.tools if tool.name not in chosen]
    chosen |= set(rng.sample(others, size - len(chosen)))
    tools = [tool for tool in benchmark.tools if tool.name in chosen]
    queries = [query for query in benchmark.queries if query.relevant <= chosen]
    return BenchmarkSet(f"{benchmark.name}-{size}-seed{seed}", tools, queries)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--set", default="metatool-multilingual-xl", help="a multilingual set of ../shared/bench")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--size", type=int, default=40)
    args = parser.parse_args()
    whole = load_benchmark(BENCH / args.set)
    small_talk = load_no_tool(BENCH / "notool.jsonl")
    embedder = make_embedder()
    pooled: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])  # n, Hit@3, delivered, empty (sums)
    for seed in range(args.seeds):
        report = evaluate(cut(whole, args.size, seed), embedder, no_tool=small_talk)
        mode = report.modes["hybrid"]
        rows = []
        for lang, figures in mode.by_lang.items():
            n, hit, got = figures["n_queries"], figures["hit@3"], figures["delivered"]
            rows.append(f"{lang} {hit:.2f}/{got['hit']:.2f}")
            sums = pooled[lang]
            sums[0] += n
            sums[1] += hit * n
            sums[2] += got["hit"] * n
            sums[3] += got["empty"] * n
        given = report.no_tool.given_tool if report.no_tool else float("nan")
        print(f"seed {seed}: Hit@3/delivered {' '.join(rows)}; small talk given a tool {given:.1%}", flush=True)
    print("\npooled | language | n | Hit@3 | delivered | delivered / Hit@3 | empty")
    for lang, (n, hit, got, empty) in sorted(pooled.items()):
        ratio = f"{got / hit:.3f}" if hit else "-"
        print(f"| {lang} | {n:.0f} | {hit / n:.3f} | {got / n:.3f} | {ratio} | {empty / n:.1%} |")


if __name__ == "__main__":
    main()
