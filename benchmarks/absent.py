"""A tool or none (issue 49): confidence that still means something when a request's right tool is absent or hidden.

    python benchmarks/absent.py collect [--requests N] [--catalogs NAME ...] [--out FILE]
    python benchmarks/absent.py fit [--out FILE]          # the decision fitted leaving each catalog out
    python benchmarks/absent.py measure [--out FILE]      # the real search(), shipped decision, held-out halves

Every development set gives absence for free: hide a request's needed tools from the principal (all of them for a
request of several; `Principal.deny_tools`, so exactly as permissions hide a tool) and the right answer becomes
nothing. `collect` indexes bfcl, metatool, seal-tools, metatool-multilingual-xl and the generated graph catalog of
benchmarks/graph_catalog.py, and writes for each request of both halves (at most N each, evenly spaced) its
candidates' raw signals twice: with its tools present and with them hidden. `fit` fits the relevance model
(search/confidence.py) on the tuning halves of all catalogs but one, present and absent mixed 50/50, chooses the
floor the best tool must reach on those same catalogs, and reports on the left-out catalog's held-out half:

- present: Hit@3 of the ranking and the delivered hit (a needed tool among what would be returned);
- absent: a tool handed over at all, and at >= 0.5;
- ECE of the shown scores on the 50/50 mix, and the curve of present delivered hit against absent handed over as
  the floor moves.

`measure` runs the real `search()` (steps, second chances, sets and all) with the shipped model and floor on every
catalog's held-out half, per language, and prints the same figures. How this data differs from a real catalog's:
a hidden benchmark tool often leaves a sibling that does part of the job (seal-tools and bfcl have many), counted
here as wrong; so the absent figures are an upper bound on what a user would call a wrong tool.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.eval import load_benchmark
from toolrag.eval.dataset import BenchmarkSet, Query, in_half
from toolrag.eval.metrics import expected_calibration_error, reliability
from toolrag.eval.runner import hidden_from
from toolrag.search import confidence
from toolrag.search.confidence import FEATURES, RelevanceModel, Signals, feature_matrix
from toolrag.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from confidence import _RememberedTexts
from graph_catalog import generate, write
from logistic import fit_logistic

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
CATALOGS = ("bfcl", "metatool", "seal-tools", "metatool-multilingual-xl", "graph")
OUT = Path(tempfile.gettempdir()) / "toolrag-absent.json"
K = 3
ABSENT_BAR = 0.10  # absent requests handed a tool at >= 0.5, at most
# The relevance model shipped before issue 49 (fitted with every request's tool present), compared against.
BEFORE_FEATURES = ("evidence", "below_best", "inverse_rank", "first", "evidence_if_first", "english")
BEFORE = RelevanceModel(weights=(1.1971, 7.5194, 5.1074, -1.0833, 2.6801, 0.0076), bias=-4.1742)
BEFORE_MIN_CONFIDENCE = 0.03
T = TypeVar("T")


def _benchmark(name: str) -> BenchmarkSet:
    if name != "graph":
        return load_benchmark(BENCH / name)
    folder = Path(tempfile.mkdtemp(prefix="toolrag-graph-"))
    catalog, requests = generate(7, 5)
    write(folder, catalog, requests, with_graph=True)
    return load_benchmark(folder)


def _spaced(items: list[T], cap: int) -> list[T]:
    return items if len(items) <= cap else [items[int(n * len(items) / cap)] for n in range(cap)]


def collect(args: argparse.Namespace) -> None:
    embedder = _RememberedTexts(make_embedder("default"))
    rows: list[dict[str, Any]] = []
    for name in args.catalogs:
        benchmark = _benchmark(name)
        folder = Path(tempfile.mkdtemp(prefix="toolrag-absent-"))
        config = SearchConfig(cache_entries=0, inject_all_below_tokens=0)
        registry = ToolRegistry(SQLiteStore(folder / "registry.db"), embedder, config)
        print(f"{name}: indexing {len(benchmark.tools)} tools", file=sys.stderr, flush=True)
        registry.register_many(benchmark.tools)
        for half in ("tune", "held-out"):
            queries = _spaced(in_half(benchmark, half).queries, args.requests)
            for number, query in enumerate(queries):
                for absent in (False, True):
                    rows.append(_row(registry, name, half, query, absent))
                if number % 100 == 0:
                    print(f"  {half} {number}/{len(queries)}", file=sys.stderr, flush=True)
        registry.close()
    args.out.write_text(json.dumps({"features": FEATURES, "rows": rows}))
    print(f"{len(rows)} rows written to {args.out}", file=sys.stderr)


def _row(registry: ToolRegistry, catalog: str, half: str, query: Query, absent: bool) -> dict[str, Any]:
    principal = hidden_from(Principal.anonymous(), query.relevant) if absent else Principal.anonymous()
    found = registry.retriever.candidates(query.text, principal)
    tools = registry.snapshot().tools
    signals = found.signals()
    return {
        "catalog": catalog,
        "half": half,
        "lang": query.lang,
        "absent": absent,
        "needs_tool": found.needs_tool,
        "signals": signals.to_json(),
        "relevant": [tools[item.position].name in query.relevant for item in found.items],
    }


def _matrix(rows: Sequence[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    xs = [feature_matrix(Signals.from_json(r["signals"])) for r in rows if r["relevant"]]
    ys = [label for r in rows if r["relevant"] for label in r["relevant"]]
    return np.vstack(xs), np.asarray(ys, dtype=float)


def fit_model(rows: Sequence[dict[str, Any]], l2: float) -> RelevanceModel:
    """Fitted on the candidates of the requests that get tools, present and absent in equal numbers."""
    kept = [r for r in rows if r["needs_tool"]]
    weights = fit_logistic(*_matrix(kept), l2)
    return RelevanceModel(weights=tuple(round(float(w), 4) for w in weights[:-1]), bias=round(float(weights[-1]), 4))


def shown(row: dict[str, Any], model: RelevanceModel, floor: float, min_confidence: float) -> list[tuple[float, bool]]:
    """What search() would show of one request's candidates: the top K by fused score, best first by probability,
    the others below `min_confidence` dropped, and nothing when the best is below `floor`."""
    if not row["needs_tool"] or not row["relevant"]:
        return []
    probabilities = model.from_signals(Signals.from_json(row["signals"]))[:K]
    ordered = sorted(zip(probabilities, row["relevant"][:K], strict=True), key=lambda pair: -pair[0])
    if ordered[0][0] < floor:
        return []
    return [pair for number, pair in enumerate(ordered) if number == 0 or pair[0] >= min_confidence]


def figures(
    rows: Sequence[dict[str, Any]], model: RelevanceModel, floor: float, min_confidence: float
) -> dict[str, float]:
    present = [r for r in rows if not r["absent"]]
    absent = [r for r in rows if r["absent"]]
    shown_present = [shown(r, model, floor, min_confidence) for r in present]
    shown_absent = [shown(r, model, floor, min_confidence) for r in absent]
    scores = [p for s in shown_present + shown_absent for p, _ in s]
    labels = [good for s in shown_present + shown_absent for _, good in s]
    return {
        "n": len(present),
        "hit@3": float(np.mean([any(r["relevant"][:K]) for r in present])),
        "delivered": float(np.mean([any(good for _, good in s) for s in shown_present])),
        "absent given": float(np.mean([bool(s) for s in shown_absent])),
        "absent given >= 0.5": float(np.mean([bool(s) and s[0][0] >= 0.5 for s in shown_absent])),
        "returned": float(np.mean([len(s) for s in shown_present])),
        "ece": expected_calibration_error(reliability(scores, labels)) if scores else 0.0,
    }


FLOORS = tuple(round(0.05 * n, 2) for n in range(0, 13))


def choose_floor(rows: Sequence[dict[str, Any]], model: RelevanceModel, min_confidence: float) -> float:
    """The highest floor at which every fitting catalog keeps its present delivered hit within 0.01 of floor 0's."""
    best = 0.0
    catalogs = sorted({r["catalog"] for r in rows})
    base = {c: figures([r for r in rows if r["catalog"] == c], model, 0.0, min_confidence) for c in catalogs}
    for floor in FLOORS:
        kept = all(
            figures([r for r in rows if r["catalog"] == c], model, floor, min_confidence)["delivered"]
            >= base[c]["delivered"] - 0.01
            for c in catalogs
        )
        if kept:
            best = floor
    return best


