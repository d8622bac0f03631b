"""Learned fusion against the hand fusion (issue 27, item 4): a logistic model over the signals search already has,
re-ranking each request's best candidates, trained leaving one set out and measured on the held-out halves.

    python benchmarks/fusion.py collect [--requests 1000] [--out FILE]   # every set's candidates and signals
    python benchmarks/fusion.py fit [--out FILE]                         # leave one set out, report held-out halves

`collect` indexes each shared set (bfcl, metatool, metatool-multilingual, metatool-multilingual-xl; at most
`--requests` evenly spaced requests a set) and keeps, for each request, its CANDIDATES best tools in the default
(hand-fused) order with their signals: the fused score, the ensemble's cosine, each model's own cosine (read from
the ensemble's vectors: a model the request's language does not run counts 0), the lexical share, a name match, the
request's language, and whether the tool is relevant.

`fit` trains a pointwise logistic model (L2, numpy) on every set but one and re-ranks the left-out set's candidates
by it; nDCG@10 of the re-ranked list against the hand order, request by request with a paired bootstrap interval, on
the left-out set's held-out half (the halves of `toolrag eval --half`) and per language. The hand fusion stays the
default unless the learned one wins there on every set and language (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from toolrag import Principal, ToolRegistry
from toolrag.embed import make_embedder
from toolrag.embed.base import DelegatingEmbedder, Embedder
from toolrag.embed.ensemble import EnsembleEmbedder
from toolrag.embed.language import looks_english
from toolrag.eval import load_benchmark
from toolrag.eval.dataset import halves
from toolrag.eval.metrics import ndcg_at_10, paired_difference

sys.path.insert(0, str(Path(__file__).parent))
from logistic import fit_logistic

BENCH = Path(__file__).resolve().parents[2] / "shared" / "bench"
OUT = Path(tempfile.gettempdir()) / "toolrag-fusion.json"
SETS = ("bfcl", "metatool", "metatool-multilingual", "metatool-multilingual-xl")
CANDIDATES = 30


def _ensemble(embedder: Embedder) -> EnsembleEmbedder:
    while isinstance(embedder, DelegatingEmbedder):
        embedder = embedder.inner
    if not isinstance(embedder, EnsembleEmbedder):
        sys.exit("the default embedder is no ensemble: nothing to read each model's cosine from")
    return embedder


def model_cosines(ensemble: EnsembleEmbedder, request: np.ndarray, tools: np.ndarray, english: bool) -> np.ndarray:
    """One column per model: its cosine with each tool row. A request slice is the model's vector times its weight
    over its document scale, a tool slice the model's vector times that scale (embed/ensemble.py)."""
    columns, start = [], 0
    for member in ensemble.members:
        width = member.embedder.dimension
        weight = member.english if english else member.other
        part = tools[:, start : start + width] @ request[start : start + width]
        columns.append(part / weight if weight else np.zeros(len(tools), dtype=np.float32))
        start += width
    return np.column_stack(columns)


def collect(args: argparse.Namespace) -> None:
    embedder = make_embedder("default")
    ensemble = _ensemble(embedder)
    anyone = Principal(scopes=frozenset({"*"}))
    rows: list[dict[str, Any]] = []
    for name in args.sets:
        benchmark = load_benchmark(BENCH / name, args.requests)
        half = halves([q.id for q in benchmark.queries])
        with tempfile.TemporaryDirectory() as folder:
            registry = ToolRegistry(Path(folder) / "f.db", embedder)
            registry.register_many(benchmark.tools)
            index = registry.snapshot()
            for number, query in enumerate(benchmark.queries, 1):
                ranked = registry.rank(query.text, anyone, limit=CANDIDATES)
                english = looks_english(query.text)
                vector = ensemble.embed_query(query.text)
                positions = [index.by_name[r.name.lower()] for r in ranked]
                per_model = [_best_rows(index, ensemble, vector, p, english) for p in positions]
                rows.append(
                    {
                        "set": name,
                        "half": half[query.id],
                        "lang": query.lang,
                        "english": english,
                        "relevant": sorted(query.relevant),
                        "tools": [r.name for r in ranked],
                        "signals": [
                            [r.signals.fused, r.signals.dense, r.signals.lexical, float(r.signals.name_match), *models]
                            for r, models in zip(ranked, per_model, strict=True)
                        ],
                    }
                )
                if number % 250 == 0:
                    print(f"{name}: {number}/{len(benchmark.queries)}", file=sys.stderr, flush=True)
            registry.close()
    models = [m.embedder.model_id for m in ensemble.members]
    args.out.write_text(json.dumps({"signals": ["fused", "dense", "lexical", "name", *models], "requests": rows}))
    print(f"{len(rows)} requests written to {args.out}", file=sys.stderr)


