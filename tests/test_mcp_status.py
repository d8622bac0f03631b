"""`toolrag mcp status`: the upstreams of a running HTTP gateway (its /health), or of a configuration, connected to
now without importing anything. Real gateways and real MCP servers (the fixture server over stdio and HTTP)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from toolrag.cli.app import app

from .conftest import flooding
from .mcp_support import ROOT, free_port, http_gateway, python_server, stop_tree, wait_until_listening, write_config

runner = CliRunner()
ADMIN_TOKEN = "admin-token-0123456789"
ALICE_TOKEN = "alice-token-0123456789"
FIXTURE_TOOLS = 4  # lookup_order, add_tool, repeat, wait
BROKEN = {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]}


@pytest.fixture(scope="module")
def web_upstream() -> Iterator[str]:
    """The fixture MCP server over streamable HTTP, in its own process: the HTTP upstream."""
    port = free_port()
    command = [sys.executable, "-m", "tests.mcp_fixture_server", "--http", str(port)]
    process = subprocess.Popen(command, cwd=ROOT, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_until_listening(url, process)
        yield url
    finally:
        stop_tree(process.pid)


def wait_for_health(url: str, token: str, settled: Callable[[dict[str, Any]], bool], timeout: float = 120) -> None:
    """Until the gateway's /health satisfies `settled` (its upstreams connect in their own time)."""
    deadline = time.monotonic() + timeout
    answer: dict[str, Any] = {}
    while time.monotonic() < deadline:
        answer = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=10).json()
        if settled(answer):
            return
        time.sleep(0.2)
    raise AssertionError(f"the gateway did not settle within {timeout} s: {answer}")


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory, web_upstream: str) -> Iterator[str]:
    """A gateway over HTTP with a stdio upstream, an HTTP upstream and one that always fails; yields its base URL
    once the first two are up and the third has failed."""
    folder = tmp_path_factory.mktemp("status-gateway")
    servers = {"shop": python_server("tests.mcp_fixture_server"), "web": {"url": web_upstream}, "broken": BROKEN}
    principals = {
        "admin": {"role": "admin", "token": ADMIN_TOKEN},
        "alice": {"servers": ["shop"], "token": ALICE_TOKEN},
    }
    config = write_config(folder, servers, principals, start_deadline_seconds=60)
    with http_gateway(config) as mcp_url:
        base = mcp_url.removesuffix("/mcp")

        def settled(health: dict[str, Any]) -> bool:
            states = {s["server"]: s for s in health.get("servers", [])}
            up = all(states.get(name, {}).get("state") == "up" for name in ("shop", "web"))
            return up and "error" in states.get("broken", {})

        wait_for_health(f"{base}/health", ADMIN_TOKEN, settled)
        # The gateway turns ready just after its last first attempt ends: seen by a principal with no failing server.
        wait_for_health(f"{base}/health", ALICE_TOKEN, lambda health: health.get("ready") is True)
        yield base


def status(*args: str, **env: str | None) -> Any:
    return runner.invoke(app, ["mcp", "status", *args], env=env)


def test_status_of_a_running_gateway_shows_every_upstream_to_an_admin(gateway: str) -> None:
    result = status("--url", gateway, "--json", TOOLRAG_TOKEN=ADMIN_TOKEN)
    assert result.exit_code == 2, result.output  # `broken` failed and is being retried
    answer = json.loads(result.stdout)
    assert answer["gateway"] == f"{gateway}/health" and answer["ready"] is False
    servers = {row["server"]: row for row in answer["servers"]}
    assert set(servers) == {"shop", "web", "broken"}
    for name in ("shop", "web"):
        assert servers[name]["state"] == "up" and servers[name]["tools"] == FIXTURE_TOOLS
        assert servers[name]["last_import"] is not None and servers[name]["error"] is None
    assert servers["broken"]["state"] in ("down", "connecting") and servers["broken"]["error"]
    assert servers["broken"]["last_import"] is None


def test_status_table_and_the_gateway_url_clients_use(gateway: str) -> None:
    result = status("--url", f"{gateway}/mcp", TOOLRAG_TOKEN=ADMIN_TOKEN)  # the MCP endpoint works as well
    assert result.exit_code == 2, result.output
    # Word by word: a table wider than the terminal (80 columns when none) wraps "last import" in two lines.
    for text in ("server", "state", "since", "reconnects", "last", "import", "shop", "web", "broken", "ready: no"):
        assert text in result.stdout


def test_a_principal_sees_only_its_upstreams(gateway: str) -> None:
    result = status("--url", gateway, "--json", "--token-env", "ALICE_TOKEN", ALICE_TOKEN=ALICE_TOKEN)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert [row["server"] for row in answer["servers"]] == ["shop"] and answer["ready"] is True


