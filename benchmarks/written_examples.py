"""Written example requests, measured with stand-ins (issue 53): what example requests written for each tool add,
per language, on requests nobody tuned on.

    python benchmarks/written_examples.py [--per-tool 2] [--half held-out] [--limit N] [--json]

No chat model is reachable here, so real requests stand in for what one would write: each of the 199 tools of
metatool-multilingual-xl gets `--per-tool` English requests of metatool (the same 199 tools; never one of xl's own
requests, whose translations are what is measured) as example requests, and xl's held-out half is searched in its
seven languages with them and without, paired request by request. It reports, per language, the delivered hit
with and without and their paired difference, and the small talk of notool.jsonl's held-out half given a tool.

How this differs from the real thing: the stand-ins are English, where a model would write in each of the users'
languages (the shared sets hold no translations of other requests for the same tools: the effect of examples in
the users' own languages is not measured here); and they are real users' requests, which a model's are not.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).parent))
from confidence import _RememberedTexts

from toolrag.embed import make_embedder
from toolrag.eval import evaluate, load_benchmark, load_no_tool
from toolrag.eval.dataset import BenchmarkSet, Query, in_half, no_tool_in_half
from toolrag.eval.metrics import paired_difference
from toolrag.eval.runner import with_examples

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
T = TypeVar("T")


def stand_ins(xl: BenchmarkSet, per_tool: int) -> list[Query]:
    """`per_tool` metatool requests for every tool (a run writes for all of them, not only those measured), none of
    them one of xl's (by text), the first ones by id: what a model writing English examples would stand for."""
    own = {query.text.strip().lower() for query in xl.queries}
    needed = {tool.name for tool in xl.tools}
    chosen: dict[str, list[Query]] = defaultdict(list)
    for query in sorted(load_benchmark(BENCH / "metatool").queries, key=lambda q: q.id):
        (name,) = query.relevant if len(query.relevant) == 1 else (None,)
        if name in needed and len(chosen[name]) < per_tool and query.text.strip().lower() not in own:
            chosen[name].append(query)
    return [query for queries in chosen.values() for query in queries]


def _spaced(items: list[T], count: int) -> list[T]:
    return items if count >= len(items) else [items[int(n * len(items) / count)] for n in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-tool", type=int, default=2)
    parser.add_argument("--half", choices=("tune", "held-out"), default="held-out")
    parser.add_argument("--limit", type=int, default=None, help="at most this many requests, evenly spaced")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    embedder = _RememberedTexts(make_embedder("default"))
    xl = load_benchmark(BENCH / "metatool-multilingual-xl")
    measured = in_half(xl, args.half)
    small_talk = no_tool_in_half(load_no_tool(BENCH / "notool.jsonl"), args.half)
    if args.limit is not None:
        measured = BenchmarkSet(measured.name, measured.tools, _spaced(measured.queries, args.limit))
        small_talk = _spaced(small_talk, args.limit)
    examples = stand_ins(xl, args.per_tool)
    given = BenchmarkSet(measured.name, with_examples(measured.tools, examples), measured.queries)
    print(f"{len(examples)} stand-in examples for {len(measured.queries)} requests", file=sys.stderr, flush=True)
    reports = {
        "without": evaluate(measured, embedder, no_tool=small_talk),
        "with": evaluate(given, embedder, no_tool=small_talk),
    }
    rows: dict[str, Any] = {}
    queries = {name: report.modes["hybrid"].queries for name, report in reports.items()}
    languages = sorted({q.lang for q in queries["without"]}, key=lambda lang: (lang != "en", lang))
    for lang in [*languages, "all"]:
        pairs = [
            (a.delivered_hit, b.delivered_hit)
            for a, b in zip(queries["with"], queries["without"], strict=True)
            if lang in ("all", a.lang)
        ]
        difference = paired_difference([a for a, _ in pairs], [b for _, b in pairs])
        rows[lang] = {
            "n": len(pairs),
            "without": sum(b for _, b in pairs) / len(pairs),
            "with": sum(a for a, _ in pairs) / len(pairs),
            "difference": difference.difference,
            "interval": [difference.low, difference.high],
        }
    small = {name: report.no_tool.given_tool if report.no_tool else 0.0 for name, report in reports.items()}
    if args.json:
        print(json.dumps({"languages": rows, "small talk given a tool": small}, indent=1))
        return
    print(f"delivered hit on xl's {args.half} half, without and with {args.per_tool} English stand-ins a tool:")
    for lang, row in rows.items():
        low, high = row["interval"]
        print(
            f"  {lang:4s} n={row['n']:3d}  {row['without']:.3f} -> {row['with']:.3f}"
            f"  ({row['difference']:+.3f}, 95% {low:+.3f} to {high:+.3f})"
        )
    print(f"small talk given a tool: {small['without']:.3f} -> {small['with']:.3f}")


if __name__ == "__main__":
    main()
