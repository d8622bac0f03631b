"""The score adjustment learned from the usage log, and its measurement by replaying a log in the eval."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.eval import evaluate, load_benchmark
from toolrag.eval.dataset import BenchmarkSet
from toolrag.eval.runner import split_for_replay
from toolrag.search.feedback import UsageMemory
from toolrag.store.usage import UsedRequest
from toolrag.usagelog import MonitorConfig

from .conftest import SAMPLE_TOOLS, CountingEmbedder
from .test_eval import bench

ANYONE = Principal(scopes=frozenset({"*"}), tenant="acme")
# Retrieval puts shop.track_shipment first for this; the users who said it needed a refund.
USERS_SAY = "my parcel never arrived, I want my money back"
PARAPHRASE = "the package didn't come and I need my money back"


@pytest.fixture
def used(store_url: str, embedder: CountingEmbedder) -> ToolRegistry:
    """A registry (each store) whose usage log says: after USERS_SAY, payments.refund_payment was called."""
    registry = ToolRegistry(store_url, embedder, monitor=MonitorConfig(flush_seconds=0.05))
    registry.register_many(SAMPLE_TOOLS)
    registry.search(USERS_SAY, ANYONE, session="s1")
    assert registry.usage is not None
    registry.usage.record_call("payments.refund_payment", "ok", 12.0, injected=True, session="s1", tenant="acme")
    registry.usage.record_call("email.send", "error", 3.0, injected=True, session="s1", tenant="acme")  # not learned
    registry.usage.flush()
    return registry


def _rank(registry: ToolRegistry, request: str, principal: Principal = ANYONE) -> list[str]:
    return [r.name for r in registry.rank(request, principal, limit=8)]


def _gap(registry: ToolRegistry) -> float:
    """How far the refund trails in the fused score that orders candidates (the shown confidence follows the
    order and the request's evidence, so it moves only when the order does)."""
    scores = {r.name: r.signals.fused for r in registry.rank(PARAPHRASE, ANYONE, limit=8)}
    return scores["shop.track_shipment"] - scores["payments.refund_payment"]


def test_tools_called_after_similar_requests_gain(used: ToolRegistry, embedder: CountingEmbedder) -> None:
    learning = ToolRegistry(used.store, embedder, SearchConfig(usage_weight=0.3, usage_min_similarity=0.5))
    before = _rank(learning, PARAPHRASE)
    assert before[0] == "shop.track_shipment"
    gap = _gap(learning)
    assert learning.learn_from_usage() == 1
    assert _gap(learning) < gap  # a small adjustment: closer, not necessarily first
    strong = ToolRegistry(used.store, embedder, SearchConfig(usage_weight=1.0, usage_min_similarity=0.5))
    strong.learn_from_usage()
    assert _rank(strong, USERS_SAY)[0] == "payments.refund_payment"  # the very request that led to the call
    assert all(0.0 <= r.score <= 1.0 for r in strong.rank(PARAPHRASE, ANYONE))
    off = ToolRegistry(used.store, embedder, SearchConfig(usage_weight=0.0))
    off.learn_from_usage()
    assert _rank(off, PARAPHRASE) == before  # off by default: learning changes nothing


def test_unrelated_requests_are_not_moved(used: ToolRegistry, embedder: CountingEmbedder) -> None:
    learning = ToolRegistry(used.store, embedder, SearchConfig(usage_weight=0.3))
    before = _rank(learning, "what is the exchange rate of the dollar?")
    learning.learn_from_usage()
    assert _rank(learning, "what is the exchange rate of the dollar?") == before


def test_learning_never_shows_a_tool_the_principal_may_not_see(tmp_path: Path, embedder: CountingEmbedder) -> None:
    registry = ToolRegistry(tmp_path / "p.db", embedder, SearchConfig(usage_weight=1.0), monitor=MonitorConfig())
    registry.register_many(SAMPLE_TOOLS)
    registry.search("give Bob a raise", ANYONE, session="s")
    assert registry.usage is not None
    registry.usage.record_call("hr.update_salary", "ok", 5.0, injected=True, session="s", tenant="acme")
    registry.usage.flush()
    registry.learn_from_usage()
    outsider = Principal(scopes=frozenset({"billing:read"}), tenant="other")
    assert "hr.update_salary" not in _rank(registry, "give Bob a raise", outsider)
    assert "hr.update_salary" not in {r.name for r in registry.search("give Bob a raise", outsider)}


def test_a_memory_learned_with_another_model_is_ignored(used: ToolRegistry, embedder: CountingEmbedder) -> None:
    learning = ToolRegistry(used.store, embedder, SearchConfig(usage_weight=0.3, usage_min_similarity=0.5))
    gap = _gap(learning)
    learning.learn_from_usage()
    memory = learning.retriever.memory
    assert memory is not None
    learning.retriever.use_memory(UsageMemory("another-model", memory.vectors, memory.tools, memory.learners))
    assert _gap(learning) == gap


def test_memory_gains_follow_similarity(used: ToolRegistry, embedder: CountingEmbedder) -> None:
    pair = UsedRequest("acme", "a caller of acme", "payments.refund_payment", USERS_SAY)
    memory = UsageMemory.learn([pair, pair], embedder)
    assert memory.size == 1  # the same pair once
    index = used.snapshot()
    candidates = np.arange(index.size)
    acme, globex, nobody = ("tenant", "acme"), ("tenant", "globex"), ("caller", ANYONE.caller)
    gains = memory.adjustment(index, embedder.embed_query(USERS_SAY), candidates, floor=0.5, weight=0.3, learner=acme)
    assert gains[index.by_name["payments.refund_payment"]] == pytest.approx(0.3, abs=1e-3)
    assert np.count_nonzero(gains) == 1
    assert not memory.adjustment(index, embedder.embed_query("tell me a joke"), candidates, 0.5, 0.3, acme).any()
    assert not memory.adjustment(index, embedder.embed_query(USERS_SAY), candidates, 0.5, 0.3, globex).any()
    assert not memory.adjustment(index, embedder.embed_query(USERS_SAY), candidates, 0.5, 0.3, nobody).any()


def test_eval_replays_a_share_of_the_requests_as_a_usage_log(tmp_path: Path, embedder: CountingEmbedder) -> None:
    benchmark = load_benchmark(bench(tmp_path / "b"))
    log, rest = split_for_replay(benchmark, 0.5)
    assert [q.id for q in log] == ["q1", "q3"] and [q.id for q in rest.queries] == ["q2", "q4"]
    report = evaluate(benchmark, embedder, SearchConfig(usage_weight=0.3), replay_share=0.5).as_json()
    assert report["replayed"] == 2
    assert report["n_queries"] == 2
    with pytest.raises(ValueError, match="replay share must be between 0 and 1"):
        split_for_replay(benchmark, 1.5)
    # A set so small that the log would take every request leaves nothing to measure: refused, not reported as 0.
    one = BenchmarkSet(benchmark.name, benchmark.tools, benchmark.queries[:1])
    with pytest.raises(ValueError, match="leaves no request to measure"):
        split_for_replay(one, 0.5)


def test_eval_replays_sessions_and_learns_relations_from_them(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """Each replayed request is a session calling its tools in order: five sessions that summarized a PDF and then
    mailed it teach "mail is related to pdf", which `--set related_tools=true` measures."""
    queries = [
        {"id": f"q{n}", "query": f"summarize report {n} and mail it", "relevant": ["PDF&URL", "mail"], "lang": "en"}
        for n in range(10)
    ]
    benchmark = load_benchmark(bench(tmp_path / "b", queries=queries))
    report = evaluate(benchmark, embedder, SearchConfig(related_tools=True), replay_share=0.5).as_json()
    assert (report["replayed"], report["relations_learned"]) == (5, 1)
    assert report["n_queries"] == 5
    too_few = evaluate(load_benchmark(bench(tmp_path / "c", queries=queries[:8])), embedder, replay_share=0.5)
    assert too_few.relations_learned == 0  # four sessions: below the five a relation needs
    # Replayed as a tenant's: the log stands for its users' sessions, so several callers' (search/learned.py).
    acme = Principal(user="ann", tenant="acme", scopes=frozenset({"*"}))
    tenants = evaluate(benchmark, embedder, SearchConfig(related_tools=True), replay_share=0.5, principal=acme)
    assert tenants.relations_learned == 1


ALONE = Principal(user="alone", scopes=frozenset({"*"}))
OTHER = Principal(user="other", scopes=frozenset({"*"}))


def _learning_from_alone(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    """A registry about to learn from one session of ALONE, a caller without a tenant, that called the refund tool."""
    registry = ToolRegistry(tmp_path / "u.db", embedder, monitor=MonitorConfig(flush_seconds=0.05))
    registry.register_many(SAMPLE_TOOLS)
    registry.search(USERS_SAY, ALONE, session="s1")
    assert registry.usage is not None
    registry.usage.record_call("payments.refund_payment", "ok", 12.0, injected=True, session="s1", user="alone")
    registry.usage.flush()
    return ToolRegistry(registry.store, embedder, SearchConfig(usage_weight=1.0, usage_min_similarity=0.5))


def test_callers_without_a_tenant_learn_only_from_their_own_usage(tmp_path: Path, embedder: CountingEmbedder) -> None:
    """Memory was keyed on the tenant, so every caller without one learned from every other's requests (issue 31)."""
    learning = _learning_from_alone(tmp_path, embedder)
    before = _rank(learning, USERS_SAY, OTHER)
    assert learning.learn_from_usage() == 1
    assert _rank(learning, USERS_SAY, ALONE)[0] == "payments.refund_payment"  # its own usage
    assert _rank(learning, USERS_SAY, OTHER) == before  # nobody else's


def test_a_search_cached_for_one_caller_without_a_tenant_is_not_served_to_another(
    tmp_path: Path, embedder: CountingEmbedder
) -> None:
    """The search cache was keyed on what a principal sees, while callers without a tenant learn apart: one such
    caller was served the results another's usage had shaped (found by a review of issue 32's sets)."""
    learning = _learning_from_alone(tmp_path, embedder)
    assert learning.learn_from_usage() == 1
    theirs = [result.name for result in learning.search(USERS_SAY, OTHER)]
    mine = [result.name for result in learning.search(USERS_SAY, ALONE)]
    assert mine[0] == "payments.refund_payment" != theirs[0]
