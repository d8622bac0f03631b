"""What tools cost in prompt tokens, in full, per catalog: the measurement behind SearchConfig.inject_all_below_tokens.

    python benchmarks/catalog_tokens.py

For each shared set and the example catalog: the tokens of one tool's full definition (OpenAI format, exact
o200k_base counts with the `tokens` extra, estimates otherwise) at the 25th, 50th and 75th percentile, and what ten
tools at the median cost (the size up to which the design toolrag follows gives the model every tool).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from toolrag.eval import load_benchmark
from toolrag.eval.dataset import load_example
from toolrag.inject import render, tools_tokens

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"


def main() -> None:
    sets = [(name, load_benchmark(BENCH / name, 1).tools) for name in ("bfcl", "metatool")]
    sets.append(("example", load_example(1).tools))
    print("| catalog | tools | tokens per tool p25 / p50 / p75 | ten tools at the median |")
    print("|---|---|---|---|")
    every: list[int] = []
    for name, tools in sets:
        counts = [tools_tokens(render([tool], "openai")) for tool in tools]
        every += counts
        p25, p50, p75 = np.percentile(counts, [25, 50, 75])
        print(f"| {name} | {len(tools)} | {p25:.0f} / {p50:.0f} / {p75:.0f} | {10 * p50:.0f} |")
    quartiles = " / ".join(f"{v:.0f}" for v in np.percentile(every, [25, 50, 75]))
    print(f"| all | {len(every)} | {quartiles} | {10 * np.median(every):.0f} |")


if __name__ == "__main__":
    main()
