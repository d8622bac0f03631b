"""`toolrag doctor`, shell completion, and the example configurations in examples/ (loaded by the real loaders, so
they cannot drift from what toolrag reads)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from toolrag.cli.app import app
from toolrag.cli.doctor import extra_checks
from toolrag.errors import ConfigError
from toolrag.mcp.config import load_config
from toolrag.model import Tool
from toolrag.server.config import load_api_config
from toolrag.store.base import migrations

from .conftest import in_schema
from .mcp_support import ROOT, TOOLRAG, python_server, write_config

LATEST = migrations("sqlite")[-1][0]  # the schema version a new registry gets

runner = CliRunner()
EXAMPLES = ROOT / "examples"
CATALOG = [
    {"name": "weather.forecast", "description": "Weather forecast for a city."},
    {"name": "payments.refund", "description": "Refund a customer's payment.", "scopes": ["billing:write"]},
]


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder without a gateway configuration, and no configuration named by the environment."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TOOLRAG_MCP_CONFIG", raising=False)
    return tmp_path


def doctor(*args: str) -> tuple[int, dict[str, dict[str, Any]]]:
    """Exit code, and the checks by name."""
    result = runner.invoke(app, ["doctor", "--json", *args])
    answer = json.loads(result.stdout)
    assert answer["ok"] == (result.exit_code == 0), result.output
    return result.exit_code, {check["name"]: check for check in answer["checks"]}


def registry_check(checks: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return next(check for name, check in checks.items() if name.startswith("registry "))


@pytest.fixture
def registry(here: Path) -> Path:
    catalog = here / "catalog.json"
    catalog.write_text(json.dumps(CATALOG))
    path = here / "tools.db"
    result = runner.invoke(app, ["import", str(catalog), "--store", str(path)])
    assert result.exit_code == 0, result.output
    return path


def test_doctor_without_a_registry_warns_and_creates_none(here: Path) -> None:
    missing = here / "none.db"
    code, checks = doctor("--store", str(missing))
    assert code == 0  # a warning is not a failure
    assert not missing.exists()
    models = [check for name, check in checks.items() if name.startswith(("embedding model ", "default embedder"))]
    assert len(models) >= 3 and all(check["status"] == "ok" for check in models)  # each model, then the default
    assert "dimensions, ran on a text in" in models[-1]["detail"]
    found = registry_check(checks)
    assert found["status"] == "warn" and found["detail"] == "no registry yet" and "toolrag import" in found["hint"]
    assert checks["extra postgres"]["status"] == "ok" and "psycopg" in checks["extra postgres"]["detail"]
    assert "extra test" not in checks and "extra integrations" not in checks  # for development; a group
    assert checks["mcp gateway"]["status"] == "ok" and "not configured" in checks["mcp gateway"]["detail"]
    cache = next(check for name, check in checks.items() if name.startswith("model cache "))
    assert cache["status"] == "ok" and " in " in cache["detail"]


def test_doctor_prints_one_line_per_check(here: Path) -> None:
    result = runner.invoke(app, ["doctor", "--store", str(here / "none.db")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.strip().splitlines()
    assert all(line.split()[0] in ("ok", "warn", "fail") for line in lines[:-1])
    assert any(line.startswith("warn") and "no registry yet → create one" in line for line in lines)
    assert lines[-1].endswith("1 warning, 0 failed")


def test_doctor_reports_a_registry_without_migrating_it(registry: Path) -> None:
    code, checks = doctor("--store", str(registry))
    assert code == 0
    found = registry_check(checks)
    assert found["status"] == "ok" and found["detail"].startswith(
        f"2 tools (2 active), schema version {LATEST} of {LATEST}"
    )
    assert found["detail"].endswith("indexed with the default embedder")
    with sqlite3.connect(registry) as db:
        db.execute("PRAGMA user_version = 7")  # as an older toolrag left it
    code, checks = doctor("--store", f"sqlite:///{registry}")
    assert (
        code == 0
        and registry_check(checks)["status"] == "warn"
        and f"version 7 of {LATEST}" in registry_check(checks)["detail"]
    )
    with sqlite3.connect(registry) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 7  # doctor only read it
        db.execute("PRAGMA user_version = 99")  # as a newer toolrag would leave it
    code, checks = doctor("--store", str(registry))
    assert (
        code == 1 and registry_check(checks)["status"] == "fail" and registry_check(checks)["hint"] == "upgrade toolrag"
    )


def test_doctor_names_a_file_that_is_no_registry(here: Path) -> None:
    junk = here / "junk.db"
    junk.write_text("this is not a database")
    code, checks = doctor("--store", str(junk))
    assert code == 1 and registry_check(checks)["status"] == "fail" and "junk.db" in registry_check(checks)["detail"]


def test_doctor_on_postgres_creates_no_schema(here: Path, postgres_url: str) -> None:
    import psycopg

    schema = f"doctor_{uuid.uuid4().hex[:12]}"
    code, checks = doctor("--store", in_schema(postgres_url, schema))
    assert code == 0 and registry_check(checks)["detail"] == "no registry yet"
    with psycopg.connect(postgres_url) as conn:
        query = "SELECT 1 FROM information_schema.schemata WHERE schema_name = %s"
        assert conn.execute(query, (schema,)).fetchone() is None
    catalog = here / "catalog.json"
    catalog.write_text(json.dumps(CATALOG))
    imported = runner.invoke(app, ["import", str(catalog), "--store", in_schema(postgres_url, schema)])
    assert imported.exit_code == 0, imported.output
    code, checks = doctor("--store", in_schema(postgres_url, schema))
    assert code == 0 and registry_check(checks)["status"] == "ok"
    assert registry_check(checks)["detail"].startswith(f"2 tools (2 active), schema version {LATEST} of {LATEST}")


def test_doctor_connects_to_the_upstreams_of_the_gateway_configuration_here(here: Path) -> None:
    servers = {"shop": python_server("tests.mcp_fixture_server"), "gone": {"command": str(here / "no-such-server")}}
    write_config(here, servers, {}, connect_timeout_seconds=30, start_deadline_seconds=60)  # ./toolrag-mcp.toml
    code, checks = doctor("--store", str(here / "none.db"))
    assert code == 1
    assert checks["mcp config toolrag-mcp.toml"]["detail"] == "2 enabled upstreams"
    assert checks["upstream shop"]["status"] == "ok" and checks["upstream shop"]["detail"] == "up, 4 tools listed"
    assert checks["upstream gone"]["status"] == "fail" and checks["upstream gone"]["detail"].startswith("down: ")
    assert "toolrag mcp status" in checks["upstream gone"]["hint"]
    assert not (here / "gateway.db").exists()  # nothing was imported


def test_doctor_names_a_broken_gateway_configuration(here: Path) -> None:
    bad = here / "bad.toml"
    bad.write_text('[servers.a]\ncommand = "x"\ncolour = "red"\n')
    code, checks = doctor("--store", str(here / "none.db"), "--mcp-config", str(bad))
    assert (
        code == 1
        and checks[f"mcp config {bad}"]["status"] == "fail"
        and "colour" in checks[f"mcp config {bad}"]["detail"]
    )


def test_extras_are_checked_as_declared() -> None:
    """The real check on requirement lists shaped like an installed toolrag's metadata."""
    extras = ["ready", "absent", "old", "grouped", "group", "elsewhere", "test"]
    requirements = [
        "numpy; extra == 'ready'",
        "no-such-package-for-toolrag>=1; extra == 'absent'",
        "numpy>=999; extra == 'old'",
        "toolrag[absent]; extra == 'grouped'",
        "pydantic; extra == 'grouped'",
        "toolrag[ready,old]; extra == 'group'",
        "no-such-package-for-toolrag; extra == 'elsewhere' and sys_platform == 'no-such-platform'",
        "pytest; extra == 'test'",
        "numpy>=1",  # not optional
    ]
    checks = {check.name: check for check in extra_checks(extras, requirements)}
    assert set(checks) == {"extra ready", "extra absent", "extra old", "extra grouped"}
    assert checks["extra ready"].status == "ok" and checks["extra ready"].detail.startswith("numpy ")
    assert checks["extra absent"].status == "warn" and checks["extra absent"].detail.startswith("not installed")
    assert checks["extra absent"].hint is not None and "[absent]" in checks["extra absent"].hint
    assert checks["extra old"].status == "warn" and "(wants >=999)" in checks["extra old"].detail
    assert checks["extra grouped"].detail.startswith("incomplete: no-such-package-for-toolrag missing")


