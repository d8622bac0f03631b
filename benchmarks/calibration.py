"""Fixed against calibrated similarity thresholds: how many real requests get no tool, how much chit-chat gets one.

    python benchmarks/calibration.py [--requests 2000]

For every shared set: index its tools once, then for the fixed default (0.45) and calibrated thresholds at several
quantiles, count the real requests (an evenly spaced sample) that `search()` answers with no tool, and the
held-out small-talk requests (none of them is in the calibration bank) that get a tool.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.eval import load_benchmark

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
HELD_OUT_SMALL_TALK = [
    "hi there",
    "how is your day going?",
    "do you like music?",
    "what is two plus two?",
    "tell me something interesting",
    "are you a robot?",
    "I'm feeling sad today",
    "what should I name my cat?",
    "who wrote War and Peace?",
    "sing me a song",
    "Guten Abend!",
    "Що ти вмієш?",
    "你是谁？",
    "¿Cuál es tu película favorita?",
    "Merci beaucoup !",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    args = parser.parse_args()
    embedder = make_embedder("default")
    variants: list[tuple[str, SearchConfig]] = [("fixed 0.45", SearchConfig(cache_entries=0))]
    variants += [
        (f"calibrated q={q}", SearchConfig(cache_entries=0, calibrate=True, calibration_quantile=q))
        for q in (0.8, 0.9, 0.95)
    ]
    print("| set | threshold | value | real requests with no tool | small talk given a tool |")
    print("|---|---|---|---|---|")
    for name in ("bfcl", "metatool", "metatool-multilingual"):
        benchmark = load_benchmark(BENCH / name, args.requests)
        with tempfile.TemporaryDirectory() as folder:
            base = ToolRegistry(Path(folder) / "c.db", embedder)
            base.register_many(benchmark.tools)
            for label, config in variants:
                registry = ToolRegistry(base.store, embedder, config)
                value = registry.retriever.threshold(registry.snapshot())
                empty = sum(not registry.search(q.text, Principal()) for q in benchmark.queries)
                chatty = sum(bool(registry.search(text, Principal())) for text in HELD_OUT_SMALL_TALK)
                print(
                    f"| {name} | {label} | {value:.3f} | {empty / len(benchmark.queries):.3f} "
                    f"| {chatty} of {len(HELD_OUT_SMALL_TALK)} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()