@pytest.mark.parametrize(
    ("token_env", "env", "message"),
    [
        ("TOOLRAG_TOKEN", {"TOOLRAG_TOKEN": None}, "no token: set TOOLRAG_TOKEN"),
        ("TOOLRAG_TOKEN", {"TOOLRAG_TOKEN": "not-a-token-of-this-gateway"}, "refused the token in TOOLRAG_TOKEN (401"),
        ("GATEWAY_TOKEN", {"GATEWAY_TOKEN": "not-a-token-of-this-gateway"}, "refused the token in GATEWAY_TOKEN (401"),
    ],
)
def test_a_missing_or_wrong_token_names_the_variable(
    gateway: str, token_env: str, env: dict[str, str | None], message: str
) -> None:
    result = status("--url", gateway, "--token-env", token_env, **env)
    assert result.exit_code == 1 and message in result.stderr and result.stdout == ""
    assert result.stderr.count("\n") == 1  # one line


def test_an_unreachable_gateway_and_a_server_that_is_no_gateway(web_upstream: str) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    result = status("--url", nobody, TOOLRAG_TOKEN=ADMIN_TOKEN)
    assert result.exit_code == 1 and f"cannot reach the gateway at {nobody}/health" in result.stderr
    other = status("--url", web_upstream, TOOLRAG_TOKEN=ADMIN_TOKEN)  # an MCP server, but not a toolrag gateway
    assert other.exit_code == 1 and "/health answered 404" in other.stderr
    scheme = status("--url", "127.0.0.1:8765", TOOLRAG_TOKEN=ADMIN_TOKEN)
    assert scheme.exit_code == 1 and "must start with http://" in scheme.stderr


def test_a_server_that_floods_its_health_answer_is_read_no_further() -> None:
    """The URL is the operator's, the server at it maybe not a gateway: an answer of 256 MB (before, read whole) or
    a compressed one is cut off, named."""
    offered = 256 * 1024 * 1024
    for headers in (None, {"Content-Encoding": "gzip"}):
        with flooding(offered, headers) as (url, written):
            flooded = runner.invoke(app, ["mcp", "status", "--url", url])
            sent = written()
        assert flooded.exit_code == 1 and "bytes, compressed, or slower than" in flooded.output, flooded.output
        assert sent and max(sent) < offered // 8, sent
    malformed = runner.invoke(app, ["mcp", "status", "--url", "http://[::1"])
    assert malformed.exit_code == 1 and "cannot reach the gateway" in malformed.output, malformed.output


def test_status_of_a_configuration_connects_now_and_imports_nothing(tmp_path: Path, web_upstream: str) -> None:
    servers = {
        "shop": python_server("tests.mcp_fixture_server"),
        "web": {"url": web_upstream},
        "gone": {"command": str(tmp_path / "no-such-server")},
        "off": {"command": str(tmp_path / "never-started"), "enabled": False},
    }
    config = write_config(tmp_path, servers, {}, connect_timeout_seconds=30, start_deadline_seconds=60)
    result = status("--config", str(config), "--json")
    assert result.exit_code == 2, result.output
    answer = json.loads(result.stdout)
    servers_seen = {row["server"]: row for row in answer["servers"]}
    assert set(servers_seen) == {"shop", "web", "gone"} and answer["ready"] is False  # `off` is not enabled
    assert servers_seen["shop"]["state"] == servers_seen["web"]["state"] == "up"
    assert servers_seen["shop"]["tools"] == servers_seen["web"]["tools"] == FIXTURE_TOOLS
    assert servers_seen["gone"]["state"] == "down" and servers_seen["gone"]["error"]
    assert all(row["last_import"] is None for row in answer["servers"])
    assert not (tmp_path / "gateway.db").exists()  # the registry was not even opened


def test_status_of_a_healthy_configuration_exits_zero(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"shop": python_server("tests.mcp_fixture_server")}, {})
    result = status("--config", str(config))
    assert result.exit_code == 0, result.output
    assert "shop" in result.stdout and "1 of 1 upstream up" in result.stdout
    assert not (tmp_path / "gateway.db").exists()


def test_status_of_a_bad_or_empty_configuration(tmp_path: Path) -> None:
    missing = status("--config", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 1 and "nope.toml does not exist" in missing.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('[servers.a]\ncommand = "x"\nurl = "http://x"\n')
    invalid = status("--config", str(bad))
    assert invalid.exit_code == 1 and "either `command`" in invalid.stderr and invalid.stderr.count("\n") == 1
    empty = write_config(tmp_path, {}, {})
    result = status("--config", str(empty))
    assert result.exit_code == 0 and "no enabled upstream" in result.stdout
