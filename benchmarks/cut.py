"""The cut fitted leaving one catalog out (issue 32 §6): does what search() decides to return, or not, hold on a
catalog nobody tuned on?

    python benchmarks/cut.py [--requests N] [--catalogs NAME ...] [--out FILE]

The cut is what decides that a request gets fewer tools than it ranks, or none: the small-talk quantile (whether a
request needs a tool at all) and the relevance model (each candidate's probability, against `min_confidence`), both
in search/confidence.py. For each catalog (bfcl, metatool, seal-tools, metatool-multilingual-xl) this script

1. indexes it and collects, on its tuning half (at most N requests, evenly spaced) and the tuning half of
   notool.jsonl, each request's candidates and whether it needs a tool at each quantile (benchmarks/confidence.py);
2. then, leaving it out, chooses the quantile on the three others by one rule (the highest one at which every
   language of every other catalog keeps at least KEEP of its top-3 hits) and fits the relevance model on their
   candidates;
3. runs the real search() (steps, sets and all) on its held-out half with that cut, and with the shipped one, and
   prints per language the ranking's Hit@3, the delivered hit and their ratio, and small talk given a tool.

The bar (issue 32): left out of the fit, every catalog's delivered hit >= 0.9 x its Hit@3 in every language.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.eval import load_benchmark, load_no_tool
from toolrag.eval.dataset import NoToolRequest, Query, in_half, no_tool_in_half
from toolrag.search.confidence import MODEL, RelevanceModel, features
from toolrag.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from confidence import QUANTILES, K, _fit, _RememberedTexts

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
CATALOGS = ("bfcl", "metatool", "seal-tools", "metatool-multilingual-xl")
KEEP = 0.95  # the share of its top-3 hits every language of the fitting catalogs keeps at the chosen quantile
MIN_LANGUAGE = 10  # requests with a top-3 hit a language needs to count in the rule
RATIO_BAR = 0.9
T = TypeVar("T")


@dataclass
class Catalog:
    name: str
    registry: ToolRegistry
    tuning: list[dict[str, Any]]  # per tuning request and small talk: features, relevance, needs_tool by quantile
    held_out: list[Query]
    small_talk: list[NoToolRequest]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=500, help="at most this many requests a catalog and half")
    parser.add_argument("--catalogs", nargs="+", default=list(CATALOGS), help="at least two sets of ../shared/bench")
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "toolrag-cut.json")
    args = parser.parse_args()
    if len(args.catalogs) < 2:
        parser.error("--catalogs: give at least two sets, one to leave out and one to fit on")
    embedder = _RememberedTexts(make_embedder("default"))
    small_talk = load_no_tool(BENCH / "notool.jsonl")
    catalogs = [_indexed(name, embedder, small_talk, args.requests) for name in args.catalogs]
    report = {}
    for left_out in catalogs:
        others = [c for c in catalogs if c is not left_out]
        quantile = choose_quantile([row for c in others for row in c.tuning])
        model = fit_model([row for c in others for row in c.tuning], quantile, args.l2)
        print(f"\n{left_out.name} left out: quantile {quantile}, {model}", flush=True)
        report[left_out.name] = {
            "left_out": {"quantile": quantile, "model": [*model.weights, model.bias]},
            "fitted without it": measure(left_out, model, quantile),
            "shipped": measure(left_out, MODEL, SearchConfig().small_talk_quantile),
        }
        _print(report[left_out.name])
    args.out.write_text(json.dumps(report, indent=1))
    print(f"\nwritten to {args.out}", file=sys.stderr)
    for catalog in catalogs:
        catalog.registry.close()


def _indexed(name: str, embedder: _RememberedTexts, small_talk: list[NoToolRequest], cap: int) -> Catalog:
    benchmark = load_benchmark(BENCH / name)
    folder = Path(tempfile.mkdtemp(prefix="toolrag-cut-"))
    config = SearchConfig(cache_entries=0, inject_all_below_tokens=0)
    registry = ToolRegistry(SQLiteStore(folder / "registry.db"), embedder, config)
    print(f"{name}: indexing {len(benchmark.tools)} tools", file=sys.stderr, flush=True)
    registry.register_many(benchmark.tools)
    asked = [(q.text, q.lang, q.relevant) for q in _spaced(in_half(benchmark, "tune").queries, cap)]
    asked += [(r.text, r.lang, frozenset[str]()) for r in _spaced(no_tool_in_half(small_talk, "tune"), cap)]
    rows = [
        {"group": f"{name}:{lang}", **_collected(registry, config, text, lang, relevant)}
        for text, lang, relevant in asked
    ]
    held_out = _spaced(in_half(benchmark, "held-out").queries, cap)
    return Catalog(name, registry, rows, held_out, _spaced(no_tool_in_half(small_talk, "held-out"), cap))


def _spaced(items: list[T], cap: int) -> list[T]:
    """At most `cap` of `items`, evenly spaced."""
    return items if len(items) <= cap else [items[int(n * len(items) / cap)] for n in range(cap)]


def _collected(
    registry: ToolRegistry, config: SearchConfig, text: str, lang: str, relevant: frozenset[str]
) -> dict[str, Any]:
    """What the relevance model and the quantile are fitted on, for one request (as benchmarks/confidence.py)."""
    tools = registry.snapshot().tools
    anyone = Principal.anonymous()
    needs_tool = {}
    for quantile in QUANTILES:
        registry.retriever.use_config(config.model_copy(update={"small_talk_quantile": quantile}))
        needs_tool[str(quantile)] = registry.retriever.candidates(text, anyone).needs_tool
    registry.retriever.use_config(config)
    found = registry.retriever.candidates(text, anyone)
    return {
        "lang": lang,
        "no_tool": not relevant,
        "needs_tool": needs_tool,
        "features": features(found).tolist() if found.items else [],
        "relevant": [tools[item.position].name in relevant for item in found.items],
    }


def choose_quantile(rows: Sequence[dict[str, Any]]) -> float:
    """The highest quantile at which every language with enough top-3 hits keeps KEEP of them (rows of several
    catalogs: each catalog's language counts apart, by its `group`)."""
    best = QUANTILES[0]
    for quantile in QUANTILES:
        kept: dict[str, list[bool]] = defaultdict(list)
        for row in rows:
            if not row["no_tool"] and any(row["relevant"][:K]):
                kept[row["group"]].append(row["needs_tool"][str(quantile)])
        if all(np.mean(v) >= KEEP for v in kept.values() if len(v) >= MIN_LANGUAGE):
            best = quantile
    return best


def fit_model(rows: Sequence[dict[str, Any]], quantile: float, l2: float) -> RelevanceModel:
    kept = [r for r in rows if not r["no_tool"] and r["needs_tool"][str(quantile)] and r["features"]]
    weights = _fit(kept, l2)
    return RelevanceModel(weights=tuple(round(float(w), 4) for w in weights[:-1]), bias=round(float(weights[-1]), 4))


def measure(catalog: Catalog, model: RelevanceModel, quantile: float) -> dict[str, Any]:
    """Per language: Hit@3 of the ranking, the delivered hit of search() with this cut, and small talk given a
    tool."""
    registry, anyone = catalog.registry, Principal.anonymous()
    registry.retriever.use_config(registry.config.model_copy(update={"small_talk_quantile": quantile}))
    registry.retriever.use_relevance(model)
    hits: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for query in catalog.held_out:
        ranking = [r.name for r in registry.rank(query.text, anyone, limit=3)]
        delivered = [r.name for r in registry.search(query.text, anyone)]
        hits[query.lang].append((bool(query.relevant & set(ranking)), bool(query.relevant & set(delivered))))
    given: dict[str, list[bool]] = defaultdict(list)
    for request in catalog.small_talk:
        given[request.lang].append(bool(registry.search(request.text, anyone)))
    registry.retriever.use_relevance(MODEL)
    registry.retriever.use_config(registry.config)
    return {
        "languages": {
            lang: _figures(pairs) for lang, pairs in sorted(hits.items(), key=lambda item: (item[0] != "en", item[0]))
        },
        "all": _figures([pair for pairs in hits.values() for pair in pairs]),
        "small talk given a tool": float(np.mean([g for values in given.values() for g in values])),
    }


def _figures(pairs: Sequence[tuple[bool, bool]]) -> dict[str, float]:
    hit3 = float(np.mean([ranked for ranked, _ in pairs]))
    delivered = float(np.mean([got for _, got in pairs]))
    return {"n": len(pairs), "hit@3": hit3, "delivered": delivered, "ratio": delivered / hit3 if hit3 else 1.0}


def _print(entry: dict[str, Any]) -> None:
    left, shipped = entry["fitted without it"], entry["shipped"]
    print("  language      n  Hit@3  delivered left out / ratio  delivered shipped / ratio")
    for lang, figures in [*left["languages"].items(), ("all", left["all"])]:
        ship = shipped["all"] if lang == "all" else shipped["languages"][lang]
        judged = figures["n"] >= MIN_LANGUAGE
        mark = "" if not judged or figures["ratio"] >= RATIO_BAR else "  below the bar"
        print(
            f"  {lang:10s} {figures['n']:4d}  {figures['hit@3']:.3f}"
            f"  {figures['delivered']:.3f} / {figures['ratio']:.3f}"
            f"          {ship['delivered']:.3f} / {ship['ratio']:.3f}{mark}{'' if judged else '  (too few to judge)'}"
        )
    print(
        f"  small talk given a tool: {left['small talk given a tool']:.3f} left out,"
        f" {shipped['small talk given a tool']:.3f} shipped",
        flush=True,
    )


if __name__ == "__main__":
    main()
