"""Trying a tool from its console page (issue 33 §6), and a tool's calls over time, in a real Chromium over both
stores: the try runs through the execution gateway (a principal who may not use the tool is refused as the gateway
refuses it, arguments are checked by its validator, the admin's call rate applies), the usage log marks it a console
trial, only admins may try, and the per-day and per-hour figures are those of the logged calls, a tenant's reader
counting its tenant's only."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from toolrag import ToolRegistry
from toolrag.access import Grant
from toolrag.access.rate_limit import Rate, RateLimits
from toolrag.model import utc_now
from toolrag.monitor.latency import call_figures, nearest_rank
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig
from toolrag.server.console.trial import MAX_SHOWN_CHARS, argument_skeleton
from toolrag.store.usage import TimedCall
from toolrag.usagelog import MonitorConfig

from .conftest import RETRIEVAL, CountingEmbedder, make_tool
from .mcp_support import python_server
from .test_api import call, serving
from .test_console import browser, form_token, session_of, shot, signed_in

ADMIN, ACME_READER, ACME_BOT, GLOBEX_BOT = (
    "trial-admin-0123456789",
    "trial-acme-reader-0123",
    "trial-acme-bot-0123456",
    "trial-globex-bot-01234",
)
CITY = {"type": "object", "properties": {"city": {"type": "string", "minLength": 2}}, "required": ["city"]}
TOOLS = [
    make_tool("weather.forecast", "Weather forecast for the next days for a city.", input_schema=CITY),
    make_tool("pay.refund", "Refund a customer's payment.", scopes=["billing:write"]),
    make_tool("logs.dump", "Dump the server's log.", input_schema={"type": "object", "properties": {}}),
    make_tool("files.read", "Read a file of the shared drive.", source="mcp:files"),
]


def trial_config(rate_limits: RateLimits | None = None) -> ApiConfig:
    return ApiConfig(
        tokens={
            "ops": Grant(token=ADMIN, role="admin", scopes=["*"]),
            "acme-viewer": Grant(token=ACME_READER, role="reader", tenant="acme"),
            "acme-bot": Grant(token=ACME_BOT, role="agent", tenant="acme"),
            "globex-bot": Grant(token=GLOBEX_BOT, role="agent", tenant="globex"),
        },
        rate_limits=rate_limits or RateLimits(),
    )


class Ran:
    """The tools' functions, counting the calls that reached them."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, object]]] = []

    def install(self, registry: ToolRegistry) -> None:
        def forecast(city: str) -> dict[str, object]:
            self.calls.append(("weather.forecast", {"city": city}))
            return {"city": city, "forecast": "<b>rain</b>"}

        def refund() -> str:
            self.calls.append(("pay.refund", {}))
            return "refunded"

        def dump() -> str:
            self.calls.append(("logs.dump", {}))
            return "x" * (MAX_SHOWN_CHARS + 500)

        registry._functions.update({"weather.forecast": forecast, "pay.refund": refund, "logs.dump": dump})


def _registry(store_url: str, embedder: CountingEmbedder, ran: Ran) -> ToolRegistry:
    registry = ToolRegistry(store_url, embedder, RETRIEVAL, monitor=MonitorConfig(flush_seconds=0.05))
    registry.register_many(TOOLS)
    ran.install(registry)
    return registry


@pytest.fixture
def ran() -> Ran:
    return Ran()


@pytest.fixture
def console(store_url: str, embedder: CountingEmbedder, ran: Ran) -> Iterator[tuple[str, ToolRegistry]]:
    registry = _registry(store_url, embedder, ran)
    with serving(create_app(registry, trial_config())) as url:
        yield url, registry


def _try(page: object, tool: str, arguments: str, **principal: str) -> None:
    page.goto(page.url.split("/console/")[0] + f"/console/tools/{tool}/try")  # type: ignore[attr-defined]
    for field in ("user", "tenant", "scopes"):
        if field in principal:
            page.fill(f"#try input[name={field}]", principal[field])  # type: ignore[attr-defined]
    page.fill("#try textarea[name=arguments]", arguments)  # type: ignore[attr-defined]
    page.click("#try button[type=submit]")  # type: ignore[attr-defined]


def _text(page: object, selector: str) -> str:
    return str(page.locator(selector).inner_text())  # type: ignore[attr-defined]


