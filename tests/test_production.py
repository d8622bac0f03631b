"""Running in production: the checks servers run before they accept requests, and rate limits."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx
import pytest
from mcp.client.client import Client
from typer.testing import CliRunner

from toolrag import Principal, ToolRegistry
from toolrag.cli.app import app
from toolrag.mcp.config import GatewayConfig
from toolrag.mcp.gateway import McpGateway
from toolrag.monitor.config import StartupConfig
from toolrag.monitor.startup import StartupRefused
from toolrag.server.config import ApiConfig, TokenConfig
from toolrag.server.rate_limit import Rate, RateLimiter, RateLimits
from toolrag.server.serve import build_api
from toolrag.store.base import IndexModel

from .conftest import SAMPLE_TOOLS, make_tool
from .test_api import serving

ADMIN = "admin-token-0123456789"
AGENT = "agent-token-0123456789"


def drifted_registry(path: Path) -> str:
    """A registry as a failed job leaves it: a tool written without its vectors, and a tool whose code is gone."""
    registry = ToolRegistry(path)
    registry.register_many([*SAMPLE_TOOLS, make_tool("gone", "Export the ledger.", source="python:no_such_module:f")])
    model = registry.store.index_model()
    assert isinstance(model, IndexModel)
    lost = make_tool("ledger.close_month", "Close the accounting month and lock its journal entries.")
    registry.store.upsert([lost], {}, model)
    assert registry.tools_without_embeddings() == ["ledger.close_month"]
    return str(path)


def config(store: str, missing: str) -> ApiConfig:
    tokens = {
        "ops": TokenConfig(token=ADMIN, role="admin", scopes=["*"]),
        "bot": TokenConfig(token=AGENT, role="agent", scopes=["*"]),
    }
    return ApiConfig.model_validate({"store": store, "tokens": tokens, "startup": {"missing_embeddings": missing}})


def test_the_api_repairs_missing_embeddings_before_serving_and_says_so(tmp_path: Path) -> None:
    store = drifted_registry(tmp_path / "drifted.db")
    with serving(build_api(config(store, "repair"))) as url:
        health = httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {ADMIN}"}).json()
        startup = health["startup"]
        assert startup["ok"] and startup["missing_embeddings"] == 1 and startup["repaired"]
        assert startup["orphans"] == ["gone: its function no_such_module:f no longer imports"]
        agent = httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {AGENT}"}).json()
        assert agent["startup"]["orphans"] == [] and agent["startup"]["missing_embeddings"] == 1  # names: admins
        found = httpx.post(
            f"{url}/search",
            json={"query": "close the accounting month"},
            headers={"Authorization": f"Bearer {AGENT}"},
        ).json()
        assert found["results"][0]["name"] == "ledger.close_month"
    assert ToolRegistry(store).tools_without_embeddings() == []


def test_the_api_refuses_to_start_when_told_to(tmp_path: Path) -> None:
    store = drifted_registry(tmp_path / "drifted.db")
    with pytest.raises(StartupRefused, match=r"1 tools have no embedding .*ledger.close_month.*validate --fix"):
        build_api(config(store, "refuse"))
    settings = f'store = "{store}"\n[tokens.ops]\ntoken = "{ADMIN}"\nrole = "admin"\n'
    (tmp_path / "toolrag-api.toml").write_text(settings + '[startup]\nmissing_embeddings = "refuse"\n')
    refused = CliRunner().invoke(app, ["api", "serve", "--config", str(tmp_path / "toolrag-api.toml")])
    assert refused.exit_code == 1 and "ledger.close_month" in refused.stderr
    assert ToolRegistry(store).tools_without_embeddings() == ["ledger.close_month"]  # nothing half-done


def test_the_mcp_gateway_checks_before_serving(tmp_path: Path) -> None:
    store = drifted_registry(tmp_path / "drifted.db")
    refusing = GatewayConfig(store=store, startup=StartupConfig(missing_embeddings="refuse"))
    with pytest.raises(StartupRefused, match=r"ledger\.close_month"):
        anyio.run(McpGateway.from_config(refusing).serve_stdio)  # refused before it reads a message
    checked = McpGateway.from_config(GatewayConfig(store=store)).check()
    assert checked.repaired and checked.ok and [f.tools for f in checked.orphans] == [("gone",)]


# -- rate limits -----------------------------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_token_buckets_refill_at_the_configured_rate() -> None:
    clock = Clock()
    limits = RateLimits(search=Rate(per_minute=60, burst=2))
    limiter = RateLimiter(limits, clock)
    olena, marc = Principal(user="olena", tenant="acme"), Principal(user="marc", tenant="acme")
    assert [limiter.wait(olena, "search") for _ in range(2)] == [0.0, 0.0]
    assert limiter.wait(olena, "search") == pytest.approx(1.0)  # one a second
    assert limiter.wait(marc, "search") == 0.0  # per principal
    assert limiter.wait(Principal(user="olena", tenant="globex"), "search") == 0.0  # and per tenant
    assert limiter.wait(olena, "call") == 0.0  # calls are unlimited here
    clock.now += 1.0
    assert limiter.wait(olena, "search") == 0.0 and limiter.wait(olena, "search") > 0
    clock.now += 3600
    assert [limiter.wait(olena, "search") for _ in range(3)][:2] == [0.0, 0.0]  # never more than the burst


def test_the_api_answers_429_with_retry_after(tmp_path: Path) -> None:
    registry = ToolRegistry(tmp_path / "limited.db")
    registry.register_many(SAMPLE_TOOLS)
    settings = config(str(tmp_path / "limited.db"), "repair")
    settings.rate_limits = RateLimits(search=Rate(per_minute=1, burst=2), call=Rate(per_minute=1, burst=1))
    with serving(build_api(settings)) as url:

        def search(token: str) -> httpx.Response:
            return httpx.post(f"{url}/search", json={"query": "weather"}, headers={"Authorization": f"Bearer {token}"})

        assert [search(AGENT).status_code for _ in range(2)] == [200, 200]
        limited = search(AGENT)
        assert limited.status_code == 429 and 1 <= int(limited.headers["Retry-After"]) <= 60
        assert "rate limit" in limited.json()["detail"] and "'bot'" in limited.json()["detail"]
        assert search(ADMIN).status_code == 200  # another principal's bucket
        executed = [
            httpx.post(
                f"{url}/execute", json={"name": "weather.forecast"}, headers={"Authorization": f"Bearer {AGENT}"}
            )
            for _ in range(2)
        ]
        assert [r.status_code for r in executed] == [200, 429]
        metrics = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {ADMIN}"}).text
        assert 'toolrag_rate_limited_total{kind="search"} 1.0' in metrics


def test_the_mcp_gateway_limits_find_tools_per_principal(tmp_path: Path) -> None:
    store = tmp_path / "gateway.db"
    ToolRegistry(store).register_many(SAMPLE_TOOLS)
    settings = GatewayConfig(store=str(store), rate_limits=RateLimits(search=Rate(per_minute=1, burst=1)))
    gateway = McpGateway.from_config(settings)

    async def session() -> None:
        async with Client(gateway.mcp_server(lambda request: Principal(user="me"))) as client:
            first = await client.call_tool("find_tools", {"query": "weather forecast"})
            assert not first.is_error
            second = await client.call_tool("find_tools", {"query": "weather forecast"})
            text = " ".join(getattr(part, "text", "") for part in second.content)
            assert second.is_error and "rate limit" in text and "retry in" in text

    anyio.run(session)
