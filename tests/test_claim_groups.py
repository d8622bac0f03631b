"""Principals defined only by an access token's claims (issue 33 §5): a verified token that matches no access rule
gets the configured groups its groups claim names, combined (access/policy.py); through the API and the HTTP
gateway, with the issuer of tests/test_oauth.py issuing the tokens."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from typer.testing import CliRunner

from toolrag import ToolRegistry
from toolrag.access import GroupGrant
from toolrag.access.oauth import OAuthConfig
from toolrag.access.rate_limit import Rate, RateLimits
from toolrag.cli.app import app as cli
from toolrag.server.app import create_app
from toolrag.server.config import ApiConfig

from .conftest import SAMPLE_TOOLS
from .mcp_support import free_port, http_client, http_gateway, python_server
from .test_api import serving
from .test_oauth import Issuer, initialize, issuer

__all__ = ["issuer"]  # the issuer fixture, shared with tests/test_oauth.py

OPS = "ops-static-token-0123456789"
DESK = "weather-desk-token-0123456789"
PAYMENTS = {"payments.refund_payment", "payments.list_payments"}


def api_groups() -> dict[str, GroupGrant]:
    return {
        "billing-agents": GroupGrant(role="agent", tools=["payments.*"], scopes=["billing:*"]),
        "weather-readers": GroupGrant(tools=["weather.*"]),
        "no-refunds": GroupGrant(deny_tools=["payments.refund_payment"]),
        "acme": GroupGrant(tenant="acme"),
        "globex": GroupGrant(tenant="globex"),
    }


@pytest.fixture
def api(issuer: Issuer, tmp_path: Path) -> Iterator[str]:
    """The API with an admin token, a reader token of globex's weather and hr tools, one OAuth rule (scope
    toolrag:agent) and the groups above (claim `groups`); two searches at once per caller."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    config = ApiConfig(
        oauth=OAuthConfig(issuer=issuer.url, audience=url, jwks_url=f"{issuer.url}/jwks.json", groups_claim="groups"),
        tokens={
            "ops": {"token": OPS, "role": "admin"},
            "weather-desk": {"token": DESK, "tenant": "globex", "tools": ["weather.*", "hr.*"]},
            "idp-agents": {"claims": {"scope": "toolrag:agent"}},
        },
        groups=api_groups(),
        rate_limits=RateLimits(search=Rate(per_minute=1, burst=2)),
    )
    registry = ToolRegistry(tmp_path / "api.db")
    registry.register_many(SAMPLE_TOOLS)
    with serving(create_app(registry, config), port=port):
        yield url


def as_groups(issuer: Issuer, url: str, groups: list[str] | None, **claims: Any) -> dict[str, str]:
    extra = {} if groups is None else {"groups": groups}
    return {"Authorization": f"Bearer {issuer.token(url, 'mcp', **extra, **claims)}"}


def listed(url: str, headers: dict[str, str]) -> set[str]:
    answer = httpx.get(f"{url}/tools", headers=headers, timeout=60)
    assert answer.status_code == 200, answer.text
    return {tool["name"] for tool in answer.json()}


def test_a_group_only_token_sees_exactly_its_groups_tools(issuer: Issuer, api: str) -> None:
    assert listed(api, as_groups(issuer, api, ["billing-agents"])) == PAYMENTS
    assert listed(api, as_groups(issuer, api, ["billing-agents", "no-such-group"])) == PAYMENTS
    refund = {"name": "payments.refund_payment", "arguments": {"payment_id": "p1"}}
    ran = httpx.post(f"{api}/execute", json=refund, headers=as_groups(issuer, api, ["billing-agents"]), timeout=30)
    assert ran.status_code != 403  # an agent: the group's role (the tool has no function here, so not 200)


@pytest.mark.parametrize("groups", [None, [], ["no-such-group"], "billing-agents"])
def test_a_token_naming_no_configured_group_is_refused(issuer: Issuer, api: str, groups: Any) -> None:
    """A bare string is one group's name, not a list: `billing-agents` would match; the others name none."""
    answer = httpx.get(f"{api}/tools", headers=as_groups(issuer, api, groups), timeout=30)
    if groups == "billing-agents":
        assert answer.status_code == 200
        return
    assert answer.status_code == 403 and "no access rule" in answer.json()["detail"]
    assert 'error="insufficient_scope"' in answer.headers["www-authenticate"]