def test_an_admin_tries_a_tool_through_the_gateway_as_a_chosen_principal(
    console: tuple[str, ToolRegistry], ran: Ran
) -> None:
    url, registry = console
    with browser() as chromium:
        page = signed_in(chromium, url, ADMIN)
        page.goto(f"{url}/console/tools/weather.forecast")
        page.click("#try-link")
        assert page.input_value("#try textarea[name=arguments]") == '{\n  "city": ""\n}'  # the schema's skeleton
        _try(page, "weather.forecast", '{"city": "Kyiv"}', user="ann", tenant="acme", scopes="")
        shot(page, "try")
        assert _text(page, "#outcome") == "ok"
        assert '"forecast": "<b>rain</b>"' in _text(page, "#result")  # shown as text, escaped
        assert page.locator("#result b").count() == 0
        assert _text(page, "#latency").startswith("in ") and _text(page, "#latency").endswith(" ms")
        assert page.input_value("#try input[name=user]") == "ann"  # the principal stays picked for the next try

        # A principal who may not use the tool gets the gateway's answer; the function never runs.
        _try(page, "pay.refund", "{}", user="ann", tenant="acme", scopes="mail:send")
        assert _text(page, "#outcome") == "unknown tool"
        assert "no tool named 'pay.refund'" in _text(page, "#result")
        assert "may not use pay.refund" in _text(page, "#hidden")
        _try(page, "pay.refund", "{}", user="bea", tenant="", scopes="billing:write")
        assert _text(page, "#outcome") == "ok" and _text(page, "#result") == "refunded"

        # A long result is cut, and says so.
        _try(page, "logs.dump", "{}")
        assert _text(page, "#result").endswith("500 more characters not shown")
    assert ran.calls == [("weather.forecast", {"city": "Kyiv"}), ("pay.refund", {}), ("logs.dump", {})]

    registry.usage.flush()
    logged = registry.store.usage.calls(utc_now() - timedelta(hours=1))
    assert {(c.tool, c.outcome, c.principal, c.origin) for c in logged} == {
        ("weather.forecast", "ok", "ann@acme", "console"),
        ("pay.refund", "refused", "ann@acme", "console"),  # refused in the operators' log, as any hidden call is
        ("pay.refund", "ok", "bea", "console"),
        ("logs.dump", "ok", "ops", "console"),  # no principal named: the admin's own
    }


def test_arguments_the_validator_refuses_and_text_that_is_not_json_are_told_apart(
    console: tuple[str, ToolRegistry], ran: Ran
) -> None:
    url, registry = console
    with browser() as chromium:
        page = signed_in(chromium, url, ADMIN)
        _try(page, "weather.forecast", '{"city": "K"}')
        assert _text(page, "#outcome") == "invalid arguments"
        assert "invalid arguments for weather.forecast" in _text(page, "#result")
        assert "city" in _text(page, "#result") and "Fix them and retry" in _text(page, "#result")
        assert page.locator("#latency").count() == 1  # the gateway was called, and refused
        _try(page, "weather.forecast", '{"city": "Kyiv",}')
        shot(page, "try-not-json")
        assert _text(page, "#outcome") == "invalid arguments"
        assert _text(page, "#result").startswith("the arguments are not valid JSON: ")
        assert "line 1, column 17" in _text(page, "#result") and "nothing was called" in _text(page, "#result")
        assert page.locator("#latency").count() == 0
        assert page.input_value("#try textarea[name=arguments]") == '{"city": "Kyiv",}'  # kept, to fix
        _try(page, "weather.forecast", '["Kyiv"]')
        assert "must be a JSON object" in _text(page, "#result")
    assert ran.calls == []
    registry.usage.flush()
    logged = registry.store.usage.calls(utc_now() - timedelta(hours=1))
    assert [(c.tool, c.outcome, c.origin) for c in logged] == [("weather.forecast", "invalid_arguments", "console")]


def test_only_admins_may_try_a_tool(console: tuple[str, ToolRegistry], ran: Ran) -> None:
    url, _ = console
    with browser() as chromium:
        page = signed_in(chromium, url, ACME_READER)
        page.goto(f"{url}/console/tools/weather.forecast")
        assert page.locator("#calls").count() == 1 and page.locator("#try-link").count() == 0
        answer = page.goto(f"{url}/console/tools/weather.forecast/try")
        assert answer is not None and answer.status == 403 and page.locator("#try").count() == 0
        assert "only admins try tools" in _text(page, "#error")
    reader = session_of(url, ACME_READER)
    csrf = form_token(httpx.get(f"{url}/console/tools/weather.forecast", cookies=reader).text)
    form = {"arguments": '{"city": "Kyiv"}', "csrf": csrf}
    posted = httpx.post(f"{url}/console/tools/weather.forecast/try", data=form, cookies=reader)
    assert posted.status_code == 403 and "only admins" in posted.text
    admin = session_of(url, ADMIN)
    forged = httpx.post(f"{url}/console/tools/weather.forecast/try", data={**form, "csrf": "0" * 43}, cookies=admin)
    assert forged.status_code == 403  # an admin's session without its form's token: not from the console
    assert ran.calls == []