def fit(args: argparse.Namespace) -> None:
    data = json.loads(args.out.read_text())
    rows = data["rows"]
    if args.features:
        confidence.FEATURES = tuple(args.features)
    min_confidence = args.min_confidence
    catalogs = list(dict.fromkeys(r["catalog"] for r in rows))
    print(f"features: {', '.join(confidence.FEATURES)}")
    for left_out in catalogs:
        tuning = [r for r in rows if r["catalog"] != left_out and r["half"] == "tune"]
        model = fit_model(tuning, args.l2)
        floor = choose_floor(tuning, model, min_confidence)
        held = [r for r in rows if r["catalog"] == left_out and r["half"] == "held-out"]
        print(f"\n{left_out} left out: floor {floor}, {model}")
        _table(held, model, floor, min_confidence)
    tuning = [r for r in rows if r["half"] == "tune"]
    model = fit_model(tuning, args.l2)
    floor = choose_floor(tuning, model, min_confidence)
    print(f"\nfitted on every tuning half: floor {floor}")
    coefficients = ", ".join(f"{w:.4f}" for w in model.weights)
    print(f"MODEL = RelevanceModel(weights=({coefficients}), bias={model.bias:.4f})")
    print("curve on every held-out half (floor: present delivered / absent given / absent given >= 0.5):")
    held = [r for r in rows if r["half"] == "held-out"]
    for candidate in FLOORS:
        f = figures(held, model, candidate, min_confidence)
        print(f"  {candidate:.2f}: {f['delivered']:.3f} / {f['absent given']:.3f} / {f['absent given >= 0.5']:.3f}")