def test_a_deny_in_one_group_wins_over_an_allow_in_another(issuer: Issuer, api: str) -> None:
    """`no-refunds` (reader by default) names no tools: it allows none by itself and keeps billing-agents' role."""
    headers = as_groups(issuer, api, ["billing-agents", "no-refunds"])
    assert listed(api, headers) == {"payments.list_payments"}
    hidden = httpx.get(f"{api}/tools/payments.refund_payment", headers=headers, timeout=30)
    assert hidden.status_code == 404


def test_a_lower_role_s_tools_are_not_lifted_to_a_higher_one(issuer: Issuer, api: str) -> None:
    """weather-readers grants reading weather tools, not running them: joined with billing-agents, the token is an
    agent with billing-agents' tools."""
    assert listed(api, as_groups(issuer, api, ["weather-readers"])) == {"weather.forecast"}
    assert listed(api, as_groups(issuer, api, ["weather-readers", "billing-agents"])) == PAYMENTS


def test_groups_naming_two_tenants_are_refused(issuer: Issuer, api: str) -> None:
    refused = httpx.get(f"{api}/tools", headers=as_groups(issuer, api, ["acme", "globex", "billing-agents"]))
    assert refused.status_code == 403
    assert "groups 'acme' and 'globex' name different tenants" in refused.json()["detail"]
    one = as_groups(issuer, api, ["acme", "billing-agents"], tenant="globex")  # the group's tenant, as a rule's
    health = httpx.get(f"{api}/tools/hr.update_salary", headers=one, timeout=30)
    assert health.status_code == 404  # hr needs hr:admin even in acme
    assert listed(api, one) == PAYMENTS


def test_a_named_rule_comes_before_groups(issuer: Issuer, api: str) -> None:
    headers = {"Authorization": f"Bearer {issuer.token(api, 'toolrag:agent', groups=['billing-agents'])}"}
    assert listed(api, headers) == {t.name for t in SAMPLE_TOOLS if not t.scopes}  # idp-agents: every name, no scopes


def _search(url: str, headers: dict[str, str]) -> int:
    return httpx.post(f"{url}/search", json={"query": "weather in Kyiv"}, headers=headers, timeout=60).status_code


def test_group_tokens_of_different_subjects_have_their_own_rates(issuer: Issuer, api: str) -> None:
    kim = as_groups(issuer, api, ["weather-readers"], sub="kim")
    assert [_search(api, kim) for _ in range(3)] == [200, 200, 429]
    assert _search(api, as_groups(issuer, api, ["weather-readers"], sub="lee")) == 200
    assert _search(api, as_groups(issuer, api, ["billing-agents"], sub="kim")) == 429  # kim, whatever its groups
    rule = {"Authorization": f"Bearer {issuer.token(api, 'toolrag:agent', sub='kim')}"}
    assert _search(api, rule) == 200  # the rule idp-agents' kim is another caller


def test_groups_need_a_groups_claim_and_name_problems() -> None:
    oauth = {"issuer": "https://id.example", "audience": "https://t.example", "jwks_url": "https://id.example/k"}
    with pytest.raises(ValueError, match="groups_claim"):
        ApiConfig.model_validate({"oauth": oauth, "groups": {"g": {"tools": ["*"]}}})
    with pytest.raises(ValueError, match="claims"):
        GroupGrant.model_validate({"claims": {"scope": "x"}})
    with pytest.raises(ValueError, match="token"):
        GroupGrant.model_validate({"token": "0123456789abcdef0123"})


GATEWAY_PORT = free_port()


