"""`toolrag eval`: index a benchmark set in a temporary store and measure the ranking of every request.

Several retrieval modes can be measured in one run over one index (the tools are embedded once, each request
once), so the default and its baselines are compared on equal terms. Latency is measured on the first mode
only, where each request is embedded for real.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from toolrag.embed.base import DelegatingEmbedder, Embedder, Vectors
from toolrag.eval.dataset import BenchmarkSet, NoToolRequest, Query
from toolrag.eval.metrics import (
    QueryScores,
    ReliabilityBin,
    by_needed,
    delivered,
    expected_calibration_error,
    interval,
    paired_difference,
    reliability,
    score_query,
    summarize,
)
from toolrag.model import MAX_EXAMPLE_CHARS, MAX_EXAMPLES, ExampleRequest, Principal, Tool
from toolrag.registry import ToolRegistry
from toolrag.search.config import SearchConfig
from toolrag.store.sqlite import SQLiteStore
from toolrag.store.usage import CallRecord, RetrievalRecord

Progress = Callable[[str, int, int], None]  # (stage, done, total)


class _RememberedQueries(DelegatingEmbedder):
    """Embeds each request once across all measured modes."""

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._queries: dict[str, Vectors] = {}

    def embed_query(self, text: str) -> Vectors:
        if text not in self._queries:
            self._queries[text] = self.inner.embed_query(text)
        return self._queries[text]


@dataclass
class ModeReport:
    summary: dict[str, float]  # the ranking
    delivered: dict[str, float]  # what search() returned
    by_lang: dict[str, dict[str, Any]]  # both, per language
    injected_mean: float
    calibration: list[ReliabilityBin]  # the scores search() showed against their relevance
    queries: list[QueryScores]  # per request, in the set's order (for paired comparisons between modes)

    def as_json(self) -> dict[str, Any]:
        return {
            **self.summary,
            "delivered": self.delivered,
            "by_needed": by_needed(self.queries),
            "by_lang": self.by_lang,
            "no_tool_rate": self.empty,
            "calibration": self.calibration_json(),
        }

    def calibration_json(self) -> dict[str, Any]:
        return {"ece": expected_calibration_error(self.calibration), "bins": [asdict(b) for b in self.calibration]}

    @property
    def empty(self) -> float:
        return self.delivered["empty"]


@dataclass
class NoToolReport:
    """Requests that need no tool: how many got one anyway, per language."""

    n: int
    given_tool: float
    by_lang: dict[str, dict[str, Any]]
    interval: tuple[float, float] = (0.0, 0.0)  # 95% bootstrap interval of given_tool

    def as_json(self) -> dict[str, Any]:
        return {"n": self.n, "given_tool": self.given_tool, "interval": self.interval, "by_lang": self.by_lang}


@dataclass
class AbsentReport:
    """The same requests with their needed tools hidden from the principal (as permissions hide a tool), so that
    the right answer is nothing: how many got a tool anyway, and one at 0.5 or more, per language; and the
    calibration of every shown score on the mix of both cases, half and half."""

    n: int
    given_tool: float
    given_confident: float  # a tool at 0.5 or more
    by_lang: dict[str, dict[str, Any]]
    mixed_ece: float

    def as_json(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "given_tool": self.given_tool,
            "given_confident": self.given_confident,
            "mixed_ece": self.mixed_ece,
            "by_lang": self.by_lang,
        }


@dataclass
class EvalReport:
    dataset: str
    embedder: str
    n_tools: int
    modes: dict[str, ModeReport] = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    catalog_tokens: int = 0
    index_seconds: float = 0.0
    replayed: int = 0  # requests written to the usage log and learned from, not measured
    relations_learned: int = 0  # relations learned from the replayed sessions (used with related_tools on)
    examples: int = 0  # example requests given to the tools (example_share), not measured
    no_tool: NoToolReport | None = None
    absent: AbsentReport | None = None

    def versus(self) -> dict[str, dict[str, Any]]:
        """The first mode's nDCG@10 minus each other mode's, request by request: overall and per language."""
        modes = list(self.modes.values())
        return {name: _paired_ndcg(modes[0].queries, other.queries) for name, other in list(self.modes.items())[1:]}

    def as_json(self) -> dict[str, Any]:
        """The first mode's figures at the top level (the keys `toolrag eval --json` promises), all modes below."""
        first = next(iter(self.modes.values()))
        saved = 100.0 * (1 - first.injected_mean / self.catalog_tokens) if self.catalog_tokens else 0.0
        return {
            "dataset": self.dataset,
            "embedder": self.embedder,
            "n_tools": self.n_tools,
            "strategy": "retrieval",  # measured with retrieval in force, whatever the catalog's size
            **first.summary,
            "delivered": first.delivered,
            "by_needed": by_needed(first.queries),
            "by_lang": first.by_lang,
            "no_tool_rate": first.empty,
            "calibration": first.calibration_json(),
            "no_tool": self.no_tool.as_json() if self.no_tool else None,
            "absent": self.absent.as_json() if self.absent else None,
            "latency_ms": self.latency_ms,
            "tokens": {
                "catalog": self.catalog_tokens,
                "injected_mean": round(first.injected_mean, 1),
                "saved_pct": round(saved, 2),
            },
            "index_seconds": round(self.index_seconds, 2),
            "replayed": self.replayed,
            "relations_learned": self.relations_learned,
            "examples": self.examples,
            "modes": {name: m.as_json() for name, m in self.modes.items()},
            "versus": self.versus(),
        }


