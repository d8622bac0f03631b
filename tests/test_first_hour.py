"""Issue 50: what a newcomer trips on gets one clear line, the same rule on every way in."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import anyio
import pytest

from toolrag import Principal, ToolRegistry
from toolrag.errors import ConfigError, InvalidRequestError
from toolrag.limits import MAX_K
from toolrag.mcp.config import load_config

from .conftest import SAMPLE_TOOLS, CountingEmbedder


@pytest.mark.parametrize("k", [0, -1, MAX_K + 1, 99, True, 2.0])
def test_search_refuses_a_k_the_cli_the_api_and_find_tools_refuse(registry: ToolRegistry, k: object) -> None:
    registry.register_many(SAMPLE_TOOLS)
    with pytest.raises(InvalidRequestError, match=rf"^k must be an integer from 1 to {MAX_K} \(got "):
        registry.search("will it rain in Kyiv tomorrow?", k=k)  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError):
        registry.select("will it rain in Kyiv tomorrow?", k=k)  # type: ignore[arg-type]
    assert [r.name for r in registry.search("will it rain in Kyiv tomorrow?", k=1)] == ["weather.forecast"]


def test_a_principal_takes_one_scope_as_a_string_and_says_what_it_wants_in_one_line() -> None:
    assert Principal(scopes="billing:write").scopes == frozenset({"billing:write"})
    assert Principal(deny_tools="git.git_reset").deny_tools == frozenset({"git.git_reset"})
    assert Principal(scopes=["a", "b"]).scopes == frozenset({"a", "b"})
    for wrong in (5, ["billing:write", 3]):
        with pytest.raises(TypeError) as refused:
            Principal(scopes=wrong)
        assert str(refused.value) == f"scopes is a set of strings, got {type(wrong).__name__}"


def test_an_unknown_setting_names_the_one_it_most_likely_misspells(tmp_path: Path) -> None:
    path = tmp_path / "gateway.toml"
    path.write_text('store = "x.db"\n[servers.a]\ncommand = "python"\nargz = ["-m", "x"]\nzzz = 1\n')
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    assert str(refused.value) == (
        f"invalid gateway configuration {path}: servers.a.argz: unknown setting (did you mean `args`?);"
        " servers.a.zzz: unknown setting"
    )


@pytest.mark.slow
def test_python_in_a_gateway_configuration_is_the_gateways_own_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Started from an IDE's or a client's environment, the first `python` on the PATH lacks the server's package;
    `command = "python"` runs the gateway's interpreter whatever the PATH holds (none here)."""
    from typer.testing import CliRunner

    from toolrag.cli.app import app

    from .mcp_support import ROOT, write_config

    servers = {"clock": {"command": "python", "args": ["-m", "mcp_server_time"], "cwd": str(ROOT)}}
    config = write_config(tmp_path, servers, {}, connect_timeout_seconds=30)
    monkeypatch.setenv("PATH", str(tmp_path))  # no python on it at all
    synced = CliRunner().invoke(app, ["mcp", "sync", "-c", str(config), "--json"])
    (clock,) = json.loads(synced.stdout)
    assert synced.exit_code == 0 and clock["state"] == "up" and len(clock["imported"]) == 2


def test_a_command_that_cannot_run_says_so_instead_of_retry_later() -> None:
    from toolrag.mcp.config import GatewayConfig, ServerConfig
    from toolrag.mcp.upstream import Upstream, UpstreamUnavailable, resolved_command

    assert resolved_command("python") == resolved_command("python3") == sys.executable
    assert resolved_command("node") == "node"
    settings = GatewayConfig(store=":memory:", servers={"typo": ServerConfig(command="no-such-mcp-server")})

    async def ignored(*_: object) -> None:
        return None

    upstream = Upstream("typo", settings.servers["typo"], settings, ignored)

    def refusal(reason: str) -> str:
        upstream._mark_down(reason)
        with pytest.raises(UpstreamUnavailable) as refused:
            anyio.run(upstream.call, "now", {})
        return str(refused.value)

    assert refusal("command not found: no-such-mcp-server") == (
        "MCP server 'typo' is unavailable (down: command not found: no-such-mcp-server); the gateway's configuration"
        " names a command that cannot run"
    )
    assert refusal("MCPError: Connection closed").endswith("; retry later")


