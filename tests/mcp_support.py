"""Real upstream MCP servers for the gateway tests, and a gateway started as a separate process."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import httpx2
import psutil
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
NODE_SERVERS = ROOT / ".mcp-servers"
NPM_PACKAGES = ["@modelcontextprotocol/server-everything@2026.8.31", "@modelcontextprotocol/server-memory@2026.8.31"]
TOOLRAG = str(Path(sys.executable).parent / "toolrag")


def node_bin() -> Path:
    """Where the npm servers are; installs them (pinned) the first time, as `.ci/run` does."""
    folder = NODE_SERVERS / "node_modules" / ".bin"
    complete = (NODE_SERVERS / "node_modules" / "@modelcontextprotocol" / "sdk" / "dist").exists()
    if not (folder / "mcp-server-memory").exists() or not complete:
        npm = shutil.which("npm")
        assert npm, "the MCP gateway tests need Node.js and npm (apt-get install nodejs npm)"
        command = [npm, "install", "--prefix", str(NODE_SERVERS), "--no-audit", "--no-fund", *NPM_PACKAGES]
        subprocess.run(command, check=True, capture_output=True)
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def write_config(folder: Path, servers: dict[str, dict[str, Any]], principals: dict[str, Any], **top: Any) -> Path:
    lines = [f"{key} = {toml_value(value)}" for key, value in {"store": "gateway.db", **top}.items()]
    # Scheduled jobs have their own tests (test_production.py); here they would only compete for the CPU.
    lines.append('\n[schedule]\nconsistency = "off"\nreport = "off"')
    for section, entries in (("servers", servers), ("principals", principals)):
        for name, fields in entries.items():
            lines.append(f"\n[{section}.{name}]")
            lines.extend(f"{key} = {toml_value(value)}" for key, value in fields.items())
    path = folder / "toolrag-mcp.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def python_server(module: str, *args: str, **env: str) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", module, *args], "env": env, "cwd": str(ROOT)}


@asynccontextmanager
async def stdio_gateway(config: Path, mode: str = "auto") -> AsyncIterator[Client]:
    """The SDK's client on `toolrag mcp serve` over stdio; `mode`: auto speaks 2026-07-28, legacy 2025-11-25."""
    # The SDK starts servers with a minimal environment: PYTHONPATH kept, the gateway runs the code under test.
    kept = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else None
    params = StdioServerParameters(command=TOOLRAG, args=["mcp", "serve", "--config", str(config)], env=kept)
    async with Client(params, mode=mode) as client:
        yield client


@contextmanager
def http_gateway(config: Path, port: int | None = None) -> Iterator[str]:
    """`toolrag mcp serve --transport http` in its own process; yields its URL once it answers."""
    port = port or free_port()
    command = [TOOLRAG, "mcp", "serve", "--config", str(config), "--transport", "http", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        wait_until_listening(url, process)
        yield url
    finally:
        stop_tree(process.pid)


def wait_until_listening(url: str, process: subprocess.Popen[bytes] | None = None, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"server exited: {process.stderr.read().decode() if process.stderr else ''}")
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout} s")


@asynccontextmanager
async def http_client(
    url: str, token: str | None, timeout: float = 30, mode: str = "auto", headers: dict[str, str] | None = None
) -> AsyncIterator[Client]:
    sent = ({"Authorization": f"Bearer {token}"} if token else {}) | (headers or {})
    transport = streamable_http_client(url, http_client=httpx2.AsyncClient(headers=sent, timeout=timeout))
    async with Client(transport, mode=mode) as client:
        yield client


def stop_tree(pid: int) -> None:
    """Stop a process and everything it started (stdio upstreams can outlive their client otherwise)."""
    try:
        parent = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    family = [*parent.children(recursive=True), parent]
    for process in family:
        with suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(family, timeout=10)


def children_running(marker: str) -> list[psutil.Process]:
    """Processes of this test run whose command line contains `marker`."""
    found = []
    for process in psutil.process_iter(["cmdline", "ppid"]):
        try:
            if any(marker in part for part in process.info["cmdline"] or []):
                found.append(process)
        except psutil.Error:
            continue
    return found


def git_repository(folder: Path) -> Path:
    folder.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t"}
    env["GIT_COMMITTER_EMAIL"] = "t@x"
    (folder / "README.md").write_text("hello\n")
    for command in (["git", "init", "-q"], ["git", "add", "."], ["git", "commit", "-qm", "first"]):
        subprocess.run(command, cwd=folder, check=True, env=env)
    return folder