def test_a_tool_this_server_cannot_run_says_why_instead_of_a_form(console: tuple[str, ToolRegistry]) -> None:
    url, _ = console
    with browser() as chromium:
        page = signed_in(chromium, url, ADMIN)
        page.goto(f"{url}/console/tools/files.read/try")
        assert page.locator("#try").count() == 0
        assert "MCP server 'files'" in _text(page, "#unrunnable") and "mcp_config" in _text(page, "#unrunnable")


def test_a_try_counts_against_the_admins_call_rate(store_url: str, embedder: CountingEmbedder, ran: Ran) -> None:
    registry = _registry(store_url, embedder, ran)
    limits = RateLimits(call=Rate(per_minute=0.01, burst=1))
    with serving(create_app(registry, trial_config(limits))) as url:
        admin = session_of(url, ADMIN)
        csrf = form_token(httpx.get(f"{url}/console/tools/weather.forecast/try", cookies=admin).text)
        form = {"arguments": '{"city": "Kyiv"}', "csrf": csrf}
        first = httpx.post(f"{url}/console/tools/weather.forecast/try", data=form, cookies=admin)
        assert first.status_code == 200 and 'data-outcome="ok"' in first.text
        second = httpx.post(f"{url}/console/tools/weather.forecast/try", data=form, cookies=admin)
        assert second.status_code == 429 and "rate limit: the call rate for token &#39;ops&#39;" in second.text
    assert len(ran.calls) == 1


def test_a_tools_page_shows_its_calls_latency_and_errors_by_the_readers_tenant(
    console: tuple[str, ToolRegistry],
) -> None:
    url, registry = console
    for city in ("Kyiv", "Lviv", "Odesa"):
        ran = call(url, "POST", "/execute", ACME_BOT, json={"name": "weather.forecast", "arguments": {"city": city}})
        assert ran.json()["outcome"] == "ok"
    bad = {"name": "weather.forecast", "arguments": {"city": "K"}}
    assert call(url, "POST", "/execute", ACME_BOT, json=bad).json()["outcome"] == "invalid_arguments"
    globex = {"name": "weather.forecast", "arguments": {"city": "Bern"}}
    assert call(url, "POST", "/execute", GLOBEX_BOT, json=globex).json()["outcome"] == "ok"
    registry.usage.flush()
    logged = registry.store.usage.calls(utc_now() - timedelta(hours=1))
    acme = sorted(c.latency_ms for c in logged if c.tenant == "acme")
    every = sorted(c.latency_ms for c in logged)
    assert len(acme) == 4 and len(every) == 5

    def summary(ran: int, failed: int, latencies: list[float]) -> str:
        rate = round(100 * failed / ran)
        p50, p95 = nearest_rank(latencies, 0.5), nearest_rank(latencies, 0.95)
        return (
            f"{ran} calls ran, {failed} failed ({rate}%), 0 not run (refused or unknown), 0 console trials"
            f" · latency p50 {p50:.1f} ms, p95 {p95:.1f} ms"
        )

    with browser() as chromium:
        page = signed_in(chromium, url, ADMIN)
        page.goto(f"{url}/console/tools/weather.forecast")
        shot(page, "tool-calls")
        assert _text(page, "#calls-summary") == summary(5, 1, every)
        assert page.locator("#calls-chart rect").count() == 2  # one day: its calls, and its failed ones
        today = f"{utc_now():%Y-%m-%d}"
        day = page.locator("#calls-daily tbody tr").all_inner_texts()
        p50, p95 = nearest_rank(every, 0.5), nearest_rank(every, 0.95)
        assert [row.split("\t") for row in day] == [[today, "5", "1", "20%", "0", "0", f"{p50:.1f}", f"{p95:.1f}"]]
        assert page.locator("#calls-hourly tbody tr").count() == 1

        reader = signed_in(chromium, url, ACME_READER)
        reader.goto(f"{url}/console/tools/weather.forecast")
        assert _text(reader, "#calls-summary") == summary(4, 1, acme)  # globex's call is not counted


def test_figures_per_period_are_nearest_rank_percentiles_of_the_calls_that_ran() -> None:
    at = utc_now().replace(hour=10, minute=5)
    calls = [
        TimedCall(at, "ok", 10.0, None),
        TimedCall(at + timedelta(minutes=1), "error", 30.0, None),
        TimedCall(at + timedelta(minutes=2), "refused", 0.1, "console"),
        TimedCall(at + timedelta(hours=1), "ok", 20.0, "console"),
    ]
    first, second = call_figures(calls, "hour")
    assert (first.ran, first.failed, first.not_run, first.trials, first.p50_ms, first.p95_ms) == (2, 1, 1, 1, 10, 30)
    assert first.start == at.replace(minute=0, second=0, microsecond=0) and first.error_rate == 0.5
    assert (second.ran, second.p50_ms, second.p95_ms, second.trials) == (1, 20, 20, 1)
    (day,) = call_figures(calls, "day")
    assert (day.ran, day.p50_ms, day.p95_ms) == (3, 20, 30)
    assert nearest_rank([], 0.5) is None


