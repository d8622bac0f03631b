"""Retrieval quality on every benchmark set, toolrag's default against its baselines, in one run.

    python benchmarks/retrieval.py [--bench ../shared/bench] [--models-limit 3000] [--limit N] > docs/retrieval-run.md

For each set: the default (hybrid) and, over the same index, dense-only and BM25-only retrieval; then the hybrid
pipeline with each single model, on at most `--models-limit` requests per set. `--limit` samples the requests of
the first comparison too (default: every request). Prints markdown tables.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from toolrag.embed import make_embedder
from toolrag.eval import evaluate, load_benchmark

ROOT = Path(__file__).resolve().parents[1]
METRICS = ("recall@1", "recall@3", "recall@5", "ndcg@10", "mrr@10", "no_tool_rate")
NAMES = {
    "recall@1": "R@1",
    "recall@3": "R@3",
    "recall@5": "R@5",
    "ndcg@10": "nDCG@10",
    "mrr@10": "MRR@10",
    "no_tool_rate": "no tool",
}


def row(label: str, figures: dict[str, Any], metrics: tuple[str, ...] = METRICS) -> str:
    return f"| {label} | " + " | ".join(f"{figures[m]:.3f}" for m in metrics) + " |"


def header(first: str, metrics: tuple[str, ...] = METRICS) -> list[str]:
    return [f"| {first} | " + " | ".join(NAMES[m] for m in metrics) + " |", "|---" * (len(metrics) + 1) + "|"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    parser.add_argument("--sets", nargs="+", default=["bfcl", "metatool", "metatool-multilingual"])
    parser.add_argument("--models", nargs="+", default=["use", "minilm"])
    parser.add_argument("--models-limit", type=int, default=3000)
    parser.add_argument("--limit", type=int, default=None, help="requests per set for the three modes (default: all)")
    args = parser.parse_args()
    default = make_embedder("default")
    lines = []
    for name in args.sets:
        print(f"{name}: default embedder, three modes", file=sys.stderr, flush=True)
        started = time.perf_counter()
        benchmark = load_benchmark(args.bench / name, args.limit)
        report = evaluate(benchmark, default, modes=("hybrid", "dense", "lexical")).as_json()
        seconds = time.perf_counter() - started
        lines.append(f"### {name}: {report['n_tools']:,} tools, {report['n_queries']:,} requests\n")
        lines.extend(header("retrieval (default model)"))
        labels = {"hybrid": "**toolrag default (hybrid)**", "dense": "dense only", "lexical": "BM25 only"}
        lines.extend(row(labels[mode], figures) for mode, figures in report["modes"].items())
        tokens = report["tokens"]
        lines.append(
            f"\nSearch latency, request embedding included: p50 {report['latency_ms']['p50']:.1f} ms, "
            f"p95 {report['latency_ms']['p95']:.1f} ms. Prompt tokens: {tokens['injected_mean']:.0f} injected on "
            f"average instead of {tokens['catalog']:,} for the whole catalog ({tokens['saved_pct']:.1f}% saved). "
            f"Indexing {report['index_seconds']:.1f} s; whole run {seconds:.0f} s.\n"
        )
        if len(report["by_lang"]) > 1:
            ranking = METRICS[:-1]
            lines.extend(header("language: hybrid / dense only", ranking))
            for lang, figures in report["modes"]["hybrid"]["by_lang"].items():
                lines.append(row(f"{lang} (n={figures['n_queries']}) hybrid", figures, ranking))
                lines.append(row(f"{lang} dense only", report["modes"]["dense"]["by_lang"][lang], ranking))
            lines.append("")
        limit = args.models_limit
        sample = load_benchmark(args.bench / name, limit=limit)
        lines.extend(header(f"hybrid, by model ({len(sample.queries):,} requests)"))
        for model in ("default", *args.models):
            print(f"{name}: hybrid with {model}", file=sys.stderr, flush=True)
            figures = evaluate(sample, make_embedder(model) if model != "default" else default).as_json()
            lines.append(row(model, figures))
            non_english = [v for lang, v in figures["by_lang"].items() if lang != "en"]
            if non_english:
                mean_r3 = sum(v["recall@3"] for v in non_english) / len(non_english)
                lines[-1] += f" non-English R@3 (mean over languages): {mean_r3:.3f}"
        lines.append("")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