@pytest.fixture(scope="module")
def gateway_config(issuer: Issuer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gateway in front of the fixture servers `shop` and `payroll`, synced, with no rule for OAuth tokens and the
    groups shop-users (shop's tools), payroll-users and no-repeating (denies every `repeat`)."""
    folder = tmp_path_factory.mktemp("groups")
    upstream = python_server("tests.mcp_fixture_server")
    server = "\n".join(f"{key} = {json.dumps(upstream[key])}" for key in ("command", "args", "cwd"))
    (folder / "gateway.toml").write_text(
        f'store = "gateway.db"\n[schedule]\nconsistency = "off"\nreport = "off"\n'
        f'[oauth]\nissuer = "{issuer.url}"\njwks_url = "{issuer.url}/jwks.json"\n'
        f'audience = "http://127.0.0.1:{GATEWAY_PORT}/mcp"\ngroups_claim = "groups"\n'
        f"[servers.shop]\n{server}\n[servers.payroll]\n{server}\n"
        '[groups.shop-users]\nservers = ["shop"]\n[groups.payroll-users]\nservers = ["payroll"]\n'
        '[groups.no-repeating]\ndeny_tools = ["*.repeat"]\n'
    )
    assert CliRunner().invoke(cli, ["mcp", "sync", "-c", str(folder / "gateway.toml")]).exit_code == 0
    return folder / "gateway.toml"


@pytest.fixture(scope="module")
def gateway(gateway_config: Path) -> Iterator[str]:
    """The HTTP gateway of `gateway_config`."""
    with http_gateway(gateway_config, port=GATEWAY_PORT) as url:
        yield url


CALLS = {
    "shop.lookup_order": {"order_id": "42"},
    "payroll.lookup_order": {"order_id": "42"},
    "shop.repeat": {"text": "a", "times": 2},
}


def _found_and_run(url: str, token: str) -> tuple[set[str], set[str]]:
    """What find_tools offers the token (the likeliest few), and which of CALLS it may run."""

    async def session() -> tuple[set[str], set[str]]:
        async with http_client(url, token, timeout=120) as client:
            answer = await client.call_tool("find_tools", {"query": "look up an order, repeat a text", "k": 5})
            ran = set()
            for name, arguments in CALLS.items():
                called = await client.call_tool("call_tool", {"name": name, "arguments": arguments})
                if not called.is_error:
                    ran.add(name)
            return {tool["name"] for tool in answer.structured_content["tools"]}, ran

    return anyio.run(session)


def test_the_gateway_gives_a_group_token_its_groups_tools(issuer: Issuer, gateway: str) -> None:
    found, ran = _found_and_run(gateway, issuer.token(gateway, "mcp", groups=["shop-users", "unknown"]))
    assert ran == {"shop.lookup_order", "shop.repeat"} and "shop.lookup_order" in found
    assert all(name.startswith("shop.") for name in found)
    found, ran = _found_and_run(gateway, issuer.token(gateway, "mcp", groups=["shop-users", "no-repeating"]))
    assert ran == {"shop.lookup_order"} and "shop.lookup_order" in found and "shop.repeat" not in found
    groups = ["shop-users", "payroll-users", "no-repeating"]
    found, ran = _found_and_run(gateway, issuer.token(gateway, "mcp", groups=groups))
    assert ran == {"shop.lookup_order", "payroll.lookup_order"} and not any(n.endswith(".repeat") for n in found)


def test_the_gateway_refuses_a_token_of_no_configured_group(issuer: Issuer, gateway: str) -> None:
    for groups in ([], ["unknown"]):
        refused = initialize(gateway, issuer.token(gateway, "mcp", groups=groups))
        assert refused.status_code == 403 and "no access rule" in refused.json()["detail"]


# -- what can this token see (issue 33 §6) ---------------------------------------------------------------------------


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_an_admin_sees_what_a_rule_s_principal_sees_and_why_not(api: str) -> None:
    view = httpx.get(f"{api}/access/weather-desk/tools", params={"tool": "hr.update_salary"}, headers=_as(OPS))
    assert view.status_code == 200, view.text
    answer = view.json()
    assert answer["tools"] == sorted(listed(api, _as(DESK))) == ["weather.forecast"]
    assert (answer["caller"], answer["role"], answer["tenant"]) == ("weather-desk", "reader", "globex")
    assert answer["tool"] == {"name": "hr.update_salary", "visible": False, "hidden_by": "tenants acme only"}
    why = {
        name: httpx.get(f"{api}/access/weather-desk/tools", params={"tool": name}, headers=_as(OPS)).json()["tool"]
        for name in ("payments.list_payments", "no.such_tool", "weather.forecast")
    }
    assert why["payments.list_payments"]["hidden_by"] == "its name is not among the tools the principal's rules allow"
    assert why["no.such_tool"]["hidden_by"] == "no tool of this name is registered"
    assert why["weather.forecast"] == {"name": "weather.forecast", "visible": True, "hidden_by": None}
    everything = httpx.get(f"{api}/access/ops/tools", headers=_as(OPS)).json()
    assert everything["tools"] == sorted(t.name for t in SAMPLE_TOOLS)  # an admin's principal sees every tool
    missing = httpx.get(f"{api}/access/nobody/tools", headers=_as(OPS))
    assert missing.status_code == 404 and "no access rule named 'nobody'" in missing.json()["detail"]


def test_claims_resolve_through_the_same_policy_as_tokens(issuer: Issuer, api: str) -> None:
    def resolved(claims: dict[str, Any], tool: str | None = None) -> dict[str, Any]:
        answer = httpx.post(f"{api}/access/resolve", json={"claims": claims, "tool": tool}, headers=_as(OPS))
        assert answer.status_code == 200, answer.text
        return answer.json()

    kim = {"iss": issuer.url, "sub": "kim", "scope": "mcp"}
    grouped = resolved(kim | {"groups": ["billing-agents", "no-refunds"]}, "payments.refund_payment")
    assert (grouped["caller"], grouped["role"], grouped["user"]) == ("groups billing-agents+no-refunds", "agent", "kim")
    assert grouped["tools"] == sorted(listed(api, as_groups(issuer, api, ["billing-agents", "no-refunds"])))
    assert grouped["tool"]["hidden_by"] == "denied by deny_tools payments.refund_payment"
    assert resolved(kim | {"scope": "toolrag:agent"})["caller"] == "idp-agents"
    conflict = resolved(kim | {"groups": ["acme", "globex"]})
    assert not conflict["granted"] and "different tenants" in conflict["refused"] and conflict["tools"] == []
    nobody = resolved(kim | {"groups": ["no-such-group"]})
    assert not nobody["granted"] and nobody["refused"] == "no access rule of this server matches the token of 'kim'"
    assert "no 'sub' claim" in resolved({"groups": ["billing-agents"]})["refused"]


def test_only_admins_ask_what_others_see_and_others_learn_nothing(issuer: Issuer, api: str) -> None:
    member = as_groups(issuer, api, ["billing-agents"])
    answers = [
        httpx.get(f"{api}/access/{rule}/tools", headers=headers)
        for rule in ("ops", "nobody")
        for headers in (_as(DESK), member)
    ]
    answers.append(httpx.post(f"{api}/access/resolve", json={"claims": {"sub": "x"}}, headers=_as(DESK)))
    assert {answer.status_code for answer in answers} == {403}
    assert {answer.json()["detail"].split(";")[1] for answer in answers} == {" this needs admin"}


def test_the_console_shows_an_admin_what_a_rule_or_claims_may_use(issuer: Issuer, api: str) -> None:
    from .test_console import browser, shot, signed_in

    with browser() as chromium:
        page: Any = signed_in(chromium, api, OPS)
        page.click("header nav a[href='/console/access']")
        page.select_option("select[name=rule]", "weather-desk")
        page.fill("input[name=tool]", "hr.update_salary")
        page.click("form#ask button[type=submit]")
        assert page.locator("#tools li").all_inner_texts() == sorted(listed(api, _as(DESK)))
        assert page.locator("#asked").inner_text() == "hr.update_salary: hidden: tenants acme only"
        assert "weather-desk · reader · user weather-desk · tenant globex" in page.locator("#principal").inner_text()
        page.select_option("select[name=rule]", "")
        page.fill("textarea[name=claims]", json.dumps({"sub": "kim", "groups": ["billing-agents", "no-refunds"]}))
        page.fill("input[name=tool]", "payments.refund_payment")
        page.click("form#ask button[type=submit]")
        shot(page, "access")
        assert page.locator("#tools li").all_inner_texts() == ["payments.list_payments"]
        assert "denied by deny_tools payments.refund_payment" in page.locator("#asked").inner_text()
        page.fill("textarea[name=claims]", json.dumps({"sub": "kim", "groups": ["acme", "globex"]}))
        page.click("form#ask button[type=submit]")
        assert "different tenants" in page.locator("#refused").inner_text()
        page.fill("textarea[name=claims]", "[1, 2]")
        page.click("form#ask button[type=submit]")
        assert "must be a JSON object" in page.locator("#error").inner_text()
        reader: Any = signed_in(chromium, api, DESK)
        assert reader.locator("header nav a[href='/console/access']").count() == 0
        refused = reader.goto(f"{api}/console/access?rule=ops")
        assert refused.status == 403 and reader.locator("#tools, select[name=rule]").count() == 0


def test_the_cli_shows_a_rule_s_and_claims_tools(issuer: Issuer, gateway_config: Path, tmp_path: Path) -> None:
    """`toolrag api access` and `toolrag mcp access` read the server's configuration and registry."""
    (tmp_path / "api.toml").write_text(
        f'store = "api.db"\n[oauth]\nissuer = "{issuer.url}"\naudience = "https://api.example"\n'
        f'jwks_url = "{issuer.url}/k"\n'
        f'groups_claim = "groups"\n[tokens.weather-desk]\ntoken = "{DESK}"\ntenant = "globex"\n'
        'tools = ["weather.*", "hr.*"]\n[groups.billing-agents]\nrole = "agent"\ntools = ["payments.*"]\n'
        'scopes = ["billing:*"]\n'
    )
    ToolRegistry(tmp_path / "api.db").register_many(SAMPLE_TOOLS)
    api_config = ["-c", str(tmp_path / "api.toml")]
    desk = CliRunner().invoke(cli, ["api", "access", "weather-desk", "--tool", "hr.update_salary", *api_config])
    assert desk.exit_code == 0, desk.output
    assert desk.output.splitlines() == [
        "weather-desk · reader · user weather-desk · tenant globex",
        "hr.update_salary: hidden: tenants acme only",
        "1 tool it may use:",
        "  weather.forecast",
    ]
    claims = json.dumps({"sub": "kim", "groups": ["billing-agents"]})
    grouped = CliRunner().invoke(cli, ["api", "access", "--claims", claims, "--json", *api_config])
    assert json.loads(grouped.output)["tools"] == sorted(PAYMENTS)
    wrong = CliRunner().invoke(cli, ["api", "access", "nobody", *api_config])
    assert wrong.exit_code == 1 and "no access rule named 'nobody'" in wrong.output
    both = CliRunner().invoke(cli, ["api", "access", "weather-desk", "--claims", claims, *api_config])
    assert both.exit_code == 1 and "one of them" in both.output
    claims = json.dumps({"sub": "kim", "groups": ["shop-users", "no-repeating"]})
    gateway = CliRunner().invoke(cli, ["mcp", "access", "--claims", claims, "-c", str(gateway_config), "--json"])
    shop = json.loads(gateway.output)["tools"]
    assert "shop.lookup_order" in shop and all(n.startswith("shop.") and n != "shop.repeat" for n in shop)


def test_hostile_claims_bodies_get_a_bounded_answer(issuer: Issuer, api: str) -> None:
    """What an admin pastes into /access/resolve is untrusted too: an oversize body is refused before it is read
    whole, a deeply nested or enormous claim is answered without echoing it, and the server stays up for others."""
    over = httpx.post(f"{api}/access/resolve", json={"claims": {"sub": "x" * 1_100_000}}, headers=_as(OPS))
    assert over.status_code == 413 and "request body over 1048576 bytes" in over.text
    deep = '{"claims": {"sub": "kim", "nested": ' + "[" * 200_000 + "]" * 200_000 + "}}"
    nested = httpx.post(f"{api}/access/resolve", content=deep, headers=_as(OPS) | {"content-type": "application/json"})
    assert nested.status_code == 400 and "error parsing the body" in nested.text  # the JSON parser's depth limit
    assert len(nested.content) < 5_000
    many = {"sub": "k" * 400_000, "groups": [f"g{i}" for i in range(50_000)]}
    answer = httpx.post(f"{api}/access/resolve", json={"claims": many}, headers=_as(OPS), timeout=60)
    assert answer.status_code == 200, answer.text[:300]
    assert not answer.json()["granted"] and len(answer.content) < 2_000
    assert listed(api, _as(DESK)) == {"weather.forecast"}