def _paired_ndcg(first: Sequence[QueryScores], other: Sequence[QueryScores]) -> dict[str, Any]:
    def compared(pairs: Sequence[tuple[QueryScores, QueryScores]]) -> dict[str, Any]:
        return asdict(paired_difference([a.ndcg_10 for a, _ in pairs], [b.ndcg_10 for _, b in pairs]))

    pairs = list(zip(first, other, strict=True))
    by_lang: dict[str, list[tuple[QueryScores, QueryScores]]] = defaultdict(list)
    for pair in pairs:
        by_lang[pair[0].lang].append(pair)
    hits = paired_difference([a.delivered_hit for a, _ in pairs], [b.delivered_hit for _, b in pairs])
    return {
        "ndcg@10": compared(pairs),
        "delivered_hit": asdict(hits),
        "by_lang": {lang: compared(items) for lang, items in sorted(by_lang.items())},
    }


def evaluate(
    benchmark: BenchmarkSet,
    embedder: Embedder,
    config: SearchConfig | None = None,
    modes: Sequence[str] = ("hybrid",),
    progress: Progress | None = None,
    replay_share: float = 0.0,
    principal: Principal | None = None,
    no_tool: Sequence[NoToolRequest] = (),
    example_share: float = 0.0,
    past_tasks: Sequence[Query] = (),
    absent: bool = False,
) -> EvalReport:
    """`replay_share`: that share of the requests (every n-th) is written to the usage log as if each had led to
    a call of its relevant tools, learned from (`ToolRegistry.learn_from_usage`), and left out of the measurement:
    how the usage-learned adjustment (`usage_weight`) would do on a registry with that history. `no_tool`: requests
    that need no tool, searched on the first mode's default path (the false-tool rate). `example_share`: that share
    of the requests (every n-th) becomes example requests of their relevant tools (search/examples.py) and is left
    out of the measurement; the first mode is measured again with examples off, for the paired difference.
    `past_tasks`: requests of another half that needed several tools, each given to its tools as an example (a past
    task, search/examples.py), measured the same way. Retrieval is measured whatever the catalog's size: the `all`
    strategy is off (`inject_all_below_tokens` 0)."""
    config = (config or SearchConfig()).model_copy(update={"inject_all_below_tokens": 0})
    remembered = _RememberedQueries(embedder)
    with tempfile.TemporaryDirectory(prefix="toolrag-eval-") as folder:
        registry = ToolRegistry(SQLiteStore(Path(folder) / "eval.db"), remembered, config)
        started = time.perf_counter()
        examples: Sequence[Query] = past_tasks
        if example_share > 0:
            shared, benchmark = split_for_replay(benchmark, example_share)
            examples = [*examples, *shared]
        if examples:
            benchmark = BenchmarkSet(benchmark.name, with_examples(benchmark.tools, examples), benchmark.queries)
        total = registry.texts_to_embed(benchmark.tools)
        done = 0

        def indexed(count: int) -> None:
            nonlocal done
            done += count
            if progress:
                progress("index", done, total)

        registry.register_many(benchmark.tools, progress=indexed)
        report = EvalReport(benchmark.name, embedder.model_id, len(benchmark.tools))
        report.index_seconds = time.perf_counter() - started
        principal = principal or Principal.anonymous()
        if replay_share > 0:
            log, benchmark = split_for_replay(benchmark, replay_share)
            report.replayed = len(log)
            report.relations_learned = replay(registry, log, principal)
        report.catalog_tokens = registry.catalog_tokens(principal)
        for number, mode in enumerate(modes):
            report.modes[mode], latencies, shown = _run_mode(registry, benchmark, mode, principal, progress)
            if number == 0:
                report.latency_ms = _percentiles(latencies)
                report.no_tool = _no_tool(registry, no_tool, principal) if no_tool else None
                report.absent = _absent(registry, benchmark, principal, shown, progress) if absent else None
        if examples:
            report.examples = sum(len(tool.examples) for tool in benchmark.tools)
            registry.config = registry.config.model_copy(update={"example_views": False})
            report.modes[f"{modes[0]}, examples off"], _, _ = _run_mode(registry, benchmark, modes[0], principal, None)
        registry.close()
    return report


