"""Second chances for requests nothing passed the threshold for: expand, relax, rewrite; each logged."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from toolrag import Principal, SearchConfig, ToolRegistry
from toolrag.runtime.chat import ScriptedModel
from toolrag.runtime.messages import Message
from toolrag.runtime.rewrite import ChatRewriter
from toolrag.search.reformulate import Vocabulary
from toolrag.search.text import tokenize
from toolrag.usagelog import MonitorConfig

from .conftest import SAMPLE_TOOLS, CountingEmbedder

ANYONE = Principal(scopes=frozenset({"*"}), tenant="acme")


@pytest.fixture
def plain(tmp_path: Path, embedder: CountingEmbedder) -> ToolRegistry:
    registry = ToolRegistry(
        tmp_path / "r.db", embedder, SearchConfig(reformulate=[], cache_entries=0, inject_all_below_tokens=0)
    )
    registry.register_many(SAMPLE_TOOLS)
    return registry


def with_steps(registry: ToolRegistry, embedder: CountingEmbedder, *steps: str, **options: object) -> ToolRegistry:
    config = SearchConfig.model_validate({"reformulate": list(steps), "cache_entries": 0, "inject_all_below_tokens": 0})
    return ToolRegistry(registry.store, embedder, config, **options)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("request_text", "tool"),
    [
        ("forecst for kyiv", "weather.forecast"),
        ("exchnge rte", "finance.exchange_rate"),
        ("sallary updte", "hr.update_salary"),
    ],
)
def test_a_typo_nothing_passed_for_is_found_by_expansion(
    plain: ToolRegistry, embedder: CountingEmbedder, request_text: str, tool: str
) -> None:
    assert plain.search(request_text, ANYONE) == []
    found = with_steps(plain, embedder, "expand").search(request_text, ANYONE)
    assert [r.name for r in found][:1] == [tool]
    assert all(r.signals.reformulation == "expand" for r in found)


def test_requests_that_pass_are_not_reformulated(plain: ToolRegistry, embedder: CountingEmbedder) -> None:
    found = with_steps(plain, embedder, "expand").search("will it rain tomorrow in Kyiv?", ANYONE)
    assert found and found[0].signals.reformulation is None


def test_small_talk_stays_without_tools(plain: ToolRegistry, embedder: CountingEmbedder) -> None:
    registry = with_steps(plain, embedder, "expand")
    for request in ("tell me a joke", "xyzzy plugh", "hi there"):
        assert registry.search(request, ANYONE) == []


def test_expansion_fixes_typos_not_other_words(plain: ToolRegistry) -> None:
    index = plain.snapshot()
    vocabulary = Vocabulary(index.words)

    def known(term: str) -> bool:
        return index.lexical.knows(term, index.live)

    assert vocabulary.expansions("wether forcast", known) == ["weather", "forecast"]
    assert vocabulary.expansions("looking for a refund", known) == []  # "looking" is not "booking"
    assert vocabulary.expansions("refunds", known) == []  # its stem is already in the index
    assert all(known(term) for term in tokenize("refunds"))


def _rewrites(*answers: str) -> ScriptedModel:
    return ScriptedModel([Message(role="assistant", content=answer) for answer in answers])


def test_rewrite_finds_tools_and_is_asked_once_per_request(plain: ToolRegistry, embedder: CountingEmbedder) -> None:
    model = _rewrites("1. refund a payment to the customer's card\n- give the customer their money back\n")
    registry = with_steps(plain, embedder, "rewrite", rewriter=ChatRewriter(model))
    request = "do what we discussed for case 5512"
    assert plain.search(request, ANYONE) == []
    for _ in range(2):
        found = registry.search(request, ANYONE)
        assert [r.name for r in found][:1] == ["payments.refund_payment"]
        assert found[0].signals.reformulation == "rewrite"
    assert len(model.requests) == 1  # cached
    assert "alternative phrasings" in model.requests[0].messages[0].content


def test_rewrite_respects_permissions(plain: ToolRegistry, embedder: CountingEmbedder) -> None:
    model = _rewrites("refund a payment to the customer's card")
    registry = with_steps(plain, embedder, "rewrite", rewriter=ChatRewriter(model))
    reader = Principal(scopes=frozenset({"billing:read"}), tenant="acme")
    assert "payments.refund_payment" not in {
        r.name for r in registry.search("do what we discussed for case 5512", reader)
    }


class BrokenModel:
    def complete(self, messages: Sequence[Message], tools: Sequence[object]) -> Message:
        raise ConnectionError("model server unreachable")


def test_a_failing_rewriter_leaves_the_search_without_tools(plain: ToolRegistry, embedder: CountingEmbedder) -> None:
    registry = with_steps(plain, embedder, "rewrite", rewriter=ChatRewriter(BrokenModel()))  # type: ignore[arg-type]
    assert registry.search("do what we discussed for case 5512", ANYONE) == []


def test_the_step_is_logged_for_monitoring(plain: ToolRegistry, embedder: CountingEmbedder) -> None:
    registry = with_steps(plain, embedder, "expand", monitor=MonitorConfig(flush_seconds=0.05))
    registry.search("forecst for kyiv", ANYONE, session="s1")
    registry.search("will it rain tomorrow in Kyiv?", ANYONE, session="s1")
    assert registry.usage is not None
    registry.usage.flush()
    since = datetime.now(UTC) - timedelta(hours=1)
    samples = registry.store.usage.samples("reformulated", since)
    assert [(s.request, s.detail) for s in samples] == [("forecst for kyiv", "expand")]
    assert registry.store.usage.totals(since).reformulated == 1