def _table(rows: Sequence[dict[str, Any]], model: RelevanceModel, floor: float, min_confidence: float) -> None:
    print(
        "  language     n  Hit@3  delivered  tools  absent given  >= 0.5    ECE"
        " | before: delivered  tools  given  >= 0.5  ECE"
    )
    by_lang: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_lang[r["lang"]].append(r)
    for lang, mine in [*sorted(by_lang.items()), ("all", list(rows))]:
        f = figures(mine, model, floor, min_confidence)
        chosen, confidence.FEATURES = confidence.FEATURES, BEFORE_FEATURES
        s = figures(mine, BEFORE, 0.0, BEFORE_MIN_CONFIDENCE)
        confidence.FEATURES = chosen
        print(
            f"  {lang:8s} {f['n']:5d}  {f['hit@3']:.3f}  {f['delivered']:.3f}  {f['returned']:.2f}"
            f"  {f['absent given']:.3f}"
            f"      {f['absent given >= 0.5']:.3f}  {f['ece']:.3f} | {s['delivered']:.3f}  {s['returned']:.2f}"
            f"  {s['absent given']:.3f}"
            f"  {s['absent given >= 0.5']:.3f}  {s['ece']:.3f}"
        )


def measure(args: argparse.Namespace) -> None:
    """The real search() with the shipped model and settings, on every catalog's held-out half, tools present and
    hidden: what the agent receives."""
    embedder = _RememberedTexts(make_embedder("default"))
    report: dict[str, Any] = {}
    config = SearchConfig(cache_entries=0)
    if args.before:
        config = config.model_copy(update={"no_tool_below": 0.0, "min_confidence": BEFORE_MIN_CONFIDENCE})
    for name in args.catalogs:
        benchmark = _benchmark(name)
        folder = Path(tempfile.mkdtemp(prefix="toolrag-absent-"))
        registry = ToolRegistry(SQLiteStore(folder / "registry.db"), embedder, config)
        if args.before:
            registry.retriever.use_relevance(BEFORE)
        print(f"{name}: indexing {len(benchmark.tools)} tools", file=sys.stderr, flush=True)
        registry.register_many(benchmark.tools)
        by_lang: dict[str, list[tuple[bool, bool, list[tuple[float, bool]], list[float]]]] = defaultdict(list)
        queries = _spaced(in_half(benchmark, "held-out").queries, args.requests)
        for number, query in enumerate(queries):
            ranked = {r.name for r in registry.rank(query.text, Principal.anonymous(), limit=K)}
            present = registry.search(query.text, Principal.anonymous())
            absent = registry.search(query.text, hidden_from(Principal.anonymous(), query.relevant))
            by_lang[query.lang].append(
                (
                    bool(ranked & query.relevant),
                    bool({r.name for r in present} & query.relevant),
                    [(r.score, r.name in query.relevant) for r in present],
                    [r.score for r in absent],
                )
            )
            if number % 100 == 0:
                print(f"  {number}/{len(queries)}", file=sys.stderr, flush=True)
        registry.close()
        report[name] = {lang: _received(rows) for lang, rows in sorted(by_lang.items())}
        report[name]["all"] = _received([row for rows in by_lang.values() for row in rows])
        print(f"\n{name}: language n  Hit@3  delivered  ratio  tools  absent given  >= 0.5  ECE (50/50 mix)")
        for lang, f in report[name].items():
            print(
                f"  {lang:8s} {f['n']:4d}  {f['hit@3']:.3f}  {f['delivered']:.3f}  {f['ratio']:.3f}  {f['tools']:.2f}"
                f"  {f['absent given']:.3f}  {f['absent given >= 0.5']:.3f}  {f['ece']:.3f}",
                flush=True,
            )
    suffix = ".before.json" if args.before else ".measured.json"
    args.out.with_suffix(suffix).write_text(json.dumps(report, indent=1))