def split_for_replay(benchmark: BenchmarkSet, share: float) -> tuple[list[Query], BenchmarkSet]:
    """Every n-th request (n = round(1 / share)) goes to the log; the rest stays to be measured."""
    if not 0 < share < 1:
        raise ValueError(f"replay share must be between 0 and 1, got {share}")
    step = max(2, round(1 / share))
    log = [q for i, q in enumerate(benchmark.queries) if i % step == 0]
    kept = [q for i, q in enumerate(benchmark.queries) if i % step != 0]
    if not kept:
        raise ValueError(f"replaying one request in {step} of {len(benchmark.queries)} leaves no request to measure")
    return log, BenchmarkSet(benchmark.name, benchmark.tools, kept)


def with_examples(tools: Sequence[Tool], requests: Sequence[Query]) -> list[Tool]:
    """The tools, each with the requests it is relevant to as example requests (of every tenant); a request that
    needed several tools is a past task's."""
    examples: dict[str, list[ExampleRequest]] = defaultdict(list)
    for query in requests:
        for name in query.relevant:
            example = ExampleRequest(text=query.text[:MAX_EXAMPLE_CHARS], task=len(query.relevant) > 1)
            examples[name].append(example)
    return [tool.model_copy(update={"examples": examples[tool.name][:MAX_EXAMPLES]}) for tool in tools]


def replay(registry: ToolRegistry, log: Sequence[Query], principal: Principal) -> int:
    """Write each request as `principal`'s session, with a successful call of each of its relevant tools in their
    order, to the usage log; then learn from it, both the usage adjustment and relations between tools. Returns the
    number of relations learned. For a principal of a tenant, each session is another caller's: the log stands for
    the tenant's users, and a tenant learns a relation only from several callers' sessions (search/learned.py); a
    caller of no tenant learns from its own."""
    tenant = principal.tenant

    def caller(query: Query) -> str:
        return f"{principal.caller}/replay-{query.id}" if tenant else principal.caller

    retrievals = [
        RetrievalRecord(query.id, (), query.text, f"replay-{query.id}", tenant=tenant, caller=caller(query))
        for query in log
    ]
    calls = [
        CallRecord(tool, "ok", 0.0, True, f"replay-{query.id}", tenant=tenant, caller=caller(query))
        for query in log
        for tool in query.relevant
    ]
    registry.store.usage.record(retrievals, calls)
    registry.learn_from_usage(days=1)
    return len(registry.relations.learn(days=1).relations)


