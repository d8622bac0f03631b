"""What the MCP gateway adds to a tool call: `call_tool` through toolrag against calling the upstream directly.

    python benchmarks/mcp_overhead.py [--calls 300]

Upstream: @modelcontextprotocol/server-everything (its `echo` tool), over stdio and over streamable HTTP (installed
by `.ci/run` under .mcp-servers/). Direct and gateway calls alternate one by one in the same run, so both see the
same machine load. The gateway runs as `toolrag mcp serve` in its own process, with the default embedder and a
SQLite registry. Also reported: `find_tools` latency (request embedding included).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parents[1]
EVERYTHING = ROOT / ".mcp-servers" / "node_modules" / ".bin" / "mcp-server-everything"
TOOLRAG = str(Path(sys.executable).parent / "toolrag")
TOKEN = "bench-token-0123456789"  # the gateway refuses tokens shorter than 16 characters


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(url, timeout=1)
            return
        except httpx.HTTPError:
            time.sleep(0.2)
    raise SystemExit(f"{url} did not answer")


def write_config(folder: Path, upstream: dict[str, Any]) -> Path:
    server = "\n".join(f"{key} = {json.dumps(value)}" for key, value in upstream.items())
    text = (
        'store = "gateway.db"\nlocal_principal = "me"\n\n[servers.everything]\n'
        f'{server}\n\n[principals.me]\nscopes = ["*"]\ntoken = "{TOKEN}"\n'
    )
    path = folder / "toolrag-mcp.toml"
    path.write_text(text)
    return path


@asynccontextmanager
async def http(url: str, token: str | None = None) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with Client(streamable_http_client(url, http_client=httpx2.AsyncClient(headers=headers))) as client:
        yield client


async def timed(action: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    result = await action()
    if getattr(result, "is_error", False):
        raise SystemExit(f"call failed: {result}")
    return (time.perf_counter() - started) * 1000


def summary(millis: list[float]) -> dict[str, float]:
    ordered = sorted(millis)
    return {"p50_ms": round(statistics.median(ordered), 3), "p95_ms": round(ordered[int(len(ordered) * 0.95)], 3)}


async def side_by_side(direct: Client, gateway: Client, calls: int) -> dict[str, Any]:
    arguments = {"message": "hello"}
    direct_ms, gateway_ms, find_ms = [], [], []
    for _ in range(20):  # warm both paths
        await direct.call_tool("echo", arguments)
        await gateway.call_tool("call_tool", {"name": "everything.echo", "arguments": arguments})
    for _ in range(calls):
        direct_ms.append(await timed(lambda: direct.call_tool("echo", arguments)))
        gateway_ms.append(
            await timed(lambda: gateway.call_tool("call_tool", {"name": "everything.echo", "arguments": arguments}))
        )
    topics = ["echo a message back", "add two numbers", "return a tiny image", "compress a file"]
    for number in range(100):  # distinct requests: the query cache never answers
        query = f"{topics[number % len(topics)]} (request {number})"
        find_ms.append(await timed(lambda q=query: gateway.call_tool("find_tools", {"query": q})))  # type: ignore[misc]
    row = {"direct": summary(direct_ms), "gateway": summary(gateway_ms), "find_tools": summary(find_ms)}
    row["overhead_p50_ms"] = round(row["gateway"]["p50_ms"] - row["direct"]["p50_ms"], 3)
    return row


async def main(calls: int) -> None:
    if not EVERYTHING.exists():
        raise SystemExit("run `.ci/run` (or npm install --prefix .mcp-servers @modelcontextprotocol/server-everything)")
    rows: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="toolrag-mcp-bench-") as folder:
        config = write_config(Path(folder), {"command": str(EVERYTHING), "args": ["stdio"]})
        async with AsyncExitStack() as stack:
            direct = await stack.enter_async_context(
                Client(StdioServerParameters(command=str(EVERYTHING), args=["stdio"]))
            )
            params = StdioServerParameters(command=TOOLRAG, args=["mcp", "serve", "--config", str(config)])
            gateway = await stack.enter_async_context(Client(params))
            rows["stdio"] = await side_by_side(direct, gateway, calls)
        print(json.dumps({"stdio": rows["stdio"]}), flush=True)

        upstream_port, gateway_port = free_port(), free_port()
        env = {**os.environ, "PORT": str(upstream_port)}
        upstream_url = f"http://127.0.0.1:{upstream_port}/mcp"
        gateway_url = f"http://127.0.0.1:{gateway_port}/mcp"
        upstream = subprocess.Popen([str(EVERYTHING), "streamableHttp"], env=env, stderr=subprocess.DEVNULL)
        config = write_config(Path(folder), {"url": upstream_url})
        serve = [TOOLRAG, "mcp", "serve", "-c", str(config), "--transport", "http", "--port", str(gateway_port)]
        served = subprocess.Popen(serve, stderr=subprocess.DEVNULL)
        try:
            wait_for(upstream_url)
            wait_for(gateway_url)
            async with http(upstream_url) as direct, http(gateway_url, TOKEN) as gateway:
                rows["http"] = await side_by_side(direct, gateway, calls)
        finally:
            served.kill()
            upstream.kill()
        print(json.dumps({"http": rows["http"]}), flush=True)
    print(markdown(rows))


def markdown(rows: dict[str, Any]) -> str:
    lines = [
        "| transport | direct p50 ms | direct p95 ms | via gateway p50 ms | via gateway p95 ms | overhead p50 ms "
        "| find_tools p50 ms | find_tools p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for transport, row in rows.items():
        lines.append(
            f"| {transport} | {row['direct']['p50_ms']} | {row['direct']['p95_ms']} | {row['gateway']['p50_ms']} "
            f"| {row['gateway']['p95_ms']} | {row['overhead_p50_ms']} | {row['find_tools']['p50_ms']} "
            f"| {row['find_tools']['p95_ms']} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    anyio.run(main, parser.parse_args().calls)
