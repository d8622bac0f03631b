"""A principal's results must be exactly those of a registry that holds only the tools it may use."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrag import Principal, ToolRegistry
from toolrag.model import SearchResult, Tool
from toolrag.search import filter as visibility
from toolrag.search import pipeline

from .conftest import CountingEmbedder

DESCRIPTIONS = [
    ("weather.forecast", "Weather forecast for a city for the next days."),
    ("weather.alerts", "Severe weather warnings such as storms and floods."),
    ("payments.refund", "Refund a payment to the customer's card."),
    ("payments.invoice", "Create and send an invoice to a customer."),
    ("payments.balance", "Current account balance and pending payouts."),
    ("hr.salary", "Change an employee's salary."),
    ("hr.leave", "Remaining vacation days of an employee."),
    ("shop.track", "Track a parcel and its estimated delivery date."),
    ("shop.return", "Start a return for a delivered item."),
    ("mail.send", "Send an email to recipients."),
    ("mail.search", "Search the mailbox for messages."),
    ("k8s.restart", "Restart a Kubernetes deployment."),
]
SCOPES = ["billing:read", "billing:write", "hr:admin", "ops:write"]
TENANTS = ["acme", "globex"]
QUERIES = [
    "refund the last payment",
    "will it storm tomorrow",
    "where is my parcel",
    "raise the salary of Ann",
    "restart the service",
    "payments.refund",
    "hello",
]

tool_access = st.tuples(
    st.lists(st.sampled_from(SCOPES), max_size=2, unique=True),
    st.lists(st.sampled_from(TENANTS), max_size=2, unique=True),
    st.booleans(),
)
NAME_PATTERNS = ["weather.*", "payments.*", "hr.salary", "*.send", "shop.*", "k8s.*", "*"]
principals = st.builds(
    Principal,
    tenant=st.sampled_from([None, *TENANTS]),
    scopes=st.frozensets(st.sampled_from([*SCOPES, "billing:*", "*"]), max_size=3),
    # Name rules as the MCP gateway's configuration gives them (allowed servers and tools, denied tools).
    allow_tools=st.one_of(st.none(), st.frozensets(st.sampled_from(NAME_PATTERNS), max_size=3)),
    deny_tools=st.frozensets(st.sampled_from(NAME_PATTERNS[:-1]), max_size=2),
)


def catalog(access: list[tuple[list[str], list[str], bool]]) -> list[Tool]:
    return [
        Tool.parse({"name": name, "description": text, "scopes": scopes, "tenants": tenants, "active": active})
        for (name, text), (scopes, tenants, active) in zip(DESCRIPTIONS, access, strict=False)
    ]


def assert_same(got: list[SearchResult], expected: list[SearchResult]) -> None:
    """Equal results, numbers to within float noise: two registries hold a tool's vector in different rows, and a
    matrix product rounds the same cosine differently in its last bits (0.2365 against 0.2366 after rounding)."""
    assert [r.name for r in got] == [r.name for r in expected]
    for mine, theirs in zip(got, expected, strict=True):
        numbers, exact = _split(mine.model_dump()), _split(theirs.model_dump())
        assert numbers[1] == exact[1]
        assert numbers[0] == pytest.approx(exact[0], abs=1e-3)


def _split(dumped: dict[str, object], prefix: str = "") -> tuple[dict[str, float], dict[str, object]]:
    """(the float fields, everything else), flattened."""
    floats: dict[str, float] = {}
    others: dict[str, object] = {}
    for key, value in dumped.items():
        if isinstance(value, dict):
            nested = _split(value, f"{prefix}{key}.")
            floats |= nested[0]
            others |= nested[1]
        elif isinstance(value, float):
            floats[prefix + key] = value
        else:
            others[prefix + key] = value
    return floats, others


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    access=st.lists(tool_access, min_size=len(DESCRIPTIONS), max_size=len(DESCRIPTIONS)),
    principal=principals,
    query=st.sampled_from(QUERIES),
)
def test_no_invisible_tool_is_returned_or_counted(
    embedder: CountingEmbedder, access: list[tuple[list[str], list[str], bool]], principal: Principal, query: str
) -> None:
    tools = catalog(access)
    visible = [t for t in tools if principal.can_use(t)]
    with tempfile.TemporaryDirectory() as folder:
        full = ToolRegistry(Path(folder) / "full.db", embedder)
        full.register_many(tools)
        only_visible = ToolRegistry(Path(folder) / "visible.db", embedder)
        only_visible.register_many(visible)

        ranked = full.rank(query, principal, limit=20)
        assert {r.name for r in ranked} <= {t.name for t in visible}
        # Indistinguishable from a registry without the hidden tools: same tools, same scores, same order.
        assert_same(ranked, only_visible.rank(query, principal, limit=20))
        assert_same(full.search(query, principal), only_visible.search(query, principal))
        selection, reference = full.select(query, principal), only_visible.select(query, principal)
        assert selection.catalog_tokens == reference.catalog_tokens
        assert selection.tools == reference.tools
        full.close()
        only_visible.close()


def test_a_snapshot_opened_anew_at_the_same_generation_is_not_taken_for_the_one_before(
    embedder: CountingEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Saving vectors (`embed_missing`, `validate --fix`) opens the snapshot anew at the same generation, and
    CPython may place it at the freed address of the one it replaces: nothing derived from the old snapshot (which
    positions a principal sees, the small-talk levels, the vocabulary) may be reused for it. Every snapshot is
    given one address here, so that reuse happens each time instead of a few times in a hundred."""
    for module in (visibility, pipeline):
        monkeypatch.setattr(module, "id", lambda _: 1, raising=False)
    tools = [
        Tool.parse({"name": "b.forecast", "description": "Weather forecast for a city for the next days."}),
        Tool.parse({"name": "c.parcel", "description": "Track a parcel and its estimated delivery date."}),
    ]
    secret = Tool.parse(
        {"name": "a.refund", "description": "Refund a payment to the customer's card.", "tenants": ["acme"]}
    )
    globex = Principal(user="g", tenant="globex")
    registry = ToolRegistry(tmp_path / "tools.db", embedder)
    registry.register_many(tools)
    registry.snapshot()
    registry.register(secret)  # appended to the followed snapshot: positions b, c, a
    assert registry.snapshot().names == ["b.forecast", "c.parcel", "a.refund"]
    assert "a.refund" not in {r.name for r in registry.rank("refund the payment", globex, limit=5)}

    registry.embed_missing()  # built afresh at the same generation: positions a, b, c
    assert registry.snapshot().names == ["a.refund", "b.forecast", "c.parcel"]
    reference = ToolRegistry(tmp_path / "reference.db", embedder)
    reference.register_many(tools)
    for query in ("refund the payment", "where is my parcel", "hello"):
        ranked = registry.rank(query, globex, limit=5)
        assert "a.refund" not in {r.name for r in ranked}
        assert_same(ranked, reference.rank(query, globex, limit=5))
    registry.close()
    reference.close()