# -- shell completion ---------------------------------------------------------------------------------------------


def run_toolrag(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([TOOLRAG, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **env})


def test_the_completion_script_and_help() -> None:
    # Without a shell to detect (a CI runner's pytest may have none above it), typer takes the shell as a value.
    script = run_toolrag("--show-completion", "bash", _TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    assert script.returncode == 0, script.stderr
    assert (
        "complete -o default -F _toolrag_completion toolrag" in script.stdout and "_TOOLRAG_COMPLETE" in script.stdout
    )
    shown = run_toolrag("--help")
    assert shown.returncode == 0 and "--install-completion" in shown.stdout and "doctor" in shown.stdout
    completed = run_toolrag(_TOOLRAG_COMPLETE="complete_bash", COMP_WORDS="toolrag mcp st", COMP_CWORD="2")
    assert completed.returncode == 0 and "status" in completed.stdout.split()


def test_the_command_line_starts_without_its_heavy_modules() -> None:
    """`toolrag --help` stays fast: commands import models, the MCP SDK, HTTP clients and pydantic when they run."""
    heavy = ["numpy", "pydantic", "mcp", "httpx", "anyio", "toolrag.registry", "toolrag.embed", "sqlite3", "packaging"]
    probe = f"import sys, toolrag.cli.app; print([m for m in {heavy!r} if m in sys.modules])"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert loaded.stdout.strip() == "[]"


# -- examples/ ----------------------------------------------------------------------------------------------------

EXAMPLE_TOKENS = [
    "TOOLRAG_OPS_TOKEN",
    "TOOLRAG_SUPPORT_TOKEN",
    "TOOLRAG_READER_TOKEN",
    "TOOLRAG_AGENT_TOKEN",
    "CI_BOT_TOKEN",
    "GATEWAY_OPS_TOKEN",
]


@pytest.fixture
def example_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in EXAMPLE_TOKENS:
        monkeypatch.setenv(name, f"{name.lower()}-0123456789abcdef")


def test_the_api_example(example_tokens: None) -> None:
    config = load_api_config(EXAMPLES / "toolrag-api.toml")
    assert config.store == str(EXAMPLES / "toolrag.db") and config.mcp_config == str(EXAMPLES / "toolrag-mcp.toml")
    assert {name: rule.role for name, rule in config.tokens.items()} == {
        "ops": "admin",
        "support-bot": "agent",
        "dashboard": "reader",
    }
    support = config.policy().for_token("toolrag_support_token-0123456789abcdef")
    assert support is not None and support.principal.tenant == "acme"
    assert support.principal.may_name("tickets.create") and not support.principal.may_name("tickets.delete_all")
    assert config.rate_limits.search is not None and config.rate_limits.search.per_minute == 120
    assert config.http.max_requests_per_principal == 128 and config.monitor.requests == "redacted"
    load_config(config.mcp_config)  # the gateway configuration it names is valid too


def test_the_api_example_needs_its_token_variables(monkeypatch: pytest.MonkeyPatch, example_tokens: None) -> None:
    monkeypatch.delenv("TOOLRAG_SUPPORT_TOKEN")
    with pytest.raises(ConfigError, match="TOOLRAG_SUPPORT_TOKEN is not set"):
        load_api_config(EXAMPLES / "toolrag-api.toml")


def test_the_gateway_example(example_tokens: None) -> None:
    config = load_config(EXAMPLES / "toolrag-mcp.toml")
    assert config.store == str(EXAMPLES / "gateway.db") and config.local_principal == "me"
    assert {name: server.transport for name, server in config.servers.items()} == {
        "time": "stdio",
        "everything": "http",
    }
    assert config.servers["everything"].url == "http://127.0.0.1:3001/mcp"
    assert config.approval_policy("everything") == "never" and config.approval_policy("time") == "after-first-sync"
    config.check_http_tokens()  # every HTTP principal finds its token
    bot = config.policy().for_token("ci_bot_token-0123456789abcdef")
    assert bot is not None and bot.role == "agent"
    assert bot.principal.may_name("time.get_current_time") and bot.principal.may_name("everything.echo")
    assert not bot.principal.may_name("everything.get-env")
    assert not config.policy().local().principal.may_name("everything.get-env")


def test_the_gateway_guides_example_forbids_git_reset_to_every_principal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 48: docs/mcp-gateway.md denied git.git_reset under [principals.me] only, while its ci-bot, allowed the
    git server, could reset the repository. A rule covers only the principal it is under: the example's every
    principal that may use git denies it, and neither finds nor calls it."""
    guide = (ROOT / "docs" / "mcp-gateway.md").read_text()
    example = guide.split("```toml\n# toolrag-mcp.toml\n", 1)[1].split("```", 1)[0]
    (tmp_path / "toolrag-mcp.toml").write_text(example)
    monkeypatch.setenv("CI_BOT_TOKEN", "ci-bot-token-0123456789abcdef")
    config = load_config(tmp_path / "toolrag-mcp.toml")
    policy = config.policy()
    bot = policy.for_token("ci-bot-token-0123456789abcdef")
    assert bot is not None and bot.principal.may_name("git.git_status")  # the git server is the bot's ...
    for caller in (policy.local(), bot):
        reset = Tool.parse({"name": "git.git_reset", "description": "Unstage all staged changes."})
        assert not caller.principal.may_name("git.git_reset") and not caller.principal.can_use(reset)


def test_the_postgres_example(example_tokens: None) -> None:
    config = load_api_config(EXAMPLES / "toolrag-postgres.toml")
    assert config.store.startswith("postgresql://toolrag@db.internal:5432/agents?schema=toolrag")
    assert ":" not in config.store.split("//")[1].split("@")[0]  # no password in the file
    assert config.startup.missing_embeddings == "refuse" and config.schedule.consistency == "6h"
    assert config.http.max_connections_per_source == 2000


def test_the_examples_are_linked_from_the_docs() -> None:
    docs = (ROOT / "docs" / "operations.md").read_text() + (ROOT / "docs" / "cli.md").read_text()
    for example in EXAMPLES.glob("*.toml"):
        assert f"examples/{example.name}" in docs, example.name
