"""Malformed, huge, deeply nested, non-UTF-8 and adversarial input at every entry point: only clean errors (a
ToolragError, a 4xx answer, an error result), never a crash, a hang or a partial write."""

from __future__ import annotations

import asyncio
import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolrag import ToolRegistry
from toolrag.access import Grant
from toolrag.catalog.files import load_catalog
from toolrag.embed.base import Embedder
from toolrag.errors import ToolragError
from toolrag.mcp.config import GatewayConfig, ServerConfig
from toolrag.mcp.importer import ToolImporter, to_tool
from toolrag.model import Principal, Tool
from toolrag.runtime.gateway import ToolGateway
from toolrag.runtime.messages import ToolCall
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig

from .conftest import SAMPLE_TOOLS

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
ADMIN = "admin-token-0123456789"
ANYONE = Principal(scopes=frozenset({"*"}), tenant="acme")

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=12), children, max_size=5),
    max_leaves=25,
)
# Entries that look like tools, with every field possibly wrong.
tool_like = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.text(max_size=80), json_values),
        "description": st.one_of(st.text(max_size=300), json_values),
        "input_schema": json_values,
        "parameters": json_values,
        "aliases": json_values,
        "scopes": json_values,
        "tenants": json_values,
        "category": json_values,
        "active": json_values,
    },
)
DEEP = 100_000


def deeply_nested(kind: str) -> str:
    return "[" * DEEP + "]" * DEEP if kind == "list" else '{"a":' * DEEP + "1" + "}" * DEEP


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, real_embedder: Embedder) -> Iterator[ToolRegistry]:
    registry = ToolRegistry(tmp_path_factory.mktemp("fuzz") / "f.db", real_embedder)
    registry.register_many(SAMPLE_TOOLS)
    registry._functions["email.send"] = lambda to, body: f"sent to {to}"
    yield registry
    registry.close()


def _snapshot(registry: ToolRegistry) -> tuple[int, list[str]]:
    return registry.generation, sorted(t.content_hash for t in registry.tools(include_inactive=True))


# -- catalog files ------------------------------------------------------------------------------------------------


def _load(suffix: str, data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"catalog{suffix}"
        path.write_bytes(data)
        with contextlib.suppress(ToolragError):
            load_catalog(path, lenient=True)


@FUZZ
@given(suffix=st.sampled_from([".json", ".jsonl", ".yaml"]), data=st.binary(max_size=400))
def test_catalog_files_of_random_bytes(suffix: str, data: bytes) -> None:
    _load(suffix, data)


@FUZZ
@given(suffix=st.sampled_from([".json", ".jsonl", ".yaml"]), entries=st.lists(tool_like, max_size=4))
def test_catalog_files_of_tool_like_entries(suffix: str, entries: list[dict[str, Any]]) -> None:
    text = "\n".join(json.dumps(e) for e in entries) if suffix == ".jsonl" else json.dumps(entries)
    _load(suffix, text.encode())


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".yaml"])
@pytest.mark.parametrize("kind", ["list", "object"])
def test_deeply_nested_catalogs_are_refused_cleanly(suffix: str, kind: str, tmp_path: Path) -> None:
    path = tmp_path / f"deep{suffix}"
    path.write_text(deeply_nested(kind))
    with pytest.raises(ToolragError, match=r"nested too deeply|invalid|expected a list"):
        load_catalog(path)


def test_huge_and_non_utf8_catalogs_are_refused_cleanly(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps([{"name": "big", "description": "x" * 100_000}]))
    with pytest.raises(ToolragError, match="description"):
        load_catalog(huge)
    latin = tmp_path / "latin.json"
    latin.write_bytes('[{"name": "caf\xe9", "description": "d"}]'.encode("latin-1"))
    with pytest.raises(ToolragError, match="cannot read"):
        load_catalog(latin)


def test_a_bad_import_writes_nothing(registry: ToolRegistry, tmp_path: Path) -> None:
    before = _snapshot(registry)
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(json.dumps({"name": "fine.tool", "description": "Fine."}) + "\n" + deeply_nested("list"))
    with pytest.raises(ToolragError):
        registry.import_file(mixed)
    assert _snapshot(registry) == before


# -- MCP tool import ----------------------------------------------------------------------------------------------

mcp_tools = st.fixed_dictionaries(
    {
        "name": st.text(min_size=1, max_size=70),
        "description": st.one_of(st.none(), st.text(max_size=300)),
        "input_schema": st.dictionaries(st.text(max_size=10), json_values, max_size=4).map(
            lambda d: {**d, "type": "object"}
        ),
    }
).map(lambda fields: types.Tool(**fields))


@FUZZ
@given(tool=mcp_tools)
def test_mcp_tools_of_any_shape_convert_or_are_refused(tool: types.Tool) -> None:
    try:
        converted = to_tool("srv", ServerConfig(command="x"), tool)
    except ToolragError:
        return
    assert converted.name.startswith("srv.")


