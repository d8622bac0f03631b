"""Running in production: the checks servers run before they accept requests, rate limits, scheduled jobs."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import tomllib
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import httpx
import pytest
from mcp.client.client import Client
from typer.testing import CliRunner

from toolrag import Principal, ToolRegistry
from toolrag.access import Caller, Grant, NotGranted
from toolrag.access.rate_limit import Rate, RateLimiter, RateLimits
from toolrag.cli.app import app
from toolrag.errors import StoreError
from toolrag.mcp.config import GatewayConfig
from toolrag.mcp.gateway import McpGateway
from toolrag.monitor.config import ScheduleConfig, StartupConfig, parse_interval
from toolrag.monitor.schedule import Scheduler
from toolrag.monitor.startup import StartupRefused
from toolrag.server.config import ApiConfig, load_api_config
from toolrag.server.metrics import ApiMetrics
from toolrag.server.serve import build_api
from toolrag.store.base import IndexModel
from toolrag.store.jobs import JobReport, JobTables

if TYPE_CHECKING:
    from toolrag.monitor.schedule import ScheduleHealth

from .conftest import SAMPLE_TOOLS, CountingEmbedder, flooding, in_schema, json_http_server, make_tool
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
        "ops": Grant(token=ADMIN, role="admin", scopes=["*"]),
        "bot": Grant(token=AGENT, role="agent", scopes=["*"]),
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
        me = Caller("me", "agent", Principal(user="me"), key="me")
        async with Client(gateway.mcp_server(lambda request: me)) as client:
            first = await client.call_tool("find_tools", {"query": "weather forecast"})
            assert not first.is_error
            second = await client.call_tool("find_tools", {"query": "weather forecast"})
            text = " ".join(getattr(part, "text", "") for part in second.content)
            assert second.is_error and "rate limit" in text and "retry in" in text

    anyio.run(session)


# -- scheduled jobs --------------------------------------------------------------------------------------------------


class WallClock:
    """A controlled clock for the scheduler."""

    def __init__(self) -> None:
        self.now = datetime(2026, 11, 2, 3, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_scheduled_jobs_run_once_on_one_of_two_instances_sharing_postgres(
    postgres_url: str, embedder: CountingEmbedder
) -> None:
    url = in_schema(postgres_url, f"test_{uuid.uuid4().hex[:12]}")
    first, second = ToolRegistry(url, embedder), ToolRegistry(url, embedder)
    first.register_many(SAMPLE_TOOLS)
    lost = make_tool("ledger.close_month", "Close the accounting month and lock its journal entries.")
    first.store.upsert([lost], {}, IndexModel(embedder.model_id, embedder.dimension))
    posted: list[str] = []

    def webhook(path: str, body: dict[str, Any], raw: str) -> tuple[int, Any]:
        posted.append(body["text"])
        return 200, {"ok": True}

    clock = WallClock()
    with json_http_server(webhook) as hook:
        settings = ScheduleConfig(webhook_url=f"{hook}/slack")
        instances = [Scheduler(r, settings, holder=name, clock=clock) for r, name in ((first, "a"), (second, "b"))]

        def tick_both() -> list[JobReport]:
            with ThreadPoolExecutor(2) as pool:  # at the same moment, as two servers would
                return [run for runs in pool.map(lambda s: s.tick(), instances) for run in runs]

        ran = tick_both()
        assert sorted(run.job for run in ran) == ["consistency", "relations", "report"]  # each once, on either one
        clock.now += timedelta(hours=1)
        assert tick_both() == []
        clock.now += timedelta(days=1)
        assert sorted(run.job for run in tick_both()) == ["consistency", "relations"]  # daily, not weekly
    assert len(posted) == 5 and any(text.startswith("toolrag weekly report (7 days)") for text in posted)
    assert "1 missing_embedding" in next(t for t in posted if "consistency" in t)
    checks = second.store.jobs.job_reports("consistency")
    assert len(checks) == 2 and checks[-1].body["counts"]["missing_embedding"] == 1  # the first run repaired it
    assert "missing_embedding" not in checks[0].body["counts"]
    assert second.tools_without_embeddings() == []
    metrics = ApiMetrics(second).render().decode()
    assert 'toolrag_consistency_findings{kind="missing_embedding"} 0.0' in metrics
    assert 'toolrag_report_tools{finding="unused"} ' in metrics and "toolrag_report_no_tool_rate 0.0" in metrics
    compared = CliRunner().invoke(app, ["report", "--store", url, "--compare", "LAST", "--json"])
    assert compared.exit_code == 0, compared.output
    assert json.loads(compared.stdout)["changes"]  # the report is compared with the stored one, line by line


def test_issue25_finding14_a_failing_webhook_is_logged_without_its_url(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """For Slack, the webhook's URL is the secret: a failed post logged it whole (httpx puts it in its message)."""
    registry = ToolRegistry(tmp_path / "hook.db")
    registry.register_many(SAMPLE_TOOLS)
    with json_http_server(lambda path, body, raw: (404, "no such hook")) as hook:
        secret = "services/T0SECRET/B0SECRET/XXXXSECRET"
        scheduler = Scheduler(registry, ScheduleConfig(webhook_url=f"{hook}/{secret}"), clock=WallClock())
        with caplog.at_level(logging.WARNING, logger="toolrag"):
            assert scheduler.tick()
    failed = [record.getMessage() for record in caplog.records if "webhook" in record.getMessage()]
    assert failed and all("SECRET" not in text for text in failed) and "HTTP 404" in failed[0]


