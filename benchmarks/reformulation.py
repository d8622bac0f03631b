"""Second chances for requests that got no tool: how many they rescue, and how many rightly.

    python benchmarks/reformulation.py [--requests 1500] [--sets bfcl metatool metatool-multilingual] [--small-talk N]

For every shared set (an evenly spaced sample), `search()` with no second chance and with `expand`,
on the requests as they are and with one typo (two letters swapped in the middle of the request's longest word):
the no-tool rate, the share of requests whose results hold a relevant tool, how many requests a step rescued and
how many of those rescues hold a relevant tool; and the small talk of ../shared/bench/notool.jsonl given a tool.
`rewrite` needs a chat model (none is reachable here): it is tested with a scripted model in
tests/test_reformulate.py.
"""

from __future__ import annotations

import argparse
import re
import tempfile
from pathlib import Path

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.eval import BenchmarkSet, load_benchmark, load_no_tool

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
SMALL_TALK = [request.text for request in load_no_tool(BENCH / "notool.jsonl")]
LONG_WORD = re.compile(r"[A-Za-z]{6,}")
STEPS: list[tuple[str, list[str]]] = [("none", []), ("expand (default)", ["expand"])]
SETS = ("bfcl", "metatool", "metatool-multilingual")


def with_typo(text: str) -> str:
    words = LONG_WORD.findall(text)
    if not words:
        return text
    word = max(words, key=len)
    middle = len(word) // 2
    return text.replace(word, word[:middle] + word[middle + 1] + word[middle] + word[middle + 2 :], 1)


def measure(registry: ToolRegistry, benchmark: BenchmarkSet, typo: bool) -> dict[str, float]:
    anyone = Principal.anonymous()
    empty = hits = rescued = rescued_hits = 0
    for query in benchmark.queries:
        results = registry.search(with_typo(query.text) if typo else query.text, anyone)
        hit = bool({r.name for r in results} & query.relevant)
        empty += not results
        hits += hit
        if results and results[0].signals.reformulation:
            rescued += 1
            rescued_hits += hit
    n = len(benchmark.queries)
    return {"no_tool": empty / n, "with_relevant": hits / n, "rescued": rescued, "rescued_relevant": rescued_hits}


def evenly_spaced(items: list[str], count: int | None) -> list[str]:
    """At most `count` of `items` (all with None), spread over the list as load_benchmark's limit is."""
    if count is None or count >= len(items):
        return items
    step = len(items) / count
    return [items[int(n * step)] for n in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument("--small-talk", type=int, default=None, help="at most this many small-talk requests")
    args = parser.parse_args()
    small_talk = evenly_spaced(SMALL_TALK, args.small_talk)
    embedder = make_embedder("default")
    print(
        "| set | requests | second chance | no tool | results hold a relevant tool | rescued (relevant) "
        "| small talk given a tool |"
    )
    print("|---|---|---|---|---|---|---|")
    for name in args.sets:
        benchmark = load_benchmark(BENCH / name, args.requests)
        with tempfile.TemporaryDirectory() as folder:
            base = ToolRegistry(Path(folder) / "r.db", embedder)
            base.register_many(benchmark.tools)
            for label, steps in STEPS:
                registry = ToolRegistry(base.store, embedder, SearchConfig(reformulate=steps))  # type: ignore[arg-type]
                talk = sum(bool(registry.search(t, Principal.anonymous())) for t in small_talk)
                for typo in (False, True):
                    f = measure(registry, benchmark, typo)
                    print(
                        f"| {name} | {'with a typo' if typo else 'as written'} | {label} | {f['no_tool']:.3f} "
                        f"| {f['with_relevant']:.3f} | {f['rescued']} ({f['rescued_relevant']}) "
                        f"| {talk} of {len(small_talk)} |",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