def test_a_skeleton_holds_the_required_parameters_with_their_defaults_or_empty_values() -> None:
    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": ["null", "integer"]},
            "unit": {"enum": ["c", "f"]},
            "deep": {"type": "boolean", "default": True},
            "tags": {"type": "array"},
        },
        "required": ["q", "n", "unit", "deep", "missing"],
    }
    assert argument_skeleton(schema) == '{\n  "q": "",\n  "n": 0,\n  "unit": "c",\n  "deep": true\n}'
    assert argument_skeleton({"type": "object", "properties": {"tags": {"type": "array"}}}) == '{\n  "tags": []\n}'
    assert argument_skeleton({}) == "{}"


def test_console_trials_do_not_count_as_agents_calls_in_the_health_figures(console: tuple[str, ToolRegistry]) -> None:
    """A trial of a tool that search never offered would otherwise read as an agent's unshortlisted call, and lift
    the tool's call rate."""
    url, registry = console
    admin = session_of(url, ADMIN)
    csrf = form_token(httpx.get(f"{url}/console/tools/weather.forecast/try", cookies=admin).text)
    form = {"arguments": '{"city": "Kyiv"}', "csrf": csrf}
    assert httpx.post(f"{url}/console/tools/weather.forecast/try", data=form, cookies=admin).status_code == 200
    agents = {"name": "weather.forecast", "arguments": {"city": "Rome"}}
    assert call(url, "POST", "/execute", ACME_BOT, json=agents).json()["outcome"] == "ok"
    registry.usage.flush()
    usage, since = registry.store.usage, utc_now() - timedelta(hours=1)
    assert [u.called for u in usage.tool_usage(since) if u.tool == "weather.forecast"] == [1]
    assert len(usage.samples("unshortlisted_call", since)) == 1  # the agent's call only
    assert len(usage.timed_calls("weather.forecast", since)) == 2  # the tool's page counts both, trials apart


def test_an_mcp_tool_is_tried_on_its_upstream_through_the_relay(tmp_path: Path) -> None:
    """An API serving with mcp_config runs MCP tools on their servers: a trial goes there as an agent's call does,
    through the gateway's argument checks, and is logged as a trial."""
    from toolrag.cli.app import app as cli
    from toolrag.server.config import load_api_config
    from toolrag.server.serve import build_api

    upstream = python_server("tests.mcp_fixture_server")
    server = "\n".join(f"{key} = {json.dumps(upstream[key])}" for key in ("command", "args", "cwd"))
    schedule = '[schedule]\nconsistency = "off"\nreport = "off"\n'
    (tmp_path / "gateway.toml").write_text(
        f'store = "tools.db"\n{schedule}[servers.shop]\n{server}\n[principals.ops]\nservers = ["shop"]\n'
    )
    (tmp_path / "api.toml").write_text(
        f'store = "tools.db"\nmcp_config = "gateway.toml"\n{schedule}'
        f'[tokens.ops]\ntoken = "{ADMIN}"\nrole = "admin"\nscopes = ["*"]\n'
    )
    assert CliRunner().invoke(cli, ["mcp", "sync", "-c", str(tmp_path / "gateway.toml")]).exit_code == 0
    api = build_api(load_api_config(tmp_path / "api.toml"))
    with serving(api) as url:
        admin = session_of(url, ADMIN)
        form_page = httpx.get(f"{url}/console/tools/shop.lookup_order/try", cookies=admin, timeout=60).text
        assert 'id="unrunnable"' not in form_page and "&#34;order_id&#34;: &#34;&#34;" in form_page
        form = {"arguments": '{"order_id": "A-17"}', "csrf": form_token(form_page)}
        tried = httpx.post(f"{url}/console/tools/shop.lookup_order/try", data=form, cookies=admin, timeout=60)
        assert 'data-outcome="ok"' in tried.text and "order A-17: shipped, arrives Friday" in tried.text
        wrong = {**form, "arguments": '{"order_id": 17}'}
        invalid = httpx.post(f"{url}/console/tools/shop.lookup_order/try", data=wrong, cookies=admin, timeout=60)
        assert (
            'data-outcome="invalid_arguments"' in invalid.text
            and "invalid arguments for shop.lookup_order" in invalid.text
        )
    registry = api.state.api.registry
    registry.usage.flush()
    logged = registry.store.usage.calls(utc_now() - timedelta(hours=1))
    assert {(c.tool, c.outcome, c.origin) for c in logged} == {
        ("shop.lookup_order", "ok", "console"),
        ("shop.lookup_order", "invalid_arguments", "console"),
    }