def test_a_webhook_that_floods_its_answer_is_not_read(tmp_path: Path) -> None:
    """The summary is posted and the hook's answer never read: one that answers 256 MB (before, read whole by the
    server's scheduler thread) gets its first bytes out at most."""
    registry = ToolRegistry(tmp_path / "hook.db")
    registry.register_many(SAMPLE_TOOLS)
    offered = 256 * 1024 * 1024
    with flooding(offered) as (hook, written):
        assert Scheduler(registry, ScheduleConfig(webhook_url=f"{hook}/slack"), clock=WallClock()).tick()
        sent = written()
    assert sent and max(sent) < offered // 8, sent


class Outage:
    """A store method that raises StoreError (a full disk, a database gone) while `down` is set."""

    def __init__(self, real: Any, failures: int = 0) -> None:
        self.real, self.down, self.failures = real, threading.Event(), failures
        if failures:
            self.down.set()

    def __call__(self, *args: Any) -> Any:
        if self.down.is_set():
            self.failures -= 1
            if self.failures == 0:
                self.down.clear()
            raise StoreError("database or disk is full")
        return self.real(*args)


def run_scheduler(scheduler: Scheduler, sleeps: int) -> list[tuple[float, ScheduleHealth]]:
    """Run the scheduler's loop until it has waited `sleeps` times; each wait and the health seen during it."""
    waited: list[tuple[float, ScheduleHealth]] = []
    enough = anyio.Event()

    async def sleep(seconds: float) -> None:
        waited.append((seconds, scheduler.health()))
        if len(waited) == sleeps:
            enough.set()
        await anyio.sleep(0)

    async def main() -> None:
        scheduler.sleep = sleep
        async with anyio.create_task_group() as group:
            group.start_soon(scheduler.run)
            await enough.wait()
            group.cancel_scope.cancel()

    anyio.run(main)
    return waited