@FUZZ
@given(listed=st.lists(mcp_tools, max_size=5, unique_by=lambda t: t.name))
def test_mcp_import_of_any_listing_is_all_or_nothing(
    tmp_path_factory: pytest.TempPathFactory, real_embedder: Embedder, listed: list[types.Tool]
) -> None:
    registry = ToolRegistry(tmp_path_factory.mktemp("mcp") / "m.db", real_embedder)
    importer = ToolImporter(registry, GatewayConfig(servers={"srv": ServerConfig(command="x")}))
    report = importer.apply("srv", listed)
    stored = {t.name for t in registry.tools(include_inactive=True)}
    held = {pin.tool for pin in registry.store.pins() if pin.quarantined}
    assert stored == set(report.imported) and held == set(report.quarantined)  # a flagged new tool waits as a pin
    assert len(report.refused) + len(stored) + len(held) == len(listed)
    registry.close()


# -- HTTP API -----------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, real_embedder: Embedder) -> Iterator[ToolRegistry]:
    """A registry of its own: successful random writes must not disturb the other tests' tools."""
    registry = ToolRegistry(tmp_path_factory.mktemp("http") / "h.db", real_embedder)
    registry.register_many(SAMPLE_TOOLS)
    yield registry
    registry.close()


@pytest.fixture(scope="module")
def client(served: ToolRegistry) -> TestClient:
    tokens = {"ops": Grant(token=ADMIN, role="admin", scopes=["*"], tenant="acme")}
    return TestClient(create_app(served, ApiConfig(tokens=tokens)), raise_server_exceptions=False)


ROUTES = [("POST", "/tools"), ("POST", "/search"), ("POST", "/execute"), ("PATCH", "/tools/email.send")]


@FUZZ
@given(route=st.sampled_from(ROUTES), body=st.one_of(json_values, tool_like, st.lists(tool_like, max_size=3)))
def test_http_routes_answer_random_json_with_4xx(
    client: TestClient, served: ToolRegistry, route: tuple[str, str], body: Any
) -> None:
    before = _snapshot(served)
    method, path = route
    answer = client.request(method, path, json=body, headers={"Authorization": f"Bearer {ADMIN}"})
    assert answer.status_code < 500, answer.text
    if answer.status_code >= 400:
        assert _snapshot(served) == before  # a refused write leaves nothing behind


@FUZZ
@given(route=st.sampled_from(ROUTES), data=st.binary(max_size=300))
def test_http_routes_answer_random_bytes_with_4xx(client: TestClient, route: tuple[str, str], data: bytes) -> None:
    method, path = route
    headers = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    assert client.request(method, path, content=data, headers=headers).status_code < 500


def test_http_deep_and_huge_bodies_are_refused(client: TestClient, served: ToolRegistry) -> None:
    before = _snapshot(served)
    headers = {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"}
    for body in (deeply_nested("list"), deeply_nested("object")):
        for method, path in ROUTES:
            assert client.request(method, path, content=body, headers=headers).status_code < 500
    huge = {"name": "huge.tool", "description": "x" * 200_000}
    assert client.post("/tools", json=huge, headers=headers).status_code == 422
    long_query = {"query": "weather " * 50_000}
    assert client.post("/search", json=long_query, headers=headers).status_code in (200, 422)
    assert _snapshot(served) == before


# -- tool-call arguments ------------------------------------------------------------------------------------------


def _gateway(registry: ToolRegistry) -> ToolGateway:
    visible, hidden = registry.partition(ANYONE)
    return ToolGateway(visible, hidden, ANYONE, registry.function)


@FUZZ
@given(arguments=st.one_of(st.text(max_size=200), json_values.map(json.dumps)))
def test_tool_call_arguments_of_any_shape(registry: ToolRegistry, arguments: str) -> None:
    result = asyncio.run(_gateway(registry).call(ToolCall("c1", "email.send", arguments), set()))
    # "error": the tool itself raised (here: a required Python argument missing), reported as a tool result.
    assert result.outcome in {"ok", "invalid_arguments", "error"}
    if result.outcome != "invalid_arguments":
        parsed = json.loads(arguments or "{}")
        assert isinstance(parsed, dict) and all(isinstance(parsed.get(k, ""), str) for k in ("to", "body"))


@pytest.mark.parametrize("kind", ["list", "object"])
def test_deeply_nested_tool_call_arguments(registry: ToolRegistry, kind: str) -> None:
    result = asyncio.run(_gateway(registry).call(ToolCall("c1", "email.send", deeply_nested(kind)), set()))
    assert result.outcome == "invalid_arguments"


def test_tool_names_of_any_kind_resolve_or_are_refused(registry: ToolRegistry) -> None:
    for name in ("", "\x00", "e" * 10_000, "email.send\u202e", "../../etc/passwd", "email__send", "EMAIL.SEND"):
        result = asyncio.run(_gateway(registry).call(ToolCall("c1", name, '{"to": "a", "body": "b"}'), set()))
        assert result.outcome in {"ok", "unknown_tool", "refused"}


def _tool_count(registry: ToolRegistry) -> int:
    return len(registry.tools(include_inactive=True))


def test_registry_survives_the_fuzzing(registry: ToolRegistry) -> None:
    assert _tool_count(registry) >= len(SAMPLE_TOOLS)
    assert all(isinstance(t, Tool) for t in registry.tools())