def _received(rows: Sequence[tuple[bool, bool, list[tuple[float, bool]], list[float]]]) -> dict[str, float]:
    """Per language: the ranking's Hit@3, the delivered hit and their ratio, the tools handed over with the tools
    present; a tool handed over at all and at >= 0.5 with them hidden; ECE of every shown score on the 50/50 mix
    (an absent request's tools are all wrong)."""
    hit3 = float(np.mean([r[0] for r in rows]))
    delivered = float(np.mean([r[1] for r in rows]))
    scores = [score for r in rows for score, _ in r[2]] + [score for r in rows for score in r[3]]
    labels = [good for r in rows for _, good in r[2]] + [False for r in rows for _ in r[3]]
    return {
        "n": len(rows),
        "hit@3": hit3,
        "delivered": delivered,
        "ratio": delivered / hit3 if hit3 else 1.0,
        "tools": float(np.mean([len(r[2]) for r in rows])),
        "absent given": float(np.mean([bool(r[3]) for r in rows])),
        "absent given >= 0.5": float(np.mean([bool(r[3]) and max(r[3]) >= 0.5 for r in rows])),
        "ece": expected_calibration_error(reliability(scores, labels)) if scores else 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    gather = sub.add_parser("collect")
    gather.add_argument("--requests", type=int, default=300, help="at most this many requests a catalog and half")
    gather.add_argument("--catalogs", nargs="+", default=list(CATALOGS), choices=CATALOGS)
    fitting = sub.add_parser("fit")
    fitting.add_argument("--l2", type=float, default=1.0)
    fitting.add_argument("--features", nargs="+", help="fit these instead of search/confidence.py's FEATURES")
    fitting.add_argument("--min-confidence", type=float, default=SearchConfig().min_confidence)
    measuring = sub.add_parser("measure")
    measuring.add_argument("--requests", type=int, default=300, help="at most this many held-out requests a catalog")
    measuring.add_argument("--catalogs", nargs="+", default=list(CATALOGS), choices=CATALOGS)
    measuring.add_argument("--before", action="store_true", help="with the model and cut shipped before issue 49")
    for command in (gather, fitting, measuring):
        command.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    {"collect": collect, "fit": fit, "measure": measure}[args.command](args)


if __name__ == "__main__":
    main()
