"""What one hostile client costs everyone else (issue 14's figures for docs/reliability.md).

    python benchmarks/abuse.py [--tools 1000] [--seconds 15] [--only long-query bodies sessions connections]

Everything runs on loopback against servers started here as separate processes:
- long-query: the MCP gateway over HTTP; five clients send ordinary `find_tools` requests while one client sends
  the longest query allowed (4,000 characters of the hostile shapes that made the old redaction quadratic), then a
  60,000-character one (refused). Reported: the five clients' latency with and without the attacker.
- bodies: the HTTP API; four clients at once send unauthenticated requests that declare a 300 MB body and stream
  it. Reported: the server's resident memory before, at its peak, and after.
- sessions: the gateway; one token opens MCP sessions (the session-based 2025-11-25 protocol) until refused, then
  another token opens one.
- connections: the API; 2,500 connections are opened and send half a request head; counted: how many the server
  keeps open after a second and after the header timeout, and whether an ordinary request succeeds afterwards.
- untrusted (issue 25): two attackers send the hostile arguments of findings 2, 4 and 16 (tests/abuse.py: a
  catastrophic pattern, an argument whose errors were rendered whole, 100,000 values, 50,000 keys) without pause,
  to the API (tools registered with those schemas) and to the gateway (an upstream listing them); another client's
  /health and /search (API) and find_tools (gateway) latency, median of `--probes`, quiet and under attack. Since
  issue 31 they also send the schema-cost attacks (tests/abuse.py COST_ATTACKS: references that multiply, a long
  enum, uniqueItems over objects, a pattern with a large automaton, each at the most registration allows) and, to
  the API, a call of the 2^16 anyOf schema as a store written before registration refused it.
- cost (issue 31, section 1): what registration answers for the review's schemas, and what each cost attack costs
  its sender (in-process gateway: median of 5 calls, ms, and the outcome).
- upstreams (issue 31): hostile upstream MCP servers before the gateway (tests/abuse_upstream.py): two attackers
  call a tool whose result is 120,000 one-character content parts, without pause; then, on a second gateway, a
  server whose tools/list never ends is retried every second. Another principal's find_tools latency, median of
  `--probes`, quiet and under each attack, and what the attacks were answered.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
from load import TOOLRAG, free_port, rss_mb, server
from synthetic import synthetic_requests, synthetic_tools

from toolrag import ToolRegistry

TOKEN, OTHER = "abuse-token-0123456789", "other-token-0123456789"
HOSTILE = ("y" * 1000 + "a@" * 500 + "1 " * 500 + "password " * 111)[:4000]


def prepare(folder: Path, tools: int) -> str:
    store = str(folder / "registry.db")
    with ToolRegistry(store) as registry:
        registry.register_many(synthetic_tools(tools))
    principals = "".join(
        f'\n[principals.{name}]\ntoken = "{token}"\nscopes = ["*"]\n' for name, token in (("a", TOKEN), ("b", OTHER))
    )
    (folder / "gateway.toml").write_text(f'store = "{store}"\n[monitor]\nrequests = "redacted"\n{principals}')
    tokens = "".join(
        f'\n[tokens.{name}]\ntoken = "{token}"\nrole = "agent"\nscopes = ["*"]\n' for name, token in (("a", TOKEN),)
    )
    (folder / "api.toml").write_text(f'store = "{store}"\n[monitor]\nrequests = "redacted"\n{tokens}')
    return store


async def mcp_client(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=300)
    return Client(streamable_http_client(url, http_client=http))


async def long_query(url: str, seconds: float) -> dict[str, Any]:
    requests = synthetic_requests(500)

    async def victims(attack: str | None) -> dict[str, float]:
        latencies: list[float] = []
        stop = time.monotonic() + seconds
        attacker_calls = 0

        async def victim(n: int) -> None:
            async with await mcp_client(url, OTHER) as client:
                i = n
                while time.monotonic() < stop:
                    started = time.perf_counter()
                    await client.call_tool("find_tools", {"query": requests[i % len(requests)]})
                    latencies.append((time.perf_counter() - started) * 1000)
                    i += 5

        async def attacker() -> None:
            nonlocal attacker_calls
            async with await mcp_client(url, TOKEN) as client:
                while time.monotonic() < stop and attack is not None:
                    await client.call_tool("find_tools", {"query": attack})
                    attacker_calls += 1

        await asyncio.gather(attacker(), *(victim(n) for n in range(5)))
        ordered = sorted(latencies)
        return {
            "victim_requests": len(ordered),
            "p50_ms": round(ordered[len(ordered) // 2], 1),
            "p95_ms": round(ordered[int(len(ordered) * 0.95)], 1),
            "max_ms": round(ordered[-1], 1),
            "attacker_requests": attacker_calls,
        }

    async with await mcp_client(url, TOKEN) as client:
        for request in requests[:20]:  # the server's first requests load its model and index: not measured
            await client.call_tool("find_tools", {"query": request})
        refused = await client.call_tool("find_tools", {"query": "y" * 60_000})
    return {
        "no attacker": await victims(None),
        "attacker sends 4,000 hostile characters": await victims(HOSTILE),
        "60,000 characters": "refused: " + refused.content[0].text,  # type: ignore[union-attr]
    }


def bodies(url: str, pid: int) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    before = rss_mb(pid)
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_mb(pid))
            time.sleep(0.05)

    def send() -> str:
        with socket.create_connection((host, int(port)), timeout=30) as connection:
            connection.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Length: 300000000\r\n\r\n")
            chunk = b"x" * 65536
            sent = 0
            try:
                while sent < 300_000_000:
                    connection.sendall(chunk)
                    sent += len(chunk)
            except OSError:
                pass
            try:
                return connection.recv(100).split(b"\r\n")[0].decode() + f" after {sent / 2**20:.1f} MB sent"
            except OSError as exc:
                return f"{type(exc).__name__} after {sent / 2**20:.1f} MB sent"

    sampler = threading.Thread(target=sample)
    sampler.start()
    threads: list[threading.Thread] = []
    answers: list[str] = []
    for _ in range(4):
        thread = threading.Thread(target=lambda: answers.append(send()))
        thread.start()
        threads.append(thread)
    for thread in threads:
        thread.join()
    time.sleep(2)
    done.set()
    sampler.join()
    return {
        "rss_before_mb": round(before, 1),
        "rss_peak_mb": round(peak, 1),
        "rss_after_mb": round(rss_mb(pid), 1),
        "answers": answers,
    }


def sessions(url: str) -> dict[str, Any]:
    def initialize(token: str) -> int:
        request = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "x", "version": "1"},
            },
        }
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        return httpx.post(url, json=request, headers=headers, timeout=30).status_code

    opened = 0
    while initialize(TOKEN) == 200 and opened < 20_000:
        opened += 1
    return {"sessions one token opened before refusal": opened, "another token's initialize": initialize(OTHER)}


def connections(url: str) -> dict[str, Any]:
    host, port = url.removeprefix("http://").split(":")
    held = []
    for _ in range(2500):
        try:
            connection = socket.create_connection((host, int(port)), timeout=5)
            connection.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
            held.append(connection)
        except OSError:
            break

    def still_open() -> int:
        count = 0
        for connection in held:
            connection.setblocking(False)
            try:
                count += connection.recv(1) != b""
            except BlockingIOError:
                count += 1
            except OSError:
                pass
        return count

    time.sleep(1)
    after_a_second = still_open()
    time.sleep(11)
    after_timeout = still_open()
    status = httpx.get(f"{url}/health", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).status_code
    for connection in held:
        connection.close()
    return {
        "opened": len(held),
        "kept open after 1 s": after_a_second,
        "kept open after 12 s": after_timeout,
        "ordinary request afterwards": status,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tools", type=int, default=1000)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument(
        "--only",
        nargs="+",
        default=["long-query", "bodies", "sessions", "connections"],
        choices=["long-query", "bodies", "sessions", "connections", "untrusted", "cost", "upstreams"],
    )
    parser.add_argument("--probes", type=int, default=60, help="requests of the other client per phase (untrusted)")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="toolrag-abuse-"))
    prepare(folder, args.tools)
    results: dict[str, Any] = {}
    gateway_port, api_port = free_port(), free_port()
    gateway = [*TOOLRAG, "mcp", "serve", "-c", str(folder / "gateway.toml"), "--transport", "http"]
    mcp_url = f"http://127.0.0.1:{gateway_port}/mcp"
    if {"long-query", "sessions"} & set(args.only):
        with server([*gateway, "--port", str(gateway_port)], mcp_url):
            if "long-query" in args.only:
                results["long-query"] = asyncio.run(long_query(mcp_url, args.seconds))
            if "sessions" in args.only:
                results["sessions"] = sessions(mcp_url)
    api_url = f"http://127.0.0.1:{api_port}"
    api = [*TOOLRAG, "api", "serve", "-c", str(folder / "api.toml"), "--port", str(api_port)]
    if {"bodies", "connections"} & set(args.only):
        with server(api, f"{api_url}/health") as pid:
            httpx.post(f"{api_url}/search", json={"query": "warm up"}, headers={"Authorization": f"Bearer {TOKEN}"})
            if "bodies" in args.only:
                results["bodies"] = bodies(api_url, pid)
            if "connections" in args.only:
                results["connections"] = connections(api_url)
    if "untrusted" in args.only:
        results["untrusted"] = untrusted(folder, args.probes)
    if "cost" in args.only:
        results["cost"] = cost()
    if "upstreams" in args.only:
        results["upstreams"] = upstreams(folder, args.probes)
    json.dump(results, sys.stdout, indent=2)
    print()


def untrusted(folder: Path, probes: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.abuse import measure_api, measure_gateway

    figures = {}
    for name, measure in (("API", measure_api), ("gateway", measure_gateway)):
        where = folder / name
        where.mkdir()
        measured = measure(where, probes)
        ratios = {
            probe: round(measured["attacked_ms"][probe] / quiet, 2) for probe, quiet in measured["quiet_ms"].items()
        }
        figures[name] = {**measured, "ratio": ratios}
    return figures


def cost() -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.abuse import COST_ATTACKS, STORED_ATTACKS
    from tests.mcp_fixture_server import COST_TOOLS, anyof_chain

    from toolrag import Tool
    from toolrag.errors import InvalidToolError
    from toolrag.model import Principal
    from toolrag.runtime.gateway import ToolGateway
    from toolrag.runtime.messages import ToolCall

    def of(properties: dict[str, Any]) -> dict[str, Any]:
        return {"type": "object", "properties": properties}

    review = {
        "anyOf references, depth 15": anyof_chain(15),
        "anyOf references, depth 16": anyof_chain(16),
        "enum of 20,000 values": of({"x": {"enum": [f"v{i}" for i in range(20_000)]}}),
        "pattern (?:(?:a|b|ab|ba){1,100}){1,10}c": of(
            {"c": {"type": "string", "pattern": "(?:(?:a|b|ab|ba){1,100}){1,10}c"}}
        ),
    }
    registration = {}
    for name, schema in review.items():
        started = time.perf_counter()
        try:
            Tool.parse({"name": "t.x", "description": "x", "input_schema": schema})
            answer = "accepted"
        except InvalidToolError as exc:
            answer = str(exc)
        registration[name] = {"answer": answer, "ms": round((time.perf_counter() - started) * 1000, 1)}
    tools = [Tool.parse({"name": n, "description": d, "input_schema": s}) for n, d, s in COST_TOOLS]
    tools.append(tools[0].model_copy(update={"name": "refs16", "input_schema": anyof_chain(16)}))
    gateway = ToolGateway(tools, [], Principal(user="attacker"), lambda name: lambda **arguments: "ran")
    calls = {}
    for name, (tool, arguments) in {**COST_ATTACKS, **STORED_ATTACKS}.items():
        raw, timings, outcome = json.dumps(arguments), [], ""
        for _ in range(5):
            started = time.perf_counter()
            outcome = asyncio.run(gateway.call(ToolCall("c1", tool, raw), set())).outcome
            timings.append((time.perf_counter() - started) * 1000)
        calls[name] = {"outcome": outcome, "median_ms": round(sorted(timings)[2], 1)}
    return {"registration": registration, "calls": calls}


def upstreams(folder: Path, probes: int) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.abuse_upstream import measure_upstreams

    where = folder / "upstreams"
    where.mkdir()
    measured = measure_upstreams(where, probes)
    quiet = measured["quiet_ms"]["find_tools"]
    ratios = {attack: round(latency / quiet, 2) for attack, latency in measured["attacked_ms"].items()}
    return {**measured, "ratio": ratios}


if __name__ == "__main__":
    main()