def test_issue31_a_failing_tick_is_logged_retried_with_back_off_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A StoreError in claim_job ended the scheduler's loop: the HTTP gateway exited, the API's jobs stopped."""
    registry = ToolRegistry(tmp_path / "full.db")
    registry.register_many(SAMPLE_TOOLS)
    jobs = registry.store.jobs
    monkeypatch.setattr(jobs, "claim_job", Outage(jobs.claim_job, failures=3))
    settings = ScheduleConfig(check_every_seconds=10, retry_max_seconds=50)
    with caplog.at_level(logging.INFO, logger="toolrag.schedule"):
        waited = run_scheduler(Scheduler(registry, settings, clock=WallClock()), sleeps=5)
    assert [seconds for seconds, _ in waited] == [20, 40, 50, 10, 10]  # doubling, capped, then the usual pace
    failing = waited[2][1]
    assert not failing.ok and failing.failures == 3 and failing.error == "StoreError: database or disk is full"
    assert failing.failing_since == WallClock().now and failing.retry_in_seconds == 50
    assert waited[3][1].ok and waited[3][1].failures == 0  # recovered
    assert sorted(r.job for r in (*jobs.job_reports("consistency"), *jobs.job_reports("report"))) == [
        "consistency",
        "report",
    ]
    logged = [record.getMessage() for record in caplog.records]
    assert sum("scheduler tick failed" in text for text in logged) == 3
    assert any("work again after 3 failures" in text for text in logged)


def test_issue31_a_report_the_store_refused_is_written_at_the_next_tick(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry = ToolRegistry(tmp_path / "full.db")
    registry.register_many(SAMPLE_TOOLS)
    jobs = registry.store.jobs
    monkeypatch.setattr(jobs, "finish_job", Outage(jobs.finish_job, failures=1))
    clock = WallClock()
    scheduler = Scheduler(registry, ScheduleConfig(report="off", relations="off"), clock=clock)
    with pytest.raises(StoreError):
        scheduler.tick()  # the consistency check ran; its report could not be kept
    assert jobs.job_reports("consistency") == []
    clock.now += timedelta(minutes=1)
    assert scheduler.tick() == []  # not run again: its lease is still this instance's
    assert [report.at for report in jobs.job_reports("consistency")] == [WallClock().now]
    clock.now += timedelta(days=1)
    assert [run.job for run in scheduler.tick()] == ["consistency"]  # released: due again a day later


def wait_for_health(url: str, token: str, done: Any) -> dict[str, Any]:
    """/health's answer once `done(answer)` holds (the scheduler runs beside the requests)."""
    deadline = time.monotonic() + 60
    while True:
        answer: dict[str, Any] = httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {token}"}).json()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, f"/health never got there: {answer}"
        time.sleep(0.02)


def test_issue31_the_api_shows_failing_ticks_in_health_and_keeps_its_scheduler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = str(tmp_path / "api.db")
    ToolRegistry(store).register_many(SAMPLE_TOOLS)
    outage = Outage(JobTables.claim_job)
    outage.down.set()
    monkeypatch.setattr(JobTables, "claim_job", lambda self, *args: outage(self, *args))
    settings = config(store, "repair")
    settings.schedule = ScheduleConfig(check_every_seconds=0.01, retry_max_seconds=0.05)
    with serving(build_api(settings)) as url:
        failing = wait_for_health(url, ADMIN, lambda answer: answer["schedule"]["failures"] >= 3)
        assert failing["schedule"]["error"] == "StoreError: database or disk is full"
        assert not failing["schedule"]["ok"] and failing["schedule"]["retry_in_seconds"] == 0.05
        agent = httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {AGENT}"}).json()["schedule"]
        assert not agent["ok"] and agent["error"] is None  # what the store said: admins only
        outage.down.clear()
        wait_for_health(url, ADMIN, lambda answer: answer["schedule"]["ok"])
        assert ToolRegistry(store).store.jobs.job_reports("consistency")  # the jobs ran once the store was back