def _best_rows(index: Any, ensemble: EnsembleEmbedder, vector: np.ndarray, position: int, english: bool) -> list[float]:
    """Each model's best cosine over the tool's rows (its description and aliases), as dense search takes the best."""
    rows = np.flatnonzero(index.vectors.row_tool == position)
    tools = index.vectors.span(int(rows[0]), int(rows[-1]) + 1)
    return [float(c) for c in model_cosines(ensemble, vector, tools, english).max(axis=0)]


def features(request: dict[str, Any]) -> np.ndarray:
    """Per candidate: each signal, its gap to the request's best, the rank, and the language."""
    signals = np.asarray(request["signals"], dtype=np.float64)
    gaps = signals - signals.max(axis=0)
    rank = 1.0 / (np.arange(len(signals)) + 1.0)
    english = np.full((len(signals), 1), 1.0 if request["english"] else 0.0)
    return np.hstack([signals, gaps, rank[:, None], english, gaps[:, 1:3] * english])


def reranked(request: dict[str, Any], weights: np.ndarray, mean: np.ndarray, std: np.ndarray) -> list[str]:
    x = (features(request) - mean) / std
    scores = np.hstack([x, np.ones((len(x), 1))]) @ weights
    order = np.argsort(-scores, kind="stable")
    return [request["tools"][i] for i in order]


def fit(args: argparse.Namespace) -> None:
    data = json.loads(args.out.read_text())
    requests = data["requests"]
    print(
        "| left out | half | requests | nDCG@10 hand | learned | learned minus hand [95%] "
        "| languages where learned loses beyond the interval |"
    )
    print("|---|---|---|---|---|---|---|")
    for left_out in dict.fromkeys(r["set"] for r in requests):
        train = [r for r in requests if r["set"] != left_out]
        x = np.vstack([features(r) for r in train])
        y = np.concatenate([[tool in set(r["relevant"]) for tool in r["tools"]] for r in train]).astype(np.float64)
        mean, std = x.mean(axis=0), x.std(axis=0) + 1e-9
        weights = fit_logistic((x - mean) / std, y, args.l2)
        for half in ("held-out", "all"):
            tested = [r for r in requests if r["set"] == left_out and (half == "all" or r["half"] == half)]
            hand = [ndcg_at_10(r["tools"], frozenset(r["relevant"])) for r in tested]
            learned = [ndcg_at_10(reranked(r, weights, mean, std), frozenset(r["relevant"])) for r in tested]
            difference = paired_difference(learned, hand)
            losing = _losing_languages(tested, learned, hand)
            print(
                f"| {left_out} | {half} | {len(tested)} | {np.mean(hand):.3f} | {np.mean(learned):.3f} "
                f"| {difference.difference:+.3f} [{difference.low:+.3f}, {difference.high:+.3f}] "
                f"| {losing or 'none'} |",
                flush=True,
            )


def _losing_languages(tested: list[dict[str, Any]], learned: list[float], hand: list[float]) -> str:
    by_lang: dict[str, list[int]] = defaultdict(list)
    for number, request in enumerate(tested):
        by_lang[request["lang"]].append(number)
    losing = []
    for lang, numbers in sorted(by_lang.items()):
        difference = paired_difference([learned[n] for n in numbers], [hand[n] for n in numbers])
        if difference.high < 0:
            losing.append(f"{lang} {difference.difference:+.3f}")
    return ", ".join(losing)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    gather = sub.add_parser("collect")
    gather.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    gather.add_argument("--requests", type=int, default=1000, help="at most this many requests a set")
    fitting = sub.add_parser("fit")
    fitting.add_argument("--l2", type=float, default=1.0)
    for command in (gather, fitting):
        command.add_argument("--out", type=Path, default=OUT, help="where collect writes and fit reads")
    args = parser.parse_args()
    collect(args) if args.command == "collect" else fit(args)


if __name__ == "__main__":
    main()
