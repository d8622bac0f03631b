"""Fit and check what search() decides and shows (search/confidence.py): whether a request needs a tool (the
small-talk quantile) and each candidate's probability of being relevant (the relevance model's coefficients).

    python benchmarks/confidence.py collect   # candidates and their features on every development set
    python benchmarks/confidence.py fit       # the decision at several quantiles; the model, fitted leaving one set out
    (both take --out FILE, default $TMPDIR/toolrag-confidence.json; collect also --sets NAME ... and --requests N)

`collect` indexes bfcl (500 evenly spaced requests, every tool), metatool (1,000), metatool-multilingual (all) and
the example catalog's set, and writes for every request its top 10 candidates' features and relevance, and for each
small-talk quantile whether the request gets tools; the same for the small talk of ../shared/bench/notool.jsonl
(the example set: its own). `fit` prints, per set and language, the share of requests with a relevant tool in the
top 3 that keep it (the decision's cost) and the small talk that gets a tool, per quantile; then fits the logistic
model on the candidates of the requests that get tools, on all sets but one, and measures it on the one left out
(expected calibration error of the shown scores, tools returned, delivered hit kept), then on all sets; it prints
the coefficients for search/confidence.py.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.embed.base import Embedder, Vectors
from toolrag.eval import BenchmarkSet, load_benchmark, load_no_tool
from toolrag.eval.dataset import NoToolRequest, example_no_tool_requests, load_example
from toolrag.eval.metrics import expected_calibration_error, reliability
from toolrag.eval.runner import _RememberedQueries
from toolrag.search.confidence import FEATURES, features
from toolrag.store.sqlite import SQLiteStore

sys.path.insert(0, str(Path(__file__).parent))
from logistic import fit_logistic

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
OUT = Path(tempfile.gettempdir()) / "toolrag-confidence.json"
QUANTILES = (0.85, 0.9, 0.92, 0.94, 0.96, 0.98)
K = 3


SETS = ("bfcl", "metatool", "metatool-multilingual", "metatool-multilingual-xl", "example")


class _RememberedTexts(_RememberedQueries):
    """Embeds each request and each tool text once: the metatool sets share their 199 tools."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._documents: dict[str, Vectors] = {}

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        missing = [text for text in dict.fromkeys(texts) if text not in self._documents]
        if missing:
            self._documents.update(zip(missing, self.inner.embed_documents(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack([self._documents[text] for text in texts])


def _sets(args: argparse.Namespace) -> list[tuple[str, Callable[[], BenchmarkSet], list[NoToolRequest]]]:
    """The chosen sets, each with its small talk; `--requests` caps every set's requests and small talk."""
    cap = args.requests
    shared = _sample(load_no_tool(BENCH / "notool.jsonl"), cap)
    every = [
        ("bfcl", lambda: load_benchmark(BENCH / "bfcl", _least(args.bfcl, cap)), shared),
        ("metatool", lambda: load_benchmark(BENCH / "metatool", _least(args.metatool, cap)), shared),
        ("metatool-multilingual", lambda: load_benchmark(BENCH / "metatool-multilingual", cap), shared),
        ("metatool-multilingual-xl", lambda: load_benchmark(BENCH / "metatool-multilingual-xl", cap), shared),
        ("example", lambda: load_example(cap), _sample(example_no_tool_requests(), cap)),
    ]
    return [entry for entry in every if entry[0] in args.sets]


def _least(limit: int, cap: int | None) -> int:
    return limit if cap is None else min(limit, cap)


def _sample(requests: list[NoToolRequest], count: int | None) -> list[NoToolRequest]:
    """At most `count` requests, evenly spaced (so each language keeps its share)."""
    if count is None or count >= len(requests):
        return requests
    return [requests[int(n * len(requests) / count)] for n in range(count)]


def collect(args: argparse.Namespace) -> None:
    embedder = _RememberedTexts(make_embedder("default"))
    requests: list[dict[str, Any]] = []
    for name, load, small_talk in _sets(args):
        benchmark = load()
        folder = Path(tempfile.mkdtemp(prefix="toolrag-confidence-"))
        config = SearchConfig(cache_entries=0, inject_all_below_tokens=0)
        registry = ToolRegistry(SQLiteStore(folder / "registry.db"), embedder, config)
        registry.register_many(benchmark.tools)
        tools = registry.snapshot().tools
        # The example catalog's tools carry scopes and tenants: measured as someone who may use them all.
        anyone = Principal(user="example", tenant="acme", scopes=frozenset({"*"}))
        asked = [(q.id, q.text, q.lang, q.relevant) for q in benchmark.queries]
        asked += [(f"no-tool:{r.id}", r.text, r.lang, frozenset[str]()) for r in small_talk]
        for number, (request_id, text, lang, relevant) in enumerate(asked):
            needs_tool = {}
            for quantile in QUANTILES:
                registry.retriever.use_config(config.model_copy(update={"small_talk_quantile": quantile}))
                found = registry.retriever.candidates(text, anyone)
                needs_tool[str(quantile)] = found.needs_tool
            registry.retriever.use_config(config)
            found = registry.retriever.candidates(text, anyone)
            requests.append(
                {
                    "set": name,
                    "id": request_id,
                    "lang": lang,
                    "no_tool": not relevant,
                    "needs_tool": needs_tool,
                    "features": features(found).tolist() if found.items else [],
                    "relevant": [tools[item.position].name in relevant for item in found.items],
                }
            )
            if number % 250 == 0:
                print(f"{name}: {number}/{len(asked)}", file=sys.stderr, flush=True)
        registry.close()
    args.out.write_text(json.dumps({"features": FEATURES, "requests": requests}))
    print(f"{len(requests)} requests written to {args.out}", file=sys.stderr)


def fit(args: argparse.Namespace) -> None:
    data = json.loads(args.out.read_text())
    if data["features"] != list(FEATURES):
        sys.exit(f"{args.out} was collected with other features: collect again")
    requests = data["requests"]
    _decision_table(requests)
    chosen = args.quantile
    kept = [r for r in requests if not r["no_tool"] and r["needs_tool"][chosen] and r["features"]]
    sets = sorted({r["set"] for r in kept})
    print(f"\nthe relevance model (candidates of the real requests that get tools at quantile {chosen})")
    for held_out in sets:
        weights = _fit([r for r in kept if r["set"] != held_out], args.l2)
        print(f"  fitted without {held_out}: {_shown([r for r in kept if r['set'] == held_out], weights, args)}")
    weights = _fit(kept, args.l2)
    for name in sets:
        print(f"  fitted on all, {name}: {_shown([r for r in kept if r['set'] == name], weights, args)}")
    coefficients = ", ".join(f"{w:.4f}" for w in weights[:-1])
    print(f"\nMODEL = RelevanceModel(weights=({coefficients}), bias={weights[-1]:.4f})")


def _decision_table(requests: list[dict[str, Any]]) -> None:
    """Per quantile: the share of requests with a relevant tool in the top 3 that still get tools, and of small
    talk that gets one, per set and language."""
    for quantile in map(str, QUANTILES):
        print(f"small_talk_quantile {quantile}")
        for name in dict.fromkeys(r["set"] for r in requests):
            mine = [r for r in requests if r["set"] == name]
            keeps: dict[str, list[bool]] = defaultdict(list)
            false_tool: dict[str, list[bool]] = defaultdict(list)
            for r in mine:
                if r["no_tool"]:
                    false_tool[r["lang"]].append(r["needs_tool"][quantile])
                elif any(r["relevant"][:K]):
                    keeps[r["lang"]].append(r["needs_tool"][quantile])
            kept = " ".join(f"{lang} {np.mean(v):.2f}" for lang, v in sorted(keeps.items()) if len(v) >= 5)
            given = " ".join(f"{lang} {sum(v)}/{len(v)}" for lang, v in sorted(false_tool.items()))
            print(f"  {name:22s} top-3 hits kept: {kept} | small talk given a tool: {given}")


def _matrix(requests: list[dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([row for r in requests for row in r["features"]], dtype=float)
    y = np.array([label for r in requests for label in r["relevant"]], dtype=float)
    return x, y


def _fit(requests: list[dict[str, Any]], l2: float) -> np.ndarray:
    """The relevance model's weights, then the bias."""
    return fit_logistic(*_matrix(requests), l2)


def _shown(requests: list[dict[str, Any]], weights: np.ndarray, args: argparse.Namespace) -> str:
    """What search() would show: the top 3 by fused score, best first by probability, those below min_confidence
    dropped (not the first); the calibration of their scores and the top-3 hits they keep."""
    probabilities, labels, returned, hits_kept = [], [], [], []
    for r in requests:
        x = np.array(r["features"], dtype=float)[:K]
        p = 1 / (1 + np.exp(-(x @ weights[:-1] + weights[-1])))
        ordered = sorted(zip(p, r["relevant"][:K], strict=True), key=lambda pair: -pair[0])
        shown = [pair for number, pair in enumerate(ordered) if number == 0 or pair[0] >= args.min_confidence]
        probabilities += [float(pair[0]) for pair in shown]
        labels += [pair[1] for pair in shown]
        returned.append(len(shown))
        if any(r["relevant"][:K]):
            hits_kept.append(any(pair[1] for pair in shown))
    ece = expected_calibration_error(reliability(probabilities, labels))
    return (
        f"ECE {ece:.3f} (mean score {np.mean(probabilities):.3f}, relevant {np.mean(labels):.3f}),"
        f" {np.mean(returned):.2f} returned, top-3 hits kept {np.mean(hits_kept):.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    gather = sub.add_parser("collect")
    gather.add_argument("--bfcl", type=int, default=500)
    gather.add_argument("--metatool", type=int, default=1000)
    gather.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    gather.add_argument("--requests", type=int, default=None, help="at most this many requests (and small talk) a set")
    fitting = sub.add_parser("fit")
    fitting.add_argument("--quantile", default=str(SearchConfig().small_talk_quantile))
    fitting.add_argument("--l2", type=float, default=1.0)
    fitting.add_argument("--min-confidence", type=float, default=SearchConfig().min_confidence)
    for command in (gather, fitting):
        command.add_argument("--out", type=Path, default=OUT, help="where collect writes and fit reads")
    args = parser.parse_args()
    collect(args) if args.command == "collect" else fit(args)


if __name__ == "__main__":
    main()