def _run_mode(
    registry: ToolRegistry, benchmark: BenchmarkSet, mode: str, principal: Principal, progress: Progress | None
) -> tuple[ModeReport, list[float], list[tuple[float, bool]]]:
    """The mode's report, each request's latency, and each shown score with whether its tool was relevant."""
    registry.retriever.use_config(registry.config.model_copy(update={"mode": mode}))
    scores: list[QueryScores] = []
    latencies: list[float] = []
    injected: list[int] = []
    shown: list[tuple[float, bool]] = []
    for number, query in enumerate(benchmark.queries, 1):
        started = time.perf_counter()
        ranking = [r.name for r in registry.rank(query.text, principal, limit=10, mode=mode)]
        latencies.append((time.perf_counter() - started) * 1000)
        selection = registry.select(query.text, principal)
        scored = score_query(ranking, query.relevant, query.lang, [r.name for r in selection.results])
        scores.append(replace(scored, injected_tokens=selection.injected_tokens))
        shown.extend((r.score, r.name in query.relevant) for r in selection.results)
        injected.append(selection.injected_tokens)
        if progress and (number % 200 == 0 or number == len(benchmark.queries)):
            progress(mode, number, len(benchmark.queries))
    by_lang: dict[str, list[QueryScores]] = defaultdict(list)
    for item in scores:
        by_lang[item.lang].append(item)
    report = ModeReport(
        summary=summarize(scores),
        delivered=delivered(scores),
        by_lang={lang: {**summarize(items), "delivered": delivered(items)} for lang, items in sorted(by_lang.items())},
        injected_mean=statistics.fmean(injected) if injected else 0.0,
        calibration=reliability([score for score, _ in shown], [label for _, label in shown]),
        queries=scores,
    )
    return report, latencies, shown


def hidden_from(principal: Principal, names: Iterable[str]) -> Principal:
    """`principal`, denied the tools named (each name as a literal, not a pattern)."""
    literal = frozenset("".join(f"[{c}]" if c in "*?[" else c for c in name) for name in names)
    return principal.model_copy(update={"deny_tools": principal.deny_tools | literal})


def _absent(
    registry: ToolRegistry,
    benchmark: BenchmarkSet,
    principal: Principal,
    present: Sequence[tuple[float, bool]],
    progress: Progress | None,
) -> AbsentReport:
    """`present`: the scores shown with the tools there, and whether each was relevant."""
    given: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    scores: list[float] = []
    for number, query in enumerate(benchmark.queries, 1):
        shown = [r.score for r in registry.search(query.text, hidden_from(principal, query.relevant))]
        given[query.lang].append((bool(shown), bool(shown) and max(shown) >= 0.5))
        scores.extend(shown)
        if progress and (number % 200 == 0 or number == len(benchmark.queries)):
            progress("hidden", number, len(benchmark.queries))

    def shares(rows: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
        return {
            "n": len(rows),
            "given_tool": round(statistics.fmean(g for g, _ in rows), 4),
            "given_confident": round(statistics.fmean(c for _, c in rows), 4),
        }

    every = shares([row for rows in given.values() for row in rows])
    mixed = reliability([*(s for s, _ in present), *scores], [*(good for _, good in present), *(False for _ in scores)])
    return AbsentReport(
        n=every["n"],
        given_tool=every["given_tool"],
        given_confident=every["given_confident"],
        by_lang={lang: shares(rows) for lang, rows in sorted(given.items())},
        mixed_ece=round(expected_calibration_error(mixed), 4),
    )


def _no_tool(registry: ToolRegistry, requests: Sequence[NoToolRequest], principal: Principal) -> NoToolReport:
    given: dict[str, list[float]] = defaultdict(list)
    for request in requests:
        given[request.lang].append(1.0 if registry.search(request.text, principal) else 0.0)
    every = [value for values in given.values() for value in values]
    return NoToolReport(
        n=len(every),
        given_tool=round(statistics.fmean(every), 4),
        by_lang={
            lang: {"n": len(values), "given_tool": round(statistics.fmean(values), 4), "interval": interval(values)}
            for lang, values in sorted(given.items())
        },
        interval=interval(every),
    )


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0}
    ordered = sorted(values)
    return {
        "p50": round(ordered[len(ordered) // 2], 3),
        "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 3),
    }