@pytest.mark.slow
def test_the_consoles_first_block_signs_in_with_the_configuration_the_docs_give(
    tmp_path: Path, embedder: CountingEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/console.md exports a token and serves docs/http-api.md's toolrag-api.toml: that token signs in."""
    from toolrag.server.app import create_app
    from toolrag.server.config import load_api_config

    from .mcp_support import ROOT
    from .test_api import serving
    from .test_console import session_of

    console = (ROOT / "docs" / "console.md").read_text(encoding="utf-8")
    block = console[console.index("```bash\n") + 8 :]
    block = block[: block.index("```")]
    exported = dict(re.findall(r"^export (\w+)=(\S+)", block, flags=re.M))
    assert "--config toolrag-api.toml" in block and exported
    api = (ROOT / "docs" / "http-api.md").read_text(encoding="utf-8")
    toml = next(part for part in api.split("```toml\n")[1:] if "# toolrag-api.toml" in part).split("```")[0]
    toml = "\n".join(line for line in toml.splitlines() if not line.startswith(("store", "mcp_config")))
    (tmp_path / "toolrag-api.toml").write_text(f'store = "{tmp_path / "toolrag.db"}"\n{toml}')
    for name, value in exported.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SUPPORT_BOT_TOKEN", "support-bot-secret-0123")
    config = load_api_config(tmp_path / "toolrag-api.toml")
    with ToolRegistry(tmp_path / "toolrag.db", embedder) as registry, serving(create_app(registry, config)) as url:
        registry.register_many(SAMPLE_TOOLS)
        (token,) = exported.values()
        assert session_of(url, token)["toolrag_console"]


@pytest.mark.slow
def test_two_protocol_sessions_of_one_token_are_two_conversations(tmp_path: Path) -> None:
    """Over streamable HTTP at 2025-11-25, each protocol session is a conversation: a new session's first
    find_tools is not told its tools were "offered earlier in this conversation" (another session's)."""
    from .mcp_support import http_client, http_gateway, python_server, write_config

    principals = {"alice": {"scopes": ["*"], "token": "alice-token-0123456789"}}
    config = write_config(tmp_path, {"shop": python_server("tests.mcp_fixture_server")}, principals)
    request = {"query": "look up the status of my order"}

    async def sessions(url: str) -> None:
        async with http_client(url, "alice-token-0123456789", mode="legacy") as first:
            offered = await first.call_tool("find_tools", request)
            assert "shop.lookup_order" in [t["name"] for t in offered.structured_content["tools"]]
            again = await first.call_tool("find_tools", request)
            assert again.structured_content["next"].startswith("already available")  # the same session
        async with http_client(url, "alice-token-0123456789", mode="legacy") as second:
            fresh = await second.call_tool("find_tools", request)
            assert "shop.lookup_order" in [t["name"] for t in fresh.structured_content["tools"]]
            assert not fresh.structured_content["next"].startswith("already available")

    with http_gateway(config) as url:
        anyio.run(sessions, url)


def test_the_usage_report_counts_as_called_only_calls_that_ran(registry: ToolRegistry) -> None:
    from datetime import timedelta

    from toolrag.model import utc_now
    from toolrag.store.usage import CallRecord

    registry.register_many(SAMPLE_TOOLS)
    calls = [
        CallRecord("weather.forecast", "ok", 5.0, True),
        CallRecord("weather.forecast", "refused", 0.0, False),
        CallRecord("no.such_tool", "unknown_tool", 0.0, False),
    ]
    registry.store.usage.record([], calls)
    usage = {u.tool: u.called for u in registry.store.usage.tool_usage(utc_now() - timedelta(days=1))}
    assert usage == {"weather.forecast": 1}
    totals = registry.store.usage.totals(utc_now() - timedelta(days=1))
    assert (totals.calls, totals.refused_calls) == (1, 2)


@pytest.mark.slow
def test_a_plain_installs_quick_start_marks_its_estimates_and_matches_the_readme(tmp_path: Path) -> None:
    """Issue 50: the README's counts are exact (the `tokens` extra, which the tests install); a plain install
    estimates them and printed other numbers unmarked (106 against 102). Counts now read `~106` there, and the
    Quick start's block matches such a run within the estimate's margin."""
    import subprocess

    from .doc_output import mismatch
    from .test_readme import README, blocks, docs_env

    shown = next(b.shown_output for b in blocks(README) if b.code == "toolrag quickstart\n")
    assert shown is not None
    plain = (
        "import sys, toolrag.inject.tokens as tokens\n"
        "tokens._encoding = lambda: None  # as without the `tokens` extra\n"
        "from toolrag.cli.app import main\n"
        "sys.argv = ['toolrag', 'quickstart']\n"
        "main()\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", plain], cwd=tmp_path, env=docs_env(), capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert re.search(r"~\d+ prompt tokens instead of ~\d+", run.stdout), run.stdout[-1000:]
    assert mismatch(shown, run.stdout) is None, mismatch(shown, run.stdout)