def test_issue31_the_gateway_shows_its_scheduler_in_health(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The HTTP gateway exited (status 1) at the first tick the store refused."""
    gateway = McpGateway.from_config(GatewayConfig(store=str(tmp_path / "gw.db")))
    gateway.registry.register_many(SAMPLE_TOOLS)
    jobs = gateway.registry.store.jobs
    monkeypatch.setattr(jobs, "claim_job", Outage(jobs.claim_job, failures=1))
    run_scheduler(gateway.scheduler, sleeps=1)
    admin = Caller("ops", "admin", Principal(user="ops"), key="rule:ops")
    shown = gateway.health(admin)["schedule"]
    assert not shown["ok"] and shown["failures"] == 1 and shown["error"].startswith("StoreError")


def test_report_compare_needs_a_stored_report(tmp_path: Path) -> None:
    store = tmp_path / "fresh.db"
    ToolRegistry(store).register_many(SAMPLE_TOOLS)
    refused = CliRunner().invoke(app, ["report", "--store", str(store), "--compare", "LAST"])
    assert refused.exit_code == 1 and "no stored report" in refused.stderr
    wrong = CliRunner().invoke(app, ["report", "--store", str(store), "--compare", "yesterday"])
    assert wrong.exit_code == 1 and "--compare takes LAST" in wrong.stderr


def test_schedule_intervals_are_checked() -> None:
    assert parse_interval("30m") == timedelta(minutes=30) and parse_interval("weekly") == timedelta(weeks=1)
    assert parse_interval("off") is None
    with pytest.raises(ValueError, match="unknown interval 'every tuesday'"):
        ScheduleConfig(report="every tuesday")


def test_the_documented_production_configuration_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text(encoding="utf-8")
    example = page.split("```toml\n# toolrag-api.toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "toolrag-api.toml").write_text(example, encoding="utf-8")
    monkeypatch.setenv("TOOLRAG_OPS_TOKEN", "ops-secret-0123456789")
    settings = load_api_config(tmp_path / "toolrag-api.toml")
    assert settings.schedule.report == "weekly" and settings.startup.missing_embeddings == "repair"
    assert settings.rate_limits.search == Rate(per_minute=120, burst=20)
    oauth = tomllib.loads(page.split("```toml\n[oauth]", 1)[1].split("```", 1)[0].join(("[oauth]", "")))
    rules = ApiConfig.model_validate(oauth).policy()
    support = rules.for_claims({"sub": "kim", "scope": "mcp toolrag:agent", "tenant": "acme"})
    assert support is not None and support.role == "agent" and support.principal.may_name("kb.search")
    assert not support.principal.may_name("billing.refund")
    with pytest.raises(NotGranted, match="no access rule"):
        rules.for_claims({"sub": "kim", "scope": "mcp", "tenant": "acme"})


def test_the_dashboard_shows_the_weekly_trend_to_operators(tmp_path: Path) -> None:
    registry = ToolRegistry(tmp_path / "trend.db")
    registry.register_many(SAMPLE_TOOLS)
    for week, (searches, dead) in enumerate([(120, ["email.send"]), (150, [])]):
        body = {"days": 7, "searches": searches, "no_tool_rate": 0.05, "calls": 40, "dead": dead, "unused": []}
        at = datetime(2026, 11, 2, tzinfo=UTC) + timedelta(weeks=week)
        registry.store.jobs.finish_job("report", "a", at, {**body, "low_relevance": [], "failed_calls": 0})
    settings = config(str(tmp_path / "trend.db"), "repair")
    with serving(build_api(settings)) as url:
        page = httpx.get(f"{url}/console/dashboard", headers={"Authorization": f"Bearer {ADMIN}"}).text
        assert 'id="trend"' in page and "<td>2026-11-09</td><td>150</td>" in page and "<td>120</td>" in page
        agent = httpx.get(f"{url}/console/dashboard", headers={"Authorization": f"Bearer {AGENT}"}).text
        assert 'id="trend"' not in agent  # registry-wide figures: operators only


def test_the_readme_production_sections_are_sections_of_the_configuration() -> None:
    """The README names the sections; docs/operations.md shows them (its example is loaded above)."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    paragraph = readme.split("### In production", 1)[1].split("###", 1)[0]
    named = re.findall(r"`\[(\w+)\]`", paragraph)
    assert named == ["startup", "schedule", "rate_limits", "oauth"]
    assert set(named) <= set(ApiConfig.model_fields)


def test_a_server_on_a_port_in_use_says_so_and_starts_nothing(tmp_path: Path) -> None:
    import socket

    store = str(tmp_path / "api.db")
    (tmp_path / "toolrag-api.toml").write_text(f'store = "{store}"\n[tokens.ops]\ntoken = "{ADMIN}"\nrole = "admin"\n')
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = CliRunner().invoke(
            app, ["api", "serve", "--config", str(tmp_path / "toolrag-api.toml"), "--port", port]
        )
    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "choose another --port" in result.stderr
    assert "toolrag API on" not in result.stderr  # no URL announced for a server that never runs
    assert not Path(store).exists()  # nor its registry opened


def test_the_gateway_on_a_port_in_use_says_so_and_starts_nothing(tmp_path: Path) -> None:
    import socket

    store = tmp_path / "gateway.db"
    (tmp_path / "toolrag-mcp.toml").write_text(
        f'store = "{store}"\n[principals.ops]\ntoken = "{ADMIN}"\nscopes = ["*"]\n'
    )
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        command = ["mcp", "serve", "-c", str(tmp_path / "toolrag-mcp.toml"), "--transport", "http", "--port", port]
        result = CliRunner().invoke(app, command)
    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "MCP gateway on" not in result.stderr
    assert not store.exists()
