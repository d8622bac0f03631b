"""Agent loop overhead per round, model time excluded, at 10 and 1,000 tools.

    python benchmarks/runtime_overhead.py [--runs 200] [--sizes 10 1000]

A scripted model answers instantly: each run is one round that calls a tool and one round that answers. The
overhead of a round is its total time minus the model's time: tool selection (retrieval, with the request
embedded), name resolution, authorization, argument validation, execution of a trivial tool, bookkeeping.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from synthetic import synthetic_requests, synthetic_tools

from toolrag import Principal, SearchConfig, ToolRegistry, tool
from toolrag.embed import make_embedder
from toolrag.runtime import Agent, ListSink, Message, RoundEvent, ScriptedModel, ToolCall


@tool(name="bench.echo")
def echo(text: str) -> str:
    """Repeat the text."""
    return text


def measure(size: int, runs: int, mode: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        registry = ToolRegistry(Path(folder) / "r.db", make_embedder(), SearchConfig(cache_entries=0))
        registry.register_many(synthetic_tools(size - 1))
        registry.register(echo)
        principal = Principal(scopes=frozenset({"*"}))
        call = Message("assistant", "", (ToolCall("c1", "bench.echo", '{"text": "hi"}'),))
        steps: list[Message] = []
        for _ in range(runs):
            steps.extend([call, Message("assistant", "done")])
        sink = ListSink()
        agent = Agent(registry, ScriptedModel(steps), principal, mode=mode, events=sink)  # type: ignore[arg-type]
        agent.run("warm up the models")
        sink.events.clear()
        for request in synthetic_requests(runs - 1):
            agent.run(request)
        rounds = [e.total_ms - e.model_ms for e in sink.of(RoundEvent)]
        calling = [e.total_ms - e.model_ms for e in sink.of(RoundEvent) if e.tool_calls]
    return {
        "tools": size,
        "mode": mode,
        "round_p50_ms": round(statistics.median(rounds), 2),
        "tool_round_p50_ms": round(statistics.median(calling), 2),
        "round_p95_ms": round(sorted(rounds)[int(len(rounds) * 0.95)], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 1000], help="catalog sizes (tools)")
    args = parser.parse_args()
    print("| tools | mode | round p50 ms | round with a tool call p50 ms | round p95 ms |")
    print("|---|---|---|---|---|")
    for size in args.sizes:
        for mode in ("preselect", "discover"):
            r = measure(size, args.runs, mode)
            print(
                f"| {r['tools']:,} | {r['mode']} | {r['round_p50_ms']} | {r['tool_round_p50_ms']} "
                f"| {r['round_p95_ms']} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
