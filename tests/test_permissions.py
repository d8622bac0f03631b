"""No principal ever sees, gets injected or executes a tool outside its permissions, through any entry point:
the library, the CLI, the HTTP API and the MCP gateway. Principals are generated; the catalog mixes scopes,
tenants, namespaces and an inactive tool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from toolrag import Principal, ToolRegistry
from toolrag.access import Grant
from toolrag.cli.app import app as cli
from toolrag.embed.base import Embedder
from toolrag.mcp.config import GatewayConfig
from toolrag.mcp.gateway import McpGateway
from toolrag.model import Tool
from toolrag.runtime.gateway import ToolGateway
from toolrag.runtime.messages import ToolCall
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig

from .test_visibility import DESCRIPTIONS, QUERIES, SCOPES, TENANTS, principals

ACCESS: list[tuple[list[str], list[str], bool]] = [
    ([], [], True),
    (["ops:write"], [], True),
    (["billing:write"], [], True),
    (["billing:read"], ["acme"], True),
    (["billing:read"], [], True),
    (["hr:admin"], ["acme"], True),
    (["hr:admin"], ["globex"], True),
    ([], ["globex"], True),
    ([], [], False),
    ([], ["acme"], True),
    (["billing:read", "ops:write"], [], True),
    (["ops:write"], ["acme", "globex"], True),
]
TOOLS = [
    Tool.parse(
        {
            "name": name,
            "description": text,
            "scopes": scopes,
            "tenants": tenants,
            "active": active,
            "input_schema": {"type": "object", "properties": {"note": {"type": "string"}}},
        }
    )
    for (name, text), (scopes, tenants, active) in zip(DESCRIPTIONS, ACCESS, strict=True)
]
SLOW = settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
executed: list[str] = []


def _spy(name: str) -> Any:
    def run(note: str = "") -> str:
        executed.append(name)
        return f"{name} ran"

    return run


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory, real_embedder: Embedder) -> Iterator[ToolRegistry]:
    registry = ToolRegistry(tmp_path_factory.mktemp("perm") / "p.db", real_embedder)
    registry.register_many(TOOLS)
    for tool in TOOLS:
        registry._functions[tool.name] = _spy(tool.name)
    yield registry
    registry.close()


def usable(principal: Principal) -> set[str]:
    return {t.name for t in TOOLS if principal.can_use(t)}


def _call(gateway: ToolGateway, name: str) -> str:
    result = asyncio.run(gateway.call(ToolCall("c1", name, json.dumps({"note": "x"})), set()))
    return result.outcome


@SLOW
@given(principal=principals, query=st.sampled_from(QUERIES))
def test_library_search_injection_and_execution(registry: ToolRegistry, principal: Principal, query: str) -> None:
    allowed = usable(principal)
    selection = registry.select(query, principal)
    assert {r.name for r in selection.results} <= allowed
    assert {t["function"]["name"].replace("__", ".") for t in selection.tools} <= allowed
    visible, hidden = registry.partition(principal)
    gateway = ToolGateway(visible, hidden, principal, registry.function)
    executed.clear()
    for tool in TOOLS:
        outcome = _call(gateway, tool.name)
        assert (outcome == "ok") == (tool.name in allowed), (tool.name, outcome)
    assert set(executed) == allowed


def _token(principal: Principal) -> Grant:
    return Grant(
        token="tok-" + "x" * 20,
        role="agent",
        tenant=principal.tenant,
        scopes=sorted(principal.scopes),
        tools=None if principal.allow_tools is None else sorted(principal.allow_tools),
        deny_tools=sorted(principal.deny_tools),
    )


@SLOW
@given(principal=principals, query=st.sampled_from(QUERIES))
def test_http_api(registry: ToolRegistry, principal: Principal, query: str) -> None:
    token = _token(principal)
    allowed = usable(token.principal("agent"))
    client = TestClient(create_app(registry, ApiConfig(tokens={"agent": token})))
    headers = {"Authorization": f"Bearer {token.token}"}
    found = client.post("/search", json={"query": query}, headers=headers).json()
    assert {r["name"] for r in found["results"]} <= allowed
    assert {t["function"]["name"].replace("__", ".") for t in found["tools"]} <= allowed
    assert {t["name"] for t in client.get("/tools", headers=headers).json()} == allowed
    executed.clear()
    for tool in TOOLS:
        ran = client.post("/execute", json={"name": tool.name, "arguments": {"note": "x"}}, headers=headers).json()
        assert (ran["outcome"] == "ok") == (tool.name in allowed)
        shown = client.get(f"/tools/{tool.name}", headers=headers)
        assert shown.status_code == (200 if tool.name in allowed else 404)
        history = client.get(f"/tools/{tool.name}/history", headers=headers)
        assert history.status_code == (200 if tool.name in allowed else 404)
    assert set(executed) == allowed
    report = client.get("/reports/health", headers=headers).json()
    assert {u["tool"] for u in report["tools"]} | set(report["unused"]) <= allowed


@SLOW
@given(principal=principals, query=st.sampled_from(QUERIES))
def test_mcp_gateway(registry: ToolRegistry, principal: Principal, query: str, monkeypatch: Any) -> None:
    allowed = usable(principal)
    gateway = McpGateway(GatewayConfig(), registry)
    forwarded: list[str] = []

    async def forward(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        forwarded.append(name)
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    def forwarder(name: str) -> Any:
        async def call(**arguments: Any) -> types.CallToolResult:
            return await forward(name, arguments)

        return call

    # Every tool counts as an upstream's here: what reaches `forward` would have been sent to an MCP server.
    monkeypatch.setattr(gateway, "_forwarder", forwarder)
    found = gateway.find_tools(query, principal, k=5)
    assert {t["name"] for t in found["tools"]} <= allowed
    for tool in TOOLS:
        result = asyncio.run(gateway.call_tool(tool.name, {"note": "x"}, principal))
        assert result.is_error == (tool.name not in allowed), tool.name
    assert set(forwarded) == allowed


cli_principals = st.builds(
    Principal,
    tenant=st.sampled_from([None, *TENANTS]),
    scopes=st.frozensets(st.sampled_from([*SCOPES, "billing:*", "*"]), max_size=3),
)


@SLOW
@given(principal=cli_principals, query=st.sampled_from(QUERIES))
def test_cli_search(registry: ToolRegistry, principal: Principal, query: str) -> None:
    store = str(Path(registry.store.path))  # type: ignore[attr-defined]
    options = ["--scopes", ",".join(sorted(principal.scopes))]
    if principal.tenant:
        options += ["--tenant", principal.tenant]
    result = CliRunner().invoke(cli, ["search", query, "--store", store, "--json", "-k", "5", *options])
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    allowed = usable(principal)
    assert {r["name"] for r in answer["results"]} <= allowed
    assert {t["function"]["name"].replace("__", ".") for t in answer["tools"]} <= allowed
